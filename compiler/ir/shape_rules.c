/* The shape rules of ops.def: what each op accepts and what it produces. */
#include <stdio.h>

#include "graph_rules.h"
#include "errbuf.h"

/* Keeps every buffer size comfortably inside int64_t and size_t. */
#define MAX_NUMEL ((int64_t)1 << 40)


typedef struct TypeText {
  char text[160];
} TypeText;

static TypeText type_of(const GraphNode *n) {
  TypeText t;
  graph_format_type(t.text, sizeof t.text, n->dtype, &n->shape);
  return t;
}

static const GraphNode *input(const Graph *g, const GraphNode *node, int i) {
  return graph_node(g, node->inputs[i]);
}

static bool valid_dtype(GraphDtype d) { return d >= GRAPH_F32 && d <= GRAPH_BF16; }

static bool check_shape(const GraphShape *s, char *err, size_t size) {
  if (s->rank < 0 || s->rank > GRAPH_MAX_RANK)
    return errbuf_set(err, size, "rank %d is outside 0..%d", s->rank, GRAPH_MAX_RANK);
  int64_t numel = 1;
  for (int i = 0; i < s->rank; i++) {
    if (s->dims[i] < 1) return errbuf_set(err, size, "dimension %d has size %lld", i,
                                    (long long)s->dims[i]);
    if (s->dims[i] > MAX_NUMEL / numel) return errbuf_set(err, size, "the shape is too large");
    numel *= s->dims[i];
  }
  return true;
}

static bool same_as_input(const Graph *g, GraphNode *node) {
  const GraphNode *x = input(g, node, 0);
  node->shape = x->shape;
  node->dtype = x->dtype;
  return true;
}

bool graph_rule_unary(const Graph *g, GraphNode *node, char *err, size_t size) {
  (void)err, (void)size;
  return same_as_input(g, node);
}

bool graph_rule_unary_float(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *x = input(g, node, 0);
  if (!graph_dtype_is_float(x->dtype))
    return errbuf_set(err, size, "needs a float input, got %s", type_of(x).text);
  return same_as_input(g, node);
}

bool graph_rule_binary(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *a = input(g, node, 0), *b = input(g, node, 1);
  if (a->dtype != b->dtype || !graph_shape_equal(&a->shape, &b->shape))
    return errbuf_set(err, size, "operands %s and %s differ (the IR does not broadcast)",
                type_of(a).text, type_of(b).text);
  return same_as_input(g, node);
}

bool graph_rule_binary_float(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *a = input(g, node, 0);
  if (!graph_dtype_is_float(a->dtype))
    return errbuf_set(err, size, "needs float operands, got %s", type_of(a).text);
  return graph_rule_binary(g, node, err, size);
}

bool graph_rule_compare(const Graph *g, GraphNode *node, char *err, size_t size) {
  if (!graph_rule_binary(g, node, err, size)) return false;
  node->dtype = GRAPH_I32;
  return true;
}

bool graph_rule_select(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *c = input(g, node, 0), *a = input(g, node, 1), *b = input(g, node, 2);
  if (c->dtype != GRAPH_I32 || !graph_shape_equal(&c->shape, &a->shape))
    return errbuf_set(err, size, "the condition %s must be i32 with the shape of %s", type_of(c).text,
                type_of(a).text);
  if (a->dtype != b->dtype || !graph_shape_equal(&a->shape, &b->shape))
    return errbuf_set(err, size, "the branches %s and %s differ", type_of(a).text, type_of(b).text);
  node->shape = a->shape;
  node->dtype = a->dtype;
  return true;
}

bool graph_rule_cast(const Graph *g, GraphNode *node, char *err, size_t size) {
  if (!valid_dtype(node->attrs.dtype)) return errbuf_set(err, size, "unknown target dtype");
  node->shape = input(g, node, 0)->shape;
  node->dtype = node->attrs.dtype;
  return true;
}

bool graph_rule_reduce(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *x = input(g, node, 0);
  uint32_t axes = node->attrs.axes;
  if (x->shape.rank < 32 && (axes >> x->shape.rank) != 0)
    return errbuf_set(err, size, "an axis is outside the rank of %s", type_of(x).text);
  node->shape = x->shape;
  node->dtype = x->dtype;
  for (int i = 0; i < x->shape.rank; i++)
    if (axes & (1u << i)) node->shape.dims[i] = 1;
  return true;
}

bool graph_rule_reshape(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *x = input(g, node, 0);
  if (!check_shape(&node->attrs.shape, err, size)) return false;
  if (graph_shape_numel(&node->attrs.shape) != graph_shape_numel(&x->shape)) {
    char target[160];
    graph_format_type(target, sizeof target, x->dtype, &node->attrs.shape);
    return errbuf_set(err, size, "cannot reshape %s to %s", type_of(x).text, target);
  }
  node->shape = node->attrs.shape;
  node->dtype = x->dtype;
  return true;
}

bool graph_rule_permute(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *x = input(g, node, 0);
  bool seen[GRAPH_MAX_RANK] = {false};
  node->shape.rank = x->shape.rank;
  for (int i = 0; i < x->shape.rank; i++) {
    int p = node->attrs.perm[i];
    if (p < 0 || p >= x->shape.rank || seen[p])
      return errbuf_set(err, size, "perm is not a permutation of the axes of %s", type_of(x).text);
    seen[p] = true;
    node->shape.dims[i] = x->shape.dims[p];
  }
  node->dtype = x->dtype;
  return true;
}

bool graph_rule_broadcast(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *x = input(g, node, 0);
  const GraphShape *to = &node->attrs.shape;
  if (!check_shape(to, err, size)) return false;
  int offset = to->rank - x->shape.rank;
  bool ok = offset >= 0;
  for (int i = 0; ok && i < x->shape.rank; i++)
    ok = x->shape.dims[i] == 1 || x->shape.dims[i] == to->dims[i + offset];
  if (!ok) {
    char target[160];
    graph_format_type(target, sizeof target, x->dtype, to);
    return errbuf_set(err, size, "cannot broadcast %s to %s", type_of(x).text, target);
  }
  node->shape = *to;
  node->dtype = x->dtype;
  return true;
}

bool graph_rule_slice(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *x = input(g, node, 0);
  const GraphAttrs *a = &node->attrs;
  node->shape.rank = x->shape.rank;
  for (int i = 0; i < x->shape.rank; i++) {
    if (a->start[i] < 0 || a->start[i] >= a->stop[i] || a->stop[i] > x->shape.dims[i] ||
        a->step[i] < 1)
      return errbuf_set(err, size, "axis %d: start %lld, stop %lld, step %lld do not fit %s", i,
                  (long long)a->start[i], (long long)a->stop[i], (long long)a->step[i],
                  type_of(x).text);
    node->shape.dims[i] = (a->stop[i] - a->start[i] + a->step[i] - 1) / a->step[i];
  }
  node->dtype = x->dtype;
  return true;
}

bool graph_rule_concat(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *first = input(g, node, 0);
  int axis = node->attrs.axis;
  if (axis < 0 || axis >= first->shape.rank)
    return errbuf_set(err, size, "axis %d is outside the rank of %s", axis, type_of(first).text);
  node->shape = first->shape;
  node->dtype = first->dtype;
  for (int k = 1; k < node->num_inputs; k++) {
    const GraphNode *x = input(g, node, k);
    bool ok = x->dtype == first->dtype && x->shape.rank == first->shape.rank;
    for (int i = 0; ok && i < x->shape.rank; i++)
      ok = i == axis || x->shape.dims[i] == first->shape.dims[i];
    if (!ok)
      return errbuf_set(err, size, "%s and %s do not join along axis %d", type_of(first).text,
                  type_of(x).text, axis);
    node->shape.dims[axis] += x->shape.dims[axis];
  }
  return check_shape(&node->shape, err, size);
}

bool graph_rule_pad(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *x = input(g, node, 0);
  const GraphAttrs *a = &node->attrs;
  node->shape.rank = x->shape.rank;
  for (int i = 0; i < x->shape.rank; i++) {
    if (a->lo[i] < 0 || a->hi[i] < 0 || a->interior[i] < 0 || a->lo[i] > MAX_NUMEL ||
        a->hi[i] > MAX_NUMEL || a->interior[i] > MAX_NUMEL)
      return errbuf_set(err, size, "axis %d: padding must be between 0 and 2^40", i);
    int64_t d = x->shape.dims[i];
    int64_t out = a->lo[i] + a->hi[i] + d;
    if (a->interior[i] > (MAX_NUMEL - out) / d) return errbuf_set(err, size, "the result is too large");
    node->shape.dims[i] = out + (d - 1) * a->interior[i];
  }
  node->dtype = x->dtype;
  return check_shape(&node->shape, err, size);
}

bool graph_rule_gather(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *table = input(g, node, 0), *idx = input(g, node, 1);
  if (table->shape.rank != 2)
    return errbuf_set(err, size, "the table %s must be [V, D]", type_of(table).text);
  if (idx->dtype != GRAPH_I32 || idx->shape.rank >= GRAPH_MAX_RANK)
    return errbuf_set(err, size, "the indices %s must be i32 of rank below %d", type_of(idx).text,
                GRAPH_MAX_RANK);
  node->shape = idx->shape;
  node->shape.dims[node->shape.rank++] = table->shape.dims[1];
  node->dtype = table->dtype;
  return check_shape(&node->shape, err, size);
}

bool graph_rule_scatter_add(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *upd = input(g, node, 0), *idx = input(g, node, 1);
  bool ok = idx->dtype == GRAPH_I32 && upd->shape.rank == idx->shape.rank + 1;
  for (int i = 0; ok && i < idx->shape.rank; i++) ok = upd->shape.dims[i] == idx->shape.dims[i];
  if (!ok)
    return errbuf_set(err, size, "updates %s must be [..., D] over i32 indices [...], got %s",
                type_of(upd).text, type_of(idx).text);
  node->shape.rank = 2;
  node->shape.dims[0] = node->attrs.rows;
  node->shape.dims[1] = upd->shape.dims[upd->shape.rank - 1];
  node->dtype = upd->dtype;
  return check_shape(&node->shape, err, size);
}

bool graph_rule_dot(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *a = input(g, node, 0), *b = input(g, node, 1);
  int ra = a->shape.rank, rb = b->shape.rank;
  if (ra < 2 || rb < 2 || a->dtype != b->dtype || !graph_dtype_is_float(a->dtype))
    return errbuf_set(err, size, "needs two float operands of rank >= 2 and one dtype, got %s and %s",
                type_of(a).text, type_of(b).text);
  bool batch_ok = ra == rb || ra == 2 || rb == 2;
  for (int i = 0; batch_ok && ra == rb && i < ra - 2; i++)
    batch_ok = a->shape.dims[i] == b->shape.dims[i];
  int64_t m = a->shape.dims[ra - (node->attrs.transpose_a ? 1 : 2)];
  int64_t ka = a->shape.dims[ra - (node->attrs.transpose_a ? 2 : 1)];
  int64_t kb = b->shape.dims[rb - (node->attrs.transpose_b ? 1 : 2)];
  int64_t n = b->shape.dims[rb - (node->attrs.transpose_b ? 2 : 1)];
  if (!batch_ok || ka != kb)
    return errbuf_set(err, size, "cannot contract %s%s with %s%s", type_of(a).text,
                node->attrs.transpose_a ? " (transposed)" : "", type_of(b).text,
                node->attrs.transpose_b ? " (transposed)" : "");
  const GraphNode *batched = ra >= rb ? a : b;
  node->shape = batched->shape;
  node->shape.dims[node->shape.rank - 2] = m;
  node->shape.dims[node->shape.rank - 1] = n;
  node->dtype = a->dtype;
  return check_shape(&node->shape, err, size);
}

static bool source(GraphNode *node, char *err, size_t size) {
  if (!valid_dtype(node->attrs.dtype)) return errbuf_set(err, size, "unknown dtype");
  if (!check_shape(&node->attrs.shape, err, size)) return false;
  node->shape = node->attrs.shape;
  node->dtype = node->attrs.dtype;
  return true;
}

bool graph_rule_iota(const Graph *g, GraphNode *node, char *err, size_t size) {
  (void)g;
  if (!source(node, err, size)) return false;
  if (node->attrs.axis < 0 || node->attrs.axis >= node->shape.rank)
    return errbuf_set(err, size, "axis %d is outside rank %d", node->attrs.axis, node->shape.rank);
  return true;
}

bool graph_rule_constant(const Graph *g, GraphNode *node, char *err, size_t size) {
  (void)g;
  if (!source(node, err, size)) return false;
  int64_t n = graph_shape_numel(&node->shape);
  if (node->attrs.num_values != 1 && node->attrs.num_values != n)
    return errbuf_set(err, size, "%lld values for %lld elements", (long long)node->attrs.num_values,
                (long long)n);
  return true;
}

bool graph_rule_random(const Graph *g, GraphNode *node, char *err, size_t size) {
  const GraphNode *offset = input(g, node, 0);
  if (offset->dtype != GRAPH_I32 || offset->shape.rank != 0)
    return errbuf_set(err, size, "the offset must be an i32 scalar, got %s", type_of(offset).text);
  if (!graph_dtype_is_float(node->attrs.dtype)) return errbuf_set(err, size, "needs a float dtype");
  return source(node, err, size);
}

bool graph_rule_leaf(const Graph *g, GraphNode *node, char *err, size_t size) {
  (void)g;
  return source(node, err, size);
}

/* attention*: q [..., T, D], k [..., S, D], v [..., S, Dv] of one float
 * dtype and equal batch axes; do like the attention output, lse and delta
 * [..., T, 1]; the optional mask last, its axes the last of [..., T, S],
 * each equal or 1. */
bool graph_rule_attention(const Graph *g, GraphNode *node, char *err, size_t size) {
  GraphOp op = node->op;
  int fixed = op == GRAPH_OP_ATTENTION ? 3 : op == GRAPH_OP_ATTENTION_LSE ? 2 : 6;
  if (node->num_inputs != fixed && node->num_inputs != fixed + 1)
    return errbuf_set(err, size, "expected %d inputs and an optional mask, got %d", fixed,
                      node->num_inputs);
  const GraphNode *q = input(g, node, 0), *k = input(g, node, 1);
  const GraphNode *v = fixed > 2 ? input(g, node, 2) : NULL;
  int r = q->shape.rank;
  bool ok = r >= 2 && k->shape.rank == r && graph_dtype_is_float(q->dtype) &&
            k->dtype == q->dtype && q->shape.dims[r - 1] == k->shape.dims[r - 1];
  for (int i = 0; ok && i < r - 2; i++) ok = q->shape.dims[i] == k->shape.dims[i];
  if (ok && v)
    ok = v->shape.rank == r && v->dtype == q->dtype &&
         v->shape.dims[r - 2] == k->shape.dims[r - 2];
  for (int i = 0; ok && v && i < r - 2; i++) ok = v->shape.dims[i] == q->shape.dims[i];
  if (!ok)
    return errbuf_set(err, size, "needs q [..., T, D], k [..., S, D]%s of one float dtype, got %s, %s%s%s",
                      v ? ", v [..., S, Dv]" : "", type_of(q).text, type_of(k).text,
                      v ? ", " : "", v ? type_of(v).text : "");
  int64_t t = q->shape.dims[r - 2], s = k->shape.dims[r - 2];
  if (node->attrs.causal && t != s)
    return errbuf_set(err, size, "causal attention needs T == S, got T = %lld, S = %lld",
                      (long long)t, (long long)s);
  GraphShape row = q->shape; /* [..., T, 1]: lse and delta */
  row.dims[r - 1] = 1;
  if (fixed == 6) {
    const GraphNode *d_o = input(g, node, 3), *lse = input(g, node, 4), *delta = input(g, node, 5);
    GraphShape o = q->shape;
    o.dims[r - 1] = v->shape.dims[r - 1];
    bool fine = d_o->dtype == q->dtype && lse->dtype == q->dtype && delta->dtype == q->dtype &&
                graph_shape_equal(&d_o->shape, &o) && graph_shape_equal(&lse->shape, &row) &&
                graph_shape_equal(&delta->shape, &row);
    if (!fine)
      return errbuf_set(err, size, "do, lse and delta must be like o [..., T, Dv] and [..., T, 1], got %s, %s, %s",
                        type_of(d_o).text, type_of(lse).text, type_of(delta).text);
  }
  if (node->num_inputs == fixed + 1) {
    const GraphNode *m = input(g, node, fixed);
    GraphShape full = q->shape;
    full.dims[r - 1] = s;
    bool fine = m->dtype == q->dtype && m->shape.rank <= r;
    for (int i = 0; fine && i < m->shape.rank; i++) {
      int64_t want = full.dims[r - m->shape.rank + i];
      fine = m->shape.dims[i] == want || m->shape.dims[i] == 1;
    }
    if (!fine)
      return errbuf_set(err, size, "the mask %s does not broadcast to the scores [..., %lld, %lld]",
                        type_of(m).text, (long long)t, (long long)s);
  }
  node->dtype = q->dtype;
  switch (op) {
  case GRAPH_OP_ATTENTION:
    node->shape = q->shape;
    node->shape.dims[r - 1] = v->shape.dims[r - 1];
    break;
  case GRAPH_OP_ATTENTION_LSE: node->shape = row; break;
  case GRAPH_OP_ATTENTION_GRAD_Q: node->shape = q->shape; break;
  case GRAPH_OP_ATTENTION_GRAD_K: node->shape = k->shape; break;
  default: node->shape = v->shape; break;
  }
  return true;
}
