/* Structural identity of kernels: a kernel is written out as bytes (ops,
 * dtypes, shapes, attributes, how inputs connect, argument types) without
 * node ids or buffers; kernels with equal bytes share one function. */
#include <stdlib.h>
#include <string.h>

#include "kernel_internal.h"

typedef struct Bytes {
  unsigned char *data;
  size_t size, capacity;
  bool failed;
} Bytes;

static void put(Bytes *b, const void *data, size_t size) {
  if (b->failed)
    return;
  if (b->size + size > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 256;
    while (capacity < b->size + size)
      capacity *= 2;
    unsigned char *grown = realloc(b->data, capacity);
    if (!grown) {
      b->failed = true;
      return;
    }
    b->data = grown;
    b->capacity = capacity;
  }
  memcpy(b->data + b->size, data, size);
  b->size += size;
}

static void put_i64(Bytes *b, int64_t v) { put(b, &v, sizeof v); }

static void put_type(Bytes *b, const GraphNode *n) {
  put_i64(b, n->dtype);
  put_i64(b, n->shape.rank);
  put(b, n->shape.dims, sizeof(int64_t) * (size_t)n->shape.rank);
}

/* Every attribute but the name (graph_add_node zeroes unused fields). */
static void put_node(Bytes *b, const GraphNode *n) {
  const GraphAttrs *a = &n->attrs;
  put_i64(b, n->op);
  put_type(b, n);
  put_i64(b, n->num_inputs);
  put(b, &a->shape, sizeof a->shape);
  put_i64(b, a->dtype);
  put_i64(b, a->axes);
  put_i64(b, a->axis);
  put(b, a->perm, sizeof a->perm);
  put(b, a->start, sizeof a->start);
  put(b, a->stop, sizeof a->stop);
  put(b, a->step, sizeof a->step);
  put(b, a->lo, sizeof a->lo);
  put(b, a->hi, sizeof a->hi);
  put(b, a->interior, sizeof a->interior);
  put(b, &a->pad_value, sizeof a->pad_value);
  put_i64(b, a->transpose_a * 2 + a->transpose_b);
  put_i64(b, a->rows);
  put(b, &a->seed, sizeof a->seed);
  put_i64(b, a->stream);
  put_i64(b, a->num_values);
  put(b, &a->scale, sizeof a->scale);
  put_i64(b, a->causal);
  if (n->op == GRAPH_OP_CONSTANT)
    put(b, a->values, sizeof(double) * (size_t)a->num_values);
}

static int local_index(const Kernel *k, GraphId id) {
  for (int i = 0; i < k->num_nodes; i++)
    if (k->nodes[i] == id)
      return i;
  return -1;
}

static int arg_index(const KernelPlan *plan, const Kernel *k, GraphId id) {
  for (int i = 0; i < k->num_args; i++)
    if (k->args[i] == plan->buffer_of[id])
      return i;
  return -1;
}

static void put_kernel(Bytes *b, const KernelPlan *plan, const Kernel *k) {
  const Graph *g = plan->graph;
  put_i64(b, k->kind);
  put_i64(b, k->outer_axes);
  put_i64(b, k->num_args);
  put_i64(b, k->also != GRAPH_NONE);
  put_i64(b, k->also_q != GRAPH_NONE);
  /* A loop kernel's further outputs are among its nodes (an attention's
   * are not: -1). */
  put_i64(b, local_index(k, k->also));
  put_i64(b, local_index(k, k->also_q));
  put_i64(b, k->num_hoisted);
  for (int i = 0; i < k->num_hoisted; i++) {
    put_i64(b, local_index(k, k->hoisted[i].node));
    put(b, k->hoisted[i].index, sizeof k->hoisted[i].index);
  }
  for (int i = 0; i < k->num_nodes; i++) {
    const GraphNode *n = graph_node(g, k->nodes[i]);
    put_node(b, n);
    for (int s = 0; s < n->num_inputs; s++) {
      GraphId x = n->inputs[s];
      const GraphNode *xn = graph_node(g, x);
      if (plan->kernel_of[x] == plan->kernel_of[k->root]) {
        put_i64(b, 'N');
        put_i64(b, local_index(k, x));
      } else if (plan->placement[x] == KERNEL_FREE) {
        put_i64(b, 'F');
        put_node(b, xn);
      } else {
        put_i64(b, 'B');
        put_i64(b, arg_index(plan, k, x));
        put_type(b, xn);
      }
    }
  }
}

static uint64_t fnv1a(const Bytes *b) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < b->size; i++)
    h = (h ^ b->data[i]) * 1099511628211ull;
  return h;
}

bool kernel_signature_assign(KernelPlan *plan) {
  int n = plan->num_kernels;
  Bytes *sigs = calloc((size_t)(n ? n : 1), sizeof(Bytes));
  uint64_t *hashes = malloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
  plan->function_kernel = malloc(sizeof(int) * (size_t)(n ? n : 1));
  bool ok = sigs && hashes && plan->function_kernel;
  for (int i = 0; ok && i < n; i++) {
    Kernel *k = &plan->kernels[i];
    put_kernel(&sigs[i], plan, k);
    ok = !sigs[i].failed;
    hashes[i] = fnv1a(&sigs[i]);
    k->function = -1;
    for (int f = 0; ok && f < plan->num_functions && k->function < 0; f++) {
      int j = plan->function_kernel[f];
      if (hashes[j] == hashes[i] && sigs[j].size == sigs[i].size &&
          memcmp(sigs[j].data, sigs[i].data, sigs[i].size) == 0)
        k->function = f;
    }
    if (ok && k->function < 0) {
      k->function = plan->num_functions;
      plan->function_kernel[plan->num_functions++] = i;
    }
  }
  for (int i = 0; sigs && i < n; i++)
    free(sigs[i].data);
  free(sigs);
  free(hashes);
  return ok;
}
