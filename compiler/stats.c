/* tfmc stats: the graphs' planned cost. The plan is the one tfmc build
 * compiles, so the memory figures are exactly what the binary allocates. */
#include "stats.h"

#include <stdio.h>

#include "cpu.h"
#include "diag.h"
#include "kernel.h"
#include "lower.h"
#include "lower_model.h"
#include "pass.h"

static double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

static int print_graph(const char *name, Graph *lowered) {
  char err[256];
  Graph *optimised = pass_standard(lowered, err, sizeof err);
  graph_free(lowered);
  KernelPlanOptions plan_options = cpu_plan_options(); /* tfmc build's default target */
  Graph *g = optimised ? kernel_prepare(optimised, &plan_options, NULL, err, sizeof err) : NULL;
  graph_free(optimised);
  KernelPlan *plan = g ? kernel_plan_build(g, &plan_options, err, sizeof err) : NULL;
  if (!plan) {
    diag_error_noloc("internal error: planning the %s graph: %s", name, err);
    graph_free(g);
    return 1;
  }
  int64_t contraction = 0, other = 0;
  for (int k = 0; k < plan->num_kernels; k++) {
    int64_t flops = kernel_flops(plan, k);
    if (plan->kernels[k].kind == KERNEL_DOT || plan->kernels[k].kind == KERNEL_ATTENTION)
      contraction += flops;
    else other += flops;
  }
  printf("%-8s %7d %8d %10d %12.3f %10.3f %12.1f %10.1f %10.1f\n", name, graph_count(g),
         plan->num_kernels, plan->num_functions, (double)contraction * 1e-9, (double)other * 1e-9,
         mib(plan->persistent_bytes), mib(plan->scratch_bytes),
         mib(plan->persistent_bytes + plan->scratch_bytes));
  kernel_plan_free(plan);
  graph_free(g);
  return 0;
}

int stats_print_graphs(const FrontOptions *opt) {
  FrontOptions forward_options = *opt;
  forward_options.training = 0;
  CheckedModel *m;
  Graph *forward = lower_model(&forward_options, 0, &m);
  if (!forward) return 1;
  printf("\nper step (GFLOP: contractions, other ops; memory in MiB as planned)\n");
  printf("%-8s %7s %8s %10s %12s %10s %12s %10s %10s\n", "graph", "nodes", "kernels",
         "functions", "GFLOP dot", "GFLOP rest", "persistent", "scratch", "peak");
  int status = print_graph("forward", forward);
  if (!status && m->train.present) {
    CheckedModel *tm;
    Graph *train = lower_model(opt, 1, &tm);
    status = train ? print_graph("train", train) : 1;
  }
  return status;
}
