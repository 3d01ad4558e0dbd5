/* The reference evaluator against hand-computed results, for every
 * primitive, in both precisions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "eval.h"
#include "graph_text.h"
#include "testutil.h"

/* Evaluates output "y" of `text` at f32 and f64 and compares with want. */
static void expect(const char *name, const char *text, const double *want, int64_t n) {
  Graph *g = test_parse(text);
  if (!g) return;
  GraphId y = graph_find_output(g, "y");
  CHECK(y != GRAPH_NONE);
  const GraphDtype precisions[2] = {GRAPH_F64, GRAPH_F32};
  for (int p = 0; p < 2 && y != GRAPH_NONE; p++) {
    EvalValues *v = eval_new(g, precisions[p]);
    eval_run(v);
    double tol = p == 0 ? 1e-14 : 1e-6;
    if (!CHECK(eval_tensor(v, y)->numel == n)) fprintf(stderr, "  in %s\n", name);
    for (int64_t i = 0; i < n && i < eval_tensor(v, y)->numel; i++) {
      double got = eval_get(v, y, i);
      if (!CHECK_NEAR(got, want[i], tol * fmax(1.0, fabs(want[i]))))
        fprintf(stderr, "  in %s, element %lld, %s\n", name, (long long)i,
                p == 0 ? "f64" : "f32");
    }
    eval_free(v);
  }
  graph_free(g);
}

#define EXPECT(name, text, ...)                                          \
  do {                                                                   \
    const double want_[] = {__VA_ARGS__};                                \
    expect(name, text, want_, (int64_t)(sizeof want_ / sizeof want_[0])); \
  } while (0)

static void unary(void) {
  EXPECT("neg", "%0 = constant [1, -2, 3] : f64[3]\n%1 = neg %0 : f64[3]\noutput \"y\" = %1\n",
         -1, 2, -3);
  EXPECT("neg i32", "%0 = constant [-5, 7] : i32[2]\n%1 = neg %0 : i32[2]\noutput \"y\" = %1\n",
         5, -7);
  EXPECT("exp", "%0 = constant [0, 1, -1] : f64[3]\n%1 = exp %0 : f64[3]\noutput \"y\" = %1\n",
         1, 2.718281828459045, 0.36787944117144233);
  EXPECT("log",
         "%0 = constant [1, 2.718281828459045, 0.5] : f64[3]\n%1 = log %0 : f64[3]\n"
         "output \"y\" = %1\n",
         0, 1, -0.6931471805599453);
  EXPECT("sqrt",
         "%0 = constant [4, 2, 0.25] : f64[3]\n%1 = sqrt %0 : f64[3]\noutput \"y\" = %1\n", 2,
         1.4142135623730951, 0.5);
  EXPECT("rsqrt", "%0 = constant [4, 0.25] : f64[2]\n%1 = rsqrt %0 : f64[2]\noutput \"y\" = %1\n",
         0.5, 2);
  EXPECT("tanh", "%0 = constant [0, 0.5] : f64[2]\n%1 = tanh %0 : f64[2]\noutput \"y\" = %1\n", 0,
         0.46211715726000974);
  /* erf(0.5) and erf(-2) from Abramowitz and Stegun's table 7.1 */
  EXPECT("erf", "%0 = constant [0.5, -2] : f64[2]\n%1 = erf %0 : f64[2]\noutput \"y\" = %1\n",
         0.5204998778130465, -0.9953222650189527);
  EXPECT("sin",
         "%0 = constant [0, 1.5707963267948966, 0.5] : f64[3]\n%1 = sin %0 : f64[3]\n"
         "output \"y\" = %1\n",
         0, 1, 0.479425538604203);
  EXPECT("cos",
         "%0 = constant [0, 3.141592653589793, 0.5] : f64[3]\n%1 = cos %0 : f64[3]\n"
         "output \"y\" = %1\n",
         1, -1, 0.8775825618903728);
  EXPECT("abs", "%0 = constant [-1.5, 2, 0] : f64[3]\n%1 = abs %0 : f64[3]\noutput \"y\" = %1\n",
         1.5, 2, 0);
  EXPECT("abs i32", "%0 = constant [-3, 4] : i32[2]\n%1 = abs %0 : i32[2]\noutput \"y\" = %1\n",
         3, 4);
  EXPECT("recip",
         "%0 = constant [2, -4, 0.5] : f64[3]\n%1 = recip %0 : f64[3]\noutput \"y\" = %1\n", 0.5,
         -0.25, 2);
  EXPECT("stop_gradient",
         "%0 = constant [2, -4, 0.5] : f64[3]\n%1 = stop_gradient %0 : f64[3]\n"
         "output \"y\" = %1\n",
         2, -4, 0.5);
  EXPECT("stop_gradient i32",
         "%0 = constant [-3, 4] : i32[2]\n%1 = stop_gradient %0 : i32[2]\noutput \"y\" = %1\n",
         -3, 4);
}

#define AB "%0 = constant [1, 2, 3] : f64[3]\n%1 = constant [4, -5, 0.5] : f64[3]\n"

static void binary(void) {
  EXPECT("add", AB "%2 = add %0, %1 : f64[3]\noutput \"y\" = %2\n", 5, -3, 3.5);
  EXPECT("sub", AB "%2 = sub %0, %1 : f64[3]\noutput \"y\" = %2\n", -3, 7, 2.5);
  EXPECT("mul", AB "%2 = mul %0, %1 : f64[3]\noutput \"y\" = %2\n", 4, -10, 1.5);
  EXPECT("div", AB "%2 = div %0, %1 : f64[3]\noutput \"y\" = %2\n", 0.25, -0.4, 6);
  EXPECT("max",
         "%0 = constant [1, 5, -2] : f64[3]\n%1 = constant [3, 5, -4] : f64[3]\n"
         "%2 = max %0, %1 : f64[3]\noutput \"y\" = %2\n",
         3, 5, -2);
  EXPECT("min",
         "%0 = constant [1, 5, -2] : f64[3]\n%1 = constant [3, 5, -4] : f64[3]\n"
         "%2 = min %0, %1 : f64[3]\noutput \"y\" = %2\n",
         1, 5, -4);
  EXPECT("pow",
         "%0 = constant [2, 9, 4] : f64[3]\n%1 = constant [3, 0.5, -1] : f64[3]\n"
         "%2 = pow %0, %1 : f64[3]\noutput \"y\" = %2\n",
         8, 3, 0.25);
  EXPECT("add i32 wraps",
         "%0 = constant [2147483647, 3] : i32[2]\n%1 = constant [1, -5] : i32[2]\n"
         "%2 = add %0, %1 : i32[2]\noutput \"y\" = %2\n",
         -2147483648.0, -2);
  EXPECT("cmplt",
         "%0 = constant [1, 2, 3] : f64[3]\n%1 = constant 2 : f64[3]\n"
         "%2 = cmplt %0, %1 : i32[3]\noutput \"y\" = %2\n",
         1, 0, 0);
  EXPECT("cmpeq",
         "%0 = constant [1, 2, 3] : f64[3]\n%1 = constant 2 : f64[3]\n"
         "%2 = cmpeq %0, %1 : i32[3]\noutput \"y\" = %2\n",
         0, 1, 0);
  EXPECT("select",
         "%0 = constant [1, 0, 1] : i32[3]\n%1 = constant [1, 2, 3] : f64[3]\n"
         "%2 = constant [4, 5, 6] : f64[3]\n%3 = select %0, %1, %2 : f64[3]\n"
         "output \"y\" = %3\n",
         1, 5, 3);
  EXPECT("cast to i32 truncates and saturates",
         "%0 = constant [1.7, -1.7, 3e9, nan] : f64[4]\n%1 = cast %0 : i32[4]\n"
         "output \"y\" = %1\n",
         1, -1, 2147483647, 0);
  EXPECT("cast from i32", "%0 = constant [3, -2] : i32[2]\n%1 = cast %0 : f32[2]\noutput \"y\" = %1\n",
         3, -2);
}

#define M23 "%0 = constant [1, 2, 3, 4, 5, 6] : f64[2,3]\n"

static void reductions(void) {
  EXPECT("reduce_sum rows", M23 "%1 = reduce_sum %0 axes=[1] : f64[2,1]\noutput \"y\" = %1\n", 6,
         15);
  EXPECT("reduce_sum cols", M23 "%1 = reduce_sum %0 axes=[0] : f64[1,3]\noutput \"y\" = %1\n", 5,
         7, 9);
  EXPECT("reduce_sum all", M23 "%1 = reduce_sum %0 axes=[0,1] : f64[1,1]\noutput \"y\" = %1\n",
         21);
  EXPECT("reduce_max",
         "%0 = constant [1, 3, 2, -4, -1, -5] : f64[2,3]\n"
         "%1 = reduce_max %0 axes=[1] : f64[2,1]\noutput \"y\" = %1\n",
         3, -1);
  EXPECT("reduce_sum i32",
         "%0 = constant [1, 2, 3, 4] : i32[2,2]\n%1 = reduce_sum %0 axes=[0] : i32[1,2]\n"
         "output \"y\" = %1\n",
         4, 6);
}

static void movement(void) {
  EXPECT("reshape", M23 "%1 = reshape %0 : f64[3,2]\noutput \"y\" = %1\n", 1, 2, 3, 4, 5, 6);
  EXPECT("permute", M23 "%1 = permute %0 perm=[1,0] : f64[3,2]\noutput \"y\" = %1\n", 1, 4, 2, 5,
         3, 6);
  EXPECT("broadcast row",
         "%0 = constant [1, 2, 3] : f64[3]\n%1 = broadcast %0 : f64[2,3]\noutput \"y\" = %1\n", 1,
         2, 3, 1, 2, 3);
  EXPECT("broadcast column",
         "%0 = constant [1, 2] : f64[2,1]\n%1 = broadcast %0 : f64[2,3]\noutput \"y\" = %1\n", 1,
         1, 1, 2, 2, 2);
  EXPECT("broadcast scalar",
         "%0 = constant 7 : f64[]\n%1 = broadcast %0 : f64[2,2]\noutput \"y\" = %1\n", 7, 7, 7,
         7);
  EXPECT("slice with step",
         "%0 = constant [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] : f64[2,6]\n"
         "%1 = slice %0 start=[0,1] stop=[2,6] step=[1,2] : f64[2,3]\noutput \"y\" = %1\n",
         1, 3, 5, 7, 9, 11);
  EXPECT("slice rows",
         "%0 = constant [0, 1, 2, 3, 4, 5] : f64[3,2]\n"
         "%1 = slice %0 start=[1,0] stop=[3,1] step=[1,1] : f64[2,1]\noutput \"y\" = %1\n",
         2, 4);
  EXPECT("concat 1-d",
         "%0 = constant [1, 2] : f64[2]\n%1 = constant [3, 4, 5] : f64[3]\n"
         "%2 = concat %0, %1 axis=0 : f64[5]\noutput \"y\" = %2\n",
         1, 2, 3, 4, 5);
  EXPECT("concat axis 1",
         "%0 = constant [1, 2] : f64[2,1]\n%1 = constant [3, 4, 5, 6] : f64[2,2]\n"
         "%2 = concat %0, %1 axis=1 : f64[2,3]\noutput \"y\" = %2\n",
         1, 3, 4, 2, 5, 6);
  EXPECT("pad",
         "%0 = constant [1, 2, 3] : f64[3]\n"
         "%1 = pad %0 lo=[1] hi=[2] interior=[1] value=9 : f64[8]\noutput \"y\" = %1\n",
         9, 1, 9, 2, 9, 3, 9, 9);
  EXPECT("gather, out-of-range rows read zeros",
         "%0 = constant [1, 2, 3, 4, 5, 6] : f64[3,2]\n%1 = constant [2, 0, 5, -1] : i32[2,2]\n"
         "%2 = gather %0, %1 : f64[2,2,2]\noutput \"y\" = %2\n",
         5, 6, 1, 2, 0, 0, 0, 0);
  EXPECT("scatter_add sums repeats, drops out-of-range",
         "%0 = constant [1, 2, 3, 4, 5, 6] : f64[3,2]\n%1 = constant [1, 1, 7] : i32[3]\n"
         "%2 = scatter_add %0, %1 : f64[3,2]\noutput \"y\" = %2\n",
         0, 0, 4, 6, 0, 0);
}

/* out[a,b,c] = in[b,c,a] for perm [2,0,1] of an iota-like [2,3,4] tensor. */
static void permute_rank3(void) {
  Graph *g = graph_new();
  GraphShape s = {3, {2, 3, 4}};
  GraphId a = graph_iota(g, GRAPH_F64, s, 0), b = graph_iota(g, GRAPH_F64, s, 1);
  GraphId c = graph_iota(g, GRAPH_F64, s, 2);
  GraphId v = graph_binary(g, GRAPH_OP_ADD, graph_binary(g, GRAPH_OP_MUL, a, graph_splat(g, GRAPH_F64, s, 12)),
                           graph_binary(g, GRAPH_OP_MUL, b, graph_splat(g, GRAPH_F64, s, 4)));
  v = graph_binary(g, GRAPH_OP_ADD, v, c); /* v = 12 i + 4 j + k = the flat index */
  GraphId p = graph_permute(g, v, (const int[]){2, 0, 1});
  CHECK(graph_error(g) == NULL);
  EvalValues *ev = eval_new(g, GRAPH_F64);
  eval_run(ev);
  const GraphShape *ps = &graph_node(g, p)->shape;
  CHECK(ps->dims[0] == 4 && ps->dims[1] == 2 && ps->dims[2] == 3);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 3; k++)
        CHECK(eval_get(ev, p, (i * 2 + j) * 3 + k) == j * 12 + k * 4 + i);
  eval_free(ev);
  graph_free(g);
}

#define A22 "%0 = constant [1, 2, 3, 4] : f64[2,2]\n%1 = constant [5, 6, 7, 8] : f64[2,2]\n"

static void contraction_and_sources(void) {
  EXPECT("dot", A22 "%2 = dot %0, %1 transpose_a=false transpose_b=false : f64[2,2]\n"
                    "output \"y\" = %2\n",
         19, 22, 43, 50);
  EXPECT("dot ta", A22 "%2 = dot %0, %1 transpose_a=true transpose_b=false : f64[2,2]\n"
                       "output \"y\" = %2\n",
         26, 30, 38, 44);
  EXPECT("dot tb", A22 "%2 = dot %0, %1 transpose_a=false transpose_b=true : f64[2,2]\n"
                       "output \"y\" = %2\n",
         17, 23, 39, 53);
  EXPECT("dot ta tb", A22 "%2 = dot %0, %1 transpose_a=true transpose_b=true : f64[2,2]\n"
                          "output \"y\" = %2\n",
         23, 31, 34, 46);
  EXPECT("dot rectangular",
         "%0 = constant [1, 2, 3, 4, 5, 6] : f64[2,3]\n%1 = constant [1, 0, 0, 1, 1, 1] : f64[3,2]\n"
         "%2 = dot %0, %1 transpose_a=false transpose_b=false : f64[2,2]\noutput \"y\" = %2\n",
         4, 5, 10, 11);
  EXPECT("dot batched with a shared operand",
         "%0 = constant [1, 2, 3, 4, 1, 0, 0, 1] : f64[2,2,2]\n%1 = constant [5, 6, 7, 8] : f64[2,2]\n"
         "%2 = dot %0, %1 transpose_a=false transpose_b=false : f64[2,2,2]\noutput \"y\" = %2\n",
         19, 22, 43, 50, 5, 6, 7, 8);
  EXPECT("dot batched",
         "%0 = constant [1, 2, 3, 4, 1, 0, 0, 1] : f64[2,2,2]\n"
         "%1 = constant [5, 6, 7, 8, 2, 0, 0, 2] : f64[2,2,2]\n"
         "%2 = dot %0, %1 transpose_a=false transpose_b=false : f64[2,2,2]\noutput \"y\" = %2\n",
         19, 22, 43, 50, 2, 0, 0, 2);
  EXPECT("iota axis 1", "%0 = iota axis=1 : f64[2,3]\noutput \"y\" = %0\n", 0, 1, 2, 0, 1, 2);
  EXPECT("iota axis 0 i32", "%0 = iota axis=0 : i32[2,3]\noutput \"y\" = %0\n", 0, 0, 0, 1, 1, 1);
  EXPECT("splat constant", "%0 = constant 2.5 : f64[2,2]\noutput \"y\" = %0\n", 2.5, 2.5, 2.5,
         2.5);
}

/* softmax(x) = exp(x - max) / sum: the worked examples of SPEC.md. */
#define SOFTMAX_ROW(x)                                                      \
  x "%10 = reduce_max %0 axes=[1] : f64[1,1]\n"                             \
    "%11 = broadcast %10 : f64[1,3]\n"                                      \
    "%12 = sub %0, %11 : f64[1,3]\n%13 = exp %12 : f64[1,3]\n"              \
    "%14 = reduce_sum %13 axes=[1] : f64[1,1]\n%15 = broadcast %14 : f64[1,3]\n" \
    "%16 = div %13, %15 : f64[1,3]\n"

static void worked_examples(void) {
  /* Shift invariance: softmax([100,100,100]) = [1/3]*3 (the max subtraction
   * keeps exp from overflowing even at f32). */
  EXPECT("softmax shift invariance",
         SOFTMAX_ROW("%0 = constant 100 : f64[1,3]\n") "output \"y\" = %16\n", 1.0 / 3,
         1.0 / 3, 1.0 / 3);
  /* h1 = (1,0), h2 = (0,1), h3 = (1,1), s = (0.9, 0.2), dot scores. */
  const char *attention =
      "%1 = constant [0.9, 0.2] : f64[1,2]\n"
      "%2 = constant [1, 0, 0, 1, 1, 1] : f64[3,2]\n"
      "%0 = dot %1, %2 transpose_a=false transpose_b=true : f64[1,3]\n" SOFTMAX_ROW("")
      "%17 = dot %16, %2 transpose_a=false transpose_b=false : f64[1,2]\n"
      "output \"scores\" = %0\noutput \"alpha\" = %16\noutput \"context\" = %17\n";
  Graph *g = test_parse(attention);
  if (!g) return;
  EvalValues *v = eval_new(g, GRAPH_F64);
  eval_run(v);
  GraphId scores = graph_find_output(g, "scores"), alpha = graph_find_output(g, "alpha");
  GraphId context = graph_find_output(g, "context");
  const double e[3] = {0.9, 0.2, 1.1}, a[3] = {0.368, 0.183, 0.449}, c[2] = {0.817, 0.632};
  for (int i = 0; i < 3; i++) CHECK_NEAR(eval_get(v, scores, i), e[i], 1e-15);
  for (int i = 0; i < 3; i++) CHECK_NEAR(eval_get(v, alpha, i), a[i], 5e-4);
  for (int i = 0; i < 2; i++) CHECK_NEAR(eval_get(v, context, i), c[i], 5e-4);
  eval_free(v);
  graph_free(g);
}

/* Precision: f32 evaluation rounds like f32 arithmetic. */
static void precision(void) {
  const char *text = "%0 = constant 16777216 : f64[]\n%1 = constant 1 : f64[]\n"
                     "%2 = add %0, %1 : f64[]\noutput \"y\" = %2\n";
  Graph *g = test_parse(text);
  if (!g) return;
  EvalValues *v32 = eval_new(g, GRAPH_F32), *v64 = eval_new(g, GRAPH_F64);
  eval_run(v32);
  eval_run(v64);
  GraphId y = graph_find_output(g, "y");
  CHECK(eval_get(v32, y, 0) == 16777216.0); /* 2^24 + 1 is not an f32 */
  CHECK(eval_get(v64, y, 0) == 16777217.0);
  CHECK(eval_new(g, GRAPH_I32) == NULL);
  eval_free(v32);
  eval_free(v64);
  graph_free(g);
}

/* tf32 as cvt.rna.tf32.f32 rounds: 10 mantissa bits, nearest, ties away
 * from zero; and the evaluator's f32 dots with tf32 operands (the reference
 * for GPU runs), which leave f64 evaluation alone. */
static void tf32(void) {
  static const float cases[][2] = {
      {1, 1},
      {1 + 0x1p-11f - 0x1p-23f, 1},      /* just below half a unit: down */
      {1 + 0x1p-11f, 1 + 0x1p-10f},      /* a tie: away from zero */
      {-1 - 0x1p-11f, -1 - 0x1p-10f},    /* a negative tie: away from zero too */
      {1 + 0x1p-11f + 0x1p-23f, 1 + 0x1p-10f}, /* just above half a unit: up */
      {2 - 0x1p-22f, 2},                 /* a carry into the exponent */
      {INFINITY, INFINITY},              /* infinity stays */
      {4095 * 0x1p-149f, 0},             /* a subnormal below half a unit */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    float got = eval_tf32_round(cases[i][0]);
    if (!CHECK(got == cases[i][1]))
      fprintf(stderr, "eval_tf32_round(%a) = %a, expected %a\n", cases[i][0], got, cases[i][1]);
  }
  CHECK(isnan(eval_tf32_round(NAN)));
  /* [1 + 2^-12, 1 + 2^-11] . [1, 1]: f32 keeps both, tf32 rounds the first
   * to 1 and the second (a tie) to 1 + 2^-10. */
  const char *text = "%0 = input \"a\" : f32[1,2]\n%1 = input \"b\" : f32[2,1]\n"
                     "%2 = dot %0, %1 transpose_a=false transpose_b=false : f32[1,1]\n"
                     "output \"y\" = %2\n";
  Graph *g = test_parse(text);
  if (!g) return;
  GraphId a = graph_find_leaf(g, "a"), b = graph_find_leaf(g, "b"), y = graph_find_output(g, "y");
  double in_a[2] = {1 + 0x1p-12, 1 + 0x1p-11}, in_b[2] = {1, 1};
  for (int precision = 0; precision < 2; precision++) {
    EvalValues *v = eval_new(g, precision ? GRAPH_F64 : GRAPH_F32);
    eval_set_all(v, a, in_a, 2);
    eval_set_all(v, b, in_b, 2);
    eval_run(v);
    double plain = eval_get(v, y, 0);
    eval_set_tf32_dots(v, true);
    eval_run(v);
    double rounded = eval_get(v, y, 0);
    CHECK(plain == 2 + 0x1p-12 + 0x1p-11);
    CHECK(rounded == (precision ? plain : 2 + 0x1p-10));
    eval_free(v);
  }
  graph_free(g);
}

int main(void) {
  unary();
  tf32();
  binary();
  reductions();
  movement();
  permute_rank3();
  contraction_and_sources();
  worked_examples();
  precision();
  return test_finish("eval");
}
