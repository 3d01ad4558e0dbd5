/* The training graph: each optimizer against a two-step update computed
 * by hand (plain loops over the closed-form gradient), the learning-rate
 * schedule, gradient clipping, and the passes preserving the result. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eval.h"
#include "graph.h"
#include "pass.h"
#include "testutil.h"
#include "train.h"

/* loss = 1/2 sum_i (x_i w_i - t_i)^2 + 1/3 sum_j c_j u_j^3, so
 * dL/dw_i = x_i (x_i w_i - t_i) and dL/du_j = c_j u_j^2. */
static const double X[3] = {0.5, -1.0, 2.0}, T[3] = {1.0, 0.5, -0.5};
static const double C[4] = {0.3, -0.2, 0.1, 0.4};
static const double W0[3] = {0.2, -0.4, 1.0}, U0[4] = {0.5, -1.0, 1.5, 2.0};
#define NP 7 /* w then u, flattened */

static void hand_gradient(const double *p, double *grad) {
  for (int i = 0; i < 3; i++) grad[i] = X[i] * (X[i] * p[i] - T[i]);
  for (int j = 0; j < 4; j++) grad[3 + j] = C[j] * p[3 + j] * p[3 + j];
}

typedef struct Model {
  Graph *g;
  GraphId w, u, loss;
} Model;

static Model build_model(void) {
  Model m = {.g = graph_new()};
  Graph *g = m.g;
  GraphShape s3 = {1, {3}}, s22 = {2, {2, 2}};
  m.w = graph_param(g, "w", GRAPH_F64, s3);
  m.u = graph_param(g, "u", GRAPH_F64, s22);
  GraphId x = graph_constant(g, GRAPH_F64, s3, X, 3), t = graph_constant(g, GRAPH_F64, s3, T, 3);
  GraphId c = graph_constant(g, GRAPH_F64, s22, C, 4);
  GraphId r = graph_binary(g, GRAPH_OP_SUB, graph_binary(g, GRAPH_OP_MUL, x, m.w), t);
  GraphId l1 = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, r, r), 1);
  l1 = graph_binary(g, GRAPH_OP_MUL, graph_reshape(g, l1, graph_shape_scalar()),
                    graph_scalar(g, GRAPH_F64, 0.5));
  GraphId u3 = graph_binary(g, GRAPH_OP_MUL, m.u, graph_binary(g, GRAPH_OP_MUL, m.u, m.u));
  GraphId l2 = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, c, u3), 3);
  l2 = graph_binary(g, GRAPH_OP_DIV, graph_reshape(g, l2, graph_shape_scalar()),
                    graph_scalar(g, GRAPH_F64, 3.0));
  m.loss = graph_binary(g, GRAPH_OP_ADD, l1, l2);
  graph_output(g, "loss", m.loss);
  return m;
}

/* The reference: one optimizer step on p with state m1, m2 at step t. */
static void hand_step(const TrainConfig *cfg, double lr, int t, double *p, double *m1,
                      double *m2, double *norm_out) {
  double grad[NP], norm = 0;
  hand_gradient(p, grad);
  for (int i = 0; i < NP; i++) norm += grad[i] * grad[i];
  norm = sqrt(norm);
  *norm_out = norm;
  if (cfg->clip_norm > 0) {
    double factor = fmin(1.0, cfg->clip_norm / (norm + 1e-6));
    for (int i = 0; i < NP; i++) grad[i] *= factor;
  }
  for (int i = 0; i < NP; i++) {
    double gi = grad[i];
    if (cfg->optimizer != TRAIN_ADAMW) gi += cfg->weight_decay * p[i];
    if (cfg->optimizer == TRAIN_SGD) {
      if (cfg->momentum != 0) {
        m1[i] = cfg->momentum * m1[i] + gi;
        gi = m1[i];
      }
      p[i] -= lr * gi;
    } else {
      m1[i] = cfg->beta1 * m1[i] + (1 - cfg->beta1) * gi;
      m2[i] = cfg->beta2 * m2[i] + (1 - cfg->beta2) * gi * gi;
      double m_hat = m1[i] / (1 - pow(cfg->beta1, t));
      double v_hat = m2[i] / (1 - pow(cfg->beta2, t));
      double update = m_hat / (sqrt(v_hat) + cfg->eps);
      if (cfg->optimizer == TRAIN_ADAMW) update += cfg->weight_decay * p[i];
      p[i] -= lr * update;
    }
  }
}

static void set_initial(EvalValues *v, const Model *m) {
  eval_set_all(v, m->w, W0, 3);
  eval_set_all(v, m->u, U0, 4);
}

/* Runs two training steps of the graph and of the hand computation. */
static void two_steps(const char *name, Graph *g, const Model *m, const TrainConfig *cfg,
                      double lr) {
  int failures_before = test_failures;
  double p[NP], m1[NP] = {0}, m2[NP] = {0};
  memcpy(p, W0, sizeof W0);
  memcpy(p + 3, U0, sizeof U0);
  EvalValues *v = eval_new(g, GRAPH_F64);
  set_initial(v, m);
  GraphId step = graph_find_leaf(g, "step"), norm = graph_find_output(g, "grad_norm");
  for (int t = 1; t <= 2; t++) {
    double hand_norm;
    hand_step(cfg, lr, t, p, m1, m2, &hand_norm);
    eval_set(v, step, 0, t);
    eval_run(v);
    if (norm != GRAPH_NONE) CHECK_NEAR(eval_get(v, norm, 0), hand_norm, 1e-12);
    CHECK_NEAR(eval_get(v, graph_find_output(g, "lr"), 0), lr, 1e-15);
    eval_apply_updates(v);
    for (int i = 0; i < 3; i++) CHECK_NEAR(eval_get(v, m->w, i), p[i], 1e-12);
    for (int j = 0; j < 4; j++) CHECK_NEAR(eval_get(v, m->u, j), p[3 + j], 1e-12);
  }
  /* The step really moved the params (the comparison is not vacuous). */
  CHECK(fabs(p[0] - W0[0]) > 1e-6);
  eval_free(v);
  printf("%s  %s\n", test_failures == failures_before ? "ok  " : "FAIL", name);
}

static void optimizer(const char *name, TrainConfig cfg, double lr, const char *state_name) {
  Model m = build_model();
  cfg.lr = graph_scalar(m.g, GRAPH_F64, lr);
  if (!CHECK(train_build(m.g, m.loss, &cfg))) {
    fprintf(stderr, "  %s: %s\n", name, graph_error(m.g));
    graph_free(m.g);
    return;
  }
  if (state_name) CHECK(graph_find_leaf(m.g, state_name) != GRAPH_NONE);
  CHECK(graph_num_updates(m.g) == 2 + graph_num_states(m.g));
  two_steps(name, m.g, &m, &cfg, lr);

  /* The passes keep the meaning of the training graph. */
  char err[256];
  Graph *a = pass_simplify(m.g, err, sizeof err), *b = a ? pass_fold(a, err, sizeof err) : NULL;
  Graph *c = b ? pass_cse(b, err, sizeof err) : NULL, *d = c ? pass_dce(c, err, sizeof err) : NULL;
  if (CHECK(d != NULL)) {
    Model md = {.g = d, .w = graph_find_leaf(d, "w"), .u = graph_find_leaf(d, "u")};
    CHECK(graph_count(d) < graph_count(m.g));
    char optimized[128];
    snprintf(optimized, sizeof optimized, "%s, after simplify+fold+cse+dce", name);
    two_steps(optimized, d, &md, &cfg, lr);
  } else {
    fprintf(stderr, "  %s: %s\n", name, err);
  }
  graph_free(a);
  graph_free(b);
  graph_free(c);
  graph_free(d);
  graph_free(m.g);
}

static void optimizers(void) {
  optimizer("sgd with momentum", (TrainConfig){.optimizer = TRAIN_SGD, .momentum = 0.9}, 0.1,
            "sgd.momentum.w");
  optimizer("sgd with weight decay",
            (TrainConfig){.optimizer = TRAIN_SGD, .weight_decay = 0.01}, 0.1, NULL);
  optimizer("adam",
            (TrainConfig){.optimizer = TRAIN_ADAM, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8},
            0.01, "adam.v.u");
  optimizer("adamw",
            (TrainConfig){.optimizer = TRAIN_ADAMW, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9,
                          .weight_decay = 0.1},
            0.01, "adam.m.u");
  optimizer("adam with gradient clipping",
            (TrainConfig){.optimizer = TRAIN_ADAM, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9,
                          .clip_norm = 0.5},
            0.01, NULL);
  optimizer("sgd with clipping that does not bind",
            (TrainConfig){.optimizer = TRAIN_SGD, .clip_norm = 100.0}, 0.1, NULL);
}

/* lrate = d^-0.5 min(step^-0.5, step warmup^-1.5): at step 2000 exactly
 * half the peak at step 4000 (SPEC.md worked example). */
static void warmup_schedule(void) {
  Graph *g = graph_new();
  GraphId lr = train_lr_warmup_rsqrt(g, 512, 4000);
  GraphId step = graph_find_leaf(g, "step");
  CHECK(graph_error(g) == NULL && step != GRAPH_NONE);
  EvalValues *v = eval_new(g, GRAPH_F64);
  double at[4];
  const int steps[4] = {1, 2000, 4000, 16000};
  for (int i = 0; i < 4; i++) {
    eval_set(v, step, 0, steps[i]);
    eval_run(v);
    at[i] = eval_get(v, lr, 0);
  }
  double peak = 1.0 / sqrt(512.0) / sqrt(4000.0);
  CHECK_NEAR(at[2], peak, 1e-15);
  CHECK_NEAR(at[1] / at[2], 0.5, 1e-12);
  CHECK_NEAR(at[0], 1.0 / sqrt(512.0) * pow(4000.0, -1.5), 1e-18);
  CHECK_NEAR(at[3], peak / 2, 1e-15); /* the decay: step^-0.5 */
  eval_free(v);
  /* A second call reuses the step input. */
  CHECK(train_step_input(g) == step);
  graph_free(g);
}

static void errors(void) {
  Model m = build_model();
  TrainConfig cfg = {.optimizer = TRAIN_SGD, .lr = graph_iota(m.g, GRAPH_F64, (GraphShape){1, {2}}, 0)};
  CHECK(!train_build(m.g, m.loss, &cfg));
  CHECK(graph_error(m.g) && strstr(graph_error(m.g), "learning rate"));
  graph_free(m.g);
}

int main(void) {
  optimizers();
  warmup_schedule();
  errors();
  return test_finish("train");
}
