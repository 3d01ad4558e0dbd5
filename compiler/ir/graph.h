/* The graph IR: an SSA DAG of primitive ops with static shapes.
 *
 * Nodes live in one growable array and are named by their index (GraphId).
 * A node's inputs always have smaller ids than the node, so id order is a
 * topological order. Builders run the op's shape rule; on a bad shape they
 * return GRAPH_NONE and record a message (graph_error) instead of aborting,
 * and a builder given a GRAPH_NONE input returns GRAPH_NONE without a new
 * message, so a front end may build a whole expression and check once.
 */
#ifndef TFM_GRAPH_H
#define TFM_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"

#define GRAPH_MAX_RANK 8
#define GRAPH_NONE (-1)
#define GRAPH_ERROR_SIZE 256

typedef int32_t GraphId;

typedef enum GraphDtype {
  GRAPH_F32,
  GRAPH_F64,
  GRAPH_I32,
  GRAPH_BF16, /* reserved: accepted by the builders, evaluated as a float */
} GraphDtype;

typedef struct GraphShape {
  int rank;
  int64_t dims[GRAPH_MAX_RANK];
} GraphShape;

/* Attributes of every op in one flat struct. graph_add_node keeps only the
 * fields the op reads (and list entries within the input rank) and zeroes
 * the rest, so field-wise comparison works for any pair of nodes. */
typedef struct GraphAttrs {
  GraphShape shape;    /* target of reshape/broadcast; shape of every source */
  GraphDtype dtype;    /* cast target; dtype of every source */
  uint32_t axes;       /* reduce_*: bit i set = axis i is reduced */
  int axis;            /* concat, iota */
  int perm[GRAPH_MAX_RANK];     /* permute: output axis i is input axis perm[i] */
  int64_t start[GRAPH_MAX_RANK];/* slice: start, stop (exclusive), step >= 1 */
  int64_t stop[GRAPH_MAX_RANK];
  int64_t step[GRAPH_MAX_RANK];
  int64_t lo[GRAPH_MAX_RANK];   /* pad: before, after, between elements (>= 0) */
  int64_t hi[GRAPH_MAX_RANK];
  int64_t interior[GRAPH_MAX_RANK];
  double pad_value;
  bool transpose_a, transpose_b; /* dot */
  int64_t rows;        /* scatter_add: rows V of the [V, D] result */
  uint64_t seed;       /* random: Philox key */
  uint32_t stream;     /* random: per-node counter word (unique per graph) */
  const double *values;/* constant: 1 value (splat) or one per element */
  int64_t num_values;
  const char *name;    /* input, param, state */
  double scale;        /* attention*: the scores are scale * q.k (+ mask) */
  bool causal;         /* attention*: key j is hidden from query i when j > i */
} GraphAttrs;

typedef struct GraphNode {
  GraphOp op;
  GraphDtype dtype;
  GraphShape shape;
  int num_inputs;
  const GraphId *inputs;
  GraphAttrs attrs;
  const char *scope; /* the layer instance that made it (graph_set_scope), or NULL */
} GraphNode;

typedef struct GraphOutput {
  const char *name;
  GraphId node;
} GraphOutput;

/* After a step, the runtime writes `value` into the buffer of `target`
 * (a param or state node). */
typedef struct GraphUpdate {
  GraphId target;
  GraphId value;
} GraphUpdate;

typedef struct Graph Graph;

Graph *graph_new(void);
void graph_free(Graph *g);

/* First error since the last graph_clear_error, or NULL. */
const char *graph_error(const Graph *g);
void graph_clear_error(Graph *g);
/* Records an error (unless one is already recorded) and returns false; for
 * the modules that build on graphs (autodiff, train, passes). */
bool graph_fail(Graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int graph_count(const Graph *g);
/* Valid until the next node is added. */
const GraphNode *graph_node(const Graph *g, GraphId id);

/* Interface lists, in creation order. */
int graph_num_inputs(const Graph *g);
GraphId graph_input_at(const Graph *g, int i);
int graph_num_params(const Graph *g);
GraphId graph_param_at(const Graph *g, int i);
int graph_num_states(const Graph *g);
GraphId graph_state_at(const Graph *g, int i);
int graph_num_outputs(const Graph *g);
GraphOutput graph_output_at(const Graph *g, int i);
int graph_num_updates(const Graph *g);
GraphUpdate graph_update_at(const Graph *g, int i);
/* Whether `id` is the node of some output; the value of some update. */
bool graph_is_output(const Graph *g, GraphId id);
bool graph_is_update_value(const Graph *g, GraphId id);
/* Input, param or state node with this name, or GRAPH_NONE. */
GraphId graph_find_leaf(const Graph *g, const char *name);
/* Node of the output with this name, or GRAPH_NONE. */
GraphId graph_find_output(const Graph *g, const char *name);

/* The general builder: copies inputs and attrs (constant values and names
 * are copied into the graph), runs the shape rule. */
GraphId graph_add_node(Graph *g, GraphOp op, const GraphId *inputs, int num_inputs,
                       const GraphAttrs *attrs);

/* Leaves. Names must be unique among inputs, params and states. */
GraphId graph_input(Graph *g, const char *name, GraphDtype dtype, GraphShape shape);
GraphId graph_param(Graph *g, const char *name, GraphDtype dtype, GraphShape shape);
GraphId graph_state(Graph *g, const char *name, GraphDtype dtype, GraphShape shape);

/* Sources. */
GraphId graph_constant(Graph *g, GraphDtype dtype, GraphShape shape, const double *values,
                       int64_t num_values);
GraphId graph_splat(Graph *g, GraphDtype dtype, GraphShape shape, double value);
GraphId graph_scalar(Graph *g, GraphDtype dtype, double value); /* rank 0 */
GraphId graph_iota(Graph *g, GraphDtype dtype, GraphShape shape, int axis);
/* Uniform [0,1) from Philox 4x32-10 keyed by seed; `offset` is an i32 scalar
 * (usually the training step) mixed into the counter; each call takes the
 * graph's next stream number. */
GraphId graph_random(Graph *g, GraphId offset, GraphDtype dtype, GraphShape shape,
                     uint64_t seed);

/* Elementwise. `op` must have the matching arity. */
GraphId graph_unary(Graph *g, GraphOp op, GraphId x);
GraphId graph_binary(Graph *g, GraphOp op, GraphId a, GraphId b);
GraphId graph_select(Graph *g, GraphId cond, GraphId if_true, GraphId if_false);
GraphId graph_cast(Graph *g, GraphId x, GraphDtype dtype);

/* reduce_sum / reduce_max over the axes in the bit mask, keeping them as 1. */
GraphId graph_reduce(Graph *g, GraphOp op, GraphId x, uint32_t axes);

/* Movement. */
GraphId graph_reshape(Graph *g, GraphId x, GraphShape shape);
GraphId graph_permute(Graph *g, GraphId x, const int *perm);
/* Right-aligned: x's axes match the last axes of `shape`, each equal or 1. */
GraphId graph_broadcast(Graph *g, GraphId x, GraphShape shape);
/* step == NULL means step 1 on every axis. */
GraphId graph_slice(Graph *g, GraphId x, const int64_t *start, const int64_t *stop,
                    const int64_t *step);
GraphId graph_concat(Graph *g, const GraphId *xs, int count, int axis);
/* interior == NULL means no interior padding. */
GraphId graph_pad(Graph *g, GraphId x, const int64_t *lo, const int64_t *hi,
                  const int64_t *interior, double value);
GraphId graph_gather(Graph *g, GraphId table, GraphId indices);
GraphId graph_scatter_add(Graph *g, GraphId updates, GraphId indices, int64_t rows);

/* [b..., m, k] x [b..., k, n] -> [b..., m, n]; a transpose flag swaps the last
 * two axes of that operand. Batch axes must match, or one operand is rank 2
 * and is shared across the other's batch. */
GraphId graph_dot(Graph *g, GraphId a, GraphId b, bool transpose_a, bool transpose_b);

/* Fused scaled dot-product attention (see ops.def): q [..., T, D],
 * k [..., S, D], v [..., S, Dv], mask GRAPH_NONE or an additive mask whose
 * axes match the last axes of [..., T, S], each equal or 1. */
GraphId graph_attention(Graph *g, GraphId q, GraphId k, GraphId v, GraphId mask, double scale,
                        bool causal);

/* Interface. */
bool graph_output(Graph *g, const char *name, GraphId node);
/* Removes the output `name` (the node stays); nothing when there is none. */
void graph_remove_output(Graph *g, const char *name);
bool graph_update(Graph *g, GraphId target, GraphId value);

/* Where nodes come from, for pictures (tfmc emit dot --layers): the dotted
 * path of the layer instance whose code made them ("encoder.3.attn"), or
 * NULL for the model's own code and the optimizer's shared steps. A new node
 * takes the graph's current scope; a copied node keeps its source's. A pass
 * that rewrites node `id` makes id's scope current first (set_scope_from),
 * so what replaces a node stays in its layer. Nothing else reads it: CSE,
 * kernels and code generation ignore it. */
void graph_set_scope(Graph *g, const char *scope);
void graph_set_scope_from(Graph *dst, const Graph *src, GraphId id);
const char *graph_current_scope(const Graph *g);

/* Copies node `id` of `src` into `dst` with new inputs (same op, attrs, scope). */
GraphId graph_copy_node(Graph *dst, const Graph *src, GraphId id, const GraphId *inputs);
/* Copies outputs and updates of `src` into `dst` through `map` (src id -> dst id). */
bool graph_copy_interface(Graph *dst, const Graph *src, const GraphId *map);

/* Helpers. */
const char *graph_dtype_name(GraphDtype dtype);
bool graph_dtype_from_name(const char *name, GraphDtype *out);
bool graph_dtype_is_float(GraphDtype dtype);
int64_t graph_shape_numel(const GraphShape *shape);
bool graph_shape_equal(const GraphShape *a, const GraphShape *b);
GraphShape graph_shape_scalar(void);
GraphShape graph_shape_of(int rank, const int64_t *dims);
/* Writes e.g. "f32[2,3]" into buf. */
void graph_format_type(char *buf, size_t size, GraphDtype dtype, const GraphShape *shape);
bool graph_attrs_equal(GraphOp op, const GraphAttrs *a, const GraphAttrs *b);
bool graph_constant_is_splat(const GraphNode *node, double *value);

#endif
