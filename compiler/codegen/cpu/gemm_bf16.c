/* The bf16 GEMM: one entry per transpose pair that picks, at each call,
 * the kernel family the runtime chose at start-up (tfm_cpu_kernels:
 * CPUID, or TFM_CPU_KERNELS), among those the module holds. An AVX-512
 * target holds three: AMX tiles (gemm_amx.c), AVX512-BF16 pair dot
 * products (gemm_avx512bf16.c), and the widening f32 GEMM (gemm.c) that
 * also runs on AVX2 and AVX-512F; an AVX2 target holds only the last.
 *
 * The two pair families share this driver. Both multiply bf16 pairs
 * (a[i][2p] b[2p][j] + a[i][2p+1] b[2p+1][j]) into f32 sums, so both read
 * B packed in the pair-interleaved ("VNNI") layout: 16-column strips, each
 * row of a strip a pair of k steps, 16 columns x 2 values (64 bytes, one
 * AMX tile row or one zmm register). A is packed in AMX tiles' blocks of
 * 16 rows x 32 k (packed_index). k is padded
 * with zeros to a multiple of 32 (one AMX tile's depth), so every
 * micro-kernel step is a whole tile's depth; each element's sum is held
 * in f32 (tiles, registers, or the sums in scratch between k blocks) and
 * rounded once into C. Rows and columns
 * past the matrix's are packed as copies of its last (never NaN from
 * memory not written) and their sums are not stored.
 *
 * Loops: B packed once for a span of as many whole NC-column panels as
 * PACKED_B_BYTES holds (all of B up to 2048 x 2048), then MC-row blocks
 * of A, each packed once a span; in each, the span's panels, k blocks of
 * KC, and 32-column by MR-row micro tiles that add the block's products
 * to the MC x NC f32 sums in thread scratch (the micro-kernel's tiles or
 * registers load them before the block and store them after); a micro
 * tile's sums are rounded into C once, right after its last block.
 *
 * The sizes are the AMX family's: a k block as long as 2048, so up to
 * k = 2048 each micro tile's C tiles stay in the tile registers for all of
 * k: zeroed, then stored once. With KC 256 they were loaded and stored eight
 * times at k = 2048, and each store waits for the tile's last product: a
 * loop of the micro-kernel alone ran at 1,430 GFLOP/s a core with KC 256
 * and 1,970 with all of k. Its A block (MC x KC, 1 MiB) and a panel of B
 * (NC x KC, 512 KiB) then share the 2 MiB L2; B packed whole keeps A from
 * being packed again for each panel (16 times at n = 2048). Square 2048,
 * two threads: 1,820-1,940 GFLOP/s with NC 512, MC 128, KC 256, B packed
 * per panel; 2,060-2,250 with these (bench/RESULTS.md, 2026-12-07). The
 * AVX512-BF16 family, register-bound, ran the same with both.
 *
 * The products use the instructions' own rounding (round to nearest,
 * subnormal bf16 inputs read as zero), so elements differ from the
 * evaluator's by rounding within tests/codegen's bound for dots. */
#include <stdio.h>
#include <string.h>

#include "cpu_internal.h"
#include "tfmrt.h"

enum {
  PANEL_COLUMNS = 128,
  BLOCK_ROWS = 256,
  DEPTH_STEP = 32,
  DEPTH_BLOCK = 2048,
  PACKED_B_BYTES = 8 << 20,
};

static LLVMValueRef at_least_one(Gen *gen, LLVMValueRef x) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef one = gen_i64(gen, 1);
  return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, x, one, ""), x, one, "");
}

static LLVMValueRef round_up(Gen *gen, LLVMValueRef x, int64_t step) {
  LLVMBuilderRef b = gen->builder;
  return LLVMBuildAnd(b, LLVMBuildAdd(b, x, gen_i64(gen, step - 1), ""), gen_i64(gen, -step), "");
}

/* 32 f32 sums at `from` rounded to bf16 at `to`: vcvtne2ps2bf16 rounds to
 * nearest even and keeps NaN a (quiet) NaN, as gen_bf16_narrow does; it
 * flushes an f32 below 2^-126 to zero, a difference smaller than any
 * tolerance the bf16 products are held to. Both pair families' functions
 * have AVX512-BF16. */
static void emit_round_row(Gen *gen, LLVMValueRef from, LLVMValueRef to) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef half = LLVMVectorType(gen->f32, 16);
  LLVMValueRef sums[2];
  for (int h = 0; h < 2; h++) {
    LLVMValueRef at = LLVMBuildBitCast(b, gen_element(gen, gen->f32, from, gen_i64(gen, 16 * h)),
                                       LLVMPointerType(half, 0), "");
    sums[h] = LLVMBuildLoad2(b, half, at, "");
    LLVMSetAlignment(sums[h], 4);
  }
  /* The second operand fills the low half. */
  LLVMValueRef args[2] = {sums[1], sums[0]};
  LLVMValueRef bits = gen_intrinsic(gen, "llvm.x86.avx512bf16.cvtne2ps2bf16.512", NULL, 0, args, 2);
  LLVMValueRef out = LLVMBuildStore(b, bits, LLVMBuildBitCast(b, to, LLVMPointerType(LLVMTypeOf(bits), 0), ""));
  LLVMSetAlignment(out, 2);
}

/* The family's micro-kernel tfm_gemm_bf16_FAMILY_micro, made at its first use. */
static LLVMValueRef pair_micro(Gen *gen, const CpuPairFamily *family) {
  char name[64];
  snprintf(name, sizeof name, "tfm_gemm_bf16_%s_micro", family->name);
  LLVMValueRef fn = LLVMGetNamedFunction(gen->module, name);
  if (fn)
    return fn;
  LLVMTypeRef hp = LLVMPointerType(gen->i16, 0);
  LLVMTypeRef params[7] = {gen->i64, gen->i64, hp, hp, LLVMPointerType(gen->f32, 0), gen->i64, gen->i1};
  fn = cpu_gemm_function_begin(gen, name, params, 7, family->features);
  family->micro(gen, fn);
  return fn;
}

/* void gemm(i16 *c, i16 *a, i16 *b, i64 m, n, k, lda, ldb, ldc) on a pair
 * family's micro-kernel. */
static LLVMValueRef emit_pair_gemm(Gen *gen, const CpuPairFamily *family, bool ta, bool tb,
                                   const char *name) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef micro = pair_micro(gen, family);
  LLVMTypeRef hp = LLVMPointerType(gen->i16, 0);
  LLVMTypeRef params[9] = {hp, hp, hp, gen->i64, gen->i64, gen->i64, gen->i64, gen->i64, gen->i64};
  LLVMValueRef fn = cpu_gemm_function_begin(gen, name, params, 9, family->features);
  LLVMValueRef c = LLVMGetParam(fn, 0), a = LLVMGetParam(fn, 1), bm = LLVMGetParam(fn, 2);
  LLVMValueRef m = LLVMGetParam(fn, 3), n = LLVMGetParam(fn, 4), k = LLVMGetParam(fn, 5);
  LLVMValueRef lda = LLVMGetParam(fn, 6), ldb = LLVMGetParam(fn, 7), ldc = LLVMGetParam(fn, 8);
  LLVMValueRef one = gen_i64(gen, 1);
  /* k = 0 packs one step of zeros: C = 0. */
  LLVMValueRef kp = round_up(gen, at_least_one(gen, k), DEPTH_STEP);
  /* B's columns packed at once (a span): as many whole panels as
   * PACKED_B_BYTES holds (at least one), or all of B when that covers it. */
  LLVMValueRef np = round_up(gen, at_least_one(gen, n), 32);
  LLVMValueRef fitting =
      LLVMBuildSDiv(b, gen_i64(gen, PACKED_B_BYTES), gen_imul(gen, kp, 2 * PANEL_COLUMNS), "");
  LLVMValueRef span = cpu_min64(gen, np, gen_imul(gen, at_least_one(gen, fitting), PANEL_COLUMNS));
  /* The sums, A's row block and B's span. */
  LLVMValueRef packed = LLVMBuildMul(b, kp, gen_iadd(gen, span, gen_i64(gen, BLOCK_ROWS)), "");
  LLVMValueRef bytes = gen_iadd(gen, gen_imul(gen, packed, 2), gen_i64(gen, BLOCK_ROWS * PANEL_COLUMNS * 4));
  LLVMValueRef scratch = cpu_thread_scratch(gen, bytes);
  /* The f32 sums first: 64-byte aligned as the scratch is, for the tiles. */
  LLVMValueRef sums = LLVMBuildBitCast(b, scratch, LLVMPointerType(gen->f32, 0), "");
  LLVMValueRef apack = gen_element(gen, gen->i16, LLVMBuildBitCast(b, scratch, hp, ""),
                                   gen_i64(gen, BLOCK_ROWS * PANEL_COLUMNS * 2));
  LLVMValueRef bpack = gen_element(gen, gen->i16, apack, gen_imul(gen, kp, BLOCK_ROWS));
  LLVMValueRef panel = gen_i64(gen, PANEL_COLUMNS);
  if (family->begin)
    family->begin(gen);

  GenLoop jb, ic, jc, pc, jr, ir, r;
  LLVMValueRef spans = LLVMBuildSDiv(b, gen_iadd(gen, n, LLVMBuildSub(b, span, one, "")), span, "");
  gen_loop_begin(gen, &jb, gen_i64(gen, 0), spans);
  LLVMValueRef j0 = LLVMBuildMul(b, jb.index, span, "");
  LLVMValueRef nb = cpu_min64(gen, span, LLVMBuildSub(b, n, j0, ""));
  /* B(p, j) at p * sp + j * sq */
  LLVMValueRef bsp = tb ? one : ldb, bsq = tb ? ldb : one;
  cpu_pack_bf16(gen, bpack, gen_element(gen, gen->i16, bm, LLVMBuildMul(b, j0, bsq, "")), k, kp, nb,
                round_up(gen, nb, 32), bsp, bsq, tb, true);
  cpu_step_loop_begin(gen, &ic, m, BLOCK_ROWS);
  LLVMValueRef mc = cpu_min64(gen, gen_i64(gen, BLOCK_ROWS), LLVMBuildSub(b, m, ic.index, ""));
  /* A(i, p) at p * sp + i * sq */
  LLVMValueRef asp = ta ? lda : one, asq = ta ? one : lda;
  cpu_pack_bf16(gen, apack, gen_element(gen, gen->i16, a, LLVMBuildMul(b, ic.index, asq, "")), k, kp,
            mc, round_up(gen, mc, 32), asp, asq, !ta, false);
  cpu_step_loop_begin(gen, &jc, nb, PANEL_COLUMNS);
  LLVMValueRef nc = cpu_min64(gen, panel, LLVMBuildSub(b, nb, jc.index, ""));
  cpu_step_loop_begin(gen, &pc, kp, DEPTH_BLOCK);
  LLVMValueRef kc = cpu_min64(gen, gen_i64(gen, DEPTH_BLOCK), LLVMBuildSub(b, kp, pc.index, ""));
  /* Both layouts hold a strip's k steps of 32 in 512-element blocks. */
  LLVMValueRef k_offset = gen_imul(gen, pc.index, 16);
  LLVMValueRef accumulate = LLVMBuildICmp(b, LLVMIntSGT, pc.index, gen_i64(gen, 0), "");
  cpu_step_loop_begin(gen, &jr, nc, 32);
  LLVMValueRef column = gen_iadd(gen, jc.index, jr.index); /* the micro tile's, in the span */
  cpu_step_loop_begin(gen, &ir, mc, family->rows);
  /* The micro tile's first row: its strip, and its row in the strip. */
  LLVMValueRef arow = gen_iadd(gen, LLVMBuildMul(b, LLVMBuildAnd(b, ir.index, gen_i64(gen, -16), ""), kp, ""),
                               gen_imul(gen, LLVMBuildAnd(b, ir.index, gen_i64(gen, 15), ""), 32));
  LLVMValueRef call[7] = {
      kc, kp, gen_element(gen, gen->i16, apack, gen_iadd(gen, arow, k_offset)),
      gen_element(gen, gen->i16, bpack, gen_iadd(gen, LLVMBuildMul(b, column, kp, ""), k_offset)),
      gen_element(gen, gen->f32, sums, gen_iadd(gen, gen_imul(gen, ir.index, PANEL_COLUMNS), jr.index)),
      panel, accumulate};
  LLVMBuildCall2(b, LLVMGlobalGetValueType(micro), micro, call, 7, "");
  /* After the last k block the micro tile's sums, still in L1, are rounded
   * once into C: 32 columns of a row at once with vcvtne2ps2bf16, the
   * panel's last columns (fewer than 32) element by element
   * (gen_bf16_narrow). Rounding the whole block after its last k block,
   * from L2, took 40% of an nn GEMM's own (not the micro-kernel's) time. */
  LLVMBasicBlockRef round = LLVMAppendBasicBlockInContext(gen->context, fn, "round");
  LLVMBasicBlockRef whole = LLVMAppendBasicBlockInContext(gen->context, fn, "whole_rows");
  LLVMBasicBlockRef part = LLVMAppendBasicBlockInContext(gen->context, fn, "part_rows");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, fn, "next_tile");
  LLVMValueRef last = LLVMBuildICmp(b, LLVMIntSGE, gen_iadd(gen, pc.index, gen_i64(gen, DEPTH_BLOCK)), kp, "");
  LLVMBuildCondBr(b, last, round, next);
  LLVMPositionBuilderAtEnd(b, round);
  LLVMValueRef rows = cpu_min64(gen, gen_i64(gen, family->rows), LLVMBuildSub(b, mc, ir.index, ""));
  LLVMValueRef cols = cpu_min64(gen, gen_i64(gen, 32), LLVMBuildSub(b, nc, jr.index, ""));
  LLVMValueRef from = call[4];
  LLVMValueRef to = gen_element(
      gen, gen->i16, c,
      gen_iadd(gen, LLVMBuildMul(b, gen_iadd(gen, ic.index, ir.index), ldc, ""), gen_iadd(gen, j0, column)));
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, cols, gen_i64(gen, 32), ""), whole, part);
  LLVMPositionBuilderAtEnd(b, whole);
  gen_loop_begin(gen, &r, gen_i64(gen, 0), rows);
  emit_round_row(gen, gen_element(gen, gen->f32, from, gen_imul(gen, r.index, PANEL_COLUMNS)),
                 gen_element(gen, gen->i16, to, LLVMBuildMul(b, r.index, ldc, "")));
  gen_loop_end(gen, &r);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, part);
  GenLoop j;
  gen_loop_begin(gen, &r, gen_i64(gen, 0), rows);
  gen_loop_begin(gen, &j, gen_i64(gen, 0), cols);
  gen_store_value(gen, GRAPH_BF16,
                  gen_load_at(gen, gen->f32, from, gen_iadd(gen, gen_imul(gen, r.index, PANEL_COLUMNS), j.index)),
                  gen_element(gen, gen->i16, to, gen_iadd(gen, LLVMBuildMul(b, r.index, ldc, ""), j.index)));
  gen_loop_end(gen, &j);
  gen_loop_end(gen, &r);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
  cpu_step_loop_end(gen, &ir);
  cpu_step_loop_end(gen, &jr);
  cpu_step_loop_end(gen, &pc);
  cpu_step_loop_end(gen, &jc);
  cpu_step_loop_end(gen, &ic);
  gen_loop_end(gen, &jb);
  if (family->end)
    family->end(gen);
  LLVMBuildRetVoid(b);
  return fn;
}

/* A family's GEMM, found by name or emitted. */
static LLVMValueRef family_gemm(Gen *gen, const CpuPairFamily *family, bool ta, bool tb) {
  char name[64];
  snprintf(name, sizeof name, "tfm_gemm_bf16_%s_%c%c", family->name, ta ? 't' : 'n', tb ? 't' : 'n');
  LLVMValueRef fn = LLVMGetNamedFunction(gen->module, name);
  return fn ? fn : emit_pair_gemm(gen, family, ta, tb, name);
}

/* The dispatcher: tfm_cpu_kernels() (the runtime's choice) to the family's
 * GEMM, the widening one for any family the module lacks. */
static LLVMValueRef emit_dispatch(Gen *gen, bool ta, bool tb, const char *name) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef widen = cpu_gemm_bf16_widen_function(gen, ta, tb);
  LLVMValueRef amx = family_gemm(gen, &cpu_amx_family, ta, tb);
  LLVMValueRef pairs = family_gemm(gen, &cpu_avx512bf16_family, ta, tb);
  LLVMTypeRef type = LLVMGlobalGetValueType(widen);
  LLVMTypeRef params[9];
  LLVMGetParamTypes(type, params);
  LLVMValueRef fn = cpu_gemm_function_begin(gen, name, params, 9, NULL);
  LLVMValueRef args[9];
  for (unsigned i = 0; i < 9; i++)
    args[i] = LLVMGetParam(fn, i);
  LLVMValueRef family = gen_libcall(gen, "tfm_cpu_kernels", gen->i32, NULL, NULL, 0);
  LLVMBasicBlockRef on[3], done = LLVMAppendBasicBlockInContext(gen->context, fn, "done");
  LLVMValueRef targets[3] = {widen, pairs, amx};
  for (int f = 0; f < 3; f++)
    on[f] = LLVMAppendBasicBlockInContext(gen->context, fn, "family");
  LLVMValueRef choice = LLVMBuildSwitch(b, family, on[TFM_CPU_KERNELS_AVX2], 2);
  LLVMAddCase(choice, gen_i32(gen, TFM_CPU_KERNELS_AVX512BF16), on[TFM_CPU_KERNELS_AVX512BF16]);
  LLVMAddCase(choice, gen_i32(gen, TFM_CPU_KERNELS_AMX), on[TFM_CPU_KERNELS_AMX]);
  for (int f = 0; f < 3; f++) {
    LLVMPositionBuilderAtEnd(b, on[f]);
    LLVMBuildCall2(b, type, targets[f], args, 9, "");
    LLVMBuildBr(b, done);
  }
  LLVMPositionBuilderAtEnd(b, done);
  LLVMBuildRetVoid(b);
  return fn;
}

LLVMValueRef cpu_gemm_bf16_function(Gen *gen, bool ta, bool tb) {
  if (gen->vector_bits < 512)
    return cpu_gemm_bf16_widen_function(gen, ta, tb);
  char name[64];
  snprintf(name, sizeof name, "tfm_gemm_bf16_%c%c", ta ? 't' : 'n', tb ? 't' : 'n');
  LLVMValueRef fn = LLVMGetNamedFunction(gen->module, name);
  if (fn)
    return fn;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(gen->builder);
  fn = emit_dispatch(gen, ta, tb, name);
  if (saved)
    LLVMPositionBuilderAtEnd(gen->builder, saved);
  return fn;
}
