/* The primitive ops, generated from ops.def. */
#ifndef TFM_OPS_H
#define TFM_OPS_H

#include <stdbool.h>

typedef enum GraphOp {
#define OP(id, name, arity, kind, shape_rule, vjp, reference) GRAPH_OP_##id,
#include "ops.def"
#undef OP
  GRAPH_OP_COUNT
} GraphOp;

typedef enum GraphOpKind {
  GRAPH_KIND_ELEMENTWISE,
  GRAPH_KIND_REDUCE,
  GRAPH_KIND_MOVEMENT,
  GRAPH_KIND_CONTRACTION,
  GRAPH_KIND_SOURCE,
} GraphOpKind;

const char *graph_op_name(GraphOp op);
/* -1 for variadic ops. */
int graph_op_arity(GraphOp op);
GraphOpKind graph_op_kind(GraphOp op);
bool graph_op_from_name(const char *name, GraphOp *out);

#endif
