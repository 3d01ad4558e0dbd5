/* Long reductions into few outputs in two steps, for the GPU. A split row
 * reduction gives each output a block at most (ptx_row.h), so the sum of
 * squares of GPT-2's 38.6 M-element embedding gradient (one output) ran on
 * one block while the rest of the GPU idled. Here each row of `length`
 * elements is cut into G = ceil(length / chunk) chunks (the last padded
 * with the reduction's identity), each chunk reduced on its own ([rows, G,
 * chunk] over its last axis: one block a chunk), and then the G partial
 * results of each row (a short row, one warp or block). Both steps run in
 * an order fixed by the shape alone, so every run gives the same bits; no
 * atomics. The CPU plan keeps the one reduction (its threads already
 * split a long row's outer loop). */
#include "kernel.h"

#include <math.h>

#include "rewrite.h"

/* Whether `n` reduces the trailing axes of its input (axes of length 1
 * aside), so that the input flattened is `rows` rows of `length`. */
static bool reduces_trailing_axes(const Graph *g, const GraphNode *n, int64_t *rows,
                                  int64_t *length) {
  if ((n->op != GRAPH_OP_REDUCE_SUM && n->op != GRAPH_OP_REDUCE_MAX) ||
      (n->dtype != GRAPH_F32 && n->dtype != GRAPH_F64))
    return false;
  const GraphShape *x = &graph_node(g, n->inputs[0])->shape;
  *rows = *length = 1;
  bool reduced_seen = false;
  for (int d = 0; d < x->rank; d++) {
    if ((n->attrs.axes >> d) & 1u) {
      reduced_seen = true;
      *length *= x->dims[d];
    } else if (x->dims[d] != 1) {
      if (reduced_seen)
        return false;
      *rows *= x->dims[d];
    }
  }
  return reduced_seen;
}

Graph *kernel_split_long_reductions(const Graph *in, int64_t chunk, int64_t max_rows,
                                    GraphId *map, char *err, size_t err_size) {
  PassRewrite r;
  if (!pass_rewrite_begin(&r, in, err, err_size))
    return NULL;
  for (GraphId id = 0; id < graph_count(in); id++) {
    const GraphNode *n = graph_node(in, id);
    const GraphId *inputs = pass_rewrite_inputs(&r, id);
    int64_t rows, length;
    if (!reduces_trailing_axes(in, n, &rows, &length) || rows > max_rows ||
        length < 2 * chunk) {
      r.map[id] = pass_rewrite_copy(&r, id);
      continue;
    }
    int64_t chunks = (length + chunk - 1) / chunk;
    GraphId x = graph_reshape(r.out, inputs[0], (GraphShape){.rank = 2, .dims = {rows, length}});
    if (chunks * chunk != length) {
      double identity = n->op == GRAPH_OP_REDUCE_SUM ? 0.0 : -INFINITY;
      x = graph_pad(r.out, x, (int64_t[]){0, 0}, (int64_t[]){0, chunks * chunk - length}, NULL,
                    identity);
    }
    x = graph_reshape(r.out, x, (GraphShape){.rank = 3, .dims = {rows, chunks, chunk}});
    GraphId partial = graph_reduce(r.out, n->op, x, 1u << 2);
    partial = graph_reshape(r.out, partial, (GraphShape){.rank = 2, .dims = {rows, chunks}});
    r.map[id] = graph_reshape(r.out, graph_reduce(r.out, n->op, partial, 1u << 1), n->shape);
  }
  for (GraphId id = 0; map && id < graph_count(in); id++)
    map[id] = r.map[id];
  return pass_rewrite_finish(&r, err, err_size);
}
