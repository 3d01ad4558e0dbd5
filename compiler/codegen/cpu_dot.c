/* Contraction and scatter kernels over materialised operands. Both keep the
 * evaluator's order of accumulation (k ascending for dot, index order for
 * scatter_add), so compiled and reference results round the same way. */
#include "cpu_internal.h"

/* Columns of C per tile: a tile of B (k x TILE) stays in cache while the
 * rows of the range pass over it. */
#define DOT_TILE 256

typedef struct DotShape {
  int64_t m, n, k;
  bool ta, tb, a_batched, b_batched;
} DotShape;

static DotShape dot_shape(const CpuGen *gen, const GraphNode *n) {
  const GraphShape *sa = &graph_node(gen->graph, n->inputs[0])->shape;
  const GraphShape *sb = &graph_node(gen->graph, n->inputs[1])->shape;
  int r = n->shape.rank;
  DotShape d = {.m = n->shape.dims[r - 2],
                .n = n->shape.dims[r - 1],
                .ta = n->attrs.transpose_a,
                .tb = n->attrs.transpose_b,
                .a_batched = sa->rank > 2,
                .b_batched = sb->rank > 2};
  d.k = sa->dims[sa->rank - (d.ta ? 2 : 1)];
  return d;
}

static LLVMValueRef mul(CpuGen *gen, LLVMValueRef a, int64_t c) {
  return LLVMBuildMul(gen->builder, a, cpu_i64(gen, c), "");
}

static LLVMValueRef add(CpuGen *gen, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildAdd(gen->builder, a, b, "");
}

static LLVMValueRef load(CpuGen *gen, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef i) {
  return LLVMBuildLoad2(gen->builder, t, cpu_element(gen, t, base, i), "");
}

/* Rows of the range are (batch, i) pairs of C. */
void cpu_emit_dot_kernel(CpuGen *gen, int function, const Kernel *kernel) {
  LLVMBuilderRef b = gen->builder;
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  DotShape s = dot_shape(gen, n);
  LLVMTypeRef t = cpu_type(gen, n->dtype);
  LLVMValueRef fn = cpu_kernel_function(gen, function);
  LLVMValueRef args = LLVMGetParam(fn, 0);
  LLVMValueRef c = cpu_kernel_arg(gen, args, 0, t);
  /* Arguments are distinct buffers: a dot of x with itself has one input. */
  LLVMValueRef a = cpu_kernel_arg(gen, args, 1, t);
  LLVMValueRef bm = cpu_kernel_arg(gen, args, kernel->num_args > 2 ? 2 : 1, t);
  CpuLoop tile, row, p, j;
  int64_t tile_width = s.tb ? s.n : DOT_TILE;
  cpu_loop_begin(gen, &tile, cpu_i64(gen, 0), cpu_i64(gen, (s.n + tile_width - 1) / tile_width));
  LLVMValueRef j0 = mul(gen, tile.index, tile_width);
  LLVMValueRef j1 = add(gen, j0, cpu_i64(gen, tile_width));
  j1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, j1, cpu_i64(gen, s.n), ""), j1,
                       cpu_i64(gen, s.n), "");
  cpu_loop_begin(gen, &row, LLVMGetParam(fn, 1), LLVMGetParam(fn, 2));
  LLVMValueRef batch = LLVMBuildUDiv(b, row.index, cpu_i64(gen, s.m), "");
  LLVMValueRef i = LLVMBuildURem(b, row.index, cpu_i64(gen, s.m), "");
  LLVMValueRef a_base = s.a_batched ? mul(gen, batch, s.m * s.k) : cpu_i64(gen, 0);
  LLVMValueRef b_base = s.b_batched ? mul(gen, batch, s.k * s.n) : cpu_i64(gen, 0);
  LLVMValueRef c_row = mul(gen, row.index, s.n);
  if (s.tb) {
    /* C[i, j] = sum_p A[i, p] B[j, p]: a dot product over contiguous rows. */
    cpu_loop_begin(gen, &j, j0, j1);
    LLVMValueRef acc = cpu_entry_alloca(gen, t, "acc");
    LLVMBuildStore(b, LLVMConstReal(t, 0.0), acc);
    cpu_loop_begin(gen, &p, cpu_i64(gen, 0), cpu_i64(gen, s.k));
    LLVMValueRef ai = s.ta ? add(gen, a_base, add(gen, mul(gen, p.index, s.m), i))
                           : add(gen, a_base, add(gen, mul(gen, i, s.k), p.index));
    LLVMValueRef bi = add(gen, b_base, add(gen, mul(gen, j.index, s.k), p.index));
    LLVMValueRef prod = LLVMBuildFMul(b, load(gen, t, a, ai), load(gen, t, bm, bi), "");
    LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, t, acc, ""), prod, ""), acc);
    cpu_loop_end(gen, &p);
    LLVMBuildStore(b, LLVMBuildLoad2(b, t, acc, ""),
                   cpu_element(gen, t, c, add(gen, c_row, j.index)));
    cpu_loop_end(gen, &j);
  } else {
    /* C[i, j0:j1] += A[i, p] B[p, j0:j1] for p ascending: the inner loop
     * runs along contiguous rows of B and C and vectorises. */
    cpu_loop_begin(gen, &j, j0, j1);
    LLVMBuildStore(b, LLVMConstReal(t, 0.0), cpu_element(gen, t, c, add(gen, c_row, j.index)));
    cpu_loop_end(gen, &j);
    cpu_loop_begin(gen, &p, cpu_i64(gen, 0), cpu_i64(gen, s.k));
    LLVMValueRef ai = s.ta ? add(gen, a_base, add(gen, mul(gen, p.index, s.m), i))
                           : add(gen, a_base, add(gen, mul(gen, i, s.k), p.index));
    LLVMValueRef av = load(gen, t, a, ai);
    LLVMValueRef b_row = add(gen, b_base, mul(gen, p.index, s.n));
    cpu_loop_begin(gen, &j, j0, j1);
    LLVMValueRef ci = cpu_element(gen, t, c, add(gen, c_row, j.index));
    LLVMValueRef prod = LLVMBuildFMul(b, av, load(gen, t, bm, add(gen, b_row, j.index)), "");
    LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, t, ci, ""), prod, ""), ci);
    cpu_loop_end(gen, &j);
    cpu_loop_end(gen, &p);
  }
  cpu_loop_end(gen, &row);
  cpu_loop_end(gen, &tile);
  LLVMBuildRetVoid(b);
}

/* The range is over columns of the [V, D] result, so threads never write
 * the same element and each element sums its updates in index order. */
void cpu_emit_scatter_kernel(CpuGen *gen, int function, const Kernel *kernel) {
  LLVMBuilderRef b = gen->builder;
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  const GraphNode *indices = graph_node(gen->graph, n->inputs[1]);
  int64_t rows = n->shape.dims[0], width = n->shape.dims[1];
  int64_t count = graph_shape_numel(&indices->shape);
  LLVMTypeRef t = cpu_type(gen, n->dtype);
  bool fl = t != gen->i32;
  LLVMValueRef fn = cpu_kernel_function(gen, function);
  LLVMValueRef args = LLVMGetParam(fn, 0);
  LLVMValueRef out = cpu_kernel_arg(gen, args, 0, t);
  LLVMValueRef updates = cpu_kernel_arg(gen, args, 1, t);
  LLVMValueRef index = cpu_kernel_arg(gen, args, kernel->num_args > 2 ? 2 : 1, gen->i32);
  LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
  LLVMValueRef zero = fl ? LLVMConstReal(t, 0.0) : cpu_i32(gen, 0);
  CpuLoop v, j, u;
  cpu_loop_begin(gen, &v, cpu_i64(gen, 0), cpu_i64(gen, rows));
  cpu_loop_begin(gen, &j, begin, end);
  LLVMBuildStore(b, zero, cpu_element(gen, t, out, add(gen, mul(gen, v.index, width), j.index)));
  cpu_loop_end(gen, &j);
  cpu_loop_end(gen, &v);
  cpu_loop_begin(gen, &u, cpu_i64(gen, 0), cpu_i64(gen, count));
  LLVMValueRef row = LLVMBuildSExt(b, load(gen, gen->i32, index, u.index), gen->i64, "");
  LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, row, cpu_i64(gen, 0), ""),
                                 LLVMBuildICmp(b, LLVMIntSLT, row, cpu_i64(gen, rows), ""), "");
  LLVMBasicBlockRef add_row = LLVMAppendBasicBlockInContext(gen->context, fn, "add_row");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, fn, "next");
  LLVMBuildCondBr(b, ok, add_row, next);
  LLVMPositionBuilderAtEnd(b, add_row);
  cpu_loop_begin(gen, &j, begin, end);
  LLVMValueRef to = cpu_element(gen, t, out, add(gen, mul(gen, row, width), j.index));
  LLVMValueRef x = load(gen, t, updates, add(gen, mul(gen, u.index, width), j.index));
  LLVMValueRef acc = LLVMBuildLoad2(b, t, to, "");
  LLVMBuildStore(b, fl ? LLVMBuildFAdd(b, acc, x, "") : LLVMBuildAdd(b, acc, x, ""), to);
  cpu_loop_end(gen, &j);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
  cpu_loop_end(gen, &u);
  LLVMBuildRetVoid(b);
}
