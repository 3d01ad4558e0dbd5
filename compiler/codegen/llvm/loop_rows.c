/* Loop kernels, the structure around the values (loop.c computes those):
 * reductions over their axes, in vector lanes or in the GPU's serial order
 * or shared by a row's threads; a kernel's hoisted row reductions; column
 * sums; the rows a range item covers; the kernel function and its noalias
 * body. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loop_internal.h"

LLVMValueRef emit_reduction_init(Gen *gen, const GraphNode *n) {
  LLVMTypeRef t = gen_type(gen, n->dtype);
  bool fl = loop_is_float(n);
  if (n->op == GRAPH_OP_REDUCE_SUM)
    return fl ? LLVMConstReal(t, 0.0) : gen_i32(gen, 0);
  return fl ? LLVMConstReal(t, -INFINITY) : gen_i32(gen, INT32_MIN);
}

/* The accumulator after one more element: a sum, or a max that keeps `a`
 * on ties and takes a NaN `v`, as the evaluator does. */
LLVMValueRef emit_reduction_step(Gen *gen, const GraphNode *n, LLVMValueRef a, LLVMValueRef v) {
  LLVMBuilderRef b = gen->builder;
  bool fl = loop_is_float(n);
  if (n->op == GRAPH_OP_REDUCE_SUM)
    return fl ? LLVMBuildFAdd(b, a, v, "") : LLVMBuildAdd(b, a, v, "");
  LLVMValueRef take =
      fl ? LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealOLT, a, v, ""),
                       LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), "")
         : LLVMBuildICmp(b, LLVMIntSLT, a, v, "");
  return LLVMBuildSelect(b, take, v, a, "");
}

static LLVMValueRef reduction_init(Emitter *e, const GraphNode *n) {
  return emit_reduction_init(e->gen, n);
}

static LLVMValueRef reduction_step(Emitter *e, const GraphNode *n, LLVMValueRef a,
                                   LLVMValueRef v) {
  return emit_reduction_step(e->gen, n, a, v);
}

/* Row reductions on the CPU split the innermost reduced axis into
 * ROW_LANES interleaved accumulators: lane l takes elements l, l + LANES,
 * ... of each whole stretch of LANES, serially. The lanes are one LLVM
 * vector value (<32 x float>, <16 x double>), kept in a register across the
 * row: each stretch's elements are computed into a vector (emit_stretch;
 * the elementwise ops feeding the reduction included) and one vector step
 * joins them to the lanes. A stack array of lanes, as before, left the loop
 * vectorizer a runtime alias check against the inputs with a scalar
 * fallback and a load and store of the lanes per stretch. The lanes are
 * then combined pairwise (lane i with lane i + half, halving), the
 * remaining tail is added serially, and the row joins the accumulator of
 * the outer reduced axes in row-major order. The order is fixed by the
 * shape alone, so the result does not depend on the run or the thread
 * count. */
#define ROW_LANES_BYTES 128

static int row_lanes(const Emitter *e, const GraphNode *n, const GraphNode *x) {
  int inner = x->shape.rank - 1;
  if (!e->gen->target->lane_reductions || inner < 0 || !((n->attrs.axes >> inner) & 1u))
    return 0;
  int lanes = ROW_LANES_BYTES / (gen_type(e->gen, n->dtype) == e->gen->f64 ? 8 : 4);
  return x->shape.dims[inner] >= lanes ? lanes : 0;
}

/* The input's value at `in` with its innermost axis at `i`, memoised only
 * until the caller resets e->memo_count. */
static LLVMValueRef emit_row_element(Emitter *e, GraphId input, const Index *in, LLVMValueRef i) {
  Index at = loop_new_index(e, in->shape);
  memcpy(at.axis, in->axis, sizeof at.axis);
  at.axis[in->shape->rank - 1] = i;
  return loop_emit(e, input, &at);
}

/* The elements start, ..., start + lanes - 1 of the row as a vector: one
 * copy of the expression in a loop over the lanes, through a stack array of
 * its own (no input can alias it), which the loop vectorizer vectorizes.
 * LANES copies gathered into a vector for the SLP vectorizer ran no faster
 * and made the base Transformer's train graph take 11 s to build, not 4. */
static LLVMValueRef emit_stretch(Emitter *e, GraphId input, const Index *in, LLVMValueRef start,
                                 int lanes) {
  Gen *gen = e->gen;
  LLVMBuilderRef b = e->b;
  LLVMTypeRef t = gen_type(gen, loop_node_of(e, input)->dtype), vt = LLVMVectorType(t, (unsigned)lanes);
  LLVMValueRef array = gen_entry_alloca(gen, vt, "stretch");
  LLVMValueRef elements = LLVMBuildBitCast(b, array, LLVMPointerType(t, 0), "");
  GenLoop l;
  int mark = e->memo_count;
  gen_loop_begin(gen, &l, gen_i64(gen, 0), gen_i64(gen, lanes));
  LLVMValueRef v = emit_row_element(e, input, in, LLVMBuildAdd(b, start, l.index, ""));
  LLVMBuildStore(b, v, gen_element(gen, t, elements, l.index));
  e->memo_count = mark;
  gen_loop_end(gen, &l);
  return LLVMBuildLoad2(b, vt, array, "");
}

/* Lanes [0, half) of `v` stepped with lanes [half, 2 half). */
static LLVMValueRef combine_halves(Emitter *e, const GraphNode *n, LLVMValueRef v, int half) {
  LLVMValueRef lo[ROW_LANES_BYTES / 4], hi[ROW_LANES_BYTES / 4];
  for (int i = 0; i < half; i++) {
    lo[i] = gen_i32(e->gen, i);
    hi[i] = gen_i32(e->gen, i + half);
  }
  LLVMValueRef undef = LLVMGetUndef(LLVMTypeOf(v));
  LLVMValueRef a = LLVMBuildShuffleVector(e->b, v, undef, LLVMConstVector(lo, (unsigned)half), "");
  LLVMValueRef b = LLVMBuildShuffleVector(e->b, v, undef, LLVMConstVector(hi, (unsigned)half), "");
  return reduction_step(e, n, a, b);
}

/* The reduction over the innermost axis of `in` (its other axes set). */
static LLVMValueRef emit_row_lanes(Emitter *e, const GraphNode *n, const Index *in, int lanes) {
  Gen *gen = e->gen;
  LLVMBuilderRef b = e->b;
  LLVMTypeRef t = gen_type(gen, n->dtype), vt = LLVMVectorType(t, (unsigned)lanes);
  int64_t length = in->shape->dims[in->shape->rank - 1], whole = length / lanes * lanes;
  /* A whole-vector alloca: mem2reg makes it a phi of the chunk loop. */
  LLVMValueRef acc = gen_entry_alloca(gen, vt, "lanes");
  LLVMValueRef init[ROW_LANES_BYTES / 4];
  for (int i = 0; i < lanes; i++)
    init[i] = reduction_init(e, n);
  LLVMBuildStore(b, LLVMConstVector(init, (unsigned)lanes), acc);
  int mark = e->memo_count;
  GenLoop c, l;
  gen_loop_begin(gen, &c, gen_i64(gen, 0), gen_i64(gen, whole));
  LLVMValueRef stretch = emit_stretch(e, n->inputs[0], in, c.index, lanes);
  LLVMBuildStore(b, reduction_step(e, n, LLVMBuildLoad2(b, vt, acc, ""), stretch), acc);
  /* the chunk loop steps by `lanes`: gen_loop_end adds one more */
  c.index = LLVMBuildAdd(b, c.index, gen_i64(gen, lanes - 1), "");
  gen_loop_end(gen, &c);
  LLVMValueRef v = LLVMBuildLoad2(b, vt, acc, "");
  for (int half = lanes / 2; half > 0; half /= 2)
    v = combine_halves(e, n, v, half);
  LLVMValueRef row = gen_entry_alloca(gen, t, "row");
  LLVMBuildStore(b, LLVMBuildExtractElement(b, v, gen_i32(gen, 0), ""), row);
  gen_loop_begin(gen, &l, gen_i64(gen, whole), gen_i64(gen, length));
  v = emit_row_element(e, n->inputs[0], in, l.index);
  LLVMBuildStore(b, reduction_step(e, n, LLVMBuildLoad2(b, t, row, ""), v), row);
  e->memo_count = mark;
  gen_loop_end(gen, &l);
  return LLVMBuildLoad2(b, t, row, "");
}

/* Sums or maxes the input over the reduced axes at output index `at`: in
 * row-major order, as the evaluator's does, except for the lanes of the
 * innermost axis (above). */
LLVMValueRef loop_emit_reduction(Emitter *e, GraphId id, Index *at) {
  Gen *gen = e->gen;
  const GraphNode *n = loop_node_of(e, id);
  const GraphNode *x = loop_node_of(e, n->inputs[0]);
  LLVMTypeRef t = gen_type(gen, n->dtype);
  int lanes = row_lanes(e, n, x), inner = x->shape.rank - 1;
  loop_settle(e, at);
  LLVMValueRef acc = gen_entry_alloca(gen, t, "acc");
  LLVMBuildStore(e->b, reduction_init(e, n), acc);
  Index in = loop_new_index(e, &x->shape);
  GenLoop loops[GRAPH_MAX_RANK];
  int num_loops = 0, mark = e->memo_count;
  for (int d = 0; d < x->shape.rank; d++) {
    if (!(n->attrs.axes & (1u << d))) {
      in.axis[d] = at->axis[d];
      continue;
    }
    if (lanes && d == inner)
      continue;
    gen_loop_begin(gen, &loops[num_loops], gen_i64(gen, 0), gen_i64(gen, x->shape.dims[d]));
    in.axis[d] = loops[num_loops++].index;
  }
  LLVMValueRef v = lanes ? emit_row_lanes(e, n, &in, lanes) : loop_emit(e, n->inputs[0], &in);
  LLVMBuildStore(e->b, reduction_step(e, n, LLVMBuildLoad2(e->b, t, acc, ""), v), acc);
  while (num_loops > 0)
    gen_loop_end(gen, &loops[--num_loops]);
  e->memo_count = mark;
  return LLVMBuildLoad2(e->b, t, acc, "");
}

/* Opens the loop over this thread's share of a row of `length` elements
 * (ptx_row.h: steps s < ptx_row_steps(length, threads, tid)) and returns its
 * element l = tid + s * threads; close it with gen_loop_end(step). */
static LLVMValueRef begin_share(Emitter *e, int64_t length, GenLoop *step) {
  LLVMBuilderRef b = e->b;
  int64_t threads = e->split->threads;
  LLVMValueRef steps =
      LLVMBuildUDiv(b, LLVMBuildSub(b, gen_i64(e->gen, length + threads - 1), e->tid, ""),
                    gen_i64(e->gen, threads), "steps");
  gen_loop_begin(e->gen, step, gen_i64(e->gen, 0), steps);
  return LLVMBuildAdd(b, e->tid, LLVMBuildMul(b, step->index, gen_i64(e->gen, threads), ""), "");
}

/* Element l of the row flattened row-major over the axes in `axes` of
 * `shape` (`length` elements in all) into those axes of `at`. */
static void row_element_axes(Emitter *e, LLVMValueRef l, const GraphShape *shape, uint32_t axes,
                             int64_t length, Index *at) {
  LLVMBuilderRef b = e->b;
  int64_t stride = 1;
  for (int d = shape->rank - 1; d >= 0; d--) {
    if (!(axes & (1u << d)))
      continue;
    int64_t dim = shape->dims[d];
    LLVMValueRef v = stride > 1 ? LLVMBuildUDiv(b, l, gen_i64(e->gen, stride), "") : l;
    if (dim == 1)
      v = gen_i64(e->gen, 0);
    else if (stride * dim < length)
      v = LLVMBuildURem(b, v, gen_i64(e->gen, dim), "");
    at->axis[d] = v;
    stride *= dim;
  }
}

/* A reduction the threads of a row share (ptx_row.h): thread tid takes
 * elements ptx_row_element(tid, s, threads) of the reduced axes flattened
 * row-major, s < ptx_row_steps(length, threads, tid), accumulating them in
 * that order; the split's combine then gives every thread of the row the
 * row's value. Reductions nested in its input stay serial (emit_reduction). */
static LLVMValueRef emit_shared_reduction(Emitter *e, GraphId id, Index *at, int slot) {
  Gen *gen = e->gen;
  LLVMBuilderRef b = e->b;
  const GraphNode *n = loop_node_of(e, id);
  const GraphNode *x = loop_node_of(e, n->inputs[0]);
  LLVMTypeRef t = gen_type(gen, n->dtype);
  int64_t threads = e->split->threads, length = 1;
  for (int d = 0; d < x->shape.rank; d++)
    if (n->attrs.axes & (1u << d))
      length *= x->shape.dims[d];
  loop_settle(e, at);
  LLVMValueRef acc = gen_entry_alloca(gen, t, "acc");
  LLVMBuildStore(b, reduction_init(e, n), acc);
  GenLoop step;
  LLVMValueRef l = begin_share(e, length, &step);
  Index in = loop_new_index(e, &x->shape);
  int mark = e->memo_count;
  for (int d = 0; d < x->shape.rank; d++)
    if (!(n->attrs.axes & (1u << d)))
      in.axis[d] = at->axis[d];
  row_element_axes(e, l, &x->shape, n->attrs.axes, length, &in);
  LLVMValueRef v = loop_emit(e, n->inputs[0], &in);
  LLVMBuildStore(b, reduction_step(e, n, LLVMBuildLoad2(b, t, acc, ""), v), acc);
  gen_loop_end(gen, &step);
  e->memo_count = mark;
  LLVMValueRef partial = LLVMBuildLoad2(b, t, acc, "");
  return e->split->combine(gen, e->function, slot, n, partial, e->tid, threads);
}

/* The outer axes of `row` (the flattened index over them). */
static void split_row(Emitter *e, const GraphShape *s, int outer, LLVMValueRef row, Index *at) {
  int64_t stride = 1;
  for (int d = outer - 1; d >= 0; d--) {
    LLVMValueRef v = LLVMBuildUDiv(e->b, row, gen_i64(e->gen, stride), "");
    if (d > 0)
      v = LLVMBuildURem(e->b, v, gen_i64(e->gen, s->dims[d]), "");
    at->axis[d] = v;
    stride *= s->dims[d];
  }
}

static void hoist_reductions(Emitter *e, const Index *row) {
  for (int i = 0; i < e->kernel->num_hoisted; i++) {
    const KernelHoisted *h = &e->kernel->hoisted[i];
    Index at = loop_new_index(e, &loop_node_of(e, h->node)->shape);
    for (int d = 0; d < at.shape->rank; d++) {
      LLVMValueRef v = gen_i64(e->gen, h->index[d].constant);
      for (int var = 0; var < e->kernel->outer_axes; var++)
        if (h->index[d].coef[var] != 0)
          v = LLVMBuildAdd(
              e->b, v,
              LLVMBuildMul(e->b, row->axis[var], gen_i64(e->gen, h->index[d].coef[var]), ""), "");
      at.axis[d] = v;
    }
    e->hoisted[i] = e->split ? emit_shared_reduction(e, h->node, &at, i)
                             : loop_emit_reduction(e, h->node, &at);
    if (loop_rounds_to_bf16(loop_node_of(e, h->node)))
      e->hoisted[i] = gen_bf16_round(e->gen, e->hoisted[i]);
    /* A row statistic the kernel stores (KernelPlanOptions.
     * store_row_statistics): one element a row, at the row's own index. */
    GraphId out[3];
    for (int o = 1, count = kernel_outputs(e->kernel, out); o < count; o++)
      if (out[o] == h->node) {
        GraphDtype dtype = loop_node_of(e, h->node)->dtype;
        gen_store_value(e->gen, dtype, e->hoisted[i],
                        gen_element(e->gen, gen_storage_type(e->gen, dtype), e->args[o],
                                    loop_linear_of(e, &at)));
      }
  }
}

/* A root reduction over leading axes, such as a bias's gradient (a sum
 * over batch and positions into [1, 1, N]) or a position embedding's (over
 * the batch into [1, T, N]). Reading down a column for each output element
 * touched a new page per element (0.3 GB/s in gpt-small's profile);
 * instead the rows (the reduced axes' elements, in order) are read in
 * order and each adds its [begin, end) stretch of the flattened kept axes
 * into the output, which holds the accumulators. Each element still
 * accumulates in row-major order, as the evaluator's does, and the inner
 * loop is contiguous, so it vectorizes. Reduction roots never write in
 * place (kernel_inplace.c), so no input shares the output. The form needs
 * the reduced axes to be consecutive, ignoring axes of length 1: the input
 * is then [groups, rows, columns] flattened, the output [groups, columns],
 * and each group (kept axes before the reduced ones: the groups of rows
 * that kernel_split_column_sums makes) is a column reduction of its own. */
static bool is_column_reduction(const Emitter *e) {
  const GraphNode *n = loop_node_of(e, e->kernel->root);
  if (n->op != GRAPH_OP_REDUCE_SUM && n->op != GRAPH_OP_REDUCE_MAX)
    return false;
  const GraphNode *x = loop_node_of(e, n->inputs[0]);
  int last = n->shape.rank - 1;
  uint32_t axes = n->attrs.axes;
  if (!e->gen->target->lane_reductions || e->kernel->num_hoisted > 0 || last < 1 ||
      e->kernel->outer_axes != last + 1 || (axes >> last) & 1u || axes == 0)
    return false;
  int first_reduced = 0, last_reduced = last;
  while (!((axes >> first_reduced) & 1u))
    first_reduced++;
  while (!((axes >> last_reduced) & 1u))
    last_reduced--;
  for (int d = first_reduced; d < last_reduced; d++)
    if (!((axes >> d) & 1u) && x->shape.dims[d] != 1)
      return false;
  return true;
}

/* Accumulates output elements [begin, end) of the root into `acc` (f32 or
 * f64 slots, acc[j - base] for element j). */
static void emit_column_sums(Emitter *e, LLVMValueRef acc, LLVMValueRef base, LLVMValueRef begin,
                             LLVMValueRef end) {
  Gen *gen = e->gen;
  LLVMBuilderRef b = e->b;
  const GraphNode *n = loop_node_of(e, e->kernel->root), *x = loop_node_of(e, n->inputs[0]);
  LLVMTypeRef t = gen_type(gen, n->dtype);
  int rank = n->shape.rank;
  uint32_t axes = n->attrs.axes, group_axes = (axes & -axes) - 1;
  uint32_t column_axes = ((1u << rank) - 1) & ~axes & ~group_axes;
  int64_t groups = 1, columns = 1, rows = 1;
  for (int d = 0; d < rank; d++) {
    if ((group_axes >> d) & 1u)
      groups *= n->shape.dims[d];
    else if ((column_axes >> d) & 1u)
      columns *= n->shape.dims[d];
    else
      rows *= x->shape.dims[d];
  }
  GenLoop j;
  gen_loop_begin(gen, &j, begin, end);
  LLVMBuildStore(b, reduction_init(e, n),
                 gen_element(gen, t, acc, LLVMBuildSub(b, j.index, base, "")));
  gen_loop_end(gen, &j);
  /* Group g holds output elements [g * columns, (g + 1) * columns) and
   * input elements [g * rows * columns, (g + 1) * rows * columns). */
  LLVMValueRef width = gen_i64(gen, columns);
  GenLoop group;
  gen_loop_begin(gen, &group, LLVMBuildUDiv(b, begin, width, ""),
                 LLVMBuildUDiv(b, LLVMBuildAdd(b, end, gen_i64(gen, columns - 1), ""), width, ""));
  LLVMValueRef first = LLVMBuildMul(b, group.index, width, "");
  LLVMValueRef after = LLVMBuildAdd(b, first, width, "");
  LLVMValueRef from = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, begin, first, ""), begin,
                                      first, "");
  LLVMValueRef to = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, end, after, ""), end, after, "");
  LLVMValueRef group_start = LLVMBuildMul(b, group.index, gen_i64(gen, (rows - 1) * columns), "");
  Index grouped = loop_new_index(e, &x->shape);
  row_element_axes(e, group.index, &n->shape, group_axes, groups, &grouped);
  GenLoop row_loops[GRAPH_MAX_RANK];
  LLVMValueRef row = group_start;
  int num_rows = 0;
  for (int d = 0; d < rank; d++) {
    if (!((axes >> d) & 1u)) {
      if (!((group_axes >> d) & 1u))
        grouped.axis[d] = gen_i64(gen, 0);
      continue;
    }
    grouped.axis[d] = gen_i64(gen, 0);
    if (x->shape.dims[d] == 1)
      continue;
    gen_loop_begin(gen, &row_loops[num_rows], gen_i64(gen, 0), gen_i64(gen, x->shape.dims[d]));
    grouped.axis[d] = row_loops[num_rows++].index;
    row = LLVMBuildAdd(
        b, row, LLVMBuildMul(b, grouped.axis[d], gen_i64(gen, loop_stride_of(&x->shape, d)), ""), "");
  }
  gen_loop_begin(gen, &j, from, to);
  int mark = e->memo_count;
  Index in = loop_new_index(e, &x->shape);
  memcpy(in.axis, grouped.axis, sizeof(LLVMValueRef) * (size_t)rank);
  row_element_axes(e, LLVMBuildSub(b, j.index, first, ""), &n->shape, column_axes, columns, &in);
  in.linear = LLVMBuildAdd(b, row, j.index, "");
  LLVMValueRef v = loop_emit(e, n->inputs[0], &in);
  LLVMValueRef slot = gen_element(gen, t, acc, LLVMBuildSub(b, j.index, base, ""));
  LLVMBuildStore(b, reduction_step(e, n, LLVMBuildLoad2(b, t, slot, ""), v), slot);
  e->memo_count = mark;
  gen_loop_end(gen, &j);
  while (num_rows > 0)
    gen_loop_end(gen, &row_loops[--num_rows]);
  gen_loop_end(gen, &group);
}

/* The output holds the accumulators, except in bf16: there each stretch of
 * BF16_COLUMNS columns sums into f32 slots on the stack and is rounded
 * once at the end, so accumulation stays f32. */
#define BF16_COLUMNS 256
static void emit_column_reduction(Emitter *e, LLVMValueRef begin, LLVMValueRef end) {
  Gen *gen = e->gen;
  const GraphNode *n = loop_node_of(e, e->kernel->root);
  if (n->dtype != GRAPH_BF16) {
    emit_column_sums(e, e->args[0], gen_i64(gen, 0), begin, end);
    return;
  }
  LLVMBuilderRef b = e->b;
  LLVMValueRef acc = gen_entry_alloca(gen, LLVMArrayType(gen->f32, BF16_COLUMNS), "columns");
  acc = LLVMBuildBitCast(b, acc, LLVMPointerType(gen->f32, 0), "");
  LLVMValueRef width = gen_i64(gen, BF16_COLUMNS);
  LLVMValueRef count = LLVMBuildSDiv(
      b, LLVMBuildAdd(b, LLVMBuildSub(b, end, begin, ""), gen_i64(gen, BF16_COLUMNS - 1), ""),
      width, "");
  GenLoop c, j;
  gen_loop_begin(gen, &c, gen_i64(gen, 0), count);
  LLVMValueRef c0 = LLVMBuildAdd(b, begin, LLVMBuildMul(b, c.index, width, ""), "");
  LLVMValueRef c1 = LLVMBuildAdd(b, c0, width, "");
  c1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, c1, end, ""), c1, end, "");
  emit_column_sums(e, acc, c0, c0, c1);
  gen_loop_begin(gen, &j, c0, c1);
  LLVMValueRef v = LLVMBuildLoad2(
      b, gen->f32, gen_element(gen, gen->f32, acc, LLVMBuildSub(b, j.index, c0, "")), "");
  gen_store_value(gen, GRAPH_BF16, v, gen_element(gen, gen->i16, e->args[0], j.index));
  gen_loop_end(gen, &j);
  gen_loop_end(gen, &c);
}

/* Whether a concat root's input `value` is a reshape, computed here or a
 * view, that keeps the row (the outer axes) of a root whose row is the
 * concat's axis alone: its part of a row is then its input's row,
 * flattened, and loops over that input's own axes keep a reshape from
 * splitting the row's axis into digits (heads [B, T, h, k] read as
 * [B, T, h * k]). A reshape stored by a kernel of its own is read from
 * its buffer, its input being no argument of this kernel. */
static bool flattens_row(const Emitter *e, GraphId value) {
  const GraphNode *root = loop_node_of(e, e->kernel->root), *n = loop_node_of(e, value);
  KernelPlacement p = e->gen->plan->placement[value];
  int outer = e->kernel->outer_axes;
  if (n->op != GRAPH_OP_RESHAPE || (p != KERNEL_INLINED && p != KERNEL_VIEW) ||
      root->attrs.axis != root->shape.rank - 1 ||
      outer != root->shape.rank - 1)
    return false;
  const GraphShape *x = &loop_node_of(e, n->inputs[0])->shape;
  if (x->rank < outer)
    return false;
  for (int d = 0; d < outer; d++)
    if (x->dims[d] != root->shape.dims[d])
      return false;
  return true;
}

/* The inner loops of one row (axes from k->outer_axes on) and the store of
 * each element: with `slot` -1, of the root over its shape; else of a
 * concat root's input `slot` over that input's part of the row. `row` holds
 * the outer axes. */
static void emit_row_part(Emitter *e, const Index *row, int slot) {
  Gen *gen = e->gen;
  const Kernel *k = e->kernel;
  const GraphNode *root = graph_node(gen->graph, k->root);
  GraphId value = slot < 0 ? k->root : root->inputs[slot];
  int axis = slot < 0 ? -1 : root->attrs.axis;
  int64_t base = 0;
  for (int i = 0; i < slot; i++)
    base += loop_node_of(e, root->inputs[i])->shape.dims[axis];
  bool flat = slot >= 0 && flattens_row(e, value);
  if (flat)
    value = loop_node_of(e, value)->inputs[0];
  const GraphShape *shape = &loop_node_of(e, value)->shape;
  Index at = loop_new_index(e, &root->shape), in = loop_new_index(e, shape);
  for (int d = 0; d < k->outer_axes; d++)
    at.axis[d] = in.axis[d] = row->axis[d];
  GenLoop inner[GRAPH_MAX_RANK];
  LLVMValueRef offset = gen_i64(gen, base);
  for (int d = k->outer_axes; d < shape->rank; d++) {
    gen_loop_begin(gen, &inner[d], gen_i64(gen, 0), gen_i64(gen, shape->dims[d]));
    at.axis[d] = in.axis[d] = inner[d].index;
    if (flat || d == axis)
      offset = LLVMBuildAdd(
          e->b, offset,
          LLVMBuildMul(e->b, in.axis[d], gen_i64(gen, flat ? loop_stride_of(shape, d) : 1), ""), "");
  }
  if (axis >= 0)
    at.axis[axis] = offset;
  /* A loop kernel's further outputs other than its hoisted reductions
   * (stored by hoist_reductions) have the root's shape (kernel.c). All are
   * computed before any is stored: an output may be written over an input
   * that another reads at the same element (kernel_inplace.c). */
  GraphId out[3] = {value};
  LLVMValueRef v[3];
  int count = slot < 0 ? kernel_outputs(k, out) : 1;
  for (int o = 0; o < count; o++)
    v[o] = o > 0 && kernel_is_hoisted(k, out[o]) ? NULL : loop_emit(e, out[o], slot < 0 ? &at : &in);
  LLVMValueRef linear = loop_linear_of(e, &at);
  for (int o = 0; o < count; o++) {
    GraphDtype dtype = o == 0 ? root->dtype : loop_node_of(e, out[o])->dtype;
    if (v[o])
      gen_store_value(gen, dtype, v[o],
                      gen_element(gen, gen_storage_type(gen, dtype), e->args[o], linear));
  }
  /* The innermost loop's vectors, 4 at a time: a chain such as a GELU's
   * (a division, a polynomial, bf16 roundings) is long enough that one
   * vector an iteration left the core waiting on it; LLVM interleaves none
   * by itself in loops with calls (the bf16 roundings on AVX512-BF16).
   * bf16 gpt-medium: GELU's backward kernels 30% faster, its forward 25%
   * (bench/RESULTS.md). */
  for (int d = shape->rank - 1; d >= k->outer_axes; d--)
    gen_loop_end_interleaved(gen, &inner[d], d == shape->rank - 1 && gen->vector_bits > 0 ? 4 : 1);
}

/* Row by row over the outer axes: the row's hoisted reductions, then the
 * inner loops over the remaining axes. */
static void emit_rows(Emitter *e, LLVMValueRef begin, LLVMValueRef end) {
  Gen *gen = e->gen;
  const Kernel *k = e->kernel;
  const GraphNode *root = graph_node(gen->graph, k->root);
  GenLoop rows;
  gen_loop_begin(gen, &rows, begin, end);
  Index row = loop_new_index(e, &root->shape);
  split_row(e, &root->shape, k->outer_axes, rows.index, &row);
  hoist_reductions(e, &row);
  /* A concat along an inner axis stores each input's part in loops of its
   * own, reading that input alone: selecting among every input's value at
   * each element read all of them, at clamped indices that LLVM could not
   * vectorize (the gradient of a tensor read as slices, merge_dots.c). */
  if (root->op == GRAPH_OP_CONCAT && root->attrs.axis >= k->outer_axes)
    for (int slot = 0; slot < root->num_inputs; slot++)
      emit_row_part(e, &row, slot);
  else
    emit_row_part(e, &row, -1);
  gen_loop_end(gen, &rows);
}

/* The GPU's cooperative rows (ptx_row.h): work item `item` is thread
 * ptx_row_tid of row ptx_row_of. The row's hoisted reductions are shared;
 * then a root reduction whose row is one element is shared as well and
 * thread 0 stores it, or else thread tid computes and stores elements
 * ptx_row_element(tid, s, threads) of the row's inner axes, flattened
 * row-major (neighbouring threads, neighbouring elements). */
static void emit_split_rows(Emitter *e, LLVMValueRef item) {
  Gen *gen = e->gen;
  LLVMBuilderRef b = e->b;
  const Kernel *k = e->kernel;
  const GraphNode *root = graph_node(gen->graph, k->root);
  const GraphShape *shape = &root->shape;
  LLVMTypeRef t = gen_storage_type(gen, root->dtype);
  int64_t threads = e->split->threads, inner = 1;
  for (int d = k->outer_axes; d < shape->rank; d++)
    inner *= shape->dims[d];
  LLVMValueRef row = LLVMBuildUDiv(b, item, gen_i64(gen, threads), "row");
  e->tid = LLVMBuildURem(b, item, gen_i64(gen, threads), "tid");
  Index at = loop_new_index(e, shape);
  split_row(e, shape, k->outer_axes, row, &at);
  hoist_reductions(e, &at);
  if ((root->op == GRAPH_OP_REDUCE_SUM || root->op == GRAPH_OP_REDUCE_MAX) && inner == 1) {
    for (int d = k->outer_axes; d < shape->rank; d++)
      at.axis[d] = gen_i64(gen, 0);
    LLVMValueRef v = emit_shared_reduction(e, k->root, &at, k->num_hoisted);
    LLVMValueRef slot = gen_element(gen, t, e->args[0], loop_linear_of(e, &at));
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
    LLVMBasicBlockRef store = LLVMAppendBasicBlockInContext(gen->context, fn, "store");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(gen->context, fn, "stored");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, e->tid, gen_i64(gen, 0), ""), store, done);
    LLVMPositionBuilderAtEnd(b, store);
    gen_store_value(gen, root->dtype, v, slot);
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, done);
    return;
  }
  GenLoop step;
  LLVMValueRef l = begin_share(e, inner, &step);
  uint32_t inner_axes = ((1u << shape->rank) - 1) & ~((1u << k->outer_axes) - 1);
  row_element_axes(e, l, shape, inner_axes, inner, &at);
  LLVMValueRef v = loop_emit(e, k->root, &at);
  gen_store_value(gen, root->dtype, v, gen_element(gen, t, e->args[0], loop_linear_of(e, &at)));
  gen_loop_end(gen, &step);
}

/* Whether the buffers of every kernel that shares `function` lie in
 * disjoint memory. The memory plan gives buffers live in one kernel
 * disjoint ranges, and an in-place kernel names the buffer it writes over
 * once (kernel_inplace.c), so this holds; it is checked, not assumed,
 * because noalias on a pointer that does alias is undefined behaviour. */
static bool buffers_disjoint(const KernelPlan *plan, int function) {
  for (int ki = 0; ki < plan->num_kernels; ki++) {
    const Kernel *k = &plan->kernels[ki];
    if (k->function != function)
      continue;
    for (int i = 0; i < k->num_args; i++)
      for (int j = i + 1; j < k->num_args; j++) {
        const KernelBuffer *a = &plan->buffers[k->args[i]], *b = &plan->buffers[k->args[j]];
        if (a->region == b->region && a->offset < b->offset + b->bytes &&
            b->offset < a->offset + a->bytes)
          return false;
      }
  }
  return true;
}

/* On the CPU a loop kernel's body is a function of its typed buffers,
 * marked noalias, and [begin, end), which the range function calls and
 * LLVM inlines (alwaysinline): the inliner turns noalias into scoped alias
 * metadata, so the vectorizer needs no runtime check of the output
 * against the inputs. Leaves the builder at the body's entry, with its
 * parameters in `args`, `begin` and `end`. */
static void emit_body_call(Gen *gen, int function, const Kernel *k, LLVMValueRef range,
                           LLVMValueRef *args, LLVMValueRef *begin, LLVMValueRef *end) {
  int n = k->num_args;
  LLVMTypeRef *params = malloc(sizeof(LLVMTypeRef) * (size_t)(n + 2));
  LLVMValueRef *values = malloc(sizeof(LLVMValueRef) * (size_t)(n + 2));
  if (!params || !values)
    abort();
  for (int i = 0; i < n; i++) {
    values[i] = args[i];
    params[i] = LLVMTypeOf(args[i]);
  }
  values[n] = LLVMGetParam(range, 1);
  values[n + 1] = LLVMGetParam(range, 2);
  params[n] = params[n + 1] = gen->i64;
  char name[160];
  snprintf(name, sizeof name, "%s_body", LLVMGetValueName(range));
  LLVMTypeRef type = LLVMFunctionType(gen->void_type, params, (unsigned)(n + 2), false);
  LLVMValueRef body = LLVMAddFunction(gen->module, name, type);
  LLVMSetLinkage(body, LLVMInternalLinkage);
  const char *attributes[2] = {"alwaysinline", "nounwind"};
  gen_add_attributes(gen, body, attributes, 2);
  if (buffers_disjoint(gen->plan, function)) {
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (int i = 0; i < n; i++)
      LLVMAddAttributeAtIndex(body, (unsigned)(i + 1),
                              LLVMCreateEnumAttribute(gen->context, noalias, 0));
  }
  LLVMBuildCall2(gen->builder, type, body, values, (unsigned)(n + 2), "");
  LLVMBuildRetVoid(gen->builder);
  LLVMPositionBuilderAtEnd(gen->builder,
                           LLVMAppendBasicBlockInContext(gen->context, body, "entry"));
  for (int i = 0; i < n; i++)
    args[i] = LLVMGetParam(body, (unsigned)i);
  *begin = LLVMGetParam(body, (unsigned)n);
  *end = LLVMGetParam(body, (unsigned)n + 1);
  free(params);
  free(values);
}

static void emit_loop_function(Gen *gen, int function, const Kernel *k,
                             const RowSplit *split) {
  LLVMValueRef fn = gen_kernel_function(gen, function);
  Emitter e = {.gen = gen, .b = gen->builder, .kernel = k, .function = function, .split = split};
  e.args = malloc(sizeof(LLVMValueRef) * (size_t)k->num_args);
  e.hoisted = calloc((size_t)(k->num_hoisted ? k->num_hoisted : 1), sizeof(LLVMValueRef));
  if (!e.args || !e.hoisted)
    abort();
  for (int i = 0; i < k->num_args; i++)
    e.args[i] = gen_kernel_arg(
        gen, LLVMGetParam(fn, 0), i,
        gen_storage_type(gen, graph_node(gen->graph, gen->plan->buffers[k->args[i]].node)->dtype));
  LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
  if (split && split->over_range) {
    GenLoop item;
    gen_loop_begin(gen, &item, begin, end);
    emit_split_rows(&e, item.index);
    gen_loop_end(gen, &item);
  } else if (split) {
    emit_split_rows(&e, begin);
  } else {
    if (gen->target->noalias_body)
      emit_body_call(gen, function, k, fn, e.args, &begin, &end);
    if (is_column_reduction(&e))
      emit_column_reduction(&e, begin, end);
    else
      emit_rows(&e, begin, end);
  }
  LLVMBuildRetVoid(gen->builder);
  free(e.args);
  free(e.hoisted);
  free(e.memo);
}

void emit_loop_kernel(Gen *gen, int function, const Kernel *k) {
  emit_loop_function(gen, function, k, NULL);
}

void emit_split_loop_kernel(Gen *gen, int function, const Kernel *k,
                                const RowSplit *split) {
  emit_loop_function(gen, function, k, split);
}
