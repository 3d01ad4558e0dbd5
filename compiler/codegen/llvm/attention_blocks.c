/* The pieces the fused attention kernels are built from (declared in
 * attention_internal.h, the algorithm in attention.c). */
#include <math.h>
#include <stdlib.h>

#include "attention_internal.h"

LLVMValueRef att_i64c(Att *a, int64_t v) { return gen_i64(a->gen, v); }
LLVMValueRef att_real(Att *a, double v) { return LLVMConstReal(a->t, v); }
LLVMValueRef att_iadd(Att *a, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildAdd(a->b, x, y, "");
}
LLVMValueRef att_imul(Att *a, LLVMValueRef x, int64_t c) {
  return LLVMBuildMul(a->b, x, att_i64c(a, c), "");
}

/* A chunk of w elements: a vector, or on the GPU one element a lane. */
static LLVMTypeRef lanes_type(Att *a, int w) {
  return w > 1 && !a->lanes ? LLVMVectorType(a->t, (unsigned)w) : a->t;
}

static bool is_private(const Att *a, LLVMValueRef base) {
  for (int i = 0; i < a->num_private; i++)
    if (a->private_arrays[i] == base) return true;
  return false;
}

/* Where a chunk of w elements of `base` from `index` is: on the GPU a
 * whole chunk's element is the lane's, at index + lane in memory all
 * threads see and at index in a private array. */
static LLVMValueRef chunk_element(Att *a, LLVMValueRef base, LLVMValueRef index, int w) {
  if (a->lanes && w > 1 && !is_private(a, base)) index = LLVMBuildAdd(a->b, index, a->lane, "");
  return gen_element(a->gen, a->t, base, index);
}

static unsigned elem_align(const Att *a) { return a->t == a->gen->f64 ? 8 : 4; }

/* w elements of `base` (a T*) from `index`. */
LLVMValueRef att_load_w(Att *a, LLVMValueRef base, LLVMValueRef index, int w) {
  LLVMValueRef p = chunk_element(a, base, index, w);
  LLVMTypeRef ty = lanes_type(a, w);
  if (ty != a->t) p = LLVMBuildBitCast(a->b, p, LLVMPointerType(ty, 0), "");
  LLVMValueRef v = LLVMBuildLoad2(a->b, ty, p, "");
  LLVMSetAlignment(v, elem_align(a));
  return v;
}

LLVMValueRef att_store_w(Att *a, LLVMValueRef value, LLVMValueRef base, LLVMValueRef index,
                            int w) {
  LLVMValueRef p = chunk_element(a, base, index, w);
  LLVMTypeRef ty = lanes_type(a, w);
  if (ty != a->t) p = LLVMBuildBitCast(a->b, p, LLVMPointerType(ty, 0), "");
  LLVMValueRef s = LLVMBuildStore(a->b, value, p);
  LLVMSetAlignment(s, elem_align(a));
  return s;
}

LLVMValueRef att_splat_w(Att *a, LLVMValueRef x, int w) {
  return lanes_type(a, w) == a->t ? x : gen_splat(a->gen, x, (unsigned)w);
}

/* Sum of the lanes of v, pairwise (on the GPU, the warp's shuffle sum). */
static LLVMValueRef hsum(Att *a, LLVMValueRef v, int w) {
  if (a->lanes) return w > 1 ? a->lanes->sum(a->gen, v, a->lane) : v;
  return gen_lane_sum(a->gen, v);
}

LLVMValueRef att_slot(Att *a, LLVMTypeRef ty, LLVMValueRef init) {
  LLVMValueRef s = gen_entry_alloca(a->gen, ty, "s");
  if (init) LLVMBuildStore(a->b, init, s);
  return s;
}

LLVMValueRef att_get(Att *a, LLVMValueRef s) {
  return LLVMBuildLoad2(a->b, LLVMGetAllocatedType(s), s, "");
}

/* Pass 0 over [0, len) steps through whole chunks of a->width lanes, pass 1
 * through the elements left, one at a time. Begins pass `pass`'s loop with
 * *lw its lanes per step and *at the step's first element; false (and no
 * loop) when the pass has nothing to do. */
bool att_chunk_pass_begin(Att *a, int pass, int64_t len, GenLoop *loop, int *lw,
                             LLVMValueRef *at) {
  int w = a->width;
  int64_t full = w > 1 ? len / w : 0;
  if (pass == 0) {
    if (full == 0) return false;
    gen_loop_begin(a->gen, loop, att_i64c(a, 0), att_i64c(a, full));
    *at = att_imul(a, loop->index, w);
    *lw = w;
  } else {
    gen_loop_begin(a->gen, loop, att_i64c(a, full * w), att_i64c(a, len));
    *at = loop->index;
    *lw = 1;
  }
  return true;
}

/* Over acc[0..len): zero it, scale it by c, or store acc / c into x. */
void att_acc_apply(Att *a, AccOp op, LLVMValueRef acc, int64_t len, LLVMValueRef c,
                      LLVMValueRef x) {
  for (int pass = 0; pass < 2; pass++) {
    int lw;
    GenLoop loop;
    LLVMValueRef at;
    if (!att_chunk_pass_begin(a, pass, len, &loop, &lw, &at)) continue;
    LLVMValueRef cv = c ? att_splat_w(a, c, lw) : NULL;
    switch (op) {
    case ACC_ZERO: att_store_w(a, LLVMConstNull(lanes_type(a, lw)), acc, at, lw); break;
    case ACC_SCALE: att_store_w(a, LLVMBuildFMul(a->b, att_load_w(a, acc, at, lw), cv, ""), acc, at, lw); break;
    case ACC_STORE: att_store_w(a, LLVMBuildFDiv(a->b, att_load_w(a, acc, at, lw), cv, ""), x, at, lw); break;
    }
    gen_loop_end(a->gen, &loop);
  }
}

LLVMValueRef att_exp_t(Att *a, LLVMValueRef x) {
  if (a->t == a->gen->f32) return gen_exp_f32(a->gen, x);
  return gen_libcall(a->gen, "exp", a->t, &a->t, &x, 1);
}

LLVMValueRef att_log_t(Att *a, LLVMValueRef x) {
  return gen_libcall(a->gen, a->t == a->gen->f32 ? "logf" : "log", a->t, &a->t, &x, 1);
}

LLVMValueRef att_is_neg_inf(Att *a, LLVMValueRef x) {
  return LLVMBuildFCmp(a->b, LLVMRealOEQ, x, att_real(a, -INFINITY), "");
}

GenMaskMap gen_mask_map(LLVMValueRef data, const GraphShape *mask, const GraphShape *q) {
  int r = q->rank;
  GenMaskMap m = {.data = data, .rank = r};
  int64_t stride = 1;
  for (int i = 0; i < r; i++) m.dims[i] = i < r - 2 ? q->dims[i] : 1;
  for (int i = mask->rank - 1; i >= 0; i--) {
    m.stride[r - mask->rank + i] = mask->dims[i] == 1 ? 0 : stride;
    stride *= mask->dims[i];
  }
  return m;
}

LLVMValueRef gen_mask_row(Gen *gen, const GenMaskMap *m, LLVMValueRef batch, LLVMValueRef i) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef at = gen_imul(gen, i, m->stride[m->rank - 2]), rest = batch;
  for (int axis = m->rank - 3; axis >= 0; axis--) {
    if (m->stride[axis] != 0)
      at = gen_iadd(gen, at, gen_imul(gen, LLVMBuildURem(b, rest, gen_i64(gen, m->dims[axis]), ""), m->stride[axis]));
    rest = LLVMBuildUDiv(b, rest, gen_i64(gen, m->dims[axis]), "");
  }
  return at;
}

/* Starts the body of a key (or query) visit that is skipped when `skip`
 * holds; returns the block to branch to when done. */
LLVMBasicBlockRef att_begin_unless(Att *a, LLVMValueRef skip) {
  LLVMBasicBlockRef work = LLVMAppendBasicBlockInContext(a->gen->context, a->fn, "work");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(a->gen->context, a->fn, "next");
  LLVMBuildCondBr(a->b, skip, next, work);
  LLVMPositionBuilderAtEnd(a->b, work);
  return next;
}

void att_end_unless(Att *a, LLVMBasicBlockRef next) {
  LLVMBuildBr(a->b, next);
  LLVMPositionBuilderAtEnd(a->b, next);
}

LLVMValueRef att_min_i64(Att *a, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildSelect(a->b, LLVMBuildICmp(a->b, LLVMIntSLT, x, y, ""), x, y, "");
}

LLVMValueRef att_max_t(Att *a, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildSelect(a->b, LLVMBuildFCmp(a->b, LLVMRealOGT, x, y, ""), x, y, "");
}

LLVMValueRef att_row_array(Att *a, int64_t len, const char *name) {
  LLVMValueRef arr = gen_entry_alloca(a->gen, LLVMArrayType(a->t, (unsigned)len), name);
  LLVMValueRef base = LLVMBuildBitCast(a->b, arr, LLVMPointerType(a->t, 0), "");
  if (a->lanes) { /* one row a tile there: five arrays */
    if (a->num_private == MAX_PRIVATE) abort();
    a->private_arrays[a->num_private++] = base;
  }
  return base;
}

/* Vectors x and y, each `groups` runs of partial sums, folded into one of
 * twice as many runs of half the length: x's runs, then y's, each the sum
 * of its lower and upper half. */
static LLVMValueRef fold(Att *a, LLVMValueRef x, LLVMValueRef y, int groups, int w) {
  int size = w / groups, half = size / 2;
  LLVMValueRef lo[32], hi[32];
  for (int q = 0; q < 2 * groups; q++)
    for (int e = 0; e < half; e++) {
      int from = (q < groups ? 0 : w) + (q % groups) * size + e;
      lo[q * half + e] = gen_i32(a->gen, from);
      hi[q * half + e] = gen_i32(a->gen, from + half);
    }
  LLVMValueRef l = LLVMBuildShuffleVector(a->b, x, y, LLVMConstVector(lo, (unsigned)w), "");
  LLVMValueRef h = LLVMBuildShuffleVector(a->b, x, y, LLVMConstVector(hi, (unsigned)w), "");
  return LLVMBuildFAdd(a->b, l, h, "");
}

/* v[r] = the sum of the lanes of v[r], r < n (n a power of two).
 * The n vectors are folded pairwise into one, which is then folded with
 * itself until row r's sum is lane r: about n + log2(w) shuffle-adds instead
 * of n log2(w), in the same pairwise order as hsum. */
static void hsum_rows(Att *a, LLVMValueRef *v, int n, int w) {
  if (n == 1 || n > w) {
    for (int r = 0; r < n; r++) v[r] = hsum(a, v[r], w);
    return;
  }
  LLVMValueRef cur[TILE];
  int count = n, groups = 1;
  for (int r = 0; r < n; r++) cur[r] = v[r];
  for (; count > 1; count /= 2, groups *= 2)
    for (int i = 0; i < count / 2; i++) cur[i] = fold(a, cur[2 * i], cur[2 * i + 1], groups, w);
  for (; groups < w; groups *= 2) cur[0] = fold(a, cur[0], cur[0], groups, w);
  for (int r = 0; r < n; r++) v[r] = LLVMBuildExtractElement(a->b, cur[0], gen_i32(a->gen, r), "");
}

/* out[r] = xs[r][0..len) . y[0..len) for r < n: y is loaded once per chunk. */
void att_dot_rows(Att *a, LLVMValueRef *xs, LLVMValueRef y, int n, int64_t len,
                     LLVMValueRef *out) {
  int w = a->width;
  int64_t full = len / w;
  LLVMTypeRef vt = lanes_type(a, w);
  LLVMValueRef acc[TILE];
  for (int r = 0; r < n; r++) acc[r] = att_slot(a, vt, LLVMConstNull(vt));
  if (full > 0) {
    GenLoop c;
    gen_loop_begin(a->gen, &c, att_i64c(a, 0), att_i64c(a, full));
    LLVMValueRef at = att_imul(a, c.index, w);
    LLVMValueRef yv = att_load_w(a, y, at, w);
    for (int r = 0; r < n; r++) {
      LLVMValueRef x = att_load_w(a, xs[r], at, w);
      LLVMBuildStore(a->b, gen_fmuladd(a->gen, x, yv, att_get(a, acc[r])), acc[r]);
    }
    gen_loop_end(a->gen, &c);
  }
  LLVMValueRef sums[TILE];
  for (int r = 0; r < n; r++) sums[r] = att_get(a, acc[r]);
  hsum_rows(a, sums, n, w);
  for (int r = 0; r < n; r++) {
    LLVMValueRef sum = sums[r];
    for (int64_t e = full * w; e < len; e++)
      sum = gen_fmuladd(a->gen, att_load_w(a, xs[r], att_i64c(a, e), 1), att_load_w(a, y, att_i64c(a, e), 1), sum);
    out[r] = sum;
  }
}

/* acc[r][0..len) += c[r] * x[0..len) for r < n: x is loaded once per chunk. */
void att_axpy_rows(Att *a, LLVMValueRef *acc, LLVMValueRef *c, int n, int64_t len,
                      LLVMValueRef x) {
  for (int pass = 0; pass < 2; pass++) {
    int lw;
    GenLoop loop;
    LLVMValueRef at;
    if (!att_chunk_pass_begin(a, pass, len, &loop, &lw, &at)) continue;
    LLVMValueRef xv = att_load_w(a, x, at, lw);
    for (int r = 0; r < n; r++) {
      LLVMValueRef sum = gen_fmuladd(a->gen, att_splat_w(a, c[r], lw), xv, att_load_w(a, acc[r], at, lw));
      att_store_w(a, sum, acc[r], at, lw);
    }
    gen_loop_end(a->gen, &loop);
  }
}

/* Chunks of a row whose accumulators block_axpy keeps in registers at once:
 * with TILE rows, 4 x 4 vectors, and 4 independent fused multiply-add
 * chains per row hide the latency of one. */
#define GROUP 4

/* acc[r][at .. at + nc lw) += sum over u < count of c[r][u] x[u stride + at ..]:
 * the nc chunks' accumulators of the n rows stay in registers over the
 * block's rows of x, instead of a load and a store of acc per product.
 * Their loads and stores are volatile, which keeps acc in memory between
 * blocks: promoted to registers over the whole tile, grad_k's 2 x 16
 * accumulators (dk and dv) left too few for the rest, and the spilled ones
 * went through memory inside this loop (grad_k + grad_v 3.47 -> 3.0 ms a
 * call on gpt-small). */
static void block_axpy_group(Att *a, LLVMValueRef *acc, LLVMValueRef *c, int n, LLVMValueRef x,
                             int64_t stride, LLVMValueRef count, LLVMValueRef at, int nc, int lw) {
  LLVMValueRef sum[TILE][GROUP];
  LLVMTypeRef vt = lanes_type(a, lw);
  for (int r = 0; r < n; r++)
    for (int k = 0; k < nc; k++) {
      LLVMValueRef v = att_load_w(a, acc[r], att_iadd(a, at, att_i64c(a, k * lw)), lw);
      LLVMSetVolatile(v, 1);
      sum[r][k] = att_slot(a, vt, v);
    }
  GenLoop u;
  gen_loop_begin(a->gen, &u, att_i64c(a, 0), count);
  LLVMValueRef row = att_iadd(a, att_imul(a, u.index, stride), at);
  LLVMValueRef xv[GROUP];
  for (int k = 0; k < nc; k++) xv[k] = att_load_w(a, x, att_iadd(a, row, att_i64c(a, k * lw)), lw);
  for (int r = 0; r < n; r++) {
    LLVMValueRef cr = att_splat_w(a, att_load_w(a, c[r], u.index, 1), lw);
    for (int k = 0; k < nc; k++)
      LLVMBuildStore(a->b, gen_fmuladd(a->gen, cr, xv[k], att_get(a, sum[r][k])), sum[r][k]);
  }
  gen_loop_end(a->gen, &u);
  for (int r = 0; r < n; r++)
    for (int k = 0; k < nc; k++)
      LLVMSetVolatile(att_store_w(a, att_get(a, sum[r][k]), acc[r], att_iadd(a, at, att_i64c(a, k * lw)), lw), 1);
}

/* acc[r][0..len) += sum over u < count of c[r][u] x[u stride .. u stride + len)
 * for r < n (c: BLOCK-long arrays; x: the block's first row of the other
 * side), u ascending per element as one row at a time would add them:
 * groups of GROUP chunks, the chunks left over, then the elements left. */
void att_block_axpy(Att *a, LLVMValueRef *acc, LLVMValueRef *c, int n, int64_t len,
                       LLVMValueRef x, int64_t stride, LLVMValueRef count) {
  int w = a->width;
  int64_t full = w > 1 ? len / w : 0, groups = full / GROUP;
  if (groups > 0) {
    GenLoop g;
    gen_loop_begin(a->gen, &g, att_i64c(a, 0), att_i64c(a, groups));
    block_axpy_group(a, acc, c, n, x, stride, count, att_imul(a, g.index, GROUP * w), GROUP, w);
    gen_loop_end(a->gen, &g);
  }
  if (full % GROUP)
    block_axpy_group(a, acc, c, n, x, stride, count, att_i64c(a, groups * GROUP * w),
                     (int)(full % GROUP), w);
  if (full * w < len) {
    GenLoop e;
    gen_loop_begin(a->gen, &e, att_i64c(a, full * w), att_i64c(a, len));
    block_axpy_group(a, acc, c, n, x, stride, count, e.index, 1, 1);
    gen_loop_end(a->gen, &e);
  }
}

/* p[e] = exp(s[e] - (sub ? sub[e] : sub0)) for e in [0, BLOCK), exactly 0
 * where s[e] = -inf. In f32 on a vector target, whole vectors at a time:
 * as a loop of scalars LLVM unrolled it fully before its vectorizer saw
 * it wherever the scores also read a mask (the Transformer's kernels), and
 * the scalar exp was the hottest code of its attention. */
void att_block_exp(Att *a, LLVMValueRef s, LLVMValueRef sub, LLVMValueRef sub0, LLVMValueRef p) {
  int w = a->width > 1 && !a->lanes && a->t == a->gen->f32 && BLOCK % a->width == 0 ? a->width : 1;
  GenLoop e;
  gen_loop_begin(a->gen, &e, att_i64c(a, 0), att_i64c(a, BLOCK / w));
  LLVMValueRef at = att_imul(a, e.index, w);
  LLVMValueRef m = sub ? att_load_w(a, sub, at, w) : att_splat_w(a, sub0, w);
  LLVMValueRef se = att_load_w(a, s, at, w);
  LLVMValueRef pe = att_exp_t(a, LLVMBuildFSub(a->b, se, m, ""));
  LLVMValueRef dead = LLVMBuildFCmp(a->b, LLVMRealOEQ, se, att_splat_w(a, att_real(a, -INFINITY), w), "");
  att_store_w(a, LLVMBuildSelect(a->b, dead, LLVMConstNull(LLVMTypeOf(pe)), pe, ""), p, at, w);
  gen_loop_end(a->gen, &e);
}

/* The largest of s[0..BLOCK) (-inf when all are): vectors of the target's
 * width folded lane-wise, then in halves. */
LLVMValueRef att_block_max(Att *a, LLVMValueRef s) {
  int w = a->width > 1 && !a->lanes && BLOCK % a->width == 0 ? a->width : 1;
  LLVMValueRef m = att_load_w(a, s, att_i64c(a, 0), w);
  for (int at = w; at < BLOCK; at += w) m = att_max_t(a, m, att_load_w(a, s, att_i64c(a, at), w));
  for (; w > 1; w /= 2) {
    LLVMValueRef lo[32], hi[32];
    for (int i = 0; i < w / 2; i++) lo[i] = gen_i32(a->gen, i), hi[i] = gen_i32(a->gen, w / 2 + i);
    LLVMValueRef l = LLVMBuildShuffleVector(a->b, m, LLVMGetUndef(LLVMTypeOf(m)),
                                            LLVMConstVector(lo, (unsigned)(w / 2)), "");
    LLVMValueRef h = LLVMBuildShuffleVector(a->b, m, LLVMGetUndef(LLVMTypeOf(m)),
                                            LLVMConstVector(hi, (unsigned)(w / 2)), "");
    m = att_max_t(a, l, h);
  }
  return LLVMGetTypeKind(LLVMTypeOf(m)) == LLVMVectorTypeKind
             ? LLVMBuildExtractElement(a->b, m, gen_i32(a->gen, 0), "")
             : m;
}

/* Where block_dots' operand holds element h of the other side's row u:
 * blocks of BLOCK rows one after the other, each its len elements' rows of
 * BLOCK lanes, so that a block's loads stream through consecutive lines
 * (rows of the whole side's length apart, gpt-small's two transposed sides
 * took more than the L1 cache's sets and ways). */
static LLVMValueRef transposed_at(Att *a, LLVMValueRef u, LLVMValueRef h, int64_t len) {
  LLVMValueRef block = LLVMBuildUDiv(a->b, u, att_i64c(a, BLOCK), "");
  LLVMValueRef lane = LLVMBuildURem(a->b, u, att_i64c(a, BLOCK), "");
  return att_iadd(a, att_iadd(a, att_imul(a, block, len * BLOCK), att_imul(a, h, BLOCK)), lane);
}

/* dst at transposed_at(u, h) = src[u len + h] for u < rows, h < len, and 0
 * for u in [rows, padded): `rows` rows of `len` elements transposed,
 * squares of a->width x a->width through shuffles (the last rows, when
 * fewer than a square and padding follows, as a square whose missing rows
 * are zeros: the small Transformer's ten keys a head went through the
 * element loop, which took more time than its attention's products), the
 * edges one element at a time. */
void att_transpose_rows(Att *a, LLVMValueRef src, int64_t rows, int64_t len, LLVMValueRef dst,
                           int64_t padded) {
  int w = a->width;
  int64_t row_squares = rows / w, len_squares = len / w, part = rows % w;
  int64_t squares_end = row_squares * w;
  if (part > 0 && padded >= squares_end + w) squares_end += w; /* with the partial square */
  if (squares_end > 0 && len_squares > 0) {
    GenLoop u, h;
    gen_loop_begin(a->gen, &u, att_i64c(a, 0), att_i64c(a, squares_end / w));
    LLVMValueRef u0 = att_imul(a, u.index, w);
    gen_loop_begin(a->gen, &h, att_i64c(a, 0), att_i64c(a, len_squares));
    LLVMValueRef h0 = att_imul(a, h.index, w), v[32];
    if (squares_end > row_squares * w) {
      /* the partial square's rows past `rows` are zeros */
      LLVMValueRef partial = LLVMBuildICmp(a->b, LLVMIntEQ, u.index, att_i64c(a, row_squares), "");
      LLVMValueRef zero = LLVMConstNull(lanes_type(a, w));
      for (int r = 0; r < w; r++) {
        if (r < part) {
          v[r] = att_load_w(a, src, att_iadd(a, att_imul(a, att_iadd(a, u0, att_i64c(a, r)), len), h0), w);
          continue;
        }
        /* a row of a full square, or zeros (it is read at row 0 then) */
        LLVMValueRef row = LLVMBuildSelect(a->b, partial, att_i64c(a, 0), att_iadd(a, u0, att_i64c(a, r)), "");
        LLVMValueRef x = att_load_w(a, src, att_iadd(a, att_imul(a, row, len), h0), w);
        v[r] = LLVMBuildSelect(a->b, partial, zero, x, "");
      }
    } else {
      for (int r = 0; r < w; r++)
        v[r] = att_load_w(a, src, att_iadd(a, att_imul(a, att_iadd(a, u0, att_i64c(a, r)), len), h0), w);
    }
    gen_transpose_square(a->gen, v, w);
    for (int r = 0; r < w; r++)
      att_store_w(a, v[r], dst, transposed_at(a, u0, att_iadd(a, h0, att_i64c(a, r)), len), w);
    gen_loop_end(a->gen, &h);
    gen_loop_end(a->gen, &u);
  }
  /* the elements past the squares: their rows' last columns, then the
   * rows after them and the zero padding */
  for (int edge = 0; edge < 2; edge++) {
    int64_t u_from = edge ? (len_squares > 0 ? squares_end : 0) : 0;
    int64_t u_to = edge ? padded : (len_squares > 0 ? squares_end : 0);
    int64_t h_from = edge ? 0 : len_squares * w;
    if (u_from >= u_to || h_from >= len) continue;
    GenLoop u, h;
    gen_loop_begin(a->gen, &u, att_i64c(a, u_from), att_i64c(a, u_to));
    gen_loop_begin(a->gen, &h, att_i64c(a, h_from), att_i64c(a, len));
    LLVMValueRef at = transposed_at(a, u.index, h.index, len), x = att_real(a, 0.0);
    if (u_from < rows) {
      /* a row past `rows` reads row 0 and stores 0 */
      LLVMValueRef real_row = LLVMBuildICmp(a->b, LLVMIntSLT, u.index, att_i64c(a, rows), "");
      LLVMValueRef from = LLVMBuildSelect(a->b, real_row, u.index, att_i64c(a, 0), "");
      LLVMValueRef value = att_load_w(a, src, att_iadd(a, att_imul(a, from, len), h.index), 1);
      x = LLVMBuildSelect(a->b, real_row, value, x, "");
    }
    att_store_w(a, x, dst, at, 1);
    gen_loop_end(a->gen, &h);
    gen_loop_end(a->gen, &u);
  }
}

/* out[r][0..BLOCK) = the dot products of xs[r][0..len) with the other
 * side's rows at .. at + BLOCK - 1 (at a whole block) as transposed into
 * tr (transposed_at), for r < n: per element of the head, one vector of the
 * block's columns against the rows' element broadcast, a fused
 * multiply-add a lane, instead of dot_rows' lane sum and scalar work per
 * pair. Where a block is one vector (AVX-512, f32), the head's elements go
 * in turn to four sums added at the end: TILE rows' chains alone left half
 * of a core's two fused multiply-adds a cycle idle (4-cycle latency), and
 * 16 chains measured a little faster than 8 (AVX2's 16 registers would
 * not hold them).
 * A row's sums do not depend on n, so neither does its result on the
 * tiling or the thread count. */
void att_block_dots(Att *a, LLVMValueRef *xs, int n, int64_t len, LLVMValueRef tr,
                       LLVMValueRef at, LLVMValueRef *out) {
  int w = a->width, nv = BLOCK / w, parts = nv == 1 ? 4 : 1;
  LLVMTypeRef vt = lanes_type(a, w);
  LLVMValueRef acc[4][TILE][BLOCK]; /* [part][row][vector] */
  for (int p = 0; p < parts; p++)
    for (int r = 0; r < n; r++)
      for (int k = 0; k < nv; k++) acc[p][r][k] = att_slot(a, vt, LLVMConstNull(vt));
  /* parts consecutive elements a step, then the ones left into part 0 */
  for (int pass = 0; pass < 2; pass++) {
    int64_t from = pass ? len / parts * parts : 0, to = pass ? len : len / parts;
    if (from >= to) continue;
    GenLoop h;
    gen_loop_begin(a->gen, &h, att_i64c(a, from), att_i64c(a, to));
    for (int p = 0; p < (pass ? 1 : parts); p++) {
      LLVMValueRef e = pass ? h.index : att_iadd(a, att_imul(a, h.index, parts), att_i64c(a, p));
      LLVMValueRef col = att_iadd(a, att_imul(a, at, len), att_imul(a, e, BLOCK)), tv[BLOCK];
      for (int k = 0; k < nv; k++) tv[k] = att_load_w(a, tr, att_iadd(a, col, att_i64c(a, k * w)), w);
      for (int r = 0; r < n; r++) {
        LLVMValueRef x = att_splat_w(a, att_load_w(a, xs[r], e, 1), w);
        for (int k = 0; k < nv; k++)
          LLVMBuildStore(a->b, gen_fmuladd(a->gen, x, tv[k], att_get(a, acc[p][r][k])), acc[p][r][k]);
      }
    }
    gen_loop_end(a->gen, &h);
  }
  for (int r = 0; r < n; r++)
    for (int k = 0; k < nv; k++) {
      LLVMValueRef sum = att_get(a, acc[0][r][k]);
      for (int p = 1; p < parts; p++) sum = LLVMBuildFAdd(a->b, sum, att_get(a, acc[p][r][k]), "");
      att_store_w(a, sum, out[r], att_i64c(a, k * w), w);
    }
}

/* A stack array of len elements, aligned for whole vectors. */
LLVMValueRef att_tr_array(Att *a, int64_t len) {
  LLVMValueRef arr = gen_entry_alloca(a->gen, LLVMArrayType(a->t, (unsigned)len), "transposed");
  LLVMSetAlignment(arr, 64);
  return LLVMBuildBitCast(a->b, arr, LLVMPointerType(a->t, 0), "");
}
