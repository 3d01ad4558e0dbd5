/* Shape rules named in ops.def (internal to the IR). A rule reads a node's
 * inputs and attributes, sets its shape and dtype, or writes a message
 * (without the op name) into err and returns false. */
#ifndef TFM_GRAPH_RULES_H
#define TFM_GRAPH_RULES_H

#include "graph.h"

typedef bool (*GraphShapeRule)(const Graph *g, GraphNode *node, char *err, size_t size);

#define OP(id, name, arity, kind, shape_rule, vjp, reference) \
  bool shape_rule(const Graph *g, GraphNode *node, char *err, size_t size);
#include "ops.def"
#undef OP

#endif
