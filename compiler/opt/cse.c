/* Common subexpression elimination by structural hashing: a node equal to
 * an earlier one in op, attributes and (already merged) inputs is replaced
 * by it. Leaves are never merged (their names differ), and neither are
 * random nodes: autodiff copies them on purpose so that a dropout mask is
 * regenerated in the backward pass instead of being kept alive. */
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "rewrite.h"

static uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0x100000001B3ull;
}

static uint64_t mix_bytes(uint64_t h, const void *data, size_t size) {
  const unsigned char *p = data;
  for (size_t i = 0; i < size; i++) h = mix(h, p[i]);
  return h;
}

/* Hashes what graph_attrs_equal compares (a subset is enough for a hash). */
static uint64_t hash_node(GraphOp op, const GraphAttrs *a, const GraphId *inputs, int count) {
  uint64_t h = mix(0xCBF29CE484222325ull, (uint64_t)op);
  for (int i = 0; i < count; i++) h = mix(h, (uint64_t)(uint32_t)inputs[i]);
  h = mix(h, (uint64_t)a->shape.rank);
  for (int i = 0; i < a->shape.rank; i++) h = mix(h, (uint64_t)a->shape.dims[i]);
  h = mix(h, (uint64_t)a->dtype);
  h = mix(h, a->axes);
  h = mix(h, (uint64_t)a->axis);
  h = mix_bytes(h, a->perm, sizeof a->perm);
  h = mix_bytes(h, a->start, sizeof a->start);
  h = mix_bytes(h, a->lo, sizeof a->lo);
  if (op == GRAPH_OP_CONSTANT) {
    int64_t n = a->num_values < 16 ? a->num_values : 16;
    h = mix(h, (uint64_t)a->num_values);
    h = mix_bytes(h, a->values, (size_t)n * sizeof(double));
  }
  return h;
}

static bool is_mergeable(GraphOp op) {
  return op != GRAPH_OP_INPUT && op != GRAPH_OP_PARAM && op != GRAPH_OP_STATE &&
         op != GRAPH_OP_RANDOM;
}

static bool same_node(const Graph *out, GraphId candidate, GraphOp op, const GraphAttrs *attrs,
                      const GraphId *inputs, int count) {
  const GraphNode *c = graph_node(out, candidate);
  if (c->op != op || c->num_inputs != count) return false;
  if (count > 0 && memcmp(c->inputs, inputs, (size_t)count * sizeof(GraphId)) != 0) return false;
  return graph_attrs_equal(op, &c->attrs, attrs);
}

/* group NULL: every mergeable node in one group. */
Graph *pass_cse_within(const Graph *in, const int *group, GraphId *map, char *err,
                       size_t err_size) {
  int n = graph_count(in);
  size_t capacity = 16;
  while (capacity < 2 * (size_t)n) capacity *= 2;
  GraphId *table = malloc(capacity * sizeof(GraphId)); /* out ids, open addressing */
  int *out_group = malloc(sizeof(int) * (size_t)(n + 1)); /* per out id */
  PassRewrite r;
  if (!table || !out_group || !pass_rewrite_begin(&r, in, err, err_size)) {
    free(table);
    free(out_group);
    return NULL;
  }
  for (size_t i = 0; i < capacity; i++) table[i] = GRAPH_NONE;
  for (GraphId id = 0; id < n; id++) {
    const GraphNode *node = graph_node(in, id);
    const GraphId *inputs = pass_rewrite_inputs(&r, id);
    int g = group ? group[id] : 0;
    if (!is_mergeable(node->op) || g == PASS_CSE_NO_GROUP) {
      r.map[id] = pass_rewrite_copy(&r, id);
      out_group[r.map[id]] = PASS_CSE_NO_GROUP;
      continue;
    }
    uint64_t h = mix(hash_node(node->op, &node->attrs, inputs, node->num_inputs), (uint64_t)g);
    size_t slot = h & (capacity - 1);
    while (table[slot] != GRAPH_NONE &&
           (out_group[table[slot]] != g ||
            !same_node(r.out, table[slot], node->op, &node->attrs, inputs, node->num_inputs)))
      slot = (slot + 1) & (capacity - 1);
    if (table[slot] == GRAPH_NONE) {
      table[slot] = pass_rewrite_copy(&r, id);
      out_group[table[slot]] = g;
    }
    r.map[id] = table[slot];
  }
  for (GraphId id = 0; map && id < n; id++) map[id] = r.map[id];
  free(table);
  free(out_group);
  return pass_rewrite_finish(&r, err, err_size);
}

Graph *pass_cse(const Graph *in, char *err, size_t err_size) {
  return pass_cse_within(in, NULL, NULL, err, err_size);
}
