/* The reverse pass: seeds d(loss)/d(loss) = 1, walks the forward nodes in
 * reverse id order (a reverse topological order) and lets each op's VJP
 * turn its output gradient into input gradients, summing over fan-out. */
#include "autodiff.h"

#include <stdlib.h>

#include "autodiff_vjp.h"

static const AutodiffVjp vjps[GRAPH_OP_COUNT] = {
#define OP(id, name, arity, kind, shape_rule, vjp, reference) vjp,
#include "ops.def"
#undef OP
};

enum { UNKNOWN = -1, NO = 0, YES = 1 };

struct AutodiffContext {
  Graph *g;
  int forward_count; /* nodes below this id are the forward graph */
  bool *needs_grad;
  signed char *regenerable; /* memo of is_regenerable */
  GraphId *regenerated;     /* the backward copy of a regenerable node */
};

Graph *autodiff_graph(AutodiffContext *ctx) { return ctx->g; }

bool autodiff_needs_grad(const AutodiffContext *ctx, GraphId id) {
  return id >= 0 && id < ctx->forward_count && ctx->needs_grad[id];
}

/* Constants and iotas cost nothing to keep and are never copied. */
static bool is_free(const GraphNode *n) {
  return n->op == GRAPH_OP_CONSTANT || n->op == GRAPH_OP_IOTA;
}

/* A random node, or a cheap op whose inputs are all random-derived or free
 * (with at least one random-derived): e.g. a dropout mask
 * cast(cmplt(random, p)). Such a value is recomputed, never stored. */
static bool is_regenerable(AutodiffContext *ctx, GraphId id) {
  if (ctx->regenerable[id] != UNKNOWN) return ctx->regenerable[id] == YES;
  const GraphNode *n = graph_node(ctx->g, id);
  bool yes = n->op == GRAPH_OP_RANDOM;
  bool cheap = graph_op_kind(n->op) == GRAPH_KIND_ELEMENTWISE || n->op == GRAPH_OP_RESHAPE ||
               n->op == GRAPH_OP_BROADCAST || n->op == GRAPH_OP_PERMUTE ||
               n->op == GRAPH_OP_SLICE;
  if (cheap) {
    bool any = false, all = true;
    for (int i = 0; i < n->num_inputs && all; i++) {
      GraphId in = n->inputs[i];
      if (is_regenerable(ctx, in)) any = true;
      else if (!is_free(graph_node(ctx->g, in))) all = false;
    }
    yes = any && all;
  }
  ctx->regenerable[id] = yes ? YES : NO;
  return yes;
}

GraphId autodiff_value(AutodiffContext *ctx, GraphId id) {
  if (id >= ctx->forward_count || !is_regenerable(ctx, id)) return id;
  if (ctx->regenerated[id] != GRAPH_NONE) return ctx->regenerated[id];
  const GraphNode *n = graph_node(ctx->g, id);
  int count = n->num_inputs;
  GraphId inputs[3]; /* regenerable ops have at most three inputs */
  /* Ids first: regenerating an input adds nodes, which may move n. */
  for (int i = 0; i < count; i++) inputs[i] = n->inputs[i];
  for (int i = 0; i < count; i++) inputs[i] = autodiff_value(ctx, inputs[i]);
  /* Same op and attributes, so a random node keeps its seed and stream and
   * produces the same bits as its forward twin. */
  ctx->regenerated[id] = graph_copy_node(ctx->g, ctx->g, id, inputs);
  return ctx->regenerated[id];
}

static void accumulate(Graph *g, GraphId *slot, GraphId contribution) {
  *slot = *slot == GRAPH_NONE ? contribution : graph_binary(g, GRAPH_OP_ADD, *slot, contribution);
}

bool autodiff_gradients(Graph *g, GraphId loss, const GraphId *wrt, int count, GraphId *grads) {
  int n = graph_count(g);
  const GraphNode *loss_node = graph_node(g, loss);
  if (!loss_node || !graph_dtype_is_float(loss_node->dtype) ||
      graph_shape_numel(&loss_node->shape) != 1)
    return graph_fail(g, "autodiff: the loss must be a float node with one element");

  AutodiffContext ctx = {.g = g, .forward_count = n};
  ctx.needs_grad = calloc((size_t)n, sizeof(bool));
  ctx.regenerable = malloc((size_t)n);
  ctx.regenerated = malloc((size_t)n * sizeof(GraphId));
  GraphId *grad = malloc((size_t)n * sizeof(GraphId));
  GraphId *input_grads = NULL;
  bool ok = ctx.needs_grad && ctx.regenerable && ctx.regenerated && grad;
  if (!ok) graph_fail(g, "autodiff: out of memory");
  for (int i = 0; ok && i < count; i++) {
    const GraphNode *w = graph_node(g, wrt[i]);
    ok = w && graph_dtype_is_float(w->dtype);
    if (ok) ctx.needs_grad[wrt[i]] = true;
    else graph_fail(g, "autodiff: %d is not a float node to differentiate by", (int)wrt[i]);
  }
  if (ok) {
    for (GraphId id = 0; id < n; id++) {
      const GraphNode *node = graph_node(g, id);
      ctx.regenerable[id] = UNKNOWN;
      ctx.regenerated[id] = GRAPH_NONE;
      grad[id] = GRAPH_NONE;
      for (int i = 0; i < node->num_inputs && !ctx.needs_grad[id]; i++)
        ctx.needs_grad[id] = ctx.needs_grad[node->inputs[i]];
      if (!graph_dtype_is_float(node->dtype)) ctx.needs_grad[id] = false;
    }
    grad[loss] = graph_splat(g, loss_node->dtype, loss_node->shape, 1.0);
  }
  int capacity = 0;
  for (GraphId id = loss; ok && id >= 0; id--) {
    if (grad[id] == GRAPH_NONE || !ctx.needs_grad[id]) continue;
    GraphNode node = *graph_node(g, id); /* the array moves as nodes are added */
    if (node.num_inputs > capacity) {
      free(input_grads);
      capacity = node.num_inputs;
      input_grads = malloc((size_t)capacity * sizeof(GraphId));
      if (!input_grads) {
        ok = graph_fail(g, "autodiff: out of memory");
        break;
      }
    }
    for (int i = 0; i < node.num_inputs; i++) input_grads[i] = GRAPH_NONE;
    graph_set_scope_from(g, g, id); /* its gradient's nodes belong to its layer */
    vjps[node.op](&ctx, &node, id, grad[id], input_grads);
    for (int i = 0; i < node.num_inputs; i++)
      if (input_grads[i] != GRAPH_NONE && ctx.needs_grad[node.inputs[i]])
        accumulate(g, &grad[node.inputs[i]], input_grads[i]);
    ok = graph_error(g) == NULL;
  }
  graph_set_scope(g, NULL);
  for (int i = 0; ok && i < count; i++) {
    const GraphNode *w = graph_node(g, wrt[i]);
    grads[i] = grad[wrt[i]] != GRAPH_NONE ? grad[wrt[i]] : graph_splat(g, w->dtype, w->shape, 0.0);
  }
  free(ctx.needs_grad);
  free(ctx.regenerable);
  free(ctx.regenerated);
  free(grad);
  free(input_grads);
  return ok && graph_error(g) == NULL;
}
