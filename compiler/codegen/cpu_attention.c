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
 * diagonal of a causal op are never visited, and a key whose mask entry is
 * -inf is skipped before its dot product. A row with no visible key gives
 * o = 0 and lse = -inf.
 *
 * Backward: p = exp(s - lse) is recomputed from q, k and the saved lse;
 * grad_q sums over the keys of its row, grad_k and grad_v over the queries
 * that see their key (i >= j when causal); rows with lse = -inf contribute
 * nothing. Dot products and the accumulations run over the head size in
 * vectors of the target's width (one lane on the GPU), the tail in scalars. */
#include <math.h>

#include "cpu_internal.h"

typedef struct Att {
  CpuGen *gen;
  LLVMBuilderRef b;
  LLVMTypeRef t;  /* element type */
  int width;      /* lanes of a vector chunk; 1 = scalars only */
  LLVMValueRef fn;
} Att;

static LLVMValueRef i64c(Att *a, int64_t v) { return cpu_i64(a->gen, v); }
static LLVMValueRef real(Att *a, double v) { return LLVMConstReal(a->t, v); }
static LLVMValueRef iadd(Att *a, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildAdd(a->b, x, y, "");
}
static LLVMValueRef imul(Att *a, LLVMValueRef x, int64_t c) {
  return LLVMBuildMul(a->b, x, i64c(a, c), "");
}

static LLVMTypeRef lanes_type(Att *a, int w) { return w > 1 ? LLVMVectorType(a->t, (unsigned)w) : a->t; }

static unsigned elem_align(const Att *a) { return a->t == a->gen->f64 ? 8 : 4; }

/* w elements of `base` (a T*) from `index`. */
static LLVMValueRef load_w(Att *a, LLVMValueRef base, LLVMValueRef index, int w) {
  LLVMValueRef p = cpu_element(a->gen, a->t, base, index);
  LLVMTypeRef ty = lanes_type(a, w);
  if (w > 1) p = LLVMBuildBitCast(a->b, p, LLVMPointerType(ty, 0), "");
  LLVMValueRef v = LLVMBuildLoad2(a->b, ty, p, "");
  LLVMSetAlignment(v, elem_align(a));
  return v;
}

static void store_w(Att *a, LLVMValueRef value, LLVMValueRef base, LLVMValueRef index, int w) {
  LLVMValueRef p = cpu_element(a->gen, a->t, base, index);
  if (w > 1) p = LLVMBuildBitCast(a->b, p, LLVMPointerType(lanes_type(a, w), 0), "");
  LLVMValueRef s = LLVMBuildStore(a->b, value, p);
  LLVMSetAlignment(s, elem_align(a));
}

static LLVMValueRef splat_w(Att *a, LLVMValueRef x, int w) {
  if (w == 1) return x;
  LLVMTypeRef vt = lanes_type(a, w);
  LLVMValueRef v = LLVMBuildInsertElement(a->b, LLVMGetUndef(vt), x, cpu_i32(a->gen, 0), "");
  LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(a->gen->i32, (unsigned)w));
  return LLVMBuildShuffleVector(a->b, v, LLVMGetUndef(vt), zeros, "");
}

static LLVMValueRef fmuladd(Att *a, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
  LLVMTypeRef ty = LLVMTypeOf(x);
  LLVMValueRef args[3] = {x, y, z};
  return cpu_intrinsic(a->gen, "llvm.fmuladd", &ty, 1, args, 3);
}

/* Sum of the lanes of v, pairwise. */
static LLVMValueRef hsum(Att *a, LLVMValueRef v, int w) {
  while (w > 1) {
    int h = w / 2;
    LLVMValueRef lo[32], hi[32];
    for (int i = 0; i < h; i++) {
      lo[i] = cpu_i32(a->gen, i);
      hi[i] = cpu_i32(a->gen, h + i);
    }
    LLVMValueRef l = LLVMBuildShuffleVector(a->b, v, LLVMGetUndef(LLVMTypeOf(v)),
                                            LLVMConstVector(lo, (unsigned)h), "");
    LLVMValueRef r = LLVMBuildShuffleVector(a->b, v, LLVMGetUndef(LLVMTypeOf(v)),
                                            LLVMConstVector(hi, (unsigned)h), "");
    v = LLVMBuildFAdd(a->b, l, r, "");
    w = h;
  }
  return LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind
             ? LLVMBuildExtractElement(a->b, v, cpu_i32(a->gen, 0), "")
             : v;
}

static LLVMValueRef slot(Att *a, LLVMTypeRef ty, LLVMValueRef init) {
  LLVMValueRef s = cpu_entry_alloca(a->gen, ty, "s");
  if (init) LLVMBuildStore(a->b, init, s);
  return s;
}

static LLVMValueRef get(Att *a, LLVMValueRef s) {
  return LLVMBuildLoad2(a->b, LLVMGetAllocatedType(s), s, "");
}

/* x[0..len) . y[0..len) */
static LLVMValueRef dot(Att *a, LLVMValueRef x, LLVMValueRef y, int64_t len) {
  int w = a->width;
  int64_t full = len / w;
  LLVMValueRef sum = real(a, 0.0);
  if (w > 1 && full > 0) {
    LLVMTypeRef vt = lanes_type(a, w);
    LLVMValueRef acc = slot(a, vt, LLVMConstNull(vt));
    CpuLoop c;
    cpu_loop_begin(a->gen, &c, i64c(a, 0), i64c(a, full));
    LLVMValueRef at = imul(a, c.index, w);
    LLVMBuildStore(a->b, fmuladd(a, load_w(a, x, at, w), load_w(a, y, at, w), get(a, acc)), acc);
    cpu_loop_end(a->gen, &c);
    sum = hsum(a, get(a, acc), w);
  } else if (w == 1 && len > 0) {
    LLVMValueRef acc = slot(a, a->t, sum);
    CpuLoop c;
    cpu_loop_begin(a->gen, &c, i64c(a, 0), i64c(a, len));
    LLVMBuildStore(a->b, fmuladd(a, load_w(a, x, c.index, 1), load_w(a, y, c.index, 1), get(a, acc)),
                   acc);
    cpu_loop_end(a->gen, &c);
    return get(a, acc);
  }
  for (int64_t e = full * w; e < len; e++)
    sum = fmuladd(a, load_w(a, x, i64c(a, e), 1), load_w(a, y, i64c(a, e), 1), sum);
  return sum;
}

typedef enum { ACC_ZERO, ACC_SCALE, ACC_AXPY, ACC_STORE } AccOp;

/* Over acc[0..len): zero it, scale it by c, add c * x, or store acc / c
 * into x. */
static void acc_apply(Att *a, AccOp op, LLVMValueRef acc, int64_t len, LLVMValueRef c,
                      LLVMValueRef x) {
  int w = a->width;
  int64_t full = w > 1 ? len / w : 0;
  for (int pass = 0; pass < 2; pass++) {
    int lw = pass == 0 ? w : 1;
    CpuLoop loop;
    LLVMValueRef at;
    if (pass == 0) {
      if (full == 0) continue;
      cpu_loop_begin(a->gen, &loop, i64c(a, 0), i64c(a, full));
      at = imul(a, loop.index, w);
    } else {
      cpu_loop_begin(a->gen, &loop, i64c(a, full * w), i64c(a, len));
      at = loop.index;
    }
    LLVMValueRef cv = c ? splat_w(a, c, lw) : NULL;
    switch (op) {
    case ACC_ZERO: store_w(a, LLVMConstNull(lanes_type(a, lw)), acc, at, lw); break;
    case ACC_SCALE: store_w(a, LLVMBuildFMul(a->b, load_w(a, acc, at, lw), cv, ""), acc, at, lw); break;
    case ACC_AXPY:
      store_w(a, fmuladd(a, cv, load_w(a, x, at, lw), load_w(a, acc, at, lw)), acc, at, lw);
      break;
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

static LLVMValueRef min_i64(Att *a, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildSelect(a->b, LLVMBuildICmp(a->b, LLVMIntSLT, x, y, ""), x, y, "");
}

static LLVMValueRef block_array(Att *a, const char *name) {
  LLVMValueRef arr = cpu_entry_alloca(a->gen, LLVMArrayType(a->t, BLOCK), name);
  return LLVMBuildBitCast(a->b, arr, LLVMPointerType(a->t, 0), "");
}

/* p[e] = exp(s[e] - (sub ? sub[e] : sub0)) for e in [0, BLOCK). */
static void block_exp(Att *a, LLVMValueRef s, LLVMValueRef sub, LLVMValueRef sub0, LLVMValueRef p) {
  CpuLoop e;
  cpu_loop_begin(a->gen, &e, i64c(a, 0), i64c(a, BLOCK));
  LLVMValueRef m = sub ? load_w(a, sub, e.index, 1) : sub0;
  store_w(a, exp_t(a, LLVMBuildFSub(a->b, load_w(a, s, e.index, 1), m, "")), p, e.index, 1);
  cpu_loop_end(a->gen, &e);
}

void cpu_emit_attention_kernel(CpuGen *gen, int function, const Kernel *kernel) {
  const Graph *g = gen->graph;
  const GraphNode *n = graph_node(g, kernel->root);
  GraphOp op = n->op;
  int fixed = op == GRAPH_OP_ATTENTION ? 3 : op == GRAPH_OP_ATTENTION_LSE ? 2 : 6;
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape;
  int r = qs->rank;
  int64_t t = qs->dims[r - 2], d = qs->dims[r - 1];
  int64_t s = graph_node(g, n->inputs[1])->shape.dims[r - 2];
  int64_t dv = fixed > 2 ? graph_node(g, n->inputs[2])->shape.dims[r - 1] : 0;
  bool causal = n->attrs.causal;
  Att a = {.gen = gen, .b = gen->builder, .t = cpu_type(gen, n->dtype)};
  int bits = a.t == gen->f64 ? 64 : 32;
  a.width = gen->vector_bits >= 2 * bits ? gen->vector_bits / bits : 1;
  a.fn = cpu_kernel_function(gen, function);
  LLVMBuilderRef b = a.b;
  LLVMValueRef args = LLVMGetParam(a.fn, 0);
  LLVMValueRef begin = LLVMGetParam(a.fn, 1), end = LLVMGetParam(a.fn, 2);
  LLVMValueRef in[7] = {NULL};
  for (int i = 0; i < n->num_inputs; i++)
    in[i] = cpu_kernel_arg(gen, args, arg_of(gen, kernel, n->inputs[i]), a.t);
  LLVMValueRef out = cpu_kernel_arg(gen, args, 0, a.t);
  LLVMValueRef q = in[0], k = in[1], v = fixed > 2 ? in[2] : NULL;
  LLVMValueRef d_o = fixed == 6 ? in[3] : NULL, lse = fixed == 6 ? in[4] : NULL;
  LLVMValueRef delta = fixed == 6 ? in[5] : NULL;
  MaskMap mask = {.data = n->num_inputs > fixed ? in[fixed] : NULL, .rank = r};
  if (mask.data) {
    const GraphShape *ms = &graph_node(g, n->inputs[fixed])->shape;
    int64_t stride = 1;
    for (int i = 0; i < r; i++) mask.dims[i] = i < r - 2 ? qs->dims[i] : 1;
    for (int i = ms->rank - 1; i >= 0; i--) {
      mask.stride[r - ms->rank + i] = ms->dims[i] == 1 ? 0 : stride;
      stride *= ms->dims[i];
    }
  }
  LLVMValueRef scale = real(&a, n->attrs.scale);
  LLVMValueRef neg_inf = real(&a, -INFINITY);
  bool query_rows = op == GRAPH_OP_ATTENTION || op == GRAPH_OP_ATTENTION_LSE ||
                    op == GRAPH_OP_ATTENTION_GRAD_Q;
  int64_t acc_len = op == GRAPH_OP_ATTENTION || op == GRAPH_OP_ATTENTION_GRAD_V ? dv
                    : op == GRAPH_OP_ATTENTION_LSE                              ? 0
                                                                                : d;
  LLVMValueRef acc = NULL;
  if (acc_len > 0) {
    LLVMValueRef arr = cpu_entry_alloca(gen, LLVMArrayType(a.t, (unsigned)acc_len), "acc");
    acc = LLVMBuildBitCast(b, arr, LLVMPointerType(a.t, 0), "");
  }
  LLVMValueRef sblk = block_array(&a, "scores"), pblk = block_array(&a, "p");
  LLVMValueRef lblk = query_rows ? NULL : block_array(&a, "lse");
  LLVMValueRef m_slot = slot(&a, a.t, NULL), l_slot = slot(&a, a.t, NULL);
  LLVMValueRef bm_slot = slot(&a, a.t, NULL);

  CpuLoop row;
  cpu_loop_begin(gen, &row, begin, end);
  int64_t rows_per_batch = query_rows ? t : s;
  LLVMValueRef batch = LLVMBuildUDiv(b, row.index, i64c(&a, rows_per_batch), "");
  LLVMValueRef x = LLVMBuildURem(b, row.index, i64c(&a, rows_per_batch), ""); /* i or j */
  LLVMValueRef qb = cpu_element(gen, a.t, q, imul(&a, batch, t * d));
  LLVMValueRef kb = cpu_element(gen, a.t, k, imul(&a, batch, s * d));
  LLVMValueRef vb = v ? cpu_element(gen, a.t, v, imul(&a, batch, s * dv)) : NULL;
  LLVMValueRef dob = d_o ? cpu_element(gen, a.t, d_o, imul(&a, batch, t * dv)) : NULL;
  LLVMValueRef lseb = lse ? cpu_element(gen, a.t, lse, imul(&a, batch, t)) : NULL;
  LLVMValueRef deltab = delta ? cpu_element(gen, a.t, delta, imul(&a, batch, t)) : NULL;
  if (acc) acc_apply(&a, ACC_ZERO, acc, acc_len, NULL, NULL);

  /* The other index runs over [first, last): keys 0 .. (causal ? i + 1 : S)
   * of query row i, or queries (causal ? j : 0) .. T of key row j. */
  LLVMValueRef first = query_rows || !causal ? i64c(&a, 0) : x;
  LLVMValueRef last = !query_rows ? i64c(&a, t) : causal ? iadd(&a, x, i64c(&a, 1)) : i64c(&a, s);
  LLVMValueRef li = NULL, di = NULL, doi = NULL, qi = NULL, kj = NULL, vj = NULL, mrow = NULL;
  LLVMBasicBlockRef row_done = NULL;
  if (query_rows) {
    qi = cpu_element(gen, a.t, qb, imul(&a, x, d));
    mrow = mask.data ? mask_row(&a, &mask, batch, x) : NULL;
    if (op == GRAPH_OP_ATTENTION_GRAD_Q) {
      li = load_w(&a, lseb, x, 1);
      di = load_w(&a, deltab, x, 1);
      doi = cpu_element(gen, a.t, dob, imul(&a, x, dv));
      row_done = begin_unless(&a, is_neg_inf(&a, li));
    } else {
      LLVMBuildStore(b, neg_inf, m_slot);
      LLVMBuildStore(b, real(&a, 0.0), l_slot);
    }
  } else {
    kj = cpu_element(gen, a.t, kb, imul(&a, x, d));
    vj = cpu_element(gen, a.t, vb, imul(&a, x, dv));
  }
  LLVMValueRef span = LLVMBuildSub(b, last, first, "");
  LLVMValueRef blocks = LLVMBuildUDiv(b, iadd(&a, span, i64c(&a, BLOCK - 1)), i64c(&a, BLOCK), "");
  CpuLoop blk;
  cpu_loop_begin(gen, &blk, i64c(&a, 0), blocks);
  LLVMValueRef base = iadd(&a, first, imul(&a, blk.index, BLOCK));
  LLVMValueRef count = min_i64(&a, i64c(&a, BLOCK), LLVMBuildSub(b, last, base, ""));
  LLVMBuildStore(b, neg_inf, bm_slot);

  /* 1. the block's scores; -inf where masked, past the end, or (key rows)
   * for a query whose row is fully masked (lse = -inf, its p taken as 0) */
  CpuLoop e;
  cpu_loop_begin(gen, &e, i64c(&a, 0), i64c(&a, BLOCK));
  store_w(&a, neg_inf, sblk, e.index, 1);
  if (lblk) store_w(&a, real(&a, 0.0), lblk, e.index, 1);
  LLVMBasicBlockRef skip_out = begin_unless(&a, LLVMBuildICmp(b, LLVMIntSGE, e.index, count, ""));
  LLVMValueRef other = iadd(&a, base, e.index); /* j of a query row, i of a key row */
  LLVMBasicBlockRef skip_row = NULL, skip_mask = NULL;
  LLVMValueRef lo = NULL;
  if (!query_rows) {
    lo = load_w(&a, lseb, other, 1);
    skip_row = begin_unless(&a, is_neg_inf(&a, lo));
  }
  LLVMValueRef mv = NULL;
  if (mask.data) {
    LLVMValueRef at = query_rows ? iadd(&a, mrow, imul(&a, other, mask.stride[r - 1]))
                                 : iadd(&a, mask_row(&a, &mask, batch, other),
                                        imul(&a, x, mask.stride[r - 1]));
    mv = load_w(&a, mask.data, at, 1);
    skip_mask = begin_unless(&a, is_neg_inf(&a, mv));
  }
  LLVMValueRef qrow = query_rows ? qi : cpu_element(gen, a.t, qb, imul(&a, other, d));
  LLVMValueRef krow = query_rows ? cpu_element(gen, a.t, kb, imul(&a, other, d)) : kj;
  LLVMValueRef sc = LLVMBuildFMul(b, scale, dot(&a, qrow, krow, d), "");
  if (mv) sc = LLVMBuildFAdd(b, sc, mv, "");
  store_w(&a, sc, sblk, e.index, 1);
  if (lblk) store_w(&a, lo, lblk, e.index, 1);
  LLVMValueRef bm = get(&a, bm_slot);
  LLVMBuildStore(b, LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, sc, bm, ""), sc, bm, ""),
                 bm_slot);
  if (skip_mask) end_unless(&a, skip_mask);
  if (skip_row) end_unless(&a, skip_row);
  end_unless(&a, skip_out);
  cpu_loop_end(gen, &e);

  /* a block with no visible entry is skipped */
  LLVMBasicBlockRef skip_block = begin_unless(&a, is_neg_inf(&a, get(&a, bm_slot)));
  LLVMValueRef shift = li;
  if (op == GRAPH_OP_ATTENTION || op == GRAPH_OP_ATTENTION_LSE) {
    /* online softmax: a larger max rescales what was summed so far */
    LLVMValueRef m = get(&a, m_slot), blk_max = get(&a, bm_slot);
    LLVMValueRef m_new = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, blk_max, m, ""), blk_max, m, "");
    LLVMValueRef c = exp_t(&a, LLVMBuildFSub(b, m, m_new, ""));
    LLVMBuildStore(b, LLVMBuildFMul(b, get(&a, l_slot), c, ""), l_slot);
    if (acc) acc_apply(&a, ACC_SCALE, acc, dv, c, NULL);
    LLVMBuildStore(b, m_new, m_slot);
    shift = m_new;
  }
  /* 2. p = exp(s - m) (forward) or exp(s - lse) (backward), vectorized */
  block_exp(&a, sblk, lblk, shift, pblk);
  /* 3. the products */
  CpuLoop u;
  cpu_loop_begin(gen, &u, i64c(&a, 0), count);
  LLVMValueRef p = load_w(&a, pblk, u.index, 1);
  LLVMValueRef at = iadd(&a, base, u.index);
  if (op == GRAPH_OP_ATTENTION || op == GRAPH_OP_ATTENTION_LSE) {
    LLVMBuildStore(b, LLVMBuildFAdd(b, get(&a, l_slot), p, ""), l_slot);
    if (acc) acc_apply(&a, ACC_AXPY, acc, dv, p, cpu_element(gen, a.t, vb, imul(&a, at, dv)));
  } else {
    LLVMBasicBlockRef zero = begin_unless(&a, LLVMBuildFCmp(b, LLVMRealOEQ, p, real(&a, 0.0), ""));
    if (op == GRAPH_OP_ATTENTION_GRAD_V) {
      acc_apply(&a, ACC_AXPY, acc, dv, p, cpu_element(gen, a.t, dob, imul(&a, at, dv)));
    } else {
      LLVMValueRef dov = query_rows ? doi : cpu_element(gen, a.t, dob, imul(&a, at, dv));
      LLVMValueRef vv = query_rows ? cpu_element(gen, a.t, vb, imul(&a, at, dv)) : vj;
      LLVMValueRef dd = query_rows ? di : load_w(&a, deltab, at, 1);
      LLVMValueRef dp = dot(&a, dov, vv, dv);
      LLVMValueRef ds =
          LLVMBuildFMul(b, scale, LLVMBuildFMul(b, p, LLVMBuildFSub(b, dp, dd, ""), ""), "");
      LLVMValueRef other_row = query_rows ? cpu_element(gen, a.t, kb, imul(&a, at, d))
                                          : cpu_element(gen, a.t, qb, imul(&a, at, d));
      acc_apply(&a, ACC_AXPY, acc, d, ds, other_row);
    }
    end_unless(&a, zero);
  }
  cpu_loop_end(gen, &u);
  end_unless(&a, skip_block);
  cpu_loop_end(gen, &blk);
  if (row_done) end_unless(&a, row_done);

  if (op == GRAPH_OP_ATTENTION_LSE) {
    LLVMValueRef l = get(&a, l_slot);
    LLVMValueRef empty = LLVMBuildFCmp(b, LLVMRealOEQ, l, real(&a, 0.0), "");
    LLVMValueRef value = LLVMBuildFAdd(b, get(&a, m_slot), log_t(&a, l), "");
    store_w(&a, LLVMBuildSelect(b, empty, neg_inf, value, ""), out, row.index, 1);
  } else if (op == GRAPH_OP_ATTENTION) {
    LLVMValueRef l = get(&a, l_slot);
    LLVMValueRef empty = LLVMBuildFCmp(b, LLVMRealOEQ, l, real(&a, 0.0), "");
    LLVMValueRef denom = LLVMBuildSelect(b, empty, real(&a, 1.0), l, "");
    acc_apply(&a, ACC_STORE, acc, dv, denom, cpu_element(gen, a.t, out, imul(&a, row.index, dv)));
  } else {
    acc_apply(&a, ACC_STORE, acc, acc_len, real(&a, 1.0),
              cpu_element(gen, a.t, out, imul(&a, row.index, acc_len)));
  }
  cpu_loop_end(gen, &row);
  LLVMBuildRetVoid(b);
}
