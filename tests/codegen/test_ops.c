/* Every primitive of ops.def compiled and compared with the evaluator, on
 * several shapes and fed through permutes and broadcasts. */
#include <math.h>
#include <stdio.h>

#include "harness.h"

#define SHAPE(...) ((GraphShape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static GraphId in(Graph *g, const char *name, GraphDtype dtype, GraphShape shape) {
  return graph_input(g, name, dtype, shape);
}

static GraphId permute3(Graph *g, GraphId x, int a, int b, int c) {
  int perm[GRAPH_MAX_RANK] = {a, b, c};
  return graph_permute(g, x, perm);
}

static GraphId permute4(Graph *g, GraphId x, int a, int b, int c, int d) {
  int perm[GRAPH_MAX_RANK] = {a, b, c, d};
  return graph_permute(g, x, perm);
}

static GraphId neg(Graph *g, GraphId x) { return graph_unary(g, GRAPH_OP_NEG, x); }

/* Fills every float leaf with [lo, hi) values (via the globals below). */
static double fill_lo, fill_hi;
static void fill_range(const Graph *g, EvalValues *ref) {
  uint64_t state = 99;
  for (GraphId id = 0; id < graph_count(g); id++)
    if (graph_node(g, id)->op == GRAPH_OP_INPUT)
      cg_fill(ref, id, fill_lo, fill_hi, &state);
}

/* op(x), op(permute(x3)), op(broadcast(v)) in one graph. */
static void unary(GraphOp op, GraphDtype dtype, double lo, double hi) {
  Graph *g = graph_new();
  GraphId x = in(g, "x", dtype, SHAPE(4, 7));
  GraphId x3 = in(g, "x3", dtype, SHAPE(5, 2, 3));
  GraphId v = in(g, "v", dtype, SHAPE(7));
  graph_output(g, "plain", graph_unary(g, op, x));
  graph_output(g, "permuted", graph_unary(g, op, permute3(g, x3, 2, 0, 1)));
  graph_output(g, "broadcast", graph_unary(g, op, graph_broadcast(g, v, SHAPE(4, 7))));
  char name[64];
  snprintf(name, sizeof name, "%s %s", graph_op_name(op), graph_dtype_name(dtype));
  fill_lo = lo, fill_hi = hi;
  cg_check_graph(name, g, fill_range);
}

static void binary(GraphOp op, GraphDtype dtype, double lo, double hi) {
  Graph *g = graph_new();
  GraphId a = in(g, "a", dtype, SHAPE(4, 7)), b = in(g, "b", dtype, SHAPE(4, 7));
  GraphId row = in(g, "row", dtype, SHAPE(7)), col = in(g, "col", dtype, SHAPE(7, 4));
  GraphId s = in(g, "s", dtype, SHAPE(1));
  graph_output(g, "plain", graph_binary(g, op, a, b));
  int t[GRAPH_MAX_RANK] = {1, 0};
  graph_output(g, "views",
               graph_binary(g, op, graph_broadcast(g, row, SHAPE(4, 7)), graph_permute(g, col, t)));
  graph_output(g, "scalar", graph_binary(g, op, a, graph_broadcast(g, s, SHAPE(4, 7))));
  char name[64];
  snprintf(name, sizeof name, "%s %s", graph_op_name(op), graph_dtype_name(dtype));
  fill_lo = lo, fill_hi = hi;
  cg_check_graph(name, g, fill_range);
}

/* Integer-valued floats, so that cmpeq and ties in max/min really happen. */
static void fill_small_integers(const Graph *g, EvalValues *ref) {
  for (GraphId id = 0; id < graph_count(g); id++) {
    if (graph_node(g, id)->op != GRAPH_OP_INPUT)
      continue;
    EvalTensor *t = eval_tensor(ref, id);
    for (int64_t i = 0; i < t->numel; i++)
      eval_tensor_set(t, i, (double)((i * 7 + id) % 3));
  }
}

static void fill_with_nans(const Graph *g, EvalValues *ref) {
  fill_lo = -1, fill_hi = 1;
  fill_range(g, ref);
  eval_set(ref, graph_find_leaf(g, "a"), 0, NAN);
  eval_set(ref, graph_find_leaf(g, "b"), 1, NAN);
}

static void max_min_nan(GraphOp op) {
  Graph *g = graph_new();
  GraphId a = in(g, "a", GRAPH_F32, SHAPE(3, 4)), b = in(g, "b", GRAPH_F32, SHAPE(3, 4));
  graph_output(g, "y", graph_binary(g, op, a, b));
  graph_output(g, "reduced", graph_reduce(g, GRAPH_OP_REDUCE_MAX, graph_binary(g, op, a, b), 2));
  char name[64];
  snprintf(name, sizeof name, "%s with NaN", graph_op_name(op));
  cg_check_graph(name, g, fill_with_nans);
}

static void elementwise(void) {
  const GraphOp float_unary[] = {GRAPH_OP_NEG, GRAPH_OP_EXP, GRAPH_OP_TANH,  GRAPH_OP_SIN,
                                 GRAPH_OP_COS, GRAPH_OP_ERF, GRAPH_OP_ABS,  GRAPH_OP_RECIP,
                                 GRAPH_OP_STOP_GRADIENT};
  for (size_t i = 0; i < sizeof float_unary / sizeof *float_unary; i++)
    unary(float_unary[i], GRAPH_F32, -2, 2);
  unary(GRAPH_OP_LOG, GRAPH_F32, 0.01, 5);
  unary(GRAPH_OP_SQRT, GRAPH_F32, 0.01, 5);
  unary(GRAPH_OP_RSQRT, GRAPH_F32, 0.01, 5);
  unary(GRAPH_OP_NEG, GRAPH_I32, -50, 50);
  unary(GRAPH_OP_ABS, GRAPH_I32, -50, 50);
  unary(GRAPH_OP_STOP_GRADIENT, GRAPH_I32, -50, 50);
  unary(GRAPH_OP_EXP, GRAPH_F64, -2, 2);
  unary(GRAPH_OP_LOG, GRAPH_F64, 0.01, 5);
  const GraphOp any_binary[] = {GRAPH_OP_ADD, GRAPH_OP_SUB,   GRAPH_OP_MUL,  GRAPH_OP_MAX,
                                GRAPH_OP_MIN, GRAPH_OP_CMPLT, GRAPH_OP_CMPEQ};
  for (size_t i = 0; i < sizeof any_binary / sizeof *any_binary; i++) {
    binary(any_binary[i], GRAPH_F32, -2, 2);
    binary(any_binary[i], GRAPH_I32, -1000, 1000);
  }
  binary(GRAPH_OP_DIV, GRAPH_F32, 0.5, 3);
  binary(GRAPH_OP_POW, GRAPH_F32, 0.1, 3);
  binary(GRAPH_OP_DIV, GRAPH_F64, 0.5, 3);
  binary(GRAPH_OP_POW, GRAPH_F64, 0.1, 3);
  max_min_nan(GRAPH_OP_MAX);
  max_min_nan(GRAPH_OP_MIN);

  Graph *g = graph_new();
  GraphId a = in(g, "a", GRAPH_F32, SHAPE(4, 7)), b = in(g, "b", GRAPH_F32, SHAPE(4, 7));
  graph_output(g, "eq", graph_binary(g, GRAPH_OP_CMPEQ, a, b));
  graph_output(g, "max", graph_binary(g, GRAPH_OP_MAX, a, b));
  graph_output(g, "min", graph_binary(g, GRAPH_OP_MIN, a, b));
  cg_check_graph("cmpeq max min with ties", g, fill_small_integers);
}

/* exp and tanh of f32 are inline polynomials on the CPU (llvm/math.c), not
 * libm: swept over their whole range and the edges (overflow, the
 * subnormal range, tanh near its clamp at +-9, NaN, infinities,
 * -0), element by element within 1e-6 (a few ulp) of the evaluator. */
static void fill_math_sweep(const Graph *g, EvalValues *ref) {
  static const double edges[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 88.72, 88.73, 89.0,
                                 -87.33, -100.0, -103.9, -104.0, -110.0, 0.624999, -0.624999,
                                 0.625, -0.625, 9.0, -9.0, 20.0, -20.0, 1e-30, -1e-30};
  const int n_edges = (int)(sizeof edges / sizeof *edges);
  EvalTensor *t = eval_tensor(ref, graph_find_leaf(g, "x"));
  for (int64_t i = 0; i < t->numel; i++)
    eval_tensor_set(t, i, i < n_edges ? edges[i] : -110.0 + 220.0 * (double)i / (double)t->numel);
}

static void math_sweep(void) {
  Graph *g = graph_new();
  GraphId x = in(g, "x", GRAPH_F32, SHAPE(40000));
  graph_output(g, "exp", graph_unary(g, GRAPH_OP_EXP, x));
  graph_output(g, "tanh", graph_unary(g, GRAPH_OP_TANH, x));
  EvalValues *ref = cg_reference(g, GRAPH_F32, 1);
  fill_math_sweep(g, ref);
  CgRunOptions options = {.steps = 1, .tolerance = 1e-6};
  CG_CHECK(cg_run("exp tanh sweep", g, ref, &options));
  eval_free(ref);
  graph_free(g);
}

static void select_case(void) {
  Graph *g = graph_new();
  GraphId c = in(g, "c", GRAPH_I32, SHAPE(4, 7));
  GraphId a = in(g, "a", GRAPH_F32, SHAPE(4, 7)), b = in(g, "b", GRAPH_F32, SHAPE(7));
  GraphId bb = graph_broadcast(g, b, SHAPE(4, 7));
  graph_output(g, "select", graph_select(g, c, a, bb));
  GraphId mask = graph_binary(g, GRAPH_OP_CMPLT, a, bb);
  graph_output(g, "computed mask", graph_select(g, mask, graph_unary(g, GRAPH_OP_EXP, a), bb));
  GraphId ci = in(g, "ci", GRAPH_I32, SHAPE(4, 7)), di = in(g, "di", GRAPH_I32, SHAPE(4, 7));
  graph_output(g, "i32", graph_select(g, c, ci, di));
  cg_check_graph("select", g, NULL);
}

/* Rows the CPU reduces in interleaved lanes (llvm/loop_rows.c: 32 for f32, 16
 * for f64): shorter than the lanes (all tail), one short of and one past a
 * whole number of them, long with a tail; summed, maxed, and summed over
 * an elementwise exp and over a reduction nested in a broadcast (the
 * layernorm form). Values in [0.5, 1.5] keep sums away from cancellation,
 * where the elementwise tolerance would judge the order, not the kernel. */
static void fill_positive(const Graph *g, EvalValues *ref) {
  for (GraphId id = 0; id < graph_count(g); id++) {
    if (graph_node(g, id)->op != GRAPH_OP_INPUT)
      continue;
    EvalTensor *t = eval_tensor(ref, id);
    for (int64_t i = 0; i < t->numel; i++)
      eval_tensor_set(t, i, 0.5 + (double)((i * 7919) % 1009) / 1009.0);
  }
}

static void row_lanes(void) {
  const GraphDtype dtypes[2] = {GRAPH_F32, GRAPH_F64};
  const int64_t lengths[] = {1, 5, 15, 16, 17, 31, 32, 33, 100, 1031};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
      Graph *g = graph_new();
      GraphShape s = SHAPE(3, lengths[i]);
      GraphId x = in(g, "x", dtypes[k], s);
      graph_output(g, "sum", graph_reduce(g, GRAPH_OP_REDUCE_SUM, x, 2));
      graph_output(g, "max", graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 2));
      graph_output(g, "sum exp", graph_reduce(g, GRAPH_OP_REDUCE_SUM,
                                              graph_unary(g, GRAPH_OP_EXP, x), 2));
      GraphId m = graph_broadcast(g, graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 2), s);
      graph_output(g, "sum under max", graph_reduce(g, GRAPH_OP_REDUCE_SUM,
                                                    graph_binary(g, GRAPH_OP_ADD, x, m), 2));
      graph_output(g, "all", graph_reduce(g, GRAPH_OP_REDUCE_SUM, x, 3));
      char name[64];
      snprintf(name, sizeof name, "row lanes %s %lld", dtypes[k] == GRAPH_F32 ? "f32" : "f64",
               (long long)lengths[i]);
      cg_check_graph(name, g, fill_positive);
    }
}

static void fill_for_cast(const Graph *g, EvalValues *ref) {
  fill_lo = -20, fill_hi = 20;
  fill_range(g, ref);
  GraphId x = graph_find_leaf(g, "x");
  eval_set(ref, x, 0, 3e9);
  eval_set(ref, x, 1, -3e9);
  eval_set(ref, x, 2, NAN);
  eval_set(ref, x, 3, -0.75);
}

static void cast_case(void) {
  Graph *g = graph_new();
  GraphId x = in(g, "x", GRAPH_F32, SHAPE(3, 5)), i = in(g, "i", GRAPH_I32, SHAPE(5));
  graph_output(g, "f32 to i32", graph_cast(g, x, GRAPH_I32));
  graph_output(g, "i32 to f32", graph_cast(g, graph_broadcast(g, i, SHAPE(3, 5)), GRAPH_F32));
  graph_output(g, "f32 to bf16", graph_cast(g, x, GRAPH_BF16));
  graph_output(g, "i32 to i32", graph_cast(g, i, GRAPH_I32));
  cg_check_graph("cast f32 i32", g, fill_for_cast);

  g = graph_new();
  x = in(g, "x", GRAPH_F64, SHAPE(3, 5));
  graph_output(g, "f64 to i32", graph_cast(g, x, GRAPH_I32));
  graph_output(g, "back", graph_cast(g, graph_cast(g, x, GRAPH_I32), GRAPH_F64));
  cg_check_graph("cast f64 i32", g, fill_for_cast);
}

static void reductions(void) {
  const GraphOp ops[2] = {GRAPH_OP_REDUCE_SUM, GRAPH_OP_REDUCE_MAX};
  for (int k = 0; k < 2; k++) {
    Graph *g = graph_new();
    GraphId x = in(g, "x", GRAPH_F32, SHAPE(3, 4, 5)), y = in(g, "y", GRAPH_F32, SHAPE(5, 3, 4));
    GraphId v = in(g, "v", GRAPH_F32, SHAPE(4, 1));
    /* 3: into [1, 1, 5], 1: into [1, 4, 5], the column form (rows read in
     * order, llvm/loop_rows.c). */
    const uint32_t masks[] = {4, 1, 2, 5, 7, 3};
    for (int m = 0; m < 6; m++) {
      char name[32];
      snprintf(name, sizeof name, "axes %u", masks[m]);
      graph_output(g, name, graph_reduce(g, ops[k], x, masks[m]));
    }
    graph_output(g, "of permute", graph_reduce(g, ops[k], permute3(g, y, 1, 2, 0), 6));
    GraphId e = graph_binary(g, GRAPH_OP_MUL, x, graph_broadcast(g, v, SHAPE(3, 4, 5)));
    graph_output(g, "of broadcast product", graph_reduce(g, ops[k], e, 4));
    graph_output(g, "columns of broadcast product", graph_reduce(g, ops[k], e, 3));
    /* The column form over [4, 5] columns, v's index taken from the flattened column. */
    graph_output(g, "leading axis of broadcast product", graph_reduce(g, ops[k], e, 1));
    GraphId xi = in(g, "xi", GRAPH_I32, SHAPE(6, 5));
    graph_output(g, "i32", graph_reduce(g, ops[k], xi, 2));
    graph_output(g, "i32 all", graph_reduce(g, ops[k], xi, 3));
    graph_output(g, "i32 columns", graph_reduce(g, ops[k], xi, 1));
    cg_check_graph(graph_op_name(ops[k]), g, NULL);
  }
  Graph *g = graph_new();
  GraphId x = in(g, "x", GRAPH_F64, SHAPE(6, 9));
  graph_output(g, "sum", graph_reduce(g, GRAPH_OP_REDUCE_SUM, x, 2));
  graph_output(g, "max", graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 1));
  cg_check_graph("reduce f64", g, NULL);

  /* Leading-axes reductions with few outputs and long columns: on the GPU
   * the threads of a warp (40 rows) or of a block (1100 rows) share each
   * output element (ptx/row.c), the block's tanh and product fused in. */
  g = graph_new();
  x = in(g, "x", GRAPH_F32, SHAPE(40, 7, 3));
  GraphId w = in(g, "w", GRAPH_F32, SHAPE(1100, 3)), z = in(g, "z", GRAPH_F32, SHAPE(1100, 3));
  graph_output(g, "warp columns", graph_reduce(g, GRAPH_OP_REDUCE_SUM, x, 3));
  graph_output(g, "warp columns max", graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 1));
  GraphId tz = graph_binary(g, GRAPH_OP_MUL, graph_unary(g, GRAPH_OP_TANH, w), z);
  graph_output(g, "block columns", graph_reduce(g, GRAPH_OP_REDUCE_SUM, tz, 1));
  cg_check_graph("long columns", g, NULL);

  /* Column sums that the CPU's plan computes in groups of rows
   * (kernel_column_sums.c): a layernorm gain's gradient, (x - mean) * dy
   * over [4, 16] rows with the row's mean broadcast; a sum over two axes
   * around one of length 1; and f64 (a graph of its own: the evaluator
   * computes a graph in one precision). */
  g = graph_new();
  x = in(g, "x", GRAPH_F32, SHAPE(4, 16, 6));
  GraphId dy = in(g, "dy", GRAPH_F32, SHAPE(4, 16, 6)), mean = in(g, "mean", GRAPH_F32, SHAPE(4, 16, 1));
  GraphId centred = graph_binary(g, GRAPH_OP_SUB, x, graph_broadcast(g, mean, SHAPE(4, 16, 6)));
  graph_output(g, "gain gradient",
               graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, centred, dy), 3));
  GraphId u = in(g, "u", GRAPH_F32, SHAPE(8, 1, 8, 5));
  graph_output(g, "around a unit axis", graph_reduce(g, GRAPH_OP_REDUCE_SUM, u, 1 | 4));
  cg_check_graph("column sums in groups of rows", g, NULL);
  g = graph_new();
  graph_output(g, "f64", graph_reduce(g, GRAPH_OP_REDUCE_SUM, in(g, "d", GRAPH_F64, SHAPE(96, 3)), 1));
  cg_check_graph("column sums in groups of rows, f64", g, NULL);
}

static void movement(void) {
  Graph *g = graph_new();
  GraphId x = in(g, "x", GRAPH_F32, SHAPE(2, 3, 4));
  graph_output(g, "reshape", graph_reshape(g, x, SHAPE(6, 4)));
  graph_output(g, "reshape exp", graph_unary(g, GRAPH_OP_EXP, graph_reshape(g, x, SHAPE(4, 6))));
  GraphId p = permute3(g, x, 2, 0, 1);
  graph_output(g, "reshape of permute",
               graph_unary(g, GRAPH_OP_NEG, graph_reshape(g, p, SHAPE(8, 3))));
  graph_output(g, "permute", p);
  graph_output(g, "permute add", graph_binary(g, GRAPH_OP_ADD, p, permute3(g, x, 2, 0, 1)));
  cg_check_graph("reshape permute", g, NULL);

  g = graph_new();
  GraphId c = in(g, "c", GRAPH_F32, SHAPE(3, 1)), s = in(g, "s", GRAPH_F32, SHAPE(1));
  GraphId r = in(g, "r", GRAPH_I32, SHAPE(4));
  graph_output(g, "column", graph_broadcast(g, c, SHAPE(2, 3, 4)));
  graph_output(g, "scalar",
               graph_broadcast(g, graph_reshape(g, s, graph_shape_scalar()), SHAPE(5)));
  graph_output(g, "i32 row", graph_broadcast(g, r, SHAPE(3, 4)));
  cg_check_graph("broadcast", g, NULL);

  g = graph_new();
  x = in(g, "x", GRAPH_F32, SHAPE(7, 9));
  int64_t start[2] = {1, 2}, stop[2] = {7, 9}, step[2] = {2, 3};
  graph_output(g, "strided", graph_slice(g, x, start, stop, step));
  int64_t start1[2] = {0, 3}, stop1[2] = {5, 4};
  graph_output(g, "plain", graph_slice(g, x, start1, stop1, NULL));
  int t[GRAPH_MAX_RANK] = {1, 0};
  int64_t start2[2] = {1, 0}, stop2[2] = {9, 7}, step2[2] = {3, 2};
  graph_output(
      g, "of transpose",
      graph_unary(g, GRAPH_OP_EXP, graph_slice(g, graph_permute(g, x, t), start2, stop2, step2)));
  cg_check_graph("slice", g, NULL);

  g = graph_new();
  GraphId a = in(g, "a", GRAPH_F32, SHAPE(3, 2)), b = in(g, "b", GRAPH_F32, SHAPE(3, 4));
  GraphId d = in(g, "d", GRAPH_F32, SHAPE(3, 1));
  GraphId parts[3] = {a, graph_unary(g, GRAPH_OP_EXP, b), d};
  graph_output(g, "axis 1", graph_concat(g, parts, 3, 1));
  GraphId rows[2] = {b, graph_permute(g, in(g, "e", GRAPH_F32, SHAPE(4, 2)), t)};
  graph_output(g, "axis 0", graph_concat(g, rows, 2, 0));
  GraphId ints[2] = {in(g, "i", GRAPH_I32, SHAPE(2)), in(g, "j", GRAPH_I32, SHAPE(3))};
  graph_output(g, "i32", graph_concat(g, ints, 2, 0));
  cg_check_graph("concat", g, NULL);

  /* A reshape's axes come group by group (llvm/loop.c reshape_axes): axes
   * merged, split, both at once, and unit axes, each of a permute computed
   * in the reading kernel (a reshape of a buffer reads its linear index). */
  g = graph_new();
  x = in(g, "x", GRAPH_F32, SHAPE(2, 3, 4, 5));
  /* [3, 2, 5, 4], read through the permute's axes */
  GraphId px = permute4(g, x, 1, 0, 3, 2);
  int64_t from[3] = {0, 1, 2}, to6[2] = {6, 19}, to3[3] = {3, 9, 4};
  graph_output(g, "merged", graph_slice(g, graph_reshape(g, px, SHAPE(6, 20)), from, to6, NULL));
  graph_output(g, "merged middle",
               graph_slice(g, graph_reshape(g, px, SHAPE(3, 10, 4)), from, to3, NULL));
  graph_output(g, "many to many", neg(g, graph_reshape(g, px, SHAPE(4, 30))));
  graph_output(g, "unit axes", neg(g, graph_reshape(g, px, SHAPE(3, 1, 2, 20, 1))));
  int t2[GRAPH_MAX_RANK] = {1, 0};
  graph_output(g, "split", neg(g, graph_reshape(g, graph_permute(g, in(g, "y", GRAPH_F32, SHAPE(20, 6)), t2),
                                                SHAPE(3, 2, 4, 5))));
  cg_check_graph("reshape groups", g, NULL);

  /* A concat root along the last axis stores each input's part in loops of
   * its own; an input that reshapes a row (heads merged) loops over its
   * input's axes, unless the reshape is stored by a kernel of its own (an
   * output), whose input this kernel cannot read. Along a middle axis the
   * parts are selected element by element. */
  g = graph_new();
  GraphId heads = permute4(g, in(g, "h", GRAPH_F32, SHAPE(2, 3, 4, 5)), 0, 2, 1, 3);
  GraphId pieces[3] = {graph_reshape(g, heads, SHAPE(2, 4, 15)),
                       graph_unary(g, GRAPH_OP_EXP, in(g, "e", GRAPH_F32, SHAPE(2, 4, 6))),
                       graph_reshape(g, neg(g, in(g, "f", GRAPH_F32, SHAPE(2, 4, 2, 3))),
                                     SHAPE(2, 4, 6))};
  graph_output(g, "last axis", graph_concat(g, pieces, 3, 2));
  GraphId stored = graph_reshape(g, in(g, "s", GRAPH_F32, SHAPE(2, 4, 2, 2)), SHAPE(2, 4, 4));
  graph_output(g, "stored reshape", stored);
  GraphId after_stored[2] = {stored, neg(g, in(g, "t", GRAPH_F32, SHAPE(2, 4, 3)))};
  graph_output(g, "of a stored reshape", graph_concat(g, after_stored, 2, 2));
  GraphId middle[2] = {neg(g, in(g, "m", GRAPH_F32, SHAPE(2, 3, 5))),
                       graph_reshape(g, in(g, "n", GRAPH_F32, SHAPE(2, 10)), SHAPE(2, 2, 5))};
  graph_output(g, "middle axis", graph_concat(g, middle, 2, 1));
  cg_check_graph("concat roots", g, NULL);

  g = graph_new();
  x = in(g, "x", GRAPH_F32, SHAPE(3, 4));
  int64_t lo[2] = {1, 0}, hi[2] = {2, 3}, interior[2] = {0, 2};
  graph_output(g, "edges", graph_pad(g, x, lo, hi, NULL, 0.5));
  graph_output(g, "interior", graph_pad(g, x, lo, hi, interior, -2.0));
  graph_output(g, "of transpose", graph_pad(g, graph_permute(g, x, t), hi, lo, interior, 0));
  int64_t lo1[1] = {2}, hi1[1] = {1}, in1[1] = {1};
  graph_output(g, "i32", graph_pad(g, in(g, "i", GRAPH_I32, SHAPE(3)), lo1, hi1, in1, 7));
  cg_check_graph("pad", g, NULL);
}

static void fill_indices(const Graph *g, EvalValues *ref) {
  uint64_t state = 5;
  for (GraphId id = 0; id < graph_count(g); id++) {
    const GraphNode *n = graph_node(g, id);
    if (n->op != GRAPH_OP_INPUT)
      continue;
    if (n->dtype == GRAPH_I32)
      cg_fill(ref, id, -1, 8, &state); /* some rows outside [0, 6) */
    else
      cg_fill(ref, id, -1, 1, &state);
  }
}

static void gather_scatter(void) {
  Graph *g = graph_new();
  GraphId table = in(g, "table", GRAPH_F32, SHAPE(6, 4));
  GraphId idx = in(g, "idx", GRAPH_I32, SHAPE(2, 3));
  graph_output(g, "gather", graph_gather(g, table, idx));
  graph_output(g, "of expression", graph_gather(g, graph_unary(g, GRAPH_OP_EXP, table), idx));
  GraphId one = graph_reshape(g, graph_slice(g, idx, (int64_t[]){1, 2}, (int64_t[]){2, 3}, NULL),
                              graph_shape_scalar());
  graph_output(g, "scalar index", graph_gather(g, table, one));
  GraphId itable = in(g, "itable", GRAPH_I32, SHAPE(6, 2));
  graph_output(g, "i32", graph_gather(g, itable, idx));
  cg_check_graph("gather", g, fill_indices);

  g = graph_new();
  GraphId upd = in(g, "upd", GRAPH_F32, SHAPE(2, 3, 4));
  idx = in(g, "idx", GRAPH_I32, SHAPE(2, 3));
  graph_output(g, "scatter", graph_scatter_add(g, upd, idx, 6));
  graph_output(g, "of expression", graph_scatter_add(g, graph_unary(g, GRAPH_OP_EXP, upd), idx, 5));
  graph_output(g, "i32", graph_scatter_add(g, in(g, "iupd", GRAPH_I32, SHAPE(2, 3, 2)), idx, 6));
  cg_check_graph("scatter_add", g, fill_indices);

  /* A result of 301 x 300 cells: on the GPU a thread takes a column of a
   * block of 2 rows (ptx_scatter_block_rows), the last block one row;
   * fill_indices' rows lie in [-1, 8). */
  g = graph_new();
  upd = in(g, "upd", GRAPH_F32, SHAPE(40, 300));
  idx = in(g, "idx", GRAPH_I32, SHAPE(40));
  graph_output(g, "blocks", graph_scatter_add(g, upd, idx, 301));
  cg_check_graph("scatter_add in row blocks", g, fill_indices);
}

static void dot_case(const char *name, GraphShape sa, GraphShape sb, bool ta, bool tb,
                     GraphDtype dtype) {
  Graph *g = graph_new();
  GraphId a = in(g, "a", dtype, sa), b = in(g, "b", dtype, sb);
  graph_output(g, "c", graph_dot(g, a, b, ta, tb));
  cg_check_graph(name, g, NULL);
}

static void contractions(void) {
  dot_case("dot", SHAPE(3, 4), SHAPE(4, 5), false, false, GRAPH_F32);
  dot_case("dot ta", SHAPE(4, 3), SHAPE(4, 5), true, false, GRAPH_F32);
  dot_case("dot tb", SHAPE(3, 4), SHAPE(5, 4), false, true, GRAPH_F32);
  dot_case("dot ta tb", SHAPE(4, 3), SHAPE(5, 4), true, true, GRAPH_F32);
  dot_case("dot batched", SHAPE(2, 3, 4), SHAPE(2, 4, 5), false, false, GRAPH_F32);
  dot_case("dot shared b", SHAPE(2, 2, 3, 4), SHAPE(4, 5), false, false, GRAPH_F32);
  dot_case("dot shared a", SHAPE(3, 4), SHAPE(2, 5, 4), false, true, GRAPH_F32);
  dot_case("dot tiles", SHAPE(17, 33), SHAPE(33, 300), false, false, GRAPH_F32);
  dot_case("dot f64", SHAPE(2, 5, 6), SHAPE(2, 6, 3), false, false, GRAPH_F64);

  /* Operands that are views: a reshape shares its buffer; a permute and an
   * expression are materialised first. */
  Graph *g = graph_new();
  GraphId x = in(g, "x", GRAPH_F32, SHAPE(2, 3, 4)), w = in(g, "w", GRAPH_F32, SHAPE(4, 5));
  GraphId flat = graph_reshape(g, x, SHAPE(6, 4));
  graph_output(g, "reshaped", graph_dot(g, flat, w, false, false));
  int t[GRAPH_MAX_RANK] = {1, 0};
  graph_output(
      g, "permuted",
      graph_dot(g, graph_permute(g, w, t), graph_unary(g, GRAPH_OP_TANH, flat), false, true));
  graph_output(g, "square", graph_dot(g, w, w, true, false));
  cg_check_graph("dot of views", g, NULL);
}

static void fill_offset(const Graph *g, EvalValues *ref) {
  eval_set(ref, graph_find_leaf(g, "offset"), 0, 12345);
}

static void sources(void) {
  Graph *g = graph_new();
  GraphId x = in(g, "x", GRAPH_F32, SHAPE(3, 4));
  graph_output(g, "iota f32",
               graph_binary(g, GRAPH_OP_ADD, x, graph_iota(g, GRAPH_F32, SHAPE(3, 4), 1)));
  graph_output(g, "iota i32", graph_iota(g, GRAPH_I32, SHAPE(2, 5), 0));
  GraphId ix = in(g, "ix", GRAPH_I32, SHAPE(3, 4));
  graph_output(g, "iota i32 add",
               graph_binary(g, GRAPH_OP_ADD, ix, graph_iota(g, GRAPH_I32, SHAPE(3, 4), 0)));
  double values[12];
  for (int i = 0; i < 12; i++)
    values[i] = i * 0.37 - 2;
  graph_output(
      g, "constant",
      graph_binary(g, GRAPH_OP_MUL, x, graph_constant(g, GRAPH_F32, SHAPE(3, 4), values, 12)));
  graph_output(g, "splat",
               graph_binary(g, GRAPH_OP_MUL, x, graph_splat(g, GRAPH_F32, SHAPE(3, 4), 1.5)));
  graph_output(g, "constant i32", graph_constant(g, GRAPH_I32, SHAPE(12), values, 12));
  graph_output(g, "constant output", graph_constant(g, GRAPH_F32, SHAPE(2, 6), values, 12));
  graph_output(g, "leaf output", x);
  cg_check_graph("iota constant", g, NULL);

  g = graph_new();
  GraphId offset = in(g, "offset", GRAPH_I32, graph_shape_scalar());
  GraphId r = graph_random(g, offset, GRAPH_F32, SHAPE(5, 7), 42);
  graph_output(g, "uniform", r);
  GraphId big = graph_random(g, offset, GRAPH_F32, SHAPE(3, 1000), 0x123456789abcull);
  x = in(g, "x", GRAPH_F32, SHAPE(3, 1000));
  GraphId keep =
      graph_binary(g, GRAPH_OP_CMPLT, big, graph_splat(g, GRAPH_F32, SHAPE(3, 1000), 0.9));
  graph_output(g, "dropout",
               graph_select(g, keep, x, graph_splat(g, GRAPH_F32, SHAPE(3, 1000), 0)));
  cg_check_graph("random", g, fill_offset);

  g = graph_new();
  offset = in(g, "offset", GRAPH_I32, graph_shape_scalar());
  graph_output(g, "uniform", graph_random(g, offset, GRAPH_F64, SHAPE(9, 2), 7));
  cg_check_graph("random f64", g, fill_offset);
}

/* The same graph without a thread pool and for x86-64-v3. */
static void run_modes(void) {
  Graph *g = graph_new();
  GraphId x = in(g, "x", GRAPH_F32, SHAPE(33, 65)), w = in(g, "w", GRAPH_F32, SHAPE(65, 20));
  GraphId h = graph_unary(g, GRAPH_OP_TANH, graph_dot(g, x, w, false, false));
  graph_output(g, "y", graph_reduce(g, GRAPH_OP_REDUCE_SUM, h, 2));
  EvalValues *ref = cg_reference(g, GRAPH_F32, 3);
  cg_run("serial", g, ref, &(CgRunOptions){.steps = 1, .tolerance = 1e-5, .serial = true});
  cg_run("x86-64-v3", g, ref, &(CgRunOptions){.steps = 1, .tolerance = 1e-5, .cpu = "x86-64-v3"});
  eval_free(ref);
  graph_free(g);
}

/* Fused attention: o, lse and the three gradients of one set of inputs,
 * with do a random upstream gradient and delta = rowsum(do * o) as the
 * VJP builds it. Sizes are not multiples of the vector width (head sizes
 * 3, 5, 19, 20) and masks have -inf entries: MASK_ROW hides every key
 * from query 1 (o = 0, lse = -inf, zero gradients), MASK_KEYS pads the
 * last keys of batch b by b + 1 ([B, 1, 1, S], so under causal a query
 * can see no key at all). */
enum { MASK_NONE, MASK_ROW, MASK_KEYS };
static int att_mask_kind;
static GraphId att_mask_id;
/* which of dq, dk, dv (bits 0, 1, 2) a case outputs: kernel formation
 * pairs a grad_k with the grad_v of the same operands (one kernel writes
 * both), so a case without one of them checks the other's own kernel */
static unsigned att_grads = 7;

static void fill_attention_mask(const Graph *g, EvalValues *ref) {
  if (att_mask_id == GRAPH_NONE) return;
  const GraphShape *m = &graph_node(g, att_mask_id)->shape;
  int64_t s = m->dims[m->rank - 1], n = graph_shape_numel(m);
  for (int64_t e = 0; e < n; e++) {
    double x = eval_get(ref, att_mask_id, e);
    int64_t j = e % s, row = e / s; /* row: i for MASK_ROW, b for MASK_KEYS */
    if (att_mask_kind == MASK_ROW && (row == 1 || (j + row) % 3 == 0)) x = -INFINITY;
    if (att_mask_kind == MASK_KEYS && j >= s - 1 - row) x = -INFINITY;
    eval_set(ref, att_mask_id, e, x);
  }
}

static void attention_case(const char *name, GraphDtype dt, GraphShape batch, int64_t t,
                           int64_t s, int64_t d, int64_t dv, int mask_kind, bool causal) {
  Graph *g = graph_new();
  GraphShape qs = batch, ks = batch, vs = batch, os = batch, ms = {0};
  int r = batch.rank + 2;
  qs.rank = ks.rank = vs.rank = os.rank = r;
  qs.dims[r - 2] = os.dims[r - 2] = t;
  ks.dims[r - 2] = vs.dims[r - 2] = s;
  qs.dims[r - 1] = ks.dims[r - 1] = d;
  vs.dims[r - 1] = os.dims[r - 1] = dv;
  if (mask_kind == MASK_ROW) ms = SHAPE(t, s);
  if (mask_kind == MASK_KEYS) {
    ms.rank = r;
    for (int i = 0; i < r; i++) ms.dims[i] = 1;
    ms.dims[0] = batch.dims[0];
    ms.dims[r - 1] = s;
  }
  GraphId q = in(g, "q", dt, qs), k = in(g, "k", dt, ks), v = in(g, "v", dt, vs);
  GraphId d_o = in(g, "do", dt, os);
  att_mask_kind = mask_kind;
  att_mask_id = mask_kind == MASK_NONE ? GRAPH_NONE : in(g, "mask", dt, ms);
  double scale = 1.0 / sqrt((double)d);
  GraphId o = graph_attention(g, q, k, v, att_mask_id, scale, causal);
  GraphAttrs at = {.scale = scale, .causal = causal};
  GraphId lse_in[3] = {q, k, att_mask_id};
  GraphId lse = graph_add_node(g, GRAPH_OP_ATTENTION_LSE, lse_in, att_mask_id < 0 ? 2 : 3, &at);
  GraphId delta = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, d_o, o),
                               1u << (r - 1));
  GraphId grad_in[7] = {q, k, v, d_o, lse, delta, att_mask_id};
  graph_output(g, "o", o);
  /* the 2-norm of a tensor with -inf is NaN: f32 compares lse with its
   * fully masked rows (-inf, exact in the f64 cases) replaced by -1000 */
  GraphShape ls = graph_node(g, lse)->shape;
  GraphId empty = graph_binary(g, GRAPH_OP_CMPEQ, lse, graph_splat(g, dt, ls, -INFINITY));
  graph_output(g, "lse", dt == GRAPH_F64 ? lse : graph_select(g, empty, graph_splat(g, dt, ls, -1000.0), lse));
  const GraphOp grads[3] = {GRAPH_OP_ATTENTION_GRAD_Q, GRAPH_OP_ATTENTION_GRAD_K,
                            GRAPH_OP_ATTENTION_GRAD_V};
  const char *names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; i++)
    if (att_grads & (1u << i))
      graph_output(g, names[i], graph_add_node(g, grads[i], grad_in, att_mask_id < 0 ? 6 : 7, &at));
  if (!CG_CHECK(graph_error(g) == NULL)) {
    fprintf(stderr, "%s: %s\n", name, graph_error(g));
    graph_free(g);
    return;
  }
  /* f64 elementwise; f32: the online softmax and the vector sums round
   * differently from the evaluator's row-at-a-time loops, so each tensor
   * is compared in the 2-norm. Two threads split rows elsewhere than
   * tiles of 4 do without them (odd T), which must not change a bit. */
  EvalValues *ref = cg_reference(g, dt, dt == GRAPH_F64 ? 12345 : 7);
  fill_attention_mask(g, ref);
  CgRunOptions options = {.steps = 1, .tolerance = 1e-5, .norm = dt != GRAPH_F64,
                          .same_serial = true};
  cg_run(name, g, ref, &options);
  /* and for AVX2 (vectors of 8 floats or 4 doubles, so block_dots' blocks
   * are 2 or 4 vectors), which an AVX-512 host would not otherwise test */
  char label[200];
  snprintf(label, sizeof label, "%s x86-64-v3", name);
  options.cpu = "x86-64-v3";
  cg_run(label, g, ref, &options);
  eval_free(ref);
  graph_free(g);
}

static void attention(void) {
  attention_case("attention f32", GRAPH_F32, SHAPE(2, 3), 5, 5, 19, 7, MASK_NONE, false);
  attention_case("attention causal f32", GRAPH_F32, SHAPE(2, 2), 33, 33, 16, 20, MASK_NONE, true);
  attention_case("attention mask, fully masked row f32", GRAPH_F32, SHAPE(2), 6, 9, 8, 5,
                 MASK_ROW, false);
  attention_case("attention cross T != S, padding f32", GRAPH_F32, SHAPE(3, 2), 4, 11, 12, 20,
                 MASK_KEYS, false);
  attention_case("attention causal + padding f32", GRAPH_F32, SHAPE(2, 2), 7, 7, 5, 3,
                 MASK_KEYS, true);
  /* head sizes of more than 4 vectors of 16 (block_axpy's groups), chunks
   * left over and a tail */
  attention_case("attention causal, long heads f32", GRAPH_F32, SHAPE(2), 37, 37, 83, 70,
                 MASK_NONE, true);
  att_grads = 1 | 4;
  attention_case("attention dq and dv, no dk f32", GRAPH_F32, SHAPE(2, 2), 9, 21, 83, 70,
                 MASK_KEYS, false);
  att_grads = 2;
  attention_case("attention dk, no dv, causal + padding f32", GRAPH_F32, SHAPE(2, 2), 13, 13,
                 40, 33, MASK_KEYS, true);
  att_grads = 7;
  attention_case("attention f64 unbatched", GRAPH_F64, (GraphShape){0}, 5, 6, 3, 2, MASK_NONE,
                 false);
  attention_case("attention mask, fully masked row f64", GRAPH_F64, SHAPE(2), 6, 9, 8, 5,
                 MASK_ROW, false);
  attention_case("attention causal + padding f64", GRAPH_F64, SHAPE(2, 3), 9, 9, 17, 4,
                 MASK_KEYS, true);
  /* 2100 keys: k (and v) transposed, d (+ dv) x 2112 elements, past
   * block_dots' 512 KiB of stack keep dot_rows: grad_q in both cases, the
   * forward with the f32 case's longer heads; grad_k (3 queries) takes
   * block_dots */
  attention_case("attention 2100 keys, dot_rows f64", GRAPH_F64, SHAPE(2), 3, 2100, 20, 12,
                 MASK_KEYS, false);
  attention_case("attention 2100 keys, dot_rows f32", GRAPH_F32, SHAPE(2), 3, 2100, 70, 24,
                 MASK_NONE, false);
  /* tiles of 4 rows and single rows (odd T), odd head sizes, a last
   * block past the end of the other side; 3 x 21 rows split by two
   * threads at row 32, batch 1's row 11, off the tiles of 4 a thread
   * alone makes there */
  attention_case("attention causal, odd sizes f64", GRAPH_F64, SHAPE(3), 21, 21, 9, 13,
                 MASK_ROW, true);
  attention_case("attention causal, odd sizes f32", GRAPH_F32, SHAPE(3), 21, 21, 19, 13,
                 MASK_ROW, true);
}

int main(void) {
  cg_start("codegen_ops");
  elementwise();
  math_sweep();
  select_case();
  cast_case();
  reductions();
  row_lanes();
  movement();
  gather_scatter();
  contractions();
  attention();
  sources();
  run_modes();
  return cg_finish("codegen_ops");
}
