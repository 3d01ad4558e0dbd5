/* Gradient checks in f64: the gradients autodiff builds against central
 * finite differences of the loss sum(y * w), w a fixed random tensor, for
 * every primitive and for composites (softmax, layernorm, cross-entropy,
 * attention, dropout) and the fused attention op. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "eval.h"
#include "graph_text.h"
#include "testutil.h"

#define STEP 1e-5
#define TOLERANCE 1e-6

typedef enum { NONZERO, ALL_ZERO } Expectation;

/* Appends loss = sum(y * w) for a fixed random w and returns it. */
static GraphId weighted_sum(Graph *g, GraphId y, uint64_t *rng) {
  const GraphNode *n = graph_node(g, y);
  GraphShape shape = n->shape;
  GraphDtype dtype = n->dtype;
  int64_t count = graph_shape_numel(&shape);
  double *w = malloc((size_t)count * sizeof(double));
  for (int64_t i = 0; i < count; i++) w[i] = test_uniform(rng, -1.5, 1.5);
  GraphId weights = graph_constant(g, dtype, shape, w, count);
  free(w);
  GraphId product = graph_binary(g, GRAPH_OP_MUL, y, weights);
  GraphId sum = graph_reduce(g, GRAPH_OP_REDUCE_SUM, product, (1u << shape.rank) - 1);
  return graph_reshape(g, sum, graph_shape_scalar());
}

/* Differentiates `loss` by every param of g (params get values in
 * [lo, hi]) and compares with finite differences. */
static void check_gradients(const char *name, Graph *g, GraphId loss, double lo, double hi,
                            Expectation expectation, uint64_t *rng) {
  int count = graph_num_params(g);
  GraphId params[16], grads[16];
  if (!CHECK(count > 0 && count <= 16)) return;
  for (int i = 0; i < count; i++) params[i] = graph_param_at(g, i);
  if (!CHECK(autodiff_gradients(g, loss, params, count, grads))) {
    fprintf(stderr, "  %s: %s\n", name, graph_error(g));
    return;
  }
  EvalValues *v = eval_new(g, GRAPH_F64);
  GraphId step = graph_find_leaf(g, "step");
  if (step != GRAPH_NONE) eval_set(v, step, 0, 5);
  for (int i = 0; i < count; i++)
    for (int64_t k = 0; k < eval_tensor(v, params[i])->numel; k++)
      eval_set(v, params[i], k, test_uniform(rng, lo, hi));
  eval_run(v);
  double *analytic = NULL;
  int nonzero = 0, failures_before = test_failures;
  for (int i = 0; i < count; i++) {
    int64_t n = eval_tensor(v, params[i])->numel;
    analytic = realloc(analytic, (size_t)n * sizeof(double));
    eval_run(v); /* the previous param's last finite difference left it perturbed */
    for (int64_t k = 0; k < n; k++) analytic[k] = eval_get(v, grads[i], k);
    for (int64_t k = 0; k < n; k++) {
      double x = eval_get(v, params[i], k);
      eval_set(v, params[i], k, x + STEP);
      eval_run(v);
      double up = eval_get(v, loss, 0);
      eval_set(v, params[i], k, x - STEP);
      eval_run(v);
      double down = eval_get(v, loss, 0);
      eval_set(v, params[i], k, x);
      double numeric = (up - down) / (2 * STEP);
      double error = fabs(analytic[k] - numeric);
      double scale = fmax(fabs(analytic[k]), fabs(numeric));
      /* relative error, except for gradients that are zero up to rounding */
      bool ok = error <= TOLERANCE * scale || error <= 1e-9;
      if (!CHECK(ok))
        fprintf(stderr, "  %s: d/d%s[%lld]: autodiff %.12g, finite difference %.12g\n", name,
                graph_node(g, params[i])->attrs.name, (long long)k, analytic[k], numeric);
      nonzero += fabs(analytic[k]) > 1e-6;
    }
  }
  if (expectation == ALL_ZERO) {
    if (!CHECK(nonzero == 0)) fprintf(stderr, "  %s: expected no gradient\n", name);
  } else if (!CHECK(nonzero > 0)) {
    fprintf(stderr, "  %s: every gradient is zero, the check proves nothing\n", name);
  }
  if (test_failures == failures_before) printf("ok  %s\n", name);
  free(analytic);
  eval_free(v);
}

typedef struct Case {
  const char *name;
  const char *text; /* params and nodes; output "y" is differentiated */
  double lo, hi;    /* range of the param values */
  Expectation expectation;
} Case;

#define P23 "%0 = param \"x\" : f64[2,3]\n"
#define PAB "%0 = param \"a\" : f64[2,3]\n%1 = param \"b\" : f64[2,3]\n"

static const Case primitive_cases[] = {
    {"neg", P23 "%1 = neg %0 : f64[2,3]\noutput \"y\" = %1\n", -2, 2, NONZERO},
    {"exp", P23 "%1 = exp %0 : f64[2,3]\noutput \"y\" = %1\n", -2, 2, NONZERO},
    {"log", P23 "%1 = log %0 : f64[2,3]\noutput \"y\" = %1\n", 0.5, 2, NONZERO},
    {"sqrt", P23 "%1 = sqrt %0 : f64[2,3]\noutput \"y\" = %1\n", 0.5, 2, NONZERO},
    {"rsqrt", P23 "%1 = rsqrt %0 : f64[2,3]\noutput \"y\" = %1\n", 0.5, 2, NONZERO},
    {"tanh", P23 "%1 = tanh %0 : f64[2,3]\noutput \"y\" = %1\n", -2, 2, NONZERO},
    {"sin", P23 "%1 = sin %0 : f64[2,3]\noutput \"y\" = %1\n", -2, 2, NONZERO},
    {"cos", P23 "%1 = cos %0 : f64[2,3]\noutput \"y\" = %1\n", -2, 2, NONZERO},
    {"erf", P23 "%1 = erf %0 : f64[2,3]\noutput \"y\" = %1\n", -2, 2, NONZERO},
    {"abs", P23 "%1 = abs %0 : f64[2,3]\noutput \"y\" = %1\n", -2, 2, NONZERO},
    {"recip", P23 "%1 = recip %0 : f64[2,3]\noutput \"y\" = %1\n", 0.5, 2, NONZERO},
    {"add", PAB "%2 = add %0, %1 : f64[2,3]\noutput \"y\" = %2\n", -2, 2, NONZERO},
    {"sub", PAB "%2 = sub %0, %1 : f64[2,3]\noutput \"y\" = %2\n", -2, 2, NONZERO},
    {"mul", PAB "%2 = mul %0, %1 : f64[2,3]\noutput \"y\" = %2\n", -2, 2, NONZERO},
    {"mul of x by itself (fan-out)", P23 "%1 = mul %0, %0 : f64[2,3]\noutput \"y\" = %1\n", -2,
     2, NONZERO},
    {"div", PAB "%2 = div %0, %1 : f64[2,3]\noutput \"y\" = %2\n", 0.5, 2, NONZERO},
    {"max", PAB "%2 = max %0, %1 : f64[2,3]\noutput \"y\" = %2\n", -2, 2, NONZERO},
    {"min", PAB "%2 = min %0, %1 : f64[2,3]\noutput \"y\" = %2\n", -2, 2, NONZERO},
    {"pow", PAB "%2 = pow %0, %1 : f64[2,3]\noutput \"y\" = %2\n", 0.5, 2, NONZERO},
    {"cmplt (no gradient)",
     PAB "%2 = cmplt %0, %1 : i32[2,3]\n%3 = cast %2 : f64[2,3]\noutput \"y\" = %3\n", -2, 2,
     ALL_ZERO},
    {"cmpeq (no gradient)",
     PAB "%2 = cmpeq %0, %1 : i32[2,3]\n%3 = cast %2 : f64[2,3]\noutput \"y\" = %3\n", -2, 2,
     ALL_ZERO},
    {"select",
     PAB "%2 = constant [1, 0, 0, 1, 1, 0] : i32[2,3]\n%3 = select %2, %0, %1 : f64[2,3]\n"
         "output \"y\" = %3\n",
     -2, 2, NONZERO},
    {"cast f64 -> f32 -> f64",
     P23 "%1 = cast %0 : f32[2,3]\n%2 = mul %1, %1 : f32[2,3]\n%3 = cast %2 : f64[2,3]\n"
         "output \"y\" = %3\n",
     -2, 2, NONZERO},
    {"reduce_sum", P23 "%1 = reduce_sum %0 axes=[1] : f64[2,1]\n%2 = exp %1 : f64[2,1]\n"
                       "output \"y\" = %2\n",
     -1, 1, NONZERO},
    {"reduce_sum of rank 3",
     "%0 = param \"x\" : f64[2,3,2]\n%1 = reduce_sum %0 axes=[0,2] : f64[1,3,1]\n"
     "%2 = mul %1, %1 : f64[1,3,1]\noutput \"y\" = %2\n",
     -1, 1, NONZERO},
    {"reduce_max", P23 "%1 = reduce_max %0 axes=[1] : f64[2,1]\n%2 = mul %1, %1 : f64[2,1]\n"
                       "output \"y\" = %2\n",
     -2, 2, NONZERO},
    {"reshape", P23 "%1 = reshape %0 : f64[3,2]\n%2 = mul %1, %1 : f64[3,2]\noutput \"y\" = %2\n",
     -2, 2, NONZERO},
    {"permute",
     "%0 = param \"x\" : f64[2,3,4]\n%1 = permute %0 perm=[2,0,1] : f64[4,2,3]\n"
     "%2 = mul %1, %1 : f64[4,2,3]\noutput \"y\" = %2\n",
     -2, 2, NONZERO},
    {"broadcast new axes", "%0 = param \"x\" : f64[3]\n%1 = broadcast %0 : f64[2,4,3]\n"
                           "%2 = mul %1, %1 : f64[2,4,3]\noutput \"y\" = %2\n",
     -2, 2, NONZERO},
    {"broadcast unit axes", "%0 = param \"x\" : f64[2,1]\n%1 = broadcast %0 : f64[2,3]\n"
                            "%2 = mul %1, %1 : f64[2,3]\noutput \"y\" = %2\n",
     -2, 2, NONZERO},
    {"broadcast scalar", "%0 = param \"x\" : f64[]\n%1 = broadcast %0 : f64[2,2]\n"
                         "%2 = sin %1 : f64[2,2]\noutput \"y\" = %2\n",
     -2, 2, NONZERO},
    {"slice with steps",
     "%0 = param \"x\" : f64[4,7]\n%1 = slice %0 start=[1,0] stop=[4,7] step=[2,3] : f64[2,3]\n"
     "%2 = mul %1, %1 : f64[2,3]\noutput \"y\" = %2\n",
     -2, 2, NONZERO},
    {"concat", "%0 = param \"a\" : f64[2,1]\n%1 = param \"b\" : f64[2,3]\n"
               "%2 = param \"c\" : f64[2,2]\n%3 = concat %0, %1, %2 axis=1 : f64[2,6]\n"
               "%4 = mul %3, %3 : f64[2,6]\noutput \"y\" = %4\n",
     -2, 2, NONZERO},
    {"pad", P23 "%1 = pad %0 lo=[1,0] hi=[0,2] interior=[1,2] value=0.5 : f64[4,9]\n"
                "%2 = mul %1, %1 : f64[4,9]\noutput \"y\" = %2\n",
     -2, 2, NONZERO},
    {"gather", "%0 = param \"table\" : f64[4,3]\n%1 = constant [2, 0, 2, 3] : i32[2,2]\n"
               "%2 = gather %0, %1 : f64[2,2,3]\n%3 = mul %2, %2 : f64[2,2,3]\n"
               "output \"y\" = %3\n",
     -2, 2, NONZERO},
    {"scatter_add", "%0 = param \"u\" : f64[3,2]\n%1 = constant [1, 1, 3] : i32[3]\n"
                    "%2 = scatter_add %0, %1 : f64[4,2]\n%3 = mul %2, %2 : f64[4,2]\n"
                    "output \"y\" = %3\n",
     -2, 2, NONZERO},
    {"dot", "%0 = param \"a\" : f64[2,3]\n%1 = param \"b\" : f64[3,4]\n"
            "%2 = dot %0, %1 transpose_a=false transpose_b=false : f64[2,4]\noutput \"y\" = %2\n",
     -2, 2, NONZERO},
    {"dot transpose_a", "%0 = param \"a\" : f64[3,2]\n%1 = param \"b\" : f64[3,4]\n"
                        "%2 = dot %0, %1 transpose_a=true transpose_b=false : f64[2,4]\n"
                        "%3 = mul %2, %2 : f64[2,4]\noutput \"y\" = %3\n",
     -2, 2, NONZERO},
    {"dot transpose_b", "%0 = param \"a\" : f64[2,3]\n%1 = param \"b\" : f64[4,3]\n"
                        "%2 = dot %0, %1 transpose_a=false transpose_b=true : f64[2,4]\n"
                        "%3 = mul %2, %2 : f64[2,4]\noutput \"y\" = %3\n",
     -2, 2, NONZERO},
    {"dot transpose both", "%0 = param \"a\" : f64[3,2]\n%1 = param \"b\" : f64[4,3]\n"
                           "%2 = dot %0, %1 transpose_a=true transpose_b=true : f64[2,4]\n"
                           "%3 = mul %2, %2 : f64[2,4]\noutput \"y\" = %3\n",
     -2, 2, NONZERO},
    {"dot batched", "%0 = param \"a\" : f64[2,2,3]\n%1 = param \"b\" : f64[2,3,2]\n"
                    "%2 = dot %0, %1 transpose_a=false transpose_b=false : f64[2,2,2]\n"
                    "%3 = mul %2, %2 : f64[2,2,2]\noutput \"y\" = %3\n",
     -2, 2, NONZERO},
    {"dot batched x shared", "%0 = param \"x\" : f64[2,3,4]\n%1 = param \"w\" : f64[4,2]\n"
                             "%2 = dot %0, %1 transpose_a=false transpose_b=false : f64[2,3,2]\n"
                             "%3 = mul %2, %2 : f64[2,3,2]\noutput \"y\" = %3\n",
     -2, 2, NONZERO},
    {"dot shared x batched, transposed",
     "%0 = param \"w\" : f64[4,3]\n%1 = param \"x\" : f64[2,2,4]\n"
     "%2 = dot %0, %1 transpose_a=true transpose_b=true : f64[2,3,2]\n"
     "%3 = mul %2, %2 : f64[2,3,2]\noutput \"y\" = %3\n",
     -2, 2, NONZERO},
    {"dot batched, transposed, shared b",
     "%0 = param \"x\" : f64[2,4,3]\n%1 = param \"w\" : f64[2,4]\n"
     "%2 = dot %0, %1 transpose_a=true transpose_b=true : f64[2,3,2]\n"
     "%3 = mul %2, %2 : f64[2,3,2]\noutput \"y\" = %3\n",
     -2, 2, NONZERO},
    {"iota and constant as operands",
     P23 "%1 = iota axis=1 : f64[2,3]\n%2 = constant [1, 2, 3, 4, 5, 6] : f64[2,3]\n"
         "%3 = mul %0, %1 : f64[2,3]\n%4 = add %3, %2 : f64[2,3]\n%5 = mul %4, %4 : f64[2,3]\n"
         "output \"y\" = %5\n",
     -2, 2, NONZERO},
    {"random as an operand",
     P23 "%1 = input \"step\" : i32[]\n%2 = random %1 seed=9 stream=0 : f64[2,3]\n"
         "%3 = mul %0, %2 : f64[2,3]\n%4 = mul %3, %0 : f64[2,3]\noutput \"y\" = %4\n",
     -2, 2, NONZERO},
};

static void primitives(uint64_t *rng) {
  for (size_t c = 0; c < sizeof primitive_cases / sizeof primitive_cases[0]; c++) {
    const Case *k = &primitive_cases[c];
    Graph *g = test_parse(k->text);
    if (!g) continue;
    GraphId loss = weighted_sum(g, graph_find_output(g, "y"), rng);
    check_gradients(k->name, g, loss, k->lo, k->hi, k->expectation, rng);
    graph_free(g);
  }
}

/* ---- composites built with the builder API ------------------------------- */

static GraphId bin(Graph *g, GraphOp op, GraphId a, GraphId b) { return graph_binary(g, op, a, b); }
static GraphId un(Graph *g, GraphOp op, GraphId a) { return graph_unary(g, op, a); }
static GraphShape shape_of(Graph *g, GraphId x) { return graph_node(g, x)->shape; }
static GraphId spread(Graph *g, GraphId x, GraphId like) {
  return graph_broadcast(g, x, shape_of(g, like));
}

/* softmax over the last axis, with max subtraction. */
/* x less its row max, whose gradient models/std/nn.tfm stops: the row's
 * softmax does not change with a shift, so the finite differences agree. */
static GraphId shifted_rows(Graph *g, GraphId x, bool stop_max) {
  GraphId m = graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 1u << (shape_of(g, x).rank - 1));
  return bin(g, GRAPH_OP_SUB, x, spread(g, stop_max ? un(g, GRAPH_OP_STOP_GRADIENT, m) : m, x));
}

static GraphId softmax(Graph *g, GraphId x, bool stop_max) {
  uint32_t last = 1u << (shape_of(g, x).rank - 1);
  GraphId shifted = shifted_rows(g, x, stop_max);
  GraphId e = un(g, GRAPH_OP_EXP, shifted);
  return bin(g, GRAPH_OP_DIV, e, spread(g, graph_reduce(g, GRAPH_OP_REDUCE_SUM, e, last), e));
}

/* log softmax over the last axis: x - max - log(sum(exp(x - max))). */
static GraphId log_softmax(Graph *g, GraphId x, bool stop_max) {
  uint32_t last = 1u << (shape_of(g, x).rank - 1);
  GraphId shifted = shifted_rows(g, x, stop_max);
  GraphId sum = graph_reduce(g, GRAPH_OP_REDUCE_SUM, un(g, GRAPH_OP_EXP, shifted), last);
  return bin(g, GRAPH_OP_SUB, shifted, spread(g, un(g, GRAPH_OP_LOG, sum), shifted));
}

static GraphId mean_last(Graph *g, GraphId x) {
  GraphShape s = shape_of(g, x);
  GraphId sum = graph_reduce(g, GRAPH_OP_REDUCE_SUM, x, 1u << (s.rank - 1));
  GraphShape ss = shape_of(g, sum);
  return bin(g, GRAPH_OP_DIV, sum, graph_splat(g, GRAPH_F64, ss, (double)s.dims[s.rank - 1]));
}

static void composite_softmax(uint64_t *rng) {
  for (int stop = 0; stop < 2; stop++) {
    Graph *g = graph_new();
    GraphId x = graph_param(g, "x", GRAPH_F64, (GraphShape){2, {3, 5}});
    GraphId loss = weighted_sum(g, softmax(g, x, stop), rng);
    CHECK(graph_error(g) == NULL);
    check_gradients(stop ? "softmax less the max, its gradient stopped"
                         : "softmax with max subtraction",
                    g, loss, -3, 3, NONZERO, rng);
    graph_free(g);
  }
}

static void composite_layernorm(uint64_t *rng) {
  Graph *g = graph_new();
  GraphShape s = {2, {3, 4}};
  GraphId x = graph_param(g, "x", GRAPH_F64, s);
  GraphId gain = graph_param(g, "gain", GRAPH_F64, (GraphShape){1, {4}});
  GraphId bias = graph_param(g, "bias", GRAPH_F64, (GraphShape){1, {4}});
  GraphId centered = bin(g, GRAPH_OP_SUB, x, spread(g, mean_last(g, x), x));
  GraphId var = mean_last(g, bin(g, GRAPH_OP_MUL, centered, centered));
  GraphId eps = graph_splat(g, GRAPH_F64, shape_of(g, var), 1e-5);
  GraphId inv = un(g, GRAPH_OP_RSQRT, bin(g, GRAPH_OP_ADD, var, eps));
  GraphId normed = bin(g, GRAPH_OP_MUL, centered, spread(g, inv, centered));
  GraphId y = bin(g, GRAPH_OP_ADD, bin(g, GRAPH_OP_MUL, normed, spread(g, gain, normed)),
                  spread(g, bias, normed));
  GraphId loss = weighted_sum(g, y, rng);
  CHECK(graph_error(g) == NULL);
  check_gradients("layernorm", g, loss, -2, 2, NONZERO, rng);
  graph_free(g);
}

/* Mean over rows of -sum(onehot(target) * log_softmax(logits)). */
static void cross_entropy(uint64_t *rng, bool stop_max) {
  Graph *g = graph_new();
  GraphShape s = {2, {4, 6}};
  GraphId logits = graph_param(g, "logits", GRAPH_F64, s);
  const double targets[4] = {1, 5, 0, 5};
  GraphId target = graph_constant(g, GRAPH_I32, (GraphShape){2, {4, 1}}, targets, 4);
  GraphId classes = graph_iota(g, GRAPH_I32, s, 1);
  GraphId hit = bin(g, GRAPH_OP_CMPEQ, classes, graph_broadcast(g, target, s));
  GraphId onehot = graph_cast(g, hit, GRAPH_F64);
  GraphId picked = graph_reduce(g, GRAPH_OP_REDUCE_SUM,
                                bin(g, GRAPH_OP_MUL, onehot, log_softmax(g, logits, stop_max)), 1u << 1);
  GraphId total = graph_reduce(g, GRAPH_OP_REDUCE_SUM, un(g, GRAPH_OP_NEG, picked), 1u);
  GraphId loss = graph_reshape(g, bin(g, GRAPH_OP_DIV, total, graph_splat(g, GRAPH_F64, shape_of(g, total), 4)),
                               graph_shape_scalar());
  CHECK(graph_error(g) == NULL);
  check_gradients(stop_max ? "log-softmax cross-entropy, the max's gradient stopped"
                           : "log-softmax cross-entropy",
                  g, loss, -3, 3, NONZERO, rng);

  /* And the loss itself, against a direct computation. */
  EvalValues *v = eval_new(g, GRAPH_F64);
  double want = 0;
  for (int r = 0; r < 4; r++) {
    double row[6], mx = -INFINITY, sum = 0;
    for (int c = 0; c < 6; c++) {
      row[c] = 0.1 * (r * 6 + c) - 1;
      eval_set(v, logits, r * 6 + c, row[c]);
      mx = fmax(mx, row[c]);
    }
    for (int c = 0; c < 6; c++) sum += exp(row[c] - mx);
    want -= row[(int)targets[r]] - mx - log(sum);
  }
  eval_run(v);
  CHECK_NEAR(eval_get(v, loss, 0), want / 4, 1e-14);
  eval_free(v);
  graph_free(g);
}

static void composite_cross_entropy(uint64_t *rng) {
  for (int stop = 0; stop < 2; stop++)
    cross_entropy(rng, stop);
}

/* One head of self-attention: softmax(q k^T / sqrt(d)) v with learned
 * projections, batched over two sequences. */
static void composite_attention(uint64_t *rng) {
  Graph *g = graph_new();
  GraphShape xs = {3, {2, 3, 4}}, ws = {2, {4, 4}};
  GraphId x = graph_param(g, "x", GRAPH_F64, xs);
  GraphId wq = graph_param(g, "wq", GRAPH_F64, ws), wk = graph_param(g, "wk", GRAPH_F64, ws);
  GraphId wv = graph_param(g, "wv", GRAPH_F64, ws);
  GraphId q = graph_dot(g, x, wq, false, false), k = graph_dot(g, x, wk, false, false);
  GraphId val = graph_dot(g, x, wv, false, false);
  GraphId scores = graph_dot(g, q, k, false, true);
  scores = bin(g, GRAPH_OP_MUL, scores, graph_splat(g, GRAPH_F64, shape_of(g, scores), 0.5));
  GraphId y = graph_dot(g, softmax(g, scores, false), val, false, false);
  GraphId loss = weighted_sum(g, y, rng);
  CHECK(graph_error(g) == NULL);
  check_gradients("self-attention", g, loss, -1, 1, NONZERO, rng);
  graph_free(g);
}

/* The fused attention op (made by pass_attention): its VJP (attention_lse,
 * delta and attention_grad_q/k/v, which recompute P) against finite
 * differences of its reference. mask_kind 1: a [T, S] mask with finite
 * entries, -inf entries and one fully masked query row (row 1: output 0,
 * zero gradient); 2: key padding [B, 1, 1, S], batch b losing its last
 * b + 1 keys (under causal, query 0 of batch 1 sees nothing). */
static void fused_attention_case(const char *name, GraphShape batch, int64_t t, int64_t s,
                                 int64_t d, int64_t dv, int mask_kind, bool causal,
                                 uint64_t *rng) {
  Graph *g = graph_new();
  int r = batch.rank + 2;
  GraphShape qs = batch, ks = batch, vs = batch, ms = {0};
  qs.rank = ks.rank = vs.rank = r;
  qs.dims[r - 2] = t, ks.dims[r - 2] = vs.dims[r - 2] = s;
  qs.dims[r - 1] = ks.dims[r - 1] = d, vs.dims[r - 1] = dv;
  GraphId q = graph_param(g, "q", GRAPH_F64, qs), k = graph_param(g, "k", GRAPH_F64, ks);
  GraphId v = graph_param(g, "v", GRAPH_F64, vs), mask = GRAPH_NONE;
  if (mask_kind) {
    if (mask_kind == 1) ms = (GraphShape){2, {t, s}};
    else {
      ms.rank = r;
      for (int i = 0; i < r; i++) ms.dims[i] = 1;
      ms.dims[0] = batch.dims[0], ms.dims[r - 1] = s;
    }
    int64_t n = graph_shape_numel(&ms);
    double *values = malloc(sizeof(double) * (size_t)n);
    for (int64_t e = 0; e < n; e++) {
      int64_t j = e % s, row = e / s;
      values[e] = test_uniform(rng, -1, 1);
      if (mask_kind == 1 && (row == 1 || (j + row) % 3 == 0)) values[e] = -INFINITY;
      if (mask_kind == 2 && j >= s - 1 - row) values[e] = -INFINITY;
    }
    mask = graph_constant(g, GRAPH_F64, ms, values, n);
    free(values);
  }
  GraphId y = graph_attention(g, q, k, v, mask, 0.7, causal);
  GraphId loss = weighted_sum(g, y, rng);
  if (!CHECK(graph_error(g) == NULL)) fprintf(stderr, "  %s: %s\n", name, graph_error(g));
  else check_gradients(name, g, loss, -1, 1, NONZERO, rng);
  graph_free(g);
}

static void fused_attention(uint64_t *rng) {
  fused_attention_case("attention", (GraphShape){1, {2}}, 3, 3, 2, 3, 0, false, rng);
  fused_attention_case("attention causal", (GraphShape){2, {2, 2}}, 4, 4, 3, 2, 0, true, rng);
  fused_attention_case("attention mask, fully masked row", (GraphShape){1, {2}}, 4, 5, 3, 2, 1,
                       false, rng);
  fused_attention_case("attention cross T != S, padding", (GraphShape){2, {2, 2}}, 2, 5, 3, 4, 2,
                       false, rng);
  fused_attention_case("attention causal + padding", (GraphShape){2, {2, 1}}, 4, 4, 2, 3, 2,
                       true, rng);
  fused_attention_case("attention unbatched", (GraphShape){0}, 3, 4, 2, 2, 0, false, rng);
}

/* Dropout: x * mask / keep with mask = cast(random < keep). The backward
 * part must regenerate the mask from a copy of the random node (same seed
 * and stream) and never read the forward mask. */
static void composite_dropout(uint64_t *rng) {
  Graph *g = graph_new();
  GraphShape s = {2, {4, 5}};
  GraphId x = graph_param(g, "x", GRAPH_F64, s);
  GraphId step = graph_input(g, "step", GRAPH_I32, graph_shape_scalar());
  GraphId r = graph_random(g, step, GRAPH_F64, s, 1234);
  GraphId keep = graph_splat(g, GRAPH_F64, s, 0.5);
  GraphId mask = graph_cast(g, bin(g, GRAPH_OP_CMPLT, r, keep), GRAPH_F64);
  GraphId scaled = bin(g, GRAPH_OP_DIV, bin(g, GRAPH_OP_MUL, x, mask), keep);
  GraphId y = bin(g, GRAPH_OP_MUL, scaled, x);
  GraphId loss = weighted_sum(g, y, rng);
  int before_backward = graph_count(g);
  check_gradients("dropout", g, loss, -2, 2, NONZERO, rng);

  int copies = 0;
  for (GraphId id = before_backward; id < graph_count(g); id++) {
    const GraphNode *n = graph_node(g, id);
    for (int i = 0; i < n->num_inputs; i++) CHECK(n->inputs[i] != r && n->inputs[i] != mask);
    if (n->op == GRAPH_OP_RANDOM) {
      copies++;
      CHECK(n->attrs.seed == 1234 && n->attrs.stream == graph_node(g, r)->attrs.stream);
      CHECK(n->inputs[0] == step);
    }
  }
  CHECK(copies == 1);
  graph_free(g);
}

/* A parameter the loss does not reach gets a zero gradient of its shape. */
static void unreachable_param(void) {
  Graph *g = graph_new();
  GraphId a = graph_param(g, "a", GRAPH_F64, (GraphShape){1, {3}});
  GraphId b = graph_param(g, "b", GRAPH_F64, (GraphShape){2, {2, 2}});
  GraphId loss = graph_reshape(g, graph_reduce(g, GRAPH_OP_REDUCE_SUM, a, 1), graph_shape_scalar());
  GraphId wrt[2] = {a, b}, grads[2];
  CHECK(autodiff_gradients(g, loss, wrt, 2, grads));
  const GraphNode *gb = graph_node(g, grads[1]);
  double value;
  CHECK(graph_constant_is_splat(gb, &value) && value == 0.0 && gb->shape.rank == 2);
  /* Nor one read only through stop_gradient. */
  GraphId stopped = graph_reshape(
      g, graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_unary(g, GRAPH_OP_STOP_GRADIENT, a), 1),
      graph_shape_scalar());
  CHECK(autodiff_gradients(g, stopped, wrt, 1, grads));
  const GraphNode *ga = graph_node(g, grads[0]);
  CHECK(graph_constant_is_splat(ga, &value) && value == 0.0 && ga->shape.rank == 1);
  /* A loss with more than one element is refused with a message. */
  GraphId not_scalar = graph_unary(g, GRAPH_OP_EXP, a);
  CHECK(!autodiff_gradients(g, not_scalar, wrt, 2, grads));
  CHECK(graph_error(g) && strstr(graph_error(g), "loss"));
  graph_free(g);
}

int main(void) {
  uint64_t rng = 12345;
  primitives(&rng);
  composite_softmax(&rng);
  composite_layernorm(&rng);
  composite_cross_entropy(&rng);
  composite_attention(&rng);
  fused_attention(&rng);
  composite_dropout(&rng);
  unreachable_param();
  return test_finish("gradcheck");
}
