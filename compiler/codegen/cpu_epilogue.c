/* Epilogues of dots: an elementwise loop kernel that comes right after a
 * dot and reads the dot's output at its own element (a bias add, the scale
 * and mask of attention scores, a residual add, an activation) runs inside
 * the dot's range, chunk by chunk of rows: the GEMM computes a chunk of C's
 * rows and the epilogue reads them back while they are still in cache, instead
 * of a second pass over the whole of C after every thread has finished.
 *
 * (Chunks are large, see emit_fused, so in practice it is the same thread
 * reading its own rows right after the GEMM, in one dispatch instead of two.)
 * The plan is not changed: both kernels keep their functions, buffers and
 * order; P_run calls one fused range function (the dot's arguments, then the
 * epilogue's) in place of the two calls, under the dot's kernel index for
 * --profile. Each row of the epilogue reads only the same row of C, which the
 * same thread has just written, so the result is the unfused one bit for bit,
 * whatever the threads. */
#include <stdlib.h>

#include "cpu_internal.h"

static bool is_elementwise(GraphOp op) {
  switch (op) {
#define KIND_ELEMENTWISE true
#define KIND_REDUCE false
#define KIND_MOVEMENT false
#define KIND_CONTRACTION false
#define KIND_SOURCE false
#define OP(ID, name, arity, kind, shape_rule, vjp, reference) \
  case GRAPH_OP_##ID: return KIND_##kind;
#include "ops.def"
#undef OP
#undef KIND_ELEMENTWISE
#undef KIND_REDUCE
#undef KIND_MOVEMENT
#undef KIND_CONTRACTION
#undef KIND_SOURCE
  default: return false;
  }
}

static bool same_shape(const GraphShape *a, const GraphShape *b) {
  if (a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d])
      return false;
  return true;
}

/* Whether loop kernel `e` may run as the epilogue of dot kernel `d`: it
 * reads d's output only through elementwise nodes of its root's shape (so
 * at its own element), has d's rows as its rows, and writes no buffer that
 * d reads (another thread's GEMM may still read it). */
static bool fits(const CpuGen *gen, const Kernel *d, const Kernel *e) {
  const KernelPlan *plan = gen->plan;
  const Graph *g = gen->graph;
  const GraphNode *root = graph_node(g, e->root), *dot = graph_node(g, d->root);
  if (e->kind != KERNEL_LOOP || e->num_hoisted > 0 || e->rows != d->rows ||
      e->outer_axes != root->shape.rank - 1 || !same_shape(&root->shape, &dot->shape) ||
      cpu_dot_column_block(gen, d) < dot->shape.dims[dot->shape.rank - 1])
    return false;
  int out = d->args[0];
  for (int i = 1; i < d->num_args; i++)
    if (d->args[i] == e->args[0])
      return false;
  bool *reads = calloc((size_t)graph_count(g), sizeof *reads);
  if (!reads)
    return false;
  bool ok = true;
  for (int i = 0; i < e->num_nodes && ok; i++) {
    GraphId id = e->nodes[i];
    const GraphNode *n = graph_node(g, id);
    for (int j = 0; j < n->num_inputs; j++) {
      GraphId in = n->inputs[j];
      KernelPlacement p = plan->placement[in];
      bool buffer = p == KERNEL_LEAF || p == KERNEL_VIEW || p == KERNEL_ROOT;
      if (buffer && plan->buffer_of[in] == out) {
        reads[id] = true;
        ok = ok && same_shape(&graph_node(g, in)->shape, &root->shape);
      } else if (p == KERNEL_INLINED && reads[in]) {
        reads[id] = true;
      }
    }
    if (reads[id])
      ok = ok && is_elementwise(n->op) && same_shape(&n->shape, &root->shape);
  }
  ok = ok && reads[e->root];
  free(reads);
  return ok;
}

void cpu_plan_epilogues(CpuGen *gen) {
  const KernelPlan *plan = gen->plan;
  int count = plan->num_kernels;
  gen->epilogue_of = malloc(sizeof *gen->epilogue_of * (size_t)(count + 1));
  gen->fused = calloc((size_t)(count + 1), sizeof *gen->fused);
  if (!gen->epilogue_of || !gen->fused)
    abort(); /* out of memory while building LLVM IR */
  for (int i = 0; i < count; i++) {
    gen->epilogue_of[i] = -1;
    const Kernel *d = &plan->kernels[i];
    if (gen->separate_epilogues || gen->gpu_threads || gen->gpu_ptx || d->kind != KERNEL_DOT || i + 1 >= count ||
        !fits(gen, d, &plan->kernels[i + 1]))
      continue;
    gen->epilogue_of[i] = i + 1;
  }
}

/* void fused(void **args, i64 begin, i64 end): chunks of 2^20 elements of C
 * (4 MiB of f32, at least 48 rows), the GEMM's then the epilogue's. Each
 * chunk's GEMM packs B again: chunks of 64 KiB or 256 KiB of C, which would
 * stay in L2, made x@w + b at n = 1024 10-30% slower (bench/RESULTS.md),
 * and with this machine's 105 MiB L3 the unfused pass reads C from L3 anyway;
 * gpt-small's dots are then one chunk per thread. */
static LLVMValueRef emit_fused(CpuGen *gen, int kernel) {
  const KernelPlan *plan = gen->plan;
  const Kernel *d = &plan->kernels[kernel], *e = &plan->kernels[gen->epilogue_of[kernel]];
  for (int i = 0; i < kernel; i++)
    if (gen->fused[i] && plan->kernels[i].function == d->function &&
        plan->kernels[gen->epilogue_of[i]].function == e->function)
      return gen->fused[kernel] = gen->fused[i];
  LLVMBuilderRef b = gen->builder;
  const GraphNode *dot = graph_node(gen->graph, d->root);
  int64_t n = dot->shape.dims[dot->shape.rank - 1];
  int64_t chunk = ((int64_t)1 << 20) / (n > 0 ? n : 1);
  chunk = chunk < 48 ? 48 : chunk / 16 * 16;
  char name[128];
  snprintf(name, sizeof name, "%s_k%d_k%d_fused", gen->prefix, d->function, e->function);
  LLVMValueRef fn = LLVMAddFunction(gen->module, name, gen->range_fn);
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  const char *attributes[2] = {"noinline", "nounwind"};
  cpu_add_attributes(gen, fn, attributes, 2);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(gen->context, fn, "entry"));
  LLVMValueRef args = LLVMGetParam(fn, 0), begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
  LLVMValueRef slots = LLVMBuildBitCast(b, args, LLVMPointerType(gen->ptr, 0), "");
  LLVMValueRef rest = LLVMBuildBitCast(
      b, cpu_element(gen, gen->ptr, slots, cpu_i64(gen, d->num_args)), gen->ptr, "");
  LLVMValueRef count = LLVMBuildSub(b, end, begin, "");
  LLVMValueRef chunks = LLVMBuildUDiv(b, LLVMBuildAdd(b, count, cpu_i64(gen, chunk - 1), ""),
                                      cpu_i64(gen, chunk), "");
  CpuLoop c;
  cpu_loop_begin(gen, &c, cpu_i64(gen, 0), chunks);
  LLVMValueRef c0 = LLVMBuildAdd(b, begin, LLVMBuildMul(b, c.index, cpu_i64(gen, chunk), ""), "");
  LLVMValueRef c1 = LLVMBuildAdd(b, c0, cpu_i64(gen, chunk), "");
  c1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, c1, end, ""), c1, end, "");
  LLVMValueRef dot_call[3] = {args, c0, c1};
  LLVMBuildCall2(b, gen->range_fn, gen->functions[d->function], dot_call, 3, "");
  LLVMValueRef epilogue_call[3] = {rest, c0, c1};
  LLVMBuildCall2(b, gen->range_fn, gen->functions[e->function], epilogue_call, 3, "");
  cpu_loop_end(gen, &c);
  LLVMBuildRetVoid(b);
  return gen->fused[kernel] = fn;
}

void cpu_emit_epilogues(CpuGen *gen) {
  for (int i = 0; i < gen->plan->num_kernels; i++)
    if (gen->epilogue_of[i] >= 0)
      emit_fused(gen, i);
}
