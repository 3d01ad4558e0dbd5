/* Algebraic simplification. Nodes are visited in order, so a rule sees
 * inputs that are already simplified and chains collapse in one sweep. */
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "pass.h"
#include "rewrite.h"

static bool is_splat_of(const Graph *g, GraphId id, double value) {
  double v;
  return graph_constant_is_splat(graph_node(g, id), &v) && v == value;
}

static bool is_identity_perm(const int *perm, int rank) {
  for (int i = 0; i < rank; i++)
    if (perm[i] != i) return false;
  return true;
}

/* Whether `n` is a permute that only swaps the last two axes. */
static bool is_last_two_swap(const GraphNode *n) {
  int r = n->shape.rank;
  if (n->op != GRAPH_OP_PERMUTE || r < 2) return false;
  for (int i = 0; i < r - 2; i++)
    if (n->attrs.perm[i] != i) return false;
  return n->attrs.perm[r - 2] == r - 1 && n->attrs.perm[r - 1] == r - 2;
}

static bool is_full_slice(const GraphNode *node, const GraphNode *x) {
  for (int i = 0; i < x->shape.rank; i++)
    if (node->attrs.start[i] != 0 || node->attrs.stop[i] != x->shape.dims[i] ||
        node->attrs.step[i] != 1)
      return false;
  return true;
}

static bool is_empty_pad(const GraphNode *node, const GraphNode *x) {
  for (int i = 0; i < x->shape.rank; i++)
    if (node->attrs.lo[i] || node->attrs.hi[i] || node->attrs.interior[i]) return false;
  return true;
}

/* The axis along which zero pads `a` and `b` (no interior) of the same
 * shape differ, when `a`'s data ends where `b`'s begins and they pad every
 * other axis alike; -1 otherwise. */
static int adjacent_pad_axis(const Graph *g, const GraphNode *a, const GraphNode *b) {
  if (a->op != GRAPH_OP_PAD || b->op != GRAPH_OP_PAD || a->attrs.pad_value != 0 ||
      b->attrs.pad_value != 0 || !graph_shape_equal(&a->shape, &b->shape))
    return -1;
  int axis = -1;
  for (int i = 0; i < a->shape.rank; i++) {
    if (a->attrs.interior[i] || b->attrs.interior[i]) return -1;
    if (a->attrs.lo[i] == b->attrs.lo[i] && a->attrs.hi[i] == b->attrs.hi[i]) continue;
    if (axis >= 0) return -1;
    axis = i;
  }
  if (axis < 0) return -1;
  int64_t a_end = a->attrs.lo[axis] + graph_node(g, a->inputs[0])->shape.dims[axis];
  return a_end == b->attrs.lo[axis] ? axis : -1;
}

/* concat(xs..., axis) with the inputs that are themselves concats along the
 * same axis spliced in. */
static GraphId concat_flat(Graph *g, const GraphId *xs, int count, int axis) {
  int total = 0;
  for (int i = 0; i < count; i++) {
    const GraphNode *x = graph_node(g, xs[i]);
    total += x->op == GRAPH_OP_CONCAT && x->attrs.axis == axis ? x->num_inputs : 1;
  }
  GraphId *flat = malloc(sizeof(GraphId) * (size_t)total);
  if (!flat) {
    graph_fail(g, "simplify: out of memory");
    return GRAPH_NONE;
  }
  int k = 0;
  for (int i = 0; i < count; i++) {
    const GraphNode *x = graph_node(g, xs[i]);
    if (x->op == GRAPH_OP_CONCAT && x->attrs.axis == axis) {
      memcpy(flat + k, x->inputs, sizeof(GraphId) * (size_t)x->num_inputs);
      k += x->num_inputs;
    } else {
      flat[k++] = xs[i];
    }
  }
  GraphId c = graph_concat(g, flat, total, axis);
  free(flat);
  return c;
}

/* pad(a) + pad(b), zero pads whose data lie side by side along one axis:
 * one pad of concat(a, b), or the concat alone where that pad is empty. The
 * gradient of a tensor read as column slices (merge_dots.c) sums one zero
 * pad per slice; this makes it the slices' gradients concatenated. */
static GraphId sum_of_adjacent_pads(Graph *g, GraphId left, GraphId right) {
  const GraphNode *a = graph_node(g, left), *b = graph_node(g, right);
  int axis = adjacent_pad_axis(g, a, b);
  if (axis < 0) {
    axis = adjacent_pad_axis(g, b, a);
    const GraphNode *t = a;
    a = b;
    b = t;
  }
  if (axis < 0) return GRAPH_NONE;
  GraphId parts[2] = {a->inputs[0], b->inputs[0]};
  int64_t lo[GRAPH_MAX_RANK], hi[GRAPH_MAX_RANK];
  bool empty = true;
  for (int i = 0; i < a->shape.rank; i++) {
    lo[i] = a->attrs.lo[i];
    hi[i] = i == axis ? b->attrs.hi[i] : a->attrs.hi[i];
    empty = empty && lo[i] == 0 && hi[i] == 0;
  }
  GraphId c = concat_flat(g, parts, 2, axis);
  return empty || c == GRAPH_NONE ? c : graph_pad(g, c, lo, hi, NULL, 0.0);
}

static bool reduces_only_unit_axes(const GraphNode *node, const GraphNode *x) {
  for (int i = 0; i < x->shape.rank; i++)
    if ((node->attrs.axes & (1u << i)) && x->shape.dims[i] != 1) return false;
  return true;
}

/* Per node of `g`: a dot that no output or update names and that every
 * reader reads through a swap of its last two axes (a weight's gradient
 * of x @ transpose(w) is dot(x^T, g)^T). Such a dot is computed swapped,
 * dot(a, b)^T = dot(b^T, a^T), so no transpose is read or copied. */
static bool *dots_read_swapped(const Graph *g) {
  int count = graph_count(g);
  bool *swapped = calloc((size_t)count + 1, sizeof *swapped);
  int *readers = calloc((size_t)count + 1, sizeof *readers);
  bool *named = calloc((size_t)count + 1, sizeof *named);
  if (!swapped || !readers || !named) {
    free(readers);
    free(named);
    free(swapped);
    return NULL;
  }
  for (int i = 0; i < graph_num_outputs(g); i++) named[graph_output_at(g, i).node] = true;
  for (int i = 0; i < graph_num_updates(g); i++) named[graph_update_at(g, i).value] = true;
  for (GraphId id = 0; id < count; id++) {
    const GraphNode *n = graph_node(g, id);
    for (int i = 0; i < n->num_inputs; i++) readers[n->inputs[i]]++;
  }
  for (GraphId id = 0; id < count; id++) {
    const GraphNode *n = graph_node(g, id);
    if (is_last_two_swap(n)) readers[n->inputs[0]]--;
  }
  for (GraphId id = 0; id < count; id++) {
    const GraphNode *n = graph_node(g, id);
    if (is_last_two_swap(n)) {
      GraphId x = n->inputs[0];
      swapped[x] = graph_node(g, x)->op == GRAPH_OP_DOT && readers[x] == 0 && !named[x];
    }
  }
  free(readers);
  free(named);
  return swapped;
}

/* x [..., r, c] where one of r and c is 1 as [..., rows, cols] (the
 * same elements in the same order). */
static GraphId as_matrix(Graph *g, GraphId x, int64_t rows, int64_t cols) {
  GraphShape s = graph_node(g, x)->shape;
  if (s.dims[s.rank - 2] == rows && s.dims[s.rank - 1] == cols) return x;
  s.dims[s.rank - 2] = rows;
  s.dims[s.rank - 1] = cols;
  return graph_reshape(g, x, s);
}

/* A dot contracting a length-1 axis is an outer product: each element is
 * one product, a * b, which a loop kernel computes (and fuses with its
 * readers) where the GEMM's 12 x 32 tiles, packing and k loop of one step
 * ran at 5 GFLOP/s (the GRU seq2seq's attention gradients, [32, 25, 1] x
 * [32, 1, 128]: 11% of its step). The GEMM's fmuladd(a, b, 0) is the same
 * product but for the sign of a zero. */
static GraphId outer_product(Graph *out, const GraphNode *dot, const GraphId *in) {
  const GraphNode *a = graph_node(out, in[0]);
  int ra = a->shape.rank;
  int64_t k = a->shape.dims[dot->attrs.transpose_a ? ra - 2 : ra - 1];
  if (k != 1) return GRAPH_NONE;
  int64_t m = dot->shape.dims[dot->shape.rank - 2], n = dot->shape.dims[dot->shape.rank - 1];
  GraphId column = graph_broadcast(out, as_matrix(out, in[0], m, 1), dot->shape);
  GraphId row = graph_broadcast(out, as_matrix(out, in[1], 1, n), dot->shape);
  return graph_binary(out, GRAPH_OP_MUL, column, row);
}

/* The simplified replacement of `node` given its mapped inputs `in`, or
 * GRAPH_NONE to copy it unchanged. `swapped` is dots_read_swapped. */
static GraphId simplify_node(Graph *out, const GraphNode *node, const GraphId *in,
                             const bool *swapped) {
  const GraphNode *x = node->num_inputs ? graph_node(out, in[0]) : NULL;
  switch (node->op) {
  case GRAPH_OP_MUL:
    if (is_splat_of(out, in[1], 1.0)) return in[0];
    if (is_splat_of(out, in[0], 1.0)) return in[1];
    break;
  case GRAPH_OP_ADD:
    if (is_splat_of(out, in[1], 0.0)) return in[0];
    if (is_splat_of(out, in[0], 0.0)) return in[1];
    return sum_of_adjacent_pads(out, in[0], in[1]);
  case GRAPH_OP_SUB:
    if (is_splat_of(out, in[1], 0.0)) return in[0];
    break;
  case GRAPH_OP_DIV:
    if (is_splat_of(out, in[1], 1.0)) return in[0];
    break;
  case GRAPH_OP_NEG:
    if (x->op == GRAPH_OP_NEG) return x->inputs[0];
    break;
  case GRAPH_OP_STOP_GRADIENT: /* autodiff has run: the identity */
    return in[0];
  case GRAPH_OP_CAST:
    if (x->dtype == node->attrs.dtype) return in[0];
    break;
  case GRAPH_OP_PERMUTE: {
    int rank = x->shape.rank;
    if (is_identity_perm(node->attrs.perm, rank)) return in[0];
    if (x->op == GRAPH_OP_DOT && swapped[node->inputs[0]] && is_last_two_swap(node))
      return graph_dot(out, x->inputs[1], x->inputs[0], !x->attrs.transpose_b,
                       !x->attrs.transpose_a);
    if (x->op == GRAPH_OP_PERMUTE) {
      /* z = permute(permute(w, p), q): axis i of z is axis p[q[i]] of w */
      int composed[GRAPH_MAX_RANK];
      for (int i = 0; i < rank; i++) composed[i] = x->attrs.perm[node->attrs.perm[i]];
      GraphId w = x->inputs[0];
      return is_identity_perm(composed, rank) ? w : graph_permute(out, w, composed);
    }
    break;
  }
  case GRAPH_OP_RESHAPE:
    if (graph_shape_equal(&x->shape, &node->attrs.shape)) return in[0];
    if (x->op == GRAPH_OP_RESHAPE) {
      GraphId w = x->inputs[0];
      const GraphNode *wn = graph_node(out, w);
      if (graph_shape_equal(&wn->shape, &node->attrs.shape)) return w;
      return graph_reshape(out, w, node->attrs.shape);
    }
    break;
  case GRAPH_OP_BROADCAST: {
    double value;
    if (graph_shape_equal(&x->shape, &node->attrs.shape)) return in[0];
    if (graph_constant_is_splat(x, &value))
      return graph_splat(out, x->dtype, node->attrs.shape, value);
    /* right-aligned broadcasts compose into one */
    if (x->op == GRAPH_OP_BROADCAST) return graph_broadcast(out, x->inputs[0], node->attrs.shape);
    break;
  }
  case GRAPH_OP_SLICE:
    if (is_full_slice(node, x)) return in[0];
    break;
  case GRAPH_OP_PAD:
    if (is_empty_pad(node, x)) return in[0];
    break;
  case GRAPH_OP_REDUCE_SUM:
  case GRAPH_OP_REDUCE_MAX:
    if (reduces_only_unit_axes(node, x)) return in[0];
    break;
  case GRAPH_OP_DOT: {
    GraphId outer = outer_product(out, node, in);
    if (outer != GRAPH_NONE) return outer;
    const GraphNode *a = x, *b = graph_node(out, in[1]);
    bool swap_a = is_last_two_swap(a), swap_b = is_last_two_swap(b);
    if (swap_a || swap_b)
      return graph_dot(out, swap_a ? a->inputs[0] : in[0], swap_b ? b->inputs[0] : in[1],
                       node->attrs.transpose_a != swap_a, node->attrs.transpose_b != swap_b);
    break;
  }
  default: break;
  }
  return GRAPH_NONE;
}

Graph *pass_simplify(const Graph *in, char *err, size_t err_size) {
  PassRewrite r;
  bool *swapped = dots_read_swapped(in);
  if (!swapped) {
    errbuf_set(err, err_size, "out of memory");
    return NULL;
  }
  if (!pass_rewrite_begin(&r, in, err, err_size)) {
    free(swapped);
    return NULL;
  }
  for (GraphId id = 0; id < graph_count(in); id++) {
    const GraphNode *node = graph_node(in, id);
    GraphId simpler = simplify_node(r.out, node, pass_rewrite_inputs(&r, id), swapped);
    r.map[id] = simpler != GRAPH_NONE ? simpler : pass_rewrite_copy(&r, id);
  }
  free(swapped);
  return pass_rewrite_finish(&r, err, err_size);
}
