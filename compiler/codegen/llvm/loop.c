/* Loop kernels, the values: every fused node is computed at the index its
 * consumer asks for (loop_rows.c makes the loop nest over the root's
 * output around them). Movement ops only rewrite the index, so views cost
 * index arithmetic, not copies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_internal.h"


Index loop_new_index(Emitter *e, const GraphShape *shape) {
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

int64_t loop_stride_of(const GraphShape *s, int axis) {
  return dims_product(s, axis + 1, s->rank);
}

static LLVMValueRef axis_of(Emitter *e, Index *at, int d) {
  if (at->axis[d])
    return at->axis[d];
  const GraphShape *s = at->shape;
  if (s->dims[d] == 1)
    return at->axis[d] = gen_i64(e->gen, 0);
  LLVMValueRef v = LLVMBuildUDiv(e->b, at->linear, gen_i64(e->gen, loop_stride_of(s, d)), "");
  if (d > 0)
    v = LLVMBuildURem(e->b, v, gen_i64(e->gen, s->dims[d]), "");
  return at->axis[d] = v;
}

LLVMValueRef loop_linear_of(Emitter *e, Index *at) {
  if (at->linear)
    return at->linear;
  LLVMValueRef sum = gen_i64(e->gen, 0);
  for (int d = 0; d < at->shape->rank; d++) {
    if (at->shape->dims[d] == 1)
      continue;
    LLVMValueRef term =
        LLVMBuildMul(e->b, axis_of(e, at, d), gen_i64(e->gen, loop_stride_of(at->shape, d)), "");
    sum = LLVMBuildAdd(e->b, sum, term, "");
  }
  return at->linear = sum;
}

/* Every axis computed now, so values made later inside a loop body never
 * leak out of it through the index's cache. */
void loop_settle(Emitter *e, Index *at) {
  for (int d = 0; d < at->shape->rank; d++)
    axis_of(e, at, d);
  loop_linear_of(e, at);
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



static LLVMValueRef math1(Emitter *e, const char *f32_name, const char *f64_name,
                          const GraphNode *n, LLVMValueRef x) {
  LLVMTypeRef t = gen_type(e->gen, n->dtype);
  bool single = t == e->gen->f32;
  return gen_math_call(e->gen, single ? f32_name : f64_name, t, &x, 1);
}

static LLVMValueRef is_nan(Emitter *e, LLVMValueRef x) {
  return LLVMBuildFCmp(e->b, LLVMRealUNO, x, x, "");
}

static LLVMValueRef emit_unary(Emitter *e, const GraphNode *n, LLVMValueRef x) {
  LLVMBuilderRef b = e->b;
  LLVMTypeRef t = gen_type(e->gen, n->dtype);
  bool fl = loop_is_float(n);
  switch (n->op) {
  case GRAPH_OP_NEG: return fl ? LLVMBuildFNeg(b, x, "") : LLVMBuildNeg(b, x, "");
  case GRAPH_OP_EXP:
    if (t == e->gen->f32 && e->gen->target->inline_f32_math) return gen_exp_f32(e->gen, x);
    return math1(e, "expf", "exp", n, x);
  case GRAPH_OP_LOG: return math1(e, "logf", "log", n, x);
  case GRAPH_OP_SQRT: return gen_intrinsic(e->gen, "llvm.sqrt", &t, 1, &x, 1);
  case GRAPH_OP_RSQRT:
    return LLVMBuildFDiv(b, LLVMConstReal(t, 1.0), gen_intrinsic(e->gen, "llvm.sqrt", &t, 1, &x, 1),
                         "");
  case GRAPH_OP_TANH:
    if (t == e->gen->f32 && e->gen->target->inline_f32_math) return gen_tanh_f32(e->gen, x);
    return math1(e, "tanhf", "tanh", n, x);
  case GRAPH_OP_SIN: return math1(e, "sinf", "sin", n, x);
  case GRAPH_OP_COS: return math1(e, "cosf", "cos", n, x);
  case GRAPH_OP_ERF: return math1(e, "erff", "erf", n, x);
  case GRAPH_OP_RECIP: return LLVMBuildFDiv(b, LLVMConstReal(t, 1.0), x, "");
  default: /* ABS */
    if (fl)
      return gen_intrinsic(e->gen, "llvm.fabs", &t, 1, &x, 1);
    return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, gen_i32(e->gen, 0), ""),
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
  bool fl = loop_is_float(loop_node_of(e, n->inputs[0]));
  LLVMValueRef bit;
  switch (n->op) {
  case GRAPH_OP_ADD: return fl ? LLVMBuildFAdd(b, x, y, "") : LLVMBuildAdd(b, x, y, "");
  case GRAPH_OP_SUB: return fl ? LLVMBuildFSub(b, x, y, "") : LLVMBuildSub(b, x, y, "");
  case GRAPH_OP_MUL: return fl ? LLVMBuildFMul(b, x, y, "") : LLVMBuildMul(b, x, y, "");
  case GRAPH_OP_DIV: return LLVMBuildFDiv(b, x, y, "");
  case GRAPH_OP_MAX: return emit_max_min(e, fl, true, x, y);
  case GRAPH_OP_MIN: return emit_max_min(e, fl, false, x, y);
  case GRAPH_OP_POW: {
    LLVMTypeRef t = gen_type(e->gen, n->dtype);
    LLVMValueRef args[2] = {x, y};
    return gen_math_call(e->gen, t == e->gen->f32 ? "powf" : "pow", t, args, 2);
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
  Gen *gen = e->gen;
  LLVMTypeRef from = LLVMTypeOf(x), to = gen_type(gen, n->dtype);
  if (from == to)
    return x;
  if (to == gen->i32) {
    if (from == gen->f32)
      x = LLVMBuildFPExt(e->b, x, gen->f64, "");
    LLVMTypeRef types[2] = {gen->i32, gen->f64};
    return gen_intrinsic(gen, "llvm.fptosi.sat", types, 2, &x, 1);
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
      GraphDtype dtype = loop_node_of(e, id)->dtype;
      LLVMTypeRef t = gen_storage_type(e->gen, dtype);
      LLVMValueRef ptr = gen_element(e->gen, t, e->args[i], loop_linear_of(e, at));
      return gen_load_value(e->gen, dtype, ptr);
    }
  abort(); /* kernel formation lists every buffer a kernel reads */
}

/* A non-splat constant lives in a module global. */
static LLVMValueRef constant_global(Emitter *e, GraphId id) {
  Gen *gen = e->gen;
  if (gen->constant_data[id])
    return gen->constant_data[id];
  const GraphNode *n = loop_node_of(e, id);
  LLVMTypeRef t = gen_type(gen, n->dtype);
  int64_t count = n->attrs.num_values;
  LLVMValueRef *values = malloc(sizeof *values * (size_t)count);
  if (!values)
    abort();
  for (int64_t i = 0; i < count; i++)
    values[i] = gen_constant(gen, n->dtype, n->attrs.values[i]);
  LLVMTypeRef array = LLVMArrayType(t, (unsigned)count);
  LLVMValueRef global = LLVMAddGlobal(gen->module, array, "constant");
  LLVMSetInitializer(global, LLVMConstArray(t, values, (unsigned)count));
  LLVMSetGlobalConstant(global, true);
  LLVMSetLinkage(global, LLVMPrivateLinkage);
  free(values);
  return gen->constant_data[id] = LLVMConstBitCast(global, LLVMPointerType(t, 0));
}

static LLVMValueRef emit_constant(Emitter *e, GraphId id, Index *at) {
  const GraphNode *n = loop_node_of(e, id);
  if (n->attrs.num_values == 1)
    return gen_constant(e->gen, n->dtype, n->attrs.values[0]);
  LLVMTypeRef t = gen_type(e->gen, n->dtype);
  LLVMValueRef ptr = gen_element(e->gen, t, constant_global(e, id), loop_linear_of(e, at));
  return LLVMBuildLoad2(e->b, t, ptr, "");
}

static LLVMValueRef emit_iota(Emitter *e, const GraphNode *n, Index *at) {
  LLVMValueRef i = axis_of(e, at, n->attrs.axis);
  LLVMTypeRef t = gen_type(e->gen, n->dtype);
  if (t == e->gen->i32)
    return LLVMBuildTrunc(e->b, i, t, "");
  return LLVMBuildSIToFP(e->b, i, t, "");
}

static LLVMValueRef emit_random(Emitter *e, const GraphNode *n, Index *at) {
  Index scalar = loop_new_index(e, &loop_node_of(e, n->inputs[0])->shape);
  scalar.linear = gen_i64(e->gen, 0);
  LLVMValueRef offset = loop_emit(e, n->inputs[0], &scalar);
  return gen_philox_uniform(e->gen, n, offset, loop_linear_of(e, at));
}

static LLVMValueRef in_range(Emitter *e, LLVMValueRef i, int64_t lo, int64_t hi) {
  LLVMBuilderRef b = e->b;
  return LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, i, gen_i64(e->gen, lo), ""),
                      LLVMBuildICmp(b, LLVMIntSLT, i, gen_i64(e->gen, hi), ""), "");
}

static LLVMValueRef emit_pad(Emitter *e, const GraphNode *n, Index *at) {
  LLVMBuilderRef b = e->b;
  const GraphNode *x = loop_node_of(e, n->inputs[0]);
  const GraphAttrs *a = &n->attrs;
  Index in = loop_new_index(e, &x->shape);
  LLVMValueRef valid = LLVMConstInt(e->gen->i1, 1, false);
  for (int d = 0; d < x->shape.rank; d++) {
    int64_t every = a->interior[d] + 1, span = (x->shape.dims[d] - 1) * every + 1;
    LLVMValueRef t = LLVMBuildSub(b, axis_of(e, at, d), gen_i64(e->gen, a->lo[d]), "");
    LLVMValueRef ok = in_range(e, t, 0, span);
    if (every > 1) {
      LLVMValueRef on_grid = LLVMBuildICmp(
          b, LLVMIntEQ, LLVMBuildSRem(b, t, gen_i64(e->gen, every), ""), gen_i64(e->gen, 0), "");
      ok = LLVMBuildAnd(b, ok, on_grid, "");
    }
    LLVMValueRef safe = LLVMBuildSelect(b, ok, t, gen_i64(e->gen, 0), "");
    in.axis[d] = every > 1 ? LLVMBuildSDiv(b, safe, gen_i64(e->gen, every), "") : safe;
    valid = LLVMBuildAnd(b, valid, ok, "");
  }
  LLVMValueRef v = loop_emit(e, n->inputs[0], &in);
  return LLVMBuildSelect(b, valid, v, gen_constant(e->gen, n->dtype, a->pad_value), "");
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
    int64_t dim = loop_node_of(e, n->inputs[k])->shape.dims[axis];
    Index in = loop_new_index(e, &loop_node_of(e, n->inputs[k])->shape);
    memcpy(in.axis, at->axis, sizeof in.axis);
    LLVMValueRef local = LLVMBuildSub(b, i, gen_i64(e->gen, base), "");
    in.axis[axis] = LLVMBuildSelect(b, in_range(e, local, 0, dim), local, gen_i64(e->gen, 0), "");
    LLVMValueRef v = loop_emit(e, n->inputs[k], &in);
    result = result ? LLVMBuildSelect(b, in_range(e, i, base, base + dim), v, result, "") : v;
    base += dim;
  }
  return result;
}

/* An index outside the table reads zeros. */
static LLVMValueRef emit_gather(Emitter *e, const GraphNode *n, Index *at) {
  LLVMBuilderRef b = e->b;
  const GraphNode *table = loop_node_of(e, n->inputs[0]), *indices = loop_node_of(e, n->inputs[1]);
  int r = n->shape.rank;
  Index where = loop_new_index(e, &indices->shape);
  for (int d = 0; d + 1 < r; d++)
    where.axis[d] = axis_of(e, at, d);
  LLVMValueRef row = LLVMBuildSExt(b, loop_emit(e, n->inputs[1], &where), e->gen->i64, "");
  LLVMValueRef ok = in_range(e, row, 0, table->shape.dims[0]);
  Index in = loop_new_index(e, &table->shape);
  in.axis[0] = LLVMBuildSelect(b, ok, row, gen_i64(e->gen, 0), "");
  in.axis[1] = axis_of(e, at, r - 1);
  LLVMValueRef v = loop_emit(e, n->inputs[0], &in);
  return LLVMBuildSelect(b, ok, v, gen_constant(e->gen, n->dtype, 0.0), "");
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
  in->linear = loop_linear_of(e, at);
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
    LLVMValueRef flat = gen_i64(e->gen, 0);
    for (int d = o0; d < o; d++)
      if (out->dims[d] != 1)
        flat = LLVMBuildAdd(e->b, flat,
                            LLVMBuildMul(e->b, axis_of(e, at, d),
                                         gen_i64(e->gen, dims_product(out, d + 1, o)), ""),
                            "");
    for (int d = i0; d < i; d++) {
      LLVMValueRef v = LLVMBuildUDiv(e->b, flat, gen_i64(e->gen, dims_product(to, d + 1, i)), "");
      in->axis[d] = d > i0 ? LLVMBuildURem(e->b, v, gen_i64(e->gen, to->dims[d]), "") : v;
    }
  }
}

static LLVMValueRef emit_movement(Emitter *e, const GraphNode *n, Index *at) {
  const GraphNode *x = loop_node_of(e, n->inputs[0]);
  const GraphAttrs *a = &n->attrs;
  Index in = loop_new_index(e, &x->shape);
  switch (n->op) {
  case GRAPH_OP_RESHAPE: reshape_axes(e, at, &in); break;
  case GRAPH_OP_PERMUTE:
    for (int d = 0; d < x->shape.rank; d++)
      in.axis[a->perm[d]] = axis_of(e, at, d);
    break;
  case GRAPH_OP_BROADCAST: {
    int offset = n->shape.rank - x->shape.rank;
    for (int d = 0; d < x->shape.rank; d++)
      in.axis[d] = x->shape.dims[d] == 1 ? gen_i64(e->gen, 0) : axis_of(e, at, d + offset);
    break;
  }
  default: /* SLICE */
    for (int d = 0; d < x->shape.rank; d++) {
      LLVMValueRef scaled = LLVMBuildMul(e->b, axis_of(e, at, d), gen_i64(e->gen, a->step[d]), "");
      in.axis[d] = LLVMBuildAdd(e->b, scaled, gen_i64(e->gen, a->start[d]), "");
    }
    break;
  }
  return loop_emit(e, n->inputs[0], &in);
}

static LLVMValueRef compute(Emitter *e, GraphId id, Index *at) {
  const GraphNode *n = loop_node_of(e, id);
  switch (n->op) {
  case GRAPH_OP_NEG:
  case GRAPH_OP_EXP:
  case GRAPH_OP_LOG:
  case GRAPH_OP_SQRT:
  case GRAPH_OP_RSQRT:
  case GRAPH_OP_TANH:
  case GRAPH_OP_SIN:
  case GRAPH_OP_COS:
  case GRAPH_OP_ERF:
  case GRAPH_OP_ABS:
  case GRAPH_OP_RECIP: return emit_unary(e, n, loop_emit(e, n->inputs[0], at));
  case GRAPH_OP_ADD:
  case GRAPH_OP_SUB:
  case GRAPH_OP_MUL:
  case GRAPH_OP_DIV:
  case GRAPH_OP_MAX:
  case GRAPH_OP_MIN:
  case GRAPH_OP_POW:
  case GRAPH_OP_CMPLT:
  case GRAPH_OP_CMPEQ: {
    LLVMValueRef x = loop_emit(e, n->inputs[0], at);
    return emit_binary(e, n, x, loop_emit(e, n->inputs[1], at));
  }
  case GRAPH_OP_SELECT: {
    LLVMValueRef c = loop_emit(e, n->inputs[0], at);
    LLVMValueRef x = loop_emit(e, n->inputs[1], at), y = loop_emit(e, n->inputs[2], at);
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntNE, c, gen_i32(e->gen, 0), ""), x, y,
                           "");
  }
  case GRAPH_OP_CAST: return emit_cast(e, n, loop_emit(e, n->inputs[0], at));
  case GRAPH_OP_STOP_GRADIENT: return loop_emit(e, n->inputs[0], at);
  case GRAPH_OP_REDUCE_SUM:
  case GRAPH_OP_REDUCE_MAX: return loop_emit_reduction(e, id, at);
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
bool loop_rounds_to_bf16(const GraphNode *n) {
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

LLVMValueRef loop_emit(Emitter *e, GraphId id, Index *at) {
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
  if (loop_rounds_to_bf16(loop_node_of(e, id)))
    v = gen_bf16_round(e->gen, v);
  remember(e, id, at->id, v);
  return v;
}
