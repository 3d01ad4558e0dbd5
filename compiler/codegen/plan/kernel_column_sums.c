/* Column sums in two steps, for the CPU. A sum over leading axes (a bias's
 * gradient: [B, T, N] summed into [1, 1, N]; a layernorm's gain's) is a
 * column reduction: each thread takes a stretch of the N columns and reads
 * it from every row, a short run and a jump per row (0.14 ms for 4 MiB of
 * [2048, 256] rows in gpt-small, 30 GB/s, where a pass over whole rows
 * moves 100). Here the R rows are split into G groups of consecutive rows,
 * each summed ([G, R / G, N] over its rows: one kernel whose threads take
 * whole groups, so each reads whole rows, the ones it wrote in the kernel
 * before), and then the G group sums (a column reduction of G short rows).
 * Each output element is summed in a fixed order, the same for any number
 * of threads. The GPU plan keeps the one reduction. */
#include "kernel.h"

#include <stdlib.h>

#include "rewrite.h"

/* The group sums, G * N elements, stay in the L1 cache of the threads that
 * sum them (64 KiB in all), and a group has at least MIN_GROUP_ROWS rows. */
#define PARTIAL_ELEMENTS 16384
#define MIN_GROUP_ROWS 8

/* The number of groups for a sum of `rows` rows of `columns` elements, or
 * 1 when splitting it does not pay. */
static int64_t groups_for(int64_t rows, int64_t columns) {
  int64_t groups = 1;
  while (2 * groups * columns <= PARTIAL_ELEMENTS && rows % (2 * groups) == 0 &&
         rows / (2 * groups) >= MIN_GROUP_ROWS)
    groups *= 2;
  return groups;
}

/* Whether `n` sums over leading axes only: every axis of its input longer
 * than 1 that it keeps comes after every axis it sums. Then its input,
 * flattened, is its rows (the summed axes) of its columns (the kept ones). */
static bool sums_leading_axes(const Graph *g, const GraphNode *n, int64_t *rows,
                              int64_t *columns) {
  if (n->op != GRAPH_OP_REDUCE_SUM || (n->dtype != GRAPH_F32 && n->dtype != GRAPH_F64))
    return false;
  const GraphShape *x = &graph_node(g, n->inputs[0])->shape;
  uint32_t axes = n->attrs.axes;
  *rows = *columns = 1;
  bool kept_seen = false;
  for (int d = 0; d < x->rank; d++) {
    if ((axes >> d) & 1u) {
      if (kept_seen)
        return false;
      *rows *= x->dims[d];
    } else {
      kept_seen |= x->dims[d] != 1;
      *columns *= x->dims[d];
    }
  }
  return axes != 0 && kept_seen;
}

Graph *kernel_split_column_sums(const Graph *in, GraphId *map, char *err, size_t err_size) {
  PassRewrite r;
  if (!pass_rewrite_begin(&r, in, err, err_size))
    return NULL;
  for (GraphId id = 0; id < graph_count(in); id++) {
    const GraphNode *n = graph_node(in, id);
    const GraphId *inputs = pass_rewrite_inputs(&r, id);
    int64_t rows, columns, groups;
    if (!sums_leading_axes(in, n, &rows, &columns) ||
        (groups = groups_for(rows, columns)) == 1) {
      r.map[id] = pass_rewrite_copy(&r, id);
      continue;
    }
    /* [groups, rows / groups, columns] summed over its rows, then the
     * groups' sums, as [groups, ...] over the rest of the output's shape
     * (whose first axis is 1: summed, or kept but of length 1), summed
     * into the output. */
    GraphShape grouped = {.rank = 3, .dims = {groups, rows / groups, columns}};
    GraphShape by_group = n->shape;
    by_group.dims[0] = groups;
    GraphId group_sums = graph_reduce(r.out, GRAPH_OP_REDUCE_SUM,
                                      graph_reshape(r.out, inputs[0], grouped), 1u << 1);
    r.map[id] = graph_reduce(r.out, GRAPH_OP_REDUCE_SUM,
                             graph_reshape(r.out, group_sums, by_group), 1u << 0);
  }
  for (GraphId id = 0; map && id < graph_count(in); id++)
    map[id] = r.map[id];
  return pass_rewrite_finish(&r, err, err_size);
}
