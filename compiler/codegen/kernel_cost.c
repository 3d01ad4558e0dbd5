/* What a kernel costs, counted from the graph: floating-point operations
 * (a multiply-add is two; an elementwise op or a reduction step is one per
 * element; movement is free) and the bytes it moves (every argument buffer
 * once: its inputs read, its output written). Inlined nodes are counted once
 * per element even where fusion recomputes them, so these are nominal
 * figures: what the model needs, not what the code does. */
#include "kernel.h"

static int64_t node_flops(const Graph *g, const GraphNode *n) {
  switch (graph_op_kind(n->op)) {
  case GRAPH_KIND_ELEMENTWISE:
    return n->op == GRAPH_OP_CAST ? 0 : graph_shape_numel(&n->shape);
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
  return flops;
}

int64_t kernel_bytes(const KernelPlan *plan, int kernel) {
  const Kernel *k = &plan->kernels[kernel];
  int64_t bytes = 0;
  for (int i = 0; i < k->num_args; i++)
    bytes += plan->buffers[k->args[i]].bytes;
  return bytes;
}
