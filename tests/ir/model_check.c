/* Runs .tfm programs through the whole stack up to the reference evaluator:
 * check -> lower -> (autodiff, training graph) -> eval.
 *
 *   model_check grad FILE [opts]     f64 central differences (4th order) against autodiff for
 *                                    the output "loss" w.r.t. every param and every
 *                                    float input (relative error <= 1e-6)
 *   model_check values FILE [opts]   compares outputs with the file's lines
 *                                    "# expect: NAME = v0 v1 ... [tol T]"
 *   model_check lr FILE S1 S2 RATIO  lr(step S1) / lr(step S2) == RATIO to 1e-12
 *   model_check train FILE --steps N --below X [opts]
 *                                    trains (f32) on a learnable next-token task,
 *                                    twice: the final loss must be below X and
 *                                    both runs must agree to the last bit
 *   model_check fused FILE [opts]    lowers with and without pass_attention: the fused graph
 *                                    must hold attention ops and give the unfused loss and
 *                                    gradients (f64, relative 1e-9); with --unfused the
 *                                    pass must leave every attention as it is
 * opts: -D NAME=VALUE, --int-range N (i32 inputs are drawn from [0, N); for train,
 * the vocabulary), --seed S, --training (grad/values: lower with training = true,
 * so dropout masks are drawn, fixed by step = 1)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "diag.h"
#include "eval.h"
#include "graph.h"
#include "lower.h"
#include "lower_model.h"
#include "sema.h"

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng_next(void) { /* xorshift64 */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static double rng_uniform(void) { return (double)(rng_next() >> 11) / 9007199254740992.0; }

static double rng_normal(void) {
  double u = 1.0 - rng_uniform(), v = rng_uniform();
  return sqrt(-2 * log(u)) * cos(2 * 3.14159265358979323846 * v);
}

typedef struct Options {
  FrontOptions front;
  int64_t int_range;
  int steps;
  double below;
  int expect_unfused; /* fused: --unfused */
} Options;

static int die(const char *msg) {
  fprintf(stderr, "model_check: %s\n", msg);
  return 2;
}

/* Initial parameter values from the model's own initialisers. */
static void init_params(EvalValues *v, const Graph *g, const CheckedModel *m) {
  Graph *init = lower_init_graph(m, 1234);
  EvalValues *iv = eval_new(init, GRAPH_F64);
  eval_run(iv);
  for (int i = 0; i < graph_num_outputs(init); i++) {
    GraphOutput o = graph_output_at(init, i);
    GraphId target = graph_find_leaf(g, o.name);
    int64_t n = graph_shape_numel(&graph_node(init, o.node)->shape);
    for (int64_t k = 0; k < n; k++) eval_set(v, target, k, eval_get(iv, o.node, k));
  }
  eval_free(iv);
  graph_free(init);
}

/* Float inputs ~ N(0, 1); i32 inputs uniform in [0, int_range); "step" = 1. */
static void random_inputs(EvalValues *v, const Graph *g, int64_t int_range) {
  for (int i = 0; i < graph_num_inputs(g); i++) {
    GraphId id = graph_input_at(g, i);
    const GraphNode *n = graph_node(g, id);
    int64_t count = graph_shape_numel(&n->shape);
    for (int64_t k = 0; k < count; k++) {
      double x = n->dtype == GRAPH_I32 ? (double)(rng_next() % (uint64_t)int_range) : rng_normal();
      if (!strcmp(n->attrs.name, "step")) x = 1;
      eval_set(v, id, k, x);
    }
  }
}

/* Lowers the file and sets up evaluator values: parameters from their
 * initialisers, random inputs. NULL when the file does not lower. */
static EvalValues *prepare(const Options *o, int train, GraphDtype precision, Graph **g) {
  CheckedModel *m;
  *g = lower_model(&o->front, train, &m);
  if (!*g) {
    fprintf(stderr, "model_check: %s does not lower\n", o->front.path);
    return NULL;
  }
  EvalValues *v = eval_new(*g, precision);
  init_params(v, *g, m);
  random_inputs(v, *g, o->int_range);
  return v;
}

static double loss_value(EvalValues *v, GraphId loss) {
  eval_run(v);
  return eval_get(v, loss, 0);
}

static int cmd_grad(const Options *o) {
  CheckedModel *m;
  Graph *g = lower_model(&o->front, 0, &m);
  if (!g) return die("the file does not lower");
  GraphId loss = graph_find_output(g, "loss");
  if (loss == GRAPH_NONE) return die("the model has no output named loss");
  GraphId wrt[4096];
  int n = 0;
  for (int i = 0; i < graph_num_params(g) && n < 4096; i++) wrt[n++] = graph_param_at(g, i);
  for (int i = 0; i < graph_num_inputs(g) && n < 4096; i++) {
    GraphId id = graph_input_at(g, i);
    if (graph_dtype_is_float(graph_node(g, id)->dtype)) wrt[n++] = id;
  }
  GraphId *grads = malloc(sizeof(GraphId) * (size_t)(n + 1));
  if (!autodiff_gradients(g, loss, wrt, n, grads)) {
    fprintf(stderr, "model_check: autodiff failed: %s\n", graph_error(g));
    return 1;
  }
  EvalValues *v = eval_new(g, GRAPH_F64);
  init_params(v, g, m);
  random_inputs(v, g, o->int_range);
  /* Parameters that start at 0 or 1 (biases, gains) get noise too, so that
   * every path of the layer carries a gradient worth checking. */
  for (int i = 0; i < graph_num_params(g); i++) {
    GraphId id = graph_param_at(g, i);
    int64_t count = graph_shape_numel(&graph_node(g, id)->shape);
    for (int64_t k = 0; k < count; k++) eval_set(v, id, k, eval_get(v, id, k) + 0.1 * rng_normal());
  }
  eval_run(v);
  double worst = 0;
  int checked = 0, failed = 0;
  for (int i = 0; i < n; i++) {
    const GraphNode *leaf = graph_node(g, wrt[i]);
    int64_t count = graph_shape_numel(&leaf->shape);
    int samples = count < 12 ? (int)count : 12;
    for (int s = 0; s < samples; s++) {
      int64_t k = s < 4 ? s * (count - 1) / 3 : (int64_t)(rng_next() % (uint64_t)count);
      eval_run(v);
      double analytic = eval_get(v, grads[i], k);
      /* Central differences of fourth order: truncation O(h^4), so h can be
       * large enough that rounding (about 1e-16 |loss| / h) stays small. */
      double x = eval_get(v, wrt[i], k), h = 1e-4 * fmax(1.0, fabs(x)), f[4];
      const double offsets[4] = {-2, -1, 1, 2};
      for (int j = 0; j < 4; j++) {
        eval_set(v, wrt[i], k, x + offsets[j] * h);
        f[j] = loss_value(v, loss);
      }
      eval_set(v, wrt[i], k, x);
      double numeric = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h);
      /* Relative error 1e-6, with an absolute floor at that rounding noise:
       * a gradient that is exactly zero (a key bias under softmax) reads as
       * noise of that size. */
      double scale = fmax(fabs(analytic), fabs(numeric));
      double noise = 1e-10 * fmax(1.0, fabs(f[2]));
      double err = fabs(analytic - numeric) / fmax(scale, 1e-300);
      checked++;
      if (scale > 1e-6 && err > worst) worst = err;
      if (fabs(analytic - numeric) > 1e-6 * scale + noise) {
        failed++;
        fprintf(stderr, "  %s[%lld]: autodiff %.12g, finite differences %.12g (rel. error %.2e)\n",
                leaf->attrs.name, (long long)k, analytic, numeric, err);
      }
    }
  }
  printf("%s: %d gradient entries of %d tensors checked, worst relative error %.2e "
         "(entries above 1e-6)\n",
         o->front.path, checked, n, worst);
  eval_free(v);
  free(grads);
  graph_free(g);
  return failed ? 1 : 0;
}

static int cmd_values(const Options *o) {
  Graph *g;
  EvalValues *v = prepare(o, 0, GRAPH_F64, &g);
  if (!v) return 1;
  eval_run(v);
  FILE *f = fopen(o->front.path, "r");
  if (!f) return die("cannot read the file");
  char line[4096];
  int expectations = 0, failed = 0;
  while (fgets(line, sizeof line, f)) {
    char name[256];
    int used;
    if (sscanf(line, "# expect: %255s =%n", name, &used) != 1) continue;
    expectations++;
    GraphId out = graph_find_output(g, name);
    if (out == GRAPH_NONE) {
      printf("FAIL: no output %s\n", name);
      failed++;
      continue;
    }
    int64_t count = graph_shape_numel(&graph_node(g, out)->shape);
    double tol = 1e-9;
    char *tol_at = strstr(line, "tol");
    if (tol_at) tol = strtod(tol_at + 3, NULL);
    char *p = line + used;
    for (int64_t k = 0;; k++) {
      char *end;
      double want = strtod(p, &end);
      if (end == p) {
        if (k != count) {
          printf("FAIL: %s has %lld values, the expectation lists %lld\n", name, (long long)count,
                 (long long)k);
          failed++;
        }
        break;
      }
      p = end;
      double got = k < count ? eval_get(v, out, k) : NAN;
      int ok = fabs(got - want) <= tol || (isinf(want) && got == want);
      printf("%s %s[%lld] = %.9g (expected %.9g, tolerance %g)\n", ok ? "ok:  " : "FAIL:", name,
             (long long)k, got, want, tol);
      failed += !ok;
    }
  }
  fclose(f);
  eval_free(v);
  graph_free(g);
  if (!expectations) return die("the file has no '# expect: NAME = ...' lines");
  return failed ? 1 : 0;
}

static double lr_at(EvalValues *v, const Graph *g, int step) {
  eval_set(v, graph_find_leaf(g, "step"), 0, step);
  eval_run(v);
  return eval_get(v, graph_find_output(g, "lr"), 0);
}

static int cmd_lr(const Options *o, int s1, int s2, double ratio) {
  Graph *g;
  EvalValues *v = prepare(o, 1, GRAPH_F64, &g);
  if (!v) return 1;
  double a = lr_at(v, g, s1), b = lr_at(v, g, s2);
  int ok = fabs(a / b - ratio) <= 1e-12;
  printf("%s lr(%d) = %.17g, lr(%d) = %.17g, ratio %.17g (expected %g)\n", ok ? "ok:" : "FAIL:", s1,
         a, s2, b, a / b, ratio);
  eval_free(v);
  graph_free(g);
  return ok ? 0 : 1;
}

/* The task: each row counts up from a random start by a stride of 1 or 2
 * (mod the vocabulary); the target is the next token. Predicting it needs
 * the previous token as well as the current one, so attention must work. */
static void task_batch(EvalValues *v, const Graph *g, int64_t vocab) {
  GraphId tok = graph_find_leaf(g, "tokens"), tgt = graph_find_leaf(g, "targets");
  const GraphShape *shape = &graph_node(g, tok)->shape;
  int64_t rows = shape->dims[0], len = shape->dims[1];
  for (int64_t b = 0; b < rows; b++) {
    int64_t x = (int64_t)(rng_next() % (uint64_t)vocab), stride = 1 + (int64_t)(rng_next() % 2);
    for (int64_t t = 0; t < len; t++) {
      eval_set(v, tok, b * len + t, (double)((x + t * stride) % vocab));
      eval_set(v, tgt, b * len + t, (double)((x + (t + 1) * stride) % vocab));
    }
  }
}

static int train_once(const Options *o, double *final, uint64_t *bits) {
  Graph *g;
  EvalValues *v = prepare(o, 1, GRAPH_F32, &g);
  if (!v) return 1;
  GraphId tok = graph_find_leaf(g, "tokens"), tgt = graph_find_leaf(g, "targets");
  if (tok == GRAPH_NONE || tgt == GRAPH_NONE) return die("train needs inputs tokens and targets");
  GraphId loss = graph_find_output(g, "loss"), step = graph_find_leaf(g, "step");
  rng_state = 42;
  double avg = 0;
  *bits = 1469598103934665603ull;
  for (int s = 1; s <= o->steps; s++) {
    task_batch(v, g, o->int_range);
    eval_set(v, step, 0, s);
    eval_run(v);
    double l = eval_get(v, loss, 0);
    uint64_t b;
    memcpy(&b, &l, sizeof b);
    *bits = (*bits ^ b) * 1099511628211ull; /* every step's loss, to the last bit */
    avg = s == 1 ? l : 0.9 * avg + 0.1 * l;
    if (s == 1 || s % 50 == 0) printf("step %4d loss %.6f (running mean %.6f)\n", s, l, avg);
    eval_apply_updates(v);
  }
  *final = avg;
  eval_free(v);
  graph_free(g);
  return 0;
}

static int cmd_train(const Options *o) {
  double first, second;
  uint64_t bits1, bits2;
  if (train_once(o, &first, &bits1) || train_once(o, &second, &bits2)) return 1;
  int ok = first < o->below && bits1 == bits2;
  printf("%s final running-mean loss %.6f (threshold %g); rerun %s\n", ok ? "ok:" : "FAIL:", first,
         o->below, bits1 == bits2 ? "identical to the last bit" : "DIFFERS");
  return ok ? 0 : 1;
}

static int count_op(const Graph *g, GraphOp op) {
  int n = 0;
  for (GraphId id = 0; id < graph_count(g); id++) n += graph_node(g, id)->op == op;
  return n;
}

/* The loss and its gradient by every param, from the same parameter values
 * and inputs (the rng restarts from `seed`). */
static double *loss_and_gradients(const Options *o, int unfused, uint64_t seed, int *attention,
                                  int64_t *count) {
  Options u = *o;
  u.front.unfused_attention = unfused;
  CheckedModel *m;
  Graph *g = lower_model(&u.front, 0, &m);
  if (!g) return NULL;
  *attention = count_op(g, GRAPH_OP_ATTENTION);
  GraphId loss = graph_find_output(g, "loss"), wrt[4096], grads[4096];
  int n = graph_num_params(g) < 4096 ? graph_num_params(g) : 4096;
  for (int i = 0; i < n; i++) wrt[i] = graph_param_at(g, i);
  if (loss == GRAPH_NONE || !autodiff_gradients(g, loss, wrt, n, grads)) {
    fprintf(stderr, "model_check: autodiff failed: %s\n", graph_error(g));
    graph_free(g);
    return NULL;
  }
  EvalValues *v = eval_new(g, GRAPH_F64);
  rng_state = seed;
  init_params(v, g, m);
  random_inputs(v, g, o->int_range);
  eval_run(v);
  int64_t total = 1;
  for (int i = 0; i < n; i++) total += graph_shape_numel(&graph_node(g, wrt[i])->shape);
  double *out = malloc(sizeof(double) * (size_t)total);
  out[0] = eval_get(v, loss, 0);
  int64_t at = 1;
  for (int i = 0; i < n; i++)
    for (int64_t k = 0; k < graph_shape_numel(&graph_node(g, wrt[i])->shape); k++)
      out[at++] = eval_get(v, grads[i], k);
  *count = total;
  eval_free(v);
  graph_free(g);
  return out;
}

static int cmd_fused(const Options *o) {
  uint64_t seed = rng_state;
  int fused_ops = 0, unfused_ops = 0;
  int64_t nf = 0, nu = 0;
  double *fused = loss_and_gradients(o, 0, seed, &fused_ops, &nf);
  double *unfused = loss_and_gradients(o, 1, seed, &unfused_ops, &nu);
  if (!fused || !unfused || nf != nu) return die("the file does not lower the same both ways");
  double norm = 0, diff = 0, worst = 0;
  for (int64_t i = 1; i < nf; i++) {
    norm += unfused[i] * unfused[i];
    diff += (fused[i] - unfused[i]) * (fused[i] - unfused[i]);
  }
  double loss_error = fabs(fused[0] - unfused[0]) / fmax(fabs(unfused[0]), 1e-12);
  worst = sqrt(diff / fmax(norm, 1e-300));
  printf("%s: %d attention ops fused (%d unfused); loss %.12g vs %.12g; gradients (%lld) differ "
         "by %.3g relative (2-norm)\n",
         o->front.path, fused_ops, unfused_ops, fused[0], unfused[0], (long long)(nf - 1), worst);
  bool fused_as_expected = o->expect_unfused ? fused_ops == 0 : fused_ops > 0;
  bool ok = fused_as_expected && unfused_ops == 0 && loss_error <= 1e-9 && worst <= 1e-9;
  free(fused);
  free(unfused);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 3) return die("usage: model_check grad|values|lr|train FILE [options]");
  Options o = {.front = {.path = argv[2]}, .int_range = 2, .steps = 100, .below = 0};
  const char *cmd = argv[1];
  int positional[3] = {0}, npos = 0;
  double ratio = 0;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "-D") && i + 1 < argc) vec_push(&o.front.defines, argv[++i]);
    else if (!strcmp(argv[i], "--int-range") && i + 1 < argc) o.int_range = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--training")) o.front.training = 1;
    else if (!strcmp(argv[i], "--unfused")) o.expect_unfused = 1;
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) rng_state = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) o.steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--below") && i + 1 < argc) o.below = atof(argv[++i]);
    else if (npos < 2) positional[npos++] = atoi(argv[i]);
    else ratio = atof(argv[i]);
  }
  if (o.int_range < 1) return die("--int-range must be positive");
  if (!strcmp(cmd, "grad")) return cmd_grad(&o);
  if (!strcmp(cmd, "values")) return cmd_values(&o);
  if (!strcmp(cmd, "lr")) return cmd_lr(&o, positional[0], positional[1], ratio);
  if (!strcmp(cmd, "train")) return cmd_train(&o);
  if (!strcmp(cmd, "fused")) return cmd_fused(&o);
  return die("unknown command");
}
