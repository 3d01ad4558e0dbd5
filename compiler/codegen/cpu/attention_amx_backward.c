/* The merged attention backward (grad_k writing grad_v and grad_q too,
 * Kernel.also_q: one range item a (batch, head)) on AMX tiles, for the
 * ops attention_amx.c's forward takes: no mask or a padding mask (one
 * value per key), q, k, v and do bf16 values. FlashAttention-2's backward over key blocks of 32, each against
 * the query blocks of 32 that see it, keys as the tiles' rows:
 *   S^T = K Q^T, dP^T = V dO^T          (4 C tiles each: 2 x 2 of 16 x 16)
 *   P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - delta)   (zmm, a lane
 *                                        a query: lse and delta are vectors)
 *   dV += P^T dO, dK += dS^T Q          (the key block's rows, f32 in
 *                                        memory, through tiles 0-3)
 *   dQ^T += K^T dS^T                    (the pair's dQ^T, f32 in memory)
 * with P^T and dS^T as two bf16 parts each (as the forward's p), then dk =
 * scale dK, dv = dV, dq = scale dQ (dQ^T transposed). A query with lse =
 * -inf (no visible key) and pairs past either end, past the causal
 * diagonal or masked (-inf) get p = 0. */
#include <math.h>

#include "attention_amx.h"

enum { BLOCK = 32 }; /* keys, and queries, of a block */

typedef struct Backward {
  Gen *gen;
  LLVMBuilderRef b;
  int64_t t, s, d, dv;
  int64_t d_steps, v_steps, d_tiles, v_tiles; /* the heads in steps of 32, in tiles of 16 */
  int64_t key_blocks, query_blocks;
  bool causal;
  double scale;
  /* the pair's packed operands (attention_amx.h's layouts): k and v as A
   * (keys x head), q and do as B (head pairs x queries) and as B (query
   * pairs x head), k as A (head x keys); lse and delta padded (+inf and
   * 0 past T, +inf where lse = -inf) */
  LLVMValueRef k_rows, v_rows, q_cols, do_cols, q_pairs, do_pairs, k_cols, lse, delta;
  /* the mask input (one value per key; mask.data NULL: none), and the
   * pair's values (key j's at j mask.stride[rank - 1]) */
  GenMaskMap mask;
  LLVMValueRef mask_keys;
  /* a block pair's S^T and dP^T (4 tiles of 16 x 16 f32 each), p's and
   * ds's parts as A (2 tiles of 16 keys x 32 queries each) and ds's as B
   * (2 tiles of 16 key pairs x 16 queries); the key block's dK and dV
   * (32 rows), the pair's dQ^T (16 d_tiles rows x 32 query_blocks) */
  LLVMValueRef scores, dp, p_hi, p_lo, ds_hi, ds_lo, dsb_hi, dsb_lo, dk_sums, dv_sums, dqt;
} Backward;

static LLVMValueRef i64c(Backward *w, int64_t v) { return gen_i64(w->gen, v); }

static int64_t tiles_bytes(int64_t blocks, int64_t len) { return blocks * BLOCK * ((len + 31) / 32 * 32) * 2; }

static void shape_of(const Gen *gen, const Kernel *kernel, Backward *w) {
  const Graph *g = gen->graph;
  const GraphNode *n = graph_node(g, kernel->root);
  const GraphShape *qs = &graph_node(g, n->inputs[0])->shape, *vs = &graph_node(g, n->inputs[2])->shape;
  w->t = qs->dims[qs->rank - 2], w->d = qs->dims[qs->rank - 1];
  w->s = vs->dims[vs->rank - 2], w->dv = vs->dims[vs->rank - 1];
  w->d_steps = (w->d + 31) / 32, w->v_steps = (w->dv + 31) / 32;
  w->d_tiles = (w->d + 15) / 16, w->v_tiles = (w->dv + 15) / 16;
  w->key_blocks = (w->s + BLOCK - 1) / BLOCK, w->query_blocks = (w->t + BLOCK - 1) / BLOCK;
  w->causal = n->attrs.causal, w->scale = n->attrs.scale;
}

/* The stack the kernel takes: its packed operands and accumulators. */
static int64_t stack_bytes(const Backward *w) {
  int64_t kb = w->key_blocks, qb = w->query_blocks;
  return tiles_bytes(kb, w->d) * 2 + tiles_bytes(kb, w->dv) + tiles_bytes(qb, w->d) * 2 +
         tiles_bytes(qb, w->dv) * 2 + qb * BLOCK * (8 + 16 * w->d_tiles * 4) +
         BLOCK * 16 * (w->d_tiles + w->v_tiles) * 4 + 16 * AMX_TILE_ELEMENTS * 4;
}

bool cpu_attention_amx_backward_applies(const Gen *gen, const Kernel *kernel) {
  const Graph *g = gen->graph;
  const GraphNode *n = graph_node(g, kernel->root);
  if (gen->vector_bits < 512 || n->op != GRAPH_OP_ATTENTION_GRAD_K || kernel->also == GRAPH_NONE ||
      kernel->also_q == GRAPH_NONE || n->dtype != GRAPH_F32 ||
      (n->num_inputs == 7 ? !amx_mask_per_key(&graph_node(g, n->inputs[6])->shape) : n->num_inputs != 6))
    return false;
  for (int i = 0; i < 4; i++) /* q, k, v, do */
    if (!kernel_bf16_valued(g, n->inputs[i])) return false;
  Backward w;
  shape_of(gen, kernel, &w);
  return w.s < INT32_MAX / 2 && w.t < INT32_MAX / 2 && stack_bytes(&w) <= AMX_ATTENTION_MAX_BYTES;
}

/* C tiles 0-3 = A tiles (kt's two groups of 16 keys) times B tiles (qb's
 * two groups of 16 queries) over `steps` of 32, stored to `dst` as 4
 * tiles of 16 x 16 (key group h, query group u: tile 2h + u). */
static void block_products(Backward *w, LLVMValueRef a, LLVMValueRef bt, int64_t steps, LLVMValueRef kt,
                           LLVMValueRef qb, LLVMValueRef dst) {
  Gen *gen = w->gen;
  LLVMValueRef row = i64c(w, AMX_ROW_BYTES);
  for (int c = 0; c < 4; c++) cpu_amx_zero(gen, c);
  for (int64_t step = 0; step < steps; step++) {
    for (int h = 0; h < 2; h++) {
      cpu_amx_load(gen, 4 + h, amx_tile(gen, a, gen_iadd(gen, gen_imul(gen, kt, 2), i64c(w, h)), steps, step), row);
      cpu_amx_load(gen, 6 + h, amx_tile(gen, bt, gen_iadd(gen, gen_imul(gen, qb, 2), i64c(w, h)), steps, step), row);
    }
    for (int c = 0; c < 4; c++) cpu_amx_dot(gen, c, 4 + c / 2, 6 + c % 2);
  }
  for (int c = 0; c < 4; c++)
    cpu_amx_store(gen, c, gen_element(gen, gen->f32, dst, i64c(w, 256 * c)), row);
}

/* P^T and dS^T of key block kt against query block qb from the stored
 * S^T and dP^T, a pair of keys at a time: their rows as A rows of p's and
 * ds's two parts, and ds's pairs of keys as B rows for dQ^T. */
static void block_softmax_grad(Backward *w, LLVMValueRef kt, LLVMValueRef qb) {
  Gen *gen = w->gen;
  LLVMBuilderRef b = w->b;
  LLVMValueRef zero = LLVMConstNull(amx_f32x16(gen));
  LLVMValueRef first_query = LLVMBuildTrunc(b, gen_imul(gen, qb, BLOCK), gen->i32, "");
  LLVMValueRef lse[2], delta[2], query[2], dead[2];
  for (int u = 0; u < 2; u++) {
    LLVMValueRef at = gen_iadd(gen, gen_imul(gen, qb, BLOCK), i64c(w, 16 * u));
    lse[u] = amx_load16(gen, gen_element(gen, gen->f32, w->lse, at), 16);
    delta[u] = amx_load16(gen, gen_element(gen, gen->f32, w->delta, at), 16);
    dead[u] = LLVMBuildFCmp(b, LLVMRealOEQ, lse[u], amx_splat_f32(gen, INFINITY), "");
    query[u] = LLVMBuildAdd(b, gen_splat(gen, first_query, 16), amx_lanes(gen, 16 * u, 1), "");
  }
  LLVMValueRef first_key = LLVMBuildTrunc(b, gen_imul(gen, kt, BLOCK), gen->i32, "");
  for (int pair = 0; pair < BLOCK / 2; pair++) {
    LLVMValueRef p[2][2], ds[2][2]; /* [key of the pair][query group] */
    for (int e = 0; e < 2; e++) {
      int j = 2 * pair + e;
      LLVMValueRef key = LLVMBuildAdd(b, first_key, gen_i32(gen, j), "");
      LLVMValueRef past_end = LLVMBuildICmp(b, LLVMIntSGE, key, gen_i32(gen, (int32_t)w->s), "");
      LLVMValueRef mask =
          w->mask.data ? amx_key_mask(gen, &w->mask, w->mask_keys, gen_iadd(gen, gen_imul(gen, kt, BLOCK), i64c(w, j)), w->s)
                       : NULL;
      for (int u = 0; u < 2; u++) {
        int64_t at = 256 * (2 * (j / 16) + u) + 16 * (j % 16);
        LLVMValueRef s = amx_load16(gen, gen_element(gen, gen->f32, w->scores, i64c(w, at)), 16);
        LLVMValueRef dp = amx_load16(gen, gen_element(gen, gen->f32, w->dp, i64c(w, at)), 16);
        LLVMValueRef hidden = LLVMBuildOr(b, dead[u], gen_splat(gen, past_end, 16), "");
        if (w->causal)
          hidden = LLVMBuildOr(b, hidden, LLVMBuildICmp(b, LLVMIntSLT, query[u], gen_splat(gen, key, 16), ""), "");
        /* hidden lanes take exp(0): exp(-inf)'s underflow costs an assist */
        LLVMValueRef x = LLVMBuildFMul(b, s, amx_splat_f32(gen, w->scale), "");
        if (mask) x = LLVMBuildFAdd(b, x, mask, "");
        x = LLVMBuildFSub(b, x, lse[u], "");
        if (mask) /* a key the mask hides (-inf) */
          hidden = LLVMBuildOr(b, hidden, LLVMBuildFCmp(b, LLVMRealOEQ, x, amx_splat_f32(gen, -INFINITY), ""), "");
        x = LLVMBuildSelect(b, hidden, zero, x, "");
        p[e][u] = LLVMBuildSelect(b, hidden, zero, gen_exp_f32(gen, x), "");
        ds[e][u] = LLVMBuildFMul(b, p[e][u], LLVMBuildFSub(b, dp, delta[u], ""), "");
      }
      /* row j of the A tiles of its group of 16 keys: 32 queries */
      LLVMValueRef row = i64c(w, AMX_TILE_ELEMENTS * (j / 16) + 32 * (j % 16));
      amx_split_pair(gen, p[e], false, w->p_hi, w->p_lo, row);
      amx_split_pair(gen, ds[e], false, w->ds_hi, w->ds_lo, row);
    }
    /* the pair's row of the B tiles of ds, one a query group */
    for (int u = 0; u < 2; u++) {
      LLVMValueRef x[2] = {ds[0][u], ds[1][u]};
      amx_split_pair(gen, x, true, w->dsb_hi, w->dsb_lo, i64c(w, AMX_TILE_ELEMENTS * u + 32 * pair));
    }
  }
}

/* acc (rows of `tiles` 16-column tiles, f32) += (A_hi + A_lo) B for each
 * group of 16 rows h < 2 (A: tile h of a_hi and a_lo) and column tile ct
 * (B: tile qb tiles + ct of bt), up to four C tiles at a time. */
static void accumulate_rows(Backward *w, LLVMValueRef acc, int64_t tiles, LLVMValueRef a_hi, LLVMValueRef a_lo,
                            LLVMValueRef bt, LLVMValueRef qb) {
  Gen *gen = w->gen;
  LLVMValueRef row = i64c(w, AMX_ROW_BYTES), acc_row = i64c(w, AMX_ROW_BYTES * tiles);
  for (int h = 0; h < 2; h++) {
    cpu_amx_load(gen, 4, amx_tile(gen, a_hi, i64c(w, 0), 0, h), row);
    cpu_amx_load(gen, 5, amx_tile(gen, a_lo, i64c(w, 0), 0, h), row);
    for (int64_t ct0 = 0; ct0 < tiles; ct0 += 4) {
      int group = (int)amx_min(4, tiles - ct0);
      LLVMValueRef c[4];
      for (int g = 0; g < group; g++) {
        c[g] = gen_element(gen, gen->f32, acc, i64c(w, 16 * 16 * tiles * h + 16 * (ct0 + g)));
        cpu_amx_load(gen, g, c[g], acc_row);
      }
      for (int g = 0; g < group; g++) {
        cpu_amx_load(gen, 6 + g % 2, amx_tile(gen, bt, qb, tiles, ct0 + g), row);
        cpu_amx_dot(gen, g, 4, 6 + g % 2);
        cpu_amx_dot(gen, g, 5, 6 + g % 2);
      }
      for (int g = 0; g < group; g++) cpu_amx_store(gen, g, c[g], acc_row);
    }
  }
}

/* dQ^T's columns of query block qb += K^T (kt's) (ds_hi + ds_lo)^T. */
static void accumulate_dq(Backward *w, LLVMValueRef kt, LLVMValueRef qb) {
  Gen *gen = w->gen;
  int64_t columns = w->query_blocks * BLOCK;
  LLVMValueRef row = i64c(w, AMX_ROW_BYTES), dq_row = i64c(w, 4 * columns);
  for (int u = 0; u < 2; u++) {
    cpu_amx_load(gen, 4, amx_tile(gen, w->dsb_hi, i64c(w, 0), 0, u), row);
    cpu_amx_load(gen, 5, amx_tile(gen, w->dsb_lo, i64c(w, 0), 0, u), row);
    LLVMValueRef column = gen_iadd(gen, gen_imul(gen, qb, BLOCK), i64c(w, 16 * u));
    for (int64_t dt0 = 0; dt0 < w->d_tiles; dt0 += 4) {
      int group = (int)amx_min(4, w->d_tiles - dt0);
      LLVMValueRef c[4];
      for (int g = 0; g < group; g++) {
        c[g] = gen_element(gen, gen->f32, w->dqt, gen_iadd(gen, i64c(w, 16 * columns * (dt0 + g)), column));
        cpu_amx_load(gen, g, c[g], dq_row);
      }
      for (int g = 0; g < group; g++) {
        cpu_amx_load(gen, 6 + g % 2, amx_tile(gen, w->k_cols, kt, w->d_tiles, dt0 + g), row);
        cpu_amx_dot(gen, g, 6 + g % 2, 4);
        cpu_amx_dot(gen, g, 6 + g % 2, 5);
      }
      for (int g = 0; g < group; g++) cpu_amx_store(gen, g, c[g], dq_row);
    }
  }
}

/* rows [first, first + count) of dst (len columns) = factor acc's rows
 * (16 tiles columns apart). */
static void store_rows(Backward *w, LLVMValueRef dst, LLVMValueRef first, LLVMValueRef count, int64_t len,
                       LLVMValueRef acc, int64_t tiles, double factor) {
  Gen *gen = w->gen;
  GenLoop r;
  gen_loop_begin(gen, &r, i64c(w, 0), count);
  for (int64_t ct = 0; ct < tiles; ct++) {
    LLVMValueRef x = amx_load16(gen, gen_element(gen, gen->f32, acc, gen_iadd(gen, gen_imul(gen, r.index, 16 * tiles), i64c(w, 16 * ct))), 16);
    if (factor != 1.0) x = LLVMBuildFMul(w->b, x, amx_splat_f32(gen, factor), "");
    LLVMValueRef row = gen_iadd(gen, first, r.index);
    amx_store16(gen, x, gen_element(gen, gen->f32, dst, gen_iadd(gen, gen_imul(gen, row, len), i64c(w, 16 * ct))),
                amx_min(16, len - 16 * ct));
  }
  gen_loop_end(gen, &r);
}

/* dq = scale dQ: dQ^T's 16 x 16 squares transposed, rows past T not
 * stored. */
static void store_dq(Backward *w, LLVMValueRef dq) {
  Gen *gen = w->gen;
  int64_t columns = w->query_blocks * BLOCK;
  GenLoop sq;
  gen_loop_begin(gen, &sq, i64c(w, 0), i64c(w, columns / 16));
  LLVMValueRef row0 = gen_imul(gen, sq.index, 16);
  LLVMValueRef count = cpu_min64(gen, i64c(w, 16), LLVMBuildSub(w->b, i64c(w, w->t), row0, ""));
  for (int64_t dt = 0; dt < w->d_tiles; dt++) {
    LLVMValueRef x[16];
    for (int c = 0; c < 16; c++) {
      LLVMValueRef at = gen_iadd(gen, i64c(w, columns * (16 * dt + c)), row0);
      x[c] = LLVMBuildFMul(w->b, amx_load16(gen, gen_element(gen, gen->f32, w->dqt, at), 16),
                           amx_splat_f32(gen, w->scale), "");
    }
    amx_store_columns(gen, x, dq, row0, count, w->d, 16 * dt);
  }
  gen_loop_end(gen, &sq);
}

/* lse and delta of the pair's queries, padded to whole blocks: +inf and 0
 * past T, +inf where lse = -inf (a query that saw no key). */
static void pad_statistics(Backward *w, LLVMValueRef lse, LLVMValueRef delta) {
  Gen *gen = w->gen;
  LLVMBuilderRef b = w->b;
  GenLoop i;
  gen_loop_begin(gen, &i, i64c(w, 0), i64c(w, w->query_blocks * BLOCK));
  LLVMValueRef inside = LLVMBuildICmp(b, LLVMIntSLT, i.index, i64c(w, w->t), "");
  LLVMValueRef at = cpu_min64(gen, i.index, i64c(w, w->t - 1));
  LLVMValueRef l = gen_load_at(gen, gen->f32, lse, at);
  LLVMValueRef none = LLVMBuildFCmp(b, LLVMRealOEQ, l, LLVMConstReal(gen->f32, -INFINITY), "");
  LLVMValueRef inf = LLVMConstReal(gen->f32, INFINITY);
  LLVMBuildStore(b, LLVMBuildSelect(b, inside, LLVMBuildSelect(b, none, inf, l, ""), inf, ""),
                 gen_element(gen, gen->f32, w->lse, i.index));
  LLVMBuildStore(b, LLVMBuildSelect(b, inside, gen_load_at(gen, gen->f32, delta, at), LLVMConstReal(gen->f32, 0.0), ""),
                 gen_element(gen, gen->f32, w->delta, i.index));
  gen_loop_end(gen, &i);
}

static void zero_floats(Backward *w, LLVMValueRef at, int64_t count) {
  LLVMBuildMemSet(w->b, LLVMBuildBitCast(w->b, at, w->gen->ptr, ""), LLVMConstInt(w->gen->i8, 0, false),
                  i64c(w, 4 * count), 64);
}

LLVMValueRef cpu_emit_attention_amx_backward(Gen *gen, const Kernel *kernel, const char *name) {
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  LLVMTypeRef params[3] = {gen->ptr, gen->i64, gen->i64};
  LLVMValueRef fn = cpu_gemm_function_begin(gen, name, params, 3, cpu_amx_family.features);
  Backward w = {.gen = gen, .b = gen->builder};
  shape_of(gen, kernel, &w);
  LLVMBuilderRef b = w.b;
  LLVMValueRef args = LLVMGetParam(fn, 0);
  LLVMValueRef in[7];
  for (int i = 0; i < n->num_inputs; i++)
    in[i] = gen_kernel_arg(gen, args, gen_kernel_arg_of(gen, kernel, n->inputs[i]), gen->f32);
  LLVMValueRef dk_out = gen_kernel_arg(gen, args, 0, gen->f32), dv_out = gen_kernel_arg(gen, args, 1, gen->f32);
  LLVMValueRef dq_out = gen_kernel_arg(gen, args, 2, gen->f32);
  if (n->num_inputs == 7)
    w.mask = gen_mask_map(in[6], &graph_node(gen->graph, n->inputs[6])->shape, &graph_node(gen->graph, n->inputs[0])->shape);
  int64_t kb = w.key_blocks, qb = w.query_blocks;
  w.k_rows = amx_stack_array(gen, gen->i16, tiles_bytes(kb, w.d) / 2, "k_rows");
  w.v_rows = amx_stack_array(gen, gen->i16, tiles_bytes(kb, w.dv) / 2, "v_rows");
  w.k_cols = amx_stack_array(gen, gen->i16, tiles_bytes(kb, w.d) / 2, "k_cols");
  w.q_cols = amx_stack_array(gen, gen->i16, tiles_bytes(qb, w.d) / 2, "q_cols");
  w.q_pairs = amx_stack_array(gen, gen->i16, tiles_bytes(qb, w.d) / 2, "q_pairs");
  w.do_cols = amx_stack_array(gen, gen->i16, tiles_bytes(qb, w.dv) / 2, "do_cols");
  w.do_pairs = amx_stack_array(gen, gen->i16, tiles_bytes(qb, w.dv) / 2, "do_pairs");
  w.lse = amx_stack_array(gen, gen->f32, qb * BLOCK, "lse");
  w.delta = amx_stack_array(gen, gen->f32, qb * BLOCK, "delta");
  w.dqt = amx_stack_array(gen, gen->f32, 16 * w.d_tiles * qb * BLOCK, "dqt");
  w.dk_sums = amx_stack_array(gen, gen->f32, BLOCK * 16 * w.d_tiles, "dk");
  w.dv_sums = amx_stack_array(gen, gen->f32, BLOCK * 16 * w.v_tiles, "dv");
  w.scores = amx_stack_array(gen, gen->f32, 4 * 256, "scores");
  w.dp = amx_stack_array(gen, gen->f32, 4 * 256, "dp");
  LLVMValueRef *parts[6] = {&w.p_hi, &w.p_lo, &w.ds_hi, &w.ds_lo, &w.dsb_hi, &w.dsb_lo};
  for (int i = 0; i < 6; i++) *parts[i] = amx_stack_array(gen, gen->i16, 2 * AMX_TILE_ELEMENTS, "parts");
  cpu_amx_configure(gen);

  GenLoop pair, key_block, query_block;
  gen_loop_begin(gen, &pair, LLVMGetParam(fn, 1), LLVMGetParam(fn, 2));
  LLVMValueRef q = gen_element(gen, gen->f32, in[0], gen_imul(gen, pair.index, w.t * w.d));
  LLVMValueRef k = gen_element(gen, gen->f32, in[1], gen_imul(gen, pair.index, w.s * w.d));
  LLVMValueRef v = gen_element(gen, gen->f32, in[2], gen_imul(gen, pair.index, w.s * w.dv));
  LLVMValueRef d_o = gen_element(gen, gen->f32, in[3], gen_imul(gen, pair.index, w.t * w.dv));
  LLVMValueRef keys = i64c(&w, w.s), queries = i64c(&w, w.t);
  amx_pack_row_steps(gen, w.k_rows, k, keys, w.d, i64c(&w, 2 * kb), false);
  amx_pack_row_steps(gen, w.v_rows, v, keys, w.dv, i64c(&w, 2 * kb), false);
  amx_pack_row_pairs(gen, w.k_cols, k, keys, w.d, i64c(&w, kb), true);
  amx_pack_row_steps(gen, w.q_cols, q, queries, w.d, i64c(&w, 2 * qb), true);
  amx_pack_row_steps(gen, w.do_cols, d_o, queries, w.dv, i64c(&w, 2 * qb), true);
  amx_pack_row_pairs(gen, w.q_pairs, q, queries, w.d, i64c(&w, qb), false);
  amx_pack_row_pairs(gen, w.do_pairs, d_o, queries, w.dv, i64c(&w, qb), false);
  if (w.mask.data) w.mask_keys = gen_element(gen, gen->f32, w.mask.data, gen_mask_row(gen, &w.mask, pair.index, i64c(&w, 0)));
  pad_statistics(&w, gen_element(gen, gen->f32, in[4], gen_imul(gen, pair.index, w.t)),
                 gen_element(gen, gen->f32, in[5], gen_imul(gen, pair.index, w.t)));
  zero_floats(&w, w.dqt, 16 * w.d_tiles * qb * BLOCK);

  gen_loop_begin(gen, &key_block, i64c(&w, 0), i64c(&w, kb));
  zero_floats(&w, w.dk_sums, BLOCK * 16 * w.d_tiles);
  zero_floats(&w, w.dv_sums, BLOCK * 16 * w.v_tiles);
  /* causal: the query blocks from the key block's own (T = S) */
  gen_loop_begin(gen, &query_block, w.causal ? key_block.index : i64c(&w, 0), i64c(&w, qb));
  block_products(&w, w.k_rows, w.q_cols, w.d_steps, key_block.index, query_block.index, w.scores);
  block_products(&w, w.v_rows, w.do_cols, w.v_steps, key_block.index, query_block.index, w.dp);
  block_softmax_grad(&w, key_block.index, query_block.index);
  accumulate_rows(&w, w.dv_sums, w.v_tiles, w.p_hi, w.p_lo, w.do_pairs, query_block.index);
  accumulate_rows(&w, w.dk_sums, w.d_tiles, w.ds_hi, w.ds_lo, w.q_pairs, query_block.index);
  accumulate_dq(&w, key_block.index, query_block.index);
  gen_loop_end(gen, &query_block);
  LLVMValueRef first = gen_imul(gen, key_block.index, BLOCK);
  LLVMValueRef count = cpu_min64(gen, i64c(&w, BLOCK), LLVMBuildSub(b, keys, first, ""));
  store_rows(&w, gen_element(gen, gen->f32, dk_out, gen_imul(gen, pair.index, w.s * w.d)), first, count, w.d, w.dk_sums,
             w.d_tiles, w.scale);
  store_rows(&w, gen_element(gen, gen->f32, dv_out, gen_imul(gen, pair.index, w.s * w.dv)), first, count, w.dv, w.dv_sums,
             w.v_tiles, 1.0);
  gen_loop_end(gen, &key_block);
  store_dq(&w, gen_element(gen, gen->f32, dq_out, gen_imul(gen, pair.index, w.t * w.d)));
  gen_loop_end(gen, &pair);
  cpu_amx_release(gen);
  LLVMBuildRetVoid(b);
  return fn;
}
