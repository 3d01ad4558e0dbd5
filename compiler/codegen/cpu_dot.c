/* Contraction and scatter kernels over materialised operands. A dot kernel
 * is a thin call into the module's shape-generic GEMM (cpu_gemm.c), which
 * sums each k block in k order and adds it to C, the same way however the
 * range is split; scatter_add sums in index order. */
#include "cpu_internal.h"

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

static LLVMValueRef select_i64(CpuGen *gen, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef bl = gen->builder;
  return LLVMBuildSelect(bl, LLVMBuildICmp(bl, p, a, b, ""), a, b, "");
}

/* Whether a dot runs as matrix-vector products (emit_vector_rows): one row
 * a batch, each batch its own B, f32 or f64 on a vector target. */
static bool vector_rows(const CpuGen *gen, const DotShape *s, const GraphNode *n) {
  return s->m == 1 && s->b_batched && n->dtype != GRAPH_BF16 && gen->vector_bits > 0 &&
         !gen->gpu_threads;
}

/* A dot whose C has fewer rows (batch x m) than columns, such as a weight
 * gradient [256, 1024] contracted over k = B*T, would give each of two
 * threads a few row blocks and the whole of B to pack: its range also
 * splits the columns, into two blocks of a multiple of 32 (every micro-tile
 * width divides it), block-major, so two threads take one column block
 * each and pack half of B. Anything else keeps one block (the range is the
 * rows). */
int64_t cpu_dot_column_block(const CpuGen *gen, const Kernel *kernel) {
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  DotShape s = dot_shape(gen, n);
  if (vector_rows(gen, &s, n) || kernel->rows >= s.n || s.n < 64)
    return s.n;
  return ((s.n + 1) / 2 + 31) / 32 * 32;
}

int64_t cpu_dot_items(const CpuGen *gen, const Kernel *kernel) {
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  int64_t width = cpu_dot_column_block(gen, kernel), cols = n->shape.dims[n->shape.rank - 1];
  return kernel->rows * ((cols + width - 1) / width);
}

/* C rows [begin, end) (of batch x m) and columns [j0, j0 + cols). */
static void emit_rows(CpuGen *gen, const DotShape *sp, LLVMValueRef gemm, LLVMTypeRef t,
                      LLVMValueRef c, LLVMValueRef a, LLVMValueRef bm, LLVMValueRef begin,
                      LLVMValueRef end, LLVMValueRef j0, LLVMValueRef cols) {
  LLVMBuilderRef b = gen->builder;
  DotShape s = *sp;
  c = cpu_element(gen, t, c, j0);
  bm = cpu_element(gen, t, bm, s.tb ? LLVMBuildMul(b, j0, cpu_i64(gen, s.k), "") : j0);
  if (!s.ta && !s.b_batched) {
    /* One B for every batch and A's rows in order: the batches' rows are
     * the rows of one [batch * m, k] matrix, so the range is one call. */
    LLVMValueRef call[9] = {cpu_element(gen, t, c, mul(gen, begin, s.n)),
                            cpu_element(gen, t, a, mul(gen, begin, s.k)),
                            bm,
                            LLVMBuildSub(b, end, begin, ""),
                            cols,
                            cpu_i64(gen, s.k),
                            cpu_i64(gen, s.k),
                            cpu_i64(gen, s.tb ? s.k : s.n),
                            cpu_i64(gen, s.n)};
    LLVMBuildCall2(b, LLVMGlobalGetValueType(gemm), gemm, call, 9, "");
    return;
  }
  LLVMValueRef m = cpu_i64(gen, s.m);
  LLVMValueRef first = LLVMBuildUDiv(b, begin, m, "");
  LLVMValueRef last = LLVMBuildUDiv(b, add(gen, end, cpu_i64(gen, s.m - 1)), m, "");
  CpuLoop batch;
  cpu_loop_begin(gen, &batch, first, last);
  LLVMValueRef row0 = mul(gen, batch.index, s.m);
  LLVMValueRef i0 = select_i64(gen, LLVMIntSGT, LLVMBuildSub(b, begin, row0, ""), cpu_i64(gen, 0));
  LLVMValueRef i1 = select_i64(gen, LLVMIntSLT, LLVMBuildSub(b, end, row0, ""), m);
  LLVMValueRef a_at = s.ta ? i0 : mul(gen, i0, s.k);
  if (s.a_batched)
    a_at = add(gen, a_at, mul(gen, batch.index, s.m * s.k));
  LLVMValueRef b_at = s.b_batched ? mul(gen, batch.index, s.k * s.n) : cpu_i64(gen, 0);
  LLVMValueRef call[9] = {cpu_element(gen, t, c, mul(gen, add(gen, row0, i0), s.n)),
                          cpu_element(gen, t, a, a_at),
                          cpu_element(gen, t, bm, b_at),
                          LLVMBuildSub(b, i1, i0, ""),
                          cols,
                          cpu_i64(gen, s.k),
                          cpu_i64(gen, s.ta ? s.m : s.k),
                          cpu_i64(gen, s.tb ? s.k : s.n),
                          cpu_i64(gen, s.n)};
  LLVMBuildCall2(b, LLVMGlobalGetValueType(gemm), gemm, call, 9, "");
  cpu_loop_end(gen, &batch);
}

static LLVMValueRef vector_at(CpuGen *gen, LLVMTypeRef vt, LLVMTypeRef t, LLVMValueRef base,
                              LLVMValueRef i) {
  LLVMValueRef p = LLVMBuildBitCast(gen->builder, cpu_element(gen, t, base, i),
                                    LLVMPointerType(vt, 0), "");
  LLVMValueRef x = LLVMBuildLoad2(gen->builder, vt, p, "");
  LLVMSetAlignment(x, LLVMGetTypeKind(t) == LLVMDoubleTypeKind ? 8 : 4);
  return x;
}

/* C rows [begin, end) of a dot with one row a batch and a B of each batch
 * (m = 1: an RNN decoder's query against its encoder states) as
 * matrix-vector products. Through the GEMM each batch paid B's packing and
 * a 12-row tile for its one row: the GRU seq2seq's [32, 1, 25] scores and
 * their gradients ran at about 5 GFLOP/s, a tenth of its step. c[j] sums
 * a[p] B(p, j) over p: along B's rows in vectors of j (B untransposed; from
 * zero in p order, the GEMM's order within one k block), or as one dot
 * product of a with row j of B, in vectors of p and then across the lanes
 * (transposed). */
static void emit_vector_rows(CpuGen *gen, const DotShape *s, LLVMTypeRef t, LLVMValueRef c,
                             LLVMValueRef a, LLVMValueRef bm, LLVMValueRef begin,
                             LLVMValueRef end) {
  LLVMBuilderRef b = gen->builder;
  int w = gen->vector_bits / (t == gen->f64 ? 64 : 32);
  LLVMTypeRef vt = LLVMVectorType(t, (unsigned)w);
  CpuLoop batch, j, p;
  cpu_loop_begin(gen, &batch, begin, end);
  LLVMValueRef a_at = s->a_batched ? mul(gen, batch.index, s->k) : cpu_i64(gen, 0);
  LLVMValueRef ab = cpu_element(gen, t, a, a_at); /* m = 1: a's k elements are contiguous */
  LLVMValueRef bb = cpu_element(gen, t, bm, mul(gen, batch.index, s->k * s->n));
  LLVMValueRef cb = cpu_element(gen, t, c, mul(gen, batch.index, s->n));
  int64_t vectors = s->tb ? s->k / w : s->n / w;
  for (int chunked = 1; chunked >= 0; chunked--) {
    /* first the whole vectors along j (or p), then what is left one at a time */
    int lanes = chunked ? w : 1;
    LLVMTypeRef ct = chunked ? vt : t;
    if (!s->tb) {
      int64_t from = chunked ? 0 : vectors * w, to = chunked ? vectors * w : s->n;
      if (from >= to) continue;
      cpu_loop_begin(gen, &j, cpu_i64(gen, 0), cpu_i64(gen, (to - from) / lanes));
      LLVMValueRef j0 = add(gen, cpu_i64(gen, from), mul(gen, j.index, lanes));
      LLVMValueRef acc = cpu_entry_alloca(gen, ct, "acc");
      LLVMBuildStore(b, LLVMConstNull(ct), acc);
      cpu_loop_begin(gen, &p, cpu_i64(gen, 0), cpu_i64(gen, s->k));
      LLVMValueRef x = load(gen, t, ab, p.index);
      if (chunked) x = cpu_splat(gen, x, (unsigned)w);
      LLVMValueRef at = add(gen, mul(gen, p.index, s->n), j0);
      LLVMValueRef y = chunked ? vector_at(gen, vt, t, bb, at) : load(gen, t, bb, at);
      LLVMBuildStore(b, cpu_fmuladd(gen, x, y, LLVMBuildLoad2(b, ct, acc, "")), acc);
      cpu_loop_end(gen, &p);
      LLVMValueRef out =
          LLVMBuildBitCast(b, cpu_element(gen, t, cb, j0), LLVMPointerType(ct, 0), "");
      LLVMValueRef st = LLVMBuildStore(b, LLVMBuildLoad2(b, ct, acc, ""), out);
      LLVMSetAlignment(st, t == gen->f64 ? 8 : 4);
      cpu_loop_end(gen, &j);
    } else if (chunked) {
      /* per j: whole vectors of p, their lanes summed, then the p left */
      cpu_loop_begin(gen, &j, cpu_i64(gen, 0), cpu_i64(gen, s->n));
      LLVMValueRef row = cpu_element(gen, t, bb, mul(gen, j.index, s->k));
      LLVMValueRef acc = cpu_entry_alloca(gen, vt, "acc"), tail = cpu_entry_alloca(gen, t, "tail");
      LLVMBuildStore(b, LLVMConstNull(vt), acc);
      LLVMBuildStore(b, LLVMConstNull(t), tail);
      if (vectors > 0) {
        cpu_loop_begin(gen, &p, cpu_i64(gen, 0), cpu_i64(gen, vectors));
        LLVMValueRef at = mul(gen, p.index, w);
        LLVMValueRef x = vector_at(gen, vt, t, ab, at), y = vector_at(gen, vt, t, row, at);
        LLVMValueRef v = cpu_fmuladd(gen, x, y, LLVMBuildLoad2(b, vt, acc, ""));
        LLVMBuildStore(b, v, acc);
        cpu_loop_end(gen, &p);
      }
      if (vectors * w < s->k) {
        cpu_loop_begin(gen, &p, cpu_i64(gen, vectors * w), cpu_i64(gen, s->k));
        LLVMBuildStore(b, cpu_fmuladd(gen, load(gen, t, ab, p.index), load(gen, t, row, p.index),
                                 LLVMBuildLoad2(b, t, tail, "")), tail);
        cpu_loop_end(gen, &p);
      }
      LLVMValueRef sum = LLVMBuildFAdd(b, cpu_lane_sum(gen, LLVMBuildLoad2(b, vt, acc, "")),
                                       LLVMBuildLoad2(b, t, tail, ""), "");
      LLVMBuildStore(b, sum, cpu_element(gen, t, cb, j.index));
      cpu_loop_end(gen, &j);
    }
  }
  cpu_loop_end(gen, &batch);
}

/* The range is over (column block, batch, i) of C, column blocks outermost
 * (cpu_dot_column_block): threads split rows, batches and column blocks,
 * never k, so the threads' share changes no result. Each batch the range
 * touches is one GEMM call over its rows [i0, i1) and the block's columns. */
void cpu_emit_dot_kernel(CpuGen *gen, int function, const Kernel *kernel) {
  LLVMBuilderRef b = gen->builder;
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  DotShape s = dot_shape(gen, n);
  LLVMTypeRef t = cpu_storage_type(gen, n->dtype);
  LLVMValueRef gemm = n->dtype == GRAPH_BF16 ? cpu_gemm_bf16_function(gen, s.ta, s.tb)
                                             : cpu_gemm_function(gen, t, s.ta, s.tb);
  LLVMValueRef fn = cpu_kernel_function(gen, function);
  LLVMValueRef args = LLVMGetParam(fn, 0);
  LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
  LLVMValueRef c = cpu_kernel_arg(gen, args, 0, t);
  /* Arguments are distinct buffers: a dot of x with itself has one input. */
  LLVMValueRef a = cpu_kernel_arg(gen, args, 1, t);
  LLVMValueRef bm = cpu_kernel_arg(gen, args, kernel->num_args > 2 ? 2 : 1, t);
  if (vector_rows(gen, &s, n)) {
    emit_vector_rows(gen, &s, t, c, a, bm, begin, end);
    LLVMBuildRetVoid(b);
    return;
  }
  int64_t width = cpu_dot_column_block(gen, kernel);
  if (width >= s.n) {
    emit_rows(gen, &s, gemm, t, c, a, bm, begin, end, cpu_i64(gen, 0), cpu_i64(gen, s.n));
    LLVMBuildRetVoid(b);
    return;
  }
  LLVMValueRef rows = cpu_i64(gen, kernel->rows);
  LLVMValueRef first = LLVMBuildUDiv(b, begin, rows, "");
  LLVMValueRef last = LLVMBuildUDiv(b, add(gen, end, cpu_i64(gen, kernel->rows - 1)), rows, "");
  CpuLoop block;
  cpu_loop_begin(gen, &block, first, last);
  LLVMValueRef item0 = mul(gen, block.index, kernel->rows);
  LLVMValueRef r0 = select_i64(gen, LLVMIntSGT, LLVMBuildSub(b, begin, item0, ""), cpu_i64(gen, 0));
  LLVMValueRef r1 = select_i64(gen, LLVMIntSLT, LLVMBuildSub(b, end, item0, ""), rows);
  LLVMValueRef j0 = mul(gen, block.index, width);
  LLVMValueRef cols = select_i64(gen, LLVMIntSLT, cpu_i64(gen, width),
                                 LLVMBuildSub(b, cpu_i64(gen, s.n), j0, ""));
  emit_rows(gen, &s, gemm, t, c, a, bm, r0, r1, j0, cols);
  cpu_loop_end(gen, &block);
  LLVMBuildRetVoid(b);
}

/* What both forms of scatter_add read: the [V, D] result, the updates and
 * the indices (args are distinct buffers: updates that are the indices'
 * own buffer make two arguments). */
typedef struct Scatter {
  int64_t rows, width, count; /* V, D, and the number of indices */
  LLVMTypeRef t;
  LLVMValueRef out, updates, index;
} Scatter;

static Scatter scatter_operands(CpuGen *gen, const Kernel *kernel, LLVMValueRef fn) {
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  Scatter s = {.rows = n->shape.dims[0], .width = n->shape.dims[1],
               .count = graph_shape_numel(&graph_node(gen->graph, n->inputs[1])->shape),
               .t = cpu_type(gen, n->dtype)};
  LLVMValueRef args = LLVMGetParam(fn, 0);
  s.out = cpu_kernel_arg(gen, args, 0, s.t);
  s.updates = cpu_kernel_arg(gen, args, 1, s.t);
  s.index = cpu_kernel_arg(gen, args, kernel->num_args > 2 ? 2 : 1, gen->i32);
  return s;
}

static LLVMValueRef scatter_add_to(CpuGen *gen, const Scatter *s, LLVMValueRef acc, LLVMValueRef x) {
  return s->t != gen->i32 ? LLVMBuildFAdd(gen->builder, acc, x, "")
                          : LLVMBuildAdd(gen->builder, acc, x, "");
}

static LLVMValueRef scatter_zero(CpuGen *gen, const Scatter *s) {
  return s->t != gen->i32 ? LLVMConstReal(s->t, 0.0) : cpu_i32(gen, 0);
}

/* The range is over columns of the [V, D] result, so threads never write
 * the same element and each element sums its updates in index order. */
static void scatter_by_column(CpuGen *gen, const Kernel *kernel, LLVMValueRef fn) {
  LLVMBuilderRef b = gen->builder;
  Scatter s = scatter_operands(gen, kernel, fn);
  LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
  CpuLoop v, j, u;
  cpu_loop_begin(gen, &v, cpu_i64(gen, 0), cpu_i64(gen, s.rows));
  cpu_loop_begin(gen, &j, begin, end);
  LLVMBuildStore(b, scatter_zero(gen, &s),
                 cpu_element(gen, s.t, s.out, add(gen, mul(gen, v.index, s.width), j.index)));
  cpu_loop_end(gen, &j);
  cpu_loop_end(gen, &v);
  cpu_loop_begin(gen, &u, cpu_i64(gen, 0), cpu_i64(gen, s.count));
  LLVMValueRef row = LLVMBuildSExt(b, load(gen, gen->i32, s.index, u.index), gen->i64, "");
  LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, row, cpu_i64(gen, 0), ""),
                                 LLVMBuildICmp(b, LLVMIntSLT, row, cpu_i64(gen, s.rows), ""), "");
  LLVMBasicBlockRef add_row = LLVMAppendBasicBlockInContext(gen->context, fn, "add_row");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, fn, "next");
  LLVMBuildCondBr(b, ok, add_row, next);
  LLVMPositionBuilderAtEnd(b, add_row);
  cpu_loop_begin(gen, &j, begin, end);
  LLVMValueRef to = cpu_element(gen, s.t, s.out, add(gen, mul(gen, row, s.width), j.index));
  LLVMValueRef x = load(gen, s.t, s.updates, add(gen, mul(gen, u.index, s.width), j.index));
  LLVMBuildStore(b, scatter_add_to(gen, &s, LLVMBuildLoad2(b, s.t, to, ""), x), to);
  cpu_loop_end(gen, &j);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
  cpu_loop_end(gen, &u);
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
static void scatter_by_block(CpuGen *gen, const Kernel *kernel, LLVMValueRef fn, int64_t rows) {
  LLVMBuilderRef b = gen->builder;
  Scatter s = scatter_operands(gen, kernel, fn);
  CpuLoop e, v, u;
  cpu_loop_begin(gen, &e, LLVMGetParam(fn, 1), LLVMGetParam(fn, 2));
  LLVMValueRef j = LLVMBuildURem(b, e.index, cpu_i64(gen, s.width), "j");
  LLVMValueRef lo = mul(gen, LLVMBuildUDiv(b, e.index, cpu_i64(gen, s.width), ""), rows);
  LLVMValueRef hi = LLVMBuildAdd(b, lo, cpu_i64(gen, rows), "");
  hi = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, hi, cpu_i64(gen, s.rows), ""), hi,
                       cpu_i64(gen, s.rows), "hi");
  cpu_loop_begin(gen, &v, lo, hi);
  LLVMBuildStore(b, scatter_zero(gen, &s),
                 cpu_element(gen, s.t, s.out, add(gen, mul(gen, v.index, s.width), j)));
  cpu_loop_end(gen, &v);
  cpu_loop_begin(gen, &u, cpu_i64(gen, 0), cpu_i64(gen, s.count));
  LLVMValueRef row = LLVMBuildSExt(b, load(gen, gen->i32, s.index, u.index), gen->i64, "");
  LLVMValueRef mine = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, row, lo, ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, row, hi, ""), "");
  LLVMBasicBlockRef add_one = LLVMAppendBasicBlockInContext(gen->context, fn, "add_one");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(gen->context, fn, "next");
  LLVMBuildCondBr(b, mine, add_one, next);
  LLVMPositionBuilderAtEnd(b, add_one);
  LLVMValueRef to = cpu_element(gen, s.t, s.out, add(gen, mul(gen, row, s.width), j));
  LLVMValueRef x = load(gen, s.t, s.updates, add(gen, mul(gen, u.index, s.width), j));
  LLVMBuildStore(b, scatter_add_to(gen, &s, LLVMBuildLoad2(b, s.t, to, ""), x), to);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
  cpu_loop_end(gen, &u);
  cpu_loop_end(gen, &e);
}

void cpu_emit_scatter_kernel(CpuGen *gen, int function, const Kernel *kernel,
                             int64_t block_rows) {
  LLVMValueRef fn = cpu_kernel_function(gen, function);
  if (block_rows > 0)
    scatter_by_block(gen, kernel, fn, block_rows);
  else
    scatter_by_column(gen, kernel, fn);
  LLVMBuildRetVoid(gen->builder);
}
