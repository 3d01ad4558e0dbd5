/* Building the training graph: gradients, clipping, optimizer update. */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autodiff.h"

static GraphId add(Graph *g, GraphId a, GraphId b) { return graph_binary(g, GRAPH_OP_ADD, a, b); }
static GraphId sub(Graph *g, GraphId a, GraphId b) { return graph_binary(g, GRAPH_OP_SUB, a, b); }
static GraphId mul(Graph *g, GraphId a, GraphId b) { return graph_binary(g, GRAPH_OP_MUL, a, b); }
static GraphId divide(Graph *g, GraphId a, GraphId b) {
  return graph_binary(g, GRAPH_OP_DIV, a, b);
}

static GraphDtype dtype_of(Graph *g, GraphId x) { return graph_node(g, x)->dtype; }

/* A scalar node spread over the shape and dtype of `like`. */
static GraphId spread(Graph *g, GraphId scalar, GraphId like) {
  const GraphNode *n = graph_node(g, like);
  if (!n || !graph_node(g, scalar)) return GRAPH_NONE;
  GraphShape shape = n->shape;
  GraphDtype dtype = n->dtype;
  if (dtype_of(g, scalar) != dtype) scalar = graph_cast(g, scalar, dtype);
  return graph_broadcast(g, scalar, shape);
}

/* c * x for a compile-time number c. */
static GraphId scale(Graph *g, double c, GraphId x) {
  const GraphNode *n = graph_node(g, x);
  if (!n) return GRAPH_NONE;
  return mul(g, graph_splat(g, n->dtype, n->shape, c), x);
}

static GraphId sum_all(Graph *g, GraphId x) {
  int rank = graph_node(g, x)->shape.rank;
  GraphId sum = graph_reduce(g, GRAPH_OP_REDUCE_SUM, x, (1u << rank) - 1);
  return graph_reshape(g, sum, graph_shape_scalar());
}

GraphId train_step_input(Graph *g) {
  GraphId id = graph_find_leaf(g, "step");
  if (id == GRAPH_NONE) return graph_input(g, "step", GRAPH_I32, graph_shape_scalar());
  const GraphNode *n = graph_node(g, id);
  if (n->op != GRAPH_OP_INPUT || n->dtype != GRAPH_I32 || n->shape.rank != 0) {
    graph_fail(g, "train: 'step' is already used for something other than an i32 scalar input");
    return GRAPH_NONE;
  }
  return id;
}

GraphId train_lr_warmup_rsqrt(Graph *g, double d_model, double warmup) {
  GraphId step = graph_cast(g, train_step_input(g), GRAPH_F32);
  GraphId decay = graph_binary(g, GRAPH_OP_POW, step, graph_scalar(g, GRAPH_F32, -0.5));
  GraphId ramp = mul(g, step, graph_scalar(g, GRAPH_F32, pow(warmup, -1.5)));
  GraphId schedule = graph_binary(g, GRAPH_OP_MIN, decay, ramp);
  return mul(g, graph_scalar(g, GRAPH_F32, pow(d_model, -0.5)), schedule);
}

static GraphId moment_state(Graph *g, const char *slot, GraphId param) {
  const GraphNode *p = graph_node(g, param);
  char name[512];
  if (snprintf(name, sizeof name, "%s.%s", slot, p->attrs.name) >= (int)sizeof name) {
    graph_fail(g, "train: the parameter name '%s' is too long", p->attrs.name);
    return GRAPH_NONE;
  }
  return graph_state(g, name, p->dtype, p->shape);
}

/* The joint L2 norm of all gradients, output as "grad_norm". */
static GraphId gradient_norm(Graph *g, const GraphId *grads, int count, GraphDtype dtype) {
  GraphId sum_squares = graph_scalar(g, dtype, 0.0);
  for (int i = 0; i < count; i++) {
    GraphId s = sum_all(g, mul(g, grads[i], grads[i]));
    if (dtype_of(g, s) != dtype) s = graph_cast(g, s, dtype);
    sum_squares = add(g, sum_squares, s);
  }
  GraphId norm = graph_unary(g, GRAPH_OP_SQRT, sum_squares);
  graph_output(g, "grad_norm", norm);
  return norm;
}

/* Scales the gradients so that their joint L2 norm `norm` is at most clip_norm. */
static void clip_gradients(Graph *g, GraphId *grads, int count, GraphId norm, double clip_norm,
                           GraphDtype dtype) {
  GraphId bound = divide(g, graph_scalar(g, dtype, clip_norm),
                         add(g, norm, graph_scalar(g, dtype, 1e-6)));
  GraphId factor = graph_binary(g, GRAPH_OP_MIN, graph_scalar(g, dtype, 1.0), bound);
  for (int i = 0; i < count; i++) grads[i] = mul(g, grads[i], spread(g, factor, grads[i]));
}

static void update_sgd(Graph *g, GraphId param, GraphId grad, GraphId lr,
                       const TrainConfig *config) {
  GraphId direction = grad;
  if (config->momentum != 0.0) {
    GraphId velocity = moment_state(g, "sgd.momentum", param);
    direction = add(g, scale(g, config->momentum, velocity), grad);
    graph_update(g, velocity, direction);
  }
  graph_update(g, param, sub(g, param, mul(g, spread(g, lr, param), direction)));
}

/* bias1 = 1 - beta1^t and bias2 = 1 - beta2^t are scalars shared by all params. */
static void update_adam(Graph *g, GraphId param, GraphId grad, GraphId lr, GraphId bias1,
                        GraphId bias2, const TrainConfig *config) {
  GraphId m = moment_state(g, "adam.m", param), v = moment_state(g, "adam.v", param);
  GraphId m_next = add(g, scale(g, config->beta1, m), scale(g, 1.0 - config->beta1, grad));
  GraphId v_next =
      add(g, scale(g, config->beta2, v), scale(g, 1.0 - config->beta2, mul(g, grad, grad)));
  graph_update(g, m, m_next);
  graph_update(g, v, v_next);
  GraphId m_hat = divide(g, m_next, spread(g, bias1, param));
  GraphId v_hat = divide(g, v_next, spread(g, bias2, param));
  const GraphNode *p = graph_node(g, param);
  GraphId eps = p ? graph_splat(g, p->dtype, p->shape, config->eps) : GRAPH_NONE;
  GraphId step = divide(g, m_hat, add(g, graph_unary(g, GRAPH_OP_SQRT, v_hat), eps));
  if (config->optimizer == TRAIN_ADAMW && config->weight_decay != 0.0)
    step = add(g, step, scale(g, config->weight_decay, param));
  graph_update(g, param, sub(g, param, mul(g, spread(g, lr, param), step)));
}

/* 1 - beta^t */
static GraphId bias_correction(Graph *g, double beta, GraphId t) {
  GraphDtype dtype = dtype_of(g, t);
  GraphId power = graph_binary(g, GRAPH_OP_POW, graph_scalar(g, dtype, beta), t);
  return sub(g, graph_scalar(g, dtype, 1.0), power);
}

/* "grad.<param name>" */
static bool gradient_name(Graph *g, GraphId param, char *name, size_t size) {
  const GraphNode *p = graph_node(g, param);
  if (snprintf(name, size, "grad.%s", p->attrs.name) >= (int)size)
    return graph_fail(g, "train: the parameter name '%s' is too long", p->attrs.name);
  return true;
}

/* TRAIN_GRADIENTS: each gradient an output, in its param's dtype. */
static bool gradient_outputs(Graph *g, const GraphId *params, int count, const GraphId *grads) {
  for (int i = 0; i < count; i++) {
    char name[520];
    if (!gradient_name(g, params[i], name, sizeof name)) return false;
    GraphId grad = grads[i];
    GraphDtype dtype = dtype_of(g, params[i]);
    if (dtype_of(g, grad) != dtype) grad = graph_cast(g, grad, dtype);
    graph_output(g, name, grad);
  }
  return graph_error(g) == NULL;
}

/* TRAIN_APPLY: each gradient an input, shaped and typed as its param. */
static bool gradient_inputs(Graph *g, const GraphId *params, int count, GraphId *grads) {
  for (int i = 0; i < count; i++) {
    char name[520];
    if (!gradient_name(g, params[i], name, sizeof name)) return false;
    const GraphNode *p = graph_node(g, params[i]);
    grads[i] = graph_input(g, name, p->dtype, p->shape);
  }
  return graph_error(g) == NULL;
}

bool train_build(Graph *g, GraphId loss, const TrainConfig *config) {
  const GraphNode *lr_node = graph_node(g, config->lr);
  if (!lr_node || !graph_dtype_is_float(lr_node->dtype) || lr_node->shape.rank != 0)
    return graph_fail(g, "train: the learning rate must be a float scalar node");
  GraphDtype dtype = lr_node->dtype;
  if (config->optimizer != TRAIN_SGD && config->optimizer != TRAIN_ADAM &&
      config->optimizer != TRAIN_ADAMW)
    return graph_fail(g, "train: unknown optimizer %d", (int)config->optimizer);
  GraphId step = train_step_input(g);
  if (step == GRAPH_NONE) return false;

  int count = graph_num_params(g);
  GraphId *params = malloc((size_t)(count ? count : 1) * sizeof(GraphId));
  GraphId *grads = malloc((size_t)(count ? count : 1) * sizeof(GraphId));
  if (!params || !grads) {
    free(params);
    free(grads);
    return graph_fail(g, "train: out of memory");
  }
  for (int i = 0; i < count; i++) params[i] = graph_param_at(g, i);
  bool apply = config->part == TRAIN_APPLY || config->part == TRAIN_NORM ||
               config->part == TRAIN_APPLY_PARAM;
  if (config->part == TRAIN_APPLY_PARAM) { /* that param alone */
    if (config->param < 0 || config->param >= count) {
      free(params);
      free(grads);
      return graph_fail(g, "train: no param number %d", config->param);
    }
    params[0] = params[config->param];
    count = 1;
  }
  bool ok = apply ? gradient_inputs(g, params, count, grads)
                  : autodiff_gradients(g, loss, params, count, grads);
  if (ok) {
    /* The model's other outputs belong to its forward graph: here they were
     * computed and stored every step for nobody (a seq2seq Transformer's
     * cross-attention weights took 8% of its step). The apply part has no
     * forward: without the loss it is dead code. */
    for (int i = graph_num_outputs(g) - 1; i >= 0; i--) {
      GraphOutput o = graph_output_at(g, i);
      if (o.node != loss || apply) graph_remove_output(g, o.name);
    }
    graph_output(g, "lr", config->lr);
  }
  if (ok && config->part == TRAIN_GRADIENTS) {
    ok = gradient_outputs(g, params, count, grads);
    free(params);
    free(grads);
    return ok && graph_error(g) == NULL;
  }
  if (ok && config->part == TRAIN_NORM) {
    if (config->clip_norm > 0.0) gradient_norm(g, grads, count, dtype);
    free(params);
    free(grads);
    return graph_error(g) == NULL;
  }
  if (ok) {
    if (config->clip_norm > 0.0) {
      GraphId norm = config->part == TRAIN_APPLY_PARAM
                         ? graph_input(g, "grad_norm", dtype, graph_shape_scalar())
                         : gradient_norm(g, grads, count, dtype);
      clip_gradients(g, grads, count, norm, config->clip_norm, dtype);
    }
    if (config->weight_decay != 0.0 && config->optimizer != TRAIN_ADAMW)
      for (int i = 0; i < count; i++)
        grads[i] = add(g, grads[i], scale(g, config->weight_decay, params[i]));
    GraphId bias1 = GRAPH_NONE, bias2 = GRAPH_NONE;
    if (config->optimizer != TRAIN_SGD) {
      GraphId t = graph_cast(g, step, dtype);
      bias1 = bias_correction(g, config->beta1, t);
      bias2 = bias_correction(g, config->beta2, t);
    }
    for (int i = 0; i < count; i++) {
      graph_set_scope_from(g, g, params[i]); /* a parameter's update sits in its layer */
      if (config->optimizer == TRAIN_SGD)
        update_sgd(g, params[i], grads[i], config->lr, config);
      else
        update_adam(g, params[i], grads[i], config->lr, bias1, bias2, config);
    }
    graph_set_scope(g, NULL);
  }
  free(params);
  free(grads);
  return graph_error(g) == NULL;
}
