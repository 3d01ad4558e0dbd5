/* The evaluator driver: one buffer per node, nodes run in id order. */
#include "eval.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval_refs.h"

static const EvalRefFn references[GRAPH_OP_COUNT] = {
#define OP(id, name, arity, kind, shape_rule, vjp, reference) reference,
#include "ops.def"
#undef OP
};

struct EvalValues {
  const Graph *graph;
  GraphDtype precision;
  EvalTensor *tensors;
  EvalTensor *scratch; /* input headers of the node being run */
  bool tf32_dots;      /* eval_set_tf32_dots */
};

GraphDtype eval_storage_dtype(GraphDtype dtype, GraphDtype precision) {
  if (dtype == GRAPH_I32) return GRAPH_I32;
  return precision == GRAPH_F64 ? GRAPH_F64 : GRAPH_F32;
}

bool eval_tensor_alloc(EvalTensor *t, GraphDtype storage, const GraphShape *shape) {
  t->dtype = storage;
  t->shape = *shape;
  t->numel = graph_shape_numel(shape);
  t->data = calloc((size_t)t->numel, storage == GRAPH_F64 ? 8 : 4);
  return t->data != NULL;
}

void eval_tensor_release(EvalTensor *t) {
  free(t->data);
  t->data = NULL;
}

EvalValues *eval_new(const Graph *g, GraphDtype precision) {
  if (precision != GRAPH_F32 && precision != GRAPH_F64) return NULL;
  EvalValues *v = calloc(1, sizeof *v);
  int n = graph_count(g);
  if (!v || !(v->tensors = calloc((size_t)(n ? n : 1), sizeof(EvalTensor)))) {
    free(v);
    return NULL;
  }
  v->graph = g;
  v->precision = precision;
  int max_inputs = 1;
  for (GraphId id = 0; id < n; id++)
    if (graph_node(g, id)->num_inputs > max_inputs) max_inputs = graph_node(g, id)->num_inputs;
  if (!(v->scratch = calloc((size_t)max_inputs, sizeof(EvalTensor)))) {
    eval_free(v);
    return NULL;
  }
  for (GraphId id = 0; id < n; id++) {
    const GraphNode *node = graph_node(g, id);
    if (!eval_tensor_alloc(&v->tensors[id], eval_storage_dtype(node->dtype, precision),
                           &node->shape)) {
      eval_free(v);
      return NULL;
    }
  }
  return v;
}

void eval_free(EvalValues *v) {
  if (!v) return;
  for (GraphId id = 0; id < graph_count(v->graph); id++) eval_tensor_release(&v->tensors[id]);
  free(v->tensors);
  free(v->scratch);
  free(v);
}

float eval_bf16_round(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    u = (u & 0xffff0000u) | 0x00400000u;
  else
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&x, &u, sizeof x);
  return x;
}

float eval_tf32_round(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) >= 0x7f800000u) return x; /* infinity and NaN stay */
  /* Half of the 13 dropped bits' unit added to the magnitude, then cut:
   * ties go away from zero. */
  u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&x, &u, sizeof x);
  return x;
}

void eval_set_tf32_dots(EvalValues *v, bool on) { v->tf32_dots = on; }

/* An f32 dot of operands rounded to tf32 (eval_set_tf32_dots). */
static void tf32_dot(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  EvalTensor rounded[2] = {{0}, {0}};
  for (int i = 0; i < 2; i++) {
    if (!eval_tensor_alloc(&rounded[i], GRAPH_F32, &in[i].shape)) {
      /* eval_run has no error to return, and an unrounded product would
       * be a silently different reference. */
      fprintf(stderr, "eval: out of memory for a dot's tf32 operands\n");
      abort();
    }
    for (int64_t e = 0; e < in[i].numel; e++)
      ((float *)rounded[i].data)[e] = eval_tf32_round(((const float *)in[i].data)[e]);
  }
  eval_node(node, rounded, out);
  eval_tensor_release(&rounded[0]);
  eval_tensor_release(&rounded[1]);
}

void eval_node(const GraphNode *node, const EvalTensor *inputs, EvalTensor *out) {
  references[node->op](node, inputs, out);
  if (node->dtype == GRAPH_BF16 && out->dtype == GRAPH_F32) {
    float *data = out->data;
    for (int64_t i = 0; i < out->numel; i++) data[i] = eval_bf16_round(data[i]);
  }
}

void eval_run(EvalValues *v) {
  for (GraphId id = 0; id < graph_count(v->graph); id++) {
    const GraphNode *node = graph_node(v->graph, id);
    for (int i = 0; i < node->num_inputs; i++) v->scratch[i] = v->tensors[node->inputs[i]];
    if (v->tf32_dots && node->op == GRAPH_OP_DOT && node->dtype == GRAPH_F32 &&
        v->precision == GRAPH_F32)
      tf32_dot(node, v->scratch, &v->tensors[id]);
    else
      eval_node(node, v->scratch, &v->tensors[id]);
  }
}

void eval_apply_updates(EvalValues *v) {
  /* Targets are leaves and values are computed nodes, so no copy can
   * overwrite a value another update still has to read. */
  for (int i = 0; i < graph_num_updates(v->graph); i++) {
    GraphUpdate u = graph_update_at(v->graph, i);
    EvalTensor *to = &v->tensors[u.target];
    memcpy(to->data, v->tensors[u.value].data,
           (size_t)to->numel * (to->dtype == GRAPH_F64 ? 8 : 4));
  }
}

EvalTensor *eval_tensor(EvalValues *v, GraphId id) { return &v->tensors[id]; }

double eval_get(const EvalValues *v, GraphId id, int64_t index) {
  return eval_tensor_get(&v->tensors[id], index);
}

void eval_set(EvalValues *v, GraphId id, int64_t index, double value) {
  eval_tensor_set(&v->tensors[id], index, value);
}

bool eval_set_all(EvalValues *v, GraphId id, const double *values, int64_t count) {
  EvalTensor *t = &v->tensors[id];
  if (count != t->numel) return false;
  for (int64_t i = 0; i < count; i++) eval_tensor_set(t, i, values[i]);
  return true;
}
