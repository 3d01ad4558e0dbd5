/* A model's graphs: the checker run with a graph attached (lower.h), then
 * the passes that must come before autodiff and the training graph, and
 * the graph of the parameters' initial values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "lower.h"
#include "lower_model.h"
#include "pass.h"
#include "train.h"

static double optim_setting(const Value *o, const char *key) {
  for (int i = 0; i < o->keys.len; i++)
    if (!strcmp(o->keys.items[i], key)) return ((const Value *)o->items.items[i])->f;
  return 0;
}

/* The train block as the IR's TrainConfig. */
/* `map` (or NULL) takes the trace's node ids to g's (after autocast). */
static bool build_training(Graph *g, const CheckedModel *m, const GraphId *map, TrainPart part,
                           int param) {
  const TrainSpec *ts = &m->train;
  if (!ts->present) {
    diag_error(m->at, "model %s has no train block, so it has no training graph", m->name);
    return false;
  }
  const Value *o = ts->optimizer;
  TrainConfig c = {.part = part, .param = param};
  c.optimizer = !strcmp(o->s, "sgd") ? TRAIN_SGD : !strcmp(o->s, "adam") ? TRAIN_ADAM : TRAIN_ADAMW;
  c.momentum = optim_setting(o, "momentum");
  c.beta1 = optim_setting(o, "beta1");
  c.beta2 = optim_setting(o, "beta2");
  c.eps = optim_setting(o, "eps");
  c.weight_decay = optim_setting(o, "weight_decay");
  c.clip_norm = ts->clip;
  c.lr = ts->lr->kind == V_TENSOR ? (map ? map[ts->lr->node] : ts->lr->node)
                                  : graph_scalar(g, GRAPH_F32, ts->lr->kind == V_FLOAT
                                                                   ? ts->lr->f
                                                                   : (double)ts->lr->i);
  return train_build(g, graph_find_output(g, "loss"), &c);
}

/* Replaces g by pass(g) unless g has failed, composing *map (NULL: the
 * identity) with the pass's id map; a failure is recorded in g. *map has
 * an entry for each of the `traced` nodes of the graph before the first
 * pass, however many nodes the passes add. */
static Graph *run_mapped_pass(Graph *g,
                              Graph *(*pass)(const Graph *, GraphId *, char *, size_t),
                              const char *what, GraphId **map, int traced) {
  if (graph_error(g)) return g;
  int n = graph_count(g);
  GraphId *step = malloc(sizeof(GraphId) * (size_t)(n ? n : 1));
  char err[256];
  Graph *next = step ? pass(g, step, err, sizeof err) : NULL;
  if (!next) {
    graph_fail(g, "%s: %s", what, step ? err : "out of memory");
    free(step);
    return g;
  }
  graph_free(g);
  if (*map) {
    for (int i = 0; i < traced; i++) (*map)[i] = step[(*map)[i]];
    free(step);
  } else {
    *map = step;
  }
  return next;
}

/* The forward graph, the training graph or a part of it (train; param: the
 * one param of a TRAIN_APPLY_PARAM part, else -1), or the decode-step
 * graph (o->decoding). */
static Graph *lower_graphs(const FrontOptions *opt, int train, int param, CheckedModel **model) {
  FrontOptions o = *opt;
  o.training = opt->training || train;
  Graph *g = graph_new();
  lower_begin(g);
  CheckedModel *m = sema_check(&o);
  lower_begin(NULL);
  *model = m;
  if (!m) {
    graph_free(g);
    return NULL;
  }
  /* Before autodiff, so that the backward pass follows: attention is fused
   * (its VJP, not the primitives', makes the backward pass, and nothing
   * [..., T, S] is kept), dots of one x become one (merge_dots.c: one dx
   * and one dW dot in the backward pass), then --dtype bf16 makes the
   * activations bf16 (after fusion, whose pattern is the f32 chain as
   * lowered). The lr node is the only id held across the passes: `map`
   * takes the trace's ids to g's. */
  GraphId *map = NULL;
  int traced = graph_count(g);
  if (!opt->unfused_attention)
    g = run_mapped_pass(g, pass_attention, "pass_attention", &map, traced);
  g = run_mapped_pass(g, pass_merge_dots, "pass_merge_dots", &map, traced);
  if (o.bf16) g = run_mapped_pass(g, pass_autocast_bf16, "--dtype bf16", &map, traced);
  /* The checker accepted the program, so an IR error is a bug of ours. */
  if (!graph_error(g) && train) build_training(g, m, map, (TrainPart)(train - 1), param);
  free(map);
  if (graph_error(g) || diag_error_count()) {
    if (graph_error(g))
      diag_error(m->at, "internal error: lowering model %s failed: %s", m->name, graph_error(g));
    graph_free(g);
    *model = NULL;
    return NULL;
  }
  return g;
}

Graph *lower_model_part(const FrontOptions *opt, int train, int param, CheckedModel **model) {
  FrontOptions o = *opt;
  o.decoding = 0;
  return lower_graphs(&o, train, param, model);
}

Graph *lower_model(const FrontOptions *opt, int train, CheckedModel **model) {
  return lower_model_part(opt, train, -1, model);
}

int lower_decodes(const CheckedModel *m) {
  const ModelIO *tokens = NULL, *targets = NULL;
  for (int i = 0; i < m->inputs.len; i++) {
    const ModelIO *io = m->inputs.items[i];
    if (!strcmp(io->name, "tokens")) tokens = io;
    else if (!strcmp(io->name, "targets")) targets = io;
    else return 0;
  }
  int has_logits = 0;
  for (int i = 0; i < m->outputs.len; i++)
    has_logits |= !strcmp(((const ModelIO *)m->outputs.items[i])->name, "logits");
  return tokens && targets && has_logits && tokens->type.rank == 2 && targets->type.rank == 2 &&
         tokens->type.dtype == DT_I32;
}

Graph *lower_decode_model(const FrontOptions *opt, CheckedModel **model) {
  FrontOptions o = *opt;
  o.decoding = 1;
  o.training = 0;
  o.probes = 0;
  Graph *g = lower_graphs(&o, 0, -1, model);
  /* No cache: the program is not one that decodes a token at a time. */
  if (g && !graph_num_states(g)) {
    graph_free(g);
    return NULL;
  }
  return g;
}

/* One parameter's initial value from its initialiser, in primitives. */
static GraphId init_value(Graph *g, const Param *p, GraphId seed_input, uint64_t seed) {
  const TensorType *t = &p->type;
  const char *kind = p->init->s;
  const PtrVec *args = &p->init->items;
  double a0 = args->len > 0 ? ((const Value *)args->items[0])->f : 0;
  double a1 = args->len > 1 ? ((const Value *)args->items[1])->f : 0;
  GraphDtype dt = lower_dtype(t->dtype);
  GraphShape shape = lower_shape(t);
  if (!strcmp(kind, "zeros")) return graph_splat(g, dt, shape, 0);
  if (!strcmp(kind, "ones")) return graph_splat(g, dt, shape, 1);
  if (!strcmp(kind, "constant")) return graph_splat(g, dt, shape, a0);
  /* Xavier/Glorot: fan-in is every axis but the last (the rows of x W). */
  double fan_in = 1, fan_out = t->rank ? (double)t->dims[t->rank - 1] : 1;
  for (int i = 0; i + 1 < t->rank; i++) fan_in *= (double)t->dims[i];
  if (!strcmp(kind, "xavier_uniform")) {
    a1 = sqrt(6.0 / (fan_in + fan_out));
    a0 = -a1;
    kind = "uniform";
  } else if (!strcmp(kind, "xavier_normal")) {
    a1 = sqrt(2.0 / (fan_in + fan_out));
    a0 = 0;
    kind = "normal";
  }
  GraphId u = graph_random(g, seed_input, dt, shape, seed);
  if (!strcmp(kind, "uniform"))
    return graph_binary(g, GRAPH_OP_ADD, graph_splat(g, dt, shape, a0),
                        graph_binary(g, GRAPH_OP_MUL, u, graph_splat(g, dt, shape, a1 - a0)));
  /* normal: Box-Muller, sqrt(-2 ln(1 - u)) cos(2 pi v), u and v uniform in [0, 1). */
  GraphId v = graph_random(g, seed_input, dt, shape, seed);
  GraphId one_minus_u = graph_binary(g, GRAPH_OP_SUB, graph_splat(g, dt, shape, 1), u);
  GraphId radius = graph_unary(g, GRAPH_OP_SQRT,
                               graph_binary(g, GRAPH_OP_MUL, graph_splat(g, dt, shape, -2),
                                            graph_unary(g, GRAPH_OP_LOG, one_minus_u)));
  GraphId angle = graph_binary(g, GRAPH_OP_MUL, v, graph_splat(g, dt, shape, 2 * 3.14159265358979323846));
  GraphId z = graph_binary(g, GRAPH_OP_MUL, radius, graph_unary(g, GRAPH_OP_COS, angle));
  return graph_binary(g, GRAPH_OP_ADD, graph_splat(g, dt, shape, a0),
                      graph_binary(g, GRAPH_OP_MUL, z, graph_splat(g, dt, shape, a1)));
}

Graph *lower_init_graph(const CheckedModel *m, uint64_t seed) {
  Graph *g = graph_new();
  /* The run-time seed enters as the random nodes' offset (--seed). */
  GraphId seed_input = graph_input(g, "seed", GRAPH_I32, graph_shape_scalar());
  for (int i = 0; i < m->params.len && !graph_error(g); i++) {
    const Param *p = m->params.items[i];
    graph_output(g, p->name, init_value(g, p, seed_input, seed));
  }
  return g;
}

Graph *lower_pretrained_graph(const FrontOptions *opt, const char *name, CheckedModel **model) {
  Graph *g = graph_new();
  lower_begin(NULL);
  lower_set_pretrained(name, g);
  CheckedModel *m = sema_check(opt);
  lower_set_pretrained(NULL, NULL);
  *model = m;
  int found = 0;
  for (int i = 0; m && i < m->pretrained.len; i++)
    found |= !strcmp(((const Pretrained *)m->pretrained.items[i])->name, name);
  if (m && !found) diag_error(m->at, "model %s has no pretrained block '%s'", m->name, name);
  if (!m || !found || graph_error(g) || diag_error_count()) {
    if (m && graph_error(g))
      diag_error(m->at, "internal error: lowering pretrained %s failed: %s", name, graph_error(g));
    graph_free(g);
    *model = NULL;
    return NULL;
  }
  return g;
}
