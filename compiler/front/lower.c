#include "lower.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

Graph *lower_graph;

/* Every dropout mask in a graph draws from one key; the graph numbers the
 * random nodes (their stream), and the step varies the draw per update. */
static const uint64_t RANDOM_SEED = 0x74666d00u;

static const char *scope_path = "";

void lower_begin(Graph *g) {
  lower_graph = g;
  scope_path = "";
}

static const char *pretrained_name;
static Graph *pretrained_graph;

Graph *lower_switch(Graph *g) {
  Graph *before = lower_graph;
  lower_graph = g;
  return before;
}

void lower_set_pretrained(const char *name, Graph *g) {
  pretrained_name = name;
  pretrained_graph = g;
}

Graph *lower_pretrained_target(const char *name) {
  return pretrained_name && !strcmp(pretrained_name, name) ? pretrained_graph : NULL;
}

const char *lower_enter_scope(const char *path) {
  const char *before = scope_path;
  scope_path = path;
  if (lower_graph) graph_set_scope(lower_graph, path[0] ? path : NULL);
  return before;
}

GraphDtype lower_dtype(DType dt) { return (GraphDtype)dt; }

GraphShape lower_shape(const TensorType *t) {
  return graph_shape_of(t->rank, t->dims);
}

static int same_shape(const TensorType *a, const TensorType *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

GraphId lower_as(const Value *v, const TensorType *to) {
  Graph *g = lower_graph;
  if (!g) return GRAPH_NONE;
  if (v->kind != V_TENSOR) {
    double x = v->kind == V_FLOAT ? v->f : (double)v->i;
    return to->rank ? graph_splat(g, lower_dtype(to->dtype), lower_shape(to), x)
                    : graph_scalar(g, lower_dtype(to->dtype), x);
  }
  if (same_shape(&v->t, to)) return v->node;
  return graph_broadcast(g, v->node, lower_shape(to));
}

/* Operands of an elementwise op: both as tensors of the result's shape and
 * the operands' dtype. */
static void operands(const Value *a, const Value *b, const TensorType *out, GraphId *x,
                     GraphId *y) {
  TensorType t = *out;
  t.dtype = a->kind == V_TENSOR ? a->t.dtype : b->kind == V_TENSOR ? b->t.dtype : out->dtype;
  *x = lower_as(a, &t);
  *y = lower_as(b, &t);
}

static GraphId is_zero(GraphId x) {
  Graph *g = lower_graph;
  const GraphNode *n = graph_node(g, x);
  GraphShape shape = n->shape;
  return graph_binary(g, GRAPH_OP_CMPEQ, x, graph_splat(g, n->dtype, shape, 0));
}

GraphId lower_binary(Op op, const Value *a, const Value *b, const TensorType *out) {
  Graph *g = lower_graph;
  if (!g) return GRAPH_NONE;
  GraphId x, y, r;
  operands(a, b, out, &x, &y);
  switch (op) {
    case OP_ADD: return graph_binary(g, GRAPH_OP_ADD, x, y);
    case OP_SUB: return graph_binary(g, GRAPH_OP_SUB, x, y);
    case OP_MUL: return graph_binary(g, GRAPH_OP_MUL, x, y);
    case OP_DIV: return graph_binary(g, GRAPH_OP_DIV, x, y);
    case OP_POW: return graph_binary(g, GRAPH_OP_POW, x, y);
    /* Comparisons give i32 0/1 in the IR and the operands' dtype here. */
    case OP_LT: r = graph_binary(g, GRAPH_OP_CMPLT, x, y); break;
    case OP_GT: r = graph_binary(g, GRAPH_OP_CMPLT, y, x); break;
    case OP_LE: r = is_zero(graph_binary(g, GRAPH_OP_CMPLT, y, x)); break;
    case OP_GE: r = is_zero(graph_binary(g, GRAPH_OP_CMPLT, x, y)); break;
    case OP_EQ: r = graph_binary(g, GRAPH_OP_CMPEQ, x, y); break;
    case OP_NE: r = is_zero(graph_binary(g, GRAPH_OP_CMPEQ, x, y)); break;
    default: return GRAPH_NONE;
  }
  return out->dtype == DT_I32 ? r : graph_cast(g, r, lower_dtype(out->dtype));
}

GraphId lower_minmax(int is_max, const Value *a, const Value *b, const TensorType *out) {
  if (!lower_graph) return GRAPH_NONE;
  GraphId x, y;
  operands(a, b, out, &x, &y);
  return graph_binary(lower_graph, is_max ? GRAPH_OP_MAX : GRAPH_OP_MIN, x, y);
}

GraphId lower_unary(const char *name, const Value *x) {
  static const struct { const char *name; GraphOp op; } ops[] = {
      {"neg", GRAPH_OP_NEG},   {"exp", GRAPH_OP_EXP},   {"log", GRAPH_OP_LOG},
      {"sqrt", GRAPH_OP_SQRT}, {"rsqrt", GRAPH_OP_RSQRT}, {"tanh", GRAPH_OP_TANH},
      {"sin", GRAPH_OP_SIN},   {"cos", GRAPH_OP_COS},   {"erf", GRAPH_OP_ERF},   {"abs", GRAPH_OP_ABS},
      {"recip", GRAPH_OP_RECIP}, {"stop_gradient", GRAPH_OP_STOP_GRADIENT}};
  if (!lower_graph) return GRAPH_NONE;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(ops[i].name, name)) return graph_unary(lower_graph, ops[i].op, x->node);
  return GRAPH_NONE;
}

/* v ([..., m, k]) broadcast to the batch axes of `out`. */
static GraphId to_batch(const Value *v, const TensorType *out) {
  TensorType t = *out;
  t.dims[t.rank - 2] = v->t.dims[v->t.rank - 2];
  t.dims[t.rank - 1] = v->t.dims[v->t.rank - 1];
  return same_shape(&v->t, &t) ? v->node : graph_broadcast(lower_graph, v->node, lower_shape(&t));
}

/* The IR's dot needs equal batch axes, or one rank-2 operand shared across
 * the other's batch (then that one's batch already is the result's). */
GraphId lower_matmul(const Value *a, const Value *b, const TensorType *out) {
  if (!lower_graph) return GRAPH_NONE;
  GraphId x = a->node, y = b->node;
  if (a->t.rank > 2 && b->t.rank > 2) {
    x = to_batch(a, out);
    y = to_batch(b, out);
  }
  return graph_dot(lower_graph, x, y, false, false);
}

GraphId lower_select(const Value *c, const Value *a, const Value *b, const TensorType *out) {
  Graph *g = lower_graph;
  if (!g) return GRAPH_NONE;
  TensorType tc = *out;
  tc.dtype = c->t.dtype;
  /* Any nonzero condition selects a. */
  GraphId cond = is_zero(is_zero(lower_as(c, &tc)));
  GraphId x, y;
  operands(a, b, out, &x, &y);
  return graph_select(g, cond, x, y);
}

GraphId lower_cast(const Value *x, DType dt) {
  if (!lower_graph) return GRAPH_NONE;
  return x->t.dtype == dt ? x->node : graph_cast(lower_graph, x->node, lower_dtype(dt));
}

GraphId lower_reduce(const char *name, const Value *x, unsigned mask, const TensorType *out) {
  Graph *g = lower_graph;
  if (!g) return GRAPH_NONE;
  GraphId r;
  if (!strcmp(name, "min")) {
    r = graph_unary(g, GRAPH_OP_NEG,
                    graph_reduce(g, GRAPH_OP_REDUCE_MAX, graph_unary(g, GRAPH_OP_NEG, x->node), mask));
  } else {
    r = graph_reduce(g, !strcmp(name, "max") ? GRAPH_OP_REDUCE_MAX : GRAPH_OP_REDUCE_SUM, x->node,
                     mask);
  }
  if (!strcmp(name, "mean")) {
    int64_t n = 1;
    for (int i = 0; i < x->t.rank; i++)
      if (mask & (1u << i)) n *= x->t.dims[i];
    const GraphNode *rn = graph_node(g, r);
    GraphShape shape = rn->shape;
    r = graph_binary(g, GRAPH_OP_MUL, r, graph_splat(g, rn->dtype, shape, 1.0 / (double)n));
  }
  const GraphNode *rn = graph_node(g, r);
  if (rn->shape.rank != out->rank) r = graph_reshape(g, r, lower_shape(out));
  return r;
}

GraphId lower_reshape(const Value *x, const TensorType *out) {
  if (!lower_graph) return GRAPH_NONE;
  return same_shape(&x->t, out) ? x->node : graph_reshape(lower_graph, x->node, lower_shape(out));
}

GraphId lower_permute(const Value *x, const int64_t *perm) {
  if (!lower_graph) return GRAPH_NONE;
  int p[GRAPH_MAX_RANK];
  for (int i = 0; i < x->t.rank; i++) p[i] = (int)perm[i];
  return graph_permute(lower_graph, x->node, p);
}

GraphId lower_broadcast(const Value *x, const TensorType *out) { return lower_as(x, out); }

GraphId lower_slice(const Value *x, int axis, int64_t start, int64_t end) {
  if (!lower_graph) return GRAPH_NONE;
  int64_t lo[GRAPH_MAX_RANK] = {0}, hi[GRAPH_MAX_RANK];
  for (int i = 0; i < x->t.rank; i++) hi[i] = x->t.dims[i];
  lo[axis] = start;
  hi[axis] = end;
  return graph_slice(lower_graph, x->node, lo, hi, NULL);
}

GraphId lower_concat(const Value *list, int axis) {
  if (!lower_graph) return GRAPH_NONE;
  GraphId ids[64];
  int n = list->items.len;
  if (n > 64) return GRAPH_NONE;
  for (int i = 0; i < n; i++) ids[i] = ((const Value *)list->items.items[i])->node;
  return graph_concat(lower_graph, ids, n, axis);
}

GraphId lower_pad(const Value *x, int axis, int64_t before, int64_t after, double value) {
  if (!lower_graph) return GRAPH_NONE;
  int64_t lo[GRAPH_MAX_RANK] = {0}, hi[GRAPH_MAX_RANK] = {0};
  lo[axis] = before;
  hi[axis] = after;
  return graph_pad(lower_graph, x->node, lo, hi, NULL, value);
}

/* The IR gathers rows of a [V, D] table; other ranks are reshaped to it. */
GraphId lower_gather(const Value *table, const Value *indices, const TensorType *out) {
  Graph *g = lower_graph;
  if (!g) return GRAPH_NONE;
  int64_t rows = table->t.dims[0], width = 1;
  for (int i = 1; i < table->t.rank; i++) width *= table->t.dims[i];
  GraphId tab = table->node;
  if (table->t.rank != 2) {
    int64_t dims[2] = {rows, width};
    tab = graph_reshape(g, tab, graph_shape_of(2, dims));
  }
  GraphId r = graph_gather(g, tab, indices->node);
  const GraphNode *rn = graph_node(g, r);
  if (rn->shape.rank != out->rank || table->t.rank != 2) r = graph_reshape(g, r, lower_shape(out));
  return r;
}

GraphId lower_one_hot(const Value *indices, const TensorType *out) {
  Graph *g = lower_graph;
  if (!g) return GRAPH_NONE;
  TensorType expanded = indices->t;
  expanded.dims[expanded.rank++] = 1;
  GraphShape full = lower_shape(out);
  GraphId idx = graph_broadcast(g, graph_reshape(g, indices->node, lower_shape(&expanded)), full);
  GraphId classes = graph_iota(g, GRAPH_I32, full, out->rank - 1);
  GraphId hot = graph_binary(g, GRAPH_OP_CMPEQ, idx, classes);
  return out->dtype == DT_I32 ? hot : graph_cast(g, hot, lower_dtype(out->dtype));
}

GraphId lower_iota(const TensorType *out) {
  if (!lower_graph) return GRAPH_NONE;
  return graph_iota(lower_graph, lower_dtype(out->dtype), lower_shape(out), 0);
}

GraphId lower_full(const TensorType *out, double value) {
  if (!lower_graph) return GRAPH_NONE;
  return out->rank ? graph_splat(lower_graph, lower_dtype(out->dtype), lower_shape(out), value)
                   : graph_scalar(lower_graph, lower_dtype(out->dtype), value);
}

GraphId lower_constant(const TensorType *out, const double *values) {
  if (!lower_graph) return GRAPH_NONE;
  return graph_constant(lower_graph, lower_dtype(out->dtype), lower_shape(out), values, tensor_numel(out));
}

GraphId lower_random_uniform(const TensorType *out) {
  Graph *g = lower_graph;
  if (!g) return GRAPH_NONE;
  return graph_random(g, train_step_input(g), GRAPH_F32, lower_shape(out), RANDOM_SEED);
}

GraphId lower_param(const char *name, const TensorType *t) {
  if (!lower_graph) return GRAPH_NONE;
  return graph_param(lower_graph, name, lower_dtype(t->dtype), lower_shape(t));
}

GraphId lower_kv_cache(const Value *x, const Value *positions, const char *name,
                       const TensorType *out) {
  Graph *g = lower_graph;
  if (!g) return GRAPH_NONE;
  char base[512], full[600];
  snprintf(base, sizeof base, "%s%s%s_cache", scope_path, scope_path[0] ? "." : "", name);
  snprintf(full, sizeof full, "%s", base);
  /* A layer applied twice has a cache per call. */
  for (int n = 2; graph_find_leaf(g, full) != GRAPH_NONE; n++)
    snprintf(full, sizeof full, "%s@%d", base, n);
  int r = out->rank;
  GraphShape shape = lower_shape(out);
  GraphId cache = graph_state(g, full, lower_dtype(out->dtype), shape);
  /* [B, 1, ..., W, 1]: row index == the batch row's position. */
  int64_t rows[GRAPH_MAX_RANK], batch[GRAPH_MAX_RANK];
  for (int i = 0; i < r; i++) rows[i] = batch[i] = 1;
  rows[0] = batch[0] = out->dims[0];
  rows[r - 2] = out->dims[r - 2];
  GraphShape row_shape = graph_shape_of(r, rows);
  GraphId row = graph_iota(g, GRAPH_I32, row_shape, r - 2);
  GraphId pos = graph_broadcast(g, graph_reshape(g, positions->node, graph_shape_of(r, batch)),
                                row_shape);
  GraphId hit = graph_broadcast(g, graph_binary(g, GRAPH_OP_CMPEQ, row, pos), shape);
  GraphId next = graph_select(g, hit, graph_broadcast(g, x->node, shape), cache);
  graph_update(g, cache, next);
  return next;
}

GraphId lower_input(const char *name, const TensorType *t) {
  if (!lower_graph) return GRAPH_NONE;
  return graph_input(lower_graph, name, lower_dtype(t->dtype), lower_shape(t));
}

void lower_output(const char *name, const Value *v) {
  if (lower_graph && v->kind == V_TENSOR) graph_output(lower_graph, name, v->node);
}

GraphId lower_step(void) {
  if (!lower_graph) return GRAPH_NONE;
  return graph_cast(lower_graph, train_step_input(lower_graph), GRAPH_F32);
}
