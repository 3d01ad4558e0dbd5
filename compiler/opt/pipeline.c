/* The standard order of graph passes: fold constants, simplify, merge
 * common subexpressions, drop dead nodes; then (bf16 graphs only) compute
 * chains of elementwise ops in f32 with one rounding. */
#include <stddef.h>

#include "pass.h"

Graph *pass_standard(const Graph *in, char *err, size_t err_size) {
  Graph *(*const passes[])(const Graph *, char *, size_t) = {pass_fold, pass_simplify, pass_cse,
                                                             pass_dce, pass_bf16_chains};
  Graph *g = NULL;
  for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
    Graph *next = passes[i](g ? g : in, err, err_size);
    graph_free(g);
    if (!next) return NULL;
    g = next;
  }
  return g;
}
