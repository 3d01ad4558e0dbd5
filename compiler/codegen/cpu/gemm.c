/* The generated GEMM: C = op(A) op(B) for one matrix, shape-generic (m, n,
 * k and the leading dimensions are arguments), so a module has one function
 * per (dtype, transpose_a, transpose_b) and every dot kernel calls it.
 *
 * Goto/BLIS structure: the columns of C go in NC-wide panels, k in KC-long
 * blocks, the rows in MC-tall blocks, in one of two loop orders chosen at
 * run time from n and k (emit_gemm); B's block is packed into thread
 * scratch (the runtime's tfm_thread_scratch) as NR-column slivers and A's
 * as MR-row slivers, both zero-padded, so one register-blocked
 * micro-kernel computes every MR x NR tile of C with vector loads of B and
 * broadcasts of A, each sliver read in order. A block's last rows, when
 * fewer than MR, run a micro-kernel of a third or two thirds of MR rows;
 * edge tiles run through a small MR x NR tile on the stack.
 *
 * Each k block of an element is summed in k ascending order from zero and
 * then added to C (the first block stores its sum): the micro-kernel reads
 * C after its k loop, with the tile's lines prefetched at its start.
 * Products are added with llvm.fmuladd (one rounding where the target has
 * FMA: twice the peak of a separate multiply and add on cores whose two
 * vector ports do both), so results differ from the evaluator's
 * by rounding; tests/codegen bound a dot's error relative to
 * sum_k |a_ik| |b_kj|. Nothing splits k, so the result does not depend on
 * how the rows are shared among threads. */
#include <stdio.h>
#include <string.h>

#include "cpu_internal.h"

/* The blocks of one loop order: mc rows of A, kc of k, nc columns of B. */
typedef struct GemmBlocks {
  int64_t mc, kc, nc;
} GemmBlocks;

/* The register tile and the cache blocks for a vector width. */
typedef struct GemmGeometry {
  int lanes;          /* elements per vector */
  int mr, nv;         /* tile: mr rows x nv vectors (nr = nv * lanes columns) */
  GemmBlocks columns; /* B's column blocks outermost: any n, where rows is not chosen */
  GemmBlocks rows;    /* A's row blocks outermost, for wide C or long k (mc = 0: none) */
} GemmGeometry;

static unsigned element_bytes(const Gen *gen, LLVMTypeRef t) { return t == gen->f64 ? 8 : 4; }

static GemmGeometry geometry(const Gen *gen, LLVMTypeRef t) {
  int bytes = (int)element_bytes(gen, t);
  GemmGeometry g;
  if (gen->vector_bits >= 512) {
    /* 32 registers: 12 x 2 accumulators, two of B and a broadcast. kc =
     * 512 halves the passes over C that kc = 256 made (each k block reads
     * and writes the whole of C: from L3 once C passes the 2 MiB L2, n >=
     * 1024), at the price of a kc x nr micro-panel of B (64 KiB in f32)
     * larger than the 48 KiB L1: its 128 bytes a k step come from L2,
     * which keeps up. mc = 192 keeps the packed A block (384 KiB) in L2
     * beside the B micro-panels passing through. One thread, CPU time,
     * square 2048, three runs: 126-133 GFLOP/s with mc 432, kc 256 against
     * 149-159 (bench/RESULTS.md, 2026-12-07).
     *
     * Past n = 1024 the column blocks would pack A once per block; the row
     * order packs a thread's rows (up to 1032) once per k block of 384 and
     * B in blocks of 384 x 512 (768 KiB, in L2), each 12 x 384 A sliver
     * (18 KiB) staying in L1 while B's slivers pass. Square 2048 and
     * [2048 x 512] x [512 x 4096], two threads: 5-10% faster than the
     * column order; also 1-5% where n >= 512 and k > 512 (emit_gemm;
     * bench/RESULTS.md, stop 41). Measured in f32 only, so f64 keeps the
     * column order. */
    g = (GemmGeometry){.lanes = 64 / bytes, .mr = 12, .nv = 2,
                       .columns = {.mc = 192, .kc = 512, .nc = 1024}};
    if (bytes == 4)
      g.rows = (GemmBlocks){.mc = 1032, .kc = 384, .nc = 512};
  } else {
    /* 16 registers: 6 x 2 accumulators, two of B and a broadcast. */
    g = (GemmGeometry){.lanes = 32 / bytes, .mr = 6, .nv = 2,
                       .columns = {.mc = 144, .kc = 256, .nc = 1024}};
  }
  return g;
}

static LLVMValueRef add(Gen *gen, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildAdd(gen->builder, a, b, "");
}

static LLVMValueRef mul(Gen *gen, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildMul(gen->builder, a, b, "");
}

LLVMValueRef cpu_min64(Gen *gen, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef bl = gen->builder;
  return LLVMBuildSelect(bl, LLVMBuildICmp(bl, LLVMIntSLT, a, b, ""), a, b, "");
}

void cpu_step_loop_begin(Gen *gen, GenLoop *loop, LLVMValueRef end, int64_t step) {
  LLVMValueRef count = LLVMBuildSDiv(gen->builder, add(gen, end, gen_i64(gen, step - 1)),
                                     gen_i64(gen, step), "");
  gen_loop_begin(gen, loop, gen_i64(gen, 0), count);
  loop->index = mul(gen, loop->index, gen_i64(gen, step));
}

void cpu_step_loop_end(Gen *gen, GenLoop *loop) {
  /* gen_loop_end adds 1 to the index it holds: give it the counter back. */
  loop->index = LLVMBuildLoad2(gen->builder, gen->i64, loop->counter, "");
  gen_loop_end(gen, loop);
}

LLVMValueRef cpu_gemm_function_begin(Gen *gen, const char *name, LLVMTypeRef *params,
                                     int num_params, const char *features) {
  LLVMValueRef fn = LLVMAddFunction(
      gen->module, name, LLVMFunctionType(gen->void_type, params, (unsigned)num_params, false));
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  static const char *const attributes[] = {"noinline", "nounwind"};
  gen_add_attributes(gen, fn, attributes, 2);
  if (features) {
    /* Added to the target CPU's own features for this function alone, so
     * that a module for a CPU without them can hold it (it runs only where
     * tfm_cpu_kernels says the CPU has them). */
    const char *key = "target-features";
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(gen->context, key, (unsigned)strlen(key),
                                                      features, (unsigned)strlen(features)));
  }
  LLVMPositionBuilderAtEnd(gen->builder, LLVMAppendBasicBlockInContext(gen->context, fn, "entry"));
  return fn;
}

/* void micro(i64 kc, T *a, T *b, T *c, i64 ldc, i1 accumulate):
 * c[r * ldc + j] = (accumulate ? c : 0) + sum_p a[p * MR + r] b[p * nr + j]
 * (the sum from zero in p order, then added to c) over the full mr x nr
 * tile (mr: g->mr, or a part of it, micro_kernel); a is a packed sliver of
 * A, MR = g->mr elements a k step whatever mr is. */
static LLVMValueRef emit_micro_kernel(Gen *gen, LLVMTypeRef t, const GemmGeometry *g, int mr,
                                      const char *name) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef tp = LLVMPointerType(t, 0);
  LLVMTypeRef vt = LLVMVectorType(t, (unsigned)g->lanes);
  LLVMTypeRef vp = LLVMPointerType(vt, 0);
  LLVMTypeRef params[6] = {gen->i64, tp, tp, tp, gen->i64, gen->i1};
  LLVMValueRef fn = cpu_gemm_function_begin(gen, name, params, 6, NULL);
  LLVMValueRef kc = LLVMGetParam(fn, 0), a = LLVMGetParam(fn, 1), bp = LLVMGetParam(fn, 2);
  LLVMValueRef c = LLVMGetParam(fn, 3), ldc = LLVMGetParam(fn, 4);
  int nv = g->nv, nr = nv * g->lanes;
  LLVMValueRef acc[16][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++)
      acc[r][v] = gen_entry_alloca(gen, vt, "acc");
  /* C is read after the k loop, not before it: the tile's 2 x mr cache
   * lines are prefetched here, and their misses overlap the loop instead of
   * stalling its start. Into L2 (prefetcht1), not L1: with ldc a multiple
   * of 1024 f32 the tile's lines share one L1 set, where lines fetched at
   * the start were evicted again by A and B before the loop ended (one
   * thread, n = 1024 cases 3-12% faster; bench/RESULTS.md, 2026-12-07).
   * The block's products are summed
   * from zero and then added to C, so each element is C + (its sum over this
   * k block), in a fixed order whatever the threads do. */
  unsigned align = element_bytes(gen, t);
  LLVMTypeRef i8p = LLVMPointerType(gen->i8, 0);
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) {
      LLVMValueRef at = add(gen, mul(gen, gen_i64(gen, r), ldc), gen_i64(gen, v * g->lanes));
      LLVMValueRef args[4] = {LLVMBuildBitCast(b, gen_element(gen, t, c, at), i8p, ""),
                              gen_i32(gen, 0), gen_i32(gen, 2), gen_i32(gen, 1)};
      LLVMTypeRef pt = i8p;
      gen_intrinsic(gen, "llvm.prefetch", &pt, 1, args, 4);
      LLVMBuildStore(b, LLVMConstNull(vt), acc[r][v]);
    }
  GenLoop p;
  gen_loop_begin(gen, &p, gen_i64(gen, 0), kc);
  LLVMValueRef bv[4];
  for (int v = 0; v < nv; v++) {
    LLVMValueRef at = add(gen, mul(gen, p.index, gen_i64(gen, nr)), gen_i64(gen, v * g->lanes));
    LLVMValueRef x = LLVMBuildLoad2(b, vt, LLVMBuildBitCast(b, gen_element(gen, t, bp, at), vp, ""), "");
    LLVMSetAlignment(x, align);
    bv[v] = x;
  }
  for (int r = 0; r < mr; r++) {
    LLVMValueRef at = add(gen, mul(gen, p.index, gen_i64(gen, g->mr)), gen_i64(gen, r));
    LLVMValueRef s = gen_load_at(gen, t, a, at);
    LLVMValueRef splat = gen_splat(gen, s, (unsigned)g->lanes);
    for (int v = 0; v < nv; v++)
      LLVMBuildStore(b, gen_fmuladd(gen, splat, bv[v], LLVMBuildLoad2(b, vt, acc[r][v], "")),
                     acc[r][v]);
  }
  gen_loop_end(gen, &p);
  LLVMBasicBlockRef to_c = LLVMAppendBasicBlockInContext(gen->context, fn, "add_to_c");
  LLVMBasicBlockRef store = LLVMAppendBasicBlockInContext(gen->context, fn, "store");
  LLVMBuildCondBr(b, LLVMGetParam(fn, 5), to_c, store);
  LLVMPositionBuilderAtEnd(b, to_c);
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) {
      LLVMValueRef at = add(gen, mul(gen, gen_i64(gen, r), ldc), gen_i64(gen, v * g->lanes));
      LLVMValueRef x = LLVMBuildLoad2(b, vt, LLVMBuildBitCast(b, gen_element(gen, t, c, at), vp, ""), "");
      LLVMSetAlignment(x, align);
      LLVMBuildStore(b, LLVMBuildFAdd(b, x, LLVMBuildLoad2(b, vt, acc[r][v], ""), ""), acc[r][v]);
    }
  LLVMBuildBr(b, store);
  LLVMPositionBuilderAtEnd(b, store);
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) {
      LLVMValueRef at = add(gen, mul(gen, gen_i64(gen, r), ldc), gen_i64(gen, v * g->lanes));
      LLVMValueRef s = LLVMBuildStore(b, LLVMBuildLoad2(b, vt, acc[r][v], ""),
                                      LLVMBuildBitCast(b, gen_element(gen, t, c, at), vp, ""));
      LLVMSetAlignment(s, align);
    }
  LLVMBuildRetVoid(b);
  return fn;
}

/* One full sliver's w elements at one p: a <w x T> load where q is
 * contiguous, w scalar loads (stride sq) otherwise; bf16 bits widened to f32
 * element by element. */
static LLVMValueRef load_sliver_row(Gen *gen, LLVMTypeRef t, LLVMTypeRef st, LLVMValueRef row,
                                    LLVMValueRef sq, int w, bool q_contiguous, bool from_bf16) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef vt = LLVMVectorType(t, (unsigned)w);
  if (q_contiguous && !from_bf16) {
    LLVMValueRef x = LLVMBuildLoad2(b, vt, LLVMBuildBitCast(b, row, LLVMPointerType(vt, 0), ""), "");
    LLVMSetAlignment(x, element_bytes(gen, t));
    return x;
  }
  LLVMValueRef x = LLVMGetUndef(vt);
  for (int i = 0; i < w; i++) {
    LLVMValueRef e = gen_load_at(gen, st, row, q_contiguous ? gen_i64(gen, i) : mul(gen, gen_i64(gen, i), sq));
    x = LLVMBuildInsertElement(b, x, from_bf16 ? gen_bf16_widen(gen, e) : e, gen_i32(gen, i), "");
  }
  return x;
}

static void store_sliver_row(Gen *gen, LLVMTypeRef t, LLVMValueRef x, LLVMValueRef to) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef s = LLVMBuildStore(b, x, LLVMBuildBitCast(b, to, LLVMPointerType(LLVMTypeOf(x), 0), ""));
  LLVMSetAlignment(s, element_bytes(gen, t));
}

/* The 4 x 4 transpose of rows r[0..3] (<4 x T> each): c[j][i] = r[i][j]. */
static void transpose4(Gen *gen, LLVMValueRef r[4], LLVMValueRef c[4]) {
  LLVMBuilderRef b = gen->builder;
  static const int lo[4] = {0, 4, 1, 5}, hi[4] = {2, 6, 3, 7};
  static const int first[4] = {0, 1, 4, 5}, second[4] = {2, 3, 6, 7};
  LLVMValueRef mask[4][4];
  for (int i = 0; i < 4; i++) {
    mask[0][i] = gen_i32(gen, lo[i]), mask[1][i] = gen_i32(gen, hi[i]);
    mask[2][i] = gen_i32(gen, first[i]), mask[3][i] = gen_i32(gen, second[i]);
  }
  LLVMValueRef m[4];
  for (int i = 0; i < 4; i++)
    m[i] = LLVMConstVector(mask[i], 4);
  LLVMValueRef t[4] = {LLVMBuildShuffleVector(b, r[0], r[1], m[0], ""),
                       LLVMBuildShuffleVector(b, r[0], r[1], m[1], ""),
                       LLVMBuildShuffleVector(b, r[2], r[3], m[0], ""),
                       LLVMBuildShuffleVector(b, r[2], r[3], m[1], "")};
  c[0] = LLVMBuildShuffleVector(b, t[0], t[2], m[2], "");
  c[1] = LLVMBuildShuffleVector(b, t[0], t[2], m[3], "");
  c[2] = LLVMBuildShuffleVector(b, t[1], t[3], m[2], "");
  c[3] = LLVMBuildShuffleVector(b, t[1], t[3], m[3], "");
}

/* A full sliver whose q is strided and p contiguous (B of nt),
 * four p at a time: a <4 x T> load along p from each of the w sources,
 * transposed four rows at a time into four packed rows. Element by element
 * the loop vectorizer made this a gather (slow on this Xeon) and a
 * scalar load per element, ~18% of the micro-kernel's time at k = 256.
 * Covers p < len rounded down to a multiple of 4. */
static void emit_pack_quads(Gen *gen, LLVMTypeRef t, LLVMValueRef out, LLVMValueRef in,
                            LLVMValueRef len, LLVMValueRef sq, int w) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef vt = LLVMVectorType(t, 4), vp = LLVMPointerType(vt, 0);
  unsigned align = element_bytes(gen, t);
  GenLoop p;
  gen_loop_begin(gen, &p, gen_i64(gen, 0), LLVMBuildSDiv(b, len, gen_i64(gen, 4), ""));
  LLVMValueRef p0 = mul(gen, p.index, gen_i64(gen, 4));
  for (int g = 0; g < w; g += 4) {
    LLVMValueRef r[4], c[4];
    for (int i = 0; i < 4; i++) {
      LLVMValueRef at = add(gen, mul(gen, gen_i64(gen, g + i), sq), p0);
      r[i] = LLVMBuildLoad2(b, vt, LLVMBuildBitCast(b, gen_element(gen, t, in, at), vp, ""), "");
      LLVMSetAlignment(r[i], align);
    }
    transpose4(gen, r, c);
    for (int j = 0; j < 4; j++) {
      LLVMValueRef at = add(gen, mul(gen, add(gen, p0, gen_i64(gen, j)), gen_i64(gen, w)),
                            gen_i64(gen, g));
      LLVMValueRef x = LLVMBuildStore(b, c[j], LLVMBuildBitCast(b, gen_element(gen, t, out, at), vp, ""));
      LLVMSetAlignment(x, align);
    }
  }
  gen_loop_end(gen, &p);
}

/* Rows p in [from, to) (both multiples of group) of the full slivers
 * whose q is contiguous, `group` rows at a time: the group's rows are read
 * in order across the slivers, and each sliver gets its group rows as one
 * contiguous run. */
static void emit_pack_row_groups(Gen *gen, LLVMTypeRef t, LLVMTypeRef st, LLVMValueRef dst,
                                 LLVMValueRef src, LLVMValueRef from, LLVMValueRef to,
                                 LLVMValueRef full, LLVMValueRef sp, LLVMValueRef sliver, int w,
                                 int group, bool from_bf16) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef G = gen_i64(gen, group), W = gen_i64(gen, w);
  GenLoop p, s;
  gen_loop_begin(gen, &p, LLVMBuildSDiv(b, from, G, ""), LLVMBuildSDiv(b, to, G, ""));
  LLVMValueRef p0 = mul(gen, p.index, G);
  gen_loop_begin(gen, &s, gen_i64(gen, 0), full);
  for (int r = 0; r < group; r++) {
    LLVMValueRef at = add(gen, p0, gen_i64(gen, r));
    LLVMValueRef row = gen_element(gen, st, src, add(gen, mul(gen, at, sp), mul(gen, s.index, W)));
    LLVMValueRef x = load_sliver_row(gen, t, st, row, NULL, w, true, from_bf16);
    LLVMValueRef out = add(gen, mul(gen, s.index, sliver), mul(gen, at, W));
    store_sliver_row(gen, t, x, gen_element(gen, t, dst, out));
  }
  gen_loop_end(gen, &s);
  gen_loop_end(gen, &p);
}

/* Packs slivers of width w: dst[s*len*w + p*w + q] = src[p*sp + (s*w + q)*sq]
 * for s*w + q < count (p < len), zero beyond. `q_contiguous` says which
 * stride is 1, so the loops read memory in order. With from_bf16 the
 * source holds bf16 bits, widened to f32 as they are copied. */
static void emit_pack(Gen *gen, LLVMTypeRef t, LLVMValueRef dst, LLVMValueRef src,
                      LLVMValueRef len, LLVMValueRef count, LLVMValueRef sp, LLVMValueRef sq,
                      int w, bool q_contiguous, bool from_bf16) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef st = from_bf16 ? gen->i16 : t; /* bf16 sources widen to f32 as they pack */
  LLVMValueRef W = gen_i64(gen, w);
  LLVMValueRef full = LLVMBuildSDiv(b, count, W, "");
  LLVMValueRef sliver = mul(gen, len, W); /* elements of one packed sliver */
  /* Full slivers move w elements per p as one <w x T> store (and, when q
   * is contiguous, one load): left to the loop vectorizer, the strided
   * side of this copy became gathers and scatters, 14% of a 2048 GEMM's
   * time (bench/RESULTS.md). Where q is contiguous the rows p are the
   * outer loop: a row (or a group of rows) of the block is read once, in
   * order, across all slivers. Sliver by sliver, each p was a new line sp
   * elements on, a new 4 KiB page when sp >= 1024 f32 (B of an n = 1024
   * GEMM, A of a transposed one): out of reach of the prefetchers and all
   * in one L1 set, which made the packing half the micro-kernel's time. */
  GenLoop s, p, q;
  if (q_contiguous) {
    /* A sliver's row of 12 f32 (48 bytes: A of tn) is part of a cache
     * line: a row at a time, each sliver's lines were written in pieces,
     * 24 KiB apart. 16 rows a sliver write 12 whole lines in order: the
     * m = 256 weight gradients 2-5% faster on two threads
     * (bench/RESULTS.md, stop 41). The same rule groups AVX2's 6 f32 and
     * f64's slivers, not measured. Where the source rows are 4 KiB apart
     * the 16 share one L1 set (12 ways) and some lines are read twice:
     * square 2048 tn was 0.99 of the ungrouped time, within the noise.
     * Rows that are whole lines go singly. */
    int group = (w * (int)element_bytes(gen, t)) % 64 ? 16 : 1;
    LLVMValueRef grouped = mul(gen, LLVMBuildSDiv(b, len, gen_i64(gen, group), ""),
                               gen_i64(gen, group));
    emit_pack_row_groups(gen, t, st, dst, src, gen_i64(gen, 0), grouped, full, sp, sliver, w,
                         group, from_bf16);
    if (group > 1)
      emit_pack_row_groups(gen, t, st, dst, src, grouped, len, full, sp, sliver, w, 1, from_bf16);
  } else {
    gen_loop_begin(gen, &s, gen_i64(gen, 0), full);
    LLVMValueRef in = gen_element(gen, st, src, mul(gen, mul(gen, s.index, W), sq));
    LLVMValueRef out = gen_element(gen, t, dst, mul(gen, s.index, sliver));
    LLVMValueRef p0 = gen_i64(gen, 0);
    if (!from_bf16 && w % 4 == 0) {
      emit_pack_quads(gen, t, out, in, len, sq, w);
      p0 = mul(gen, LLVMBuildSDiv(b, len, gen_i64(gen, 4), ""), gen_i64(gen, 4));
    }
    gen_loop_begin(gen, &p, p0, len);
    LLVMValueRef x = load_sliver_row(gen, t, st, gen_element(gen, st, in, mul(gen, p.index, sp)),
                                     sq, w, false, from_bf16);
    store_sliver_row(gen, t, x, gen_element(gen, t, out, mul(gen, p.index, W)));
    gen_loop_end(gen, &p);
    gen_loop_end(gen, &s);
  }
  /* The last sliver when count is not a multiple of w (this loop runs at
   * most once): element by element, then its padding. */
  LLVMValueRef slivers = LLVMBuildSDiv(b, add(gen, count, gen_i64(gen, w - 1)), W, "");
  gen_loop_begin(gen, &s, full, slivers);
  LLVMValueRef valid = LLVMBuildSub(b, count, mul(gen, s.index, W), "");
  LLVMValueRef out = gen_element(gen, t, dst, mul(gen, s.index, sliver));
  LLVMValueRef in = gen_element(gen, st, src, mul(gen, mul(gen, s.index, W), sq));
  if (q_contiguous) {
    gen_loop_begin(gen, &p, gen_i64(gen, 0), len);
    gen_loop_begin(gen, &q, gen_i64(gen, 0), valid);
    LLVMValueRef x = gen_load_at(gen, st, in, add(gen, mul(gen, p.index, sp), q.index));
    if (from_bf16)
      x = gen_bf16_widen(gen, x);
    LLVMBuildStore(b, x, gen_element(gen, t, out, add(gen, mul(gen, p.index, W), q.index)));
    gen_loop_end(gen, &q);
    gen_loop_end(gen, &p);
  } else {
    gen_loop_begin(gen, &q, gen_i64(gen, 0), valid);
    gen_loop_begin(gen, &p, gen_i64(gen, 0), len);
    LLVMValueRef x = gen_load_at(gen, st, in, add(gen, mul(gen, q.index, sq), p.index));
    if (from_bf16)
      x = gen_bf16_widen(gen, x);
    LLVMBuildStore(b, x, gen_element(gen, t, out, add(gen, mul(gen, p.index, W), q.index)));
    gen_loop_end(gen, &p);
    gen_loop_end(gen, &q);
  }
  gen_loop_begin(gen, &p, gen_i64(gen, 0), len);
  gen_loop_begin(gen, &q, valid, W);
  LLVMBuildStore(b, LLVMConstNull(t), gen_element(gen, t, out, add(gen, mul(gen, p.index, W), q.index)));
  gen_loop_end(gen, &q);
  gen_loop_end(gen, &p);
  gen_loop_end(gen, &s);
}

/* Opens a loop over [0, end) in blocks of `step`; returns the block's
 * length (step, or what is left at the end). */
static LLVMValueRef begin_blocks(Gen *gen, GenLoop *loop, LLVMValueRef end, int64_t step) {
  cpu_step_loop_begin(gen, loop, end, step);
  return cpu_min64(gen, gen_i64(gen, step), LLVMBuildSub(gen->builder, end, loop->index, ""));
}

/* Opens the loop over k blocks of at most kc_max: at least one block, so
 * that k = 0 stores zeros. Returns the block's length (0 when k = 0) and in
 * *accumulate whether it adds to C (every block but the first). */
static LLVMValueRef begin_k_blocks(Gen *gen, GenLoop *pc, LLVMValueRef k, int64_t kc_max,
                                   LLVMValueRef *accumulate) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef zero = gen_i64(gen, 0);
  LLVMValueRef end = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, k, zero, ""), k,
                                     gen_i64(gen, 1), "");
  cpu_step_loop_begin(gen, pc, end, kc_max);
  LLVMValueRef kc = cpu_min64(gen, gen_i64(gen, kc_max), LLVMBuildSub(b, k, pc->index, ""));
  *accumulate = LLVMBuildICmp(b, LLVMIntSGT, pc->index, zero, "");
  return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, kc, zero, ""), kc, zero, "");
}

/* Copies a rows x cols block between two row-major layouts. */
static void emit_copy_block(Gen *gen, LLVMTypeRef t, LLVMValueRef dst, LLVMValueRef ldd,
                            LLVMValueRef src, LLVMValueRef lds, LLVMValueRef rows,
                            LLVMValueRef cols) {
  GenLoop r, j;
  gen_loop_begin(gen, &r, gen_i64(gen, 0), rows);
  gen_loop_begin(gen, &j, gen_i64(gen, 0), cols);
  LLVMValueRef x = gen_load_at(gen, t, src, add(gen, mul(gen, r.index, lds), j.index));
  LLVMBuildStore(gen->builder, x, gen_element(gen, t, dst, add(gen, mul(gen, r.index, ldd), j.index)));
  gen_loop_end(gen, &j);
  gen_loop_end(gen, &r);
}

LLVMValueRef cpu_thread_scratch(Gen *gen, LLVMValueRef bytes) {
  const char *name = "tfm_thread_scratch";
  LLVMTypeRef type = LLVMFunctionType(gen->ptr, &gen->i64, 1, false);
  LLVMValueRef fn = LLVMGetNamedFunction(gen->module, name);
  if (!fn)
    fn = LLVMAddFunction(gen->module, name, type);
  return LLVMBuildCall2(gen->builder, type, fn, &bytes, 1, "scratch");
}

/* The module's micro-kernel of `rows` rows (g->mr, or a third or two
 * thirds of it) for element type t (f32 or f64), emitted on first use: the
 * f32 and bf16 GEMMs share the f32 ones. */
static LLVMValueRef micro_kernel(Gen *gen, LLVMTypeRef t, const GemmGeometry *g, int rows) {
  char name[64];
  snprintf(name, sizeof name, "tfm_gemm_micro_%s_%d", t == gen->f64 ? "f64" : "f32", rows);
  LLVMValueRef micro = LLVMGetNamedFunction(gen->module, name);
  return micro ? micro : emit_micro_kernel(gen, t, g, rows, name);
}

/* What a GEMM's loops over blocks hand to the micro-kernels. */
typedef struct GemmTiles {
  const GemmGeometry *g;
  LLVMTypeRef t;
  LLVMValueRef micro[3]; /* g->mr rows, a third and two thirds of them */
  LLVMValueRef tile;     /* an MR x NR tile on the stack, for C's edges */
} GemmTiles;

/* The C block at c (+)= the packed A block (mc x kc, MR-row slivers) times
 * the packed B block (kc x nc, NR-column slivers), tile by tile. rows_outer
 * false: B's slivers outside, every A sliver passing under each (the B
 * sliver is the one reused); true: A's slivers outside (each reused, in
 * L1, while B's slivers stream from L2). */
static void emit_block_product(Gen *gen, const GemmTiles *tt, LLVMValueRef apack,
                               LLVMValueRef bpack, LLVMValueRef mc, LLVMValueRef nc,
                               LLVMValueRef kc, LLVMValueRef c, LLVMValueRef ldc,
                               LLVMValueRef accumulate, bool rows_outer) {
  LLVMBuilderRef b = gen->builder;
  const GemmGeometry *g = tt->g;
  LLVMTypeRef t = tt->t;
  int64_t nr = (int64_t)g->nv * g->lanes;
  int third = g->mr / 3;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMTypeRef micro_type = LLVMGlobalGetValueType(tt->micro[0]);
  GenLoop jr, ir;
  if (rows_outer) {
    cpu_step_loop_begin(gen, &ir, mc, g->mr);
    cpu_step_loop_begin(gen, &jr, nc, nr);
  } else {
    cpu_step_loop_begin(gen, &jr, nc, nr);
    cpu_step_loop_begin(gen, &ir, mc, g->mr);
  }
  LLVMValueRef cols = cpu_min64(gen, gen_i64(gen, nr), LLVMBuildSub(b, nc, jr.index, ""));
  LLVMValueRef bsliver = gen_element(gen, t, bpack, mul(gen, jr.index, kc));
  LLVMValueRef rows = cpu_min64(gen, gen_i64(gen, g->mr), LLVMBuildSub(b, mc, ir.index, ""));
  LLVMValueRef asliver = gen_element(gen, t, apack, mul(gen, ir.index, kc));
  LLVMValueRef ct = gen_element(gen, t, c, add(gen, mul(gen, ir.index, ldc), jr.index));
  LLVMValueRef full = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, rows, gen_i64(gen, g->mr), ""),
                                   LLVMBuildICmp(b, LLVMIntEQ, cols, gen_i64(gen, nr), ""), "");
  LLVMBasicBlockRef direct = LLVMAppendBasicBlockInContext(gen->context, fn, "full_tile");
  LLVMBasicBlockRef edge = LLVMAppendBasicBlockInContext(gen->context, fn, "edge_tile");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, fn, "next_tile");
  LLVMBuildCondBr(b, full, direct, edge);
  LLVMPositionBuilderAtEnd(b, direct);
  LLVMValueRef call[6] = {kc, asliver, bsliver, ct, ldc, accumulate};
  LLVMBuildCall2(b, micro_type, tt->micro[0], call, 6, "");
  LLVMBuildBr(b, next);
  /* A block's last rows (a thread's 256 or 1024 rows end in 4) run the
   * micro-kernel of a third or two thirds of MR rows that holds them: a
   * whole MR-row tile for 4 rows computed three times the products (3% of
   * a [256, N] weight gradient, 2.5% of a 512 GEMM). In place in C when
   * they fill it, else through the tile on the stack. */
  LLVMPositionBuilderAtEnd(b, edge);
  LLVMValueRef in_third = LLVMBuildICmp(b, LLVMIntSLE, rows, gen_i64(gen, third), "");
  LLVMValueRef in_two = LLVMBuildICmp(b, LLVMIntSLE, rows, gen_i64(gen, 2 * third), "");
  LLVMValueRef part = LLVMBuildSelect(
      b, in_third, tt->micro[1], LLVMBuildSelect(b, in_two, tt->micro[2], tt->micro[0], ""), "");
  LLVMValueRef exact = LLVMBuildAnd(
      b,
      LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntEQ, rows, gen_i64(gen, third), ""),
                  LLVMBuildICmp(b, LLVMIntEQ, rows, gen_i64(gen, 2 * third), ""), ""),
      LLVMBuildICmp(b, LLVMIntEQ, cols, gen_i64(gen, nr), ""), "");
  LLVMBasicBlockRef part_direct = LLVMAppendBasicBlockInContext(gen->context, fn, "part_tile");
  LLVMBasicBlockRef through = LLVMAppendBasicBlockInContext(gen->context, fn, "through_tile");
  LLVMBuildCondBr(b, exact, part_direct, through);
  LLVMPositionBuilderAtEnd(b, part_direct);
  LLVMBuildCall2(b, micro_type, part, call, 6, "");
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, through);
  LLVMValueRef NR = gen_i64(gen, nr);
  emit_copy_block(gen, t, tt->tile, NR, ct, ldc, rows, cols);
  LLVMValueRef edge_call[6] = {kc, asliver, bsliver, tt->tile, NR, accumulate};
  LLVMBuildCall2(b, micro_type, part, edge_call, 6, "");
  emit_copy_block(gen, t, ct, ldc, tt->tile, NR, rows, cols);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
  if (rows_outer) {
    cpu_step_loop_end(gen, &jr);
    cpu_step_loop_end(gen, &ir);
  } else {
    cpu_step_loop_end(gen, &ir);
    cpu_step_loop_end(gen, &jr);
  }
}

/* The operands and their strides: A(i, p) at a[p*asp + i*asq], B(p, j)
 * at b[p*bsp + j*bsq]; ta / tb say which stride is 1 for packing, and
 * from_bf16 that they hold bf16 bits, widened as they are packed. */
typedef struct GemmOperands {
  LLVMValueRef a, b, asp, asq, bsp, bsq;
  bool ta, tb, from_bf16;
} GemmOperands;

/* The operands of a GEMM function fn (c, a, b, m, n, k, lda, ldb, ldc). */
static GemmOperands gemm_operands(Gen *gen, LLVMValueRef fn, bool ta, bool tb, bool from_bf16) {
  LLVMValueRef one = gen_i64(gen, 1), lda = LLVMGetParam(fn, 6), ldb = LLVMGetParam(fn, 7);
  return (GemmOperands){.a = LLVMGetParam(fn, 1), .b = LLVMGetParam(fn, 2),
                        .asp = ta ? lda : one, .asq = ta ? one : lda,
                        .bsp = tb ? one : ldb, .bsq = tb ? ldb : one,
                        .ta = ta, .tb = tb, .from_bf16 = from_bf16};
}

/* A's block (i0.., p0..) packed as t into MR-row slivers, k step by k
 * step, so the micro-kernel's broadcasts read one sliver in order. Read in
 * place, the MR rows were lda apart: at lda = 1024 or 2048 f32 all of them
 * fall in one L1 set, where they evicted each other and the B
 * micro-panel. */
static void emit_pack_a(Gen *gen, const GemmGeometry *g, LLVMTypeRef t, const GemmOperands *op,
                        LLVMValueRef apack, LLVMValueRef i0, LLVMValueRef p0, LLVMValueRef mc,
                        LLVMValueRef kc) {
  LLVMValueRef at = add(gen, mul(gen, p0, op->asp), mul(gen, i0, op->asq));
  LLVMValueRef src = gen_element(gen, op->from_bf16 ? gen->i16 : t, op->a, at);
  emit_pack(gen, t, apack, src, kc, mc, op->asp, op->asq, g->mr, op->ta, op->from_bf16);
}

/* B's block (p0.., j0..) packed as t into NR-column slivers. */
static void emit_pack_b(Gen *gen, const GemmGeometry *g, LLVMTypeRef t, const GemmOperands *op,
                        LLVMValueRef bpack, LLVMValueRef p0, LLVMValueRef j0, LLVMValueRef kc,
                        LLVMValueRef nc) {
  LLVMValueRef at = add(gen, mul(gen, p0, op->bsp), mul(gen, j0, op->bsq));
  LLVMValueRef src = gen_element(gen, op->from_bf16 ? gen->i16 : t, op->b, at);
  emit_pack(gen, t, bpack, src, kc, nc, op->bsp, op->bsq, g->nv * g->lanes, !op->tb,
            op->from_bf16);
}

/* void gemm(T *c, T *a, T *b, i64 m, i64 n, i64 k, i64 lda, i64 ldb, i64 ldc):
 * c[i*ldc + j] = sum_p A(i, p) B(p, j), A(i, p) = a[ta ? p*lda + i : i*lda + p],
 * B(p, j) = b[tb ? j*ldb + p : p*ldb + j]. Two loop orders (GemmGeometry):
 * B's column blocks outermost, or A's row blocks outermost where n passes
 * one column block or n and k are both large. Either way each element
 * sums its k blocks in order. */
static LLVMValueRef emit_gemm(Gen *gen, LLVMTypeRef t, bool ta, bool tb, const char *name) {
  LLVMBuilderRef b = gen->builder;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(b);
  GemmGeometry g = geometry(gen, t);
  int third = g.mr / 3;
  GemmTiles tt = {.g = &g, .t = t};
  tt.micro[0] = micro_kernel(gen, t, &g, g.mr);
  tt.micro[1] = micro_kernel(gen, t, &g, third);
  tt.micro[2] = micro_kernel(gen, t, &g, 2 * third);

  LLVMTypeRef tp = LLVMPointerType(t, 0);
  LLVMTypeRef params[9] = {tp, tp, tp, gen->i64, gen->i64, gen->i64, gen->i64, gen->i64, gen->i64};
  LLVMValueRef fn = cpu_gemm_function_begin(gen, name, params, 9, NULL);
  LLVMValueRef c = LLVMGetParam(fn, 0);
  LLVMValueRef m = LLVMGetParam(fn, 3), n = LLVMGetParam(fn, 4), k = LLVMGetParam(fn, 5);
  LLVMValueRef ldc = LLVMGetParam(fn, 8);
  GemmOperands op = gemm_operands(gen, fn, ta, tb, false);

  const GemmBlocks *cb = &g.columns, *rb = &g.rows;
  int64_t elements = cb->mc * cb->kc + cb->kc * cb->nc;
  if (rb->mc && rb->mc * rb->kc + rb->kc * rb->nc > elements)
    elements = rb->mc * rb->kc + rb->kc * rb->nc;
  LLVMValueRef scratch = cpu_thread_scratch(gen, gen_i64(gen, elements * element_bytes(gen, t)));
  LLVMValueRef apack = LLVMBuildBitCast(b, scratch, tp, "");
  tt.tile = gen_entry_alloca(gen, LLVMArrayType(t, (unsigned)(g.mr * g.nv * g.lanes)), "tile");
  tt.tile = LLVMBuildBitCast(b, tt.tile, tp, "");

  LLVMBasicBlockRef by_columns = LLVMAppendBasicBlockInContext(gen->context, fn, "column_blocks");
  LLVMBasicBlockRef by_rows = NULL;
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(gen->context, fn, "done");
  if (rb->mc) {
    /* The row order where n passes one column block, and where n is at
     * least one of its B blocks and k passes the column order's k block,
     * so that both orders pass over C more than once (measured: square
     * 1024 and the k = 2048 weight gradients 1-5% faster; k = 256 shapes
     * up to 3% slower, square 512 with its two k blocks against one about
     * 3%; n = 256 ones 3-5% slower). */
    by_rows = LLVMAppendBasicBlockInContext(gen->context, fn, "row_blocks");
    LLVMValueRef deep = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, n, gen_i64(gen, rb->nc), ""),
                                     LLVMBuildICmp(b, LLVMIntSGT, k, gen_i64(gen, cb->kc), ""), "");
    LLVMValueRef wide = LLVMBuildICmp(b, LLVMIntSGT, n, gen_i64(gen, cb->nc), "");
    LLVMBuildCondBr(b, LLVMBuildOr(b, wide, deep, ""), by_rows, by_columns);
  } else {
    LLVMBuildBr(b, by_columns);
  }

  /* B's block is packed once per k block and every row block of A passes
   * under it. */
  GenLoop jc, pc, ic;
  LLVMPositionBuilderAtEnd(b, by_columns);
  LLVMValueRef bpack = gen_element(gen, t, apack, gen_i64(gen, cb->mc * cb->kc));
  LLVMValueRef nc = begin_blocks(gen, &jc, n, cb->nc);
  LLVMValueRef accumulate, kc = begin_k_blocks(gen, &pc, k, cb->kc, &accumulate);
  emit_pack_b(gen, &g, t, &op, bpack, pc.index, jc.index, kc, nc);
  LLVMValueRef mc = begin_blocks(gen, &ic, m, cb->mc);
  emit_pack_a(gen, &g, t, &op, apack, ic.index, pc.index, mc, kc);
  LLVMValueRef cblock = gen_element(gen, t, c, add(gen, mul(gen, ic.index, ldc), jc.index));
  emit_block_product(gen, &tt, apack, bpack, mc, nc, kc, cblock, ldc, accumulate, false);
  cpu_step_loop_end(gen, &ic);
  cpu_step_loop_end(gen, &pc);
  cpu_step_loop_end(gen, &jc);
  LLVMBuildBr(b, done);

  /* Column blocks outermost would pack A again for each of them. Here
   * A's row block is packed once per k block (it waits in L3), B's smaller
   * blocks are packed under it and stay in L2, and each A sliver, in L1,
   * meets every B sliver of the block in turn. */
  if (by_rows) {
    LLVMPositionBuilderAtEnd(b, by_rows);
    bpack = gen_element(gen, t, apack, gen_i64(gen, rb->mc * rb->kc));
    mc = begin_blocks(gen, &ic, m, rb->mc);
    kc = begin_k_blocks(gen, &pc, k, rb->kc, &accumulate);
    emit_pack_a(gen, &g, t, &op, apack, ic.index, pc.index, mc, kc);
    nc = begin_blocks(gen, &jc, n, rb->nc);
    emit_pack_b(gen, &g, t, &op, bpack, pc.index, jc.index, kc, nc);
    cblock = gen_element(gen, t, c, add(gen, mul(gen, ic.index, ldc), jc.index));
    emit_block_product(gen, &tt, apack, bpack, mc, nc, kc, cblock, ldc, accumulate, true);
    cpu_step_loop_end(gen, &jc);
    cpu_step_loop_end(gen, &pc);
    cpu_step_loop_end(gen, &ic);
    LLVMBuildBr(b, done);
  }
  LLVMPositionBuilderAtEnd(b, done);
  LLVMBuildRetVoid(b);
  if (saved)
    LLVMPositionBuilderAtEnd(b, saved);
  return fn;
}

/* void gemm_bf16(i16 *c, i16 *a, i16 *b, i64 m, ... ldc): the same product
 * over bf16 operands, accumulated in f32 and rounded once into C. The
 * loops run jc, ic, pc (k innermost of the blocks), so the MC x NC block of
 * C sums all of k in an f32 block in thread scratch before it is narrowed;
 * B is packed again for each row block, which costs 1 / (2 MC) of the
 * multiply-adds. Packing widens bf16 to f32; the micro-kernel is the f32
 * one, writing whole tiles into the f32 block (its padding rows and
 * columns are never copied out). */
static LLVMValueRef emit_gemm_bf16(Gen *gen, bool ta, bool tb, const char *name) {
  LLVMBuilderRef b = gen->builder;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(b);
  LLVMTypeRef t = gen->f32;
  GemmGeometry g = geometry(gen, t);
  const GemmBlocks *cb = &g.columns;
  int64_t nr = (int64_t)g.nv * g.lanes;
  LLVMValueRef micro = micro_kernel(gen, t, &g, g.mr);
  LLVMTypeRef micro_type = LLVMGlobalGetValueType(micro);

  LLVMTypeRef hp = LLVMPointerType(gen->i16, 0), tp = LLVMPointerType(t, 0);
  LLVMTypeRef params[9] = {hp, hp, hp, gen->i64, gen->i64, gen->i64, gen->i64, gen->i64, gen->i64};
  LLVMValueRef fn = cpu_gemm_function_begin(gen, name, params, 9, NULL);
  LLVMValueRef c = LLVMGetParam(fn, 0);
  LLVMValueRef m = LLVMGetParam(fn, 3), n = LLVMGetParam(fn, 4), k = LLVMGetParam(fn, 5);
  LLVMValueRef ldc = LLVMGetParam(fn, 8);
  GemmOperands op = gemm_operands(gen, fn, ta, tb, true);

  LLVMValueRef bytes = gen_i64(gen, (cb->mc * cb->kc + cb->kc * cb->nc + cb->mc * cb->nc) * 4);
  LLVMValueRef scratch = cpu_thread_scratch(gen, bytes);
  LLVMValueRef apack = LLVMBuildBitCast(b, scratch, tp, "");
  LLVMValueRef bpack = gen_element(gen, t, apack, gen_i64(gen, cb->mc * cb->kc));
  LLVMValueRef cblock = gen_element(gen, t, bpack, gen_i64(gen, cb->kc * cb->nc));
  LLVMValueRef NC = gen_i64(gen, cb->nc);

  GenLoop jc, ic, pc, jr, ir, r, j;
  LLVMValueRef nc = begin_blocks(gen, &jc, n, cb->nc);
  LLVMValueRef mc = begin_blocks(gen, &ic, m, cb->mc);
  LLVMValueRef accumulate, kc = begin_k_blocks(gen, &pc, k, cb->kc, &accumulate);
  emit_pack_b(gen, &g, t, &op, bpack, pc.index, jc.index, kc, nc);
  emit_pack_a(gen, &g, t, &op, apack, ic.index, pc.index, mc, kc);
  cpu_step_loop_begin(gen, &jr, nc, nr);
  LLVMValueRef bsliver = gen_element(gen, t, bpack, mul(gen, jr.index, kc));
  cpu_step_loop_begin(gen, &ir, mc, g.mr);
  LLVMValueRef asliver = gen_element(gen, t, apack, mul(gen, ir.index, kc));
  LLVMValueRef ct = gen_element(gen, t, cblock, add(gen, mul(gen, ir.index, NC), jr.index));
  LLVMValueRef call[6] = {kc, asliver, bsliver, ct, NC, accumulate};
  LLVMBuildCall2(b, micro_type, micro, call, 6, "");
  cpu_step_loop_end(gen, &ir);
  cpu_step_loop_end(gen, &jr);
  cpu_step_loop_end(gen, &pc);
  /* The block's sums, rounded once. */
  gen_loop_begin(gen, &r, gen_i64(gen, 0), mc);
  gen_loop_begin(gen, &j, gen_i64(gen, 0), nc);
  LLVMValueRef v = gen_load_at(gen, t, cblock, add(gen, mul(gen, r.index, NC), j.index));
  LLVMValueRef to = gen_element(gen, gen->i16, c,
                                add(gen, mul(gen, add(gen, ic.index, r.index), ldc), add(gen, jc.index, j.index)));
  gen_store_value(gen, GRAPH_BF16, v, to);
  gen_loop_end(gen, &j);
  gen_loop_end(gen, &r);
  cpu_step_loop_end(gen, &ic);
  cpu_step_loop_end(gen, &jc);
  LLVMBuildRetVoid(b);
  if (saved)
    LLVMPositionBuilderAtEnd(b, saved);
  return fn;
}

/* The module's GEMMs are found by name: each is emitted once, on first use. */
LLVMValueRef cpu_gemm_function(Gen *gen, LLVMTypeRef t, bool ta, bool tb) {
  char name[64];
  snprintf(name, sizeof name, "tfm_gemm_%s_%c%c", t == gen->f64 ? "f64" : "f32", ta ? 't' : 'n',
           tb ? 't' : 'n');
  LLVMValueRef fn = LLVMGetNamedFunction(gen->module, name);
  return fn ? fn : emit_gemm(gen, t, ta, tb, name);
}

LLVMValueRef cpu_gemm_bf16_widen_function(Gen *gen, bool ta, bool tb) {
  char name[64];
  snprintf(name, sizeof name, "tfm_gemm_bf16_widen_%c%c", ta ? 't' : 'n', tb ? 't' : 'n');
  LLVMValueRef fn = LLVMGetNamedFunction(gen->module, name);
  return fn ? fn : emit_gemm_bf16(gen, ta, tb, name);
}
