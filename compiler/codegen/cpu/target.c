/* The CPU target: which emitter makes each kernel of a host CPU module,
 * the range each runs over on the thread pool, and the plan options its
 * kernels are formed with. */
#include "cpu_internal.h"

static void emit_kernel(Gen *gen, int function, const Kernel *kernel) {
  switch (kernel->kind) {
  case KERNEL_DOT: cpu_emit_dot_kernel(gen, function, kernel); break;
  case KERNEL_SCATTER: emit_scatter_kernel(gen, function, kernel, 0); break;
  case KERNEL_ATTENTION: cpu_emit_attention_kernel(gen, function, kernel); break;
  default: emit_loop_kernel(gen, function, kernel); break;
  }
}

/* A dot's range may split its columns too (dot.c). */
static int64_t range_items(const Gen *gen, const Kernel *kernel) {
  return kernel->kind == KERNEL_DOT ? cpu_dot_items(gen, kernel) : kernel->rows;
}

const Target cpu_target = {.name = "cpu",
                           .emit_kernel = emit_kernel,
                           .emit_entry = emit_pool_entry,
                           .range_items = range_items,
                           .inline_f32_math = true,
                           .lane_reductions = true,
                           .noalias_body = true};

/* Merged attention backward from 16 (batch, head) pairs, so that up to 16
 * threads have whole pairs to share (a pair is the unit of work; fewer
 * pairs keep the kernels that split rows), column sums split, update
 * values merged and row statistics stored where computed. */
KernelPlanOptions cpu_plan_options(void) {
  return (KernelPlanOptions){.merge_attention_backward_from = 16,
                             .split_column_sums = true,
                             .merge_update_values = true,
                             .store_row_statistics = true};
}
