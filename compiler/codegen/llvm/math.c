/* exp and tanh of f32 as straight-line IR, where the target asks for it
 * (Target.inline_f32_math: the CPU, and the NVPTX module, whose loop and
 * attention kernels share this code). A call to libm's
 * expf/tanhf stops LLVM's loop vectorizer (there is no vector libm to map
 * it to), which left the GELU and softmax kernels of gpt-small at about
 * 25 ns an element; these are arithmetic, selects and bit operations only,
 * so the kernel loops vectorize. exp is Cephes' (Moshier): range reduction
 * by ln 2 and a degree-6 polynomial; tanh a rational function. Both are
 * within a few ulp of libm, far inside the 1e-5 the compiled-vs-evaluator
 * checks allow. The GPU's thread plan run on the CPU (ptx_serial_target)
 * calls libm in its loop kernels instead; other math functions (log, sin,
 * ...) are library calls everywhere, libdevice's on the GPU. */
#include "gen.h"

/* Every function here takes f32 or a vector of f32 (one lane at a time
 * the same operations): constants take the shape of their operand. */
static LLVMValueRef splat_like(LLVMTypeRef like, LLVMValueRef scalar) {
  if (LLVMGetTypeKind(like) != LLVMVectorTypeKind) return scalar;
  unsigned n = LLVMGetVectorSize(like);
  LLVMValueRef lanes[64];
  for (unsigned i = 0; i < n; i++) lanes[i] = scalar;
  return LLVMConstVector(lanes, n);
}

static LLVMValueRef real(Gen *gen, LLVMTypeRef like, double v) {
  return splat_like(like, LLVMConstReal(gen->f32, v));
}

/* The i32 type with the lanes of `like`. */
static LLVMTypeRef int_like(Gen *gen, LLVMTypeRef like) {
  return LLVMGetTypeKind(like) == LLVMVectorTypeKind
             ? LLVMVectorType(gen->i32, LLVMGetVectorSize(like))
             : gen->i32;
}

static LLVMValueRef fmul(Gen *gen, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFMul(gen->builder, a, b, "");
}

static LLVMValueRef fadd(Gen *gen, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFAdd(gen->builder, a, b, "");
}

/* c[0] + x (c[1] + x (c[2] + ...)), Horner's rule from the highest term. */
static LLVMValueRef polynomial(Gen *gen, LLVMValueRef x, const double *c, int n) {
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef y = real(gen, t, c[n - 1]);
  for (int i = n - 2; i >= 0; i--) y = gen_fmuladd(gen, y, x, real(gen, t, c[i]));
  return y;
}

/* A compare and a select each way, which x86 does in one max and one min;
 * llvm.maxnum/minnum would add a NaN test and blend to each (their NaN
 * rule is not the instructions'). A NaN x passes through: callers give
 * NaN their own result. */
static LLVMValueRef clamp(Gen *gen, LLVMValueRef x, double lo, double hi) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef l = real(gen, LLVMTypeOf(x), lo), h = real(gen, LLVMTypeOf(x), hi);
  x = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x, l, ""), l, x, "");
  return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, h, ""), h, x, "");
}

/* 2^n for an i32 n in [-126, 127]: the exponent field built directly;
 * `t` is the f32 type with n's lanes. */
static LLVMValueRef power_of_two(Gen *gen, LLVMValueRef n, LLVMTypeRef t) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef it = LLVMTypeOf(n);
  LLVMValueRef biased = LLVMBuildAdd(b, n, splat_like(it, gen_i32(gen, 127)), "");
  return LLVMBuildBitCast(b, LLVMBuildShl(b, biased, splat_like(it, gen_i32(gen, 23)), ""), t, "");
}

/* e^x for x in [-104, 89] as 2^n e^r, |r| <= ln 2 / 2. n may be anywhere
 * in [-150, 128], so 2^n is applied as two factors 2^(n/2) and
 * 2^(n - n/2) that stay normal (results in the subnormal range and
 * overflow to inf come out right). */
static LLVMValueRef exp_in_range(Gen *gen, LLVMValueRef x) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef scaled = gen_fmuladd(gen, x, real(gen, t, 1.44269504088896341), real(gen, t, 0.5));
  LLVMValueRef n = gen_intrinsic(gen, "llvm.floor", &t, 1, &scaled, 1);
  /* r = x - n ln 2, with ln 2 split in two so n * C1 is exact. */
  LLVMValueRef r = gen_fmuladd(gen, n, real(gen, t, -0.693359375), x);
  r = gen_fmuladd(gen, n, real(gen, t, 2.12194440e-4), r);
  static const double p[] = {5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2,
                             8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4};
  LLVMValueRef er = fadd(gen, gen_fmuladd(gen, polynomial(gen, r, p, 6), fmul(gen, r, r), r),
                         real(gen, t, 1.0));
  LLVMValueRef ni = LLVMBuildFPToSI(b, n, int_like(gen, t), "");
  LLVMValueRef half = LLVMBuildAShr(b, ni, splat_like(LLVMTypeOf(ni), gen_i32(gen, 1)), "");
  LLVMValueRef rest = LLVMBuildSub(b, ni, half, "");
  return fmul(gen, fmul(gen, er, power_of_two(gen, half, t)), power_of_two(gen, rest, t));
}

LLVMValueRef gen_exp_f32(Gen *gen, LLVMValueRef x) {
  LLVMBuilderRef b = gen->builder;
  /* Past these, expf is +inf (above ~88.72) or 0 (below ~-103.97). */
  LLVMValueRef y = exp_in_range(gen, clamp(gen, x, -104.0, 89.0));
  /* expf(NaN) is NaN (the clamp let it through, but the int conversion
   * of n would not). */
  LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
  return LLVMBuildSelect(b, nan, x, y, "");
}

LLVMValueRef gen_tanh_f32(Gen *gen, LLVMValueRef x) {
  /* x P(x^2) / Q(x^2) on |x| <= 9, where tanh rounds to +-1 in f32 from
   * 9.01: a minimax fit of tanh(x) / x (tools/fit_tanh.py; relative error
   * 2.1e-8 in exact arithmetic, within 6 ulp of tanh with these f32
   * coefficients and FMA). Eight multiply-adds and one division, where
   * Cephes' two forms (a polynomial near 0, 1 - 2 / (e^2|x| + 1) beyond)
   * were both computed for every vector: about 40 operations, which made
   * gpt-small's GELU kernels compute-bound. The result is clamped to
   * [-1, 1] (rounding can reach 1 + 2 ulp). A NaN passes both clamps and
   * the arithmetic. */
  static const double p[] = {1.0, 1.3381031e-01, 3.4955933e-03, 2.060915e-05, 1.335472e-08};
  static const double q[] = {1.0, 4.6714345e-01, 2.5877003e-02, 3.2856426e-04, 7.7765895e-07};
  LLVMValueRef xc = clamp(gen, x, -9.0, 9.0);
  LLVMValueRef z = fmul(gen, xc, xc);
  LLVMValueRef y = LLVMBuildFDiv(gen->builder, fmul(gen, xc, polynomial(gen, z, p, 5)),
                                 polynomial(gen, z, q, 5), "");
  return clamp(gen, y, -1.0, 1.0);
}
