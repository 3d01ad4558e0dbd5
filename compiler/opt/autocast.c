/* --dtype bf16: activations in bf16, everything the optimizer owns in f32.
 *
 * Runs on the forward graph as lowered (before autodiff), so the backward
 * graph autodiff builds from it is bf16 where the forward is: the VJP of a
 * node computes in its cotangent's dtype, and the VJP of the cast that
 * reads a parameter is a cast of the gradient back to f32. What becomes
 * what, node by node in id order (docs/internals.md lists it):
 *  - inputs, params and states stay f32 (master copies); every use of one
 *    by a bf16 node reads it through its own cast to bf16, so autodiff sums
 *    a parameter's gradient contributions in f32, after those casts;
 *  - reductions (reduce_sum, reduce_max, and scatter_add) are f32: their input is cast to f32
 *    (exact) and the statistic stays f32 (softmax max and sum, layernorm
 *    mean and variance, the loss's sums);
 *  - a fused attention is f32, inputs cast to f32, and its output is not
 *    kept as f32 (its users become bf16);
 *  - a float node whose float inputs are all f32 and none a leaf (built
 *    from reductions, constants, iota, random, comparisons) stays f32:
 *    that keeps the loss, the learning rate and scalar arithmetic on
 *    statistics in f32;
 *  - every other float node becomes bf16 (dots, elementwise arithmetic on
 *    activations, movement, gathers), its f32 inputs cast to bf16;
 *  - f64 and i32 nodes are left alone; a comparison between a bf16 and an
 *    f32 value compares in f32 (the bf16 one widened, exactly);
 *  - outputs that came out bf16 (logits) are cast back to f32.
 * Kernels compute every bf16 node in f32 and round its result once; dots
 * and reductions accumulate in f32. No loss scaling: bf16 has f32's
 * exponent range. */
#include <stdio.h>
#include <stdlib.h>

#include "pass.h"

typedef struct Autocast {
  const Graph *in;
  Graph *out;
  GraphId *map;
  bool *keeps_f32; /* per in-node: an f32 node that is not a leaf */
} Autocast;

static bool is_leaf(GraphOp op) {
  return op == GRAPH_OP_INPUT || op == GRAPH_OP_PARAM || op == GRAPH_OP_STATE;
}

static GraphDtype out_dtype(const Autocast *a, GraphId out_id) {
  return graph_node(a->out, out_id)->dtype;
}

/* `x` (an out-node) as dtype `to` (both float), casting only when needed. */
static GraphId as_dtype(Autocast *a, GraphId x, GraphDtype to) {
  GraphDtype from = out_dtype(a, x);
  if (from == to || !graph_dtype_is_float(from) || from == GRAPH_F64) return x;
  return graph_cast(a->out, x, to);
}

static bool has_f64(const Autocast *a, GraphId id) {
  const GraphNode *n = graph_node(a->in, id);
  if (n->dtype == GRAPH_F64) return true;
  for (int i = 0; i < n->num_inputs; i++)
    if (graph_node(a->in, n->inputs[i])->dtype == GRAPH_F64) return true;
  return false;
}

static GraphId visit(Autocast *a, GraphId id, GraphId *inputs) {
  const GraphNode *n = graph_node(a->in, id);
  graph_set_scope_from(a->out, a->in, id);
  for (int i = 0; i < n->num_inputs; i++) inputs[i] = a->map[n->inputs[i]];
  if (is_leaf(n->op) || n->op == GRAPH_OP_CONSTANT || n->op == GRAPH_OP_IOTA ||
      n->op == GRAPH_OP_RANDOM || has_f64(a, id)) {
    a->keeps_f32[id] = !is_leaf(n->op) && n->dtype == GRAPH_F32;
    return graph_copy_node(a->out, a->in, id, inputs);
  }
  bool any_bf16 = false, all_f32 = true;
  for (int i = 0; i < n->num_inputs; i++) {
    const GraphNode *x = graph_node(a->in, n->inputs[i]);
    if (!graph_dtype_is_float(x->dtype)) continue;
    any_bf16 = any_bf16 || out_dtype(a, inputs[i]) == GRAPH_BF16;
    all_f32 = all_f32 && a->keeps_f32[n->inputs[i]];
  }
  if (!graph_dtype_is_float(n->dtype)) {
    /* Comparisons (and casts to i32): a mixed pair compares in f32. */
    if (any_bf16 && !all_f32)
      for (int i = 0; i < n->num_inputs; i++)
        if (graph_dtype_is_float(graph_node(a->in, n->inputs[i])->dtype))
          inputs[i] = as_dtype(a, inputs[i], GRAPH_F32);
    return graph_copy_node(a->out, a->in, id, inputs);
  }
  if (n->op == GRAPH_OP_REDUCE_SUM || n->op == GRAPH_OP_REDUCE_MAX ||
      n->op == GRAPH_OP_SCATTER_ADD) {
    inputs[0] = as_dtype(a, inputs[0], GRAPH_F32);
    a->keeps_f32[id] = n->dtype == GRAPH_F32;
    return graph_copy_node(a->out, a->in, id, inputs);
  }
  if (n->op == GRAPH_OP_ATTENTION) {
    /* Fused attention (pass_attention ran first) computes and stores in
     * f32: its kernel has no bf16 loads and stores, and its softmax
     * statistics (lse) must stay f32 anyway. q, k, v are cast to f32 for
     * it (linear in T); its output becomes bf16 where it is used. */
    for (int i = 0; i < n->num_inputs; i++) inputs[i] = as_dtype(a, inputs[i], GRAPH_F32);
    return graph_copy_node(a->out, a->in, id, inputs);
  }
  bool f32 = all_f32 && n->op != GRAPH_OP_DOT;
  if (f32 || n->dtype == GRAPH_BF16) {
    a->keeps_f32[id] = f32 && n->dtype == GRAPH_F32;
    return graph_copy_node(a->out, a->in, id, inputs);
  }
  /* bf16: f32 float inputs are cast. A cast to f32 of a float becomes the
   * bf16 value itself (its input is bf16 by now, or cast to it). */
  for (int i = 0; i < n->num_inputs; i++)
    if (graph_dtype_is_float(graph_node(a->in, n->inputs[i])->dtype))
      inputs[i] = as_dtype(a, inputs[i], GRAPH_BF16);
  if (n->op == GRAPH_OP_CAST) {
    if (graph_dtype_is_float(graph_node(a->in, n->inputs[0])->dtype)) return inputs[0];
    return graph_cast(a->out, inputs[0], GRAPH_BF16); /* an i32 cast to float */
  }
  return graph_copy_node(a->out, a->in, id, inputs);
}

Graph *pass_autocast_bf16(const Graph *in, GraphId *map, char *err, size_t err_size) {
  int n = graph_count(in), max_inputs = 1;
  for (GraphId id = 0; id < n; id++)
    if (graph_node(in, id)->num_inputs > max_inputs) max_inputs = graph_node(in, id)->num_inputs;
  Autocast a = {.in = in, .out = graph_new(), .map = map};
  a.keeps_f32 = calloc(n > 0 ? (size_t)n : 1, sizeof(bool));
  GraphId *inputs = malloc((size_t)max_inputs * sizeof(GraphId));
  if (!a.out || !a.keeps_f32 || !inputs) {
    graph_free(a.out);
    free(a.keeps_f32);
    free(inputs);
    if (err_size) snprintf(err, err_size, "out of memory");
    return NULL;
  }
  for (GraphId id = 0; id < n && !graph_error(a.out); id++) map[id] = visit(&a, id, inputs);
  for (int i = 0; i < graph_num_outputs(in) && !graph_error(a.out); i++) {
    GraphOutput o = graph_output_at(in, i);
    GraphId v = map[o.node];
    if (out_dtype(&a, v) == GRAPH_BF16) v = graph_cast(a.out, v, graph_node(in, o.node)->dtype);
    graph_output(a.out, o.name, v);
  }
  for (int i = 0; i < graph_num_updates(in) && !graph_error(a.out); i++) {
    GraphUpdate u = graph_update_at(in, i);
    GraphId v = map[u.value];
    if (out_dtype(&a, v) != graph_node(in, u.value)->dtype)
      v = graph_cast(a.out, v, graph_node(in, u.value)->dtype);
    graph_update(a.out, map[u.target], v);
  }
  free(a.keeps_f32);
  free(inputs);
  if (graph_error(a.out)) {
    if (err_size) snprintf(err, err_size, "%s", graph_error(a.out));
    graph_free(a.out);
    return NULL;
  }
  return a.out;
}

/* ---- After CSE: one rounding per chain of elementwise ops --------------- */

static bool elementwise(GraphOp op) { return graph_op_kind(op) == GRAPH_KIND_ELEMENTWISE; }

/* A bf16 elementwise node whose one use is an elementwise node (not an
 * output or update) is a link: the kernel planner inlines it into that
 * consumer, so its bf16 value is never stored, and rounding it there only
 * costs work and precision. */
static bool *chain_links(const Graph *g) {
  int n = graph_count(g);
  int *uses = calloc(n > 0 ? (size_t)n : 1, sizeof(int));
  bool *feeds_elementwise = calloc(n > 0 ? (size_t)n : 1, sizeof(bool));
  bool *link = calloc(n > 0 ? (size_t)n : 1, sizeof(bool));
  if (!uses || !feeds_elementwise || !link) {
    free(uses), free(feeds_elementwise), free(link);
    return NULL;
  }
  for (GraphId id = 0; id < n; id++) {
    const GraphNode *node = graph_node(g, id);
    for (int i = 0; i < node->num_inputs; i++) {
      uses[node->inputs[i]]++;
      feeds_elementwise[node->inputs[i]] = elementwise(node->op);
    }
  }
  for (int i = 0; i < graph_num_outputs(g); i++) uses[graph_output_at(g, i).node] += 2;
  for (int i = 0; i < graph_num_updates(g); i++) uses[graph_update_at(g, i).value] += 2;
  for (GraphId id = 0; id < n; id++) {
    const GraphNode *node = graph_node(g, id);
    link[id] = node->dtype == GRAPH_BF16 && elementwise(node->op) && uses[id] == 1 &&
               feeds_elementwise[id];
  }
  free(uses);
  free(feeds_elementwise);
  return link;
}

Graph *pass_bf16_chains(const Graph *in, char *err, size_t err_size) {
  int n = graph_count(in), max_inputs = 1;
  for (GraphId id = 0; id < n; id++)
    if (graph_node(in, id)->num_inputs > max_inputs) max_inputs = graph_node(in, id)->num_inputs;
  bool *link = chain_links(in);
  GraphId *map = malloc((n > 0 ? (size_t)n : 1) * sizeof(GraphId));
  GraphId *inputs = malloc((size_t)max_inputs * sizeof(GraphId));
  Graph *out = graph_new();
  if (!link || !map || !inputs || !out) {
    free(link), free(map), free(inputs);
    graph_free(out);
    if (err_size) snprintf(err, err_size, "out of memory");
    return NULL;
  }
  for (GraphId id = 0; id < n && !graph_error(out); id++) {
    const GraphNode *node = graph_node(in, id);
    graph_set_scope_from(out, in, id);
    bool fed = false; /* an input is a link, now f32 */
    for (int i = 0; i < node->num_inputs; i++) {
      inputs[i] = map[node->inputs[i]];
      fed = fed || link[node->inputs[i]];
    }
    if (!link[id] && !fed) {
      map[id] = graph_copy_node(out, in, id, inputs);
      continue;
    }
    /* Computed in f32: bf16 inputs widened (exactly), links already f32.
     * Each widening cast has this one use (CSE has run), so it is inlined
     * and its bf16 input stays what is stored. */
    for (int i = 0; i < node->num_inputs; i++)
      if (graph_node(out, inputs[i])->dtype == GRAPH_BF16)
        inputs[i] = graph_cast(out, inputs[i], GRAPH_F32);
    GraphId wide;
    if (node->op == GRAPH_OP_CAST && node->dtype == GRAPH_BF16)
      wide = graph_dtype_is_float(graph_node(out, inputs[0])->dtype)
                 ? inputs[0]
                 : graph_cast(out, inputs[0], GRAPH_F32);
    else if (node->op == GRAPH_OP_CAST)
      wide = graph_cast(out, inputs[0], node->dtype);
    else
      wide = graph_copy_node(out, in, id, inputs);
    /* The chain's last node rounds once (a comparison gives i32). */
    map[id] = link[id] || node->dtype != GRAPH_BF16 ? wide : graph_cast(out, wide, GRAPH_BF16);
  }
  if (!graph_error(out)) graph_copy_interface(out, in, map);
  free(link);
  free(map);
  free(inputs);
  if (graph_error(out)) {
    if (err_size) snprintf(err, err_size, "%s", graph_error(out));
    graph_free(out);
    return NULL;
  }
  return out;
}
