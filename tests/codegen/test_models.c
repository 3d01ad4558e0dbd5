/* Whole models compiled against the evaluator: models/gpt.tfm and
 * models/transformer.tfm at tiny sizes, parameters from their own
 * initialisers, random token ids.
 *   - The forward graph with the gradient of the loss for every parameter
 *     as extra outputs: the loss, the logits and every gradient agree.
 *   - The training graph (dropout on): one step's loss, then every param
 *     and optimizer state after the update agree (Adam's first step moves
 *     a param by about lr sign(g), so the moments are what carry the
 *     gradients there).
 * Agreement is the relative error of each tensor in the 2-norm, <= 1e-4
 * (CgRunOptions.norm), or for a tensor that f32 rounding alone moves by
 * more than that, within a few times the f32 evaluator's own distance from
 * the f64 one (CgRunOptions.rounding). That is the key biases after the
 * training step: adding q.bk to every score of a row leaves the softmax
 * unchanged, so bk's gradient is zero in exact arithmetic and its computed
 * value is rounding noise, which Adam's m / sqrt(v) turns into steps of
 * about lr whose signs are the noise's; fused and unfused multiply-add
 * round differently, so the updated bk and its moments are not something
 * two correct implementations agree on to 1e-4. They are still checked,
 * against the spread rounding itself gives them. The compiled graph is
 * pass_standard's, so the evaluator is also run on the graph as lowered,
 * to tie the compiled code to the model itself and not only to the
 * optimised graph. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autodiff.h"
#include "harness.h"
#include "lower.h"
#include "lower_model.h"
#include "pass.h"

#define TOLERANCE 1e-4

typedef struct ModelCase {
  const char *label, *file;
  const char *const *defines; /* NULL-terminated "name=value" */
  int64_t vocab;              /* token ids are drawn from [0, vocab) */
  bool bf16;                  /* lowered with --dtype bf16 */
} ModelCase;

/* --dtype bf16 graphs: compiled and evaluator round every bf16 value at the
 * same points, so they agree exactly unless an f32 result that the two
 * compute one f32 ulp apart (the GEMM's fused multiply-adds, the inline
 * exp) lies next to a bf16 rounding boundary: then the two round one bf16
 * ulp (2^-8) apart, with a chance of about 2^-15 per element, and that one
 * element moves its tensor's 2-norm by far less than 1e-3. An evaluator
 * that did not round (bf16 computed as f32) is about 2^-9 away on every
 * element and fails.
 *
 * The lowered and the optimised graph do not round at the same points:
 * pass_bf16_chains (the last of pass_standard) rounds once per chain of
 * single-use elementwise ops, and CSE, by merging nodes, changes which
 * chains there are. So for bf16 the lowered graph is taken through
 * pass_cse and pass_bf16_chains too, and a tensor the two evaluations do not agree on to
 * 1e-4 must agree within CG_ROUNDING_FACTOR times what rounding does to it
 * (the larger of each graph's f32 evaluation's distance from its f64 one,
 * where bf16 nodes are not rounded): two placements of bf16 roundings are
 * each about that far from exact. After a training step that includes the
 * biases whose gradient is zero in exact arithmetic (see above): Adam turns
 * each placement's rounding noise into steps of about lr. The lowered
 * graph is merged by CSE before pass_bf16_chains, so most chains are the
 * same. */
#define TOLERANCE_BF16 1e-3

/* |a - b|_2 / max(|b|_2, 1e-3 sqrt(n)), whatever their storage. */
static double distance(const EvalTensor *a, const EvalTensor *b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b->numel; i++) {
    double x = eval_tensor_get(a, i), y = eval_tensor_get(b, i);
    diff += (x - y) * (x - y);
    scale += y * y;
  }
  return sqrt(diff) / fmax(sqrt(scale), 1e-3 * sqrt((double)b->numel));
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Adds an output "grad.NAME" for the gradient of the loss w.r.t. each param. */
static bool add_gradients(Graph *g) {
  int n = graph_num_params(g);
  GraphId *wrt = calloc((size_t)n + 1, sizeof *wrt), *grads = calloc((size_t)n + 1, sizeof *grads);
  bool ok = wrt && grads;
  for (int i = 0; ok && i < n; i++)
    wrt[i] = graph_param_at(g, i);
  ok = ok && autodiff_gradients(g, graph_find_output(g, "loss"), wrt, n, grads);
  for (int i = 0; ok && i < n; i++) {
    char name[512];
    snprintf(name, sizeof name, "grad.%s", graph_node(g, wrt[i])->attrs.name);
    ok = graph_output(g, name, grads[i]);
  }
  free(wrt);
  free(grads);
  return ok;
}

/* Params from the init graph's outputs of the same name, token ids in
 * [0, vocab), step 1; states stay zero as eval_new (and the runtime's arena)
 * leaves them. */
static bool fill_leaves(const Graph *g, EvalValues *v, const Graph *init, EvalValues *init_values,
                        int64_t vocab) {
  uint64_t rng = 2024;
  for (int i = 0; i < graph_num_inputs(g); i++) {
    GraphId id = graph_input_at(g, i);
    if (!strcmp(graph_node(g, id)->attrs.name, "step"))
      eval_set(v, id, 0, 1);
    else
      cg_fill(v, id, 0, (double)vocab, &rng);
  }
  for (int i = 0; i < graph_num_params(g); i++) {
    GraphId id = graph_param_at(g, i);
    GraphId from = graph_find_output(init, graph_node(g, id)->attrs.name);
    if (!CG_CHECK(from != GRAPH_NONE))
      return false;
    EvalTensor *dst = eval_tensor(v, id), *src = eval_tensor(init_values, from);
    if (!CG_CHECK(dst->numel == src->numel))
      return false;
    for (int64_t e = 0; e < dst->numel; e++) /* v may be f64, init_values is f32 */
      eval_tensor_set(dst, e, eval_tensor_get(src, e));
  }
  return true;
}

/* a and b hold the values of graphs with the same interface: node a_id of a
 * against node b_id of b. */
static bool agree(const char *label, const char *what, EvalValues *a, GraphId a_id, EvalValues *b,
                  GraphId b_id, EvalValues *a_exact, EvalValues *b_exact, double *worst) {
  if (!CG_CHECK(b_id != GRAPH_NONE))
    return false;
  EvalTensor *ta = eval_tensor(a, a_id), *tb = eval_tensor(b, b_id);
  double e = cg_norm_error(ta, tb->data);
  *worst = e > *worst ? e : *worst;
  if (e <= TOLERANCE)
    return true;
  if (a_exact) {
    double own = fmax(distance(ta, eval_tensor(a_exact, a_id)),
                      distance(tb, eval_tensor(b_exact, b_id)));
    if (e <= CG_ROUNDING_FACTOR * own)
      return true;
    fprintf(stderr, "%s: %s: the lowered and the optimised graph differ by %.3g in the 2-norm "
            "(bf16 or tf32 rounding alone: %.3g)\n", label, what, e, own);
    return CG_CHECK(false);
  }
  fprintf(stderr, "%s: %s: the lowered and the optimised graph differ by %.3g in the 2-norm\n",
          label, what, e);
  return CG_CHECK(false);
}

/* The evaluator on the lowered graph (raw) agrees with opt_ref, which
 * cg_run left holding one step's outputs and the updated leaves. */
static void check_passes(const char *label, const Graph *raw, EvalValues *raw_ref,
                         EvalValues *raw_exact, const Graph *opt, EvalValues *opt_ref,
                         EvalValues *opt_exact) {
  double worst = 0;
  bool ok = true;
  eval_run(raw_ref);
  if (raw_exact)
    eval_run(raw_exact);
  for (int i = 0; i < graph_num_outputs(raw); i++) {
    GraphOutput o = graph_output_at(raw, i);
    ok &= agree(label, o.name, raw_ref, o.node, opt_ref, graph_find_output(opt, o.name), raw_exact,
                opt_exact, &worst);
  }
  eval_apply_updates(raw_ref);
  if (raw_exact)
    eval_apply_updates(raw_exact);
  for (int i = 0; i < graph_num_updates(raw); i++) {
    GraphId target = graph_update_at(raw, i).target;
    const char *name = graph_node(raw, target)->attrs.name;
    ok &= agree(label, name, raw_ref, target, opt_ref, graph_find_leaf(opt, name), raw_exact,
                opt_exact, &worst);
  }
  printf("%s  %s: evaluator, lowered vs optimised graph (largest relative error %.2e)\n",
         ok ? "ok  " : "FAIL", label, worst);
}

/* train 0: the forward graph (dropout off) with gradients; 1: the training
 * graph (dropout on). */
static void check_model(const ModelCase *mc, int train, const char *what) {
  double start = seconds();
  char label[256], err[512];
  snprintf(label, sizeof label, "%s %s", mc->label, what);
  FrontOptions fo = {.path = mc->file, .bf16 = mc->bf16};
  for (const char *const *d = mc->defines; *d; d++)
    vec_push(&fo.defines, (void *)*d);
  CheckedModel *m;
  Graph *raw = lower_model(&fo, train, &m);
  Graph *init = NULL, *opt = NULL;
  EvalValues *init_values = NULL, *raw_ref = NULL, *opt_ref = NULL, *opt_f64 = NULL;
  EvalValues *raw_f64 = NULL;
  if (!CG_CHECK(raw != NULL) || (!train && !CG_CHECK(add_gradients(raw))))
    goto done;
  init = lower_init_graph(m, 0x5eed);
  init_values = eval_new(init, GRAPH_F32);
  eval_run(init_values); /* the "seed" input stays 0 */
  if (mc->bf16) {
    Graph *merged = pass_cse(raw, err, sizeof err);
    Graph *chains = merged ? pass_bf16_chains(merged, err, sizeof err) : NULL;
    graph_free(merged);
    if (!CG_CHECK(chains != NULL))
      goto done;
    graph_free(raw);
    raw = chains;
  }
  opt = pass_standard(raw, err, sizeof err);
  if (!CG_CHECK(opt != NULL)) {
    fprintf(stderr, "%s: pass_standard: %s\n", label, err);
    goto done;
  }
  raw_ref = eval_new(raw, GRAPH_F32);
  opt_ref = eval_new(opt, GRAPH_F32);
  opt_f64 = eval_new(opt, GRAPH_F64);
  /* On the GPU cg_run evaluates opt_ref with tf32 dot operands: the
   * lowered graph's evaluation does too, and the two are held, as bf16
   * ones are, to a multiple of what that rounding alone moves them. */
  bool rounded = mc->bf16 || cg_on_gpu();
  eval_set_tf32_dots(raw_ref, cg_on_gpu());
  if (rounded)
    raw_f64 = eval_new(raw, GRAPH_F64);
  if ((raw_f64 && !fill_leaves(raw, raw_f64, init, init_values, mc->vocab)) ||
      !fill_leaves(raw, raw_ref, init, init_values, mc->vocab) ||
      !fill_leaves(opt, opt_ref, init, init_values, mc->vocab) ||
      !fill_leaves(opt, opt_f64, init, init_values, mc->vocab))
    goto done;
  CgRunOptions options = {.steps = 1, .tolerance = mc->bf16 ? TOLERANCE_BF16 : TOLERANCE,
                          .norm = true, .rounding = opt_f64};
  cg_run(label, opt, opt_ref, &options);
  check_passes(label, raw, raw_ref, raw_f64, opt, opt_ref, rounded ? opt_f64 : NULL);
  printf("      %s: %d nodes lowered, %d optimised, %d outputs; %.1f s\n", label, graph_count(raw),
         graph_count(opt), graph_num_outputs(opt), seconds() - start);
done:
  eval_free(raw_f64);
  eval_free(opt_f64);
  eval_free(opt_ref);
  eval_free(raw_ref);
  eval_free(init_values);
  graph_free(opt);
  graph_free(init);
  graph_free(raw);
  front_reset(); /* also frees fo.defines, which live in the front end's pool */
}

static const char *const GPT[] = {"vocab=13", "d_model=16", "heads=2", "layers=2",
                                  "seq_len=6", "batch=2", NULL};
/* p_drop is 0 in gpt.tfm; the training graph runs with dropout. */
static const char *const GPT_DROPOUT[] = {"vocab=13", "d_model=16", "heads=2",   "layers=2",
                                          "seq_len=6", "batch=2",   "p_drop=0.1", NULL};
/* p_drop = 0.1 as given in transformer.tfm. */
static const char *const TRANSFORMER[] = {"vocab=11", "d_model=16", "heads=2", "d_ff=32",
                                          "layers=2", "batch=2",    "src_len=5", "tgt_len=4",
                                          NULL};

/* The recurrent layers, score functions and convolution of models/std, as
 * the gradient-check models of tests/ir/models use them. */
static const char *const NONE[] = {NULL};
static const char *const STD_LAYER_MODELS[] = {"rnn_cells", "scores", "conv1d", "rnn_decoder", NULL};

/* No argument: the Transformers; "std": the std layer models; "bf16": the
 * Transformers lowered with --dtype bf16 (three ctests, so that each stays
 * well under 30 s). */
static int bf16_models(void);

int main(int argc, char **argv) {
  cg_start(argc > 1 ? (!strcmp(argv[1], "bf16") ? "codegen_models bf16" : "codegen_models std")
                    : "codegen_models");
  if (argc > 1 && !strcmp(argv[1], "bf16"))
    return bf16_models();
  if (argc > 1 && !strcmp(argv[1], "std")) {
    for (const char *const *m = STD_LAYER_MODELS; *m; m++) {
      char path[1024];
      snprintf(path, sizeof path, "%s/tests/ir/models/%s.tfm", TFM_SOURCE_DIR, *m);
      check_model(&(ModelCase){*m, path, NONE, 1, false}, 0, "gradients");
    }
    return cg_finish("codegen_models std");
  }
  const char *gpt = TFM_SOURCE_DIR "/models/gpt.tfm";
  const char *transformer = TFM_SOURCE_DIR "/models/transformer.tfm";
  check_model(&(ModelCase){"gpt", gpt, GPT, 13, false}, 0, "gradients");
  check_model(&(ModelCase){"gpt p_drop=0.1", gpt, GPT_DROPOUT, 13, false}, 1, "training step");
  check_model(&(ModelCase){"transformer", transformer, TRANSFORMER, 11, false}, 0, "gradients");
  check_model(&(ModelCase){"transformer", transformer, TRANSFORMER, 11, false}, 1, "training step");
  return cg_finish("codegen_models");
}

static int bf16_models(void) {
  const char *gpt = TFM_SOURCE_DIR "/models/gpt.tfm";
  const char *transformer = TFM_SOURCE_DIR "/models/transformer.tfm";
  check_model(&(ModelCase){"gpt --dtype bf16", gpt, GPT, 13, true}, 0, "gradients");
  check_model(&(ModelCase){"gpt --dtype bf16 p_drop=0.1", gpt, GPT_DROPOUT, 13, true}, 1,
              "training step");
  check_model(&(ModelCase){"transformer --dtype bf16", transformer, TRANSFORMER, 11, true}, 1,
              "training step");
  return cg_finish("codegen_models bf16");
}
