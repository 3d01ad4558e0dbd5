/* Fused attention's forward on AMX tiles: the CPU's counterpart of
 * ptx/attention_mma.c, for the same ops: attention (with or without the
 * attention_lse kernel formation paired with it), no mask input (causal or
 * not), whose q, k and v are bf16 values (--dtype bf16 graphs, where each
 * is a cast of a bf16 node, so their bf16 copies are exact). Every other
 * attention kernel, and this one on a CPU without AMX (the runtime's
 * tfm_cpu_kernels), runs attention.c's.
 *
 * A tile is 16 query rows of one batch; keys go in blocks of 32:
 *   S = Q K^T       two C tiles (16 x 16 f32 each) from the head in steps
 *                   of 32 (A: the rows' q, B: the block's k as pairs),
 *   softmax         per row on two zmm of 16 scores: scale, hide keys
 *                   past the end (and past the diagonal when causal), the
 *                   running max m and per-lane sums l, the output rescaled
 *                   by exp(m - m') (FlashAttention's online softmax, as
 *                   attention.c's),
 *   O += P V        P as two bf16 parts, p_hi = bf16(p) and p_lo =
 *                   bf16(p - p_hi), each an A tile of 16 rows x 32 keys,
 *                   against the block's v as pairs of keys (B), into O's
 *                   16 x 16 column tiles (loaded, multiplied into, stored).
 * o = O / l and lse = m + log l, as attention.c's. So products and sums
 * are f32, o differs from attention.c's by the order of its sums and p's
 * split (2^-17 of p), as the GPU's mma kernel does.
 *
 * Layouts (bf16 as i16; a tile 16 rows x 64 bytes, 512 elements): q of the
 * tile as A tiles, one a step of 32 along the head; k of the batch, packed
 * once a batch a call, as B tiles (row r: the pairs of head elements 2r,
 * 2r + 1 of 16 keys), block by block, step by step, two halves of 16
 * keys; v likewise per block and 16-column tile (row r: keys 2r, 2r + 1 of
 * each column). Head elements past D and keys past S are packed as zeros
 * and copies of the last key (their p is 0). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu_internal.h"
#include "tfmrt.h"

enum { ROWS = 16, KEYS = 32, TILE_ELEMENTS = 512, ROW_BYTES = 64 };
/* Key blocks whose scores are taken before one softmax step: the output's
 * rescaling and its trip through the tiles happen once a chunk, not once a
 * block (gpt's 256 keys are one chunk). */
enum { CHUNK_BLOCKS = 8 };

/* The most stack the packed k and v of one batch may take; past it the op
 * keeps attention.c's kernel. */
#define PACKED_MAX_BYTES (512 * 1024)

typedef struct Flash {
  Gen *gen;
  LLVMBuilderRef b;
  LLVMTypeRef vf, vi; /* <16 x float>, <16 x i32> */
  int64_t t, s, d, dv;
  int d_steps, v_tiles; /* the head in steps of 32, v's columns in tiles of 16 */
  int64_t key_blocks;   /* of all S keys */
  bool causal;
  double scale;
  LLVMValueRef q, k, v, out, lse;
  /* packed k and v of a batch, q of a tile; a block's scores (16 x 32
   * f32), p's two parts (A tiles); the tile's output sums O (16 x 16
   * v_tiles f32), running maxima (16) and lane sums of l (16 x 16) */
  LLVMValueRef kpack, vpack, qpack, scores, p_hi, p_lo, acc, max, sums, chunk_max;
} Flash;

static LLVMValueRef i64c(Flash *f, int64_t v) { return gen_i64(f->gen, v); }

static LLVMValueRef splat_i32(Flash *f, int32_t x) {
  LLVMValueRef lanes[16];
  for (int l = 0; l < 16; l++) lanes[l] = gen_i32(f->gen, x);
  return LLVMConstVector(lanes, 16);
}

static LLVMValueRef splat_f32(Flash *f, double x) {
  LLVMValueRef lanes[16];
  for (int l = 0; l < 16; l++) lanes[l] = LLVMConstReal(f->gen->f32, x);
  return LLVMConstVector(lanes, 16);
}

/* lanes[l] = first + l step */
static LLVMValueRef lane_indices(Flash *f, int first, int step) {
  LLVMValueRef lanes[16];
  for (int l = 0; l < 16; l++) lanes[l] = gen_i32(f->gen, first + l * step);
  return LLVMConstVector(lanes, 16);
}

static LLVMValueRef vector_at(Flash *f, LLVMTypeRef type, LLVMTypeRef element, LLVMValueRef base,
                              LLVMValueRef index) {
  return LLVMBuildBitCast(f->b, gen_element(f->gen, element, base, index), LLVMPointerType(type, 0), "");
}

/* 16 floats at base[0..16), of which the first `valid` (a constant) are
 * read and the rest are 0. */
static LLVMValueRef load16(Flash *f, LLVMValueRef base, int64_t valid) {
  if (valid <= 0) return LLVMConstNull(f->vf);
  if (valid >= 16) {
    LLVMValueRef v = LLVMBuildLoad2(f->b, f->vf, vector_at(f, f->vf, f->gen->f32, base, i64c(f, 0)), "");
    LLVMSetAlignment(v, 4);
    return v;
  }
  LLVMValueRef v = LLVMConstNull(f->vf);
  for (int l = 0; l < valid; l++)
    v = LLVMBuildInsertElement(f->b, v, gen_load_at(f->gen, f->gen->f32, base, i64c(f, l)),
                               gen_i32(f->gen, l), "");
  return v;
}

static void store16(Flash *f, LLVMValueRef v, LLVMValueRef base, int64_t valid) {
  if (valid >= 16) {
    LLVMSetAlignment(LLVMBuildStore(f->b, v, vector_at(f, f->vf, f->gen->f32, base, i64c(f, 0))), 4);
    return;
  }
  for (int l = 0; l < valid; l++)
    LLVMBuildStore(f->b, LLVMBuildExtractElement(f->b, v, gen_i32(f->gen, l), ""),
                   gen_element(f->gen, f->gen->f32, base, i64c(f, l)));
}

/* A packed row of 16 bf16 pairs (as i32) stored at element `index` of an
 * i16 array: 64 bytes, one tile row. */
static void store_pairs(Flash *f, LLVMValueRef pairs, LLVMValueRef base, LLVMValueRef index) {
  LLVMSetAlignment(LLVMBuildStore(f->b, pairs, vector_at(f, f->vi, f->gen->i16, base, index)), 4);
}

/* The bf16 pair (low, high) of two bf16-valued floats as one i32: their
 * high halves, exact for bf16 values. */
static LLVMValueRef pair_of(Flash *f, LLVMValueRef low, LLVMValueRef high) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef hi = LLVMBuildAnd(b, LLVMBuildBitCast(b, high, f->vi, ""), splat_i32(f, (int32_t)0xffff0000u), "");
  return LLVMBuildOr(b, hi, LLVMBuildLShr(b, LLVMBuildBitCast(b, low, f->vi, ""), splat_i32(f, 16), ""), "");
}

/* Elements [0, 32) of a row (the first `valid` read, the rest 0) as 16
 * pairs: lane p holds elements 2p and 2p + 1. */
static LLVMValueRef row_pairs(Flash *f, LLVMValueRef base, int64_t valid) {
  LLVMValueRef lo = load16(f, base, valid);
  LLVMValueRef hi = load16(f, gen_element(f->gen, f->gen->f32, base, i64c(f, 16)), valid - 16);
  LLVMValueRef even = LLVMBuildShuffleVector(f->b, lo, hi, lane_indices(f, 0, 2), "");
  LLVMValueRef odd = LLVMBuildShuffleVector(f->b, lo, hi, lane_indices(f, 1, 2), "");
  return pair_of(f, even, odd);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Stores 16 rows of 16 pairs as one tile, transposed (row p: lane p of
 * each row). */
static void store_transposed(Flash *f, LLVMValueRef *rows, LLVMValueRef base, LLVMValueRef tile) {
  gen_transpose_square(f->gen, rows, 16);
  for (int p = 0; p < 16; p++) store_pairs(f, rows[p], base, gen_iadd(f->gen, tile, i64c(f, 32 * p)));
}

/* k and v of batch `batch`, all S keys, into kpack (A tiles: per block,
 * step and half, 16 keys' elements 32 step on) and vpack (A tiles: per
 * block and column tile, 16 columns' 32 keys). */
static void pack_keys_values(Flash *f, LLVMValueRef batch) {
  Gen *gen = f->gen;
  LLVMValueRef kb = gen_element(gen, gen->f32, f->k, gen_imul(gen, batch, f->s * f->d));
  LLVMValueRef vb = gen_element(gen, gen->f32, f->v, gen_imul(gen, batch, f->s * f->dv));
  LLVMValueRef last = i64c(f, f->s - 1);
  GenLoop blk;
  gen_loop_begin(gen, &blk, i64c(f, 0), i64c(f, f->key_blocks));
  LLVMValueRef first = gen_imul(gen, blk.index, KEYS);
  for (int step = 0; step < f->d_steps; step++)
    for (int half = 0; half < 2; half++) {
      LLVMValueRef tile = gen_imul(gen, gen_iadd(gen, gen_imul(gen, blk.index, 2 * f->d_steps),
                                                 i64c(f, 2 * step + half)),
                                   TILE_ELEMENTS);
      for (int j = 0; j < 16; j++) {
        LLVMValueRef key = cpu_min64(gen, gen_iadd(gen, first, i64c(f, 16 * half + j)), last);
        LLVMValueRef at = gen_iadd(gen, gen_imul(gen, key, f->d), i64c(f, 32 * step));
        store_pairs(f, row_pairs(f, gen_element(gen, gen->f32, kb, at), min64(32, f->d - 32 * step)), f->kpack,
                    gen_iadd(gen, tile, i64c(f, 32 * j)));
      }
    }
  for (int ct = 0; ct < f->v_tiles; ct++) {
    int64_t valid = min64(16, f->dv - 16 * ct);
    LLVMValueRef pairs[16];
    for (int p = 0; p < 16; p++) { /* lane c: keys 2p, 2p + 1 of column 16 ct + c */
      LLVMValueRef key[2];
      for (int e = 0; e < 2; e++) {
        LLVMValueRef j = cpu_min64(gen, gen_iadd(gen, first, i64c(f, 2 * p + e)), last);
        key[e] = load16(f, gen_element(gen, gen->f32, vb, gen_iadd(gen, gen_imul(gen, j, f->dv), i64c(f, 16 * ct))),
                        valid);
      }
      pairs[p] = pair_of(f, key[0], key[1]);
    }
    store_transposed(f, pairs, f->vpack,
                     gen_imul(gen, gen_iadd(gen, gen_imul(gen, blk.index, f->v_tiles), i64c(f, ct)), TILE_ELEMENTS));
  }
  gen_loop_end(gen, &blk);
}

/* q of the tile's rows i0 .. i0 + n - 1 into qpack (B tiles: per step, row
 * p the pairs 2p, 2p + 1 of the 16 rows); its last 16 - n rows repeat row
 * n - 1 (their results are not stored). */
static void pack_queries(Flash *f, LLVMValueRef batch, LLVMValueRef i0, LLVMValueRef n) {
  Gen *gen = f->gen;
  LLVMValueRef qb = gen_element(gen, gen->f32, f->q, gen_imul(gen, batch, f->t * f->d));
  LLVMValueRef last = gen_iadd(gen, i0, LLVMBuildSub(f->b, n, i64c(f, 1), ""));
  for (int step = 0; step < f->d_steps; step++) {
    LLVMValueRef rows[16];
    for (int r = 0; r < 16; r++) {
      LLVMValueRef row = cpu_min64(gen, gen_iadd(gen, i0, i64c(f, r)), last);
      LLVMValueRef at = gen_iadd(gen, gen_imul(gen, row, f->d), i64c(f, 32 * step));
      rows[r] = row_pairs(f, gen_element(gen, gen->f32, qb, at), min64(32, f->d - 32 * step));
    }
    store_transposed(f, rows, f->qpack, i64c(f, step * TILE_ELEMENTS));
  }
}

/* The scores of key block blk, transposed: K Q^T into `dst` (32 keys x
 * 16 queries). */
static void block_scores(Flash *f, LLVMValueRef blk, LLVMValueRef dst) {
  Gen *gen = f->gen;
  LLVMValueRef row = i64c(f, ROW_BYTES);
  cpu_amx_zero(gen, 0);
  cpu_amx_zero(gen, 1);
  for (int step = 0; step < f->d_steps; step++) {
    LLVMValueRef tile = gen_imul(gen, gen_iadd(gen, gen_imul(gen, blk, 2 * f->d_steps), i64c(f, 2 * step)),
                                 TILE_ELEMENTS);
    cpu_amx_load(gen, 4, gen_element(gen, gen->i16, f->qpack, i64c(f, step * TILE_ELEMENTS)), row);
    cpu_amx_load(gen, 6, gen_element(gen, gen->i16, f->kpack, tile), row);
    cpu_amx_load(gen, 7, gen_element(gen, gen->i16, f->kpack, gen_iadd(gen, tile, i64c(f, TILE_ELEMENTS))), row);
    cpu_amx_dot(gen, 0, 6, 4);
    cpu_amx_dot(gen, 1, 7, 4);
  }
  cpu_amx_store(gen, 0, dst, row);
  cpu_amx_store(gen, 1, gen_element(gen, gen->f32, dst, i64c(f, 16 * 16)), row);
}

static LLVMValueRef max_of(Flash *f, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildSelect(f->b, LLVMBuildFCmp(f->b, LLVMRealOGT, x, y, ""), x, y, "");
}

/* Rows x[0] and x[1] (16 lanes each) rounded to bf16 with
 * vcvtne2ps2bf16 and interleaved into a B tile's row of pairs at element
 * `index` of `base`; the rounded values come back as floats when
 * `rounded` is not NULL. */
static void round_pair(Flash *f, LLVMValueRef *x, LLVMValueRef base, LLVMValueRef index, LLVMValueRef *rounded) {
  Gen *gen = f->gen;
  LLVMBuilderRef b = f->b;
  LLVMTypeRef halves = LLVMVectorType(gen->i16, 32);
  LLVMValueRef interleave[32];
  for (int l = 0; l < 32; l++) interleave[l] = gen_i32(gen, l / 2 + 16 * (l % 2));
  LLVMValueRef args[2] = {x[1], x[0]}; /* the second operand fills the low half */
  LLVMValueRef bits = gen_intrinsic(gen, "llvm.x86.avx512bf16.cvtne2ps2bf16.512", NULL, 0, args, 2);
  bits = LLVMBuildBitCast(b, bits, halves, "");
  LLVMValueRef row = LLVMBuildShuffleVector(b, bits, LLVMGetUndef(halves), LLVMConstVector(interleave, 32), "");
  LLVMSetAlignment(LLVMBuildStore(b, row, vector_at(f, halves, gen->i16, base, index)), 4);
  if (!rounded) return;
  for (int h = 0; h < 2; h++) {
    LLVMValueRef part = LLVMBuildShuffleVector(b, bits, LLVMGetUndef(halves), lane_indices(f, 16 * h, 1), "");
    LLVMValueRef wide = LLVMBuildShl(b, LLVMBuildZExt(b, part, f->vi, ""), splat_i32(f, 16), "");
    rounded[h] = LLVMBuildBitCast(b, wide, f->vf, "");
  }
}

/* Row e of the scores of key block blk (at `scores`), a lane per query:
 * scaled, -inf where hidden (past the keys' end, or the query's when
 * causal); *hidden says where. */
static LLVMValueRef visible_scores(Flash *f, LLVMValueRef scores, LLVMValueRef blk, int e, LLVMValueRef query,
                                   LLVMValueRef *hidden) {
  Gen *gen = f->gen;
  LLVMBuilderRef b = f->b;
  LLVMValueRef s = LLVMBuildFMul(b, load16(f, gen_element(gen, gen->f32, scores, i64c(f, 16 * e)), 16),
                                 splat_f32(f, f->scale), "");
  LLVMValueRef key = LLVMBuildAdd(b, LLVMBuildTrunc(b, gen_imul(gen, blk, KEYS), gen->i32, ""), gen_i32(gen, e), "");
  *hidden = gen_splat(gen, LLVMBuildICmp(b, LLVMIntSGE, key, gen_i32(gen, (int32_t)f->s), ""), 16);
  if (f->causal)
    *hidden = LLVMBuildOr(b, *hidden, LLVMBuildICmp(b, LLVMIntSGT, gen_splat(gen, key, 16), query, ""), "");
  return LLVMBuildSelect(b, *hidden, splat_f32(f, -INFINITY), s, "");
}

/* The softmax step of a chunk (key blocks first .. first + count - 1,
 * their scores in `scores`) for the tile whose first query is i0, a lane
 * each: the chunk's max, the rescaling of the sums and the output by
 * exp(m - m'), then p = exp(s - m') and its two parts as B tiles, a block
 * 512 elements on. */
static void chunk_softmax(Flash *f, LLVMValueRef first, LLVMValueRef count, LLVMValueRef i0) {
  Gen *gen = f->gen;
  LLVMBuilderRef b = f->b;
  LLVMValueRef neg_inf = splat_f32(f, -INFINITY), zero = LLVMConstNull(f->vf);
  LLVMValueRef query = LLVMBuildAdd(b, gen_splat(gen, LLVMBuildTrunc(b, i0, gen->i32, ""), 16),
                                    lane_indices(f, 0, 1), "");
  LLVMValueRef m_old = LLVMBuildLoad2(b, f->vf, f->max, "");
  LLVMBuildStore(b, m_old, f->chunk_max);
  GenLoop blk;
  gen_loop_begin(gen, &blk, i64c(f, 0), count);
  LLVMValueRef scores = gen_element(gen, gen->f32, f->scores, gen_imul(gen, blk.index, KEYS * 16));
  LLVMValueRef m = LLVMBuildLoad2(b, f->vf, f->chunk_max, ""), hidden;
  for (int e = 0; e < KEYS; e++)
    m = max_of(f, m, visible_scores(f, scores, gen_iadd(gen, first, blk.index), e, query, &hidden));
  LLVMBuildStore(b, m, f->chunk_max);
  gen_loop_end(gen, &blk);

  LLVMValueRef m_new = LLVMBuildLoad2(b, f->vf, f->chunk_max, "");
  /* a query still without a visible key keeps 0 (its shift taken as 0) */
  LLVMValueRef shift = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, m_new, neg_inf, ""), zero, m_new, "");
  LLVMValueRef alpha = gen_exp_f32(gen, LLVMBuildFSub(b, m_old, shift, ""));
  LLVMBuildStore(b, m_new, f->max);
  LLVMBuildStore(b, LLVMBuildFMul(b, LLVMBuildLoad2(b, f->vf, f->sums, ""), alpha, ""), f->sums);
  for (int c = 0; c < 16 * f->v_tiles; c++) {
    LLVMValueRef at = gen_element(gen, gen->f32, f->acc, i64c(f, 16 * c));
    store16(f, LLVMBuildFMul(b, load16(f, at, 16), alpha, ""), at, 16);
  }

  /* a pair of keys at a time, which keeps a few vectors live (all 32 rows
   * at once spilled most of them) */
  gen_loop_begin(gen, &blk, i64c(f, 0), count);
  scores = gen_element(gen, gen->f32, f->scores, gen_imul(gen, blk.index, KEYS * 16));
  LLVMValueRef sum = LLVMBuildLoad2(b, f->vf, f->sums, "");
  LLVMValueRef tile = gen_imul(gen, blk.index, TILE_ELEMENTS);
  for (int pair = 0; pair < KEYS / 2; pair++) {
    LLVMValueRef p[2], lo[2], rounded[2];
    for (int e = 0; e < 2; e++) {
      LLVMValueRef s = visible_scores(f, scores, gen_iadd(gen, first, blk.index), 2 * pair + e, query, &hidden);
      /* hidden lanes take exp(0), not exp(-inf), whose underflow costs a
       * microcode assist on these CPUs */
      LLVMValueRef x = LLVMBuildSelect(b, hidden, zero, LLVMBuildFSub(b, s, shift, ""), "");
      p[e] = LLVMBuildSelect(b, hidden, zero, gen_exp_f32(gen, x), "");
      sum = LLVMBuildFAdd(b, sum, p[e], "");
    }
    LLVMValueRef at = gen_iadd(gen, tile, i64c(f, 32 * pair));
    round_pair(f, p, f->p_hi, at, rounded);
    for (int e = 0; e < 2; e++) lo[e] = LLVMBuildFSub(b, p[e], rounded[e], "");
    round_pair(f, lo, f->p_lo, at, NULL);
  }
  LLVMBuildStore(b, sum, f->sums);
  gen_loop_end(gen, &blk);
}

/* O^T += V^T (p_hi + p_lo)^T over a chunk's key blocks, four 16-column
 * tiles of v at a time held in tiles 0-3 across the blocks (independent
 * chains; A tiles 6 and 7 in turn, p's parts in 4 and 5). */
static void chunk_output(Flash *f, LLVMValueRef first, LLVMValueRef count) {
  Gen *gen = f->gen;
  LLVMValueRef row = i64c(f, ROW_BYTES);
  for (int ct0 = 0; ct0 < f->v_tiles; ct0 += 4) {
    int group = (int)min64(4, f->v_tiles - ct0);
    for (int g = 0; g < group; g++)
      cpu_amx_load(gen, g, gen_element(gen, gen->f32, f->acc, i64c(f, TILE_ELEMENTS / 2 * (ct0 + g))), row);
    GenLoop blk;
    gen_loop_begin(gen, &blk, i64c(f, 0), count);
    LLVMValueRef at = gen_imul(gen, blk.index, TILE_ELEMENTS);
    cpu_amx_load(gen, 4, gen_element(gen, gen->i16, f->p_hi, at), row);
    cpu_amx_load(gen, 5, gen_element(gen, gen->i16, f->p_lo, at), row);
    for (int g = 0; g < group; g++) {
      LLVMValueRef tile = gen_imul(
          gen, gen_iadd(gen, gen_imul(gen, gen_iadd(gen, first, blk.index), f->v_tiles), i64c(f, ct0 + g)),
          TILE_ELEMENTS);
      cpu_amx_load(gen, 6 + g % 2, gen_element(gen, gen->i16, f->vpack, tile), row);
      cpu_amx_dot(gen, g, 6 + g % 2, 4);
      cpu_amx_dot(gen, g, 6 + g % 2, 5);
    }
    gen_loop_end(gen, &blk);
    for (int g = 0; g < group; g++)
      cpu_amx_store(gen, g, gen_element(gen, gen->f32, f->acc, i64c(f, TILE_ELEMENTS / 2 * (ct0 + g))), row);
  }
}

/* Rows row0 .. row0 + n - 1 of o (and lse): O / l and m + log l, O^T
 * transposed back; a row that saw no key gets o = 0 and lse = -inf. */
static void store_rows(Flash *f, LLVMValueRef row0, LLVMValueRef n) {
  Gen *gen = f->gen;
  LLVMBuilderRef b = f->b;
  LLVMValueRef l = LLVMBuildLoad2(b, f->vf, f->sums, "");
  LLVMValueRef empty = LLVMBuildFCmp(b, LLVMRealOEQ, l, LLVMConstNull(f->vf), "");
  LLVMValueRef denom = LLVMBuildSelect(b, empty, splat_f32(f, 1.0), l, "");
  LLVMValueRef o[16][16]; /* [column tile][query] */
  for (int ct = 0; ct < f->v_tiles; ct++) {
    for (int c = 0; c < 16; c++)
      o[ct % 16][c] = LLVMBuildFDiv(
          b, load16(f, gen_element(gen, gen->f32, f->acc, i64c(f, 16 * (16 * ct + c))), 16), denom, "");
    gen_transpose_square(gen, o[ct % 16], 16);
    for (int q = 0; q < 16; q++) {
      LLVMValueRef row = gen_iadd(gen, row0, i64c(f, q));
      LLVMBasicBlockRef store = LLVMAppendBasicBlockInContext(gen->context, LLVMGetBasicBlockParent(LLVMGetInsertBlock(b)), "store");
      LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, LLVMGetBasicBlockParent(LLVMGetInsertBlock(b)), "next");
      LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i64c(f, q), n, ""), store, next);
      LLVMPositionBuilderAtEnd(b, store);
      store16(f, o[ct % 16][q],
              gen_element(gen, gen->f32, f->out, gen_iadd(gen, gen_imul(gen, row, f->dv), i64c(f, 16 * ct))),
              min64(16, f->dv - 16 * ct));
      if (f->lse && ct == 0) {
        LLVMValueRef lq = LLVMBuildExtractElement(b, l, gen_i32(gen, q), "");
        LLVMValueRef m = LLVMBuildExtractElement(b, LLVMBuildLoad2(b, f->vf, f->max, ""), gen_i32(gen, q), "");
        LLVMValueRef lse = LLVMBuildFAdd(b, m, gen_libcall(gen, "logf", gen->f32, &gen->f32, &lq, 1), "");
        LLVMValueRef none = LLVMBuildExtractElement(b, empty, gen_i32(gen, q), "");
        LLVMBuildStore(b, LLVMBuildSelect(b, none, LLVMConstReal(gen->f32, -INFINITY), lse, ""),
                       gen_element(gen, gen->f32, f->lse, row));
      }
      LLVMBuildBr(b, next);
      LLVMPositionBuilderAtEnd(b, next);
    }
  }
}

static LLVMValueRef stack_array(Flash *f, LLVMTypeRef element, int64_t count, const char *name) {
  LLVMValueRef a = gen_entry_alloca(f->gen, LLVMArrayType(element, (unsigned)count), name);
  LLVMSetAlignment(a, 64);
  return LLVMBuildBitCast(f->b, a, LLVMPointerType(element, 0), "");
}

static int64_t packed_bytes(int64_t s, int64_t d, int64_t dv) {
  int64_t blocks = (s + KEYS - 1) / KEYS;
  return blocks * KEYS * ((d + 31) / 32 * 32 + (dv + 15) / 16 * 16) * 2;
}

static bool applies(const Gen *gen, const Kernel *kernel) {
  const Graph *g = gen->graph;
  const GraphNode *n = graph_node(g, kernel->root);
  if (gen->vector_bits < 512 || n->op != GRAPH_OP_ATTENTION || n->dtype != GRAPH_F32 || n->num_inputs != 3)
    return false;
  for (int i = 0; i < 3; i++)
    if (!kernel_bf16_valued(g, n->inputs[i])) return false;
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape, *vs = &graph_node(g, n->inputs[2])->shape;
  int64_t s = vs->dims[vs->rank - 2];
  return s < INT32_MAX / 2 && qs->dims[qs->rank - 2] < INT32_MAX / 2 &&
         packed_bytes(s, qs->dims[qs->rank - 1], vs->dims[vs->rank - 1]) <= PACKED_MAX_BYTES;
}

/* void name(i8 *args, i64 begin, i64 end): rows [begin, end) of the
 * output, in tiles of up to 16 within a batch. */
static LLVMValueRef emit_forward(Gen *gen, const Kernel *kernel, const char *name) {
  const Graph *g = gen->graph;
  const GraphNode *n = graph_node(g, kernel->root);
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape, *vs = &graph_node(g, n->inputs[2])->shape;
  LLVMTypeRef params[3] = {gen->ptr, gen->i64, gen->i64};
  LLVMValueRef fn = cpu_gemm_function_begin(gen, name, params, 3, cpu_amx_family.features);
  Flash f = {.gen = gen, .b = gen->builder, .vf = LLVMVectorType(gen->f32, 16),
             .vi = LLVMVectorType(gen->i32, 16), .t = qs->dims[qs->rank - 2], .d = qs->dims[qs->rank - 1],
             .s = vs->dims[vs->rank - 2], .dv = vs->dims[vs->rank - 1], .causal = n->attrs.causal,
             .scale = n->attrs.scale};
  LLVMBuilderRef b = f.b;
  f.d_steps = (int)((f.d + 31) / 32);
  f.v_tiles = (int)((f.dv + 15) / 16);
  f.key_blocks = (f.s + KEYS - 1) / KEYS;
  LLVMValueRef args = LLVMGetParam(fn, 0), begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
  LLVMValueRef *in[3] = {&f.q, &f.k, &f.v};
  for (int i = 0; i < 3; i++) *in[i] = gen_kernel_arg(gen, args, gen_kernel_arg_of(gen, kernel, n->inputs[i]), gen->f32);
  f.out = gen_kernel_arg(gen, args, 0, gen->f32);
  f.lse = kernel->also != GRAPH_NONE ? gen_kernel_arg(gen, args, 1, gen->f32) : NULL;
  f.kpack = stack_array(&f, gen->i16, f.key_blocks * 2 * f.d_steps * TILE_ELEMENTS, "kpack");
  f.vpack = stack_array(&f, gen->i16, f.key_blocks * f.v_tiles * TILE_ELEMENTS, "vpack");
  f.qpack = stack_array(&f, gen->i16, f.d_steps * TILE_ELEMENTS, "qpack");
  f.scores = stack_array(&f, gen->f32, CHUNK_BLOCKS * KEYS * ROWS, "scores");
  f.p_hi = stack_array(&f, gen->i16, CHUNK_BLOCKS * TILE_ELEMENTS, "p_hi");
  f.p_lo = stack_array(&f, gen->i16, CHUNK_BLOCKS * TILE_ELEMENTS, "p_lo");
  f.acc = stack_array(&f, gen->f32, ROWS * 16 * f.v_tiles, "acc");
  f.max = gen_entry_alloca(gen, f.vf, "max");
  f.sums = gen_entry_alloca(gen, f.vf, "sums");
  f.chunk_max = gen_entry_alloca(gen, f.vf, "chunk_max");
  LLVMValueRef packed = gen_entry_alloca(gen, gen->i64, "packed_batch");
  LLVMValueRef next_row = gen_entry_alloca(gen, gen->i64, "row");
  LLVMBuildStore(b, i64c(&f, -1), packed);
  LLVMBuildStore(b, begin, next_row);
  cpu_amx_configure(gen);

  LLVMBasicBlockRef header = LLVMAppendBasicBlockInContext(gen->context, fn, "tiles");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(gen->context, fn, "tile");
  LLVMBasicBlockRef pack = LLVMAppendBasicBlockInContext(gen->context, fn, "pack");
  LLVMBasicBlockRef rows = LLVMAppendBasicBlockInContext(gen->context, fn, "rows");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(gen->context, fn, "done");
  LLVMBuildBr(b, header);
  LLVMPositionBuilderAtEnd(b, header);
  LLVMValueRef row0 = LLVMBuildLoad2(b, gen->i64, next_row, "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, row0, end, ""), body, done);
  LLVMPositionBuilderAtEnd(b, body);
  LLVMValueRef batch = LLVMBuildUDiv(b, row0, i64c(&f, f.t), "");
  LLVMValueRef i0 = LLVMBuildURem(b, row0, i64c(&f, f.t), "");
  LLVMValueRef count = cpu_min64(gen, cpu_min64(gen, i64c(&f, ROWS), LLVMBuildSub(b, end, row0, "")),
                                 LLVMBuildSub(b, i64c(&f, f.t), i0, ""));
  LLVMValueRef fresh = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildLoad2(b, gen->i64, packed, ""), batch, "");
  LLVMBuildCondBr(b, fresh, rows, pack);
  LLVMPositionBuilderAtEnd(b, pack);
  pack_keys_values(&f, batch);
  LLVMBuildStore(b, batch, packed);
  LLVMBuildBr(b, rows);
  LLVMPositionBuilderAtEnd(b, rows);
  pack_queries(&f, batch, i0, count);
  LLVMBuildStore(b, splat_f32(&f, -INFINITY), f.max);
  LLVMBuildStore(b, LLVMConstNull(f.vf), f.sums);
  LLVMBuildMemSet(b, LLVMBuildBitCast(b, f.acc, gen->ptr, ""), LLVMConstInt(gen->i8, 0, false),
                  i64c(&f, ROWS * 16 * f.v_tiles * 4), 64);
  /* keys [0, i0 + count) when causal, else all */
  LLVMValueRef keys = f.causal ? gen_iadd(gen, i0, count) : i64c(&f, f.s);
  LLVMValueRef blocks = LLVMBuildUDiv(b, gen_iadd(gen, keys, i64c(&f, KEYS - 1)), i64c(&f, KEYS), "");
  GenLoop chunk, blk;
  cpu_step_loop_begin(gen, &chunk, blocks, CHUNK_BLOCKS);
  LLVMValueRef in_chunk = cpu_min64(gen, i64c(&f, CHUNK_BLOCKS), LLVMBuildSub(b, blocks, chunk.index, ""));
  gen_loop_begin(gen, &blk, i64c(&f, 0), in_chunk);
  block_scores(&f, gen_iadd(gen, chunk.index, blk.index),
               gen_element(gen, gen->f32, f.scores, gen_imul(gen, blk.index, KEYS * ROWS)));
  gen_loop_end(gen, &blk);
  chunk_softmax(&f, chunk.index, in_chunk, i0);
  chunk_output(&f, chunk.index, in_chunk);
  cpu_step_loop_end(gen, &chunk);
  store_rows(&f, row0, count);
  LLVMBuildStore(b, gen_iadd(gen, row0, count), next_row);
  LLVMBuildBr(b, header);
  LLVMPositionBuilderAtEnd(b, done);
  cpu_amx_release(gen);
  LLVMBuildRetVoid(b);
  return fn;
}

void cpu_emit_attention_kernel(Gen *gen, int function, const Kernel *kernel) {
  emit_attention_kernel(gen, function, kernel, NULL);
  if (!applies(gen, kernel)) return;
  /* attention.c's kernel becomes NAME_rows, the tiles' NAME_amx, and the
   * plan's function NAME picks one at each call */
  LLVMValueRef rows = gen->functions[function];
  size_t length;
  char name[192], renamed[208];
  snprintf(name, sizeof name, "%s", LLVMGetValueName2(rows, &length));
  snprintf(renamed, sizeof renamed, "%s_rows", name);
  LLVMSetValueName2(rows, renamed, strlen(renamed));
  snprintf(renamed, sizeof renamed, "%s_amx", name);
  LLVMValueRef tiles = emit_forward(gen, kernel, renamed);
  LLVMValueRef fn = gen_kernel_function(gen, function);
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef args[3] = {LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), LLVMGetParam(fn, 2)};
  LLVMValueRef family = gen_libcall(gen, "tfm_cpu_kernels", gen->i32, NULL, NULL, 0);
  LLVMBasicBlockRef on_tiles = LLVMAppendBasicBlockInContext(gen->context, fn, "amx");
  LLVMBasicBlockRef on_rows = LLVMAppendBasicBlockInContext(gen->context, fn, "rows");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, family, gen_i32(gen, TFM_CPU_KERNELS_AMX), ""), on_tiles,
                  on_rows);
  LLVMPositionBuilderAtEnd(b, on_tiles);
  LLVMBuildCall2(b, gen->range_fn, tiles, args, 3, "");
  LLVMBuildRetVoid(b);
  LLVMPositionBuilderAtEnd(b, on_rows);
  LLVMBuildCall2(b, gen->range_fn, rows, args, 3, "");
  LLVMBuildRetVoid(b);
}
