/* Reverse-mode automatic differentiation over the graph. */
#ifndef TFM_AUTODIFF_H
#define TFM_AUTODIFF_H

#include "graph.h"

/* Appends to g the gradient of the scalar `loss` (a float node with one
 * element) with respect to each node in wrt (float nodes, usually params):
 * grads[i] gets a node with the shape and dtype of wrt[i] (a zero constant
 * when loss does not depend on it). Nodes are visited in reverse id order;
 * a node used several times receives the sum of its contributions. Values
 * derived only from random nodes (dropout masks) are recomputed in the
 * backward part from the same Philox counter rather than kept alive.
 * Returns false with graph_error(g) set on failure. */
bool autodiff_gradients(Graph *g, GraphId loss, const GraphId *wrt, int count, GraphId *grads);

#endif
