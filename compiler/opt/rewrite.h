/* The copy loop every pass shares: nodes of `in` are visited in id order
 * and each is mapped to a node of `out`. */
#ifndef TFM_REWRITE_H
#define TFM_REWRITE_H

#include "graph.h"

typedef struct PassRewrite {
  const Graph *in;
  Graph *out;
  GraphId *map;    /* in id -> out id */
  GraphId *inputs; /* mapped inputs of the node being visited */
} PassRewrite;

bool pass_rewrite_begin(PassRewrite *r, const Graph *in, char *err, size_t err_size);
/* Fills r->inputs with the mapped inputs of `id` and returns them; makes
 * id's scope the current one of r->out, so that what the pass builds in
 * its place stays in its layer (graph_set_scope). */
const GraphId *pass_rewrite_inputs(PassRewrite *r, GraphId id);
/* Copies node `id` with its mapped inputs. */
GraphId pass_rewrite_copy(PassRewrite *r, GraphId id);
/* Copies outputs and updates, frees the scratch; returns out or NULL. */
Graph *pass_rewrite_finish(PassRewrite *r, char *err, size_t err_size);

#endif
