/* Philox 4x32-10 in LLVM IR, word for word the generator of
 * compiler/ir/philox.c, so compiled dropout masks equal the evaluator's. */
#include "gen.h"

/* hi:lo of a * b for a 32-bit constant a. */
static void mul_wide(Gen *gen, uint32_t a, LLVMValueRef b, LLVMValueRef *hi, LLVMValueRef *lo) {
  LLVMBuilderRef bld = gen->builder;
  LLVMValueRef p =
      LLVMBuildMul(bld, LLVMConstInt(gen->i64, a, false), LLVMBuildZExt(bld, b, gen->i64, ""), "");
  *lo = LLVMBuildTrunc(bld, p, gen->i32, "");
  *hi = LLVMBuildTrunc(bld, LLVMBuildLShr(bld, p, LLVMConstInt(gen->i64, 32, false), ""), gen->i32,
                       "");
}

LLVMValueRef gen_philox_uniform(Gen *gen, const GraphNode *node, LLVMValueRef offset,
                                LLVMValueRef index) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef block = LLVMBuildLShr(b, index, LLVMConstInt(gen->i64, 2, false), "");
  LLVMValueRef c[4] = {
      LLVMBuildTrunc(b, block, gen->i32, ""),
      LLVMBuildTrunc(b, LLVMBuildLShr(b, block, LLVMConstInt(gen->i64, 32, false), ""), gen->i32,
                     ""),
      LLVMConstInt(gen->i32, node->attrs.stream, false),
      offset,
  };
  uint32_t k0 = (uint32_t)node->attrs.seed, k1 = (uint32_t)(node->attrs.seed >> 32);
  for (int round = 0; round < 10; round++) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    LLVMValueRef hi0, lo0, hi1, lo1;
    mul_wide(gen, 0xD2511F53u, c[0], &hi0, &lo0);
    mul_wide(gen, 0xCD9E8D57u, c[2], &hi1, &lo1);
    LLVMValueRef n0 =
        LLVMBuildXor(b, LLVMBuildXor(b, hi1, c[1], ""), LLVMConstInt(gen->i32, k0, false), "");
    LLVMValueRef n2 =
        LLVMBuildXor(b, LLVMBuildXor(b, hi0, c[3], ""), LLVMConstInt(gen->i32, k1, false), "");
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
  }
  LLVMValueRef lane =
      LLVMBuildTrunc(b, LLVMBuildAnd(b, index, LLVMConstInt(gen->i64, 3, false), ""), gen->i32, "");
  LLVMValueRef word = c[3];
  for (int i = 2; i >= 0; i--)
    word = LLVMBuildSelect(
        b, LLVMBuildICmp(b, LLVMIntEQ, lane, LLVMConstInt(gen->i32, (unsigned)i, false), ""), c[i],
        word, "");
  LLVMTypeRef t = gen_type(gen, node->dtype);
  LLVMValueRef top = LLVMBuildLShr(b, word, LLVMConstInt(gen->i32, 8, false), "");
  return LLVMBuildFMul(b, LLVMBuildUIToFP(b, top, t, ""), LLVMConstReal(t, 1.0 / 16777216.0), "");
}
