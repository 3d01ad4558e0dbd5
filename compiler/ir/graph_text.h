/* The text form of a graph (what `tfmc emit graph` prints and what pass
 * golden tests are written in) and a Graphviz rendering. One line per node:
 *
 *   %0 = input "x" : f32[2,3]
 *   %1 = param "encoder.0.w" : f32[3,4]
 *   %2 = dot %0, %1 transpose_a=false transpose_b=false : f32[2,4]
 *   %3 = reduce_sum %2 axes=[0,1] : f32[1,1]
 *   %4 = constant [1, 2, 3] : f32[3]
 *   output "loss" = %3
 *   update %1 = %9
 *
 * `#` starts a comment. The parser accepts node ids in any increasing or
 * sparse order and checks each declared type against the shape rule.
 */
#ifndef TFM_GRAPH_TEXT_H
#define TFM_GRAPH_TEXT_H

#include <stdio.h>

#include "graph.h"

/* How the DOT rendering groups nodes; all off draws the plain graph. */
typedef struct GraphDotStyle {
  /* A box per layer instance, named by its path and nested as the paths
   * are ("encoder.3.attn" inside "encoder.3" inside "encoder"), holding
   * the nodes of that scope (graph_set_scope). */
  bool layers;
  /* Per node: the group it is computed in (a fused kernel), or -1; the
   * nodes of a group share a fill colour and the label names the group
   * ("kernel 12"), the node it stores (group_root) drawn with a thick
   * border. NULL: no groups. */
  const int *group;
  const bool *group_root;
  const char *group_name; /* "kernel" */
} GraphDotStyle;

/* Returns a malloc'd string, or NULL when out of memory. */
char *graph_to_text(const Graph *g);
char *graph_to_dot(const Graph *g, const GraphDotStyle *style); /* style may be NULL */
bool graph_print(FILE *out, const Graph *g);
bool graph_print_dot(FILE *out, const Graph *g, const GraphDotStyle *style);

/* Returns the graph, or NULL with "line N: message" in err. */
Graph *graph_parse(const char *text, char *err, size_t err_size);

/* Shortest decimal text that reads back as the same value of that dtype. */
void graph_format_number(char *buf, size_t size, double value, GraphDtype dtype);

#endif
