/* What a kernel costs, counted from the graph: floating-point operations
 * (a multiply-add is two; an elementwise op or a reduction step is one per
 * element; movement is free) and the bytes it moves (every argument buffer
 * once: its inputs read, its output written). Inlined nodes are counted once
 * per element even where fusion recomputes them, so these are nominal
 * figures: what the model needs, not what the code does. */
#include "kernel.h"
#include "kernel_internal.h"

int kernel_op_cost(GraphOp op) {
  switch (graph_op_kind(op)) {
  case GRAPH_KIND_MOVEMENT: return 0;
  case GRAPH_KIND_ELEMENTWISE: break;
  default: return KERNEL_COST_NOT_ELEMENTWISE;
  }
  switch (op) {
  case GRAPH_OP_STOP_GRADIENT: return 0;
  case GRAPH_OP_DIV:
  case GRAPH_OP_RECIP:
  case GRAPH_OP_SQRT:
  case GRAPH_OP_RSQRT: return 4;
  case GRAPH_OP_EXP:
  case GRAPH_OP_LOG:
  case GRAPH_OP_TANH:
  case GRAPH_OP_SIN:
  case GRAPH_OP_COS:
  case GRAPH_OP_ERF:
  case GRAPH_OP_POW: return KERNEL_COST_TRANSCENDENTAL;
  default: return 1;
  }
}

/* Attention ops count the products the model needs, per (query i, key j)
 * of the dense T x S (causal rows need about half): the forward q.k and
 * p v (2 D + 2 Dv); backward dP = do v^T and dS k in grad_q (2 Dv + 2 D),
 * dS^T q in grad_k (2 D), P^T do in grad_v (2 Dv), twice the forward as for
 * a dot. Recomputing the scores (attention_lse and each backward op) is
 * not counted, as recomputed inlined nodes are not. */
static int64_t attention_flops(const Graph *g, const GraphNode *n) {
  const GraphShape *q = &graph_node(g, n->inputs[0])->shape;
  const GraphShape *k = &graph_node(g, n->inputs[1])->shape;
  int r = q->rank;
  int64_t pairs = graph_shape_numel(q) / q->dims[r - 1] * k->dims[r - 2];
  int64_t d = q->dims[r - 1];
  int64_t dv = n->op == GRAPH_OP_ATTENTION_LSE ? 0 : graph_node(g, n->inputs[2])->shape.dims[r - 1];
  switch (n->op) {
  case GRAPH_OP_ATTENTION:
  case GRAPH_OP_ATTENTION_GRAD_Q: return pairs * (2 * d + 2 * dv);
  case GRAPH_OP_ATTENTION_GRAD_K: return pairs * 2 * d;
  case GRAPH_OP_ATTENTION_GRAD_V: return pairs * 2 * dv;
  default: return 0;
  }
}

static int64_t node_flops(const Graph *g, const GraphNode *n) {
  if (kernel_op_is_attention(n->op))
    return attention_flops(g, n);
  switch (graph_op_kind(n->op)) {
  case GRAPH_KIND_ELEMENTWISE:
    return n->op == GRAPH_OP_CAST || n->op == GRAPH_OP_STOP_GRADIENT ? 0
                                                                     : graph_shape_numel(&n->shape);
  case GRAPH_KIND_REDUCE:
    return graph_shape_numel(&graph_node(g, n->inputs[0])->shape);
  case GRAPH_KIND_CONTRACTION: {
    const GraphShape *a = &graph_node(g, n->inputs[0])->shape;
    int64_t k = a->dims[a->rank - (n->attrs.transpose_a ? 2 : 1)];
    return 2 * graph_shape_numel(&n->shape) * k;
  }
  default:
    return 0;
  }
}

int64_t kernel_flops(const KernelPlan *plan, int kernel) {
  const Kernel *k = &plan->kernels[kernel];
  int64_t flops = 0;
  for (int i = 0; i < k->num_nodes; i++)
    flops += node_flops(plan->graph, graph_node(plan->graph, k->nodes[i]));
  /* An attention kernel's other outputs are not among its nodes (a loop
   * kernel's are, and are counted above). */
  GraphId out[3];
  for (int o = 1, count = kernel_outputs(k, out); k->kind == KERNEL_ATTENTION && o < count; o++)
    flops += node_flops(plan->graph, graph_node(plan->graph, out[o]));
  return flops;
}

int64_t kernel_bytes(const KernelPlan *plan, int kernel) {
  const Kernel *k = &plan->kernels[kernel];
  int64_t bytes = 0;
  for (int i = 0; i < k->num_args; i++)
    bytes += plan->buffers[k->args[i]].bytes;
  return bytes;
}
