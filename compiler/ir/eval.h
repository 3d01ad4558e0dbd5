/* The reference evaluator: runs a graph node by node with the reference
 * implementations of ops.def. It is the oracle for gradient checks and for
 * compiled kernels. Every float node (f32, f64, bf16) is computed in one
 * chosen precision, f32 or f64; i32 nodes stay i32. In f32 precision a
 * bf16 node is computed in f32 and its result rounded to bf16 (nearest,
 * ties to even), as compiled kernels do: its values are bf16 values held
 * in f32, so every consumer reads what a kernel would load. In f64 (the
 * gradient checks) bf16 nodes are not rounded. */
#ifndef TFM_EVAL_H
#define TFM_EVAL_H

#include "graph.h"

/* A dense row-major buffer. `dtype` is the storage type: f32, f64 or i32. */
typedef struct EvalTensor {
  GraphDtype dtype;
  GraphShape shape;
  int64_t numel;
  void *data;
} EvalTensor;

/* One buffer per node of a graph. */
typedef struct EvalValues EvalValues;

/* Allocates zeroed buffers for every node; precision is GRAPH_F32 or
 * GRAPH_F64. Returns NULL when out of memory or for another precision. The
 * graph must outlive the values and must not change while they exist. */
EvalValues *eval_new(const Graph *g, GraphDtype precision);
void eval_free(EvalValues *v);

/* Computes every node that is not an input, param or state, from the
 * current contents of those leaves. */
void eval_run(EvalValues *v);

/* Writes each update's value into its target (one optimizer step). */
void eval_apply_updates(EvalValues *v);

EvalTensor *eval_tensor(EvalValues *v, GraphId id);
double eval_get(const EvalValues *v, GraphId id, int64_t index);
void eval_set(EvalValues *v, GraphId id, int64_t index, double value);
/* Fills a node's buffer; false when count is not its number of elements. */
bool eval_set_all(EvalValues *v, GraphId id, const double *values, int64_t count);

/* Storage dtype of a node of this dtype at this precision. */
GraphDtype eval_storage_dtype(GraphDtype dtype, GraphDtype precision);
bool eval_tensor_alloc(EvalTensor *t, GraphDtype storage, const GraphShape *shape);
void eval_tensor_release(EvalTensor *t);
double eval_tensor_get(const EvalTensor *t, int64_t index);
void eval_tensor_set(EvalTensor *t, int64_t index, double value);

/* x rounded to the nearest bf16 value (ties to even; a NaN stays a NaN,
 * quiet, with its sign; an overflow becomes infinity), as an f32. */
float eval_bf16_round(float x);

/* x rounded to tf32 (10 mantissa bits, to nearest, ties away from zero:
 * PTX's cvt.rna.tf32.f32), as an f32; infinity and NaN stay as they are. */
float eval_tf32_round(float x);

/* With `on`, eval_run rounds the operands of every f32 dot to tf32 first
 * (in f32 precision; f64 and bf16 dots are unchanged), as the GPU's
 * tensor-core dots do (compiler/codegen/ptx/dot.c): the reference for
 * compiled code that runs there. Off by default. */
void eval_set_tf32_dots(EvalValues *v, bool on);

/* Runs the reference implementation of `node` on inputs already computed
 * (one per node input) into `out` (allocated with the node's shape). A
 * bf16 node with an f32 `out` is rounded to bf16. */
void eval_node(const GraphNode *node, const EvalTensor *inputs, EvalTensor *out);

#endif
