/* The AVX512-BF16 family of bf16 GEMMs (gemm_bf16.c's driver):
 * vdpbf16ps, which adds to each of 16 f32 lanes the products of one bf16
 * pair of two registers. A register of packed B is one pair row of a
 * 16-column strip; A's pair (a[i][2p], a[i][2p+1]) is broadcast as one
 * 32-bit value. An 8 x 32 micro tile: 16 accumulators (from the driver's
 * f32 block, or zero), two loads of B and eight broadcasts (folded into
 * the products as embedded broadcasts) for each 16 products. */
#include "cpu_internal.h"

enum { ROWS = 8 };

static void emit_micro(Gen *gen, LLVMValueRef fn) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef kc = LLVMGetParam(fn, 0), kp = LLVMGetParam(fn, 1), a = LLVMGetParam(fn, 2);
  LLVMValueRef bp = LLVMGetParam(fn, 3), c = LLVMGetParam(fn, 4), ldc = LLVMGetParam(fn, 5);
  LLVMTypeRef acc_type = LLVMVectorType(gen->f32, 16), pair_type = LLVMVectorType(gen->i32, 16);
  LLVMTypeRef acc_ptr = LLVMPointerType(acc_type, 0);
  LLVMValueRef acc[ROWS][2], c_at[ROWS][2];
  for (int r = 0; r < ROWS; r++)
    for (int v = 0; v < 2; v++) {
      acc[r][v] = gen_entry_alloca(gen, acc_type, "acc");
      LLVMValueRef at = gen_iadd(gen, LLVMBuildMul(b, gen_i64(gen, r), ldc, ""), gen_i64(gen, v * 16));
      c_at[r][v] = LLVMBuildBitCast(b, gen_element(gen, gen->f32, c, at), acc_ptr, "");
      LLVMBuildStore(b, LLVMConstNull(acc_type), acc[r][v]);
    }
  LLVMBasicBlockRef load = LLVMAppendBasicBlockInContext(gen->context, fn, "load_c");
  LLVMBasicBlockRef steps = LLVMAppendBasicBlockInContext(gen->context, fn, "steps");
  LLVMBuildCondBr(b, LLVMGetParam(fn, 6), load, steps);
  LLVMPositionBuilderAtEnd(b, load);
  for (int r = 0; r < ROWS; r++)
    for (int v = 0; v < 2; v++) {
      LLVMValueRef old = LLVMBuildLoad2(b, acc_type, c_at[r][v], "");
      LLVMSetAlignment(old, 4);
      LLVMBuildStore(b, old, acc[r][v]);
    }
  LLVMBuildBr(b, steps);
  LLVMPositionBuilderAtEnd(b, steps);
  LLVMValueRef strips[2] = {bp, gen_element(gen, gen->i16, bp, gen_imul(gen, kp, 16))};
  LLVMTypeRef i32p = LLVMPointerType(gen->i32, 0);
  /* Over k steps of 32 (A's blocks of 512), and the 16 pairs of each. */
  GenLoop block, p;
  gen_loop_begin(gen, &block, gen_i64(gen, 0), LLVMBuildSDiv(b, kc, gen_i64(gen, 32), ""));
  LLVMValueRef a_block = gen_element(gen, gen->i16, a, gen_imul(gen, block.index, 512));
  gen_loop_begin(gen, &p, gen_i64(gen, 0), gen_i64(gen, 16));
  LLVMValueRef pair_row = gen_iadd(gen, gen_imul(gen, block.index, 16), p.index);
  LLVMValueRef pairs[2];
  for (int v = 0; v < 2; v++) {
    LLVMValueRef at = gen_element(gen, gen->i16, strips[v], gen_imul(gen, pair_row, 32));
    pairs[v] = LLVMBuildLoad2(b, pair_type, LLVMBuildBitCast(b, at, LLVMPointerType(pair_type, 0), ""), "");
    LLVMSetAlignment(pairs[v], 64);
  }
  for (int r = 0; r < ROWS; r++) {
    LLVMValueRef at = gen_iadd(gen, gen_i64(gen, r * 32), gen_imul(gen, p.index, 2));
    LLVMValueRef pair = LLVMBuildLoad2(b, gen->i32, LLVMBuildBitCast(b, gen_element(gen, gen->i16, a_block, at), i32p, ""), "");
    LLVMSetAlignment(pair, 4);
    LLVMValueRef splat = gen_splat(gen, pair, 16);
    for (int v = 0; v < 2; v++) {
      LLVMValueRef args[3] = {LLVMBuildLoad2(b, acc_type, acc[r][v], ""), splat, pairs[v]};
      LLVMBuildStore(b, gen_intrinsic(gen, "llvm.x86.avx512bf16.dpbf16ps.512", NULL, 0, args, 3),
                     acc[r][v]);
    }
  }
  gen_loop_end(gen, &p);
  gen_loop_end(gen, &block);
  for (int r = 0; r < ROWS; r++)
    for (int v = 0; v < 2; v++) {
      LLVMValueRef s = LLVMBuildStore(b, LLVMBuildLoad2(b, acc_type, acc[r][v], ""), c_at[r][v]);
      LLVMSetAlignment(s, 4);
    }
  LLVMBuildRetVoid(b);
}

const CpuPairFamily cpu_avx512bf16_family = {.name = "avx512bf16",
                                             .features = "+avx512bf16",
                                             .rows = ROWS,
                                             .micro = emit_micro};
