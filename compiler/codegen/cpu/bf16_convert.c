/* Rounding f32 to bf16 in one instruction where the CPU has AVX512-BF16
 * (vcvtneps2bf16), inside the loops LLVM's vectorizer writes.
 *
 * Kernels are scalar IR that the loop vectorizer widens, and it cannot
 * widen a vector intrinsic. So on such a CPU gen_bf16_round and
 * gen_bf16_narrow (llvm/builder.c) call two small scalar functions,
 * tfm_bf16_round (an f32 to the f32 of its bf16 value) and tfm_bf16_narrow
 * (an f32 to its bf16 bits), whose "vector-function-abi-variant" attribute
 * names versions of 4, 8 and 16 lanes on vcvtneps2bf16, which the
 * vectorizer calls instead. All stay calls (noinline) through the
 * optimisation, since the inliner runs before the vectorizer and would hand
 * it the body, and are inlined after it (cpu_bf16_convert_inline). A
 * rounding is then three instructions (convert, widen, shift) instead of
 * eight (the rounding bias, masks, the NaN's fix-up), which were half the
 * instructions of a bf16 GELU's kernels.
 *
 * The instruction rounds to nearest even and keeps a NaN a quiet NaN, as
 * the integer sequence does, but reads an f32 below 2^-126 (subnormal) as
 * zero: on these CPUs such a value rounds to a signed zero, as in the
 * bf16 GEMMs' vcvtne2ps2bf16. The scalar versions use the instruction too,
 * so a loop's remainder rounds as its vector body does. */
#include <llvm-c/Transforms/PassBuilder.h>
#include <stdio.h>
#include <string.h>

#include "cpu_internal.h"

static const int lane_counts[] = {4, 8, 16};
enum { NUM_WIDTHS = 3 };

/* vcvtneps2bf16 of x, <lanes x float>: its bf16 bits, <lanes x i16>. */
static LLVMValueRef convert(Gen *gen, LLVMValueRef x, int lanes) {
  if (lanes == 16)
    return gen_intrinsic(gen, "llvm.x86.avx512bf16.cvtneps2bf16.512", NULL, 0, &x, 1);
  if (lanes == 8)
    return gen_intrinsic(gen, "llvm.x86.avx512bf16.cvtneps2bf16.256", NULL, 0, &x, 1);
  /* 128 bits: eight i16 out, the upper four zero, under a mask of all four. */
  LLVMValueRef args[3] = {x, LLVMConstNull(LLVMVectorType(gen->i16, 8)),
                          LLVMConstAllOnes(LLVMVectorType(gen->i1, 4))};
  LLVMValueRef eight = gen_intrinsic(gen, "llvm.x86.avx512bf16.mask.cvtneps2bf16.128", NULL, 0, args, 3);
  LLVMValueRef low[4];
  for (int i = 0; i < 4; i++)
    low[i] = gen_i32(gen, i);
  return LLVMBuildShuffleVector(gen->builder, eight, LLVMGetUndef(LLVMTypeOf(eight)),
                                LLVMConstVector(low, 4), "");
}

/* bf16 bits, <lanes x i16>, as the f32 values they are (exact). */
static LLVMValueRef widen(Gen *gen, LLVMValueRef bits, int lanes) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef sixteen[16];
  for (int i = 0; i < lanes; i++)
    sixteen[i] = gen_i32(gen, 16);
  LLVMValueRef wide = LLVMBuildZExt(b, bits, LLVMVectorType(gen->i32, (unsigned)lanes), "");
  LLVMValueRef shifted = LLVMBuildShl(b, wide, LLVMConstVector(sixteen, (unsigned)lanes), "");
  return LLVMBuildBitCast(b, shifted, LLVMVectorType(gen->f32, (unsigned)lanes), "");
}

/* A new internal function `name` of one argument, kept out of line
 * (noinline) until cpu_bf16_convert_inline, with the builder at its entry. */
static LLVMValueRef begin_function(Gen *gen, const char *name, LLVMTypeRef result, LLVMTypeRef arg) {
  LLVMValueRef fn = LLVMAddFunction(gen->module, name, LLVMFunctionType(result, &arg, 1, false));
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  static const char *const attributes[] = {"noinline", "nounwind", "readnone", "willreturn"};
  gen_add_attributes(gen, fn, attributes, 4);
  LLVMPositionBuilderAtEnd(gen->builder, LLVMAppendBasicBlockInContext(gen->context, fn, "entry"));
  return fn;
}

/* tfm_bf16_round or (narrow) tfm_bf16_narrow, with its vector versions,
 * which are appended to used[]. */
static LLVMValueRef define_conversion(Gen *gen, bool narrow, LLVMValueRef *used) {
  const char *name = narrow ? "tfm_bf16_narrow" : "tfm_bf16_round";
  char variants[512] = "", vector_name[64];
  for (int w = 0; w < NUM_WIDTHS; w++) {
    int lanes = lane_counts[w];
    snprintf(vector_name, sizeof vector_name, "%s_v%d", name, lanes);
    LLVMTypeRef in = LLVMVectorType(gen->f32, (unsigned)lanes);
    LLVMTypeRef out = LLVMVectorType(narrow ? gen->i16 : gen->f32, (unsigned)lanes);
    LLVMValueRef fn = begin_function(gen, vector_name, out, in);
    LLVMValueRef bits = convert(gen, LLVMGetParam(fn, 0), lanes);
    LLVMBuildRet(gen->builder, narrow ? bits : widen(gen, bits, lanes));
    used[w] = fn;
    size_t at = strlen(variants);
    snprintf(variants + at, sizeof variants - at, "%s_ZGV_LLVM_N%dv_%s(%s)", at ? "," : "", lanes,
             name, vector_name);
  }
  LLVMValueRef fn = begin_function(gen, name, narrow ? gen->i16 : gen->f32, gen->f32);
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef four = LLVMBuildInsertElement(b, LLVMGetUndef(LLVMVectorType(gen->f32, 4)),
                                             LLVMGetParam(fn, 0), gen_i32(gen, 0), "");
  LLVMValueRef bits = convert(gen, four, 4);
  LLVMValueRef result = narrow ? bits : widen(gen, bits, 4);
  LLVMBuildRet(b, LLVMBuildExtractElement(b, result, gen_i32(gen, 0), ""));
  static const char key[] = "vector-function-abi-variant";
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(gen->context, key, sizeof key - 1, variants,
                                                    (unsigned)strlen(variants)));
  return fn;
}

void cpu_bf16_convert_begin(Gen *gen) {
  LLVMValueRef used[2 * NUM_WIDTHS];
  gen->bf16_round_fn = define_conversion(gen, false, used);
  gen->bf16_narrow_fn = define_conversion(gen, true, used + NUM_WIDTHS);
  /* The vector versions have no caller until the vectorizer's: listed in
   * llvm.compiler.used, the optimisation keeps them until then. */
  LLVMValueRef pointers[2 * NUM_WIDTHS];
  for (int i = 0; i < 2 * NUM_WIDTHS; i++)
    pointers[i] = LLVMConstBitCast(used[i], gen->ptr);
  LLVMTypeRef list_type = LLVMArrayType(gen->ptr, 2 * NUM_WIDTHS);
  LLVMValueRef list = LLVMAddGlobal(gen->module, list_type, "llvm.compiler.used");
  LLVMSetLinkage(list, LLVMAppendingLinkage);
  LLVMSetSection(list, "llvm.metadata");
  LLVMSetInitializer(list, LLVMConstArray(gen->ptr, pointers, 2 * NUM_WIDTHS));
}

bool cpu_bf16_convert_inline(LLVMModuleRef module, LLVMTargetMachineRef machine, char *err,
                             size_t err_size) {
  if (!LLVMGetNamedFunction(module, "tfm_bf16_round"))
    return true;
  LLVMValueRef list = LLVMGetNamedGlobal(module, "llvm.compiler.used");
  if (list)
    LLVMDeleteGlobal(list);
  LLVMContextRef context = LLVMGetModuleContext(module);
  unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
  unsigned always = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
  for (LLVMValueRef fn = LLVMGetFirstFunction(module); fn; fn = LLVMGetNextFunction(fn)) {
    size_t length;
    const char *name = LLVMGetValueName2(fn, &length);
    if (strncmp(name, "tfm_bf16_round", 14) != 0 && strncmp(name, "tfm_bf16_narrow", 15) != 0)
      continue;
    LLVMRemoveEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, noinline);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(context, always, 0));
  }
  LLVMPassBuilderOptionsRef options = LLVMCreatePassBuilderOptions();
  LLVMErrorRef error = LLVMRunPasses(module, "always-inline", machine, options);
  LLVMDisposePassBuilderOptions(options);
  if (error)
    return gen_fail_llvm(err, err_size, "inlining the bf16 conversions", LLVMGetErrorMessage(error));
  /* What the inliner left: versions no loop called. */
  for (LLVMValueRef fn = LLVMGetFirstFunction(module), next; fn; fn = next) {
    next = LLVMGetNextFunction(fn);
    size_t length;
    const char *name = LLVMGetValueName2(fn, &length);
    if ((strncmp(name, "tfm_bf16_round", 14) == 0 || strncmp(name, "tfm_bf16_narrow", 15) == 0) &&
        !LLVMGetFirstUse(fn))
      LLVMDeleteFunction(fn);
  }
  return true;
}
