/* scatter_add kernels: each column of the [V, D] result sums the updates
 * whose index falls on its rows, in index order, over the result's columns
 * (the CPU) or over blocks of rows and columns (the GPU's threads). */
#include "gen.h"

/* What both forms of scatter_add read: the [V, D] result, the updates and
 * the indices (args are distinct buffers: updates that are the indices'
 * own buffer make two arguments). */
typedef struct Scatter {
  int64_t rows, width, count; /* V, D, and the number of indices */
  LLVMTypeRef t;
  LLVMValueRef out, updates, index;
} Scatter;

static Scatter scatter_operands(Gen *gen, const Kernel *kernel, LLVMValueRef fn) {
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  Scatter s = {.rows = n->shape.dims[0], .width = n->shape.dims[1],
               .count = graph_shape_numel(&graph_node(gen->graph, n->inputs[1])->shape),
               .t = gen_type(gen, n->dtype)};
  LLVMValueRef args = LLVMGetParam(fn, 0);
  s.out = gen_kernel_arg(gen, args, 0, s.t);
  s.updates = gen_kernel_arg(gen, args, 1, s.t);
  s.index = gen_kernel_arg(gen, args, kernel->num_args > 2 ? 2 : 1, gen->i32);
  return s;
}

static LLVMValueRef scatter_add_to(Gen *gen, const Scatter *s, LLVMValueRef acc, LLVMValueRef x) {
  return s->t != gen->i32 ? LLVMBuildFAdd(gen->builder, acc, x, "")
                          : LLVMBuildAdd(gen->builder, acc, x, "");
}

static LLVMValueRef scatter_zero(Gen *gen, const Scatter *s) {
  return s->t != gen->i32 ? LLVMConstReal(s->t, 0.0) : gen_i32(gen, 0);
}

/* The range is over columns of the [V, D] result, so threads never write
 * the same element and each element sums its updates in index order. */
static void scatter_by_column(Gen *gen, const Kernel *kernel, LLVMValueRef fn) {
  LLVMBuilderRef b = gen->builder;
  Scatter s = scatter_operands(gen, kernel, fn);
  LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
  GenLoop v, j, u;
  gen_loop_begin(gen, &v, gen_i64(gen, 0), gen_i64(gen, s.rows));
  gen_loop_begin(gen, &j, begin, end);
  LLVMBuildStore(b, scatter_zero(gen, &s),
                 gen_element(gen, s.t, s.out, gen_iadd(gen, gen_imul(gen, v.index, s.width), j.index)));
  gen_loop_end(gen, &j);
  gen_loop_end(gen, &v);
  gen_loop_begin(gen, &u, gen_i64(gen, 0), gen_i64(gen, s.count));
  LLVMValueRef row = LLVMBuildSExt(b, gen_load_at(gen, gen->i32, s.index, u.index), gen->i64, "");
  LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, row, gen_i64(gen, 0), ""),
                                 LLVMBuildICmp(b, LLVMIntSLT, row, gen_i64(gen, s.rows), ""), "");
  LLVMBasicBlockRef add_row = LLVMAppendBasicBlockInContext(gen->context, fn, "add_row");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, fn, "next");
  LLVMBuildCondBr(b, ok, add_row, next);
  LLVMPositionBuilderAtEnd(b, add_row);
  gen_loop_begin(gen, &j, begin, end);
  LLVMValueRef to = gen_element(gen, s.t, s.out, gen_iadd(gen, gen_imul(gen, row, s.width), j.index));
  LLVMValueRef x = gen_load_at(gen, s.t, s.updates, gen_iadd(gen, gen_imul(gen, u.index, s.width), j.index));
  LLVMBuildStore(b, scatter_add_to(gen, &s, LLVMBuildLoad2(b, s.t, to, ""), x), to);
  gen_loop_end(gen, &j);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
  gen_loop_end(gen, &u);
}

/* The range is over (row block, column) pairs of the [V, D] result, the
 * column fastest: item i takes column j = i mod D of rows [b R, b R + R),
 * b = i div D, zeroes them and adds, in index order, each update whose
 * index falls there, as scatter_by_column adds them (the same bits). For
 * the GPU, where one thread a column left gpt-small's embedding gradient
 * 256 threads (0.5 ms on an H200); R is chosen so that the pairs fill it
 * (ptx_scatter_block_rows), and each index read is one address across a
 * warp. R = 1 is one thread an element; it rescans all N indices per
 * element, V D N reads, too many for a 37000-word vocabulary. */
static void scatter_by_block(Gen *gen, const Kernel *kernel, LLVMValueRef fn, int64_t rows) {
  LLVMBuilderRef b = gen->builder;
  Scatter s = scatter_operands(gen, kernel, fn);
  GenLoop e, v, u;
  gen_loop_begin(gen, &e, LLVMGetParam(fn, 1), LLVMGetParam(fn, 2));
  LLVMValueRef j = LLVMBuildURem(b, e.index, gen_i64(gen, s.width), "j");
  LLVMValueRef lo = gen_imul(gen, LLVMBuildUDiv(b, e.index, gen_i64(gen, s.width), ""), rows);
  LLVMValueRef hi = LLVMBuildAdd(b, lo, gen_i64(gen, rows), "");
  hi = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, hi, gen_i64(gen, s.rows), ""), hi,
                       gen_i64(gen, s.rows), "hi");
  gen_loop_begin(gen, &v, lo, hi);
  LLVMBuildStore(b, scatter_zero(gen, &s),
                 gen_element(gen, s.t, s.out, gen_iadd(gen, gen_imul(gen, v.index, s.width), j)));
  gen_loop_end(gen, &v);
  gen_loop_begin(gen, &u, gen_i64(gen, 0), gen_i64(gen, s.count));
  LLVMValueRef row = LLVMBuildSExt(b, gen_load_at(gen, gen->i32, s.index, u.index), gen->i64, "");
  LLVMValueRef mine = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, row, lo, ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, row, hi, ""), "");
  LLVMBasicBlockRef add_one = LLVMAppendBasicBlockInContext(gen->context, fn, "add_one");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, fn, "next");
  LLVMBuildCondBr(b, mine, add_one, next);
  LLVMPositionBuilderAtEnd(b, add_one);
  LLVMValueRef to = gen_element(gen, s.t, s.out, gen_iadd(gen, gen_imul(gen, row, s.width), j));
  LLVMValueRef x = gen_load_at(gen, s.t, s.updates, gen_iadd(gen, gen_imul(gen, u.index, s.width), j));
  LLVMBuildStore(b, scatter_add_to(gen, &s, LLVMBuildLoad2(b, s.t, to, ""), x), to);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
  gen_loop_end(gen, &u);
  gen_loop_end(gen, &e);
}

void emit_scatter_kernel(Gen *gen, int function, const Kernel *kernel,
                             int64_t block_rows) {
  LLVMValueRef fn = gen_kernel_function(gen, function);
  if (block_rows > 0)
    scatter_by_block(gen, kernel, fn, block_rows);
  else
    scatter_by_column(gen, kernel, fn);
  LLVMBuildRetVoid(gen->builder);
}
