/* Dead code elimination: keeps what an output or update depends on. */
#include <stdlib.h>

#include "pass.h"
#include "rewrite.h"

static bool is_interface_leaf(GraphOp op) {
  return op == GRAPH_OP_INPUT || op == GRAPH_OP_PARAM || op == GRAPH_OP_STATE;
}

static Graph *dce(const Graph *in, bool keep_params, char *err, size_t err_size) {
  int n = graph_count(in);
  bool *live = calloc(n > 0 ? (size_t)n : 1, sizeof(bool));
  PassRewrite r;
  if (!live || !pass_rewrite_begin(&r, in, err, err_size)) {
    free(live);
    return NULL;
  }
  for (int i = 0; i < graph_num_outputs(in); i++) live[graph_output_at(in, i).node] = true;
  for (int i = 0; i < graph_num_updates(in); i++) live[graph_update_at(in, i).value] = true;
  /* Inputs precede users, so one backward sweep marks everything reachable. */
  for (GraphId id = n - 1; id >= 0; id--) {
    const GraphNode *node = graph_node(in, id);
    if (is_interface_leaf(node->op) && (keep_params || node->op == GRAPH_OP_INPUT)) live[id] = true;
    if (!live[id]) continue;
    for (int i = 0; i < node->num_inputs; i++) live[node->inputs[i]] = true;
  }
  for (GraphId id = 0; id < n; id++)
    if (live[id]) r.map[id] = pass_rewrite_copy(&r, id);
  free(live);
  return pass_rewrite_finish(&r, err, err_size);
}

Graph *pass_dce(const Graph *in, char *err, size_t err_size) { return dce(in, true, err, err_size); }

Graph *pass_dce_unused_params(const Graph *in, char *err, size_t err_size) {
  return dce(in, false, err, err_size);
}
