/* The training graph: forward + backward + optimizer update in one graph,
 * so one generated train_step does all three. */
#ifndef TFM_TRAIN_H
#define TFM_TRAIN_H

#include "graph.h"

typedef enum TrainOptimizer {
  TRAIN_SGD,   /* v = momentum v + g; p -= lr v (plain SGD when momentum = 0) */
  TRAIN_ADAM,  /* bias-corrected Adam (Kingma & Ba) */
  TRAIN_ADAMW, /* Adam with decoupled weight decay (Loshchilov & Hutter) */
} TrainOptimizer;

/* Which part of the training step a graph holds. Data-parallel training
 * (runtime/dist.h) runs the step in two graphs with the gradients
 * averaged across processes in between: TRAIN_GRADIENTS is the forward
 * and backward, with an output "grad.<param name>" per param (the param's
 * dtype) beside "loss" and "lr"; TRAIN_APPLY takes those gradients as
 * inputs of the same names and does the clipping and the optimizer
 * update (outputs "lr" and "grad_norm"), so its params and states are
 * those of the whole step's graph, which is TRAIN_WHOLE. */
typedef enum TrainPart { TRAIN_WHOLE, TRAIN_GRADIENTS, TRAIN_APPLY, TRAIN_NORM, TRAIN_APPLY_PARAM } TrainPart;
/* Optimizer-state sharding (ZeRO-1, the binary's train --zero 1) runs the
 * update of each param in a graph of its own, so that a rank holds the
 * moments of the params it owns only: TRAIN_NORM takes every "grad.<param>"
 * and outputs "grad_norm" (the clipping's norm, summed as TRAIN_APPLY sums
 * it; only built when clipping); TRAIN_APPLY_PARAM takes the gradient of
 * param number TrainConfig.param (graph_param_at order) and, when
 * clipping, the f32 scalar input "grad_norm", and updates that param and
 * its moments alone. */

typedef struct TrainConfig {
  TrainPart part;
  int param;           /* TRAIN_APPLY_PARAM: which param (graph_param_at) */
  TrainOptimizer optimizer;
  double momentum;     /* SGD */
  double beta1, beta2; /* Adam, AdamW */
  double eps;          /* Adam, AdamW: added to sqrt(v_hat) */
  /* SGD and Adam: weight_decay * p is added to the gradient (L2);
   * AdamW: p -= lr * weight_decay * p beside the Adam step. */
  double weight_decay;
  /* > 0: gradients are scaled by min(1, clip_norm / (norm + 1e-6)), norm
   * being the L2 norm of all gradients together (as PyTorch's
   * clip_grad_norm_). */
  double clip_norm;
  /* The learning rate: a float scalar node, usually an expression of
   * train_step_input(g). */
  GraphId lr;
} TrainConfig;

/* The i32 scalar input "step": the 1-based number of the update being made
 * (the runtime feeds 1 on the first step). Created on the first call. */
GraphId train_step_input(Graph *g);

/* The schedule of Vaswani et al.:
 * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), as an f32 scalar. */
GraphId train_lr_warmup_rsqrt(Graph *g, double d_model, double warmup);

/* Appends the gradients of `loss` with respect to every param of g, the
 * gradient clipping and the optimizer update: creates the optimizer's
 * moments as state nodes named "<optimizer slot>.<param name>" (e.g.
 * "adam.m.encoder.0.wq"), adds an update for every param and state, and
 * the outputs "lr" (and "grad_norm" when clipping). Every output of g but
 * the loss's is removed: the others are the forward graph's business.
 * Returns false with graph_error(g) set on failure. */
bool train_build(Graph *g, GraphId loss, const TrainConfig *config);

#endif
