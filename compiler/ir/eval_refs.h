/* Reference implementations named in ops.def (internal to the IR). */
#ifndef TFM_EVAL_REFS_H
#define TFM_EVAL_REFS_H

#include "eval.h"

typedef void (*EvalRefFn)(const GraphNode *node, const EvalTensor *in, EvalTensor *out);

#define OP(id, name, arity, kind, shape_rule, vjp, reference) \
  void reference(const GraphNode *node, const EvalTensor *in, EvalTensor *out);
#include "ops.def"
#undef OP

#endif
