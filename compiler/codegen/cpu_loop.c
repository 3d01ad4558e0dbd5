/* Loop kernels: a loop nest over the root's output in which every fused
 * node is computed at the index its consumer asks for. Movement ops only
 * rewrite the index, so views cost index arithmetic, not copies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* Where a node is read: per-axis indices and/or the row-major linear index,
 * each computed on first use. Ids tell the memo which reads are the same. */
typedef struct Index {
  int id;
  const GraphShape *shape;
  LLVMValueRef linear;
  LLVMValueRef axis[GRAPH_MAX_RANK];
} Index;

typedef struct Memo {
  GraphId node;
  int index_id;
  LLVMValueRef value;
} Memo;

typedef struct Emitter {
  CpuGen *gen;
  LLVMBuilderRef b;
  const Kernel *kernel;
  LLVMValueRef *args;    /* typed buffer pointers, per kernel argument */
  LLVMValueRef *hoisted; /* per hoisted reduction: its value in this row */
  Memo *memo;            /* values valid where the builder is now */
  int memo_count, memo_capacity;
  int next_index_id;
  int function;
  const CpuRowSplit *split; /* the GPU's cooperative rows, or NULL */
  LLVMValueRef tid;         /* with split: this thread's place in its row */
} Emitter;

static LLVMValueRef emit(Emitter *e, GraphId id, Index *at);

static Index new_index(Emitter *e, const GraphShape *shape) {
  Index at;
  memset(&at, 0, sizeof at);
  at.id = e->next_index_id++;
  at.shape = shape;
  return at;
}

/* Product of dims[from..to). */
static int64_t dims_product(const GraphShape *s, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; d++)
    p *= s->dims[d];
  return p;
}

static int64_t stride_of(const GraphShape *s, int axis) {
  return dims_product(s, axis + 1, s->rank);
}

static LLVMValueRef axis_of(Emitter *e, Index *at, int d) {
  if (at->axis[d])
    return at->axis[d];
  const GraphShape *s = at->shape;
  if (s->dims[d] == 1)
    return at->axis[d] = cpu_i64(e->gen, 0);
  LLVMValueRef v = LLVMBuildUDiv(e->b, at->linear, cpu_i64(e->gen, stride_of(s, d)), "");
  if (d > 0)
    v = LLVMBuildURem(e->b, v, cpu_i64(e->gen, s->dims[d]), "");
  return at->axis[d] = v;
}

static LLVMValueRef linear_of(Emitter *e, Index *at) {
  if (at->linear)
    return at->linear;
  LLVMValueRef sum = cpu_i64(e->gen, 0);
  for (int d = 0; d < at->shape->rank; d++) {
    if (at->shape->dims[d] == 1)
      continue;
    LLVMValueRef term =
        LLVMBuildMul(e->b, axis_of(e, at, d), cpu_i64(e->gen, stride_of(at->shape, d)), "");
    sum = LLVMBuildAdd(e->b, sum, term, "");
  }
  return at->linear = sum;
}

/* Every axis computed now, so values made later inside a loop body never
 * leak out of it through the index's cache. */
static void settle(Emitter *e, Index *at) {
  for (int d = 0; d < at->shape->rank; d++)
    axis_of(e, at, d);
  linear_of(e, at);
}

static void remember(Emitter *e, GraphId node, int index_id, LLVMValueRef value) {
  if (e->memo_count == e->memo_capacity) {
    e->memo_capacity = e->memo_capacity ? 2 * e->memo_capacity : 64;
    e->memo = realloc(e->memo, sizeof *e->memo * (size_t)e->memo_capacity);
    if (!e->memo)
      abort(); /* out of memory while building LLVM IR */
  }
  e->memo[e->memo_count++] = (Memo){node, index_id, value};
}

static LLVMValueRef recall(const Emitter *e, GraphId node, int index_id) {
  for (int i = e->memo_count - 1; i >= 0; i--)
    if (e->memo[i].node == node && e->memo[i].index_id == index_id)
      return e->memo[i].value;
  return NULL;
}

static const GraphNode *node_of(const Emitter *e, GraphId id) {
  return graph_node(e->gen->graph, id);
}

static bool is_float(const GraphNode *n) { return kernel_storage_dtype(n->dtype) != GRAPH_I32; }

static LLVMValueRef math1(Emitter *e, const char *f32_name, const char *f64_name,
                          const GraphNode *n, LLVMValueRef x) {
  LLVMTypeRef t = cpu_type(e->gen, n->dtype);
  bool single = t == e->gen->f32;
  return cpu_math_call(e->gen, single ? f32_name : f64_name, t, &x, 1);
}

static LLVMValueRef is_nan(Emitter *e, LLVMValueRef x) {
  return LLVMBuildFCmp(e->b, LLVMRealUNO, x, x, "");
}

static LLVMValueRef emit_unary(Emitter *e, const GraphNode *n, LLVMValueRef x) {
  LLVMBuilderRef b = e->b;
  LLVMTypeRef t = cpu_type(e->gen, n->dtype);
  bool fl = is_float(n);
  switch (n->op) {
  case GRAPH_OP_NEG: return fl ? LLVMBuildFNeg(b, x, "") : LLVMBuildNeg(b, x, "");
  case GRAPH_OP_EXP:
    if (t == e->gen->f32 && !e->gen->gpu_threads) return cpu_exp_f32(e->gen, x);
    return math1(e, "expf", "exp", n, x);
  case GRAPH_OP_LOG: return math1(e, "logf", "log", n, x);
  case GRAPH_OP_SQRT: return cpu_intrinsic(e->gen, "llvm.sqrt", &t, 1, &x, 1);
  case GRAPH_OP_RSQRT:
    return LLVMBuildFDiv(b, LLVMConstReal(t, 1.0), cpu_intrinsic(e->gen, "llvm.sqrt", &t, 1, &x, 1),
                         "");
  case GRAPH_OP_TANH:
    if (t == e->gen->f32 && !e->gen->gpu_threads) return cpu_tanh_f32(e->gen, x);
    return math1(e, "tanhf", "tanh", n, x);
  case GRAPH_OP_SIN: return math1(e, "sinf", "sin", n, x);
  case GRAPH_OP_COS: return math1(e, "cosf", "cos", n, x);
  case GRAPH_OP_RECIP: return LLVMBuildFDiv(b, LLVMConstReal(t, 1.0), x, "");
  default: /* ABS */
    if (fl)
      return cpu_intrinsic(e->gen, "llvm.fabs", &t, 1, &x, 1);
    return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, cpu_i32(e->gen, 0), ""),
                           LLVMBuildNeg(b, x, ""), x, "");
  }
}

/* max keeps `a` on ties and takes a NaN `b`, as the evaluator does. */
static LLVMValueRef emit_max_min(Emitter *e, bool fl, bool max, LLVMValueRef a, LLVMValueRef bv) {
  LLVMBuilderRef b = e->b;
  LLVMValueRef take_b;
  if (fl) {
    LLVMValueRef ordered =
        max ? LLVMBuildFCmp(b, LLVMRealOLT, a, bv, "") : LLVMBuildFCmp(b, LLVMRealOLT, bv, a, "");
    take_b = LLVMBuildOr(b, ordered, is_nan(e, bv), "");
  } else {
    take_b =
        max ? LLVMBuildICmp(b, LLVMIntSLT, a, bv, "") : LLVMBuildICmp(b, LLVMIntSLT, bv, a, "");
  }
  return LLVMBuildSelect(b, take_b, bv, a, "");
}

static LLVMValueRef emit_binary(Emitter *e, const GraphNode *n, LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef b = e->b;
  bool fl = is_float(node_of(e, n->inputs[0]));
  LLVMValueRef bit;
  switch (n->op) {
  case GRAPH_OP_ADD: return fl ? LLVMBuildFAdd(b, x, y, "") : LLVMBuildAdd(b, x, y, "");
  case GRAPH_OP_SUB: return fl ? LLVMBuildFSub(b, x, y, "") : LLVMBuildSub(b, x, y, "");
  case GRAPH_OP_MUL: return fl ? LLVMBuildFMul(b, x, y, "") : LLVMBuildMul(b, x, y, "");
  case GRAPH_OP_DIV: return LLVMBuildFDiv(b, x, y, "");
  case GRAPH_OP_MAX: return emit_max_min(e, fl, true, x, y);
  case GRAPH_OP_MIN: return emit_max_min(e, fl, false, x, y);
  case GRAPH_OP_POW: {
    LLVMTypeRef t = cpu_type(e->gen, n->dtype);
    LLVMValueRef args[2] = {x, y};
    return cpu_math_call(e->gen, t == e->gen->f32 ? "powf" : "pow", t, args, 2);
  }
  case GRAPH_OP_CMPLT:
    bit = fl ? LLVMBuildFCmp(b, LLVMRealOLT, x, y, "") : LLVMBuildICmp(b, LLVMIntSLT, x, y, "");
    return LLVMBuildZExt(b, bit, e->gen->i32, "");
  default: /* CMPEQ */
    bit = fl ? LLVMBuildFCmp(b, LLVMRealOEQ, x, y, "") : LLVMBuildICmp(b, LLVMIntEQ, x, y, "");
    return LLVMBuildZExt(b, bit, e->gen->i32, "");
  }
}

/* As the evaluator: through double, saturating to i32 with NaN -> 0. */
static LLVMValueRef emit_cast(Emitter *e, const GraphNode *n, LLVMValueRef x) {
  CpuGen *gen = e->gen;
  LLVMTypeRef from = LLVMTypeOf(x), to = cpu_type(gen, n->dtype);
  if (from == to)
    return x;
  if (to == gen->i32) {
    if (from == gen->f32)
      x = LLVMBuildFPExt(e->b, x, gen->f64, "");
    LLVMTypeRef types[2] = {gen->i32, gen->f64};
    return cpu_intrinsic(gen, "llvm.fptosi.sat", types, 2, &x, 1);
  }
  if (from == gen->i32)
    return LLVMBuildSIToFP(e->b, x, to, "");
  return to == gen->f64 ? LLVMBuildFPExt(e->b, x, to, "") : LLVMBuildFPTrunc(e->b, x, to, "");
}

static LLVMValueRef load_buffer(Emitter *e, GraphId id, Index *at) {
  const KernelPlan *plan = e->gen->plan;
  int buffer = plan->buffer_of[id];
  for (int i = 0; i < e->kernel->num_args; i++)
    if (e->kernel->args[i] == buffer) {
      GraphDtype dtype = node_of(e, id)->dtype;
      LLVMTypeRef t = cpu_storage_type(e->gen, dtype);
      LLVMValueRef ptr = cpu_element(e->gen, t, e->args[i], linear_of(e, at));
      return cpu_load_value(e->gen, dtype, ptr);
    }
  abort(); /* kernel formation lists every buffer a kernel reads */
}

/* A non-splat constant lives in a module global. */
static LLVMValueRef constant_global(Emitter *e, GraphId id) {
  CpuGen *gen = e->gen;
  if (gen->constant_data[id])
    return gen->constant_data[id];
  const GraphNode *n = node_of(e, id);
  LLVMTypeRef t = cpu_type(gen, n->dtype);
  int64_t count = n->attrs.num_values;
  LLVMValueRef *values = malloc(sizeof *values * (size_t)count);
  if (!values)
    abort();
  for (int64_t i = 0; i < count; i++)
    values[i] = cpu_constant(gen, n->dtype, n->attrs.values[i]);
  LLVMTypeRef array = LLVMArrayType(t, (unsigned)count);
  LLVMValueRef global = LLVMAddGlobal(gen->module, array, "constant");
  LLVMSetInitializer(global, LLVMConstArray(t, values, (unsigned)count));
  LLVMSetGlobalConstant(global, true);
  LLVMSetLinkage(global, LLVMPrivateLinkage);
  free(values);
  return gen->constant_data[id] = LLVMConstBitCast(global, LLVMPointerType(t, 0));
}

static LLVMValueRef emit_constant(Emitter *e, GraphId id, Index *at) {
  const GraphNode *n = node_of(e, id);
  if (n->attrs.num_values == 1)
    return cpu_constant(e->gen, n->dtype, n->attrs.values[0]);
  LLVMTypeRef t = cpu_type(e->gen, n->dtype);
  LLVMValueRef ptr = cpu_element(e->gen, t, constant_global(e, id), linear_of(e, at));
  return LLVMBuildLoad2(e->b, t, ptr, "");
}

static LLVMValueRef emit_iota(Emitter *e, const GraphNode *n, Index *at) {
  LLVMValueRef i = axis_of(e, at, n->attrs.axis);
  LLVMTypeRef t = cpu_type(e->gen, n->dtype);
  if (t == e->gen->i32)
    return LLVMBuildTrunc(e->b, i, t, "");
  return LLVMBuildSIToFP(e->b, i, t, "");
}

static LLVMValueRef emit_random(Emitter *e, const GraphNode *n, Index *at) {
  Index scalar = new_index(e, &node_of(e, n->inputs[0])->shape);
  scalar.linear = cpu_i64(e->gen, 0);
  LLVMValueRef offset = emit(e, n->inputs[0], &scalar);
  return cpu_philox_uniform(e->gen, n, offset, linear_of(e, at));
}

LLVMValueRef cpu_reduction_init(CpuGen *gen, const GraphNode *n) {
  LLVMTypeRef t = cpu_type(gen, n->dtype);
  bool fl = is_float(n);
  if (n->op == GRAPH_OP_REDUCE_SUM)
    return fl ? LLVMConstReal(t, 0.0) : cpu_i32(gen, 0);
  return fl ? LLVMConstReal(t, -INFINITY) : cpu_i32(gen, INT32_MIN);
}

/* The accumulator after one more element: a sum, or a max that keeps `a`
 * on ties and takes a NaN `v`, as the evaluator does. */
LLVMValueRef cpu_reduction_step(CpuGen *gen, const GraphNode *n, LLVMValueRef a, LLVMValueRef v) {
  LLVMBuilderRef b = gen->builder;
  bool fl = is_float(n);
  if (n->op == GRAPH_OP_REDUCE_SUM)
    return fl ? LLVMBuildFAdd(b, a, v, "") : LLVMBuildAdd(b, a, v, "");
  LLVMValueRef take =
      fl ? LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealOLT, a, v, ""),
                       LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), "")
         : LLVMBuildICmp(b, LLVMIntSLT, a, v, "");
  return LLVMBuildSelect(b, take, v, a, "");
}

static LLVMValueRef reduction_init(Emitter *e, const GraphNode *n) {
  return cpu_reduction_init(e->gen, n);
}

static LLVMValueRef reduction_step(Emitter *e, const GraphNode *n, LLVMValueRef a,
                                   LLVMValueRef v) {
  return cpu_reduction_step(e->gen, n, a, v);
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
  if (e->gen->gpu_threads || inner < 0 || !((n->attrs.axes >> inner) & 1u))
    return 0;
  int lanes = ROW_LANES_BYTES / (cpu_type(e->gen, n->dtype) == e->gen->f64 ? 8 : 4);
  return x->shape.dims[inner] >= lanes ? lanes : 0;
}

/* The input's value at `in` with its innermost axis at `i`, memoised only
 * until the caller resets e->memo_count. */
static LLVMValueRef emit_row_element(Emitter *e, GraphId input, const Index *in, LLVMValueRef i) {
  Index at = new_index(e, in->shape);
  memcpy(at.axis, in->axis, sizeof at.axis);
  at.axis[in->shape->rank - 1] = i;
  return emit(e, input, &at);
}

/* The elements start, ..., start + lanes - 1 of the row as a vector: one
 * copy of the expression in a loop over the lanes, through a stack array of
 * its own (no input can alias it), which the loop vectorizer vectorizes.
 * LANES copies gathered into a vector for the SLP vectorizer ran no faster
 * and made the base Transformer's train graph take 11 s to build, not 4. */
static LLVMValueRef emit_stretch(Emitter *e, GraphId input, const Index *in, LLVMValueRef start,
                                 int lanes) {
  CpuGen *gen = e->gen;
  LLVMBuilderRef b = e->b;
  LLVMTypeRef t = cpu_type(gen, node_of(e, input)->dtype), vt = LLVMVectorType(t, (unsigned)lanes);
  LLVMValueRef array = cpu_entry_alloca(gen, vt, "stretch");
  LLVMValueRef elements = LLVMBuildBitCast(b, array, LLVMPointerType(t, 0), "");
  CpuLoop l;
  int mark = e->memo_count;
  cpu_loop_begin(gen, &l, cpu_i64(gen, 0), cpu_i64(gen, lanes));
  LLVMValueRef v = emit_row_element(e, input, in, LLVMBuildAdd(b, start, l.index, ""));
  LLVMBuildStore(b, v, cpu_element(gen, t, elements, l.index));
  e->memo_count = mark;
  cpu_loop_end(gen, &l);
  return LLVMBuildLoad2(b, vt, array, "");
}

/* Lanes [0, half) of `v` stepped with lanes [half, 2 half). */
static LLVMValueRef combine_halves(Emitter *e, const GraphNode *n, LLVMValueRef v, int half) {
  LLVMValueRef lo[ROW_LANES_BYTES / 4], hi[ROW_LANES_BYTES / 4];
  for (int i = 0; i < half; i++) {
    lo[i] = cpu_i32(e->gen, i);
    hi[i] = cpu_i32(e->gen, i + half);
  }
  LLVMValueRef undef = LLVMGetUndef(LLVMTypeOf(v));
  LLVMValueRef a = LLVMBuildShuffleVector(e->b, v, undef, LLVMConstVector(lo, (unsigned)half), "");
  LLVMValueRef b = LLVMBuildShuffleVector(e->b, v, undef, LLVMConstVector(hi, (unsigned)half), "");
  return reduction_step(e, n, a, b);
}

/* The reduction over the innermost axis of `in` (its other axes set). */
static LLVMValueRef emit_row_lanes(Emitter *e, const GraphNode *n, const Index *in, int lanes) {
  CpuGen *gen = e->gen;
  LLVMBuilderRef b = e->b;
  LLVMTypeRef t = cpu_type(gen, n->dtype), vt = LLVMVectorType(t, (unsigned)lanes);
  int64_t length = in->shape->dims[in->shape->rank - 1], whole = length / lanes * lanes;
  /* A whole-vector alloca: mem2reg makes it a phi of the chunk loop. */
  LLVMValueRef acc = cpu_entry_alloca(gen, vt, "lanes");
  LLVMValueRef init[ROW_LANES_BYTES / 4];
  for (int i = 0; i < lanes; i++)
    init[i] = reduction_init(e, n);
  LLVMBuildStore(b, LLVMConstVector(init, (unsigned)lanes), acc);
  int mark = e->memo_count;
  CpuLoop c, l;
  cpu_loop_begin(gen, &c, cpu_i64(gen, 0), cpu_i64(gen, whole));
  LLVMValueRef stretch = emit_stretch(e, n->inputs[0], in, c.index, lanes);
  LLVMBuildStore(b, reduction_step(e, n, LLVMBuildLoad2(b, vt, acc, ""), stretch), acc);
  /* the chunk loop steps by `lanes`: cpu_loop_end adds one more */
  c.index = LLVMBuildAdd(b, c.index, cpu_i64(gen, lanes - 1), "");
  cpu_loop_end(gen, &c);
  LLVMValueRef v = LLVMBuildLoad2(b, vt, acc, "");
  for (int half = lanes / 2; half > 0; half /= 2)
    v = combine_halves(e, n, v, half);
  LLVMValueRef row = cpu_entry_alloca(gen, t, "row");
  LLVMBuildStore(b, LLVMBuildExtractElement(b, v, cpu_i32(gen, 0), ""), row);
  cpu_loop_begin(gen, &l, cpu_i64(gen, whole), cpu_i64(gen, length));
  v = emit_row_element(e, n->inputs[0], in, l.index);
  LLVMBuildStore(b, reduction_step(e, n, LLVMBuildLoad2(b, t, row, ""), v), row);
  e->memo_count = mark;
  cpu_loop_end(gen, &l);
  return LLVMBuildLoad2(b, t, row, "");
}

/* Sums or maxes the input over the reduced axes at output index `at`: in
 * row-major order, as the evaluator's does, except for the lanes of the
 * innermost axis (above). */
static LLVMValueRef emit_reduction(Emitter *e, GraphId id, Index *at) {
  CpuGen *gen = e->gen;
  const GraphNode *n = node_of(e, id);
  const GraphNode *x = node_of(e, n->inputs[0]);
  LLVMTypeRef t = cpu_type(gen, n->dtype);
  int lanes = row_lanes(e, n, x), inner = x->shape.rank - 1;
  settle(e, at);
  LLVMValueRef acc = cpu_entry_alloca(gen, t, "acc");
  LLVMBuildStore(e->b, reduction_init(e, n), acc);
  Index in = new_index(e, &x->shape);
  CpuLoop loops[GRAPH_MAX_RANK];
  int num_loops = 0, mark = e->memo_count;
  for (int d = 0; d < x->shape.rank; d++) {
    if (!(n->attrs.axes & (1u << d))) {
      in.axis[d] = at->axis[d];
      continue;
    }
    if (lanes && d == inner)
      continue;
    cpu_loop_begin(gen, &loops[num_loops], cpu_i64(gen, 0), cpu_i64(gen, x->shape.dims[d]));
    in.axis[d] = loops[num_loops++].index;
  }
  LLVMValueRef v = lanes ? emit_row_lanes(e, n, &in, lanes) : emit(e, n->inputs[0], &in);
  LLVMBuildStore(e->b, reduction_step(e, n, LLVMBuildLoad2(e->b, t, acc, ""), v), acc);
  while (num_loops > 0)
    cpu_loop_end(gen, &loops[--num_loops]);
  e->memo_count = mark;
  return LLVMBuildLoad2(e->b, t, acc, "");
}

/* Opens the loop over this thread's share of a row of `length` elements
 * (ptx_row.h: steps s < ptx_row_steps(length, threads, tid)) and returns its
 * element l = tid + s * threads; close it with cpu_loop_end(step). */
static LLVMValueRef begin_share(Emitter *e, int64_t length, CpuLoop *step) {
  LLVMBuilderRef b = e->b;
  int64_t threads = e->split->threads;
  LLVMValueRef steps =
      LLVMBuildUDiv(b, LLVMBuildSub(b, cpu_i64(e->gen, length + threads - 1), e->tid, ""),
                    cpu_i64(e->gen, threads), "steps");
  cpu_loop_begin(e->gen, step, cpu_i64(e->gen, 0), steps);
  return LLVMBuildAdd(b, e->tid, LLVMBuildMul(b, step->index, cpu_i64(e->gen, threads), ""), "");
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
    LLVMValueRef v = stride > 1 ? LLVMBuildUDiv(b, l, cpu_i64(e->gen, stride), "") : l;
    if (dim == 1)
      v = cpu_i64(e->gen, 0);
    else if (stride * dim < length)
      v = LLVMBuildURem(b, v, cpu_i64(e->gen, dim), "");
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
  CpuGen *gen = e->gen;
  LLVMBuilderRef b = e->b;
  const GraphNode *n = node_of(e, id);
  const GraphNode *x = node_of(e, n->inputs[0]);
  LLVMTypeRef t = cpu_type(gen, n->dtype);
  int64_t threads = e->split->threads, length = 1;
  for (int d = 0; d < x->shape.rank; d++)
    if (n->attrs.axes & (1u << d))
      length *= x->shape.dims[d];
  settle(e, at);
  LLVMValueRef acc = cpu_entry_alloca(gen, t, "acc");
  LLVMBuildStore(b, reduction_init(e, n), acc);
  CpuLoop step;
  LLVMValueRef l = begin_share(e, length, &step);
  Index in = new_index(e, &x->shape);
  int mark = e->memo_count;
  for (int d = 0; d < x->shape.rank; d++)
    if (!(n->attrs.axes & (1u << d)))
      in.axis[d] = at->axis[d];
  row_element_axes(e, l, &x->shape, n->attrs.axes, length, &in);
  LLVMValueRef v = emit(e, n->inputs[0], &in);
  LLVMBuildStore(b, reduction_step(e, n, LLVMBuildLoad2(b, t, acc, ""), v), acc);
  cpu_loop_end(gen, &step);
  e->memo_count = mark;
  LLVMValueRef partial = LLVMBuildLoad2(b, t, acc, "");
  return e->split->combine(gen, e->function, slot, n, partial, e->tid, threads);
}

static LLVMValueRef in_range(Emitter *e, LLVMValueRef i, int64_t lo, int64_t hi) {
  LLVMBuilderRef b = e->b;
  return LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, i, cpu_i64(e->gen, lo), ""),
                      LLVMBuildICmp(b, LLVMIntSLT, i, cpu_i64(e->gen, hi), ""), "");
}

static LLVMValueRef emit_pad(Emitter *e, const GraphNode *n, Index *at) {
  LLVMBuilderRef b = e->b;
  const GraphNode *x = node_of(e, n->inputs[0]);
  const GraphAttrs *a = &n->attrs;
  Index in = new_index(e, &x->shape);
  LLVMValueRef valid = LLVMConstInt(e->gen->i1, 1, false);
  for (int d = 0; d < x->shape.rank; d++) {
    int64_t every = a->interior[d] + 1, span = (x->shape.dims[d] - 1) * every + 1;
    LLVMValueRef t = LLVMBuildSub(b, axis_of(e, at, d), cpu_i64(e->gen, a->lo[d]), "");
    LLVMValueRef ok = in_range(e, t, 0, span);
    if (every > 1) {
      LLVMValueRef on_grid = LLVMBuildICmp(
          b, LLVMIntEQ, LLVMBuildSRem(b, t, cpu_i64(e->gen, every), ""), cpu_i64(e->gen, 0), "");
      ok = LLVMBuildAnd(b, ok, on_grid, "");
    }
    LLVMValueRef safe = LLVMBuildSelect(b, ok, t, cpu_i64(e->gen, 0), "");
    in.axis[d] = every > 1 ? LLVMBuildSDiv(b, safe, cpu_i64(e->gen, every), "") : safe;
    valid = LLVMBuildAnd(b, valid, ok, "");
  }
  LLVMValueRef v = emit(e, n->inputs[0], &in);
  return LLVMBuildSelect(b, valid, v, cpu_constant(e->gen, n->dtype, a->pad_value), "");
}

static LLVMValueRef emit_concat(Emitter *e, const GraphNode *n, Index *at) {
  LLVMBuilderRef b = e->b;
  int axis = n->attrs.axis;
  LLVMValueRef i = axis_of(e, at, axis);
  for (int d = 0; d < at->shape->rank; d++)
    axis_of(e, at, d);
  int64_t base = 0;
  LLVMValueRef result = NULL;
  for (int k = 0; k < n->num_inputs; k++) {
    int64_t dim = node_of(e, n->inputs[k])->shape.dims[axis];
    Index in = new_index(e, &node_of(e, n->inputs[k])->shape);
    memcpy(in.axis, at->axis, sizeof in.axis);
    LLVMValueRef local = LLVMBuildSub(b, i, cpu_i64(e->gen, base), "");
    in.axis[axis] = LLVMBuildSelect(b, in_range(e, local, 0, dim), local, cpu_i64(e->gen, 0), "");
    LLVMValueRef v = emit(e, n->inputs[k], &in);
    result = result ? LLVMBuildSelect(b, in_range(e, i, base, base + dim), v, result, "") : v;
    base += dim;
  }
  return result;
}

/* An index outside the table reads zeros. */
static LLVMValueRef emit_gather(Emitter *e, const GraphNode *n, Index *at) {
  LLVMBuilderRef b = e->b;
  const GraphNode *table = node_of(e, n->inputs[0]), *indices = node_of(e, n->inputs[1]);
  int r = n->shape.rank;
  Index where = new_index(e, &indices->shape);
  for (int d = 0; d + 1 < r; d++)
    where.axis[d] = axis_of(e, at, d);
  LLVMValueRef row = LLVMBuildSExt(b, emit(e, n->inputs[1], &where), e->gen->i64, "");
  LLVMValueRef ok = in_range(e, row, 0, table->shape.dims[0]);
  Index in = new_index(e, &table->shape);
  in.axis[0] = LLVMBuildSelect(b, ok, row, cpu_i64(e->gen, 0), "");
  in.axis[1] = axis_of(e, at, r - 1);
  LLVMValueRef v = emit(e, n->inputs[0], &in);
  return LLVMBuildSelect(b, ok, v, cpu_constant(e->gen, n->dtype, 0.0), "");
}

/* The axes of a reshape's input `in` from those of its output `at`, group
 * by group: both shapes are cut where their running products meet, and
 * within a group the input's axes are digits of the output's axes' flat
 * index there. A merge of axes (heads [B, T, h, k] read as [B, T, h * k])
 * is then h * k + j, affine in the loop's axes, where digits of the whole
 * flat index (what the linear index alone gives) hid from LLVM that a row
 * is contiguous and made gathers of what a slice or a concat reads. The
 * linear index, which a reshape keeps, is set too, for buffer loads. */
static void reshape_axes(Emitter *e, Index *at, Index *in) {
  const GraphShape *out = at->shape, *to = in->shape;
  in->linear = linear_of(e, at);
  int i = 0, o = 0;
  while (i < to->rank || o < out->rank) {
    int i0 = i, o0 = o;
    int64_t pi = i < to->rank ? to->dims[i++] : 1, po = o < out->rank ? out->dims[o++] : 1;
    while (pi != po) {
      if (pi < po && i < to->rank)
        pi *= to->dims[i++];
      else if (po < pi && o < out->rank)
        po *= out->dims[o++];
      else
        return; /* an empty tensor: axis_of falls back on the linear index */
    }
    LLVMValueRef flat = cpu_i64(e->gen, 0);
    for (int d = o0; d < o; d++)
      if (out->dims[d] != 1)
        flat = LLVMBuildAdd(e->b, flat,
                            LLVMBuildMul(e->b, axis_of(e, at, d),
                                         cpu_i64(e->gen, dims_product(out, d + 1, o)), ""),
                            "");
    for (int d = i0; d < i; d++) {
      LLVMValueRef v = LLVMBuildUDiv(e->b, flat, cpu_i64(e->gen, dims_product(to, d + 1, i)), "");
      in->axis[d] = d > i0 ? LLVMBuildURem(e->b, v, cpu_i64(e->gen, to->dims[d]), "") : v;
    }
  }
}

static LLVMValueRef emit_movement(Emitter *e, const GraphNode *n, Index *at) {
  const GraphNode *x = node_of(e, n->inputs[0]);
  const GraphAttrs *a = &n->attrs;
  Index in = new_index(e, &x->shape);
  switch (n->op) {
  case GRAPH_OP_RESHAPE: reshape_axes(e, at, &in); break;
  case GRAPH_OP_PERMUTE:
    for (int d = 0; d < x->shape.rank; d++)
      in.axis[a->perm[d]] = axis_of(e, at, d);
    break;
  case GRAPH_OP_BROADCAST: {
    int offset = n->shape.rank - x->shape.rank;
    for (int d = 0; d < x->shape.rank; d++)
      in.axis[d] = x->shape.dims[d] == 1 ? cpu_i64(e->gen, 0) : axis_of(e, at, d + offset);
    break;
  }
  default: /* SLICE */
    for (int d = 0; d < x->shape.rank; d++) {
      LLVMValueRef scaled = LLVMBuildMul(e->b, axis_of(e, at, d), cpu_i64(e->gen, a->step[d]), "");
      in.axis[d] = LLVMBuildAdd(e->b, scaled, cpu_i64(e->gen, a->start[d]), "");
    }
    break;
  }
  return emit(e, n->inputs[0], &in);
}

static LLVMValueRef compute(Emitter *e, GraphId id, Index *at) {
  const GraphNode *n = node_of(e, id);
  switch (n->op) {
  case GRAPH_OP_NEG:
  case GRAPH_OP_EXP:
  case GRAPH_OP_LOG:
  case GRAPH_OP_SQRT:
  case GRAPH_OP_RSQRT:
  case GRAPH_OP_TANH:
  case GRAPH_OP_SIN:
  case GRAPH_OP_COS:
  case GRAPH_OP_ABS:
  case GRAPH_OP_RECIP: return emit_unary(e, n, emit(e, n->inputs[0], at));
  case GRAPH_OP_ADD:
  case GRAPH_OP_SUB:
  case GRAPH_OP_MUL:
  case GRAPH_OP_DIV:
  case GRAPH_OP_MAX:
  case GRAPH_OP_MIN:
  case GRAPH_OP_POW:
  case GRAPH_OP_CMPLT:
  case GRAPH_OP_CMPEQ: {
    LLVMValueRef x = emit(e, n->inputs[0], at);
    return emit_binary(e, n, x, emit(e, n->inputs[1], at));
  }
  case GRAPH_OP_SELECT: {
    LLVMValueRef c = emit(e, n->inputs[0], at);
    LLVMValueRef x = emit(e, n->inputs[1], at), y = emit(e, n->inputs[2], at);
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntNE, c, cpu_i32(e->gen, 0), ""), x, y,
                           "");
  }
  case GRAPH_OP_CAST: return emit_cast(e, n, emit(e, n->inputs[0], at));
  case GRAPH_OP_STOP_GRADIENT: return emit(e, n->inputs[0], at);
  case GRAPH_OP_REDUCE_SUM:
  case GRAPH_OP_REDUCE_MAX: return emit_reduction(e, id, at);
  case GRAPH_OP_RESHAPE:
  case GRAPH_OP_PERMUTE:
  case GRAPH_OP_BROADCAST:
  case GRAPH_OP_SLICE: return emit_movement(e, n, at);
  case GRAPH_OP_PAD: return emit_pad(e, n, at);
  case GRAPH_OP_CONCAT: return emit_concat(e, n, at);
  case GRAPH_OP_GATHER: return emit_gather(e, n, at);
  case GRAPH_OP_IOTA: return emit_iota(e, n, at);
  case GRAPH_OP_CONSTANT: return emit_constant(e, id, at);
  case GRAPH_OP_RANDOM: return emit_random(e, n, at);
  default: abort(); /* dot, scatter_add and leaves are never computed inline */
  }
}

/* A bf16 node's value is a bf16 value (as in the evaluator): computed in
 * f32, then rounded. Movement ops, select and gather pass bf16 values
 * through and constants are rounded when emitted, so they need none. */
static bool rounds_to_bf16(const GraphNode *n) {
  if (n->dtype != GRAPH_BF16)
    return false;
  switch (n->op) {
  case GRAPH_OP_RESHAPE:
  case GRAPH_OP_PERMUTE:
  case GRAPH_OP_BROADCAST:
  case GRAPH_OP_SLICE:
  case GRAPH_OP_PAD:
  case GRAPH_OP_CONCAT:
  case GRAPH_OP_GATHER:
  case GRAPH_OP_SELECT:
  case GRAPH_OP_STOP_GRADIENT:
  case GRAPH_OP_CONSTANT: return false;
  default: return true;
  }
}

static LLVMValueRef emit(Emitter *e, GraphId id, Index *at) {
  const KernelPlan *plan = e->gen->plan;
  KernelPlacement p = plan->placement[id];
  const Kernel *k = e->kernel;
  if (p == KERNEL_LEAF || p == KERNEL_VIEW ||
      (p == KERNEL_ROOT && id != k->root && id != k->also && id != k->also_q))
    return load_buffer(e, id, at);
  for (int i = 0; i < e->kernel->num_hoisted; i++)
    if (e->kernel->hoisted[i].node == id && e->hoisted[i])
      return e->hoisted[i];
  LLVMValueRef v = recall(e, id, at->id);
  if (v)
    return v;
  v = compute(e, id, at);
  if (rounds_to_bf16(node_of(e, id)))
    v = cpu_bf16_round(e->gen, v);
  remember(e, id, at->id, v);
  return v;
}

/* The outer axes of `row` (the flattened index over them). */
static void split_row(Emitter *e, const GraphShape *s, int outer, LLVMValueRef row, Index *at) {
  int64_t stride = 1;
  for (int d = outer - 1; d >= 0; d--) {
    LLVMValueRef v = LLVMBuildUDiv(e->b, row, cpu_i64(e->gen, stride), "");
    if (d > 0)
      v = LLVMBuildURem(e->b, v, cpu_i64(e->gen, s->dims[d]), "");
    at->axis[d] = v;
    stride *= s->dims[d];
  }
}

static void hoist_reductions(Emitter *e, const Index *row) {
  for (int i = 0; i < e->kernel->num_hoisted; i++) {
    const KernelHoisted *h = &e->kernel->hoisted[i];
    Index at = new_index(e, &node_of(e, h->node)->shape);
    for (int d = 0; d < at.shape->rank; d++) {
      LLVMValueRef v = cpu_i64(e->gen, h->index[d].constant);
      for (int var = 0; var < e->kernel->outer_axes; var++)
        if (h->index[d].coef[var] != 0)
          v = LLVMBuildAdd(
              e->b, v,
              LLVMBuildMul(e->b, row->axis[var], cpu_i64(e->gen, h->index[d].coef[var]), ""), "");
      at.axis[d] = v;
    }
    e->hoisted[i] = e->split ? emit_shared_reduction(e, h->node, &at, i)
                             : emit_reduction(e, h->node, &at);
    if (rounds_to_bf16(node_of(e, h->node)))
      e->hoisted[i] = cpu_bf16_round(e->gen, e->hoisted[i]);
    /* A row statistic the kernel stores (KernelPlanOptions.
     * store_row_statistics): one element a row, at the row's own index. */
    GraphId out[3];
    for (int o = 1, count = kernel_outputs(e->kernel, out); o < count; o++)
      if (out[o] == h->node) {
        GraphDtype dtype = node_of(e, h->node)->dtype;
        cpu_store_value(e->gen, dtype, e->hoisted[i],
                        cpu_element(e->gen, cpu_storage_type(e->gen, dtype), e->args[o],
                                    linear_of(e, &at)));
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
  const GraphNode *n = node_of(e, e->kernel->root);
  if (n->op != GRAPH_OP_REDUCE_SUM && n->op != GRAPH_OP_REDUCE_MAX)
    return false;
  const GraphNode *x = node_of(e, n->inputs[0]);
  int last = n->shape.rank - 1;
  uint32_t axes = n->attrs.axes;
  if (e->gen->gpu_threads || e->kernel->num_hoisted > 0 || last < 1 ||
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
  CpuGen *gen = e->gen;
  LLVMBuilderRef b = e->b;
  const GraphNode *n = node_of(e, e->kernel->root), *x = node_of(e, n->inputs[0]);
  LLVMTypeRef t = cpu_type(gen, n->dtype);
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
  CpuLoop j;
  cpu_loop_begin(gen, &j, begin, end);
  LLVMBuildStore(b, reduction_init(e, n),
                 cpu_element(gen, t, acc, LLVMBuildSub(b, j.index, base, "")));
  cpu_loop_end(gen, &j);
  /* Group g holds output elements [g * columns, (g + 1) * columns) and
   * input elements [g * rows * columns, (g + 1) * rows * columns). */
  LLVMValueRef width = cpu_i64(gen, columns);
  CpuLoop group;
  cpu_loop_begin(gen, &group, LLVMBuildUDiv(b, begin, width, ""),
                 LLVMBuildUDiv(b, LLVMBuildAdd(b, end, cpu_i64(gen, columns - 1), ""), width, ""));
  LLVMValueRef first = LLVMBuildMul(b, group.index, width, "");
  LLVMValueRef after = LLVMBuildAdd(b, first, width, "");
  LLVMValueRef from = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, begin, first, ""), begin,
                                      first, "");
  LLVMValueRef to = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, end, after, ""), end, after, "");
  LLVMValueRef group_start = LLVMBuildMul(b, group.index, cpu_i64(gen, (rows - 1) * columns), "");
  Index grouped = new_index(e, &x->shape);
  row_element_axes(e, group.index, &n->shape, group_axes, groups, &grouped);
  CpuLoop row_loops[GRAPH_MAX_RANK];
  LLVMValueRef row = group_start;
  int num_rows = 0;
  for (int d = 0; d < rank; d++) {
    if (!((axes >> d) & 1u)) {
      if (!((group_axes >> d) & 1u))
        grouped.axis[d] = cpu_i64(gen, 0);
      continue;
    }
    grouped.axis[d] = cpu_i64(gen, 0);
    if (x->shape.dims[d] == 1)
      continue;
    cpu_loop_begin(gen, &row_loops[num_rows], cpu_i64(gen, 0), cpu_i64(gen, x->shape.dims[d]));
    grouped.axis[d] = row_loops[num_rows++].index;
    row = LLVMBuildAdd(
        b, row, LLVMBuildMul(b, grouped.axis[d], cpu_i64(gen, stride_of(&x->shape, d)), ""), "");
  }
  cpu_loop_begin(gen, &j, from, to);
  int mark = e->memo_count;
  Index in = new_index(e, &x->shape);
  memcpy(in.axis, grouped.axis, sizeof(LLVMValueRef) * (size_t)rank);
  row_element_axes(e, LLVMBuildSub(b, j.index, first, ""), &n->shape, column_axes, columns, &in);
  in.linear = LLVMBuildAdd(b, row, j.index, "");
  LLVMValueRef v = emit(e, n->inputs[0], &in);
  LLVMValueRef slot = cpu_element(gen, t, acc, LLVMBuildSub(b, j.index, base, ""));
  LLVMBuildStore(b, reduction_step(e, n, LLVMBuildLoad2(b, t, slot, ""), v), slot);
  e->memo_count = mark;
  cpu_loop_end(gen, &j);
  while (num_rows > 0)
    cpu_loop_end(gen, &row_loops[--num_rows]);
  cpu_loop_end(gen, &group);
}

/* The output holds the accumulators, except in bf16: there each stretch of
 * BF16_COLUMNS columns sums into f32 slots on the stack and is rounded
 * once at the end, so accumulation stays f32. */
#define BF16_COLUMNS 256
static void emit_column_reduction(Emitter *e, LLVMValueRef begin, LLVMValueRef end) {
  CpuGen *gen = e->gen;
  const GraphNode *n = node_of(e, e->kernel->root);
  if (n->dtype != GRAPH_BF16) {
    emit_column_sums(e, e->args[0], cpu_i64(gen, 0), begin, end);
    return;
  }
  LLVMBuilderRef b = e->b;
  LLVMValueRef acc = cpu_entry_alloca(gen, LLVMArrayType(gen->f32, BF16_COLUMNS), "columns");
  acc = LLVMBuildBitCast(b, acc, LLVMPointerType(gen->f32, 0), "");
  LLVMValueRef width = cpu_i64(gen, BF16_COLUMNS);
  LLVMValueRef count = LLVMBuildSDiv(
      b, LLVMBuildAdd(b, LLVMBuildSub(b, end, begin, ""), cpu_i64(gen, BF16_COLUMNS - 1), ""),
      width, "");
  CpuLoop c, j;
  cpu_loop_begin(gen, &c, cpu_i64(gen, 0), count);
  LLVMValueRef c0 = LLVMBuildAdd(b, begin, LLVMBuildMul(b, c.index, width, ""), "");
  LLVMValueRef c1 = LLVMBuildAdd(b, c0, width, "");
  c1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, c1, end, ""), c1, end, "");
  emit_column_sums(e, acc, c0, c0, c1);
  cpu_loop_begin(gen, &j, c0, c1);
  LLVMValueRef v = LLVMBuildLoad2(
      b, gen->f32, cpu_element(gen, gen->f32, acc, LLVMBuildSub(b, j.index, c0, "")), "");
  cpu_store_value(gen, GRAPH_BF16, v, cpu_element(gen, gen->i16, e->args[0], j.index));
  cpu_loop_end(gen, &j);
  cpu_loop_end(gen, &c);
}

/* Whether a concat root's input `value` is a reshape, computed here or a
 * view, that keeps the row (the outer axes) of a root whose row is the
 * concat's axis alone: its part of a row is then its input's row,
 * flattened, and loops over that input's own axes keep a reshape from
 * splitting the row's axis into digits (heads [B, T, h, k] read as
 * [B, T, h * k]). A reshape stored by a kernel of its own is read from
 * its buffer, its input being no argument of this kernel. */
static bool flattens_row(const Emitter *e, GraphId value) {
  const GraphNode *root = node_of(e, e->kernel->root), *n = node_of(e, value);
  KernelPlacement p = e->gen->plan->placement[value];
  int outer = e->kernel->outer_axes;
  if (n->op != GRAPH_OP_RESHAPE || (p != KERNEL_INLINED && p != KERNEL_VIEW) ||
      root->attrs.axis != root->shape.rank - 1 ||
      outer != root->shape.rank - 1)
    return false;
  const GraphShape *x = &node_of(e, n->inputs[0])->shape;
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
  CpuGen *gen = e->gen;
  const Kernel *k = e->kernel;
  const GraphNode *root = graph_node(gen->graph, k->root);
  GraphId value = slot < 0 ? k->root : root->inputs[slot];
  int axis = slot < 0 ? -1 : root->attrs.axis;
  int64_t base = 0;
  for (int i = 0; i < slot; i++)
    base += node_of(e, root->inputs[i])->shape.dims[axis];
  bool flat = slot >= 0 && flattens_row(e, value);
  if (flat)
    value = node_of(e, value)->inputs[0];
  const GraphShape *shape = &node_of(e, value)->shape;
  Index at = new_index(e, &root->shape), in = new_index(e, shape);
  for (int d = 0; d < k->outer_axes; d++)
    at.axis[d] = in.axis[d] = row->axis[d];
  CpuLoop inner[GRAPH_MAX_RANK];
  LLVMValueRef offset = cpu_i64(gen, base);
  for (int d = k->outer_axes; d < shape->rank; d++) {
    cpu_loop_begin(gen, &inner[d], cpu_i64(gen, 0), cpu_i64(gen, shape->dims[d]));
    at.axis[d] = in.axis[d] = inner[d].index;
    if (flat || d == axis)
      offset = LLVMBuildAdd(
          e->b, offset,
          LLVMBuildMul(e->b, in.axis[d], cpu_i64(gen, flat ? stride_of(shape, d) : 1), ""), "");
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
    v[o] = o > 0 && kernel_is_hoisted(k, out[o]) ? NULL : emit(e, out[o], slot < 0 ? &at : &in);
  LLVMValueRef linear = linear_of(e, &at);
  for (int o = 0; o < count; o++) {
    GraphDtype dtype = o == 0 ? root->dtype : node_of(e, out[o])->dtype;
    if (v[o])
      cpu_store_value(gen, dtype, v[o],
                      cpu_element(gen, cpu_storage_type(gen, dtype), e->args[o], linear));
  }
  for (int d = shape->rank - 1; d >= k->outer_axes; d--)
    cpu_loop_end(gen, &inner[d]);
}

/* Row by row over the outer axes: the row's hoisted reductions, then the
 * inner loops over the remaining axes. */
static void emit_rows(Emitter *e, LLVMValueRef begin, LLVMValueRef end) {
  CpuGen *gen = e->gen;
  const Kernel *k = e->kernel;
  const GraphNode *root = graph_node(gen->graph, k->root);
  CpuLoop rows;
  cpu_loop_begin(gen, &rows, begin, end);
  Index row = new_index(e, &root->shape);
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
  cpu_loop_end(gen, &rows);
}

/* The GPU's cooperative rows (ptx_row.h): work item `item` is thread
 * ptx_row_tid of row ptx_row_of. The row's hoisted reductions are shared;
 * then a root reduction whose row is one element is shared as well and
 * thread 0 stores it, or else thread tid computes and stores elements
 * ptx_row_element(tid, s, threads) of the row's inner axes, flattened
 * row-major (neighbouring threads, neighbouring elements). */
static void emit_split_rows(Emitter *e, LLVMValueRef item) {
  CpuGen *gen = e->gen;
  LLVMBuilderRef b = e->b;
  const Kernel *k = e->kernel;
  const GraphNode *root = graph_node(gen->graph, k->root);
  const GraphShape *shape = &root->shape;
  LLVMTypeRef t = cpu_storage_type(gen, root->dtype);
  int64_t threads = e->split->threads, inner = 1;
  for (int d = k->outer_axes; d < shape->rank; d++)
    inner *= shape->dims[d];
  LLVMValueRef row = LLVMBuildUDiv(b, item, cpu_i64(gen, threads), "row");
  e->tid = LLVMBuildURem(b, item, cpu_i64(gen, threads), "tid");
  Index at = new_index(e, shape);
  split_row(e, shape, k->outer_axes, row, &at);
  hoist_reductions(e, &at);
  if ((root->op == GRAPH_OP_REDUCE_SUM || root->op == GRAPH_OP_REDUCE_MAX) && inner == 1) {
    for (int d = k->outer_axes; d < shape->rank; d++)
      at.axis[d] = cpu_i64(gen, 0);
    LLVMValueRef v = emit_shared_reduction(e, k->root, &at, k->num_hoisted);
    LLVMValueRef slot = cpu_element(gen, t, e->args[0], linear_of(e, &at));
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
    LLVMBasicBlockRef store = LLVMAppendBasicBlockInContext(gen->context, fn, "store");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(gen->context, fn, "stored");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, e->tid, cpu_i64(gen, 0), ""), store, done);
    LLVMPositionBuilderAtEnd(b, store);
    cpu_store_value(gen, root->dtype, v, slot);
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, done);
    return;
  }
  CpuLoop step;
  LLVMValueRef l = begin_share(e, inner, &step);
  uint32_t inner_axes = ((1u << shape->rank) - 1) & ~((1u << k->outer_axes) - 1);
  row_element_axes(e, l, shape, inner_axes, inner, &at);
  LLVMValueRef v = emit(e, k->root, &at);
  cpu_store_value(gen, root->dtype, v, cpu_element(gen, t, e->args[0], linear_of(e, &at)));
  cpu_loop_end(gen, &step);
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
static void emit_body_call(CpuGen *gen, int function, const Kernel *k, LLVMValueRef range,
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
  cpu_add_attributes(gen, body, attributes, 2);
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

static void emit_loop_kernel(CpuGen *gen, int function, const Kernel *k,
                             const CpuRowSplit *split) {
  LLVMValueRef fn = cpu_kernel_function(gen, function);
  Emitter e = {.gen = gen, .b = gen->builder, .kernel = k, .function = function, .split = split};
  e.args = malloc(sizeof(LLVMValueRef) * (size_t)k->num_args);
  e.hoisted = calloc((size_t)(k->num_hoisted ? k->num_hoisted : 1), sizeof(LLVMValueRef));
  if (!e.args || !e.hoisted)
    abort();
  for (int i = 0; i < k->num_args; i++)
    e.args[i] = cpu_kernel_arg(
        gen, LLVMGetParam(fn, 0), i,
        cpu_storage_type(gen, graph_node(gen->graph, gen->plan->buffers[k->args[i]].node)->dtype));
  LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
  if (split && split->over_range) {
    CpuLoop item;
    cpu_loop_begin(gen, &item, begin, end);
    emit_split_rows(&e, item.index);
    cpu_loop_end(gen, &item);
  } else if (split) {
    emit_split_rows(&e, begin);
  } else {
    if (!gen->ptx)
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

void cpu_emit_loop_kernel(CpuGen *gen, int function, const Kernel *k) {
  emit_loop_kernel(gen, function, k, NULL);
}

void cpu_emit_split_loop_kernel(CpuGen *gen, int function, const Kernel *k,
                                const CpuRowSplit *split) {
  emit_loop_kernel(gen, function, k, split);
}
