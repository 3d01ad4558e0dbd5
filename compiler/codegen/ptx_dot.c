/* Contractions on the GPU: one thread per element of C. Neighbouring
 * threads take neighbouring columns j, so their reads of B (untransposed)
 * and their writes of C are coalesced; k runs ascending, as the evaluator
 * sums, so the result rounds as the CPU's does. */
#include "ptx.h"
#include "ptx_internal.h"

static LLVMValueRef mul(CpuGen *gen, LLVMValueRef a, int64_t c) {
  return LLVMBuildMul(gen->builder, a, cpu_i64(gen, c), "");
}

static LLVMValueRef add(CpuGen *gen, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildAdd(gen->builder, a, b, "");
}

static LLVMValueRef load(CpuGen *gen, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef i) {
  return LLVMBuildLoad2(gen->builder, t, cpu_element(gen, t, base, i), "");
}

void ptx_emit_dot_kernel(CpuGen *gen, int function, const Kernel *kernel) {
  LLVMBuilderRef b = gen->builder;
  const GraphNode *node = graph_node(gen->graph, kernel->root);
  const GraphShape *sa = &graph_node(gen->graph, node->inputs[0])->shape;
  const GraphShape *sb = &graph_node(gen->graph, node->inputs[1])->shape;
  int r = node->shape.rank;
  int64_t m = node->shape.dims[r - 2], n = node->shape.dims[r - 1];
  bool ta = node->attrs.transpose_a, tb = node->attrs.transpose_b;
  int64_t k = sa->dims[sa->rank - (ta ? 2 : 1)];
  LLVMTypeRef t = cpu_type(gen, node->dtype);
  LLVMValueRef fn = cpu_kernel_function(gen, function);
  LLVMValueRef args = LLVMGetParam(fn, 0);
  LLVMValueRef c = cpu_kernel_arg(gen, args, 0, t);
  /* Arguments are distinct buffers: a dot of x with itself has one input. */
  LLVMValueRef a = cpu_kernel_arg(gen, args, 1, t);
  LLVMValueRef bm = cpu_kernel_arg(gen, args, kernel->num_args > 2 ? 2 : 1, t);
  CpuLoop item, p;
  cpu_loop_begin(gen, &item, LLVMGetParam(fn, 1), LLVMGetParam(fn, 2));
  LLVMValueRef row = LLVMBuildUDiv(b, item.index, cpu_i64(gen, n), "");
  LLVMValueRef j = LLVMBuildURem(b, item.index, cpu_i64(gen, n), "");
  LLVMValueRef batch = LLVMBuildUDiv(b, row, cpu_i64(gen, m), "");
  LLVMValueRef i = LLVMBuildURem(b, row, cpu_i64(gen, m), "");
  LLVMValueRef a_base = sa->rank > 2 ? mul(gen, batch, m * k) : cpu_i64(gen, 0);
  LLVMValueRef b_base = sb->rank > 2 ? mul(gen, batch, k * n) : cpu_i64(gen, 0);
  LLVMValueRef acc = cpu_entry_alloca(gen, t, "acc");
  LLVMBuildStore(b, LLVMConstReal(t, 0.0), acc);
  cpu_loop_begin(gen, &p, cpu_i64(gen, 0), cpu_i64(gen, k));
  LLVMValueRef ai = ta ? add(gen, a_base, add(gen, mul(gen, p.index, m), i))
                       : add(gen, a_base, add(gen, mul(gen, i, k), p.index));
  LLVMValueRef bi = tb ? add(gen, b_base, add(gen, mul(gen, j, k), p.index))
                       : add(gen, b_base, add(gen, mul(gen, p.index, n), j));
  LLVMValueRef prod = LLVMBuildFMul(b, load(gen, t, a, ai), load(gen, t, bm, bi), "");
  LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, t, acc, ""), prod, ""), acc);
  cpu_loop_end(gen, &p);
  LLVMBuildStore(b, LLVMBuildLoad2(b, t, acc, ""), cpu_element(gen, t, c, item.index));
  cpu_loop_end(gen, &item);
  LLVMBuildRetVoid(b);
}

/* The layout ptx_emit_dot_kernel reads, as strides: C's batches are
 * contiguous; an operand of rank 2 is shared by every batch (stride 0). */
bool ptx_dot_on_cublas(const KernelPlan *plan, int kernel, int64_t desc[PTX_GEMM_FIELDS]) {
  const Kernel *kr = &plan->kernels[kernel];
  if (kr->kind != KERNEL_DOT)
    return false;
  const GraphNode *node = graph_node(plan->graph, kr->root);
  if (kernel_storage_dtype(node->dtype) != GRAPH_F32)
    return false;
  const GraphShape *sa = &graph_node(plan->graph, node->inputs[0])->shape;
  const GraphShape *sb = &graph_node(plan->graph, node->inputs[1])->shape;
  int r = node->shape.rank;
  int64_t m = node->shape.dims[r - 2], n = node->shape.dims[r - 1];
  bool ta = node->attrs.transpose_a;
  int64_t k = sa->dims[sa->rank - (ta ? 2 : 1)];
  int64_t batch = m * n > 0 ? graph_shape_numel(&node->shape) / (m * n) : 0;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX)
    return false;
  desc[PTX_GEMM_TRANSA] = ta;
  desc[PTX_GEMM_TRANSB] = node->attrs.transpose_b;
  desc[PTX_GEMM_M] = m;
  desc[PTX_GEMM_N] = n;
  desc[PTX_GEMM_K] = k;
  desc[PTX_GEMM_BATCH] = batch;
  desc[PTX_GEMM_STRIDE_A] = sa->rank > 2 ? m * k : 0;
  desc[PTX_GEMM_STRIDE_B] = sb->rank > 2 ? k * n : 0;
  desc[PTX_GEMM_STRIDE_C] = m * n;
  return true;
}
