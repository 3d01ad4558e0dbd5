/* ptx_serial_target: the GPU's thread plan (ptx_thread_plan) compiled for
 * the host CPU, so that the codegen suites test the GPU's kernels without
 * a GPU (TFM_CG_TARGET=gpu-plan). Each GPU thread's work runs as one item
 * of the thread pool's range, in the order that thread follows: dots one
 * element of C an item (the CPU cannot run the tiled kernel's barriers and
 * mma; gpu.dot_tile_model checks that kernel), scatters in the GPU's
 * blocks of rows, cooperative rows as those rows with one thread each, and
 * every reduction in serial order. */
#include "ptx_internal.h"
#include "ptx_row.h"

/* One thread a row: its partial is the row's value. */
static LLVMValueRef alone(Gen *gen, int function, int slot, const GraphNode *reduce,
                          LLVMValueRef v, LLVMValueRef tid, int64_t threads) {
  (void)gen, (void)function, (void)slot, (void)reduce, (void)tid, (void)threads;
  return v;
}

static void emit_kernel(Gen *gen, int function, const Kernel *kernel) {
  const GraphNode *root = graph_node(gen->graph, kernel->root);
  if (kernel->kind == KERNEL_DOT) {
    ptx_emit_dot_elements(gen, function, kernel);
  } else if (kernel->kind == KERNEL_SCATTER) {
    emit_scatter_kernel(gen, function, kernel, ptx_scatter_block_rows(root));
  } else if (kernel->kind == KERNEL_ATTENTION) {
    emit_attention_kernel(gen, function, kernel, NULL);
  } else if (ptx_row_split_threads(gen->plan, gen->plan->function_kernel[function]) > 0) {
    RowSplit split = {.threads = 1, .over_range = true, .combine = alone};
    emit_split_loop_kernel(gen, function, kernel, &split);
  } else {
    emit_loop_kernel(gen, function, kernel);
  }
}

static int64_t range_items(const Gen *gen, const Kernel *kernel) {
  (void)gen;
  return kernel->rows;
}

const Target ptx_serial_target = {.name = "cuda threads on the cpu",
                                  .emit_kernel = emit_kernel,
                                  .emit_entry = emit_pool_entry,
                                  .range_items = range_items,
                                  .inline_f32_math = false,
                                  .lane_reductions = false,
                                  .noalias_body = true};
