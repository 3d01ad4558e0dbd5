/* The shared copy loop of the passes. */
#include "rewrite.h"

#include <stdio.h>
#include <stdlib.h>

bool pass_rewrite_begin(PassRewrite *r, const Graph *in, char *err, size_t err_size) {
  int n = graph_count(in), max_inputs = 1;
  for (GraphId id = 0; id < n; id++)
    if (graph_node(in, id)->num_inputs > max_inputs) max_inputs = graph_node(in, id)->num_inputs;
  r->in = in;
  r->out = graph_new();
  r->map = malloc((n > 0 ? (size_t)n : 1) * sizeof(GraphId));
  r->inputs = malloc((size_t)max_inputs * sizeof(GraphId));
  if (r->out && r->map && r->inputs) {
    for (GraphId id = 0; id < n; id++) r->map[id] = GRAPH_NONE;
    return true;
  }
  graph_free(r->out);
  free(r->map);
  free(r->inputs);
  if (err_size) snprintf(err, err_size, "out of memory");
  return false;
}

const GraphId *pass_rewrite_inputs(PassRewrite *r, GraphId id) {
  graph_set_scope_from(r->out, r->in, id);
  const GraphNode *n = graph_node(r->in, id);
  for (int i = 0; i < n->num_inputs; i++) r->inputs[i] = r->map[n->inputs[i]];
  return r->inputs;
}

GraphId pass_rewrite_copy(PassRewrite *r, GraphId id) {
  return graph_copy_node(r->out, r->in, id, pass_rewrite_inputs(r, id));
}

Graph *pass_rewrite_finish(PassRewrite *r, char *err, size_t err_size) {
  if (!graph_error(r->out)) graph_copy_interface(r->out, r->in, r->map);
  free(r->map);
  free(r->inputs);
  if (graph_error(r->out)) {
    if (err_size) snprintf(err, err_size, "%s", graph_error(r->out));
    graph_free(r->out);
    return NULL;
  }
  return r->out;
}
