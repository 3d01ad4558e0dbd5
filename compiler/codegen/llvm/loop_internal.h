/* What the two halves of the loop-kernel emitter share: loop.c computes a
 * fused node's value at an index (elementwise ops, movement, constants,
 * random numbers), loop_rows.c the structure around it (reductions, the
 * rows and column sums a kernel runs over, the GPU's cooperative rows, the
 * kernel function). */
#ifndef TFM_LOOP_INTERNAL_H
#define TFM_LOOP_INTERNAL_H

#include "gen.h"

/* Where a node is read: per-axis indices and/or the row-major linear index,
 * each computed on first use. Ids tell the memo which reads are the same. */
typedef struct Index {
  int id;
  const GraphShape *shape;
  LLVMValueRef linear;
  LLVMValueRef axis[GRAPH_MAX_RANK];
} Index;

typedef struct Memo {
  GraphId node;
  int index_id;
  LLVMValueRef value;
} Memo;

typedef struct Emitter {
  Gen *gen;
  LLVMBuilderRef b;
  const Kernel *kernel;
  LLVMValueRef *args;    /* typed buffer pointers, per kernel argument */
  LLVMValueRef *hoisted; /* per hoisted reduction: its value in this row */
  Memo *memo;            /* values valid where the builder is now */
  int memo_count, memo_capacity;
  int next_index_id;
  int function;
  const RowSplit *split; /* the GPU's cooperative rows, or NULL */
  LLVMValueRef tid;         /* with split: this thread's place in its row */
} Emitter;

static inline const GraphNode *loop_node_of(const Emitter *e, GraphId id) {
  return graph_node(e->gen->graph, id);
}

static inline bool loop_is_float(const GraphNode *n) {
  return kernel_storage_dtype(n->dtype) != GRAPH_I32;
}

/* loop.c: node id's value at `at` (memoised, hoisted reductions read from
 * e->hoisted); a fresh index over `shape`; at's linear index, computed on
 * first use; at's axes, all computed; the row-major stride of an axis;
 * whether a node's value is rounded to bf16. */
LLVMValueRef loop_emit(Emitter *e, GraphId id, Index *at);
Index loop_new_index(Emitter *e, const GraphShape *shape);
LLVMValueRef loop_linear_of(Emitter *e, Index *at);
void loop_settle(Emitter *e, Index *at);
int64_t loop_stride_of(const GraphShape *s, int axis);
bool loop_rounds_to_bf16(const GraphNode *n);

/* loop_rows.c: a reduction node's value at `at` (its own loop over the
 * reduced axes, in lanes where the target allows). */
LLVMValueRef loop_emit_reduction(Emitter *e, GraphId id, Index *at);

#endif
