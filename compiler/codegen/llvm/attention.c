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
 * On the GPU a warp shares each row (RowLanes): a "vector" of 32 elements
 * is one element a lane (neighbouring lanes, neighbouring elements of a q,
 * k, v or do row: coalesced), a dot product's lane sum is the warp's
 * shuffle sum, and everything else (scores, softmax, the tail) every lane
 * computes alike. Its private arrays (accumulators, a block's scores) keep
 * a lane's element of the chunk starting at h at index h. One thread a row
 * left a kernel 8192 threads (gpt-small), too few to hide their latency:
 * on an H200 the four attention kernels of a layer took 5 ms a step. */
#include <math.h>
#include <stdlib.h>

#include "attention_internal.h"

/* What every tile of a kernel shares: its op, sizes and typed arguments. */
typedef struct AttKernel {
  GraphOp op;
  bool causal, query_rows;
  int64_t t, s, d, dv, acc_len, rows_per_batch;
  LLVMValueRef q, k, v, d_o, lse, delta, out;
  LLVMValueRef also_out; /* Kernel.also's output, or NULL: attention's lse, grad_k's dv */
  LLVMValueRef dq_out;   /* Kernel.also_q's output (grad_k's dq), or NULL */
  GenMaskMap mask;
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
  return c->query_rows ? att_iadd(a, mrow, att_imul(a, other, last_stride))
                       : att_iadd(a, gen_mask_row(a->gen, &c->mask, batch, other), att_imul(a, x, last_stride));
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
      LLVMValueRef e = LLVMBuildSub(a->b, att_iadd(a, x0, att_i64c(a, u)), base, "");
      LLVMBasicBlockRef next =
          att_begin_unless(a, LLVMBuildICmp(a->b, LLVMIntUGE, e, count, ""));
      att_store_w(a, att_real(a, -INFINITY), sblk[r], e, 1);
      att_end_unless(a, next);
    }
}

/* dq[base + u] += sum over r < n of ds[r][u] k_r (keys: the tile's rows)
 * for u < count, r ascending: with tiles in key order, the order in which
 * grad_q's own kernel adds its keys (block_axpy), so dq is bit for bit the
 * same. */
static void add_dq(Att *a, LLVMValueRef dqb, LLVMValueRef base, LLVMValueRef count,
                   LLVMValueRef *ds, LLVMValueRef *keys, int n, int64_t d) {
  GenLoop u;
  gen_loop_begin(a->gen, &u, att_i64c(a, 0), count);
  LLVMValueRef row = gen_element(a->gen, a->t, dqb, att_imul(a, att_iadd(a, base, u.index), d));
  LLVMValueRef c[TILE];
  for (int r = 0; r < n; r++) c[r] = att_load_w(a, ds[r], u.index, 1);
  for (int pass = 0; pass < 2; pass++) {
    int lw;
    GenLoop e;
    LLVMValueRef at;
    if (!att_chunk_pass_begin(a, pass, d, &e, &lw, &at)) continue;
    LLVMValueRef acc = att_load_w(a, row, at, lw);
    for (int r = 0; r < n; r++)
      acc = gen_fmuladd(a->gen, att_splat_w(a, c[r], lw), att_load_w(a, keys[r], at, lw), acc);
    att_store_w(a, acc, row, at, lw);
    gen_loop_end(a->gen, &e);
  }
  gen_loop_end(a->gen, &u);
}

/* Output rows row0 .. row0 + n - 1, all of one batch: query rows i
 * (attention, attention_lse, grad_q) or key rows j (grad_k, grad_v). */
static void emit_tile(Att *a, const AttKernel *c, LLVMValueRef row0, int n) {
  Gen *gen = a->gen;
  LLVMBuilderRef b = a->b;
  GraphOp op = c->op;
  bool forward = op == GRAPH_OP_ATTENTION || op == GRAPH_OP_ATTENTION_LSE;
  bool grad_kv = op == GRAPH_OP_ATTENTION_GRAD_K && c->also_out;
  int64_t t = c->t, d = c->d, dv = c->dv;
  LLVMValueRef neg_inf = att_real(a, -INFINITY), zero = att_real(a, 0.0);
  LLVMValueRef batch = LLVMBuildUDiv(b, row0, att_i64c(a, c->rows_per_batch), "");
  LLVMValueRef x0 = LLVMBuildURem(b, row0, att_i64c(a, c->rows_per_batch), ""); /* i or j */
  LLVMValueRef qb = gen_element(gen, a->t, c->q, att_imul(a, batch, t * d));
  LLVMValueRef kb = gen_element(gen, a->t, c->k, att_imul(a, batch, c->s * d));
  LLVMValueRef vb = c->v ? gen_element(gen, a->t, c->v, att_imul(a, batch, c->s * dv)) : NULL;
  LLVMValueRef dob = c->d_o ? gen_element(gen, a->t, c->d_o, att_imul(a, batch, t * dv)) : NULL;
  LLVMValueRef lseb = c->lse ? gen_element(gen, a->t, c->lse, att_imul(a, batch, t)) : NULL;
  LLVMValueRef deltab = c->delta ? gen_element(gen, a->t, c->delta, att_imul(a, batch, t)) : NULL;
  LLVMValueRef dqb = c->dq_out ? gen_element(gen, a->t, c->dq_out, att_imul(a, batch, t * d)) : NULL;

  /* the other side of this batch transposed for block_dots, unless the
   * previous tile of the call did it */
  if (c->tr_s) {
    LLVMValueRef fresh = LLVMBuildICmp(b, LLVMIntEQ, att_get(a, c->tr_batch), batch, "");
    LLVMBasicBlockRef done = att_begin_unless(a, fresh);
    int64_t rows = c->query_rows ? c->s : t;
    att_transpose_rows(a, c->query_rows ? kb : qb, rows, d, c->tr_s, c->tr_len);
    if (c->tr_dp) att_transpose_rows(a, c->query_rows ? vb : dob, rows, dv, c->tr_dp, c->tr_len);
    if (c->tr_lse) {
      GenLoop i;
      gen_loop_begin(gen, &i, att_i64c(a, 0), att_i64c(a, c->tr_len));
      LLVMValueRef query = LLVMBuildICmp(b, LLVMIntSLT, i.index, att_i64c(a, t), "");
      LLVMValueRef at = LLVMBuildSelect(b, query, i.index, att_i64c(a, 0), "");
      att_store_w(a, LLVMBuildSelect(b, query, att_load_w(a, lseb, at, 1), neg_inf, ""), c->tr_lse,
              i.index, 1);
      if (c->tr_delta)
        att_store_w(a, LLVMBuildSelect(b, query, att_load_w(a, deltab, at, 1), zero, ""), c->tr_delta,
                i.index, 1);
      gen_loop_end(gen, &i);
    }
    LLVMBuildStore(b, batch, c->tr_batch);
    att_end_unless(a, done);
  }

  /* Per row r: x = x0 + r, its accumulator, scores, probabilities, the
   * running max and sum (forward), its lse and delta (grad_q) and rows. */
  LLVMValueRef xr[TILE], acc[TILE], acc_v[TILE], sblk[TILE], pblk[TILE], m[TILE], l[TILE], bm[TILE];
  LLVMValueRef shift[TILE], dead[TILE], di[TILE], own[TILE], own_dv[TILE], mrow[TILE];
  LLVMValueRef lblk = c->query_rows ? NULL : att_row_array(a, BLOCK, "lse");
  for (int r = 0; r < n; r++) {
    xr[r] = att_iadd(a, x0, att_i64c(a, r));
    acc[r] = c->acc_len > 0 ? att_row_array(a, c->acc_len, "acc") : NULL;
    acc_v[r] = grad_kv ? att_row_array(a, dv, "acc_v") : NULL; /* grad_k's dv too */
    sblk[r] = att_row_array(a, BLOCK, "scores");
    pblk[r] = att_row_array(a, BLOCK, "p");
    bm[r] = att_slot(a, a->t, NULL);
    m[r] = l[r] = shift[r] = dead[r] = di[r] = own_dv[r] = mrow[r] = NULL;
    if (acc[r]) att_acc_apply(a, ACC_ZERO, acc[r], c->acc_len, NULL, NULL);
    if (acc_v[r]) att_acc_apply(a, ACC_ZERO, acc_v[r], dv, NULL, NULL);
    if (c->query_rows) {
      own[r] = gen_element(gen, a->t, qb, att_imul(a, xr[r], d));
      if (c->mask.data) mrow[r] = gen_mask_row(a->gen, &c->mask, batch, xr[r]);
    } else {
      own[r] = gen_element(gen, a->t, kb, att_imul(a, xr[r], d));
      own_dv[r] = gen_element(gen, a->t, vb, att_imul(a, xr[r], dv));
    }
    if (forward) {
      m[r] = att_slot(a, a->t, neg_inf);
      l[r] = att_slot(a, a->t, zero);
    } else if (op == GRAPH_OP_ATTENTION_GRAD_Q) {
      /* a fully masked row (lse = -inf) sees no key: its gradient stays 0 */
      LLVMValueRef li = att_load_w(a, lseb, xr[r], 1);
      dead[r] = att_is_neg_inf(a, li);
      shift[r] = LLVMBuildSelect(b, dead[r], zero, li, "");
      di[r] = att_load_w(a, deltab, xr[r], 1);
      own_dv[r] = gen_element(gen, a->t, dob, att_imul(a, xr[r], dv));
    }
  }

  /* The other index runs over [first, last): keys 0 .. (causal ? x0 + n : S)
   * of query rows, or queries (causal ? x0 : 0) .. T of key rows; a pair
   * (i, j) with j > i inside that span is hidden per row. With block_dots
   * key rows start at x0 rounded down to a whole block, so that its loads
   * of a block's columns stay within cache lines. */
  LLVMValueRef first = c->query_rows || !c->causal ? att_i64c(a, 0)
                       : c->tr_s ? att_imul(a, LLVMBuildUDiv(b, x0, att_i64c(a, BLOCK), ""), BLOCK)
                                 : x0;
  LLVMValueRef last = !c->query_rows ? att_i64c(a, t)
                      : c->causal    ? att_iadd(a, x0, att_i64c(a, n))
                                     : att_i64c(a, c->s);
  LLVMValueRef span = LLVMBuildSub(b, last, first, "");
  LLVMValueRef blocks = LLVMBuildUDiv(b, att_iadd(a, span, att_i64c(a, BLOCK - 1)), att_i64c(a, BLOCK), "");
  GenLoop blk;
  gen_loop_begin(gen, &blk, att_i64c(a, 0), blocks);
  LLVMValueRef base = att_iadd(a, first, att_imul(a, blk.index, BLOCK));
  LLVMValueRef count = att_min_i64(a, att_i64c(a, BLOCK), LLVMBuildSub(b, last, base, ""));
  if (forward)
    for (int r = 0; r < n; r++) LLVMBuildStore(b, neg_inf, bm[r]);

  /* 1. the block's scores; -inf where masked, hidden, past the end, or
   * for a query whose row is fully masked (lse = -inf, its p taken as 0) */
  if (c->tr_s) {
    /* block_dots into the scores' arrays, then the rest without branches
     * over the whole block, which LLVM vectorizes: past the end is
     * hidden, a key row's padded lse is -inf there, and the mask is read
     * at the last entry in the span instead */
    att_block_dots(a, own, n, d, c->tr_s, base, sblk);
    GenLoop e;
    gen_loop_begin(gen, &e, att_i64c(a, 0), att_i64c(a, BLOCK));
    LLVMValueRef other = att_iadd(a, base, e.index);
    LLVMValueRef lo = lblk ? att_load_w(a, c->tr_lse, other, 1) : NULL;
    LLVMValueRef hidden =
        lblk ? att_is_neg_inf(a, lo) : LLVMBuildICmp(b, LLVMIntSGE, e.index, count, "");
    LLVMValueRef in_span = att_min_i64(a, other, LLVMBuildSub(b, last, att_i64c(a, 1), ""));
    for (int r = 0; r < n; r++) {
      LLVMValueRef v = LLVMBuildFMul(b, c->scale, att_load_w(a, sblk[r], e.index, 1), "");
      if (c->mask.data) {
        LLVMValueRef at = mask_at(a, c, batch, mrow[r], xr[r], in_span);
        v = LLVMBuildFAdd(b, v, att_load_w(a, c->mask.data, at, 1), "");
      }
      v = LLVMBuildSelect(b, hidden, neg_inf, v, "");
      if (dead[r]) v = LLVMBuildSelect(b, dead[r], neg_inf, v, "");
      if (c->causal) { /* a compare per lane, cheaper than hide_past_diagonal's branches */
        LLVMIntPredicate past = c->query_rows ? LLVMIntSGT : LLVMIntSLT;
        v = LLVMBuildSelect(b, LLVMBuildICmp(b, past, other, xr[r], ""), neg_inf, v, "");
      }
      att_store_w(a, v, sblk[r], e.index, 1);
    }
    if (lblk) att_store_w(a, LLVMBuildSelect(b, hidden, zero, lo, ""), lblk, e.index, 1);
    gen_loop_end(gen, &e);
  } else {
    GenLoop e;
    gen_loop_begin(gen, &e, att_i64c(a, 0), att_i64c(a, BLOCK));
    for (int r = 0; r < n; r++) att_store_w(a, neg_inf, sblk[r], e.index, 1);
    if (lblk) att_store_w(a, zero, lblk, e.index, 1);
    LLVMBasicBlockRef skip_out = att_begin_unless(a, LLVMBuildICmp(b, LLVMIntSGE, e.index, count, ""));
    LLVMValueRef other = att_iadd(a, base, e.index); /* j of query rows, i of key rows */
    LLVMBasicBlockRef skip_row = NULL;
    LLVMValueRef lo = NULL;
    if (lblk) {
      lo = att_load_w(a, lseb, other, 1);
      skip_row = att_begin_unless(a, att_is_neg_inf(a, lo));
    }
    LLVMValueRef sc[TILE];
    att_dot_rows(a, own, gen_element(gen, a->t, c->query_rows ? kb : qb, att_imul(a, other, d)), n, d, sc);
    for (int r = 0; r < n; r++) {
      LLVMValueRef v = LLVMBuildFMul(b, c->scale, sc[r], "");
      if (c->mask.data) {
        LLVMValueRef at = mask_at(a, c, batch, mrow[r], xr[r], other);
        v = LLVMBuildFAdd(b, v, att_load_w(a, c->mask.data, at, 1), "");
      }
      if (dead[r]) v = LLVMBuildSelect(b, dead[r], neg_inf, v, "");
      if (forward && c->causal && n > 1) /* the online max needs it now */
        v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, other, xr[r], ""), neg_inf, v, "");
      att_store_w(a, v, sblk[r], e.index, 1);
      if (forward) LLVMBuildStore(b, att_max_t(a, v, att_get(a, bm[r])), bm[r]);
    }
    if (lblk) att_store_w(a, lo, lblk, e.index, 1);
    if (skip_row) att_end_unless(a, skip_row);
    att_end_unless(a, skip_out);
    gen_loop_end(gen, &e);
  }
  /* dot_rows' backward hides the pairs of a causal tile past its diagonal
   * here (block_dots did in its loop), then each row's max; dot_rows'
   * forward took both in the loop (its max after the loop put the max's
   * latency before the rescaling: 1.70 -> 1.80 ms a call) */
  if (!forward || c->tr_s) {
    if (c->causal && n > 1 && !c->tr_s) hide_past_diagonal(a, c, sblk, x0, base, count, n);
    for (int r = 0; r < n; r++) LLVMBuildStore(b, att_block_max(a, sblk[r]), bm[r]);
  }

  /* a block with no visible entry in any row is skipped */
  LLVMValueRef none = att_is_neg_inf(a, att_get(a, bm[0]));
  for (int r = 1; r < n; r++) none = LLVMBuildAnd(b, none, att_is_neg_inf(a, att_get(a, bm[r])), "");
  LLVMBasicBlockRef skip_block = att_begin_unless(a, none);
  for (int r = 0; r < n; r++) {
    if (forward) {
      /* online softmax: a larger max rescales what was summed so far; a
       * row still without a visible key keeps 0 (its shift taken as 0) */
      LLVMValueRef m_new = att_max_t(a, att_get(a, bm[r]), att_get(a, m[r]));
      LLVMValueRef sh = LLVMBuildSelect(b, att_is_neg_inf(a, m_new), zero, m_new, "");
      LLVMValueRef scale = att_exp_t(a, LLVMBuildFSub(b, att_get(a, m[r]), sh, ""));
      LLVMBuildStore(b, LLVMBuildFMul(b, att_get(a, l[r]), scale, ""), l[r]);
      if (acc[r]) att_acc_apply(a, ACC_SCALE, acc[r], dv, scale, NULL);
      LLVMBuildStore(b, m_new, m[r]);
      shift[r] = sh;
    }
    /* 2. p = exp(s - m) (forward) or exp(s - lse) (backward), vectorized */
    att_block_exp(a, sblk[r], lblk, shift[r], pblk[r]);
  }
  /* 3. the products, one row of the other side per step: the forward's
   * sums l and o += p v; the backward's ds = scale p (dp - delta) with
   * dp = do_i . v_j (do of query rows against the shared v row, or the
   * shared do row against v of key rows), into the scores' arrays (no
   * longer needed); a hidden or masked pair has p = 0 and so ds = 0 */
  bool ds = op == GRAPH_OP_ATTENTION_GRAD_Q || op == GRAPH_OP_ATTENTION_GRAD_K;
  LLVMValueRef *dsblk = sblk;
  if (c->tr_dp) att_block_dots(a, own_dv, n, dv, c->tr_dp, base, dsblk); /* dp */
  if (op != GRAPH_OP_ATTENTION_GRAD_V) {
    /* block_dots' dp: over the whole block, which LLVM vectorizes (p = 0
     * past the end, and dp there is finite: rows of the transposed side or
     * its zero padding) */
    GenLoop u;
    gen_loop_begin(gen, &u, att_i64c(a, 0), c->tr_dp ? att_i64c(a, BLOCK) : count);
    LLVMValueRef at = att_iadd(a, base, u.index);
    LLVMValueRef p[TILE];
    for (int r = 0; r < n; r++) p[r] = att_load_w(a, pblk[r], u.index, 1);
    if (forward) {
      for (int r = 0; r < n; r++) LLVMBuildStore(b, LLVMBuildFAdd(b, att_get(a, l[r]), p[r], ""), l[r]);
      if (op == GRAPH_OP_ATTENTION)
        att_axpy_rows(a, acc, p, n, dv, gen_element(gen, a->t, vb, att_imul(a, at, dv)));
    } else {
      LLVMValueRef dp[TILE];
      if (c->tr_dp)
        for (int r = 0; r < n; r++) dp[r] = att_load_w(a, dsblk[r], u.index, 1);
      else
        att_dot_rows(a, own_dv, gen_element(gen, a->t, c->query_rows ? vb : dob, att_imul(a, at, dv)), n,
                 dv, dp);
      LLVMValueRef dd =
          c->query_rows ? NULL : att_load_w(a, c->tr_delta ? c->tr_delta : deltab, at, 1);
      for (int r = 0; r < n; r++) {
        LLVMValueRef diff = LLVMBuildFSub(b, dp[r], c->query_rows ? di[r] : dd, "");
        att_store_w(a, LLVMBuildFMul(b, c->scale, LLVMBuildFMul(b, p[r], diff, ""), ""), dsblk[r],
                u.index, 1);
      }
    }
    gen_loop_end(gen, &u);
  }
  /* then the backward's accumulations over the block's rows of the other
   * side, dq += ds k, dk += ds q, dv += p do, in registers (block_axpy). The
   * forward keeps its axpy per row of v (above), which measured faster
   * (gpt-small's attention 1.55 ms a call, 1.76 with block_axpy). */
  if (op == GRAPH_OP_ATTENTION_GRAD_V || grad_kv)
    att_block_axpy(a, grad_kv ? acc_v : acc, pblk, n, dv,
               gen_element(gen, a->t, dob, att_imul(a, base, dv)), dv, count);
  if (dqb)
    add_dq(a, dqb, base, count, dsblk, own, n, d);
  if (ds)
    att_block_axpy(a, acc, dsblk, n, d,
               gen_element(gen, a->t, c->query_rows ? kb : qb, att_imul(a, base, d)), d, count);
  att_end_unless(a, skip_block);
  gen_loop_end(gen, &blk);

  for (int r = 0; r < n; r++) {
    LLVMValueRef row = att_iadd(a, row0, att_i64c(a, r));
    if (forward) {
      LLVMValueRef lv = att_get(a, l[r]);
      LLVMValueRef empty = LLVMBuildFCmp(b, LLVMRealOEQ, lv, zero, "");
      LLVMValueRef lse_out = op == GRAPH_OP_ATTENTION_LSE ? c->out : c->also_out;
      if (lse_out) {
        LLVMValueRef value = LLVMBuildFAdd(b, att_get(a, m[r]), att_log_t(a, lv), "");
        att_store_w(a, LLVMBuildSelect(b, empty, neg_inf, value, ""), lse_out, row, 1);
      }
      if (op == GRAPH_OP_ATTENTION) {
        LLVMValueRef denom = LLVMBuildSelect(b, empty, att_real(a, 1.0), lv, "");
        att_acc_apply(a, ACC_STORE, acc[r], dv, denom,
                  gen_element(gen, a->t, c->out, att_imul(a, row, dv)));
      }
    } else {
      att_acc_apply(a, ACC_STORE, acc[r], c->acc_len, att_real(a, 1.0),
                gen_element(gen, a->t, c->out, att_imul(a, row, c->acc_len)));
      if (grad_kv)
        att_acc_apply(a, ACC_STORE, acc_v[r], dv, att_real(a, 1.0),
                  gen_element(gen, a->t, c->also_out, att_imul(a, row, dv)));
    }
  }
}

void emit_attention_kernel(Gen *gen, int function, const Kernel *kernel,
                               const RowLanes *lanes) {
  const Graph *g = gen->graph;
  const GraphNode *n = graph_node(g, kernel->root);
  GraphOp op = n->op;
  int fixed = op == GRAPH_OP_ATTENTION ? 3 : op == GRAPH_OP_ATTENTION_LSE ? 2 : 6;
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape;
  int r = qs->rank;
  Att a = {.gen = gen, .b = gen->builder, .t = gen_type(gen, n->dtype)};
  int bits = a.t == gen->f64 ? 64 : 32;
  a.width = lanes ? lanes->lanes : gen->vector_bits >= 2 * bits ? gen->vector_bits / bits : 1;
  a.lanes = lanes;
  a.fn = gen_kernel_function(gen, function);
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
    a.lane = LLVMBuildURem(b, begin, att_i64c(&a, lanes->lanes), "lane");
    begin = LLVMBuildUDiv(b, begin, att_i64c(&a, lanes->lanes), "row");
    end = att_iadd(&a, begin, att_i64c(&a, 1));
  }
  LLVMValueRef in[7] = {NULL};
  for (int i = 0; i < n->num_inputs; i++)
    in[i] = gen_kernel_arg(gen, args, gen_kernel_arg_of(gen, kernel, n->inputs[i]), a.t);
  c.out = gen_kernel_arg(gen, args, 0, a.t);
  c.also_out = kernel->also != GRAPH_NONE ? gen_kernel_arg(gen, args, 1, a.t) : NULL;
  c.dq_out = kernel->also_q != GRAPH_NONE ? gen_kernel_arg(gen, args, 2, a.t) : NULL;
  c.q = in[0], c.k = in[1], c.v = fixed > 2 ? in[2] : NULL;
  c.d_o = fixed == 6 ? in[3] : NULL, c.lse = fixed == 6 ? in[4] : NULL;
  c.delta = fixed == 6 ? in[5] : NULL;
  if (n->num_inputs > fixed)
    c.mask = gen_mask_map(in[fixed], &graph_node(g, n->inputs[fixed])->shape, qs);
  c.scale = att_real(&a, n->attrs.scale);
  /* block_dots on a vector target, when the transposed rows fit, padded
   * to whole blocks */
  int64_t other_len = c.query_rows ? c.s : c.t;
  c.tr_len = (other_len + BLOCK - 1) / BLOCK * BLOCK;
  bool with_dp = op == GRAPH_OP_ATTENTION_GRAD_Q || op == GRAPH_OP_ATTENTION_GRAD_K;
  int64_t tr_bytes = (c.d + (with_dp ? c.dv : 0)) * c.tr_len * (bits / 8);
  if (a.width > 1 && !lanes && tr_bytes <= TRANSPOSED_MAX_BYTES) {
    c.tr_s = att_tr_array(&a, c.d * c.tr_len);
    c.tr_dp = with_dp ? att_tr_array(&a, c.dv * c.tr_len) : NULL;
    c.tr_batch = att_slot(&a, gen->i64, att_i64c(&a, -1));
    c.tr_lse = c.query_rows ? NULL : att_tr_array(&a, c.tr_len);
    c.tr_delta = c.query_rows || !with_dp ? NULL : att_tr_array(&a, c.tr_len);
  }

  /* A merged backward (Kernel.also_q, never on the GPU) runs whole
   * batches, each item the key rows of one (batch, head): its dq rows are
   * zeroed, then its key tiles add to them in key order. */
  GenLoop batches;
  if (c.dq_out) {
    gen_loop_begin(gen, &batches, begin, end);
    att_acc_apply(&a, ACC_ZERO, gen_element(gen, a.t, c.dq_out, att_imul(&a, batches.index, c.t * c.d)),
              c.t * c.d, NULL, NULL);
    begin = att_imul(&a, batches.index, c.rows_per_batch);
    end = att_iadd(&a, begin, att_i64c(&a, c.rows_per_batch));
  }

  /* Rows in tiles of TILE while a whole tile fits in the range and in its
   * batch, the rest one by one. */
  int tile = a.width > 1 && !lanes ? TILE : 1;
  LLVMValueRef row_slot = att_slot(&a, gen->i64, begin);
  LLVMBasicBlockRef header = LLVMAppendBasicBlockInContext(gen->context, a.fn, "rows");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(gen->context, a.fn, "tile");
  LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(gen->context, a.fn, "row");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(gen->context, a.fn, "rows_done");
  LLVMBuildBr(b, header);
  LLVMPositionBuilderAtEnd(b, header);
  LLVMValueRef row = att_get(&a, row_slot);
  LLVMBasicBlockRef pick = LLVMAppendBasicBlockInContext(gen->context, a.fn, "pick");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, row, end, ""), pick, done);
  LLVMPositionBuilderAtEnd(b, pick);
  LLVMValueRef fits = LLVMConstInt(LLVMInt1TypeInContext(gen->context), 0, 0);
  if (tile > 1) {
    LLVMValueRef next = att_iadd(&a, row, att_i64c(&a, tile));
    LLVMValueRef x = LLVMBuildURem(b, row, att_i64c(&a, c.rows_per_batch), "");
    fits = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLE, next, end, ""),
                        LLVMBuildICmp(b, LLVMIntSLE, att_iadd(&a, x, att_i64c(&a, tile)),
                                      att_i64c(&a, c.rows_per_batch), ""),
                        "");
  }
  LLVMBuildCondBr(b, fits, body, one);
  LLVMPositionBuilderAtEnd(b, body);
  if (tile > 1) {
    emit_tile(&a, &c, row, tile);
    LLVMBuildStore(b, att_iadd(&a, row, att_i64c(&a, tile)), row_slot);
  }
  LLVMBuildBr(b, header);
  LLVMPositionBuilderAtEnd(b, one);
  emit_tile(&a, &c, row, 1);
  LLVMBuildStore(b, att_iadd(&a, row, att_i64c(&a, 1)), row_slot);
  LLVMBuildBr(b, header);
  LLVMPositionBuilderAtEnd(b, done);
  if (c.dq_out) gen_loop_end(gen, &batches);
  LLVMBuildRetVoid(b);
}
