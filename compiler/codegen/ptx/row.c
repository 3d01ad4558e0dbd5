/* Row reductions on the GPU as cooperative rows (ptx_row.h): which loop
 * kernels share their rows among threads, and the combining of the
 * threads' partial accumulators through warp shuffles
 * (llvm.nvvm.shfl.sync.bfly) and, across the warps of a block, shared
 * memory. The loops themselves are the shared loop emitter (llvm/) in its
 * split mode (llvm/loop_rows.c), so the fused elementwise prologue (the
 * reduction's input) and epilogue (the row's elementwise use of its
 * statistics) stay one kernel. */
#include <stdio.h>

#include "ptx.h"
#include "ptx_internal.h"
#include "ptx_row.h"

/* A row of a block-wide split is one launch block (whole blocks, so every
 * thread of it reaches the barrier). */
_Static_assert(PTX_ROW_BLOCK_THREADS == PTX_BLOCK_THREADS, "a block-wide row is a launch block");
_Static_assert(PTX_BLOCK_THREADS % PTX_WARP == 0, "launch blocks are whole warps");

static bool is_reduce(GraphOp op) { return op == GRAPH_OP_REDUCE_SUM || op == GRAPH_OP_REDUCE_MAX; }

/* Elements of the reduced axes of reduction `id`. */
static int64_t reduced_length(const Graph *g, GraphId id) {
  const GraphNode *n = graph_node(g, id), *x = graph_node(g, n->inputs[0]);
  int64_t length = 1;
  for (int d = 0; d < x->shape.rank; d++)
    if (n->attrs.axes & (1u << d))
      length *= x->shape.dims[d];
  return length;
}

/* Loop kernels with hoisted reductions (a softmax or layernorm row) and
 * root reductions over their input's last axis share their rows. A root
 * reduction over leading axes only (a bias's gradient: [2048, 256] to
 * [256]) shares its output elements too when they alone are too few
 * threads to fill the GPU: one thread an element summed 2048 rows serially
 * on 256 threads, 0.4 to 0.8 ms a kernel on an H200, the slowest loops of
 * gpt-small's step. Its threads then read elements a row apart, which the
 * L2 cache serves; with many outputs, one thread an element keeps
 * neighbouring threads on neighbouring columns (coalesced). */
int64_t ptx_row_split_threads(const KernelPlan *plan, int kernel) {
  const Kernel *k = &plan->kernels[kernel];
  if (k->kind != KERNEL_LOOP)
    return 0;
  const GraphNode *root = graph_node(plan->graph, k->root);
  int64_t length = 0;
  if (k->num_hoisted > 0) {
    for (int i = 0; i < k->num_hoisted; i++) {
      int64_t n = reduced_length(plan->graph, k->hoisted[i].node);
      length = n > length ? n : length;
    }
    int64_t inner = 1;
    for (int d = k->outer_axes; d < root->shape.rank; d++)
      inner *= root->shape.dims[d];
    if (is_reduce(root->op) && inner == 1)
      inner = reduced_length(plan->graph, k->root);
    length = inner > length ? inner : length;
  } else {
    if (!is_reduce(root->op))
      return 0;
    const GraphNode *x = graph_node(plan->graph, root->inputs[0]);
    if (x->shape.rank == 0)
      return 0;
    length = reduced_length(plan->graph, k->root);
    bool over_last = (root->attrs.axes >> (x->shape.rank - 1)) & 1u;
    if (!over_last && (graph_shape_numel(&root->shape) >= PTX_FILL_THREADS || length < PTX_WARP))
      return 0;
  }
  return ptx_row_threads(length);
}

KernelPlanOptions ptx_plan_options(void) {
  return (KernelPlanOptions){.long_reduction_chunk = PTX_ROW_CHUNK,
                             .long_reduction_rows = PTX_LONG_ROWS_MAX,
                             .max_hoisted = PTX_MAX_HOISTED};
}

int64_t ptx_scatter_block_rows(const GraphNode *scatter) {
  int64_t cells = graph_shape_numel(&scatter->shape);
  return cells > PTX_FILL_THREADS ? (cells + PTX_FILL_THREADS - 1) / PTX_FILL_THREADS : 1;
}

int64_t ptx_row_sharing(const KernelPlan *plan, int kernel) {
  return plan->kernels[kernel].kind == KERNEL_ATTENTION ? PTX_WARP
                                                        : ptx_row_split_threads(plan, kernel);
}

static LLVMValueRef i32(Gen *gen, int64_t v) { return gen_i32(gen, (int32_t)v); }

/* shfl.sync.bfly over the whole warp (mask ~0, clamp 31): lane ^ offset's
 * value. An f64 goes as its two 32-bit halves. */
static LLVMValueRef shuffle(Gen *gen, LLVMValueRef v, int offset) {
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef t = LLVMTypeOf(v);
  if (t == gen->f64) {
    LLVMValueRef bits = LLVMBuildBitCast(b, v, gen->i64, "");
    LLVMValueRef lo = LLVMBuildTrunc(b, bits, gen->i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(b, LLVMBuildLShr(b, bits, gen_i64(gen, 32), ""), gen->i32, "");
    lo = LLVMBuildZExt(b, shuffle(gen, lo, offset), gen->i64, "");
    hi = LLVMBuildZExt(b, shuffle(gen, hi, offset), gen->i64, "");
    bits = LLVMBuildOr(b, LLVMBuildShl(b, hi, gen_i64(gen, 32), ""), lo, "");
    return LLVMBuildBitCast(b, bits, gen->f64, "");
  }
  LLVMValueRef args[4] = {i32(gen, -1), v, i32(gen, offset), i32(gen, PTX_WARP - 1)};
  return gen_intrinsic(gen, t == gen->f32 ? "llvm.nvvm.shfl.sync.bfly.f32"
                                          : "llvm.nvvm.shfl.sync.bfly.i32",
                       NULL, 0, args, 4);
}

/* The block's slots for reduction `slot` of plan function `function`: one
 * value a warp. Each is written once a block (a block-wide split has one
 * row a block), so one barrier between the writes and the reads does. */
static LLVMValueRef shared_slots(Gen *gen, int function, int slot, LLVMTypeRef t,
                                 int64_t warps) {
  char name[64];
  snprintf(name, sizeof name, "row%d_%d", function, slot);
  return ptx_shared_array(gen, name, t, warps, 8);
}

/* The butterfly inside a warp (ptx_row_offset, ptx_row_lower: every pair
 * combined as (lower lane, upper lane), so both lanes agree bit for bit):
 * `reduce`'s step, or a sum where it is NULL. */
static LLVMValueRef butterfly(Gen *gen, LLVMValueRef v, LLVMValueRef lane,
                              const GraphNode *reduce) {
  LLVMBuilderRef b = gen->builder;
  for (int i = 0; i < PTX_ROW_SHUFFLES; i++) {
    int offset = ptx_row_offset(i);
    LLVMValueRef other = shuffle(gen, v, offset);
    LLVMValueRef lower = LLVMBuildICmp(
        b, LLVMIntEQ, LLVMBuildAnd(b, lane, gen_i64(gen, offset), ""), gen_i64(gen, 0), "");
    LLVMValueRef left = LLVMBuildSelect(b, lower, v, other, "");
    LLVMValueRef right = LLVMBuildSelect(b, lower, other, v, "");
    v = reduce ? emit_reduction_step(gen, reduce, left, right) : LLVMBuildFAdd(b, left, right, "");
  }
  return v;
}

/* RowSplit.combine: the butterfly inside each warp, then across a
 * block's warps in warp order. */
static LLVMValueRef combine(Gen *gen, int function, int slot, const GraphNode *reduce,
                            LLVMValueRef v, LLVMValueRef tid, int64_t threads) {
  LLVMBuilderRef b = gen->builder;
  LLVMValueRef lane = LLVMBuildURem(b, tid, gen_i64(gen, PTX_WARP), "lane");
  v = butterfly(gen, v, lane, reduce);
  int64_t warps = ptx_row_warps(threads);
  if (warps == 1)
    return v;
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMValueRef slots = shared_slots(gen, function, slot, t, warps);
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
  LLVMBasicBlockRef write = LLVMAppendBasicBlockInContext(gen->context, fn, "warp_value");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, fn, "warp_written");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, lane, gen_i64(gen, 0), ""), write, next);
  LLVMPositionBuilderAtEnd(b, write);
  LLVMBuildStore(b, v, ptx_shared_element(gen, slots, LLVMBuildUDiv(b, tid, gen_i64(gen, PTX_WARP), "")));
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
  gen_intrinsic(gen, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
  LLVMValueRef acc = LLVMBuildLoad2(b, t, ptx_shared_element(gen, slots, gen_i64(gen, 0)), "");
  for (int64_t w = 1; w < warps; w++)
    acc = emit_reduction_step(gen, reduce, acc,
                             LLVMBuildLoad2(b, t, ptx_shared_element(gen, slots, gen_i64(gen, w)), ""));
  return acc;
}

/* RowLanes.sum for an attention row's warp. */
static LLVMValueRef warp_sum(Gen *gen, LLVMValueRef v, LLVMValueRef lane) {
  return butterfly(gen, v, lane, NULL);
}

void ptx_emit_attention_kernel(Gen *gen, int function, const Kernel *kernel) {
  emit_attention_kernel(gen, function, kernel, &(RowLanes){.lanes = PTX_WARP, .sum = warp_sum});
}

void ptx_emit_row_kernel(Gen *gen, int function, const Kernel *kernel, int64_t threads) {
  RowSplit split = {.threads = threads, .combine = combine};
  emit_split_loop_kernel(gen, function, kernel, &split);
}
