/* The zmm helpers and bf16 tile packings of the AMX attention kernels
 * (attention_amx.h). */
#include "attention_amx.h"

LLVMTypeRef amx_f32x16(Gen *gen) { return LLVMVectorType(gen->f32, 16); }

LLVMTypeRef amx_i32x16(Gen *gen) { return LLVMVectorType(gen->i32, 16); }

LLVMValueRef amx_splat_i32(Gen *gen, int32_t x) {
  LLVMValueRef lanes[16];
  for (int l = 0; l < 16; l++) lanes[l] = gen_i32(gen, x);
  return LLVMConstVector(lanes, 16);
}

LLVMValueRef amx_splat_f32(Gen *gen, double x) {
  LLVMValueRef lanes[16];
  for (int l = 0; l < 16; l++) lanes[l] = LLVMConstReal(gen->f32, x);
  return LLVMConstVector(lanes, 16);
}

LLVMValueRef amx_lanes(Gen *gen, int first, int step) {
  LLVMValueRef lanes[16];
  for (int l = 0; l < 16; l++) lanes[l] = gen_i32(gen, first + l * step);
  return LLVMConstVector(lanes, 16);
}

static LLVMValueRef vector_at(Gen *gen, LLVMTypeRef type, LLVMTypeRef element, LLVMValueRef base,
                              LLVMValueRef index) {
  return LLVMBuildBitCast(gen->builder, gen_element(gen, element, base, index), LLVMPointerType(type, 0), "");
}

LLVMValueRef amx_load16(Gen *gen, LLVMValueRef base, int64_t valid) {
  LLVMTypeRef vf = amx_f32x16(gen);
  if (valid <= 0) return LLVMConstNull(vf);
  if (valid >= 16) {
    LLVMValueRef v = LLVMBuildLoad2(gen->builder, vf, vector_at(gen, vf, gen->f32, base, gen_i64(gen, 0)), "");
    LLVMSetAlignment(v, 4);
    return v;
  }
  LLVMValueRef v = LLVMConstNull(vf);
  for (int l = 0; l < valid; l++)
    v = LLVMBuildInsertElement(gen->builder, v, gen_load_at(gen, gen->f32, base, gen_i64(gen, l)),
                               gen_i32(gen, l), "");
  return v;
}

void amx_store16(Gen *gen, LLVMValueRef v, LLVMValueRef base, int64_t valid) {
  LLVMBuilderRef b = gen->builder;
  if (valid >= 16) {
    LLVMSetAlignment(LLVMBuildStore(b, v, vector_at(gen, amx_f32x16(gen), gen->f32, base, gen_i64(gen, 0))), 4);
    return;
  }
  for (int l = 0; l < valid; l++)
    LLVMBuildStore(b, LLVMBuildExtractElement(b, v, gen_i32(gen, l), ""), gen_element(gen, gen->f32, base, gen_i64(gen, l)));
}

LLVMValueRef amx_max(Gen *gen, LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef b = gen->builder;
  return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, y, ""), x, y, "");
}

LLVMValueRef amx_tile(Gen *gen, LLVMValueRef base, LLVMValueRef outer, int64_t count, int64_t inner) {
  LLVMValueRef tile = gen_iadd(gen, gen_imul(gen, outer, count), gen_i64(gen, inner));
  return gen_element(gen, gen->i16, base, gen_imul(gen, tile, AMX_TILE_ELEMENTS));
}

LLVMValueRef amx_stack_array(Gen *gen, LLVMTypeRef element, int64_t count, const char *name) {
  LLVMValueRef a = gen_entry_alloca(gen, LLVMArrayType(element, (unsigned)count), name);
  LLVMSetAlignment(a, 64);
  return LLVMBuildBitCast(gen->builder, a, LLVMPointerType(element, 0), "");
}

/* x[0] and x[1] rounded to bf16 and stored as a tile row (amx_split_pair);
 * returns the 32 bf16 values, x[0]'s then x[1]'s. */
static LLVMValueRef store_rounded(Gen *gen, LLVMValueRef *x, bool interleave, LLVMValueRef base,
                                  LLVMValueRef index) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef halves = LLVMVectorType(gen->i16, 32);
  LLVMValueRef args[2] = {x[1], x[0]}; /* the second operand fills the low half */
  LLVMValueRef bits = gen_intrinsic(gen, "llvm.x86.avx512bf16.cvtne2ps2bf16.512", NULL, 0, args, 2);
  bits = LLVMBuildBitCast(b, bits, halves, "");
  LLVMValueRef row = bits;
  if (interleave) {
    LLVMValueRef order[32];
    for (int l = 0; l < 32; l++) order[l] = gen_i32(gen, l / 2 + 16 * (l % 2));
    row = LLVMBuildShuffleVector(b, bits, LLVMGetUndef(halves), LLVMConstVector(order, 32), "");
  }
  LLVMSetAlignment(LLVMBuildStore(b, row, vector_at(gen, halves, gen->i16, base, index)), 4);
  return bits;
}

void amx_split_pair(Gen *gen, LLVMValueRef *x, bool interleave, LLVMValueRef hi, LLVMValueRef lo,
                    LLVMValueRef index) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef halves = LLVMVectorType(gen->i16, 32);
  LLVMValueRef bits = store_rounded(gen, x, interleave, hi, index);
  LLVMValueRef rest[2];
  for (int h = 0; h < 2; h++) {
    LLVMValueRef part = LLVMBuildShuffleVector(b, bits, LLVMGetUndef(halves), amx_lanes(gen, 16 * h, 1), "");
    LLVMValueRef wide = LLVMBuildShl(b, LLVMBuildZExt(b, part, amx_i32x16(gen), ""), amx_splat_i32(gen, 16), "");
    rest[h] = LLVMBuildFSub(b, x[h], LLVMBuildBitCast(b, wide, amx_f32x16(gen), ""), "");
  }
  store_rounded(gen, rest, interleave, lo, index);
}

bool amx_mask_per_key(const GraphShape *mask) { return mask->rank < 2 || mask->dims[mask->rank - 2] == 1; }

LLVMValueRef amx_key_mask(Gen *gen, const GenMaskMap *m, LLVMValueRef keys, LLVMValueRef key, int64_t s) {
  LLVMValueRef at = gen_imul(gen, cpu_min64(gen, key, gen_i64(gen, s - 1)), m->stride[m->rank - 1]);
  return gen_splat(gen, gen_load_at(gen, gen->f32, keys, at), 16);
}

void amx_store_columns(Gen *gen, LLVMValueRef *x, LLVMValueRef dst, LLVMValueRef row0, LLVMValueRef count,
                       int64_t len, int64_t column) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  gen_transpose_square(gen, x, 16);
  for (int i = 0; i < 16; i++) {
    LLVMBasicBlockRef store = LLVMAppendBasicBlockInContext(gen->context, fn, "store_row");
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, fn, "next_row");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, gen_i64(gen, i), count, ""), store, next);
    LLVMPositionBuilderAtEnd(b, store);
    LLVMValueRef row = gen_iadd(gen, row0, gen_i64(gen, i));
    amx_store16(gen, x[i], gen_element(gen, gen->f32, dst, gen_iadd(gen, gen_imul(gen, row, len), gen_i64(gen, column))),
                amx_min(16, len - column));
    LLVMBuildBr(b, next);
    LLVMPositionBuilderAtEnd(b, next);
  }
}

/* The bf16 pair (low, high) of two bf16-valued floats as one i32. */
static LLVMValueRef pair_of(Gen *gen, LLVMValueRef low, LLVMValueRef high) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef vi = amx_i32x16(gen);
  LLVMValueRef hi = LLVMBuildAnd(b, LLVMBuildBitCast(b, high, vi, ""), amx_splat_i32(gen, (int32_t)0xffff0000u), "");
  return LLVMBuildOr(b, hi, LLVMBuildLShr(b, LLVMBuildBitCast(b, low, vi, ""), amx_splat_i32(gen, 16), ""), "");
}

/* Elements [0, 32) of a row (the first `valid` read, the rest 0) as 16
 * pairs: lane p holds elements 2p and 2p + 1. */
static LLVMValueRef row_pairs(Gen *gen, LLVMValueRef base, int64_t valid) {
  LLVMValueRef lo = amx_load16(gen, base, valid);
  LLVMValueRef hi = amx_load16(gen, gen_element(gen, gen->f32, base, gen_i64(gen, 16)), valid - 16);
  LLVMValueRef even = LLVMBuildShuffleVector(gen->builder, lo, hi, amx_lanes(gen, 0, 2), "");
  LLVMValueRef odd = LLVMBuildShuffleVector(gen->builder, lo, hi, amx_lanes(gen, 1, 2), "");
  return pair_of(gen, even, odd);
}

/* 16 rows of 16 pairs stored as the tile at `tile`, transposed first
 * (row p: lane p of each) when asked. */
static void store_tile(Gen *gen, LLVMValueRef *rows, bool transposed, LLVMValueRef tile) {
  if (transposed) gen_transpose_square(gen, rows, 16);
  for (int p = 0; p < 16; p++) {
    LLVMValueRef at = vector_at(gen, amx_i32x16(gen), gen->i16, tile, gen_i64(gen, 32 * p));
    LLVMSetAlignment(LLVMBuildStore(gen->builder, rows[p], at), 4);
  }
}

/* Row `row` of src (clamped to the last of `rows`), element `at` on. */
static LLVMValueRef row_at(Gen *gen, LLVMValueRef src, LLVMValueRef row, LLVMValueRef rows, int64_t len, int64_t at) {
  row = cpu_min64(gen, row, LLVMBuildSub(gen->builder, rows, gen_i64(gen, 1), ""));
  return gen_element(gen, gen->f32, src, gen_iadd(gen, gen_imul(gen, row, len), gen_i64(gen, at)));
}

void amx_pack_row_steps(Gen *gen, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef rows, int64_t len,
                        LLVMValueRef groups, bool transposed) {
  int64_t steps = (len + 31) / 32;
  GenLoop g;
  gen_loop_begin(gen, &g, gen_i64(gen, 0), groups);
  for (int64_t step = 0; step < steps; step++) {
    LLVMValueRef pairs[16];
    for (int j = 0; j < 16; j++) {
      LLVMValueRef row = gen_iadd(gen, gen_imul(gen, g.index, 16), gen_i64(gen, j));
      pairs[j] = row_pairs(gen, row_at(gen, src, row, rows, len, 32 * step), amx_min(32, len - 32 * step));
    }
    store_tile(gen, pairs, transposed, amx_tile(gen, dst, g.index, steps, step));
  }
  gen_loop_end(gen, &g);
}

void amx_pack_row_pairs(Gen *gen, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef rows, int64_t len,
                        LLVMValueRef blocks, bool transposed) {
  int64_t tiles = (len + 15) / 16;
  GenLoop blk;
  gen_loop_begin(gen, &blk, gen_i64(gen, 0), blocks);
  for (int64_t ct = 0; ct < tiles; ct++) {
    LLVMValueRef pairs[16];
    for (int p = 0; p < 16; p++) {
      LLVMValueRef x[2];
      for (int e = 0; e < 2; e++) {
        LLVMValueRef row = gen_iadd(gen, gen_imul(gen, blk.index, 32), gen_i64(gen, 2 * p + e));
        x[e] = amx_load16(gen, row_at(gen, src, row, rows, len, 16 * ct), amx_min(16, len - 16 * ct));
      }
      pairs[p] = pair_of(gen, x[0], x[1]);
    }
    store_tile(gen, pairs, transposed, amx_tile(gen, dst, blk.index, tiles, ct));
  }
  gen_loop_end(gen, &blk);
}
