/* What a VJP rule of ops.def sees (internal to the IR). */
#ifndef TFM_AUTODIFF_VJP_H
#define TFM_AUTODIFF_VJP_H

#include "graph.h"

typedef struct AutodiffContext AutodiffContext;

/* Builds the gradient contribution of each input of `node` (a copy of node
 * `self`) from the gradient `grad` of its output; input_grads[i] starts as
 * GRAPH_NONE and stays so for inputs without a gradient. */
typedef void (*AutodiffVjp)(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                            GraphId grad, GraphId *input_grads);

Graph *autodiff_graph(AutodiffContext *ctx);
/* The node to read forward value `id` through in the backward part. */
GraphId autodiff_value(AutodiffContext *ctx, GraphId id);
/* Whether forward node `id` lies between the differentiated leaves and the loss. */
bool autodiff_needs_grad(const AutodiffContext *ctx, GraphId id);

#define OP(id, name, arity, kind, shape_rule, vjp, reference) \
  void vjp(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,      \
           GraphId *input_grads);
#include "ops.def"
#undef OP

#endif
