/* tfmc emit dot: the graph as Graphviz DOT, optionally boxed by layer
 * instance and coloured by fused kernel, written as DOT or rendered to SVG
 * by Graphviz's `dot`. */
#ifndef TFM_EMIT_DOT_H
#define TFM_EMIT_DOT_H

#include <stdbool.h>

#include "graph.h"

typedef struct EmitDotOptions {
  bool layers;     /* a box per layer instance (encoder.3.attn) */
  bool fused;      /* the graph as planned, each kernel's nodes in one colour */
  bool cuda;       /* plan as for --target cuda */
  const char *svg; /* render to this SVG file instead of writing DOT to stdout */
} EmitDotOptions;

/* 0 on success; 1 with a message on stderr. */
int emit_dot(const Graph *g, const EmitDotOptions *options);

#endif
