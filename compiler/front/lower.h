/* Lowering to the graph IR. The checker evaluates the program at compile
 * time; when a graph is attached (lower_begin), every tensor value it
 * computes also gets a graph node, so checking and lowering are one walk
 * (a trace, as in JAX) and the graph matches the checked program exactly.
 * Each function here turns one language-level operation (with implicit
 * broadcasting, keepdims, negative axes, numbers mixed with tensors) into
 * explicit primitives of compiler/ir/ops.def. Without a graph they return
 * GRAPH_NONE and cost nothing. */
#ifndef TFM_LOWER_H
#define TFM_LOWER_H
#include "graph.h"
#include "value.h"

/* The graph being built, or NULL when only checking. */
extern Graph *lower_graph;

/* Attaches `g` for the next sema_check (NULL: check only). */
void lower_begin(Graph *g);
/* Attaches g (or NULL) in the middle of a check; returns the graph before. */
Graph *lower_switch(Graph *g);
/* The next sema_check lowers pretrained block `name` (only) into g; NULL
 * names none. lower_pretrained_target(name) is g for that block, else NULL. */
void lower_set_pretrained(const char *name, Graph *g);
Graph *lower_pretrained_target(const char *name);

/* The nodes made from here on come from the layer instance at `path`
 * ("encoder.3.attn"; "" for the model's own code), for pictures (see
 * graph_set_scope). Returns the path before, to restore on leaving. */
const char *lower_enter_scope(const char *path);

/* v (a tensor or a number) as a node of type `to`: numbers become
 * constants of to's dtype, tensors are broadcast to to's shape. */
GraphId lower_as(const Value *v, const TensorType *to);

GraphId lower_binary(Op op, const Value *a, const Value *b, const TensorType *out);
/* max(a, b) / min(a, b) elementwise. */
GraphId lower_minmax(int is_max, const Value *a, const Value *b, const TensorType *out);
GraphId lower_unary(const char *name, const Value *x); /* exp, log, ..., "neg" */
GraphId lower_matmul(const Value *a, const Value *b, const TensorType *out);
GraphId lower_select(const Value *c, const Value *a, const Value *b, const TensorType *out);
GraphId lower_cast(const Value *x, DType dt);
/* sum, mean, max, min over the axes in `mask`; out is the result type. */
GraphId lower_reduce(const char *name, const Value *x, unsigned mask, const TensorType *out);
/* Any change of shape that keeps the elements in order. */
GraphId lower_reshape(const Value *x, const TensorType *out);
GraphId lower_permute(const Value *x, const int64_t *perm);
GraphId lower_broadcast(const Value *x, const TensorType *out);
GraphId lower_slice(const Value *x, int axis, int64_t start, int64_t end);
GraphId lower_concat(const Value *list, int axis);
GraphId lower_pad(const Value *x, int axis, int64_t before, int64_t after, double value);
GraphId lower_gather(const Value *table, const Value *indices, const TensorType *out);
GraphId lower_one_hot(const Value *indices, const TensorType *out);
GraphId lower_iota(const TensorType *out);
GraphId lower_full(const TensorType *out, double value);
GraphId lower_constant(const TensorType *out, const double *values); /* numel values */
GraphId lower_random_uniform(const TensorType *out);
/* The decode-step graph's cache (builtins.c, kv_cache): a state named
 * "SCOPE.NAME_cache" of type out [B, ..., W, K], x [B, ..., 1, K] written at
 * row positions[b] of each batch row b; returns the cache after the write,
 * which is also the state's update. */
GraphId lower_kv_cache(const Value *x, const Value *positions, const char *name,
                       const TensorType *out);
/* Leaves and the interface. */
GraphId lower_param(const char *name, const TensorType *t);
GraphId lower_input(const char *name, const TensorType *t);
void lower_output(const char *name, const Value *v);
/* The training step as an f32 scalar (the lr expression's `step`). */
GraphId lower_step(void);

/* The language's dtypes and a tensor type's shape as the graph's. */
GraphDtype lower_dtype(DType dt);
GraphShape lower_shape(const TensorType *t);

#endif
