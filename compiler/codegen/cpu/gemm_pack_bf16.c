/* Packing bf16 operands for the pair families' GEMM (gemm_bf16.c): A in
 * AMX tiles' blocks, B in the pair-interleaved layout (cpu_internal.h).
 * Element by element, with its index arithmetic, packing took more time
 * than the AMX products of a 2048 GEMM; so the common cases move whole
 * vectors: A's rows 32 k at a time (64 bytes, one block row), B's rows two
 * at a time interleaved into pair rows, a transposed A's the same way and
 * then transposed in registers 16 rows at a time, a transposed B's pairs
 * transposed in registers 16 columns at a time. What is left
 * (k past those, rows or columns past whole strips) goes element by
 * element. */
#include "cpu_internal.h"

static LLVMValueRef and64(Gen *gen, LLVMValueRef a, int64_t mask) {
  return LLVMBuildAnd(gen->builder, a, gen_i64(gen, mask), "");
}

static LLVMValueRef shr64(Gen *gen, LLVMValueRef a, int64_t bits) {
  return LLVMBuildAShr(gen->builder, a, gen_i64(gen, bits), "");
}

/* Where packed element (p, q) goes. A (q a row): 16-row strips of kp/32
 * blocks of 16 rows x 32 k (one AMX tile, 1 KiB, contiguous: tiles of rows
 * kp apart would all fall in one set of the L1 cache). B (q a column):
 * 16-column strips of kp/2 pair rows of 16 columns x 2 k. */
static LLVMValueRef packed_index(Gen *gen, LLVMValueRef p, LLVMValueRef q, LLVMValueRef kp,
                                 bool pairs) {
  LLVMValueRef strip = LLVMBuildMul(gen->builder, shr64(gen, q, 4), gen_imul(gen, kp, 16), "");
  LLVMValueRef in_strip = and64(gen, q, 15);
  if (!pairs)
    return gen_iadd(gen, gen_iadd(gen, strip, gen_imul(gen, shr64(gen, p, 5), 512)),
                    gen_iadd(gen, gen_imul(gen, in_strip, 32), and64(gen, p, 31)));
  LLVMValueRef lane = gen_iadd(gen, gen_imul(gen, in_strip, 2), and64(gen, p, 1));
  return gen_iadd(gen, gen_iadd(gen, strip, gen_imul(gen, shr64(gen, p, 1), 32)), lane);
}

/* The source's element (p, q): row or column q clamped to the last. */
typedef struct Source {
  LLVMValueRef base, sp, sq, last;
} Source;

static LLVMValueRef source_at(Gen *gen, const Source *s, LLVMValueRef p, LLVMValueRef q) {
  LLVMBuilderRef b = gen->builder;
  return gen_element(gen, gen->i16, s->base,
                     gen_iadd(gen, LLVMBuildMul(b, p, s->sp, ""),
                              LLVMBuildMul(b, cpu_min64(gen, q, s->last), s->sq, "")));
}

/* Element by element over p in [p0, p1), q in [q0, q1), along the
 * contiguous one. */
static void pack_elements(Gen *gen, LLVMValueRef dst, const Source *s, LLVMValueRef kp,
                          LLVMValueRef p0, LLVMValueRef p1, LLVMValueRef q0, LLVMValueRef q1,
                          bool p_contiguous, bool pairs) {
  GenLoop outer, inner;
  gen_loop_begin(gen, &outer, p_contiguous ? q0 : p0, p_contiguous ? q1 : p1);
  gen_loop_begin(gen, &inner, p_contiguous ? p0 : q0, p_contiguous ? p1 : q1);
  LLVMValueRef p = p_contiguous ? inner.index : outer.index;
  LLVMValueRef q = p_contiguous ? outer.index : inner.index;
  LLVMBuildStore(gen->builder, LLVMBuildLoad2(gen->builder, gen->i16, source_at(gen, s, p, q), ""),
                 gen_element(gen, gen->i16, dst, packed_index(gen, p, q, kp, pairs)));
  gen_loop_end(gen, &inner);
  gen_loop_end(gen, &outer);
}

static LLVMValueRef load_vector(Gen *gen, LLVMTypeRef vt, LLVMValueRef at, unsigned align) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef x = LLVMBuildLoad2(b, vt, LLVMBuildBitCast(b, at, LLVMPointerType(vt, 0), ""), "");
  LLVMSetAlignment(x, align);
  return x;
}

static void store_vector(Gen *gen, LLVMValueRef x, LLVMValueRef at, unsigned align) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef s = LLVMBuildStore(b, x, LLVMBuildBitCast(b, at, LLVMPointerType(LLVMTypeOf(x), 0), ""));
  LLVMSetAlignment(s, align);
}

/* A with k contiguous: each row's whole 32-k blocks as 64-byte copies;
 * returns where the element-by-element part starts in p. */
static LLVMValueRef pack_a_rows(Gen *gen, LLVMValueRef dst, const Source *s, LLVMValueRef k,
                                LLVMValueRef kp, LLVMValueRef padded) {
  LLVMTypeRef vt = LLVMVectorType(gen->i16, 32);
  LLVMValueRef whole = shr64(gen, k, 5);
  GenLoop q, block;
  gen_loop_begin(gen, &q, gen_i64(gen, 0), padded);
  gen_loop_begin(gen, &block, gen_i64(gen, 0), whole);
  LLVMValueRef p = gen_imul(gen, block.index, 32);
  store_vector(gen, load_vector(gen, vt, source_at(gen, s, p, q.index), 2),
               gen_element(gen, gen->i16, dst, packed_index(gen, p, q.index, kp, false)), 64);
  gen_loop_end(gen, &block);
  gen_loop_end(gen, &q);
  return gen_imul(gen, whole, 32);
}

/* Two rows of 16 bf16 (k steps p and p + 1) as their 16 pairs: row p's
 * element j, then row p + 1's, for j = 0 .. 15. */
static LLVMValueRef interleave_rows(Gen *gen, LLVMValueRef first, LLVMValueRef second) {
  LLVMValueRef mask[32];
  for (int i = 0; i < 32; i++)
    mask[i] = gen_i32(gen, (i % 2) * 16 + i / 2);
  return LLVMBuildShuffleVector(gen->builder, first, second, LLVMConstVector(mask, 32), "");
}

/* An operand whose q is contiguous, rows p and p + 1 of each whole
 * 16-wide strip of q interleaved into 16 pairs: B's pair row, stored
 * whole; or (a transposed A) the 16 rows' pairs, stored as 32-bit values
 * 64 bytes apart. Covers p < k rounded down to even, q < count rounded
 * down to 16. */
static void pack_row_pairs(Gen *gen, LLVMValueRef dst, const Source *s, LLVMValueRef kp,
                           LLVMValueRef first_pair, LLVMValueRef pairs, LLVMValueRef strips,
                           bool b_pairs) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef vt = LLVMVectorType(gen->i16, 16);
  GenLoop r, strip;
  gen_loop_begin(gen, &r, first_pair, pairs);
  gen_loop_begin(gen, &strip, gen_i64(gen, 0), strips);
  LLVMValueRef p = gen_imul(gen, r.index, 2), q = gen_imul(gen, strip.index, 16);
  LLVMValueRef first = load_vector(gen, vt, source_at(gen, s, p, q), 2);
  LLVMValueRef second = load_vector(gen, vt, source_at(gen, s, gen_iadd(gen, p, gen_i64(gen, 1)), q), 2);
  LLVMValueRef row = interleave_rows(gen, first, second);
  LLVMValueRef to = gen_element(gen, gen->i16, dst, packed_index(gen, p, q, kp, b_pairs));
  if (b_pairs) {
    store_vector(gen, row, to, 64);
  } else {
    LLVMValueRef values = LLVMBuildBitCast(b, row, LLVMVectorType(gen->i32, 16), "");
    for (int j = 0; j < 16; j++) {
      LLVMValueRef at = LLVMBuildBitCast(b, gen_element(gen, gen->i16, to, gen_i64(gen, 32 * j)),
                                         LLVMPointerType(gen->i32, 0), "");
      LLVMSetAlignment(LLVMBuildStore(b, LLVMBuildExtractElement(b, values, gen_i32(gen, j), ""), at), 4);
    }
  }
  gen_loop_end(gen, &strip);
  gen_loop_end(gen, &r);
}

/* Blocks of 32 k x 16 of q through the 16 x 16 register transpose of
 * 32-bit k pairs: a transposed A (its rows q contiguous, k strided), each
 * k pair's two rows interleaved into 16 pairs (a 32-bit lane a row), the
 * block stored as 16 rows of 32 k (one 64-byte block row each); or a
 * transposed B (k contiguous), each column's 16 pairs loaded at once, the
 * block stored as 16 pair rows. Pair by pair, with 16 scalar stores 64
 * bytes apart (A) or a 32-bit copy a pair (B), this packing took as long
 * as the AMX products of a step's tn (k = 2048) and nt GEMMs. Covers
 * p < blocks * 32, q < strips * 16. */
static void pack_transposed(Gen *gen, LLVMValueRef dst, const Source *s, LLVMValueRef kp,
                            LLVMValueRef blocks, LLVMValueRef strips, bool pairs) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef vt = LLVMVectorType(gen->i16, 16), pairs_type = LLVMVectorType(gen->i32, 16);
  GenLoop block, strip;
  gen_loop_begin(gen, &block, gen_i64(gen, 0), blocks);
  gen_loop_begin(gen, &strip, gen_i64(gen, 0), strips);
  LLVMValueRef p0 = gen_imul(gen, block.index, 32), q = gen_imul(gen, strip.index, 16);
  LLVMValueRef m[16];
  for (int i = 0; i < 16; i++) {
    if (pairs) { /* column q + i's 16 pairs */
      m[i] = load_vector(gen, pairs_type, source_at(gen, s, p0, gen_iadd(gen, q, gen_i64(gen, i))), 2);
      continue;
    }
    LLVMValueRef p = gen_iadd(gen, p0, gen_i64(gen, 2 * i));
    LLVMValueRef first = load_vector(gen, vt, source_at(gen, s, p, q), 2);
    LLVMValueRef second = load_vector(gen, vt, source_at(gen, s, gen_iadd(gen, p, gen_i64(gen, 1)), q), 2);
    m[i] = LLVMBuildBitCast(b, interleave_rows(gen, first, second), pairs_type, "");
  }
  gen_transpose_square(gen, m, 16);
  for (int j = 0; j < 16; j++) {
    LLVMValueRef p = pairs ? gen_iadd(gen, p0, gen_i64(gen, 2 * j)) : p0;
    LLVMValueRef at = pairs ? q : gen_iadd(gen, q, gen_i64(gen, j));
    store_vector(gen, m[j], gen_element(gen, gen->i16, dst, packed_index(gen, p, at, kp, pairs)), 64);
  }
  gen_loop_end(gen, &strip);
  gen_loop_end(gen, &block);
}

/* B with k contiguous (transposed): columns [q0, q1)'s pairs [r0, r1) as
 * 32-bit copies. */
static void pack_b_columns(Gen *gen, LLVMValueRef dst, const Source *s, LLVMValueRef kp,
                           LLVMValueRef q0, LLVMValueRef q1, LLVMValueRef r0, LLVMValueRef r1) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef i32p = LLVMPointerType(gen->i32, 0);
  GenLoop q, r;
  gen_loop_begin(gen, &q, q0, q1);
  gen_loop_begin(gen, &r, r0, r1);
  LLVMValueRef p = gen_imul(gen, r.index, 2);
  LLVMValueRef x = LLVMBuildLoad2(b, gen->i32, LLVMBuildBitCast(b, source_at(gen, s, p, q.index), i32p, ""), "");
  LLVMSetAlignment(x, 2);
  LLVMValueRef to = gen_element(gen, gen->i16, dst, packed_index(gen, p, q.index, kp, true));
  LLVMSetAlignment(LLVMBuildStore(b, x, LLVMBuildBitCast(b, to, i32p, "")), 4);
  gen_loop_end(gen, &r);
  gen_loop_end(gen, &q);
}

void cpu_pack_bf16(Gen *gen, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef k, LLVMValueRef kp,
                   LLVMValueRef count, LLVMValueRef padded, LLVMValueRef sp, LLVMValueRef sq,
                   bool p_contiguous, bool pairs) {
  Source s = {src, sp, sq, LLVMBuildSub(gen->builder, count, gen_i64(gen, 1), "")};
  LLVMValueRef zero = gen_i64(gen, 0), even = and64(gen, k, -2);
  if (!pairs && p_contiguous) {
    LLVMValueRef done = pack_a_rows(gen, dst, &s, k, kp, padded);
    pack_elements(gen, dst, &s, kp, done, k, zero, padded, true, false);
  } else if (!p_contiguous) {
    LLVMValueRef whole = and64(gen, count, -16), first_pair = zero;
    if (!pairs) {
      pack_transposed(gen, dst, &s, kp, shr64(gen, k, 5), shr64(gen, whole, 4), false);
      first_pair = gen_imul(gen, shr64(gen, k, 5), 16);
    }
    pack_row_pairs(gen, dst, &s, kp, first_pair, shr64(gen, k, 1), shr64(gen, whole, 4), pairs);
    pack_elements(gen, dst, &s, kp, zero, even, whole, padded, false, pairs);
    pack_elements(gen, dst, &s, kp, even, k, zero, padded, false, pairs);
  } else {
    /* Whole strips and 32-k blocks transposed in registers; the strips'
     * last pairs, then the columns past them, pair by pair. */
    LLVMValueRef whole = and64(gen, count, -16), blocks = shr64(gen, k, 5);
    pack_transposed(gen, dst, &s, kp, blocks, shr64(gen, whole, 4), true);
    pack_b_columns(gen, dst, &s, kp, zero, whole, gen_imul(gen, blocks, 16), shr64(gen, k, 1));
    pack_b_columns(gen, dst, &s, kp, whole, padded, zero, shr64(gen, k, 1));
    pack_elements(gen, dst, &s, kp, even, k, zero, padded, true, true);
  }
  /* k's padding: zeros (a copy of a real value times zero could be NaN). */
  GenLoop q, p;
  gen_loop_begin(gen, &q, zero, padded);
  gen_loop_begin(gen, &p, k, kp);
  LLVMBuildStore(gen->builder, LLVMConstInt(gen->i16, 0, false),
                 gen_element(gen, gen->i16, dst, packed_index(gen, p.index, q.index, kp, pairs)));
  gen_loop_end(gen, &p);
  gen_loop_end(gen, &q);
}
