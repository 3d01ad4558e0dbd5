/* Fused attention on tensor cores (FlashAttention-2's loops with
 * mma.sync.m16n8k16 bf16), for attention whose q, k, v (and do) are bf16
 * values: the `--dtype bf16` graphs, where each is a cast of a bf16 node,
 * so rounding them to bf16 for the mma is exact.
 *
 * A launch block (8 warps) takes 128 rows of its side (queries for
 * attention and grad_q, keys for grad_k and grad_v) of one batch, a warp
 * 16 of them, held as A fragments in registers for the whole loop. The
 * block loops over the other side in blocks of 64 rows, which its 256
 * threads stage in shared memory as bf16 (coalesced loads, in the layouts
 * the B fragments need, one 32-bit shared load a register), between two
 * barriers; then each warp takes the block's 4 steps of 16 rows, skipping
 * those past either side's end or the causal diagonal (a branch on
 * warp-uniform values, so every mma.sync and shuffle is met by the whole
 * warp). The loop bounds are the launch block's, so every thread meets
 * every barrier.
 *
 *   forward:  S = Q K^T, online softmax (running max m and sum l in
 *             registers, the output rescaled by exp(m - m') when the max
 *             grows), O += P V; o = O / l, lse = m + log l.
 *   grad_q:   P = exp(scale S - lse), dP = dO V^T, dS = P (dP - delta),
 *             dQ += dS K, dq = scale dQ.
 *   grad_k/v: the same transposed over key rows and query blocks:
 *             dV += P^T dO, dK += dS^T Q, dk = scale dK.
 * Causal: the forward and grad_q stop at the block holding the launch
 * block's last row, grad_k/v start at the one holding its first; a warp
 * skips the steps wholly past its diagonal, and pairs past it in a step
 * get s = -inf (p = 0).
 *
 * Each mma's C fragment (16 x 8 f32) holds a lane's elements at rows
 * group and group + 8, columns 2 quad and 2 quad + 1 (ptx_dot_tile.h), so
 * a row's statistics are the quad's 4 lanes, combined by two shuffles,
 * and two C tiles of one 16-column block are, rounded to bf16 and paired,
 * the A fragment of the next product (mma.m16n8k16's A register r holds
 * row group + 8 (r & 1), columns 2 quad + 8 (r >> 1) + {0, 1}).
 *
 * Rounding: the products' operands are bf16, exact for q, k, v and do;
 * p and ds go in as two bf16 parts each (accumulate), products and sums
 * are f32, so o and the gradients differ from the f32 CPU kernels by the
 * order of f32 sums and p's 2^-18; lse and the sums l are f32. */
#include <math.h>
#include <stdio.h>

#include "ptx.h"
#include "ptx_dot_tile.h"
#include "ptx_internal.h"
#include "ptx_row.h"

/* Rows of a warp, and of each step over the other side. */
#define FLASH_ROWS 16
/* A launch block's warps, rows of its side, and the other side's rows it
 * stages in shared memory at a time. */
#define FLASH_WARPS (PTX_BLOCK_THREADS / PTX_WARP)
#define FLASH_CTA_ROWS (FLASH_WARPS * FLASH_ROWS)
#define FLASH_BLOCK 64
#define FLASH_STRIDE 72
/* The longest head this kernel takes: its own rows' fragments and the
 * accumulators of 64-wide heads fit the registers with no spills. */
#define FLASH_MAX_HEAD 64
#define HEAD_STEPS (FLASH_MAX_HEAD / PTX_MMA16_K)  /* A fragments along a head */
#define HEAD_TILES (FLASH_MAX_HEAD / PTX_MMA_N)    /* C tiles along a head */

typedef struct Flash {
  Gen *gen;
  LLVMBuilderRef b;
  LLVMTypeRef f32;
  int function;
  LLVMValueRef tid;         /* the thread in its launch block */
  LLVMValueRef group, quad; /* the lane's mma coordinates */
} Flash;

/* A C tile: 4 f32 stack slots (SROA makes them registers). */
typedef struct Tile {
  LLVMValueRef v[4];
} Tile;

static LLVMValueRef c64(Flash *f, int64_t v) { return gen_i64(f->gen, v); }
static LLVMValueRef add(Flash *f, LLVMValueRef a, LLVMValueRef b) { return gen_iadd(f->gen, a, b); }
static LLVMValueRef addc(Flash *f, LLVMValueRef a, int64_t c) { return add(f, a, c64(f, c)); }
static LLVMValueRef below(Flash *f, LLVMValueRef a, LLVMValueRef bound) {
  return LLVMBuildICmp(f->b, LLVMIntSLT, a, bound, "");
}
static LLVMValueRef real(Flash *f, double v) { return LLVMConstReal(f->f32, v); }
static LLVMValueRef get(Flash *f, LLVMValueRef slot) { return LLVMBuildLoad2(f->b, f->f32, slot, ""); }

static LLVMValueRef slot(Flash *f, double init) {
  LLVMValueRef s = gen_entry_alloca(f->gen, f->f32, "flash");
  LLVMBuildStore(f->b, real(f, init), s);
  return s;
}

static void tiles_zero(Flash *f, Tile *t, int n) {
  for (int i = 0; i < n; i++)
    for (int e = 0; e < 4; e++) t[i].v[e] = slot(f, 0.0);
}

/* x[row * len + col] of an f32 buffer, or 0 outside rows x len (the index
 * clamped first, so no lane reads past the buffer). */
static LLVMValueRef load_guarded(Flash *f, LLVMValueRef base, LLVMValueRef row, LLVMValueRef rows,
                                 LLVMValueRef col, int64_t len) {
  LLVMValueRef ok = LLVMBuildAnd(f->b, below(f, row, rows), below(f, col, c64(f, len)), "");
  LLVMValueRef at = add(f, gen_imul(f->gen, row, len), col);
  LLVMValueRef v = gen_load_at(f->gen, f->f32, base, LLVMBuildSelect(f->b, ok, at, c64(f, 0), ""));
  return LLVMBuildSelect(f->b, ok, v, real(f, 0.0), "");
}

/* Two f32 rounded to bf16 as one .b32 register, lo in the low half. */
static LLVMValueRef pack(Flash *f, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMTypeRef i32 = f->gen->i32;
  LLVMValueRef l = LLVMBuildZExt(f->b, gen_bf16_narrow(f->gen, lo), i32, "");
  LLVMValueRef h = LLVMBuildZExt(f->b, gen_bf16_narrow(f->gen, hi), i32, "");
  return LLVMBuildOr(f->b, l, LLVMBuildShl(f->b, h, gen_i32(f->gen, 16), ""), "");
}

/* The A fragment of rows row0 .. row0 + 15 (of `rows`), columns
 * col0 .. col0 + 15 (of len) of a row-major buffer. */
static void load_a(Flash *f, LLVMValueRef base, LLVMValueRef row0, LLVMValueRef rows, int64_t col0,
                   int64_t len, LLVMValueRef out[4]) {
  for (int r = 0; r < 4; r++) {
    LLVMValueRef row = add(f, row0, addc(f, f->group, ptx_mma16_a_row(2 * r)));
    LLVMValueRef col = addc(f, gen_imul(f->gen, f->quad, 2), col0 + ptx_mma16_a_col(2 * r));
    out[r] = pack(f, load_guarded(f, base, row, rows, col, len),
                  load_guarded(f, base, row, rows, addc(f, col, 1), len));
  }
}

/* The other side's rows of one block (FLASH_BLOCK of them), staged by
 * the launch block in shared memory as bf16, in the layouts its B
 * fragments need: `n` row-major [row][element] (the rows as the product's
 * columns: scores, dp), `k` transposed [element][row] (the rows as the
 * sum's index: p v, ds k); either may be NULL. Rows past the end and
 * elements past len are 0. Rows of FLASH_STRIDE bf16 (36 words: the 8
 * groups' rows start on banks 4g, plus the quad's 0..3, so a fragment
 * load meets 32 banks). */
typedef struct Staged {
  LLVMValueRef n, k;
  int64_t len;
} Staged;

/* The 32-bit word at bf16 element i (even) of a staged array. */
static LLVMValueRef staged_word(Flash *f, LLVMValueRef array, LLVMValueRef i) {
  LLVMValueRef p = LLVMBuildBitCast(f->b, ptx_shared_element(f->gen, array, i),
                                    LLVMPointerType(f->gen->i32, 3), "");
  LLVMValueRef v = LLVMBuildLoad2(f->b, f->gen->i32, p, "");
  LLVMSetAlignment(v, 4);
  return v;
}

/* The B fragment (k x n = 16 x 8) with B[k][n] = Y[yl + n][k0 + k], yl
 * a row of the staged block. */
static void load_b_rows_as_n(Flash *f, const Staged *y, LLVMValueRef yl, int64_t k0,
                             LLVMValueRef out[2]) {
  LLVMValueRef row = gen_imul(f->gen, add(f, yl, f->group), FLASH_STRIDE);
  for (int r = 0; r < 2; r++)
    out[r] = staged_word(f, y->n, add(f, row, addc(f, gen_imul(f->gen, f->quad, 2), k0 + ptx_mma16_b_row(2 * r))));
}

/* The B fragment with B[k][n] = Y[yl + k][n0 + n]. */
static void load_b_rows_as_k(Flash *f, const Staged *y, LLVMValueRef yl, int64_t n0,
                             LLVMValueRef out[2]) {
  LLVMValueRef column = gen_imul(f->gen, addc(f, f->group, n0), FLASH_STRIDE);
  for (int r = 0; r < 2; r++)
    out[r] = staged_word(f, y->k, add(f, column, add(f, yl, addc(f, gen_imul(f->gen, f->quad, 2), ptx_mma16_b_row(2 * r)))));
}

/* acc += A B, one mma.m16n8k16 bf16. */
static void mma(Flash *f, LLVMValueRef a[4], LLVMValueRef b2[2], Tile *acc) {
  LLVMValueRef args[10] = {a[0], a[1], a[2], a[3], b2[0], b2[1]};
  for (int e = 0; e < 4; e++) args[6 + e] = get(f, acc->v[e]);
  LLVMValueRef d = gen_intrinsic(f->gen, "llvm.nvvm.mma.m16n8k16.row.col.bf16", NULL, 0, args, 10);
  ptx_mark_convergent(f->gen, d);
  for (int e = 0; e < 4; e++) LLVMBuildStore(f->b, LLVMBuildExtractValue(f->b, d, (unsigned)e, ""), acc->v[e]);
}

/* The 16 x 16 products of the warp's rows (A fragments `a` along a head
 * of len) with rows yl .. yl + 15 of the staged block: two C tiles. */
static void block_products(Flash *f, LLVMValueRef a[HEAD_STEPS][4], const Staged *y,
                           LLVMValueRef yl, Tile s[2]) {
  tiles_zero(f, s, 2);
  for (int nt = 0; nt < 2; nt++)
    for (int64_t k0 = 0; k0 < y->len; k0 += PTX_MMA16_K) {
      LLVMValueRef bf[2];
      load_b_rows_as_n(f, y, addc(f, yl, nt * PTX_MMA_N), k0, bf);
      mma(f, a[k0 / PTX_MMA16_K], bf, &s[nt]);
    }
}

/* acc[0 .. len / 8) += P Y[yl .. yl + 15] (staged rows), P the 16 x 16 block in C
 * tiles p (f32). P goes in as two bf16 parts, its rounding and the
 * rounding of what that left (p = hi + lo to 2^-18 relative), each
 * multiplied by the same B fragment: the one rounding of p to bf16 that
 * FlashAttention makes moved o and the gradients by about 2^-9 of their
 * size, which a training step's Adam update turned into differences far
 * past the CPU's; split, the products are f32-accurate, as Y's rows are
 * bf16 values already. */
static void accumulate(Flash *f, LLVMValueRef p[2][4], const Staged *y, LLVMValueRef yl,
                       Tile *acc) {
  LLVMValueRef hi[4], lo[4];
  for (int r = 0; r < 4; r++) {
    LLVMValueRef x[2] = {p[r >> 1][2 * (r & 1)], p[r >> 1][2 * (r & 1) + 1]}, rest[2];
    for (int i = 0; i < 2; i++) rest[i] = LLVMBuildFSub(f->b, x[i], gen_bf16_round(f->gen, x[i]), "");
    hi[r] = pack(f, x[0], x[1]);
    lo[r] = pack(f, rest[0], rest[1]);
  }
  for (int64_t n0 = 0; n0 < y->len; n0 += PTX_MMA_N) {
    LLVMValueRef bf[2];
    load_b_rows_as_k(f, y, yl, n0, bf);
    mma(f, lo, bf, &acc[n0 / PTX_MMA_N]);
    mma(f, hi, bf, &acc[n0 / PTX_MMA_N]);
  }
}

/* The combination of the quad's 4 lanes (xor 1, 2): each lane's partial
 * of its rows. */
static LLVMValueRef quad_reduce(Flash *f, LLVMValueRef v, bool max) {
  for (int offset = 1; offset < PTX_MMA_GROUP; offset *= 2) {
    LLVMValueRef args[4] = {gen_i32(f->gen, -1), v, gen_i32(f->gen, offset), gen_i32(f->gen, PTX_WARP - 1)};
    LLVMValueRef o = gen_intrinsic(f->gen, "llvm.nvvm.shfl.sync.bfly.f32", NULL, 0, args, 4);
    v = max ? gen_intrinsic(f->gen, "llvm.maxnum", &f->f32, 1, (LLVMValueRef[]){v, o}, 2)
            : LLVMBuildFAdd(f->b, v, o, "");
  }
  return v;
}

/* The op's sizes: T queries, S keys, heads of D (q, k) and Dv (v). */
typedef struct FlashKernel {
  bool causal;
  int64_t t, s, d, dv;
  LLVMValueRef scale;
} FlashKernel;

/* The element (x, y) of C tile element e of block tile nt: its row x (the
 * warp's side) and column y (the other side). */
static LLVMValueRef tile_row(Flash *f, LLVMValueRef x0, int e) {
  return add(f, x0, addc(f, f->group, ptx_mma_c_row(e)));
}
static LLVMValueRef tile_col(Flash *f, LLVMValueRef y0, int nt, int e) {
  return add(f, y0, addc(f, gen_imul(f->gen, f->quad, 2), nt * PTX_MMA_N + ptx_mma_c_col(e)));
}

/* s = scale x, or -inf where the pair is hidden: past the other side's
 * end, or past the diagonal of a causal op. */
static LLVMValueRef visible_score(Flash *f, const FlashKernel *c, LLVMValueRef x, LLVMValueRef row,
                                  LLVMValueRef col, bool query_rows) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef query = query_rows ? row : col, key = query_rows ? col : row;
  LLVMValueRef hidden = LLVMBuildICmp(b, LLVMIntSGE, key, c64(f, c->s), "");
  if (!query_rows) hidden = LLVMBuildOr(b, hidden, LLVMBuildICmp(b, LLVMIntSGE, query, c64(f, c->t), ""), "");
  if (c->causal) hidden = LLVMBuildOr(b, hidden, LLVMBuildICmp(b, LLVMIntSGT, key, query, ""), "");
  return LLVMBuildSelect(b, hidden, real(f, -INFINITY), LLVMBuildFMul(b, x, c->scale, ""), "");
}

/* exp(x - m), exactly 0 where x is -inf (the inline exp is not made for
 * infinities). */
static LLVMValueRef exp_from(Flash *f, LLVMValueRef x, LLVMValueRef m) {
  LLVMValueRef dead = LLVMBuildFCmp(f->b, LLVMRealOEQ, x, real(f, -INFINITY), "");
  LLVMValueRef e = gen_exp_f32(f->gen, LLVMBuildFSub(f->b, x, m, ""));
  return LLVMBuildSelect(f->b, dead, real(f, 0.0), e, "");
}

/* p = exp(s - lse) recomputed from a saved lse: 0 for a hidden pair and
 * for a row with no visible key (lse = -inf). */
static LLVMValueRef p_from_lse(Flash *f, LLVMValueRef s, LLVMValueRef lse) {
  LLVMValueRef dead = LLVMBuildFCmp(f->b, LLVMRealOEQ, lse, real(f, -INFINITY), "");
  LLVMValueRef p = exp_from(f, s, lse);
  return LLVMBuildSelect(f->b, dead, real(f, 0.0), p, "");
}

/* C tiles acc (len columns) times `factor` (one for each row half) into
 * out's rows x0 .. x0 + 15, those below `rows`. */
static void store_tiles(Flash *f, Tile *acc, int64_t len, LLVMValueRef out, LLVMValueRef x0,
                        LLVMValueRef rows, LLVMValueRef factor[2]) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(f->b));
  for (int64_t n0 = 0; n0 < len; n0 += PTX_MMA_N)
    for (int e = 0; e < 4; e++) {
      LLVMValueRef row = tile_row(f, x0, e), col = tile_col(f, c64(f, 0), 0, e);
      col = addc(f, col, n0);
      LLVMValueRef v = LLVMBuildFMul(f->b, get(f, acc[n0 / PTX_MMA_N].v[e]), factor[e >> 1], "");
      LLVMBasicBlockRef write = LLVMAppendBasicBlockInContext(f->gen->context, fn, "store");
      LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(f->gen->context, fn, "stored");
      LLVMBuildCondBr(f->b, LLVMBuildAnd(f->b, below(f, row, rows), below(f, col, c64(f, len)), ""),
                      write, next);
      LLVMPositionBuilderAtEnd(f->b, write);
      LLVMBuildStore(f->b, v, gen_element(f->gen, f->f32, out, add(f, gen_imul(f->gen, row, len), col)));
      LLVMBuildBr(f->b, next);
      LLVMPositionBuilderAtEnd(f->b, next);
    }
}

/* Every accumulator's value used where all lanes are (ptx_pin), before
 * the lanes' guarded stores. */
static void pin_tiles(Flash *f, Tile *acc, int64_t len) {
  for (int64_t n0 = 0; n0 < len; n0 += PTX_MMA_N) {
    LLVMValueRef v[4];
    for (int e = 0; e < 4; e++) v[e] = get(f, acc[n0 / PTX_MMA_N].v[e]);
    ptx_pin(f->gen, v);
  }
}

/* A staged array of the function (FLASH_BLOCK x FLASH_STRIDE bf16, or
 * FLASH_BLOCK f32 for a row value). */
static LLVMValueRef staged_array(Flash *f, const char *what, bool row_values) {
  char name[64];
  snprintf(name, sizeof name, "att%d_%s", f->function, what);
  return row_values ? ptx_shared_array(f->gen, name, f->f32, FLASH_BLOCK, 16)
                    : ptx_shared_array(f->gen, name, f->gen->i16, FLASH_BLOCK * FLASH_STRIDE, 16);
}

static Staged staged(Flash *f, const char *what, bool n, bool k, int64_t len) {
  char name[32];
  Staged y = {.len = len};
  snprintf(name, sizeof name, "%s_n", what);
  if (n) y.n = staged_array(f, name, false);
  snprintf(name, sizeof name, "%s_k", what);
  if (k) y.k = staged_array(f, name, false);
  return y;
}

/* Rows y_start .. y_start + FLASH_BLOCK - 1 (of `rows`) of a row-major
 * [rows, len] buffer into y's layouts: the block's 256 threads take
 * consecutive elements (coalesced). The values are bf16 already, so the
 * high half of each f32 is exact. */
static void stage(Flash *f, const Staged *y, LLVMValueRef base, LLVMValueRef y_start,
                  LLVMValueRef rows) {
  LLVMBuilderRef b = f->b;
  for (int s = 0; s < FLASH_BLOCK * FLASH_MAX_HEAD / PTX_BLOCK_THREADS; s++) {
    LLVMValueRef e = addc(f, f->tid, (int64_t)s * PTX_BLOCK_THREADS);
    LLVMValueRef row = LLVMBuildUDiv(b, e, c64(f, FLASH_MAX_HEAD), "");
    LLVMValueRef col = LLVMBuildURem(b, e, c64(f, FLASH_MAX_HEAD), "");
    LLVMValueRef v = load_guarded(f, base, add(f, y_start, row), rows, col, y->len);
    LLVMValueRef bits = LLVMBuildLShr(b, LLVMBuildBitCast(b, v, f->gen->i32, ""), gen_i32(f->gen, 16), "");
    bits = LLVMBuildTrunc(b, bits, f->gen->i16, "");
    if (y->n)
      LLVMBuildStore(b, bits, ptx_shared_element(f->gen, y->n, add(f, gen_imul(f->gen, row, FLASH_STRIDE), col)));
    if (y->k)
      LLVMBuildStore(b, bits, ptx_shared_element(f->gen, y->k, add(f, gen_imul(f->gen, col, FLASH_STRIDE), row)));
  }
}

/* Rows y_start .. of a [.., rows, 1] buffer (0 past the end) into a
 * staged f32 array, by the block's first FLASH_BLOCK threads. */
static void stage_row_values(Flash *f, LLVMValueRef array, LLVMValueRef base,
                             LLVMValueRef y_start, LLVMValueRef rows) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef load = LLVMAppendBasicBlockInContext(f->gen->context, fn, "row_value");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(f->gen->context, fn, "row_values");
  LLVMBuildCondBr(b, below(f, f->tid, c64(f, FLASH_BLOCK)), load, next);
  LLVMPositionBuilderAtEnd(b, load);
  LLVMValueRef v = load_guarded(f, base, add(f, y_start, f->tid), rows, c64(f, 0), 1);
  LLVMBuildStore(b, v, ptx_shared_element(f->gen, array, f->tid));
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
}

static void barrier(Flash *f) { gen_intrinsic(f->gen, "llvm.nvvm.barrier0", NULL, 0, NULL, 0); }

/* The loop over the other side's staged blocks: `begin` opens block
 * `index` (y_start its first row) after a barrier (every warp is done
 * with the previous one), its staging is the caller's, then a barrier;
 * step_begin / step_end bracket one warp's step of 16 rows (yl in the
 * block), skipped where `skip` (warp-uniform) holds. */
typedef struct BlockLoop {
  GenLoop loop, step;
  LLVMValueRef y_start;
} BlockLoop;

static void blocks_begin(Flash *f, BlockLoop *l, LLVMValueRef first, LLVMValueRef end) {
  gen_loop_begin(f->gen, &l->loop, first, end);
  l->y_start = gen_imul(f->gen, l->loop.index, FLASH_BLOCK);
  barrier(f);
}

/* After the caller's staging: the barrier, and the first warp step. */
static LLVMValueRef steps_begin(Flash *f, BlockLoop *l) {
  barrier(f);
  gen_loop_begin(f->gen, &l->step, c64(f, 0), c64(f, FLASH_BLOCK / FLASH_ROWS));
  return gen_imul(f->gen, l->step.index, FLASH_ROWS);
}

static void steps_end(Flash *f, BlockLoop *l) {
  gen_loop_end(f->gen, &l->step);
  gen_loop_end(f->gen, &l->loop);
}

/* Skip the rest of the step while `skip` holds; returns where to go on. */
static LLVMBasicBlockRef step_unless(Flash *f, LLVMValueRef skip) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(f->b));
  LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(f->gen->context, fn, "step");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(f->gen->context, fn, "step_done");
  LLVMBuildCondBr(f->b, skip, next, run);
  LLVMPositionBuilderAtEnd(f->b, run);
  return next;
}

static void step_done(Flash *f, LLVMBasicBlockRef next) {
  LLVMBuildBr(f->b, next);
  LLVMPositionBuilderAtEnd(f->b, next);
}

/* The staged blocks of the other side a launch block of query rows from
 * row0 visits: all of them, or when causal up to the one holding its
 * last row. */
static LLVMValueRef query_blocks_end(Flash *f, const FlashKernel *c, LLVMValueRef row0) {
  LLVMValueRef end = c64(f, ptx_dot_tiles(c->s, FLASH_BLOCK));
  if (!c->causal) return end;
  LLVMValueRef last = addc(f, row0, FLASH_CTA_ROWS - 1);
  LLVMValueRef diag = addc(f, LLVMBuildUDiv(f->b, last, c64(f, FLASH_BLOCK), ""), 1);
  return gen_intrinsic(f->gen, "llvm.smin", &f->gen->i64, 1, (LLVMValueRef[]){end, diag}, 2);
}

/* A warp's step of query rows x0 .. x0 + 15 against keys y0 .. y0 + 15
 * does nothing past the queries' or the keys' end or, causal, past the
 * diagonal. */
static LLVMValueRef query_step_idle(Flash *f, const FlashKernel *c, LLVMValueRef x0, LLVMValueRef y0) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef idle = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSGE, x0, c64(f, c->t), ""),
                                  LLVMBuildICmp(b, LLVMIntSGE, y0, c64(f, c->s), ""), "");
  if (c->causal)
    idle = LLVMBuildOr(b, idle, LLVMBuildICmp(b, LLVMIntSGT, y0, addc(f, x0, FLASH_ROWS - 1), ""), "");
  return idle;
}

/* The forward of query rows x0 .. x0 + 15 of one batch (bases already
 * offset to it); row0 is the launch block's first row. */
static void forward(Flash *f, const FlashKernel *c, LLVMValueRef row0, LLVMValueRef x0,
                    LLVMValueRef qb, LLVMValueRef kb, LLVMValueRef vb, LLVMValueRef ob,
                    LLVMValueRef lseb) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef t = c64(f, c->t), s = c64(f, c->s);
  LLVMValueRef qa[HEAD_STEPS][4];
  for (int64_t k0 = 0; k0 < c->d; k0 += PTX_MMA16_K) load_a(f, qb, x0, t, k0, c->d, qa[k0 / PTX_MMA16_K]);
  LLVMValueRef m[2] = {slot(f, -INFINITY), slot(f, -INFINITY)}, l[2] = {slot(f, 0.0), slot(f, 0.0)};
  Tile o[HEAD_TILES];
  tiles_zero(f, o, HEAD_TILES);
  Staged ks = staged(f, "k", true, false, c->d), vs = staged(f, "v", false, true, c->dv);
  BlockLoop blk;
  blocks_begin(f, &blk, c64(f, 0), query_blocks_end(f, c, row0));
  stage(f, &ks, kb, blk.y_start, s);
  stage(f, &vs, vb, blk.y_start, s);
  LLVMValueRef yl = steps_begin(f, &blk), y0 = add(f, blk.y_start, yl);
  LLVMBasicBlockRef next = step_unless(f, query_step_idle(f, c, x0, y0));
  Tile st[2];
  block_products(f, qa, &ks, yl, st);
  LLVMValueRef p[2][4];
  for (int h = 0; h < 2; h++) { /* rows group + 8 h: C elements 2 h, 2 h + 1 */
    LLVMValueRef sv[2][2], bm = real(f, -INFINITY);
    for (int nt = 0; nt < 2; nt++)
      for (int i = 0; i < 2; i++) {
        int e = 2 * h + i;
        sv[nt][i] = visible_score(f, c, get(f, st[nt].v[e]), tile_row(f, x0, e), tile_col(f, y0, nt, e), true);
        bm = gen_intrinsic(f->gen, "llvm.maxnum", &f->f32, 1, (LLVMValueRef[]){bm, sv[nt][i]}, 2);
      }
    bm = quad_reduce(f, bm, true);
    LLVMValueRef old = get(f, m[h]);
    LLVMValueRef mn = gen_intrinsic(f->gen, "llvm.maxnum", &f->f32, 1, (LLVMValueRef[]){old, bm}, 2);
    /* no visible key yet: the max is taken as 0 (p = exp(-inf) = 0) */
    LLVMValueRef mu = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, mn, real(f, -INFINITY), ""),
                                      real(f, 0.0), mn, "");
    LLVMValueRef alpha = exp_from(f, old, mu);
    LLVMValueRef sum = LLVMBuildFMul(b, get(f, l[h]), alpha, "");
    for (int nt = 0; nt < 2; nt++)
      for (int i = 0; i < 2; i++) {
        p[nt][2 * h + i] = exp_from(f, sv[nt][i], mu);
        sum = LLVMBuildFAdd(b, sum, p[nt][2 * h + i], "");
      }
    LLVMBuildStore(b, sum, l[h]);
    LLVMBuildStore(b, mn, m[h]);
    for (int n0 = 0; n0 < c->dv; n0 += PTX_MMA_N)
      for (int i = 0; i < 2; i++) {
        LLVMValueRef acc = o[n0 / PTX_MMA_N].v[2 * h + i];
        LLVMBuildStore(b, LLVMBuildFMul(b, get(f, acc), alpha, ""), acc);
      }
  }
  accumulate(f, p, &vs, yl, o);
  step_done(f, next);
  steps_end(f, &blk);
  pin_tiles(f, o, c->dv);
  LLVMValueRef inv[2], lse[2];
  for (int h = 0; h < 2; h++) {
    LLVMValueRef total = quad_reduce(f, get(f, l[h]), false);
    LLVMValueRef empty = LLVMBuildFCmp(b, LLVMRealOEQ, total, real(f, 0.0), "");
    inv[h] = LLVMBuildSelect(b, empty, real(f, 0.0), LLVMBuildFDiv(b, real(f, 1.0), total, ""), "");
    LLVMValueRef log = gen_libcall(f->gen, "logf", f->f32, &f->f32, &total, 1);
    lse[h] = LLVMBuildSelect(b, empty, real(f, -INFINITY), LLVMBuildFAdd(b, get(f, m[h]), log, ""), "");
  }
  if (ob) store_tiles(f, o, c->dv, ob, x0, t, inv);
  if (!lseb) return;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  for (int h = 0; h < 2; h++) { /* the quad's first lane writes its rows' lse */
    LLVMValueRef row = tile_row(f, x0, 2 * h);
    LLVMBasicBlockRef write = LLVMAppendBasicBlockInContext(f->gen->context, fn, "lse");
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(f->gen->context, fn, "lse_done");
    LLVMValueRef first = LLVMBuildICmp(b, LLVMIntEQ, f->quad, c64(f, 0), "");
    LLVMBuildCondBr(b, LLVMBuildAnd(b, first, below(f, row, t), ""), write, next);
    LLVMPositionBuilderAtEnd(b, write);
    LLVMBuildStore(b, lse[h], gen_element(f->gen, f->f32, lseb, row));
    LLVMBuildBr(b, next);
    LLVMPositionBuilderAtEnd(b, next);
  }
}

/* grad_q of query rows x0 .. x0 + 15. */
static void grad_q(Flash *f, const FlashKernel *c, LLVMValueRef row0, LLVMValueRef x0,
                   LLVMValueRef qb, LLVMValueRef kb, LLVMValueRef vb, LLVMValueRef dob,
                   LLVMValueRef lseb, LLVMValueRef deltab, LLVMValueRef dqb) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef t = c64(f, c->t), s = c64(f, c->s);
  LLVMValueRef qa[HEAD_STEPS][4], doa[HEAD_STEPS][4];
  for (int64_t k0 = 0; k0 < c->d; k0 += PTX_MMA16_K) load_a(f, qb, x0, t, k0, c->d, qa[k0 / PTX_MMA16_K]);
  for (int64_t k0 = 0; k0 < c->dv; k0 += PTX_MMA16_K) load_a(f, dob, x0, t, k0, c->dv, doa[k0 / PTX_MMA16_K]);
  LLVMValueRef lse[2], delta[2];
  for (int h = 0; h < 2; h++) {
    lse[h] = load_guarded(f, lseb, tile_row(f, x0, 2 * h), t, c64(f, 0), 1);
    delta[h] = load_guarded(f, deltab, tile_row(f, x0, 2 * h), t, c64(f, 0), 1);
  }
  Tile dq[HEAD_TILES];
  tiles_zero(f, dq, HEAD_TILES);
  Staged ks = staged(f, "k", true, true, c->d), vs = staged(f, "v", true, false, c->dv);
  BlockLoop blk;
  blocks_begin(f, &blk, c64(f, 0), query_blocks_end(f, c, row0));
  stage(f, &ks, kb, blk.y_start, s);
  stage(f, &vs, vb, blk.y_start, s);
  LLVMValueRef yl = steps_begin(f, &blk), y0 = add(f, blk.y_start, yl);
  LLVMBasicBlockRef next = step_unless(f, query_step_idle(f, c, x0, y0));
  Tile st[2], dp[2];
  block_products(f, qa, &ks, yl, st);
  block_products(f, doa, &vs, yl, dp);
  LLVMValueRef ds[2][4];
  for (int nt = 0; nt < 2; nt++)
    for (int e = 0; e < 4; e++) {
      LLVMValueRef sv = visible_score(f, c, get(f, st[nt].v[e]), tile_row(f, x0, e), tile_col(f, y0, nt, e), true);
      LLVMValueRef p = p_from_lse(f, sv, lse[e >> 1]);
      ds[nt][e] = LLVMBuildFMul(b, p, LLVMBuildFSub(b, get(f, dp[nt].v[e]), delta[e >> 1], ""), "");
    }
  accumulate(f, ds, &ks, yl, dq);
  step_done(f, next);
  steps_end(f, &blk);
  pin_tiles(f, dq, c->d);
  store_tiles(f, dq, c->d, dqb, x0, t, (LLVMValueRef[]){c->scale, c->scale});
}

/* grad_k and grad_v of key rows x0 .. x0 + 15 (either output may be
 * absent), FA-2's order: the query blocks from the one holding the launch
 * block's first key when causal. */
static void grad_kv(Flash *f, const FlashKernel *c, LLVMValueRef row0, LLVMValueRef x0,
                    LLVMValueRef qb, LLVMValueRef kb, LLVMValueRef vb, LLVMValueRef dob,
                    LLVMValueRef lseb, LLVMValueRef deltab, LLVMValueRef dkb, LLVMValueRef dvb) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef t = c64(f, c->t), s = c64(f, c->s);
  LLVMValueRef ka[HEAD_STEPS][4], va[HEAD_STEPS][4];
  for (int64_t k0 = 0; k0 < c->d; k0 += PTX_MMA16_K) load_a(f, kb, x0, s, k0, c->d, ka[k0 / PTX_MMA16_K]);
  if (dkb)
    for (int64_t k0 = 0; k0 < c->dv; k0 += PTX_MMA16_K) load_a(f, vb, x0, s, k0, c->dv, va[k0 / PTX_MMA16_K]);
  Tile dk[HEAD_TILES], dv[HEAD_TILES];
  tiles_zero(f, dk, HEAD_TILES);
  tiles_zero(f, dv, HEAD_TILES);
  /* q: scores (n) and dk's sum (k); do: dp (n) and dv's sum (k) */
  Staged qs = staged(f, "q", true, dkb != NULL, c->d);
  Staged dos = staged(f, "do", dkb != NULL, dvb != NULL, c->dv);
  LLVMValueRef lse_s = staged_array(f, "lse", true), delta_s = dkb ? staged_array(f, "delta", true) : NULL;
  LLVMValueRef first = c->causal ? LLVMBuildUDiv(b, row0, c64(f, FLASH_BLOCK), "") : c64(f, 0);
  BlockLoop blk;
  blocks_begin(f, &blk, first, c64(f, ptx_dot_tiles(c->t, FLASH_BLOCK)));
  stage(f, &qs, qb, blk.y_start, t);
  if (dos.n || dos.k) stage(f, &dos, dob, blk.y_start, t);
  stage_row_values(f, lse_s, lseb, blk.y_start, t);
  if (delta_s) stage_row_values(f, delta_s, deltab, blk.y_start, t);
  LLVMValueRef yl = steps_begin(f, &blk), y0 = add(f, blk.y_start, yl);
  /* idle past the keys' or the queries' end, or causal, when every query
   * of the step is before the warp's first key */
  LLVMValueRef idle = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSGE, x0, s, ""),
                                  LLVMBuildICmp(b, LLVMIntSGE, y0, t, ""), "");
  if (c->causal)
    idle = LLVMBuildOr(b, idle, LLVMBuildICmp(b, LLVMIntSLT, addc(f, y0, FLASH_ROWS - 1), x0, ""), "");
  LLVMBasicBlockRef next = step_unless(f, idle);
  Tile st[2], dp[2];
  block_products(f, ka, &qs, yl, st);
  if (dkb) block_products(f, va, &dos, yl, dp);
  LLVMValueRef p[2][4], ds[2][4];
  for (int nt = 0; nt < 2; nt++)
    for (int e = 0; e < 4; e++) {
      LLVMValueRef y = tile_col(f, y0, nt, e), at = tile_col(f, yl, nt, e);
      LLVMValueRef sv = visible_score(f, c, get(f, st[nt].v[e]), tile_row(f, x0, e), y, false);
      LLVMValueRef lse = LLVMBuildLoad2(b, f->f32, ptx_shared_element(f->gen, lse_s, at), "");
      p[nt][e] = p_from_lse(f, sv, lse);
      if (!dkb) continue;
      LLVMValueRef delta = LLVMBuildLoad2(b, f->f32, ptx_shared_element(f->gen, delta_s, at), "");
      ds[nt][e] = LLVMBuildFMul(b, p[nt][e], LLVMBuildFSub(b, get(f, dp[nt].v[e]), delta, ""), "");
    }
  if (dvb) accumulate(f, p, &dos, yl, dv);
  if (dkb) accumulate(f, ds, &qs, yl, dk);
  step_done(f, next);
  steps_end(f, &blk);
  LLVMValueRef one[2] = {real(f, 1.0), real(f, 1.0)};
  if (dvb) pin_tiles(f, dv, c->dv);
  if (dkb) pin_tiles(f, dk, c->d);
  if (dvb) store_tiles(f, dv, c->dv, dvb, x0, s, one);
  if (dkb) store_tiles(f, dk, c->d, dkb, x0, s, (LLVMValueRef[]){c->scale, c->scale});
}

bool ptx_attention_mma(const Graph *g, const Kernel *kernel) {
  if (kernel->kind != KERNEL_ATTENTION || kernel->also_q != GRAPH_NONE) return false;
  const GraphNode *n = graph_node(g, kernel->root);
  /* inputs without a mask: q, k, v for the forward, q, k, v, do, lse, delta */
  int operands;
  if (n->op == GRAPH_OP_ATTENTION) operands = 3;
  else if (n->op == GRAPH_OP_ATTENTION_GRAD_Q || n->op == GRAPH_OP_ATTENTION_GRAD_K ||
           n->op == GRAPH_OP_ATTENTION_GRAD_V) operands = 4;
  else return false;
  if (n->dtype != GRAPH_F32 || n->num_inputs != (operands == 3 ? 3 : 6)) return false;
  for (int i = 0; i < operands; i++)
    if (!kernel_bf16_valued(g, n->inputs[i])) return false;
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape;
  const GraphShape *vs = &graph_node(g, n->inputs[2])->shape;
  return qs->dims[qs->rank - 1] <= FLASH_MAX_HEAD && vs->dims[vs->rank - 1] <= FLASH_MAX_HEAD;
}

/* The launch blocks of one batch: its rows of the warps' side (queries or
 * keys) in blocks of FLASH_CTA_ROWS. */
static int64_t row_blocks(const Graph *g, const GraphNode *n) {
  bool query_rows = n->op == GRAPH_OP_ATTENTION || n->op == GRAPH_OP_ATTENTION_GRAD_Q;
  const GraphShape *side = &graph_node(g, n->inputs[query_rows ? 0 : 1])->shape;
  return ptx_dot_tiles(side->dims[side->rank - 2], FLASH_CTA_ROWS);
}

int64_t ptx_attention_mma_items(const Graph *g, const Kernel *kernel) {
  const GraphNode *n = graph_node(g, kernel->root);
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape;
  int64_t batches = graph_shape_numel(qs) / (qs->dims[qs->rank - 2] * qs->dims[qs->rank - 1]);
  return batches * row_blocks(g, n) * PTX_BLOCK_THREADS;
}

static int arg_of(const Gen *gen, const Kernel *k, GraphId node) {
  int buffer = gen->plan->buffer_of[node];
  for (int i = 0; i < k->num_args; i++)
    if (k->args[i] == buffer) return i;
  return -1;
}

void ptx_emit_attention_mma(Gen *gen, int function, const Kernel *kernel) {
  const Graph *g = gen->graph;
  const GraphNode *n = graph_node(g, kernel->root);
  LLVMValueRef fn = gen_kernel_function(gen, function);
  LLVMBuilderRef b = gen->builder;
  Flash f = {.gen = gen, .b = b, .f32 = LLVMFloatTypeInContext(gen->context)};
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape;
  int r = qs->rank;
  FlashKernel c = {.causal = n->attrs.causal, .t = qs->dims[r - 2], .d = qs->dims[r - 1]};
  c.s = graph_node(g, n->inputs[1])->shape.dims[r - 2];
  c.dv = graph_node(g, n->inputs[2])->shape.dims[r - 1];
  c.scale = real(&f, n->attrs.scale);
  LLVMValueRef args = LLVMGetParam(fn, 0), in[6] = {NULL};
  for (int i = 0; i < n->num_inputs; i++)
    in[i] = gen_kernel_arg(gen, args, arg_of(gen, kernel, n->inputs[i]), f.f32);
  LLVMValueRef out = gen_kernel_arg(gen, args, 0, f.f32);
  LLVMValueRef also = kernel->also != GRAPH_NONE ? gen_kernel_arg(gen, args, 1, f.f32) : NULL;
  int64_t tiles = row_blocks(g, n);
  LLVMValueRef item = LLVMGetParam(fn, 1);
  f.function = function;
  f.tid = LLVMBuildURem(b, item, c64(&f, PTX_BLOCK_THREADS), "tid");
  LLVMValueRef block = LLVMBuildUDiv(b, item, c64(&f, PTX_BLOCK_THREADS), "block");
  LLVMValueRef lane = LLVMBuildURem(b, f.tid, c64(&f, PTX_WARP), "lane");
  f.group = LLVMBuildUDiv(b, lane, c64(&f, PTX_MMA_GROUP), "group");
  f.quad = LLVMBuildURem(b, lane, c64(&f, PTX_MMA_GROUP), "quad");
  LLVMValueRef batch = LLVMBuildUDiv(b, block, c64(&f, tiles), "batch");
  LLVMValueRef row0 = gen_imul(gen, LLVMBuildURem(b, block, c64(&f, tiles), ""), FLASH_CTA_ROWS);
  LLVMValueRef x0 = add(&f, row0, gen_imul(gen, LLVMBuildUDiv(b, f.tid, c64(&f, PTX_WARP), ""), FLASH_ROWS));
  /* each input and output offset to the warp's batch */
#define AT(p, per) ((p) ? gen_element(gen, f.f32, (p), gen_imul(gen, batch, (per))) : NULL)
  LLVMValueRef qb = AT(in[0], c.t * c.d), kb = AT(in[1], c.s * c.d), vb = AT(in[2], c.s * c.dv);
  if (n->op == GRAPH_OP_ATTENTION) {
    forward(&f, &c, row0, x0, qb, kb, vb, AT(out, c.t * c.dv), AT(also, c.t));
  } else {
    LLVMValueRef dob = AT(in[3], c.t * c.dv), lseb = AT(in[4], c.t), deltab = AT(in[5], c.t);
    if (n->op == GRAPH_OP_ATTENTION_GRAD_Q)
      grad_q(&f, &c, row0, x0, qb, kb, vb, dob, lseb, deltab, AT(out, c.t * c.d));
    else if (n->op == GRAPH_OP_ATTENTION_GRAD_K)
      grad_kv(&f, &c, row0, x0, qb, kb, vb, dob, lseb, deltab, AT(out, c.s * c.d), AT(also, c.s * c.dv));
    else
      grad_kv(&f, &c, row0, x0, qb, kb, vb, dob, lseb, deltab, NULL, AT(out, c.s * c.dv));
  }
#undef AT
  LLVMBuildRetVoid(b);
}
