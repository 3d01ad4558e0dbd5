/* Graph storage, builders and the interface lists. */
#include "graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_rules.h"

/* Inputs, names and constant values live in fixed blocks that never move,
 * so pointers into them stay valid while the node array grows. */
typedef struct ArenaBlock {
  struct ArenaBlock *next;
  size_t used, size;
  max_align_t data[];
} ArenaBlock;

typedef struct IdList {
  GraphId *items;
  int count, capacity;
} IdList;

struct Graph {
  GraphNode *nodes;
  int count, capacity;
  ArenaBlock *blocks;
  IdList inputs, params, states;
  GraphOutput *outputs;
  int num_outputs, outputs_capacity;
  GraphUpdate *updates;
  int num_updates, updates_capacity;
  uint32_t next_stream;
  const char *scope, *last_scope; /* current; the one before (both arena copies) */
  bool failed;
  char error[GRAPH_ERROR_SIZE];
};

static const GraphShapeRule shape_rules[GRAPH_OP_COUNT] = {
#define OP(id, name, arity, kind, shape_rule, vjp, reference) shape_rule,
#include "ops.def"
#undef OP
};

static void set_error_v(Graph *g, const char *fmt, va_list ap) {
  if (g->failed) return;
  g->failed = true;
  vsnprintf(g->error, sizeof g->error, fmt, ap);
}

static void set_error(Graph *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error_v(g, fmt, ap);
  va_end(ap);
}

bool graph_fail(Graph *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error_v(g, fmt, ap);
  va_end(ap);
  return false;
}

static void *arena_alloc(Graph *g, size_t size) {
  size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  ArenaBlock *b = g->blocks;
  if (!b || b->size - b->used < size) {
    size_t block_size = size > 65536 ? size : 65536;
    b = malloc(sizeof(ArenaBlock) + block_size);
    if (!b) {
      set_error(g, "out of memory");
      return NULL;
    }
    b->next = g->blocks;
    b->used = 0;
    b->size = block_size;
    g->blocks = b;
  }
  void *p = (char *)b->data + b->used;
  b->used += size;
  return p;
}

static const char *arena_strdup(Graph *g, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = arena_alloc(g, n);
  if (p) memcpy(p, s, n);
  return p;
}

static bool grow(Graph *g, void **items, int *capacity, int needed, size_t item_size) {
  if (needed <= *capacity) return true;
  int cap = *capacity ? *capacity * 2 : 16;
  while (cap < needed) cap *= 2;
  void *p = realloc(*items, (size_t)cap * item_size);
  if (!p) {
    set_error(g, "out of memory");
    return false;
  }
  *items = p;
  *capacity = cap;
  return true;
}

static bool id_list_push(Graph *g, IdList *list, GraphId id) {
  if (!grow(g, (void **)&list->items, &list->capacity, list->count + 1, sizeof(GraphId)))
    return false;
  list->items[list->count++] = id;
  return true;
}

Graph *graph_new(void) { return calloc(1, sizeof(Graph)); }

void graph_free(Graph *g) {
  if (!g) return;
  for (ArenaBlock *b = g->blocks, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  free(g->nodes);
  free(g->inputs.items);
  free(g->params.items);
  free(g->states.items);
  free(g->outputs);
  free(g->updates);
  free(g);
}

const char *graph_error(const Graph *g) { return g->failed ? g->error : NULL; }

void graph_clear_error(Graph *g) {
  g->failed = false;
  g->error[0] = '\0';
}

int graph_count(const Graph *g) { return g->count; }

const GraphNode *graph_node(const Graph *g, GraphId id) {
  return id >= 0 && id < g->count ? &g->nodes[id] : NULL;
}

int graph_num_inputs(const Graph *g) { return g->inputs.count; }
GraphId graph_input_at(const Graph *g, int i) { return g->inputs.items[i]; }
int graph_num_params(const Graph *g) { return g->params.count; }
GraphId graph_param_at(const Graph *g, int i) { return g->params.items[i]; }
int graph_num_states(const Graph *g) { return g->states.count; }
GraphId graph_state_at(const Graph *g, int i) { return g->states.items[i]; }
int graph_num_outputs(const Graph *g) { return g->num_outputs; }
GraphOutput graph_output_at(const Graph *g, int i) { return g->outputs[i]; }
int graph_num_updates(const Graph *g) { return g->num_updates; }
GraphUpdate graph_update_at(const Graph *g, int i) { return g->updates[i]; }

bool graph_is_output(const Graph *g, GraphId id) {
  for (int i = 0; i < graph_num_outputs(g); i++)
    if (graph_output_at(g, i).node == id) return true;
  return false;
}

bool graph_is_update_value(const Graph *g, GraphId id) {
  for (int i = 0; i < graph_num_updates(g); i++)
    if (graph_update_at(g, i).value == id) return true;
  return false;
}

static GraphId find_in(const Graph *g, const IdList *list, const char *name) {
  for (int i = 0; i < list->count; i++)
    if (strcmp(g->nodes[list->items[i]].attrs.name, name) == 0) return list->items[i];
  return GRAPH_NONE;
}

GraphId graph_find_leaf(const Graph *g, const char *name) {
  GraphId id = find_in(g, &g->inputs, name);
  if (id == GRAPH_NONE) id = find_in(g, &g->params, name);
  if (id == GRAPH_NONE) id = find_in(g, &g->states, name);
  return id;
}

GraphId graph_find_output(const Graph *g, const char *name) {
  for (int i = 0; i < g->num_outputs; i++)
    if (strcmp(g->outputs[i].name, name) == 0) return g->outputs[i].node;
  return GRAPH_NONE;
}

static IdList *leaf_list(Graph *g, GraphOp op) {
  switch (op) {
  case GRAPH_OP_INPUT: return &g->inputs;
  case GRAPH_OP_PARAM: return &g->params;
  case GRAPH_OP_STATE: return &g->states;
  default: return NULL;
  }
}

/* Keeps only the attributes `op` reads (and list entries within the input
 * rank), so that equal nodes have equal attrs field by field. */
static GraphAttrs normalized_attrs(GraphOp op, const GraphAttrs *in, int rank) {
  GraphAttrs a = {0};
  if (!in) return a;
  bool source = graph_op_kind(op) == GRAPH_KIND_SOURCE;
  if (source || op == GRAPH_OP_RESHAPE || op == GRAPH_OP_BROADCAST) a.shape = in->shape;
  if (source || op == GRAPH_OP_CAST) a.dtype = in->dtype;
  switch (op) {
  case GRAPH_OP_REDUCE_SUM:
  case GRAPH_OP_REDUCE_MAX: a.axes = in->axes; break;
  case GRAPH_OP_CONCAT:
  case GRAPH_OP_IOTA: a.axis = in->axis; break;
  case GRAPH_OP_PERMUTE:
    for (int i = 0; i < rank; i++) a.perm[i] = in->perm[i];
    break;
  case GRAPH_OP_SLICE:
    for (int i = 0; i < rank; i++) {
      a.start[i] = in->start[i];
      a.stop[i] = in->stop[i];
      a.step[i] = in->step[i];
    }
    break;
  case GRAPH_OP_PAD:
    for (int i = 0; i < rank; i++) {
      a.lo[i] = in->lo[i];
      a.hi[i] = in->hi[i];
      a.interior[i] = in->interior[i];
    }
    a.pad_value = in->pad_value;
    break;
  case GRAPH_OP_DOT:
    a.transpose_a = in->transpose_a;
    a.transpose_b = in->transpose_b;
    break;
  case GRAPH_OP_SCATTER_ADD: a.rows = in->rows; break;
  case GRAPH_OP_ATTENTION:
  case GRAPH_OP_ATTENTION_LSE:
  case GRAPH_OP_ATTENTION_GRAD_Q:
  case GRAPH_OP_ATTENTION_GRAD_K:
  case GRAPH_OP_ATTENTION_GRAD_V:
    a.scale = in->scale;
    a.causal = in->causal;
    break;
  case GRAPH_OP_RANDOM:
    a.seed = in->seed;
    a.stream = in->stream;
    break;
  case GRAPH_OP_CONSTANT:
    a.values = in->values;
    a.num_values = in->num_values;
    break;
  case GRAPH_OP_INPUT:
  case GRAPH_OP_PARAM:
  case GRAPH_OP_STATE: a.name = in->name; break;
  default: break;
  }
  return a;
}

/* Copies the pointed-to parts of attrs into the arena. */
static bool own_attrs(Graph *g, GraphOp op, GraphAttrs *attrs) {
  if (op == GRAPH_OP_CONSTANT) {
    if (!attrs->values || attrs->num_values < 1 || attrs->num_values > ((int64_t)1 << 40)) {
      set_error(g, "constant: no values");
      return false;
    }
    double *values = arena_alloc(g, (size_t)attrs->num_values * sizeof(double));
    if (!values) return false;
    memcpy(values, attrs->values, (size_t)attrs->num_values * sizeof(double));
    attrs->values = values;
  }
  if (leaf_list(g, op)) {
    if (!attrs->name || !attrs->name[0]) {
      set_error(g, "%s: a name is required", graph_op_name(op));
      return false;
    }
    if (graph_find_leaf(g, attrs->name) != GRAPH_NONE) {
      set_error(g, "%s: the name '%s' is already used", graph_op_name(op), attrs->name);
      return false;
    }
    attrs->name = arena_strdup(g, attrs->name);
    return attrs->name != NULL;
  }
  return true;
}

GraphId graph_add_node(Graph *g, GraphOp op, const GraphId *inputs, int num_inputs,
                       const GraphAttrs *attrs) {
  if ((int)op < 0 || op >= GRAPH_OP_COUNT) {
    set_error(g, "unknown op %d", (int)op);
    return GRAPH_NONE;
  }
  int arity = graph_op_arity(op);
  if (arity >= 0 ? num_inputs != arity : num_inputs < 1) {
    set_error(g, "%s: expected %d inputs, got %d", graph_op_name(op), arity < 0 ? 1 : arity,
              num_inputs);
    return GRAPH_NONE;
  }
  for (int i = 0; i < num_inputs; i++) {
    if (inputs[i] == GRAPH_NONE) return GRAPH_NONE; /* the error is already recorded */
    if (inputs[i] < 0 || inputs[i] >= g->count) {
      set_error(g, "%s: input %d is not a node of this graph", graph_op_name(op), (int)inputs[i]);
      return GRAPH_NONE;
    }
  }
  /* attrs and inputs may point into this graph's node array: read them
   * before the array can move. */
  GraphNode node = {.op = op, .num_inputs = num_inputs, .scope = g->scope};
  node.attrs = normalized_attrs(op, attrs, num_inputs ? g->nodes[inputs[0]].shape.rank : 0);
  if (!own_attrs(g, op, &node.attrs)) return GRAPH_NONE;
  if (num_inputs > 0) {
    GraphId *copy = arena_alloc(g, (size_t)num_inputs * sizeof(GraphId));
    if (!copy) return GRAPH_NONE;
    memcpy(copy, inputs, (size_t)num_inputs * sizeof(GraphId));
    node.inputs = copy;
  }
  if (g->count == INT32_MAX || !grow(g, (void **)&g->nodes, &g->capacity, g->count + 1,
                                     sizeof(GraphNode)))
    return GRAPH_NONE;
  char message[GRAPH_ERROR_SIZE - 32];
  if (!shape_rules[op](g, &node, message, sizeof message)) {
    set_error(g, "%s: %s", graph_op_name(op), message);
    return GRAPH_NONE;
  }
  GraphId id = g->count;
  IdList *list = leaf_list(g, op);
  if (list && !id_list_push(g, list, id)) return GRAPH_NONE;
  if (op == GRAPH_OP_RANDOM && node.attrs.stream >= g->next_stream)
    g->next_stream = node.attrs.stream + 1;
  g->nodes[g->count++] = node;
  return id;
}

static GraphId add_leaf(Graph *g, GraphOp op, const char *name, GraphDtype dtype,
                        GraphShape shape) {
  GraphAttrs a = {.shape = shape, .dtype = dtype, .name = name};
  return graph_add_node(g, op, NULL, 0, &a);
}

GraphId graph_input(Graph *g, const char *name, GraphDtype dtype, GraphShape shape) {
  return add_leaf(g, GRAPH_OP_INPUT, name, dtype, shape);
}

GraphId graph_param(Graph *g, const char *name, GraphDtype dtype, GraphShape shape) {
  return add_leaf(g, GRAPH_OP_PARAM, name, dtype, shape);
}

GraphId graph_state(Graph *g, const char *name, GraphDtype dtype, GraphShape shape) {
  return add_leaf(g, GRAPH_OP_STATE, name, dtype, shape);
}

GraphId graph_constant(Graph *g, GraphDtype dtype, GraphShape shape, const double *values,
                       int64_t num_values) {
  GraphAttrs a = {.shape = shape, .dtype = dtype, .values = values, .num_values = num_values};
  return graph_add_node(g, GRAPH_OP_CONSTANT, NULL, 0, &a);
}

GraphId graph_splat(Graph *g, GraphDtype dtype, GraphShape shape, double value) {
  return graph_constant(g, dtype, shape, &value, 1);
}

GraphId graph_scalar(Graph *g, GraphDtype dtype, double value) {
  return graph_splat(g, dtype, graph_shape_scalar(), value);
}

GraphId graph_iota(Graph *g, GraphDtype dtype, GraphShape shape, int axis) {
  GraphAttrs a = {.shape = shape, .dtype = dtype, .axis = axis};
  return graph_add_node(g, GRAPH_OP_IOTA, NULL, 0, &a);
}

GraphId graph_random(Graph *g, GraphId offset, GraphDtype dtype, GraphShape shape,
                     uint64_t seed) {
  GraphAttrs a = {.shape = shape, .dtype = dtype, .seed = seed, .stream = g->next_stream};
  return graph_add_node(g, GRAPH_OP_RANDOM, &offset, 1, &a);
}

static GraphId add_with_arity(Graph *g, GraphOp op, const GraphId *inputs, int n,
                              const GraphAttrs *a) {
  if ((int)op >= 0 && op < GRAPH_OP_COUNT && graph_op_arity(op) != n) {
    set_error(g, "%s is not an op with %d inputs", graph_op_name(op), n);
    return GRAPH_NONE;
  }
  return graph_add_node(g, op, inputs, n, a);
}

GraphId graph_unary(Graph *g, GraphOp op, GraphId x) {
  /* cast needs a target dtype: graph_cast */
  if ((int)op >= 0 && op < GRAPH_OP_COUNT &&
      (graph_op_kind(op) != GRAPH_KIND_ELEMENTWISE || op == GRAPH_OP_CAST)) {
    set_error(g, "%s is not a unary elementwise op", graph_op_name(op));
    return GRAPH_NONE;
  }
  return add_with_arity(g, op, &x, 1, NULL);
}

GraphId graph_binary(Graph *g, GraphOp op, GraphId a, GraphId b) {
  GraphId in[2] = {a, b};
  return add_with_arity(g, op, in, 2, NULL);
}

GraphId graph_select(Graph *g, GraphId cond, GraphId if_true, GraphId if_false) {
  GraphId in[3] = {cond, if_true, if_false};
  return graph_add_node(g, GRAPH_OP_SELECT, in, 3, NULL);
}

GraphId graph_cast(Graph *g, GraphId x, GraphDtype dtype) {
  GraphAttrs a = {.dtype = dtype};
  return graph_add_node(g, GRAPH_OP_CAST, &x, 1, &a);
}

GraphId graph_reduce(Graph *g, GraphOp op, GraphId x, uint32_t axes) {
  if (op != GRAPH_OP_REDUCE_SUM && op != GRAPH_OP_REDUCE_MAX) {
    set_error(g, "graph_reduce: %s is not a reduction",
              (int)op >= 0 && op < GRAPH_OP_COUNT ? graph_op_name(op) : "?");
    return GRAPH_NONE;
  }
  GraphAttrs a = {.axes = axes};
  return graph_add_node(g, op, &x, 1, &a);
}

GraphId graph_reshape(Graph *g, GraphId x, GraphShape shape) {
  GraphAttrs a = {.shape = shape};
  return graph_add_node(g, GRAPH_OP_RESHAPE, &x, 1, &a);
}

GraphId graph_permute(Graph *g, GraphId x, const int *perm) {
  GraphAttrs a = {0};
  const GraphNode *in = graph_node(g, x);
  int rank = in ? in->shape.rank : 0;
  memcpy(a.perm, perm, (size_t)rank * sizeof(int));
  return graph_add_node(g, GRAPH_OP_PERMUTE, &x, 1, &a);
}

GraphId graph_broadcast(Graph *g, GraphId x, GraphShape shape) {
  GraphAttrs a = {.shape = shape};
  return graph_add_node(g, GRAPH_OP_BROADCAST, &x, 1, &a);
}

GraphId graph_slice(Graph *g, GraphId x, const int64_t *start, const int64_t *stop,
                    const int64_t *step) {
  GraphAttrs a = {0};
  const GraphNode *in = graph_node(g, x);
  int rank = in ? in->shape.rank : 0;
  for (int i = 0; i < rank; i++) {
    a.start[i] = start[i];
    a.stop[i] = stop[i];
    a.step[i] = step ? step[i] : 1;
  }
  return graph_add_node(g, GRAPH_OP_SLICE, &x, 1, &a);
}

GraphId graph_concat(Graph *g, const GraphId *xs, int count, int axis) {
  GraphAttrs a = {.axis = axis};
  return graph_add_node(g, GRAPH_OP_CONCAT, xs, count, &a);
}

GraphId graph_pad(Graph *g, GraphId x, const int64_t *lo, const int64_t *hi,
                  const int64_t *interior, double value) {
  GraphAttrs a = {.pad_value = value};
  const GraphNode *in = graph_node(g, x);
  int rank = in ? in->shape.rank : 0;
  for (int i = 0; i < rank; i++) {
    a.lo[i] = lo[i];
    a.hi[i] = hi[i];
    a.interior[i] = interior ? interior[i] : 0;
  }
  return graph_add_node(g, GRAPH_OP_PAD, &x, 1, &a);
}

GraphId graph_gather(Graph *g, GraphId table, GraphId indices) {
  GraphId in[2] = {table, indices};
  return graph_add_node(g, GRAPH_OP_GATHER, in, 2, NULL);
}

GraphId graph_scatter_add(Graph *g, GraphId updates, GraphId indices, int64_t rows) {
  GraphId in[2] = {updates, indices};
  GraphAttrs a = {.rows = rows};
  return graph_add_node(g, GRAPH_OP_SCATTER_ADD, in, 2, &a);
}

GraphId graph_attention(Graph *g, GraphId q, GraphId k, GraphId v, GraphId mask, double scale,
                        bool causal) {
  GraphId in[4] = {q, k, v, mask};
  GraphAttrs at = {.scale = scale, .causal = causal};
  return graph_add_node(g, GRAPH_OP_ATTENTION, in, mask == GRAPH_NONE ? 3 : 4, &at);
}

GraphId graph_dot(Graph *g, GraphId a, GraphId b, bool transpose_a, bool transpose_b) {
  GraphId in[2] = {a, b};
  GraphAttrs at = {.transpose_a = transpose_a, .transpose_b = transpose_b};
  return graph_add_node(g, GRAPH_OP_DOT, in, 2, &at);
}

static bool check_node(Graph *g, GraphId id, const char *what) {
  if (id == GRAPH_NONE && g->failed) return false;
  if (id < 0 || id >= g->count) {
    set_error(g, "%s: %d is not a node of this graph", what, (int)id);
    return false;
  }
  return true;
}

bool graph_output(Graph *g, const char *name, GraphId node) {
  if (!check_node(g, node, "output")) return false;
  if (!name || !name[0] || graph_find_output(g, name) != GRAPH_NONE) {
    set_error(g, "output: the name '%s' is missing or already used", name ? name : "");
    return false;
  }
  const char *copy = arena_strdup(g, name);
  if (!copy || !grow(g, (void **)&g->outputs, &g->outputs_capacity, g->num_outputs + 1,
                     sizeof(GraphOutput)))
    return false;
  g->outputs[g->num_outputs++] = (GraphOutput){copy, node};
  return true;
}

void graph_remove_output(Graph *g, const char *name) {
  int kept = 0;
  for (int i = 0; i < g->num_outputs; i++)
    if (strcmp(g->outputs[i].name, name) != 0) g->outputs[kept++] = g->outputs[i];
  g->num_outputs = kept;
}

bool graph_update(Graph *g, GraphId target, GraphId value) {
  if (!check_node(g, target, "update") || !check_node(g, value, "update")) return false;
  const GraphNode *t = &g->nodes[target], *v = &g->nodes[value];
  if (t->op != GRAPH_OP_PARAM && t->op != GRAPH_OP_STATE) {
    set_error(g, "update: the target %%%d is not a param or state", (int)target);
    return false;
  }
  /* A computed value keeps updates independent: no write can clobber a
   * value that another update still reads. */
  if (graph_op_kind(v->op) == GRAPH_KIND_SOURCE && v->op != GRAPH_OP_CONSTANT &&
      v->op != GRAPH_OP_IOTA && v->op != GRAPH_OP_RANDOM) {
    set_error(g, "update: the new value of '%s' must be computed, not a leaf", t->attrs.name);
    return false;
  }
  if (t->dtype != v->dtype || !graph_shape_equal(&t->shape, &v->shape)) {
    char a[64], b[64];
    graph_format_type(a, sizeof a, t->dtype, &t->shape);
    graph_format_type(b, sizeof b, v->dtype, &v->shape);
    set_error(g, "update: '%s' is %s but the new value is %s", t->attrs.name, a, b);
    return false;
  }
  for (int i = 0; i < g->num_updates; i++) {
    if (g->updates[i].target == target) {
      set_error(g, "update: '%s' is updated twice", t->attrs.name);
      return false;
    }
  }
  if (!grow(g, (void **)&g->updates, &g->updates_capacity, g->num_updates + 1,
            sizeof(GraphUpdate)))
    return false;
  g->updates[g->num_updates++] = (GraphUpdate){target, value};
  return true;
}

/* Scopes come in runs (a layer's nodes are made together), so comparing
 * with the current and the previous one keeps a copy per run, not per node. */
static const char *own_scope(Graph *g, const char *scope) {
  if (!scope) return NULL;
  if (g->scope && strcmp(g->scope, scope) == 0) return g->scope;
  if (g->last_scope && strcmp(g->last_scope, scope) == 0) return g->last_scope;
  return arena_strdup(g, scope);
}

void graph_set_scope(Graph *g, const char *scope) {
  const char *owned = own_scope(g, scope);
  if (owned == g->scope) return;
  if (g->scope) g->last_scope = g->scope;
  g->scope = owned;
}

void graph_set_scope_from(Graph *dst, const Graph *src, GraphId id) {
  graph_set_scope(dst, id >= 0 && id < src->count ? src->nodes[id].scope : NULL);
}

const char *graph_current_scope(const Graph *g) { return g->scope; }

GraphId graph_copy_node(Graph *dst, const Graph *src, GraphId id, const GraphId *inputs) {
  GraphNode n = src->nodes[id]; /* dst may be src, whose array can move */
  const char *current = dst->scope;
  graph_set_scope(dst, n.scope);
  GraphId copy = graph_add_node(dst, n.op, inputs, n.num_inputs, &n.attrs);
  graph_set_scope(dst, current);
  return copy;
}

bool graph_copy_interface(Graph *dst, const Graph *src, const GraphId *map) {
  for (int i = 0; i < src->num_outputs; i++)
    if (!graph_output(dst, src->outputs[i].name, map[src->outputs[i].node])) return false;
  for (int i = 0; i < src->num_updates; i++)
    if (!graph_update(dst, map[src->updates[i].target], map[src->updates[i].value]))
      return false;
  return true;
}

static const char *const dtype_names[] = {"f32", "f64", "i32", "bf16"};

const char *graph_dtype_name(GraphDtype dtype) {
  return (unsigned)dtype < 4 ? dtype_names[dtype] : "?";
}

bool graph_dtype_from_name(const char *name, GraphDtype *out) {
  for (int i = 0; i < 4; i++) {
    if (strcmp(dtype_names[i], name) == 0) {
      *out = (GraphDtype)i;
      return true;
    }
  }
  return false;
}

bool graph_dtype_is_float(GraphDtype dtype) { return dtype != GRAPH_I32; }

int64_t graph_shape_numel(const GraphShape *shape) {
  int64_t n = 1;
  for (int i = 0; i < shape->rank; i++) n *= shape->dims[i];
  return n;
}

bool graph_shape_equal(const GraphShape *a, const GraphShape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

GraphShape graph_shape_scalar(void) { return (GraphShape){0}; }

GraphShape graph_shape_of(int rank, const int64_t *dims) {
  GraphShape s = {.rank = rank};
  for (int i = 0; i < rank && i < GRAPH_MAX_RANK; i++) s.dims[i] = dims[i];
  return s;
}

void graph_format_type(char *buf, size_t size, GraphDtype dtype, const GraphShape *shape) {
  int n = snprintf(buf, size, "%s[", graph_dtype_name(dtype));
  for (int i = 0; i < shape->rank && n >= 0 && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, i ? ",%lld" : "%lld", (long long)shape->dims[i]);
  if (n >= 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
}

static bool same_i64(const int64_t *a, const int64_t *b) {
  return memcmp(a, b, GRAPH_MAX_RANK * sizeof(int64_t)) == 0;
}

bool graph_attrs_equal(GraphOp op, const GraphAttrs *a, const GraphAttrs *b) {
  if (!graph_shape_equal(&a->shape, &b->shape) || a->dtype != b->dtype || a->axes != b->axes ||
      a->axis != b->axis || memcmp(a->perm, b->perm, sizeof a->perm) != 0 ||
      !same_i64(a->start, b->start) || !same_i64(a->stop, b->stop) ||
      !same_i64(a->step, b->step) || !same_i64(a->lo, b->lo) || !same_i64(a->hi, b->hi) ||
      !same_i64(a->interior, b->interior) || a->transpose_a != b->transpose_a ||
      a->transpose_b != b->transpose_b || a->rows != b->rows || a->seed != b->seed ||
      a->stream != b->stream || a->num_values != b->num_values || a->causal != b->causal)
    return false;
  if (memcmp(&a->scale, &b->scale, sizeof(double)) != 0) return false;
  /* pad values compare by bits so that NaN pads compare equal to themselves */
  if (memcmp(&a->pad_value, &b->pad_value, sizeof(double)) != 0) return false;
  if (op == GRAPH_OP_CONSTANT &&
      memcmp(a->values, b->values, (size_t)a->num_values * sizeof(double)) != 0)
    return false;
  if (a->name != b->name && (!a->name || !b->name || strcmp(a->name, b->name) != 0)) return false;
  return true;
}

bool graph_constant_is_splat(const GraphNode *node, double *value) {
  if (node->op != GRAPH_OP_CONSTANT) return false;
  for (int64_t i = 1; i < node->attrs.num_values; i++)
    if (memcmp(&node->attrs.values[i], &node->attrs.values[0], sizeof(double)) != 0) return false;
  if (value) *value = node->attrs.values[0];
  return true;
}
