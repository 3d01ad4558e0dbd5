/* Constant folding: a node whose inputs are all constants becomes a
 * constant, computed by the reference implementation in the node's own
 * precision (f32 nodes round as f32). */
#include <stdlib.h>

#include "eval.h"
#include "pass.h"
#include "rewrite.h"

/* Larger non-splat results stay as computations: a literal of that size
 * would bloat the graph and its text form. */
#define FOLD_MAX_ELEMENTS 1024

static GraphDtype native_storage(GraphDtype dtype) {
  return eval_storage_dtype(dtype, dtype == GRAPH_F64 ? GRAPH_F64 : GRAPH_F32);
}

static bool is_foldable_op(GraphOp op) {
  return graph_op_kind(op) != GRAPH_KIND_SOURCE;
}

/* Ops for which splat inputs give a splat result worth one element of work. */
static bool keeps_splats(GraphOp op) {
  return graph_op_kind(op) == GRAPH_KIND_ELEMENTWISE || op == GRAPH_OP_RESHAPE ||
         op == GRAPH_OP_BROADCAST || op == GRAPH_OP_PERMUTE || op == GRAPH_OP_SLICE;
}

static bool all_same(const EvalTensor *t) {
  for (int64_t i = 1; i < t->numel; i++)
    if (eval_tensor_get(t, i) != eval_tensor_get(t, 0)) return false;
  return true;
}

/* Evaluates `node` (of the input graph) on its constant inputs (nodes of
 * out); returns the new constant or GRAPH_NONE when it is not folded. */
static GraphId fold_node(Graph *out, const GraphNode *node, const GraphId *inputs) {
  bool splats = keeps_splats(node->op);
  int64_t largest = graph_shape_numel(&node->shape);
  for (int i = 0; i < node->num_inputs; i++) {
    const GraphNode *x = graph_node(out, inputs[i]);
    if (x->op != GRAPH_OP_CONSTANT) return GRAPH_NONE;
    splats = splats && x->attrs.num_values == 1;
    if (graph_shape_numel(&x->shape) > largest) largest = graph_shape_numel(&x->shape);
  }
  if (!splats && largest > FOLD_MAX_ELEMENTS) return GRAPH_NONE;

  /* Splat inputs are evaluated as one element each. */
  GraphShape one = graph_shape_scalar();
  EvalTensor *ins = calloc((size_t)node->num_inputs, sizeof(EvalTensor));
  EvalTensor result = {0};
  bool ok = ins != NULL;
  for (int i = 0; ok && i < node->num_inputs; i++) {
    const GraphNode *x = graph_node(out, inputs[i]);
    ok = eval_tensor_alloc(&ins[i], native_storage(x->dtype), splats ? &one : &x->shape);
    if (ok) eval_node(x, NULL, &ins[i]);
  }
  GraphId folded = GRAPH_NONE;
  if (ok && splats && graph_op_kind(node->op) != GRAPH_KIND_ELEMENTWISE) {
    /* Movement of a splat is the same splat. */
    double value = eval_tensor_get(&ins[0], 0);
    folded = graph_splat(out, node->dtype, node->shape, value);
  } else if (ok && eval_tensor_alloc(&result, native_storage(node->dtype),
                                     splats ? &one : &node->shape)) {
    eval_node(node, ins, &result);
    if (all_same(&result)) {
      folded = graph_splat(out, node->dtype, node->shape, eval_tensor_get(&result, 0));
    } else {
      double *values = malloc((size_t)result.numel * sizeof(double));
      if (values) {
        for (int64_t i = 0; i < result.numel; i++) values[i] = eval_tensor_get(&result, i);
        folded = graph_constant(out, node->dtype, node->shape, values, result.numel);
        free(values);
      }
    }
  }
  eval_tensor_release(&result);
  for (int i = 0; ins && i < node->num_inputs; i++) eval_tensor_release(&ins[i]);
  free(ins);
  return folded;
}

Graph *pass_fold(const Graph *in, char *err, size_t err_size) {
  PassRewrite r;
  if (!pass_rewrite_begin(&r, in, err, err_size)) return NULL;
  for (GraphId id = 0; id < graph_count(in); id++) {
    const GraphNode *node = graph_node(in, id);
    GraphId folded = GRAPH_NONE;
    if (is_foldable_op(node->op))
      folded = fold_node(r.out, node, pass_rewrite_inputs(&r, id));
    r.map[id] = folded != GRAPH_NONE ? folded : pass_rewrite_copy(&r, id);
  }
  return pass_rewrite_finish(&r, err, err_size);
}
