/* Sibling contractions as one: dots x W1, x W2, ... of the same x by
 * weight matrices become x concat(W1, W2, ..., axis 1), each old dot a
 * slice of the product's columns. The Q, K and V projections of a
 * self-attention layer (K and V of a cross-attention) are then one GEMM
 * three (two) times as wide, which keeps a GEMM's threads and tiles busier
 * than three narrow ones; and because this runs before autodiff, the
 * backward pass follows: x's gradient is one dot with the concatenated
 * weights instead of three summed, the weights' gradient one dot whose
 * column slices feed the updates, and the slices' gradients (a sum of
 * zero pads, which simplify.c turns back into a concat) one tensor. */
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "pass.h"
#include "rewrite.h"

/* Whether dot `id` multiplies its left operand by a matrix, untransposed. */
static bool is_x_times_matrix(const Graph *g, GraphId id) {
  const GraphNode *n = graph_node(g, id);
  return n->op == GRAPH_OP_DOT && !n->attrs.transpose_a && !n->attrs.transpose_b &&
         graph_node(g, n->inputs[1])->shape.rank == 2;
}

/* Whether dot `id` can join the group led by dot `first`: the same left
 * operand (a dot's operands share a dtype, so the weights do too) and a
 * weight that exists before `first` (the merged dot is made where `first`
 * was, so every weight must be there already). */
static bool joins(const Graph *g, GraphId first, GraphId id) {
  const GraphNode *a = graph_node(g, first), *b = graph_node(g, id);
  return b->inputs[0] == a->inputs[0] && b->inputs[1] < first;
}

/* Marks the nodes reachable backwards from an output or update in live[]
 * and sets user[id] to the one live node that reads id, or to GRAPH_NONE
 * where none or several do (or an output or update names it). */
static void find_users(const Graph *g, bool *live, GraphId *user) {
  int count = graph_count(g);
  for (GraphId id = 0; id < count; id++) user[id] = GRAPH_NONE;
  for (int i = 0; i < graph_num_outputs(g); i++) live[graph_output_at(g, i).node] = true;
  for (int i = 0; i < graph_num_updates(g); i++) live[graph_update_at(g, i).value] = true;
  for (GraphId id = count - 1; id >= 0; id--)
    for (int i = 0; live[id] && i < graph_node(g, id)->num_inputs; i++) {
      GraphId x = graph_node(g, id)->inputs[i];
      /* the first reader seen (the last in id order) stays only if alone */
      user[x] = live[x] ? GRAPH_NONE : id;
      live[x] = true;
    }
}

/* The bias of member `m`: when its one reader adds a broadcast vector b
 * that exists before `first` (x W + b), that reader in *add and b's id. */
static GraphId bias_of(const Graph *g, const GraphId *user, GraphId first, GraphId m,
                       GraphId *add) {
  *add = user[m];
  if (*add == GRAPH_NONE || graph_node(g, *add)->op != GRAPH_OP_ADD) return GRAPH_NONE;
  const GraphNode *a = graph_node(g, *add);
  const GraphNode *other = graph_node(g, a->inputs[a->inputs[0] == m ? 1 : 0]);
  if (other->op != GRAPH_OP_BROADCAST || other->inputs[0] >= first) return GRAPH_NONE;
  const GraphNode *b = graph_node(g, other->inputs[0]);
  GraphShape out = graph_node(g, m)->shape;
  return b->shape.rank == 1 && b->shape.dims[0] == out.dims[out.rank - 1] ? other->inputs[0]
                                                                          : GRAPH_NONE;
}

/* Maps each member of the group (or with `adds`, each member's bias add) to
 * its column slice of `product`. */
static void map_slices(PassRewrite *r, GraphId first, const GraphId *next, const GraphId *adds,
                       GraphId product) {
  const GraphNode *p = graph_node(r->out, product);
  int rank = p->shape.rank, i = 0;
  int64_t start[GRAPH_MAX_RANK] = {0}, stop[GRAPH_MAX_RANK];
  memcpy(stop, p->shape.dims, sizeof stop);
  stop[rank - 1] = 0;
  for (GraphId m = first; m != GRAPH_NONE; m = next[m], i++) {
    start[rank - 1] = stop[rank - 1];
    stop[rank - 1] += graph_node(r->in, m)->shape.dims[rank - 1];
    r->map[adds ? adds[i] : m] = graph_slice(r->out, product, start, stop, NULL);
  }
}

/* Makes the merged dot of the group that dot `first` leads (next[] links its
 * members in id order) and maps every member to its slice of the product.
 * When every member's one reader adds a bias, the biases are concatenated
 * and added to the product too, and the readers map to its slices: the
 * biases' gradient is then one column sum of the product's gradient. */
static void merge_group(PassRewrite *r, GraphId first, const GraphId *next, const GraphId *user) {
  const Graph *in = r->in;
  int members = 0;
  for (GraphId m = first; m != GRAPH_NONE; m = next[m]) members++;
  GraphId *weights = malloc(sizeof(GraphId) * (size_t)members * 3);
  if (!weights) {
    graph_fail(r->out, "merging dots: out of memory");
    return;
  }
  GraphId *biases = weights + members, *adds = biases + members;
  int i = 0, with_bias = 0;
  for (GraphId m = first; m != GRAPH_NONE; m = next[m], i++) {
    weights[i] = r->map[graph_node(in, m)->inputs[1]];
    biases[i] = bias_of(in, user, first, m, &adds[i]);
    if (biases[i] != GRAPH_NONE) {
      biases[i] = r->map[biases[i]];
      with_bias++;
    }
  }
  GraphId x = r->map[graph_node(in, first)->inputs[0]];
  GraphId product = graph_dot(r->out, x, graph_concat(r->out, weights, members, 1), false, false);
  if (product == GRAPH_NONE) { /* the error is in r->out */
    free(weights);
    return;
  }
  map_slices(r, first, next, NULL, product);
  if (with_bias == members) {
    GraphShape shape = graph_node(r->out, product)->shape;
    GraphId bias = graph_broadcast(r->out, graph_concat(r->out, biases, members, 0), shape);
    map_slices(r, first, next, adds, graph_binary(r->out, GRAPH_OP_ADD, product, bias));
  }
  free(weights);
}

Graph *pass_merge_dots(const Graph *in, GraphId *map, char *err, size_t err_size) {
  int count = graph_count(in);
  size_t n = (size_t)(count ? count : 1);
  bool *live = calloc(n, sizeof(bool));
  GraphId *ids = malloc(sizeof(GraphId) * n * 5);
  PassRewrite r;
  if (!live || !ids) errbuf_set(err, err_size, "out of memory");
  if (!live || !ids || !pass_rewrite_begin(&r, in, err, err_size)) {
    free(live);
    free(ids);
    return NULL;
  }
  GraphId *user = ids;          /* per node: its one reader (find_users) */
  GraphId *leader = ids + n;    /* per left operand: its group's first dot */
  GraphId *last = ids + 2 * n;  /* per leader: the group's last member */
  GraphId *next = ids + 3 * n;  /* per member: the next one */
  GraphId *same = ids + 4 * n;  /* per dot: the member it repeats (same x and weight) */
  find_users(in, live, user);
  for (GraphId id = 0; id < count; id++) leader[id] = last[id] = next[id] = same[id] = GRAPH_NONE;
  for (GraphId id = 0; id < count; id++) {
    if (!live[id] || !is_x_times_matrix(in, id)) continue;
    GraphId x = graph_node(in, id)->inputs[0], first = leader[x];
    if (first == GRAPH_NONE) {
      leader[x] = last[id] = id;
      continue;
    }
    /* A repeat (an unrolled loop reads one x W at every step; CSE merges
     * them later) reads its member's slice, not a second copy of W. */
    for (GraphId m = first; m != GRAPH_NONE && same[id] == GRAPH_NONE; m = next[m])
      if (graph_node(in, m)->inputs[1] == graph_node(in, id)->inputs[1]) same[id] = m;
    if (same[id] == GRAPH_NONE && joins(in, first, id)) {
      next[last[first]] = id;
      last[first] = id;
    }
  }
  for (GraphId id = 0; id < count && !graph_error(r.out); id++) {
    const GraphNode *node = graph_node(in, id);
    graph_set_scope_from(r.out, in, id);
    GraphId first = node->op == GRAPH_OP_DOT ? leader[node->inputs[0]] : GRAPH_NONE;
    bool merged = first != GRAPH_NONE && next[first] != GRAPH_NONE;
    if (merged && first == id)
      merge_group(&r, id, next, user);
    else if (merged && same[id] != GRAPH_NONE)
      r.map[id] = r.map[same[id]];
    else if (r.map[id] == GRAPH_NONE) /* a later member is mapped already */
      r.map[id] = pass_rewrite_copy(&r, id);
  }
  if (map) memcpy(map, r.map, sizeof(GraphId) * n);
  free(live);
  free(ids);
  return pass_rewrite_finish(&r, err, err_size);
}
