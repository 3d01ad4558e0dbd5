/* --cpu generic-dispatch: one binary for every x86-64 CPU from Haswell on.
 * Each graph is compiled once per variant below (the plan is shared, so
 * every variant has the same buffers and kernel numbers); the baseline
 * variant's module then gets entry points PREFIX_run and PREFIX_update
 * that call the variant runtime/cpu_kernels.c chose at start-up. A whole
 * graph per variant, rather than a few kernels with several versions, so
 * that every loop (not just the GEMM) gets the wider vectors, and so that
 * the choice costs one call per graph run. */
#include <stdio.h>
#include <string.h>

#include "cpu_internal.h"
#include "errbuf.h"

/* In runtime/tfmrt.h's order (TFM_CPU_AVX2, TFM_CPU_AVX512, TFM_CPU_AMX). */
const CpuVariant cpu_variants[CPU_VARIANTS] = {
    {"avx2", "x86-64-v3", ""},
    {"avx512", "x86-64-v4", ""},
    {"amx", "x86-64-v4", "+avx512bf16,+amx-tile,+amx-bf16"},
};

const char *cpu_variant_prefix(const char *prefix, int variant, char *buf, size_t size) {
  snprintf(buf, size, "%s__%s", prefix, cpu_variants[variant].name);
  return buf;
}

/* Renames PREFIX_entry to the baseline variant's name and defines
 * PREFIX_entry as a switch on tfm_cpu_variant() over the variants'. */
static bool add_dispatcher(LLVMModuleRef mod, const char *prefix, const char *entry, char *err,
                           size_t err_size) {
  LLVMContextRef ctx = LLVMGetModuleContext(mod);
  char name[256], variant_name[256], variant_prefix[240];
  snprintf(name, sizeof name, "%s_%s", prefix, entry);
  LLVMValueRef baseline = LLVMGetNamedFunction(mod, name);
  if (!baseline) return errbuf_set(err, err_size, "dispatch: the module has no %s", name);
  LLVMTypeRef type = LLVMGlobalGetValueType(baseline);
  snprintf(variant_name, sizeof variant_name, "%s_%s",
           cpu_variant_prefix(prefix, 0, variant_prefix, sizeof variant_prefix), entry);
  LLVMSetValueName2(baseline, variant_name, strlen(variant_name));

  LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx);
  LLVMTypeRef chooser_type = LLVMFunctionType(i32, NULL, 0, false);
  LLVMValueRef chooser = LLVMGetNamedFunction(mod, "tfm_cpu_variant");
  if (!chooser) chooser = LLVMAddFunction(mod, "tfm_cpu_variant", chooser_type);

  LLVMValueRef fn = LLVMAddFunction(mod, name, type);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMBasicBlockRef start = LLVMAppendBasicBlockInContext(ctx, fn, "entry");
  LLVMBasicBlockRef blocks[CPU_VARIANTS];
  for (int v = 0; v < CPU_VARIANTS; v++)
    blocks[v] = LLVMAppendBasicBlockInContext(ctx, fn, cpu_variants[v].name);
  LLVMPositionBuilderAtEnd(b, start);
  LLVMValueRef chosen = LLVMBuildCall2(b, chooser_type, chooser, NULL, 0, "variant");
  /* The baseline is the default: every machine that runs the binary runs it. */
  LLVMValueRef sw = LLVMBuildSwitch(b, chosen, blocks[0], CPU_VARIANTS - 1);
  for (int v = 1; v < CPU_VARIANTS; v++)
    LLVMAddCase(sw, LLVMConstInt(i32, (unsigned long long)v, false), blocks[v]);
  unsigned num_params = LLVMCountParams(fn);
  LLVMValueRef args[4];
  for (unsigned i = 0; i < num_params && i < 4; i++) args[i] = LLVMGetParam(fn, i);
  for (int v = 0; v < CPU_VARIANTS; v++) {
    LLVMPositionBuilderAtEnd(b, blocks[v]);
    LLVMValueRef target = baseline;
    if (v > 0) {
      snprintf(variant_name, sizeof variant_name, "%s_%s",
               cpu_variant_prefix(prefix, v, variant_prefix, sizeof variant_prefix), entry);
      target = LLVMAddFunction(mod, variant_name, type); /* in the variant's object */
    }
    LLVMBuildCall2(b, type, target, args, num_params, "");
    LLVMBuildRetVoid(b);
  }
  LLVMDisposeBuilder(b);
  return true;
}

bool cpu_add_dispatch(CpuModule *baseline, const char *prefix, char *err, size_t err_size) {
  LLVMContextRef ctx;
  LLVMModuleRef mod = cpu_module_llvm(baseline, &ctx);
  return add_dispatcher(mod, prefix, "run", err, err_size) &&
         add_dispatcher(mod, prefix, "update", err, err_size);
}
