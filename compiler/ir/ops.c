/* Name, arity and kind of each op, read from ops.def. */
#include "ops.h"

#include <string.h>

typedef struct OpInfo {
  const char *name;
  int arity;
  GraphOpKind kind;
} OpInfo;

static const OpInfo op_info[GRAPH_OP_COUNT] = {
#define OP(id, name, arity, kind, shape_rule, vjp, reference) {name, arity, GRAPH_KIND_##kind},
#include "ops.def"
#undef OP
};

const char *graph_op_name(GraphOp op) { return op_info[op].name; }

int graph_op_arity(GraphOp op) { return op_info[op].arity; }

GraphOpKind graph_op_kind(GraphOp op) { return op_info[op].kind; }

bool graph_op_from_name(const char *name, GraphOp *out) {
  for (int i = 0; i < GRAPH_OP_COUNT; i++) {
    if (strcmp(op_info[i].name, name) == 0) {
      *out = (GraphOp)i;
      return true;
    }
  }
  return false;
}
