/* The text listing of a plan (tfmc emit kernels). */
#include "kernel.h"

const char *kernel_kind_name(KernelKind kind) {
  switch (kind) {
  case KERNEL_DOT: return "dot";
  case KERNEL_SCATTER: return "scatter";
  case KERNEL_ATTENTION: return "attention";
  default: return "loop";
  }
}

void kernel_plan_print(const KernelPlan *plan, FILE *out) {
  const Graph *g = plan->graph;
  int64_t flops = 0;
  for (int ki = 0; ki < plan->num_kernels; ki++)
    flops += kernel_flops(plan, ki);
  fprintf(out, "# %d kernels, %d functions, %lld persistent + %lld scratch bytes, %lld flops\n",
          plan->num_kernels, plan->num_functions, (long long)plan->persistent_bytes,
          (long long)plan->scratch_bytes, (long long)flops);
  for (int ki = 0; ki < plan->num_kernels; ki++) {
    const Kernel *k = &plan->kernels[ki];
    fprintf(out, "kernel %d fn %d %s rows=%lld outer=%d flops=%lld bytes=%lld:", ki, k->function,
            kernel_kind_name(k->kind), (long long)k->rows, k->outer_axes,
            (long long)kernel_flops(plan, ki), (long long)kernel_bytes(plan, ki));
    for (int i = 0; i < k->num_nodes; i++)
      fprintf(out, " %s%s%%%d", kernel_is_hoisted(k, k->nodes[i]) ? "^" : "",
              graph_op_name(graph_node(g, k->nodes[i])->op), k->nodes[i]);
    GraphId outputs[3];
    int first_in = kernel_outputs(k, outputs);
    fprintf(out, " | out b%d", k->args[0]);
    for (int o = 1; o < first_in; o++)
      fprintf(out, " + %s%%%d b%d", graph_op_name(graph_node(g, outputs[o])->op), outputs[o],
              k->args[o]);
    fprintf(out, " in");
    for (int i = first_in; i < k->num_args; i++)
      fprintf(out, " b%d", k->args[i]);
    fputc('\n', out);
  }
  for (int i = 0; i < plan->num_buffers; i++) {
    const KernelBuffer *b = &plan->buffers[i];
    char type[160];
    const GraphNode *n = graph_node(g, b->node);
    graph_format_type(type, sizeof type, n->dtype, &n->shape);
    fprintf(out, "buffer b%d %%%d %s %s+%lld kernels %d..%d\n", i, b->node, type,
            b->region == KERNEL_PERSISTENT ? "persistent" : "scratch", (long long)b->offset,
            b->first_kernel, b->last_kernel);
  }
}
