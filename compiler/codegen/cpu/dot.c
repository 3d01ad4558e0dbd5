/* The CPU's contraction kernels over materialised operands. A dot kernel
 * is a thin call into the module's shape-generic GEMM (gemm.c), which
 * sums each k block in k order and adds it to C, the same way however the
 * range is split. */
#include "cpu_internal.h"

typedef struct DotShape {
  int64_t m, n, k;
  bool ta, tb, a_batched, b_batched;
} DotShape;

static DotShape dot_shape(const Gen *gen, const GraphNode *n) {
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

static LLVMValueRef select_i64(Gen *gen, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef bl = gen->builder;
  return LLVMBuildSelect(bl, LLVMBuildICmp(bl, p, a, b, ""), a, b, "");
}

/* Whether a dot runs as matrix-vector products (emit_vector_rows): one row
 * a batch, each batch its own B, f32 or f64 on a vector target. */
static bool vector_rows(const Gen *gen, const DotShape *s, const GraphNode *n) {
  return s->m == 1 && s->b_batched && n->dtype != GRAPH_BF16 && gen->vector_bits > 0;
}

/* A dot whose C has fewer rows (batch x m) than columns, such as a weight
 * gradient [256, 1024] contracted over k = B*T, would give each of two
 * threads a few row blocks and the whole of B to pack: its range also
 * splits the columns, into two blocks of a multiple of 32 (every micro-tile
 * width divides it), block-major, so two threads take one column block
 * each and pack half of B. Anything else keeps one block (the range is the
 * rows). */
int64_t cpu_dot_column_block(const Gen *gen, const Kernel *kernel) {
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  DotShape s = dot_shape(gen, n);
  if (vector_rows(gen, &s, n) || kernel->rows >= s.n || s.n < 64)
    return s.n;
  return ((s.n + 1) / 2 + 31) / 32 * 32;
}

int64_t cpu_dot_items(const Gen *gen, const Kernel *kernel) {
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  int64_t width = cpu_dot_column_block(gen, kernel), cols = n->shape.dims[n->shape.rank - 1];
  return kernel->rows * ((cols + width - 1) / width);
}

/* C rows [begin, end) (of batch x m) and columns [j0, j0 + cols). */
static void emit_rows(Gen *gen, const DotShape *sp, LLVMValueRef gemm, LLVMTypeRef t,
                      LLVMValueRef c, LLVMValueRef a, LLVMValueRef bm, LLVMValueRef begin,
                      LLVMValueRef end, LLVMValueRef j0, LLVMValueRef cols) {
  LLVMBuilderRef b = gen->builder;
  DotShape s = *sp;
  c = gen_element(gen, t, c, j0);
  bm = gen_element(gen, t, bm, s.tb ? LLVMBuildMul(b, j0, gen_i64(gen, s.k), "") : j0);
  if (!s.ta && !s.b_batched) {
    /* One B for every batch and A's rows in order: the batches' rows are
     * the rows of one [batch * m, k] matrix, so the range is one call. */
    LLVMValueRef call[9] = {gen_element(gen, t, c, gen_imul(gen, begin, s.n)),
                            gen_element(gen, t, a, gen_imul(gen, begin, s.k)),
                            bm,
                            LLVMBuildSub(b, end, begin, ""),
                            cols,
                            gen_i64(gen, s.k),
                            gen_i64(gen, s.k),
                            gen_i64(gen, s.tb ? s.k : s.n),
                            gen_i64(gen, s.n)};
    LLVMBuildCall2(b, LLVMGlobalGetValueType(gemm), gemm, call, 9, "");
    return;
  }
  LLVMValueRef m = gen_i64(gen, s.m);
  LLVMValueRef first = LLVMBuildUDiv(b, begin, m, "");
  LLVMValueRef last = LLVMBuildUDiv(b, gen_iadd(gen, end, gen_i64(gen, s.m - 1)), m, "");
  GenLoop batch;
  gen_loop_begin(gen, &batch, first, last);
  LLVMValueRef row0 = gen_imul(gen, batch.index, s.m);
  LLVMValueRef i0 = select_i64(gen, LLVMIntSGT, LLVMBuildSub(b, begin, row0, ""), gen_i64(gen, 0));
  LLVMValueRef i1 = select_i64(gen, LLVMIntSLT, LLVMBuildSub(b, end, row0, ""), m);
  LLVMValueRef a_at = s.ta ? i0 : gen_imul(gen, i0, s.k);
  if (s.a_batched)
    a_at = gen_iadd(gen, a_at, gen_imul(gen, batch.index, s.m * s.k));
  LLVMValueRef b_at = s.b_batched ? gen_imul(gen, batch.index, s.k * s.n) : gen_i64(gen, 0);
  LLVMValueRef call[9] = {gen_element(gen, t, c, gen_imul(gen, gen_iadd(gen, row0, i0), s.n)),
                          gen_element(gen, t, a, a_at),
                          gen_element(gen, t, bm, b_at),
                          LLVMBuildSub(b, i1, i0, ""),
                          cols,
                          gen_i64(gen, s.k),
                          gen_i64(gen, s.ta ? s.m : s.k),
                          gen_i64(gen, s.tb ? s.k : s.n),
                          gen_i64(gen, s.n)};
  LLVMBuildCall2(b, LLVMGlobalGetValueType(gemm), gemm, call, 9, "");
  gen_loop_end(gen, &batch);
}

static LLVMValueRef vector_at(Gen *gen, LLVMTypeRef vt, LLVMTypeRef t, LLVMValueRef base,
                              LLVMValueRef i) {
  LLVMValueRef p = LLVMBuildBitCast(gen->builder, gen_element(gen, t, base, i),
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
static void emit_vector_rows(Gen *gen, const DotShape *s, LLVMTypeRef t, LLVMValueRef c,
                             LLVMValueRef a, LLVMValueRef bm, LLVMValueRef begin,
                             LLVMValueRef end) {
  LLVMBuilderRef b = gen->builder;
  int w = gen->vector_bits / (t == gen->f64 ? 64 : 32);
  LLVMTypeRef vt = LLVMVectorType(t, (unsigned)w);
  GenLoop batch, j, p;
  gen_loop_begin(gen, &batch, begin, end);
  LLVMValueRef a_at = s->a_batched ? gen_imul(gen, batch.index, s->k) : gen_i64(gen, 0);
  LLVMValueRef ab = gen_element(gen, t, a, a_at); /* m = 1: a's k elements are contiguous */
  LLVMValueRef bb = gen_element(gen, t, bm, gen_imul(gen, batch.index, s->k * s->n));
  LLVMValueRef cb = gen_element(gen, t, c, gen_imul(gen, batch.index, s->n));
  int64_t vectors = s->tb ? s->k / w : s->n / w;
  for (int chunked = 1; chunked >= 0; chunked--) {
    /* first the whole vectors along j (or p), then what is left one at a time */
    int lanes = chunked ? w : 1;
    LLVMTypeRef ct = chunked ? vt : t;
    if (!s->tb) {
      int64_t from = chunked ? 0 : vectors * w, to = chunked ? vectors * w : s->n;
      if (from >= to) continue;
      gen_loop_begin(gen, &j, gen_i64(gen, 0), gen_i64(gen, (to - from) / lanes));
      LLVMValueRef j0 = gen_iadd(gen, gen_i64(gen, from), gen_imul(gen, j.index, lanes));
      LLVMValueRef acc = gen_entry_alloca(gen, ct, "acc");
      LLVMBuildStore(b, LLVMConstNull(ct), acc);
      gen_loop_begin(gen, &p, gen_i64(gen, 0), gen_i64(gen, s->k));
      LLVMValueRef x = gen_load_at(gen, t, ab, p.index);
      if (chunked) x = gen_splat(gen, x, (unsigned)w);
      LLVMValueRef at = gen_iadd(gen, gen_imul(gen, p.index, s->n), j0);
      LLVMValueRef y = chunked ? vector_at(gen, vt, t, bb, at) : gen_load_at(gen, t, bb, at);
      LLVMBuildStore(b, gen_fmuladd(gen, x, y, LLVMBuildLoad2(b, ct, acc, "")), acc);
      gen_loop_end(gen, &p);
      LLVMValueRef out =
          LLVMBuildBitCast(b, gen_element(gen, t, cb, j0), LLVMPointerType(ct, 0), "");
      LLVMValueRef st = LLVMBuildStore(b, LLVMBuildLoad2(b, ct, acc, ""), out);
      LLVMSetAlignment(st, t == gen->f64 ? 8 : 4);
      gen_loop_end(gen, &j);
    } else if (chunked) {
      /* per j: whole vectors of p, their lanes summed, then the p left */
      gen_loop_begin(gen, &j, gen_i64(gen, 0), gen_i64(gen, s->n));
      LLVMValueRef row = gen_element(gen, t, bb, gen_imul(gen, j.index, s->k));
      LLVMValueRef acc = gen_entry_alloca(gen, vt, "acc"), tail = gen_entry_alloca(gen, t, "tail");
      LLVMBuildStore(b, LLVMConstNull(vt), acc);
      LLVMBuildStore(b, LLVMConstNull(t), tail);
      if (vectors > 0) {
        gen_loop_begin(gen, &p, gen_i64(gen, 0), gen_i64(gen, vectors));
        LLVMValueRef at = gen_imul(gen, p.index, w);
        LLVMValueRef x = vector_at(gen, vt, t, ab, at), y = vector_at(gen, vt, t, row, at);
        LLVMValueRef v = gen_fmuladd(gen, x, y, LLVMBuildLoad2(b, vt, acc, ""));
        LLVMBuildStore(b, v, acc);
        gen_loop_end(gen, &p);
      }
      if (vectors * w < s->k) {
        gen_loop_begin(gen, &p, gen_i64(gen, vectors * w), gen_i64(gen, s->k));
        LLVMBuildStore(b, gen_fmuladd(gen, gen_load_at(gen, t, ab, p.index), gen_load_at(gen, t, row, p.index),
                                 LLVMBuildLoad2(b, t, tail, "")), tail);
        gen_loop_end(gen, &p);
      }
      LLVMValueRef sum = LLVMBuildFAdd(b, gen_lane_sum(gen, LLVMBuildLoad2(b, vt, acc, "")),
                                       LLVMBuildLoad2(b, t, tail, ""), "");
      LLVMBuildStore(b, sum, gen_element(gen, t, cb, j.index));
      gen_loop_end(gen, &j);
    }
  }
  gen_loop_end(gen, &batch);
}

/* The range is over (column block, batch, i) of C, column blocks outermost
 * (cpu_dot_column_block): threads split rows, batches and column blocks,
 * never k, so the threads' share changes no result. Each batch the range
 * touches is one GEMM call over its rows [i0, i1) and the block's columns. */
void cpu_emit_dot_kernel(Gen *gen, int function, const Kernel *kernel) {
  LLVMBuilderRef b = gen->builder;
  const GraphNode *n = graph_node(gen->graph, kernel->root);
  DotShape s = dot_shape(gen, n);
  LLVMTypeRef t = gen_storage_type(gen, n->dtype);
  LLVMValueRef gemm = n->dtype == GRAPH_BF16 ? cpu_gemm_bf16_function(gen, s.ta, s.tb)
                                             : cpu_gemm_function(gen, t, s.ta, s.tb);
  LLVMValueRef fn = gen_kernel_function(gen, function);
  LLVMValueRef args = LLVMGetParam(fn, 0);
  LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
  LLVMValueRef c = gen_kernel_arg(gen, args, 0, t);
  /* Arguments are distinct buffers: a dot of x with itself has one input. */
  LLVMValueRef a = gen_kernel_arg(gen, args, 1, t);
  LLVMValueRef bm = gen_kernel_arg(gen, args, kernel->num_args > 2 ? 2 : 1, t);
  if (vector_rows(gen, &s, n)) {
    emit_vector_rows(gen, &s, t, c, a, bm, begin, end);
    LLVMBuildRetVoid(b);
    return;
  }
  int64_t width = cpu_dot_column_block(gen, kernel);
  if (width >= s.n) {
    emit_rows(gen, &s, gemm, t, c, a, bm, begin, end, gen_i64(gen, 0), gen_i64(gen, s.n));
    LLVMBuildRetVoid(b);
    return;
  }
  LLVMValueRef rows = gen_i64(gen, kernel->rows);
  LLVMValueRef first = LLVMBuildUDiv(b, begin, rows, "");
  LLVMValueRef last = LLVMBuildUDiv(b, gen_iadd(gen, end, gen_i64(gen, kernel->rows - 1)), rows, "");
  GenLoop block;
  gen_loop_begin(gen, &block, first, last);
  LLVMValueRef item0 = gen_imul(gen, block.index, kernel->rows);
  LLVMValueRef r0 = select_i64(gen, LLVMIntSGT, LLVMBuildSub(b, begin, item0, ""), gen_i64(gen, 0));
  LLVMValueRef r1 = select_i64(gen, LLVMIntSLT, LLVMBuildSub(b, end, item0, ""), rows);
  LLVMValueRef j0 = gen_imul(gen, block.index, width);
  LLVMValueRef cols = select_i64(gen, LLVMIntSLT, gen_i64(gen, width),
                                 LLVMBuildSub(b, gen_i64(gen, s.n), j0, ""));
  emit_rows(gen, &s, gemm, t, c, a, bm, r0, r1, j0, cols);
  gen_loop_end(gen, &block);
  LLVMBuildRetVoid(b);
}
