/* Printing a graph: the text form and Graphviz DOT. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_text.h"

typedef struct TextBuffer {
  char *data;
  size_t length, capacity;
  bool failed;
} TextBuffer;

static void append(TextBuffer *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->capacity - b->length;
    int n = vsnprintf(b->data ? b->data + b->length : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = true;
      return;
    }
    if ((size_t)n < room) {
      b->length += (size_t)n;
      return;
    }
    size_t capacity = b->capacity ? b->capacity * 2 : 1024;
    while (capacity - b->length <= (size_t)n) capacity *= 2;
    char *grown = realloc(b->data, capacity);
    if (!grown) {
      b->failed = true;
      return;
    }
    b->data = grown;
    b->capacity = capacity;
  }
}

static char *finish(TextBuffer *b) {
  if (!b->failed && !b->data) append(b, "");
  if (b->failed) {
    free(b->data);
    return NULL;
  }
  return b->data;
}

void graph_format_number(char *buf, size_t size, double value, GraphDtype dtype) {
  if (isnan(value)) {
    snprintf(buf, size, "nan");
    return;
  }
  if (isinf(value)) {
    snprintf(buf, size, value < 0 ? "-inf" : "inf");
    return;
  }
  /* i32 values are kept exactly, like f64; f32 and bf16 need only f32 digits */
  bool single = dtype == GRAPH_F32 || dtype == GRAPH_BF16;
  for (int digits = 1; digits <= (single ? 9 : 17); digits++) {
    snprintf(buf, size, "%.*g", digits, value);
    double back = strtod(buf, NULL);
    if (single ? (float)back == (float)value : back == value) return;
  }
}

static void append_quoted(TextBuffer *b, const char *s, bool dot_label) {
  append(b, dot_label ? "\\\"" : "\"");
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') append(b, "\\%c", *s);
    else append(b, "%c", *s);
  }
  append(b, dot_label ? "\\\"" : "\"");
}

static void append_list(TextBuffer *b, const char *key, const int64_t *xs, int n) {
  append(b, " %s=[", key);
  for (int i = 0; i < n; i++) append(b, i ? ",%lld" : "%lld", (long long)xs[i]);
  append(b, "]");
}

/* Attributes after the operands, in the order the parser documents. */
static void append_attrs(TextBuffer *b, const GraphNode *n, const GraphNode *first_input) {
  const GraphAttrs *a = &n->attrs;
  int in_rank = first_input ? first_input->shape.rank : 0;
  int64_t list[GRAPH_MAX_RANK];
  char number[64];
  switch (n->op) {
  case GRAPH_OP_REDUCE_SUM:
  case GRAPH_OP_REDUCE_MAX: {
    int count = 0;
    for (int i = 0; i < n->shape.rank; i++)
      if (a->axes & (1u << i)) list[count++] = i;
    append_list(b, "axes", list, count);
    break;
  }
  case GRAPH_OP_PERMUTE:
    for (int i = 0; i < n->shape.rank; i++) list[i] = a->perm[i];
    append_list(b, "perm", list, n->shape.rank);
    break;
  case GRAPH_OP_SLICE:
    append_list(b, "start", a->start, in_rank);
    append_list(b, "stop", a->stop, in_rank);
    append_list(b, "step", a->step, in_rank);
    break;
  case GRAPH_OP_CONCAT:
  case GRAPH_OP_IOTA: append(b, " axis=%d", a->axis); break;
  case GRAPH_OP_PAD:
    append_list(b, "lo", a->lo, in_rank);
    append_list(b, "hi", a->hi, in_rank);
    append_list(b, "interior", a->interior, in_rank);
    graph_format_number(number, sizeof number, a->pad_value, n->dtype);
    append(b, " value=%s", number);
    break;
  case GRAPH_OP_DOT:
    append(b, " transpose_a=%s transpose_b=%s", a->transpose_a ? "true" : "false",
           a->transpose_b ? "true" : "false");
    break;
  case GRAPH_OP_ATTENTION:
  case GRAPH_OP_ATTENTION_LSE:
  case GRAPH_OP_ATTENTION_GRAD_Q:
  case GRAPH_OP_ATTENTION_GRAD_K:
  case GRAPH_OP_ATTENTION_GRAD_V:
    graph_format_number(number, sizeof number, a->scale, GRAPH_F64);
    append(b, " scale=%s causal=%s", number, a->causal ? "true" : "false");
    break;
  case GRAPH_OP_RANDOM:
    append(b, " seed=%llu stream=%lu", (unsigned long long)a->seed, (unsigned long)a->stream);
    break;
  default: break;
  }
}

/* "op operands attributes", shared by both forms. */
static void append_body(TextBuffer *b, const Graph *g, const GraphNode *n, bool dot_label) {
  append(b, "%s", graph_op_name(n->op));
  if (n->attrs.name) {
    append(b, " ");
    append_quoted(b, n->attrs.name, dot_label);
  }
  for (int i = 0; i < n->num_inputs; i++) append(b, i ? ", %%%d" : " %%%d", (int)n->inputs[i]);
  if (n->op == GRAPH_OP_CONSTANT) {
    char number[64];
    bool splat = n->attrs.num_values == 1;
    append(b, splat ? " " : " [");
    for (int64_t i = 0; i < n->attrs.num_values; i++) {
      graph_format_number(number, sizeof number, n->attrs.values[i], n->dtype);
      append(b, i ? ", %s" : "%s", number);
    }
    if (!splat) append(b, "]");
  }
  append_attrs(b, n, n->num_inputs ? graph_node(g, n->inputs[0]) : NULL);
}

char *graph_to_text(const Graph *g) {
  TextBuffer b = {0};
  char type[160];
  for (GraphId id = 0; id < graph_count(g); id++) {
    const GraphNode *n = graph_node(g, id);
    append(&b, "%%%d = ", (int)id);
    append_body(&b, g, n, false);
    graph_format_type(type, sizeof type, n->dtype, &n->shape);
    append(&b, " : %s\n", type);
  }
  for (int i = 0; i < graph_num_outputs(g); i++) {
    GraphOutput o = graph_output_at(g, i);
    append(&b, "output ");
    append_quoted(&b, o.name, false);
    append(&b, " = %%%d\n", (int)o.node);
  }
  for (int i = 0; i < graph_num_updates(g); i++) {
    GraphUpdate u = graph_update_at(g, i);
    append(&b, "update %%%d = %%%d\n", (int)u.target, (int)u.value);
  }
  return finish(&b);
}

/* The layer boxes: every dotted prefix of every node's scope, sorted, so
 * that a box's parent (its path up to the last '.') is among them. */
typedef struct Boxes {
  int count;
  char **path;
  int *parent;  /* per box: the box around it, or -1 */
  int *box_of;  /* per node: its box, or -1 */
} Boxes;

static int compare_paths(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int find_box(const Boxes *x, const char *path) {
  char *const *hit = bsearch(&path, x->path, (size_t)x->count, sizeof *x->path, compare_paths);
  return hit ? (int)(hit - x->path) : -1;
}

/* The first `length` bytes of s as a string of its own. */
static char *copy_prefix(const char *s, size_t length) {
  char *copy = malloc(length + 1);
  if (copy) {
    memcpy(copy, s, length);
    copy[length] = 0;
  }
  return copy;
}

static void free_boxes(Boxes *x) {
  for (int i = 0; i < x->count; i++) free(x->path[i]);
  free(x->path);
  free(x->parent);
  free(x->box_of);
}

static bool make_boxes(const Graph *g, Boxes *x) {
  int n = graph_count(g), capacity = 0;
  *x = (Boxes){0};
  x->box_of = malloc((n ? (size_t)n : 1) * sizeof(int));
  if (!x->box_of) return false;
  const char *seen = NULL;
  for (GraphId id = 0; id < n; id++) {
    const char *scope = graph_node(g, id)->scope;
    if (!scope || (seen && !strcmp(scope, seen))) continue;
    seen = scope;
    for (const char *dot = scope;; dot++) {
      if (*dot && *dot != '.') continue;
      if (x->count == capacity) {
        capacity = capacity ? 2 * capacity : 16;
        char **grown = realloc(x->path, (size_t)capacity * sizeof *grown);
        if (!grown) return false;
        x->path = grown;
      }
      char *path = copy_prefix(scope, (size_t)(dot - scope));
      if (!path) return false;
      x->path[x->count++] = path;
      if (!*dot) break;
    }
  }
  if (x->count) qsort(x->path, (size_t)x->count, sizeof *x->path, compare_paths);
  int unique = 0;
  for (int i = 0; i < x->count; i++) {
    if (unique && !strcmp(x->path[unique - 1], x->path[i])) free(x->path[i]);
    else x->path[unique++] = x->path[i];
  }
  x->count = unique;
  x->parent = malloc((unique ? (size_t)unique : 1) * sizeof(int));
  if (!x->parent) return false;
  for (int i = 0; i < unique; i++) {
    const char *last = strrchr(x->path[i], '.');
    x->parent[i] = -1;
    if (!last) continue;
    char *outer = copy_prefix(x->path[i], (size_t)(last - x->path[i]));
    if (!outer) return false;
    x->parent[i] = find_box(x, outer);
    free(outer);
  }
  for (GraphId id = 0; id < n; id++) {
    const char *scope = graph_node(g, id)->scope;
    x->box_of[id] = scope ? find_box(x, scope) : -1;
  }
  return true;
}

/* Light fills that black text reads on, one per group in turn. */
static const char *const group_colours[] = {
    "#fde2a8", "#b9e3c6", "#c7d7f5", "#f6c3c0", "#e2cdf2", "#fff3a3",
    "#c4ece9", "#f9d0e6", "#d9e8b0", "#f7d4b5", "#d0d5e0", "#e6f0c4"};

static void append_dot_node(TextBuffer *b, const Graph *g, GraphId id, const GraphDotStyle *style,
                            int indent) {
  const GraphNode *n = graph_node(g, id);
  char type[160];
  append(b, "%*sn%d [label=\"%%%d = ", indent, "", (int)id, (int)id);
  append_body(b, g, n, true);
  graph_format_type(type, sizeof type, n->dtype, &n->shape);
  append(b, "\\n%s", type);
  int group = style && style->group ? style->group[id] : -1;
  if (group >= 0) append(b, "\\n%s %d", style->group_name ? style->group_name : "group", group);
  append(b, "\"");
  if (group >= 0) {
    int colours = (int)(sizeof group_colours / sizeof group_colours[0]);
    append(b, ", style=filled, fillcolor=\"%s\"", group_colours[group % colours]);
    if (style->group_root && style->group_root[id]) append(b, ", penwidth=2.5");
  } else if (graph_op_kind(n->op) == GRAPH_KIND_SOURCE && n->attrs.name) {
    append(b, ", style=filled, fillcolor=%s", n->op == GRAPH_OP_PARAM ? "lightblue" : "gray90");
  }
  append(b, "];\n");
}

/* Box `box` with its nodes and the boxes inside it. */
static void append_box(TextBuffer *b, const Graph *g, const Boxes *x, int box,
                       const GraphDotStyle *style, int depth) {
  int indent = 2 * depth;
  append(b, "%*ssubgraph cluster_%d {\n%*slabel=", indent, "", box, indent + 2, "");
  append_quoted(b, x->path[box], false);
  append(b, ";\n%*sstyle=rounded; fontname=\"monospace\";\n", indent + 2, "");
  for (GraphId id = 0; id < graph_count(g); id++)
    if (x->box_of[id] == box) append_dot_node(b, g, id, style, indent + 2);
  for (int inner = 0; inner < x->count; inner++)
    if (x->parent[inner] == box) append_box(b, g, x, inner, style, depth + 1);
  append(b, "%*s}\n", indent, "");
}

char *graph_to_dot(const Graph *g, const GraphDotStyle *style) {
  TextBuffer b = {0};
  Boxes x = {0};
  if (style && style->layers && !make_boxes(g, &x)) {
    free_boxes(&x);
    return NULL;
  }
  append(&b, "digraph tfm {\n  node [shape=box, fontname=\"monospace\"];\n");
  for (GraphId id = 0; id < graph_count(g); id++)
    if (!x.box_of || x.box_of[id] < 0) append_dot_node(&b, g, id, style, 2);
  for (int box = 0; box < x.count; box++)
    if (x.parent[box] < 0) append_box(&b, g, &x, box, style, 1);
  for (GraphId id = 0; id < graph_count(g); id++) {
    const GraphNode *n = graph_node(g, id);
    for (int i = 0; i < n->num_inputs; i++)
      append(&b, "  n%d -> n%d;\n", (int)n->inputs[i], (int)id);
  }
  for (int i = 0; i < graph_num_outputs(g); i++) {
    GraphOutput o = graph_output_at(g, i);
    append(&b, "  out%d [label=\"output ", i);
    append_quoted(&b, o.name, true);
    append(&b, "\", shape=ellipse];\n  n%d -> out%d;\n", (int)o.node, i);
  }
  for (int i = 0; i < graph_num_updates(g); i++) {
    GraphUpdate u = graph_update_at(g, i);
    append(&b, "  n%d -> n%d [style=dashed, label=\"update\"];\n", (int)u.value, (int)u.target);
  }
  append(&b, "}\n");
  free_boxes(&x);
  return finish(&b);
}

static bool print_with(FILE *out, char *text) {
  if (!text) return false;
  bool ok = fputs(text, out) >= 0;
  free(text);
  return ok;
}

bool graph_print(FILE *out, const Graph *g) { return print_with(out, graph_to_text(g)); }

bool graph_print_dot(FILE *out, const Graph *g, const GraphDotStyle *style) {
  return print_with(out, graph_to_dot(g, style));
}
