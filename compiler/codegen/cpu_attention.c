/* Fused attention kernels (ops.def: attention, attention_lse and
 * attention_grad_q/k/v) over materialised q, k, v (and do, lse, delta,
 * mask). The range is over rows of the output: (batch, query i) for
 * attention, attention_lse and grad_q, (batch, key j) for grad_k and
 * grad_v, so threads never write the same element and split batch, heads
 * and rows, never the inner sums.
 *
 * Forward (one query row): keys in order, online softmax (FlashAttention's
 * running max m, sum l and unnormalised output, rescaled by exp(m - m')
 * when the max grows), so no row of scores is stored. Keys past the
 * diagonal of a causal op are never visited, and a masked key gets p = 0.
 * A row with no visible key gives o = 0 and lse = -inf. When kernel
 * formation paired an attention_lse with the op (Kernel.also), the kernel
 * writes lse = m + log l too.
 *
 * Backward: p = exp(s - lse) is recomputed from q, k and the saved lse;
 * grad_q sums over the keys of its row, grad_k and grad_v over the queries
 * that see their key (i >= j when causal); rows with lse = -inf contribute
 * nothing. When kernel formation paired a grad_v with a grad_k (Kernel.also),
 * the grad_k kernel accumulates dv = sum_i p_ij do_i from the same p and
 * do rows as well; when the CPU's plan joined the grad_q too
 * (Kernel.also_q), a range item is a whole (batch, head), whose key tiles
 * in order also add dq_i += sum_j ds_ij k_j into its zeroed dq rows: the
 * scores, p and dp are then computed once for all three, not twice, and dq
 * keeps grad_q's order of summation.
 *
 * A block's scores (and the backward's dp) are a small matrix product over
 * the other side's rows transposed once per batch (block_dots), keys or
 * queries as lanes; past a stack limit and on the GPU they are one dot
 * product per pair (dot_rows). Dot products and the accumulations run over
 * the head size in vectors of the target's width, the tail in scalars.
 *
 * On the GPU a warp shares each row (CpuLanes): a "vector" of 32 elements
 * is one element a lane (neighbouring lanes, neighbouring elements of a q,
 * k, v or do row: coalesced), a dot product's lane sum is the warp's
 * shuffle sum, and everything else (scores, softmax, the tail) every lane
 * computes alike. Its private arrays (accumulators, a block's scores) keep
 * a lane's element of the chunk starting at h at index h. One thread a row
 * left a kernel 8192 threads (gpt-small), too few to hide their latency:
 * on an H200 the four attention kernels of a layer took 5 ms a step. */
#include <math.h>
#include <stdlib.h>

#include "cpu_internal.h"

/* Private arrays a tile allocates (row_array), for lane mode's indexing. */
#define MAX_PRIVATE 16

typedef struct Att {
  CpuGen *gen;
  LLVMBuilderRef b;
  LLVMTypeRef t;  /* element type */
  int width;      /* lanes of a vector chunk; 1 = scalars only */
  LLVMValueRef fn;
  const CpuLanes *lanes; /* the GPU's: width = lanes->lanes; else NULL */
  LLVMValueRef lane;     /* with lanes: this thread's lane of its row */
  LLVMValueRef private_arrays[MAX_PRIVATE];
  int num_private;
} Att;

static LLVMValueRef i64c(Att *a, int64_t v) { return cpu_i64(a->gen, v); }
static LLVMValueRef real(Att *a, double v) { return LLVMConstReal(a->t, v); }
static LLVMValueRef iadd(Att *a, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildAdd(a->b, x, y, "");
}
static LLVMValueRef imul(Att *a, LLVMValueRef x, int64_t c) {
  return LLVMBuildMul(a->b, x, i64c(a, c), "");
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
  return cpu_element(a->gen, a->t, base, index);
}

static unsigned elem_align(const Att *a) { return a->t == a->gen->f64 ? 8 : 4; }

/* w elements of `base` (a T*) from `index`. */
static LLVMValueRef load_w(Att *a, LLVMValueRef base, LLVMValueRef index, int w) {
  LLVMValueRef p = chunk_element(a, base, index, w);
  LLVMTypeRef ty = lanes_type(a, w);
  if (ty != a->t) p = LLVMBuildBitCast(a->b, p, LLVMPointerType(ty, 0), "");
  LLVMValueRef v = LLVMBuildLoad2(a->b, ty, p, "");
  LLVMSetAlignment(v, elem_align(a));
  return v;
}

static LLVMValueRef store_w(Att *a, LLVMValueRef value, LLVMValueRef base, LLVMValueRef index,
                            int w) {
  LLVMValueRef p = chunk_element(a, base, index, w);
  LLVMTypeRef ty = lanes_type(a, w);
  if (ty != a->t) p = LLVMBuildBitCast(a->b, p, LLVMPointerType(ty, 0), "");
  LLVMValueRef s = LLVMBuildStore(a->b, value, p);
  LLVMSetAlignment(s, elem_align(a));
  return s;
}

static LLVMValueRef splat_w(Att *a, LLVMValueRef x, int w) {
  return lanes_type(a, w) == a->t ? x : cpu_splat(a->gen, x, (unsigned)w);
}

/* Sum of the lanes of v, pairwise (on the GPU, the warp's shuffle sum). */
static LLVMValueRef hsum(Att *a, LLVMValueRef v, int w) {
  if (a->lanes) return w > 1 ? a->lanes->sum(a->gen, v, a->lane) : v;
  return cpu_lane_sum(a->gen, v);
}

static LLVMValueRef slot(Att *a, LLVMTypeRef ty, LLVMValueRef init) {
  LLVMValueRef s = cpu_entry_alloca(a->gen, ty, "s");
  if (init) LLVMBuildStore(a->b, init, s);
  return s;
}

static LLVMValueRef get(Att *a, LLVMValueRef s) {
  return LLVMBuildLoad2(a->b, LLVMGetAllocatedType(s), s, "");
}

/* Pass 0 over [0, len) steps through whole chunks of a->width lanes, pass 1
 * through the elements left, one at a time. Begins pass `pass`'s loop with
 * *lw its lanes per step and *at the step's first element; false (and no
 * loop) when the pass has nothing to do. */
static bool chunk_pass_begin(Att *a, int pass, int64_t len, CpuLoop *loop, int *lw,
                             LLVMValueRef *at) {
  int w = a->width;
  int64_t full = w > 1 ? len / w : 0;
  if (pass == 0) {
    if (full == 0) return false;
    cpu_loop_begin(a->gen, loop, i64c(a, 0), i64c(a, full));
    *at = imul(a, loop->index, w);
    *lw = w;
  } else {
    cpu_loop_begin(a->gen, loop, i64c(a, full * w), i64c(a, len));
    *at = loop->index;
    *lw = 1;
  }
  return true;
}

typedef enum { ACC_ZERO, ACC_SCALE, ACC_STORE } AccOp;

/* Over acc[0..len): zero it, scale it by c, or store acc / c into x. */
static void acc_apply(Att *a, AccOp op, LLVMValueRef acc, int64_t len, LLVMValueRef c,
                      LLVMValueRef x) {
  for (int pass = 0; pass < 2; pass++) {
    int lw;
    CpuLoop loop;
    LLVMValueRef at;
    if (!chunk_pass_begin(a, pass, len, &loop, &lw, &at)) continue;
    LLVMValueRef cv = c ? splat_w(a, c, lw) : NULL;
    switch (op) {
    case ACC_ZERO: store_w(a, LLVMConstNull(lanes_type(a, lw)), acc, at, lw); break;
    case ACC_SCALE: store_w(a, LLVMBuildFMul(a->b, load_w(a, acc, at, lw), cv, ""), acc, at, lw); break;
    case ACC_STORE: store_w(a, LLVMBuildFDiv(a->b, load_w(a, acc, at, lw), cv, ""), x, at, lw); break;
    }
    cpu_loop_end(a->gen, &loop);
  }
}

static LLVMValueRef exp_t(Att *a, LLVMValueRef x) {
  if (a->t == a->gen->f32) return cpu_exp_f32(a->gen, x);
  return cpu_libcall(a->gen, "exp", a->t, &a->t, &x, 1);
}

static LLVMValueRef log_t(Att *a, LLVMValueRef x) {
  return cpu_libcall(a->gen, a->t == a->gen->f32 ? "logf" : "log", a->t, &a->t, &x, 1);
}

static LLVMValueRef is_neg_inf(Att *a, LLVMValueRef x) {
  return LLVMBuildFCmp(a->b, LLVMRealOEQ, x, real(a, -INFINITY), "");
}

/* The kernel argument of input `node`, or -1 (args are distinct buffers). */
static int arg_of(const CpuGen *gen, const Kernel *k, GraphId node) {
  int buffer = gen->plan->buffer_of[node];
  for (int i = 0; i < k->num_args; i++)
    if (k->args[i] == buffer) return i;
  return -1;
}

/* Where the mask is read: the mask's axes are the last of [batch..., T, S]
 * and a size-1 axis has stride 0. */
typedef struct MaskMap {
  LLVMValueRef data; /* NULL: no mask */
  int rank;
  int64_t dims[GRAPH_MAX_RANK], stride[GRAPH_MAX_RANK];
} MaskMap;

static LLVMValueRef mask_row(Att *a, const MaskMap *m, LLVMValueRef batch, LLVMValueRef i) {
  LLVMValueRef at = imul(a, i, m->stride[m->rank - 2]), rest = batch;
  for (int axis = m->rank - 3; axis >= 0; axis--) {
    if (m->stride[axis] != 0)
      at = iadd(a, at, imul(a, LLVMBuildURem(a->b, rest, i64c(a, m->dims[axis]), ""), m->stride[axis]));
    rest = LLVMBuildUDiv(a->b, rest, i64c(a, m->dims[axis]), "");
  }
  return at;
}

/* Starts the body of a key (or query) visit that is skipped when `skip`
 * holds; returns the block to branch to when done. */
static LLVMBasicBlockRef begin_unless(Att *a, LLVMValueRef skip) {
  LLVMBasicBlockRef work = LLVMAppendBasicBlockInContext(a->gen->context, a->fn, "work");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(a->gen->context, a->fn, "next");
  LLVMBuildCondBr(a->b, skip, next, work);
  LLVMPositionBuilderAtEnd(a->b, work);
  return next;
}

static void end_unless(Att *a, LLVMBasicBlockRef next) {
  LLVMBuildBr(a->b, next);
  LLVMPositionBuilderAtEnd(a->b, next);
}

/* Keys (or queries) are visited in blocks of this many: the scores of a
 * block are computed first, then their exponentials in one loop of plain
 * arithmetic that LLVM vectorizes (cpu_exp_f32), then the products. */
#define BLOCK 16
/* Rows of the output computed together on a vector target: each key (or
 * query) row loaded serves this many dot products and accumulations, whose
 * independent chains hide the latency of one. The GPU keeps one row. */
#define TILE 4

static LLVMValueRef min_i64(Att *a, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildSelect(a->b, LLVMBuildICmp(a->b, LLVMIntSLT, x, y, ""), x, y, "");
}

static LLVMValueRef max_t(Att *a, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildSelect(a->b, LLVMBuildFCmp(a->b, LLVMRealOGT, x, y, ""), x, y, "");
}

static LLVMValueRef row_array(Att *a, int64_t len, const char *name) {
  LLVMValueRef arr = cpu_entry_alloca(a->gen, LLVMArrayType(a->t, (unsigned)len), name);
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
      lo[q * half + e] = cpu_i32(a->gen, from);
      hi[q * half + e] = cpu_i32(a->gen, from + half);
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
  for (int r = 0; r < n; r++) v[r] = LLVMBuildExtractElement(a->b, cur[0], cpu_i32(a->gen, r), "");
}

/* out[r] = xs[r][0..len) . y[0..len) for r < n: y is loaded once per chunk. */
static void dot_rows(Att *a, LLVMValueRef *xs, LLVMValueRef y, int n, int64_t len,
                     LLVMValueRef *out) {
  int w = a->width;
  int64_t full = len / w;
  LLVMTypeRef vt = lanes_type(a, w);
  LLVMValueRef acc[TILE];
  for (int r = 0; r < n; r++) acc[r] = slot(a, vt, LLVMConstNull(vt));
  if (full > 0) {
    CpuLoop c;
    cpu_loop_begin(a->gen, &c, i64c(a, 0), i64c(a, full));
    LLVMValueRef at = imul(a, c.index, w);
    LLVMValueRef yv = load_w(a, y, at, w);
    for (int r = 0; r < n; r++) {
      LLVMValueRef x = load_w(a, xs[r], at, w);
      LLVMBuildStore(a->b, cpu_fmuladd(a->gen, x, yv, get(a, acc[r])), acc[r]);
    }
    cpu_loop_end(a->gen, &c);
  }
  LLVMValueRef sums[TILE];
  for (int r = 0; r < n; r++) sums[r] = get(a, acc[r]);
  hsum_rows(a, sums, n, w);
  for (int r = 0; r < n; r++) {
    LLVMValueRef sum = sums[r];
    for (int64_t e = full * w; e < len; e++)
      sum = cpu_fmuladd(a->gen, load_w(a, xs[r], i64c(a, e), 1), load_w(a, y, i64c(a, e), 1), sum);
    out[r] = sum;
  }
}

/* acc[r][0..len) += c[r] * x[0..len) for r < n: x is loaded once per chunk. */
static void axpy_rows(Att *a, LLVMValueRef *acc, LLVMValueRef *c, int n, int64_t len,
                      LLVMValueRef x) {
  for (int pass = 0; pass < 2; pass++) {
    int lw;
    CpuLoop loop;
    LLVMValueRef at;
    if (!chunk_pass_begin(a, pass, len, &loop, &lw, &at)) continue;
    LLVMValueRef xv = load_w(a, x, at, lw);
    for (int r = 0; r < n; r++) {
      LLVMValueRef sum = cpu_fmuladd(a->gen, splat_w(a, c[r], lw), xv, load_w(a, acc[r], at, lw));
      store_w(a, sum, acc[r], at, lw);
    }
    cpu_loop_end(a->gen, &loop);
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
      LLVMValueRef v = load_w(a, acc[r], iadd(a, at, i64c(a, k * lw)), lw);
      LLVMSetVolatile(v, 1);
      sum[r][k] = slot(a, vt, v);
    }
  CpuLoop u;
  cpu_loop_begin(a->gen, &u, i64c(a, 0), count);
  LLVMValueRef row = iadd(a, imul(a, u.index, stride), at);
  LLVMValueRef xv[GROUP];
  for (int k = 0; k < nc; k++) xv[k] = load_w(a, x, iadd(a, row, i64c(a, k * lw)), lw);
  for (int r = 0; r < n; r++) {
    LLVMValueRef cr = splat_w(a, load_w(a, c[r], u.index, 1), lw);
    for (int k = 0; k < nc; k++)
      LLVMBuildStore(a->b, cpu_fmuladd(a->gen, cr, xv[k], get(a, sum[r][k])), sum[r][k]);
  }
  cpu_loop_end(a->gen, &u);
  for (int r = 0; r < n; r++)
    for (int k = 0; k < nc; k++)
      LLVMSetVolatile(store_w(a, get(a, sum[r][k]), acc[r], iadd(a, at, i64c(a, k * lw)), lw), 1);
}

/* acc[r][0..len) += sum over u < count of c[r][u] x[u stride .. u stride + len)
 * for r < n (c: BLOCK-long arrays; x: the block's first row of the other
 * side), u ascending per element as one row at a time would add them:
 * groups of GROUP chunks, the chunks left over, then the elements left. */
static void block_axpy(Att *a, LLVMValueRef *acc, LLVMValueRef *c, int n, int64_t len,
                       LLVMValueRef x, int64_t stride, LLVMValueRef count) {
  int w = a->width;
  int64_t full = w > 1 ? len / w : 0, groups = full / GROUP;
  if (groups > 0) {
    CpuLoop g;
    cpu_loop_begin(a->gen, &g, i64c(a, 0), i64c(a, groups));
    block_axpy_group(a, acc, c, n, x, stride, count, imul(a, g.index, GROUP * w), GROUP, w);
    cpu_loop_end(a->gen, &g);
  }
  if (full % GROUP)
    block_axpy_group(a, acc, c, n, x, stride, count, i64c(a, groups * GROUP * w),
                     (int)(full % GROUP), w);
  if (full * w < len) {
    CpuLoop e;
    cpu_loop_begin(a->gen, &e, i64c(a, full * w), i64c(a, len));
    block_axpy_group(a, acc, c, n, x, stride, count, e.index, 1, 1);
    cpu_loop_end(a->gen, &e);
  }
}

/* p[e] = exp(s[e] - (sub ? sub[e] : sub0)) for e in [0, BLOCK), exactly 0
 * where s[e] = -inf. In f32 on a vector target, whole vectors at a time:
 * as a loop of scalars LLVM unrolled it fully before its vectorizer saw
 * it wherever the scores also read a mask (the Transformer's kernels), and
 * the scalar exp was the hottest code of its attention. */
static void block_exp(Att *a, LLVMValueRef s, LLVMValueRef sub, LLVMValueRef sub0, LLVMValueRef p) {
  int w = a->width > 1 && !a->lanes && a->t == a->gen->f32 && BLOCK % a->width == 0 ? a->width : 1;
  CpuLoop e;
  cpu_loop_begin(a->gen, &e, i64c(a, 0), i64c(a, BLOCK / w));
  LLVMValueRef at = imul(a, e.index, w);
  LLVMValueRef m = sub ? load_w(a, sub, at, w) : splat_w(a, sub0, w);
  LLVMValueRef se = load_w(a, s, at, w);
  LLVMValueRef pe = exp_t(a, LLVMBuildFSub(a->b, se, m, ""));
  LLVMValueRef dead = LLVMBuildFCmp(a->b, LLVMRealOEQ, se, splat_w(a, real(a, -INFINITY), w), "");
  store_w(a, LLVMBuildSelect(a->b, dead, LLVMConstNull(LLVMTypeOf(pe)), pe, ""), p, at, w);
  cpu_loop_end(a->gen, &e);
}

/* The largest of s[0..BLOCK) (-inf when all are): vectors of the target's
 * width folded lane-wise, then in halves. */
static LLVMValueRef block_max(Att *a, LLVMValueRef s) {
  int w = a->width > 1 && !a->lanes && BLOCK % a->width == 0 ? a->width : 1;
  LLVMValueRef m = load_w(a, s, i64c(a, 0), w);
  for (int at = w; at < BLOCK; at += w) m = max_t(a, m, load_w(a, s, i64c(a, at), w));
  for (; w > 1; w /= 2) {
    LLVMValueRef lo[32], hi[32];
    for (int i = 0; i < w / 2; i++) lo[i] = cpu_i32(a->gen, i), hi[i] = cpu_i32(a->gen, w / 2 + i);
    LLVMValueRef l = LLVMBuildShuffleVector(a->b, m, LLVMGetUndef(LLVMTypeOf(m)),
                                            LLVMConstVector(lo, (unsigned)(w / 2)), "");
    LLVMValueRef h = LLVMBuildShuffleVector(a->b, m, LLVMGetUndef(LLVMTypeOf(m)),
                                            LLVMConstVector(hi, (unsigned)(w / 2)), "");
    m = max_t(a, l, h);
  }
  return LLVMGetTypeKind(LLVMTypeOf(m)) == LLVMVectorTypeKind
             ? LLVMBuildExtractElement(a->b, m, cpu_i32(a->gen, 0), "")
             : m;
}

/* v[0..n) (n vectors of n lanes, n a power of two) transposed in place:
 * one stage per bit of the index swaps that bit of the row with the same
 * bit of the lane, one shuffle a row a stage. */
static void transpose_square(Att *a, LLVMValueRef *v, int n) {
  for (int bit = 1; bit < n; bit *= 2) {
    LLVMValueRef low[32], high[32];
    for (int l = 0; l < n; l++) {
      low[l] = cpu_i32(a->gen, l & bit ? n + l - bit : l);
      high[l] = cpu_i32(a->gen, l & bit ? n + l : l + bit);
    }
    for (int r = 0; r < n; r++) {
      if (r & bit) continue;
      LLVMValueRef x = v[r], y = v[r + bit];
      v[r] = LLVMBuildShuffleVector(a->b, x, y, LLVMConstVector(low, (unsigned)n), "");
      v[r + bit] = LLVMBuildShuffleVector(a->b, x, y, LLVMConstVector(high, (unsigned)n), "");
    }
  }
}

/* Where block_dots' operand holds element h of the other side's row u:
 * blocks of BLOCK rows one after the other, each its len elements' rows of
 * BLOCK lanes, so that a block's loads stream through consecutive lines
 * (rows of the whole side's length apart, gpt-small's two transposed sides
 * took more than the L1 cache's sets and ways). */
static LLVMValueRef transposed_at(Att *a, LLVMValueRef u, LLVMValueRef h, int64_t len) {
  LLVMValueRef block = LLVMBuildUDiv(a->b, u, i64c(a, BLOCK), "");
  LLVMValueRef lane = LLVMBuildURem(a->b, u, i64c(a, BLOCK), "");
  return iadd(a, iadd(a, imul(a, block, len * BLOCK), imul(a, h, BLOCK)), lane);
}

/* dst at transposed_at(u, h) = src[u len + h] for u < rows, h < len, and 0
 * for u in [rows, padded): `rows` rows of `len` elements transposed,
 * squares of a->width x a->width through shuffles (the last rows, when
 * fewer than a square and padding follows, as a square whose missing rows
 * are zeros: the small Transformer's ten keys a head went through the
 * element loop, which took more time than its attention's products), the
 * edges one element at a time. */
static void transpose_rows(Att *a, LLVMValueRef src, int64_t rows, int64_t len, LLVMValueRef dst,
                           int64_t padded) {
  int w = a->width;
  int64_t row_squares = rows / w, len_squares = len / w, part = rows % w;
  int64_t squares_end = row_squares * w;
  if (part > 0 && padded >= squares_end + w) squares_end += w; /* with the partial square */
  if (squares_end > 0 && len_squares > 0) {
    CpuLoop u, h;
    cpu_loop_begin(a->gen, &u, i64c(a, 0), i64c(a, squares_end / w));
    LLVMValueRef u0 = imul(a, u.index, w);
    cpu_loop_begin(a->gen, &h, i64c(a, 0), i64c(a, len_squares));
    LLVMValueRef h0 = imul(a, h.index, w), v[32];
    if (squares_end > row_squares * w) {
      /* the partial square's rows past `rows` are zeros */
      LLVMValueRef partial = LLVMBuildICmp(a->b, LLVMIntEQ, u.index, i64c(a, row_squares), "");
      LLVMValueRef zero = LLVMConstNull(lanes_type(a, w));
      for (int r = 0; r < w; r++) {
        if (r < part) {
          v[r] = load_w(a, src, iadd(a, imul(a, iadd(a, u0, i64c(a, r)), len), h0), w);
          continue;
        }
        /* a row of a full square, or zeros (it is read at row 0 then) */
        LLVMValueRef row = LLVMBuildSelect(a->b, partial, i64c(a, 0), iadd(a, u0, i64c(a, r)), "");
        LLVMValueRef x = load_w(a, src, iadd(a, imul(a, row, len), h0), w);
        v[r] = LLVMBuildSelect(a->b, partial, zero, x, "");
      }
    } else {
      for (int r = 0; r < w; r++)
        v[r] = load_w(a, src, iadd(a, imul(a, iadd(a, u0, i64c(a, r)), len), h0), w);
    }
    transpose_square(a, v, w);
    for (int r = 0; r < w; r++)
      store_w(a, v[r], dst, transposed_at(a, u0, iadd(a, h0, i64c(a, r)), len), w);
    cpu_loop_end(a->gen, &h);
    cpu_loop_end(a->gen, &u);
  }
  /* the elements past the squares: their rows' last columns, then the
   * rows after them and the zero padding */
  for (int edge = 0; edge < 2; edge++) {
    int64_t u_from = edge ? (len_squares > 0 ? squares_end : 0) : 0;
    int64_t u_to = edge ? padded : (len_squares > 0 ? squares_end : 0);
    int64_t h_from = edge ? 0 : len_squares * w;
    if (u_from >= u_to || h_from >= len) continue;
    CpuLoop u, h;
    cpu_loop_begin(a->gen, &u, i64c(a, u_from), i64c(a, u_to));
    cpu_loop_begin(a->gen, &h, i64c(a, h_from), i64c(a, len));
    LLVMValueRef at = transposed_at(a, u.index, h.index, len), x = real(a, 0.0);
    if (u_from < rows) {
      /* a row past `rows` reads row 0 and stores 0 */
      LLVMValueRef real_row = LLVMBuildICmp(a->b, LLVMIntSLT, u.index, i64c(a, rows), "");
      LLVMValueRef from = LLVMBuildSelect(a->b, real_row, u.index, i64c(a, 0), "");
      LLVMValueRef value = load_w(a, src, iadd(a, imul(a, from, len), h.index), 1);
      x = LLVMBuildSelect(a->b, real_row, value, x, "");
    }
    store_w(a, x, dst, at, 1);
    cpu_loop_end(a->gen, &h);
    cpu_loop_end(a->gen, &u);
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
static void block_dots(Att *a, LLVMValueRef *xs, int n, int64_t len, LLVMValueRef tr,
                       LLVMValueRef at, LLVMValueRef *out) {
  int w = a->width, nv = BLOCK / w, parts = nv == 1 ? 4 : 1;
  LLVMTypeRef vt = lanes_type(a, w);
  LLVMValueRef acc[4][TILE][BLOCK]; /* [part][row][vector] */
  for (int p = 0; p < parts; p++)
    for (int r = 0; r < n; r++)
      for (int k = 0; k < nv; k++) acc[p][r][k] = slot(a, vt, LLVMConstNull(vt));
  /* parts consecutive elements a step, then the ones left into part 0 */
  for (int pass = 0; pass < 2; pass++) {
    int64_t from = pass ? len / parts * parts : 0, to = pass ? len : len / parts;
    if (from >= to) continue;
    CpuLoop h;
    cpu_loop_begin(a->gen, &h, i64c(a, from), i64c(a, to));
    for (int p = 0; p < (pass ? 1 : parts); p++) {
      LLVMValueRef e = pass ? h.index : iadd(a, imul(a, h.index, parts), i64c(a, p));
      LLVMValueRef col = iadd(a, imul(a, at, len), imul(a, e, BLOCK)), tv[BLOCK];
      for (int k = 0; k < nv; k++) tv[k] = load_w(a, tr, iadd(a, col, i64c(a, k * w)), w);
      for (int r = 0; r < n; r++) {
        LLVMValueRef x = splat_w(a, load_w(a, xs[r], e, 1), w);
        for (int k = 0; k < nv; k++)
          LLVMBuildStore(a->b, cpu_fmuladd(a->gen, x, tv[k], get(a, acc[p][r][k])), acc[p][r][k]);
      }
    }
    cpu_loop_end(a->gen, &h);
  }
  for (int r = 0; r < n; r++)
    for (int k = 0; k < nv; k++) {
      LLVMValueRef sum = get(a, acc[0][r][k]);
      for (int p = 1; p < parts; p++) sum = LLVMBuildFAdd(a->b, sum, get(a, acc[p][r][k]), "");
      store_w(a, sum, out[r], i64c(a, k * w), w);
    }
}

/* The most stack the transposed other side of block_dots may take; past
 * it (very long keys or heads) the kernel keeps dot_rows. */
#define TRANSPOSED_MAX_BYTES (512 * 1024)

/* A stack array of len elements, aligned for whole vectors. */
static LLVMValueRef tr_array(Att *a, int64_t len) {
  LLVMValueRef arr = cpu_entry_alloca(a->gen, LLVMArrayType(a->t, (unsigned)len), "transposed");
  LLVMSetAlignment(arr, 64);
  return LLVMBuildBitCast(a->b, arr, LLVMPointerType(a->t, 0), "");
}

/* What every tile of a kernel shares: its op, sizes and typed arguments. */
typedef struct AttKernel {
  GraphOp op;
  bool causal, query_rows;
  int64_t t, s, d, dv, acc_len, rows_per_batch;
  LLVMValueRef q, k, v, d_o, lse, delta, out;
  LLVMValueRef also_out; /* Kernel.also's output, or NULL: attention's lse, grad_k's dv */
  LLVMValueRef dq_out;   /* Kernel.also_q's output (grad_k's dq), or NULL */
  MaskMap mask;
  LLVMValueRef scale;
  /* block_dots' operands, or NULL (dot_rows): the other side's rows of one
   * batch, padded to tr_len rows (whole blocks), transposed
   * (transposed_at) for the scores (k, or q of key rows) and dp (v, or do
   * of key rows), and for key rows the queries' lse and delta padded with
   * -inf and 0; made once per batch a call (tr_batch: which, -1 none yet)
   * and shared by its tiles */
  LLVMValueRef tr_s, tr_dp, tr_lse, tr_delta, tr_batch;
  int64_t tr_len;
} AttKernel;

/* Where the mask of row x (query rows: mrow, its mask_row) and the other
 * side's `other` is read. */
static LLVMValueRef mask_at(Att *a, const AttKernel *c, LLVMValueRef batch, LLVMValueRef mrow,
                            LLVMValueRef x, LLVMValueRef other) {
  int64_t last_stride = c->mask.stride[c->mask.rank - 1];
  return c->query_rows ? iadd(a, mrow, imul(a, other, last_stride))
                       : iadd(a, mask_row(a, &c->mask, batch, other), imul(a, x, last_stride));
}

/* In a causal tile of rows x0 .. x0 + n - 1, row r does not see the other
 * side's x0 + u for u > r (query rows) or u < r (key rows): where such a
 * pair falls in the block [base, base + count), its score becomes -inf.
 * Only these n (n - 1) / 2 pairs of the visited span are hidden. */
static void hide_past_diagonal(Att *a, const AttKernel *c, LLVMValueRef *sblk, LLVMValueRef x0,
                               LLVMValueRef base, LLVMValueRef count, int n) {
  for (int r = 0; r < n; r++)
    for (int u = 0; u < n; u++) {
      if (c->query_rows ? u <= r : u >= r) continue;
      LLVMValueRef e = LLVMBuildSub(a->b, iadd(a, x0, i64c(a, u)), base, "");
      LLVMBasicBlockRef next =
          begin_unless(a, LLVMBuildICmp(a->b, LLVMIntUGE, e, count, ""));
      store_w(a, real(a, -INFINITY), sblk[r], e, 1);
      end_unless(a, next);
    }
}

/* dq[base + u] += sum over r < n of ds[r][u] k_r (keys: the tile's rows)
 * for u < count, r ascending: with tiles in key order, the order in which
 * grad_q's own kernel adds its keys (block_axpy), so dq is bit for bit the
 * same. */
static void add_dq(Att *a, LLVMValueRef dqb, LLVMValueRef base, LLVMValueRef count,
                   LLVMValueRef *ds, LLVMValueRef *keys, int n, int64_t d) {
  CpuLoop u;
  cpu_loop_begin(a->gen, &u, i64c(a, 0), count);
  LLVMValueRef row = cpu_element(a->gen, a->t, dqb, imul(a, iadd(a, base, u.index), d));
  LLVMValueRef c[TILE];
  for (int r = 0; r < n; r++) c[r] = load_w(a, ds[r], u.index, 1);
  for (int pass = 0; pass < 2; pass++) {
    int lw;
    CpuLoop e;
    LLVMValueRef at;
    if (!chunk_pass_begin(a, pass, d, &e, &lw, &at)) continue;
    LLVMValueRef acc = load_w(a, row, at, lw);
    for (int r = 0; r < n; r++)
      acc = cpu_fmuladd(a->gen, splat_w(a, c[r], lw), load_w(a, keys[r], at, lw), acc);
    store_w(a, acc, row, at, lw);
    cpu_loop_end(a->gen, &e);
  }
  cpu_loop_end(a->gen, &u);
}

/* Output rows row0 .. row0 + n - 1, all of one batch: query rows i
 * (attention, attention_lse, grad_q) or key rows j (grad_k, grad_v). */
static void emit_tile(Att *a, const AttKernel *c, LLVMValueRef row0, int n) {
  CpuGen *gen = a->gen;
  LLVMBuilderRef b = a->b;
  GraphOp op = c->op;
  bool forward = op == GRAPH_OP_ATTENTION || op == GRAPH_OP_ATTENTION_LSE;
  bool grad_kv = op == GRAPH_OP_ATTENTION_GRAD_K && c->also_out;
  int64_t t = c->t, d = c->d, dv = c->dv;
  LLVMValueRef neg_inf = real(a, -INFINITY), zero = real(a, 0.0);
  LLVMValueRef batch = LLVMBuildUDiv(b, row0, i64c(a, c->rows_per_batch), "");
  LLVMValueRef x0 = LLVMBuildURem(b, row0, i64c(a, c->rows_per_batch), ""); /* i or j */
  LLVMValueRef qb = cpu_element(gen, a->t, c->q, imul(a, batch, t * d));
  LLVMValueRef kb = cpu_element(gen, a->t, c->k, imul(a, batch, c->s * d));
  LLVMValueRef vb = c->v ? cpu_element(gen, a->t, c->v, imul(a, batch, c->s * dv)) : NULL;
  LLVMValueRef dob = c->d_o ? cpu_element(gen, a->t, c->d_o, imul(a, batch, t * dv)) : NULL;
  LLVMValueRef lseb = c->lse ? cpu_element(gen, a->t, c->lse, imul(a, batch, t)) : NULL;
  LLVMValueRef deltab = c->delta ? cpu_element(gen, a->t, c->delta, imul(a, batch, t)) : NULL;
  LLVMValueRef dqb = c->dq_out ? cpu_element(gen, a->t, c->dq_out, imul(a, batch, t * d)) : NULL;

  /* the other side of this batch transposed for block_dots, unless the
   * previous tile of the call did it */
  if (c->tr_s) {
    LLVMValueRef fresh = LLVMBuildICmp(b, LLVMIntEQ, get(a, c->tr_batch), batch, "");
    LLVMBasicBlockRef done = begin_unless(a, fresh);
    int64_t rows = c->query_rows ? c->s : t;
    transpose_rows(a, c->query_rows ? kb : qb, rows, d, c->tr_s, c->tr_len);
    if (c->tr_dp) transpose_rows(a, c->query_rows ? vb : dob, rows, dv, c->tr_dp, c->tr_len);
    if (c->tr_lse) {
      CpuLoop i;
      cpu_loop_begin(gen, &i, i64c(a, 0), i64c(a, c->tr_len));
      LLVMValueRef query = LLVMBuildICmp(b, LLVMIntSLT, i.index, i64c(a, t), "");
      LLVMValueRef at = LLVMBuildSelect(b, query, i.index, i64c(a, 0), "");
      store_w(a, LLVMBuildSelect(b, query, load_w(a, lseb, at, 1), neg_inf, ""), c->tr_lse,
              i.index, 1);
      if (c->tr_delta)
        store_w(a, LLVMBuildSelect(b, query, load_w(a, deltab, at, 1), zero, ""), c->tr_delta,
                i.index, 1);
      cpu_loop_end(gen, &i);
    }
    LLVMBuildStore(b, batch, c->tr_batch);
    end_unless(a, done);
  }

  /* Per row r: x = x0 + r, its accumulator, scores, probabilities, the
   * running max and sum (forward), its lse and delta (grad_q) and rows. */
  LLVMValueRef xr[TILE], acc[TILE], acc_v[TILE], sblk[TILE], pblk[TILE], m[TILE], l[TILE], bm[TILE];
  LLVMValueRef shift[TILE], dead[TILE], di[TILE], own[TILE], own_dv[TILE], mrow[TILE];
  LLVMValueRef lblk = c->query_rows ? NULL : row_array(a, BLOCK, "lse");
  for (int r = 0; r < n; r++) {
    xr[r] = iadd(a, x0, i64c(a, r));
    acc[r] = c->acc_len > 0 ? row_array(a, c->acc_len, "acc") : NULL;
    acc_v[r] = grad_kv ? row_array(a, dv, "acc_v") : NULL; /* grad_k's dv too */
    sblk[r] = row_array(a, BLOCK, "scores");
    pblk[r] = row_array(a, BLOCK, "p");
    bm[r] = slot(a, a->t, NULL);
    m[r] = l[r] = shift[r] = dead[r] = di[r] = own_dv[r] = mrow[r] = NULL;
    if (acc[r]) acc_apply(a, ACC_ZERO, acc[r], c->acc_len, NULL, NULL);
    if (acc_v[r]) acc_apply(a, ACC_ZERO, acc_v[r], dv, NULL, NULL);
    if (c->query_rows) {
      own[r] = cpu_element(gen, a->t, qb, imul(a, xr[r], d));
      if (c->mask.data) mrow[r] = mask_row(a, &c->mask, batch, xr[r]);
    } else {
      own[r] = cpu_element(gen, a->t, kb, imul(a, xr[r], d));
      own_dv[r] = cpu_element(gen, a->t, vb, imul(a, xr[r], dv));
    }
    if (forward) {
      m[r] = slot(a, a->t, neg_inf);
      l[r] = slot(a, a->t, zero);
    } else if (op == GRAPH_OP_ATTENTION_GRAD_Q) {
      /* a fully masked row (lse = -inf) sees no key: its gradient stays 0 */
      LLVMValueRef li = load_w(a, lseb, xr[r], 1);
      dead[r] = is_neg_inf(a, li);
      shift[r] = LLVMBuildSelect(b, dead[r], zero, li, "");
      di[r] = load_w(a, deltab, xr[r], 1);
      own_dv[r] = cpu_element(gen, a->t, dob, imul(a, xr[r], dv));
    }
  }

  /* The other index runs over [first, last): keys 0 .. (causal ? x0 + n : S)
   * of query rows, or queries (causal ? x0 : 0) .. T of key rows; a pair
   * (i, j) with j > i inside that span is hidden per row. With block_dots
   * key rows start at x0 rounded down to a whole block, so that its loads
   * of a block's columns stay within cache lines. */
  LLVMValueRef first = c->query_rows || !c->causal ? i64c(a, 0)
                       : c->tr_s ? imul(a, LLVMBuildUDiv(b, x0, i64c(a, BLOCK), ""), BLOCK)
                                 : x0;
  LLVMValueRef last = !c->query_rows ? i64c(a, t)
                      : c->causal    ? iadd(a, x0, i64c(a, n))
                                     : i64c(a, c->s);
  LLVMValueRef span = LLVMBuildSub(b, last, first, "");
  LLVMValueRef blocks = LLVMBuildUDiv(b, iadd(a, span, i64c(a, BLOCK - 1)), i64c(a, BLOCK), "");
  CpuLoop blk;
  cpu_loop_begin(gen, &blk, i64c(a, 0), blocks);
  LLVMValueRef base = iadd(a, first, imul(a, blk.index, BLOCK));
  LLVMValueRef count = min_i64(a, i64c(a, BLOCK), LLVMBuildSub(b, last, base, ""));
  if (forward)
    for (int r = 0; r < n; r++) LLVMBuildStore(b, neg_inf, bm[r]);

  /* 1. the block's scores; -inf where masked, hidden, past the end, or
   * for a query whose row is fully masked (lse = -inf, its p taken as 0) */
  if (c->tr_s) {
    /* block_dots into the scores' arrays, then the rest without branches
     * over the whole block, which LLVM vectorizes: past the end is
     * hidden, a key row's padded lse is -inf there, and the mask is read
     * at the last entry in the span instead */
    block_dots(a, own, n, d, c->tr_s, base, sblk);
    CpuLoop e;
    cpu_loop_begin(gen, &e, i64c(a, 0), i64c(a, BLOCK));
    LLVMValueRef other = iadd(a, base, e.index);
    LLVMValueRef lo = lblk ? load_w(a, c->tr_lse, other, 1) : NULL;
    LLVMValueRef hidden =
        lblk ? is_neg_inf(a, lo) : LLVMBuildICmp(b, LLVMIntSGE, e.index, count, "");
    LLVMValueRef in_span = min_i64(a, other, LLVMBuildSub(b, last, i64c(a, 1), ""));
    for (int r = 0; r < n; r++) {
      LLVMValueRef v = LLVMBuildFMul(b, c->scale, load_w(a, sblk[r], e.index, 1), "");
      if (c->mask.data) {
        LLVMValueRef at = mask_at(a, c, batch, mrow[r], xr[r], in_span);
        v = LLVMBuildFAdd(b, v, load_w(a, c->mask.data, at, 1), "");
      }
      v = LLVMBuildSelect(b, hidden, neg_inf, v, "");
      if (dead[r]) v = LLVMBuildSelect(b, dead[r], neg_inf, v, "");
      if (c->causal) { /* a compare per lane, cheaper than hide_past_diagonal's branches */
        LLVMIntPredicate past = c->query_rows ? LLVMIntSGT : LLVMIntSLT;
        v = LLVMBuildSelect(b, LLVMBuildICmp(b, past, other, xr[r], ""), neg_inf, v, "");
      }
      store_w(a, v, sblk[r], e.index, 1);
    }
    if (lblk) store_w(a, LLVMBuildSelect(b, hidden, zero, lo, ""), lblk, e.index, 1);
    cpu_loop_end(gen, &e);
  } else {
    CpuLoop e;
    cpu_loop_begin(gen, &e, i64c(a, 0), i64c(a, BLOCK));
    for (int r = 0; r < n; r++) store_w(a, neg_inf, sblk[r], e.index, 1);
    if (lblk) store_w(a, zero, lblk, e.index, 1);
    LLVMBasicBlockRef skip_out = begin_unless(a, LLVMBuildICmp(b, LLVMIntSGE, e.index, count, ""));
    LLVMValueRef other = iadd(a, base, e.index); /* j of query rows, i of key rows */
    LLVMBasicBlockRef skip_row = NULL;
    LLVMValueRef lo = NULL;
    if (lblk) {
      lo = load_w(a, lseb, other, 1);
      skip_row = begin_unless(a, is_neg_inf(a, lo));
    }
    LLVMValueRef sc[TILE];
    dot_rows(a, own, cpu_element(gen, a->t, c->query_rows ? kb : qb, imul(a, other, d)), n, d, sc);
    for (int r = 0; r < n; r++) {
      LLVMValueRef v = LLVMBuildFMul(b, c->scale, sc[r], "");
      if (c->mask.data) {
        LLVMValueRef at = mask_at(a, c, batch, mrow[r], xr[r], other);
        v = LLVMBuildFAdd(b, v, load_w(a, c->mask.data, at, 1), "");
      }
      if (dead[r]) v = LLVMBuildSelect(b, dead[r], neg_inf, v, "");
      if (forward && c->causal && n > 1) /* the online max needs it now */
        v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, other, xr[r], ""), neg_inf, v, "");
      store_w(a, v, sblk[r], e.index, 1);
      if (forward) LLVMBuildStore(b, max_t(a, v, get(a, bm[r])), bm[r]);
    }
    if (lblk) store_w(a, lo, lblk, e.index, 1);
    if (skip_row) end_unless(a, skip_row);
    end_unless(a, skip_out);
    cpu_loop_end(gen, &e);
  }
  /* dot_rows' backward hides the pairs of a causal tile past its diagonal
   * here (block_dots did in its loop), then each row's max; dot_rows'
   * forward took both in the loop (its max after the loop put the max's
   * latency before the rescaling: 1.70 -> 1.80 ms a call) */
  if (!forward || c->tr_s) {
    if (c->causal && n > 1 && !c->tr_s) hide_past_diagonal(a, c, sblk, x0, base, count, n);
    for (int r = 0; r < n; r++) LLVMBuildStore(b, block_max(a, sblk[r]), bm[r]);
  }

  /* a block with no visible entry in any row is skipped */
  LLVMValueRef none = is_neg_inf(a, get(a, bm[0]));
  for (int r = 1; r < n; r++) none = LLVMBuildAnd(b, none, is_neg_inf(a, get(a, bm[r])), "");
  LLVMBasicBlockRef skip_block = begin_unless(a, none);
  for (int r = 0; r < n; r++) {
    if (forward) {
      /* online softmax: a larger max rescales what was summed so far; a
       * row still without a visible key keeps 0 (its shift taken as 0) */
      LLVMValueRef m_new = max_t(a, get(a, bm[r]), get(a, m[r]));
      LLVMValueRef sh = LLVMBuildSelect(b, is_neg_inf(a, m_new), zero, m_new, "");
      LLVMValueRef scale = exp_t(a, LLVMBuildFSub(b, get(a, m[r]), sh, ""));
      LLVMBuildStore(b, LLVMBuildFMul(b, get(a, l[r]), scale, ""), l[r]);
      if (acc[r]) acc_apply(a, ACC_SCALE, acc[r], dv, scale, NULL);
      LLVMBuildStore(b, m_new, m[r]);
      shift[r] = sh;
    }
    /* 2. p = exp(s - m) (forward) or exp(s - lse) (backward), vectorized */
    block_exp(a, sblk[r], lblk, shift[r], pblk[r]);
  }
  /* 3. the products, one row of the other side per step: the forward's
   * sums l and o += p v; the backward's ds = scale p (dp - delta) with
   * dp = do_i . v_j (do of query rows against the shared v row, or the
   * shared do row against v of key rows), into the scores' arrays (no
   * longer needed); a hidden or masked pair has p = 0 and so ds = 0 */
  bool ds = op == GRAPH_OP_ATTENTION_GRAD_Q || op == GRAPH_OP_ATTENTION_GRAD_K;
  LLVMValueRef *dsblk = sblk;
  if (c->tr_dp) block_dots(a, own_dv, n, dv, c->tr_dp, base, dsblk); /* dp */
  if (op != GRAPH_OP_ATTENTION_GRAD_V) {
    /* block_dots' dp: over the whole block, which LLVM vectorizes (p = 0
     * past the end, and dp there is finite: rows of the transposed side or
     * its zero padding) */
    CpuLoop u;
    cpu_loop_begin(gen, &u, i64c(a, 0), c->tr_dp ? i64c(a, BLOCK) : count);
    LLVMValueRef at = iadd(a, base, u.index);
    LLVMValueRef p[TILE];
    for (int r = 0; r < n; r++) p[r] = load_w(a, pblk[r], u.index, 1);
    if (forward) {
      for (int r = 0; r < n; r++) LLVMBuildStore(b, LLVMBuildFAdd(b, get(a, l[r]), p[r], ""), l[r]);
      if (op == GRAPH_OP_ATTENTION)
        axpy_rows(a, acc, p, n, dv, cpu_element(gen, a->t, vb, imul(a, at, dv)));
    } else {
      LLVMValueRef dp[TILE];
      if (c->tr_dp)
        for (int r = 0; r < n; r++) dp[r] = load_w(a, dsblk[r], u.index, 1);
      else
        dot_rows(a, own_dv, cpu_element(gen, a->t, c->query_rows ? vb : dob, imul(a, at, dv)), n,
                 dv, dp);
      LLVMValueRef dd =
          c->query_rows ? NULL : load_w(a, c->tr_delta ? c->tr_delta : deltab, at, 1);
      for (int r = 0; r < n; r++) {
        LLVMValueRef diff = LLVMBuildFSub(b, dp[r], c->query_rows ? di[r] : dd, "");
        store_w(a, LLVMBuildFMul(b, c->scale, LLVMBuildFMul(b, p[r], diff, ""), ""), dsblk[r],
                u.index, 1);
      }
    }
    cpu_loop_end(gen, &u);
  }
  /* then the backward's accumulations over the block's rows of the other
   * side, dq += ds k, dk += ds q, dv += p do, in registers (block_axpy). The
   * forward keeps its axpy per row of v (above), which measured faster
   * (gpt-small's attention 1.55 ms a call, 1.76 with block_axpy). */
  if (op == GRAPH_OP_ATTENTION_GRAD_V || grad_kv)
    block_axpy(a, grad_kv ? acc_v : acc, pblk, n, dv,
               cpu_element(gen, a->t, dob, imul(a, base, dv)), dv, count);
  if (dqb)
    add_dq(a, dqb, base, count, dsblk, own, n, d);
  if (ds)
    block_axpy(a, acc, dsblk, n, d,
               cpu_element(gen, a->t, c->query_rows ? kb : qb, imul(a, base, d)), d, count);
  end_unless(a, skip_block);
  cpu_loop_end(gen, &blk);

  for (int r = 0; r < n; r++) {
    LLVMValueRef row = iadd(a, row0, i64c(a, r));
    if (forward) {
      LLVMValueRef lv = get(a, l[r]);
      LLVMValueRef empty = LLVMBuildFCmp(b, LLVMRealOEQ, lv, zero, "");
      LLVMValueRef lse_out = op == GRAPH_OP_ATTENTION_LSE ? c->out : c->also_out;
      if (lse_out) {
        LLVMValueRef value = LLVMBuildFAdd(b, get(a, m[r]), log_t(a, lv), "");
        store_w(a, LLVMBuildSelect(b, empty, neg_inf, value, ""), lse_out, row, 1);
      }
      if (op == GRAPH_OP_ATTENTION) {
        LLVMValueRef denom = LLVMBuildSelect(b, empty, real(a, 1.0), lv, "");
        acc_apply(a, ACC_STORE, acc[r], dv, denom,
                  cpu_element(gen, a->t, c->out, imul(a, row, dv)));
      }
    } else {
      acc_apply(a, ACC_STORE, acc[r], c->acc_len, real(a, 1.0),
                cpu_element(gen, a->t, c->out, imul(a, row, c->acc_len)));
      if (grad_kv)
        acc_apply(a, ACC_STORE, acc_v[r], dv, real(a, 1.0),
                  cpu_element(gen, a->t, c->also_out, imul(a, row, dv)));
    }
  }
}

void cpu_emit_attention_kernel(CpuGen *gen, int function, const Kernel *kernel,
                               const CpuLanes *lanes) {
  const Graph *g = gen->graph;
  const GraphNode *n = graph_node(g, kernel->root);
  GraphOp op = n->op;
  int fixed = op == GRAPH_OP_ATTENTION ? 3 : op == GRAPH_OP_ATTENTION_LSE ? 2 : 6;
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape;
  int r = qs->rank;
  Att a = {.gen = gen, .b = gen->builder, .t = cpu_type(gen, n->dtype)};
  int bits = a.t == gen->f64 ? 64 : 32;
  a.width = lanes ? lanes->lanes : gen->vector_bits >= 2 * bits ? gen->vector_bits / bits : 1;
  a.lanes = lanes;
  a.fn = cpu_kernel_function(gen, function);
  LLVMBuilderRef b = a.b;
  AttKernel c = {.op = op, .causal = n->attrs.causal, .t = qs->dims[r - 2], .d = qs->dims[r - 1]};
  c.s = graph_node(g, n->inputs[1])->shape.dims[r - 2];
  c.dv = fixed > 2 ? graph_node(g, n->inputs[2])->shape.dims[r - 1] : 0;
  c.query_rows = op == GRAPH_OP_ATTENTION || op == GRAPH_OP_ATTENTION_LSE ||
                 op == GRAPH_OP_ATTENTION_GRAD_Q;
  c.acc_len = op == GRAPH_OP_ATTENTION || op == GRAPH_OP_ATTENTION_GRAD_V ? c.dv
              : op == GRAPH_OP_ATTENTION_LSE                              ? 0
                                                                          : c.d;
  c.rows_per_batch = c.query_rows ? c.t : c.s;
  LLVMValueRef args = LLVMGetParam(a.fn, 0);
  LLVMValueRef begin = LLVMGetParam(a.fn, 1), end = LLVMGetParam(a.fn, 2);
  if (lanes) { /* the items of one row, one a lane */
    a.lane = LLVMBuildURem(b, begin, i64c(&a, lanes->lanes), "lane");
    begin = LLVMBuildUDiv(b, begin, i64c(&a, lanes->lanes), "row");
    end = iadd(&a, begin, i64c(&a, 1));
  }
  LLVMValueRef in[7] = {NULL};
  for (int i = 0; i < n->num_inputs; i++)
    in[i] = cpu_kernel_arg(gen, args, arg_of(gen, kernel, n->inputs[i]), a.t);
  c.out = cpu_kernel_arg(gen, args, 0, a.t);
  c.also_out = kernel->also != GRAPH_NONE ? cpu_kernel_arg(gen, args, 1, a.t) : NULL;
  c.dq_out = kernel->also_q != GRAPH_NONE ? cpu_kernel_arg(gen, args, 2, a.t) : NULL;
  c.q = in[0], c.k = in[1], c.v = fixed > 2 ? in[2] : NULL;
  c.d_o = fixed == 6 ? in[3] : NULL, c.lse = fixed == 6 ? in[4] : NULL;
  c.delta = fixed == 6 ? in[5] : NULL;
  c.mask = (MaskMap){.data = n->num_inputs > fixed ? in[fixed] : NULL, .rank = r};
  if (c.mask.data) {
    const GraphShape *ms = &graph_node(g, n->inputs[fixed])->shape;
    int64_t stride = 1;
    for (int i = 0; i < r; i++) c.mask.dims[i] = i < r - 2 ? qs->dims[i] : 1;
    for (int i = ms->rank - 1; i >= 0; i--) {
      c.mask.stride[r - ms->rank + i] = ms->dims[i] == 1 ? 0 : stride;
      stride *= ms->dims[i];
    }
  }
  c.scale = real(&a, n->attrs.scale);
  /* block_dots on a vector target, when the transposed rows fit, padded
   * to whole blocks */
  int64_t other_len = c.query_rows ? c.s : c.t;
  c.tr_len = (other_len + BLOCK - 1) / BLOCK * BLOCK;
  bool with_dp = op == GRAPH_OP_ATTENTION_GRAD_Q || op == GRAPH_OP_ATTENTION_GRAD_K;
  int64_t tr_bytes = (c.d + (with_dp ? c.dv : 0)) * c.tr_len * (bits / 8);
  if (a.width > 1 && !lanes && tr_bytes <= TRANSPOSED_MAX_BYTES) {
    c.tr_s = tr_array(&a, c.d * c.tr_len);
    c.tr_dp = with_dp ? tr_array(&a, c.dv * c.tr_len) : NULL;
    c.tr_batch = slot(&a, gen->i64, i64c(&a, -1));
    c.tr_lse = c.query_rows ? NULL : tr_array(&a, c.tr_len);
    c.tr_delta = c.query_rows || !with_dp ? NULL : tr_array(&a, c.tr_len);
  }

  /* A merged backward (Kernel.also_q, never on the GPU) runs whole
   * batches, each item the key rows of one (batch, head): its dq rows are
   * zeroed, then its key tiles add to them in key order. */
  CpuLoop batches;
  if (c.dq_out) {
    cpu_loop_begin(gen, &batches, begin, end);
    acc_apply(&a, ACC_ZERO, cpu_element(gen, a.t, c.dq_out, imul(&a, batches.index, c.t * c.d)),
              c.t * c.d, NULL, NULL);
    begin = imul(&a, batches.index, c.rows_per_batch);
    end = iadd(&a, begin, i64c(&a, c.rows_per_batch));
  }

  /* Rows in tiles of TILE while a whole tile fits in the range and in its
   * batch, the rest one by one. */
  int tile = a.width > 1 && !lanes ? TILE : 1;
  LLVMValueRef row_slot = slot(&a, gen->i64, begin);
  LLVMBasicBlockRef header = LLVMAppendBasicBlockInContext(gen->context, a.fn, "rows");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(gen->context, a.fn, "tile");
  LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(gen->context, a.fn, "row");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(gen->context, a.fn, "rows_done");
  LLVMBuildBr(b, header);
  LLVMPositionBuilderAtEnd(b, header);
  LLVMValueRef row = get(&a, row_slot);
  LLVMBasicBlockRef pick = LLVMAppendBasicBlockInContext(gen->context, a.fn, "pick");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, row, end, ""), pick, done);
  LLVMPositionBuilderAtEnd(b, pick);
  LLVMValueRef fits = LLVMConstInt(LLVMInt1TypeInContext(gen->context), 0, 0);
  if (tile > 1) {
    LLVMValueRef next = iadd(&a, row, i64c(&a, tile));
    LLVMValueRef x = LLVMBuildURem(b, row, i64c(&a, c.rows_per_batch), "");
    fits = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLE, next, end, ""),
                        LLVMBuildICmp(b, LLVMIntSLE, iadd(&a, x, i64c(&a, tile)),
                                      i64c(&a, c.rows_per_batch), ""),
                        "");
  }
  LLVMBuildCondBr(b, fits, body, one);
  LLVMPositionBuilderAtEnd(b, body);
  if (tile > 1) {
    emit_tile(&a, &c, row, tile);
    LLVMBuildStore(b, iadd(&a, row, i64c(&a, tile)), row_slot);
  }
  LLVMBuildBr(b, header);
  LLVMPositionBuilderAtEnd(b, one);
  emit_tile(&a, &c, row, 1);
  LLVMBuildStore(b, iadd(&a, row, i64c(&a, 1)), row_slot);
  LLVMBuildBr(b, header);
  LLVMPositionBuilderAtEnd(b, done);
  if (c.dq_out) cpu_loop_end(gen, &batches);
  LLVMBuildRetVoid(b);
}
