/* The host module's driver: builds the module of a plan through a target
 * (the CPU's own kernels, or the host side of a CUDA build), verifies it,
 * optimises it with the new pass manager and emits object code or text for
 * the host CPU or a named one. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "cpu.h"
#include "errbuf.h"

#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

struct CpuModule {
  LLVMContextRef context;
  LLVMModuleRef module;
  LLVMTargetMachineRef machine;
};

LLVMModuleRef cpu_module_llvm(CpuModule *module, LLVMContextRef *context) {
  *context = module->context;
  return module->module;
}

bool cpu_initialize(void) {
  return !LLVMInitializeNativeTarget() && !LLVMInitializeNativeAsmPrinter();
}

static LLVMTargetMachineRef create_machine(const char *cpu, const char *named_features,
                                           char *err, size_t size) {
  if (!cpu_initialize()) {
    errbuf_set(err, size, "LLVM has no native target");
    return NULL;
  }
  char *triple = LLVMGetDefaultTargetTriple();
  LLVMTargetRef target;
  char *message = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &message)) {
    LLVMDisposeMessage(triple);
    gen_fail_llvm(err, size, "target", message);
    return NULL;
  }
  bool native = !cpu || strcmp(cpu, "native") == 0;
  char *host_cpu = native ? LLVMGetHostCPUName() : NULL;
  char *features = native ? LLVMGetHostCPUFeatures() : NULL;
  LLVMTargetMachineRef machine =
      LLVMCreateTargetMachine(target, triple, native ? host_cpu : cpu,
                              native ? features : named_features ? named_features : "",
                              LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMDisposeMessage(triple);
  LLVMDisposeMessage(host_cpu);
  LLVMDisposeMessage(features);
  if (!machine)
    errbuf_set(err, size, "cannot create a target machine for cpu '%s'", cpu);
  return machine;
}

/* Whether the target has AVX-512: the host's features for "native"; for a
 * named CPU LLVM's C API cannot say, so a list of LLVM 14's AVX-512 CPUs. */
static int vector_bits(const char *cpu) {
  if (!cpu || strcmp(cpu, "native") == 0) {
    char *features = LLVMGetHostCPUFeatures();
    bool avx512 = features && strstr(features, "+avx512f");
    LLVMDisposeMessage(features);
    return avx512 ? 512 : 256;
  }
  static const char *const avx512_cpus[] = {
      "x86-64-v4",      "knl",           "knm",       "skylake-avx512", "skx",
      "cascadelake",    "cooperlake",    "cannonlake", "icelake-client", "icelake-server",
      "rocketlake",     "tigerlake",     "sapphirerapids", "znver4"};
  for (size_t i = 0; i < sizeof avx512_cpus / sizeof *avx512_cpus; i++)
    if (strcmp(cpu, avx512_cpus[i]) == 0)
      return 512;
  return 256;
}

/* LLVM tunes AVX-512 CPUs (Skylake-X to Sapphire Rapids, x86-64-v4) to
 * vectorize with 256-bit vectors, for the clock cost of 512-bit ones on
 * early parts; our GEMMs and attention run zmm regardless, so the loop
 * kernels the vectorizer writes get the full width too. Measured on Sapphire
 * Rapids (gpt.tfm training step, bench/RESULTS.md): the loop kernels 27%
 * faster in bf16 (their rounding is integer work: twice the lanes an
 * instruction), 8% in f32. */
static void prefer_full_vectors(LLVMModuleRef module, int bits) {
  if (bits < 512)
    return;
  static const char key[] = "prefer-vector-width", value[] = "512";
  LLVMContextRef context = LLVMGetModuleContext(module);
  for (LLVMValueRef fn = LLVMGetFirstFunction(module); fn; fn = LLVMGetNextFunction(fn))
    if (LLVMCountBasicBlocks(fn) > 0)
      LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                              LLVMCreateStringAttribute(context, key, sizeof key - 1, value,
                                                        sizeof value - 1));
}

/* Whether the target converts f32 to bf16 in one instruction
 * (AVX512-BF16): the host's features for "native", the named features (the
 * dispatching build's amx variant), or one of LLVM 14's CPUs that have it. */
static bool has_bf16_convert(const char *cpu, const char *named_features) {
  if (!cpu || strcmp(cpu, "native") == 0) {
    char *features = LLVMGetHostCPUFeatures();
    bool has = features && strstr(features, "+avx512bf16");
    LLVMDisposeMessage(features);
    return has;
  }
  return (named_features && strstr(named_features, "+avx512bf16")) ||
         strcmp(cpu, "cooperlake") == 0 || strcmp(cpu, "sapphirerapids") == 0;
}

CpuModule *cpu_compile(const KernelPlan *plan, const CpuOptions *options, char *err,
                       size_t err_size) {
  CpuModule *m = calloc(1, sizeof *m);
  if (!m) {
    errbuf_set(err, err_size, "out of memory");
    return NULL;
  }
  if (!(m->machine = create_machine(options ? options->cpu : NULL,
                                    options ? options->features : NULL, err, err_size))) {
    free(m);
    return NULL;
  }
  const char *prefix = options && options->prefix ? options->prefix : "tfm_model";
  m->context = LLVMContextCreate();
  m->module = LLVMModuleCreateWithNameInContext(prefix, m->context);
  char *triple = LLVMGetTargetMachineTriple(m->machine);
  LLVMSetTarget(m->module, triple);
  LLVMDisposeMessage(triple);
  LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(m->machine);
  LLVMSetModuleDataLayout(m->module, layout);
  LLVMDisposeTargetData(layout);

  Gen gen = {.context = m->context,
             .module = m->module,
             .plan = plan,
             .graph = plan->graph,
             .prefix = prefix,
             .target = options && options->target ? options->target : &cpu_target,
             .vector_bits = vector_bits(options ? options->cpu : NULL)};
  gen.builder = LLVMCreateBuilderInContext(m->context);
  gen_init_types(&gen);
  /* The CPU's own kernels only: a module of the GPU's kernels run on the
   * CPU (ptx/serial.c) rounds as the GPU does. */
  if (gen.target == &cpu_target &&
      has_bf16_convert(options ? options->cpu : NULL, options ? options->features : NULL))
    cpu_bf16_convert_begin(&gen);
  bool ok = gen_emit_module(&gen);
  LLVMDisposeBuilder(gen.builder);
  gen_free_tables(&gen);
  if (!ok)
    errbuf_set(err, err_size, "code generation: out of memory");
  else
    prefer_full_vectors(m->module, gen.vector_bits);
  ok = ok && gen_verify(m->module, err, err_size) &&
       gen_optimize(m->module, m->machine, err, err_size) &&
       cpu_bf16_convert_inline(m->module, m->machine, err, err_size);
  if (!ok) {
    cpu_module_free(m);
    return NULL;
  }
  return m;
}

void cpu_module_free(CpuModule *m) {
  if (!m)
    return;
  if (m->module)
    LLVMDisposeModule(m->module);
  if (m->context)
    LLVMContextDispose(m->context);
  if (m->machine)
    LLVMDisposeTargetMachine(m->machine);
  free(m);
}

bool cpu_emit_object(CpuModule *m, const char *path, char *err, size_t err_size) {
  char *message = NULL;
  char *file = strdup(path); /* the C API takes a non-const name */
  if (!file)
    return errbuf_set(err, err_size, "out of memory");
  bool failed = LLVMTargetMachineEmitToFile(m->machine, m->module, file, LLVMObjectFile, &message);
  free(file);
  if (failed)
    return gen_fail_llvm(err, err_size, path, message);
  return true;
}

char *cpu_llvm_text(CpuModule *m) {
  char *text = LLVMPrintModuleToString(m->module);
  char *copy = strdup(text);
  LLVMDisposeMessage(text);
  return copy;
}

char *cpu_assembly_text(CpuModule *m, char *err, size_t err_size) {
  return gen_machine_text(m->machine, m->module, "assembly", err, err_size);
}
