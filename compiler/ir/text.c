/* Parser of the text form printed by print.c. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_text.h"

#define MAX_TEXT_ID (1 << 24)

typedef struct Parser {
  const char *p;    /* cursor in the current line */
  int line;
  Graph *g;
  GraphId *ids;     /* text id -> graph id */
  int ids_capacity;
  double *values;   /* constant literal being read */
  int64_t num_values, values_capacity;
  GraphId *operands;
  int num_operands, operands_capacity;
  char *err;
  size_t err_size;
  bool failed;
} Parser;

static bool parse_error(Parser *ps, const char *fmt, ...) {
  if (ps->failed) return false;
  ps->failed = true;
  int n = snprintf(ps->err, ps->err_size, "line %d: ", ps->line);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < ps->err_size) vsnprintf(ps->err + n, ps->err_size - (size_t)n, fmt, ap);
  va_end(ap);
  return false;
}

static void skip_space(Parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r') ps->p++;
}

static bool at_line_end(Parser *ps) {
  skip_space(ps);
  return *ps->p == '\0' || *ps->p == '\n' || *ps->p == '#';
}

static bool accept(Parser *ps, char c) {
  skip_space(ps);
  if (*ps->p != c) return false;
  ps->p++;
  return true;
}

static bool expect(Parser *ps, char c) {
  if (accept(ps, c)) return true;
  return parse_error(ps, "expected '%c'", c);
}

/* A word of letters, digits and '_' into buf. */
static bool read_word(Parser *ps, char *buf, size_t size) {
  skip_space(ps);
  size_t n = 0;
  while (isalnum((unsigned char)*ps->p) || *ps->p == '_') {
    if (n + 1 < size) buf[n++] = *ps->p;
    ps->p++;
  }
  buf[n] = '\0';
  return n > 0 || parse_error(ps, "expected a word");
}

static bool read_int(Parser *ps, long long *out) {
  skip_space(ps);
  char *end;
  *out = strtoll(ps->p, &end, 10);
  if (end == ps->p) return parse_error(ps, "expected an integer");
  ps->p = end;
  return true;
}

static bool read_number(Parser *ps, double *out) {
  skip_space(ps);
  char *end;
  *out = strtod(ps->p, &end);
  if (end == ps->p) return parse_error(ps, "expected a number");
  ps->p = end;
  return true;
}

static bool read_string(Parser *ps, char *buf, size_t size) {
  if (!expect(ps, '"')) return false;
  size_t n = 0;
  while (*ps->p != '"') {
    if (*ps->p == '\0' || *ps->p == '\n') return parse_error(ps, "unterminated string");
    if (*ps->p == '\\' && ps->p[1] != '\0' && ps->p[1] != '\n') ps->p++;
    if (n + 1 >= size) return parse_error(ps, "string too long");
    buf[n++] = *ps->p++;
  }
  ps->p++;
  buf[n] = '\0';
  return true;
}

/* %N, mapped to the graph id defined for it. */
static bool read_ref(Parser *ps, GraphId *out) {
  if (!expect(ps, '%')) return false;
  long long id;
  if (!read_int(ps, &id)) return false;
  if (id < 0 || id >= ps->ids_capacity || ps->ids[id] == GRAPH_NONE)
    return parse_error(ps, "%%%lld is not defined", id);
  *out = ps->ids[id];
  return true;
}

static bool read_int_list(Parser *ps, int64_t *xs, int *count) {
  if (!expect(ps, '[')) return false;
  *count = 0;
  if (accept(ps, ']')) return true;
  do {
    long long x;
    if (*count == GRAPH_MAX_RANK) return parse_error(ps, "more than %d entries", GRAPH_MAX_RANK);
    if (!read_int(ps, &x)) return false;
    xs[(*count)++] = x;
  } while (accept(ps, ','));
  return expect(ps, ']');
}

static bool push_value(Parser *ps, double x) {
  if (ps->num_values == ps->values_capacity) {
    int64_t capacity = ps->values_capacity ? ps->values_capacity * 2 : 64;
    double *grown = realloc(ps->values, (size_t)capacity * sizeof(double));
    if (!grown) return parse_error(ps, "out of memory");
    ps->values = grown;
    ps->values_capacity = capacity;
  }
  ps->values[ps->num_values++] = x;
  return true;
}

static bool read_literal(Parser *ps) {
  ps->num_values = 0;
  double x;
  if (!accept(ps, '[')) return read_number(ps, &x) && push_value(ps, x);
  do {
    if (!read_number(ps, &x) || !push_value(ps, x)) return false;
  } while (accept(ps, ','));
  return expect(ps, ']');
}

static bool read_type(Parser *ps, GraphDtype *dtype, GraphShape *shape) {
  char word[16];
  if (!read_word(ps, word, sizeof word)) return false;
  if (!graph_dtype_from_name(word, dtype)) return parse_error(ps, "unknown dtype '%s'", word);
  int rank;
  if (!read_int_list(ps, shape->dims, &rank)) return false;
  shape->rank = rank;
  return true;
}

static bool read_bool(Parser *ps, bool *out) {
  char word[8];
  if (!read_word(ps, word, sizeof word)) return false;
  if (strcmp(word, "true") == 0) *out = true;
  else if (strcmp(word, "false") == 0) *out = false;
  else return parse_error(ps, "expected true or false");
  return true;
}

/* key=value into the attributes. */
static bool read_attr(Parser *ps, const char *key, GraphAttrs *a) {
  int64_t list[GRAPH_MAX_RANK];
  int count;
  long long x;
  if (strcmp(key, "axes") == 0) {
    if (!read_int_list(ps, list, &count)) return false;
    for (int i = 0; i < count; i++) {
      if (list[i] < 0 || list[i] >= GRAPH_MAX_RANK) return parse_error(ps, "bad axis");
      a->axes |= 1u << list[i];
    }
    return true;
  }
  if (strcmp(key, "perm") == 0) {
    if (!read_int_list(ps, list, &count)) return false;
    for (int i = 0; i < count; i++) a->perm[i] = (int)list[i];
    return true;
  }
  struct {
    const char *key;
    int64_t *field;
  } lists[] = {{"start", a->start}, {"stop", a->stop}, {"step", a->step},
               {"lo", a->lo},       {"hi", a->hi},     {"interior", a->interior}};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
    if (strcmp(key, lists[i].key) == 0) return read_int_list(ps, lists[i].field, &count);
  if (strcmp(key, "axis") == 0) {
    if (!read_int(ps, &x)) return false;
    a->axis = (int)x;
    return true;
  }
  if (strcmp(key, "value") == 0) return read_number(ps, &a->pad_value);
  if (strcmp(key, "transpose_a") == 0) return read_bool(ps, &a->transpose_a);
  if (strcmp(key, "transpose_b") == 0) return read_bool(ps, &a->transpose_b);
  if (strcmp(key, "scale") == 0) return read_number(ps, &a->scale);
  if (strcmp(key, "causal") == 0) return read_bool(ps, &a->causal);
  if (strcmp(key, "seed") == 0) {
    skip_space(ps);
    char *end;
    a->seed = strtoull(ps->p, &end, 10);
    if (end == ps->p) return parse_error(ps, "expected a seed");
    ps->p = end;
    return true;
  }
  if (strcmp(key, "stream") == 0) {
    if (!read_int(ps, &x)) return false;
    if (x < 0 || x > UINT32_MAX) return parse_error(ps, "stream out of range");
    a->stream = (uint32_t)x;
    return true;
  }
  return parse_error(ps, "unknown attribute '%s'", key);
}

static bool push_operand(Parser *ps, GraphId id) {
  if (ps->num_operands == ps->operands_capacity) {
    int capacity = ps->operands_capacity ? ps->operands_capacity * 2 : 8;
    GraphId *grown = realloc(ps->operands, (size_t)capacity * sizeof(GraphId));
    if (!grown) return parse_error(ps, "out of memory");
    ps->operands = grown;
    ps->operands_capacity = capacity;
  }
  ps->operands[ps->num_operands++] = id;
  return true;
}

static bool define_id(Parser *ps, long long text_id, GraphId id) {
  if (text_id >= ps->ids_capacity) {
    int capacity = ps->ids_capacity ? ps->ids_capacity : 64;
    while (capacity <= text_id) capacity *= 2;
    GraphId *grown = realloc(ps->ids, (size_t)capacity * sizeof(GraphId));
    if (!grown) return parse_error(ps, "out of memory");
    for (int i = ps->ids_capacity; i < capacity; i++) grown[i] = GRAPH_NONE;
    ps->ids = grown;
    ps->ids_capacity = capacity;
  }
  if (ps->ids[text_id] != GRAPH_NONE) return parse_error(ps, "%%%lld is defined twice", text_id);
  ps->ids[text_id] = id;
  return true;
}

/* %N = op ["name"] [%a, %b] [literal] [key=value ...] : type */
static bool parse_node(Parser *ps) {
  long long text_id;
  char word[32], name[512];
  if (!expect(ps, '%') || !read_int(ps, &text_id) || !expect(ps, '=')) return false;
  if (text_id < 0 || text_id > MAX_TEXT_ID) return parse_error(ps, "id out of range");
  if (!read_word(ps, word, sizeof word)) return false;
  GraphOp op;
  if (!graph_op_from_name(word, &op)) return parse_error(ps, "unknown op '%s'", word);

  GraphAttrs a = {0};
  skip_space(ps);
  if (*ps->p == '"') {
    if (!read_string(ps, name, sizeof name)) return false;
    a.name = name;
  }
  ps->num_operands = 0;
  skip_space(ps);
  if (*ps->p == '%') {
    do {
      GraphId id;
      if (!read_ref(ps, &id) || !push_operand(ps, id)) return false;
    } while (accept(ps, ','));
  }
  if (op == GRAPH_OP_CONSTANT) {
    if (!read_literal(ps)) return false;
    a.values = ps->values;
    a.num_values = ps->num_values;
  }
  for (;;) {
    skip_space(ps);
    if (*ps->p == ':') break;
    if (!read_word(ps, word, sizeof word) || !expect(ps, '=') || !read_attr(ps, word, &a))
      return false;
  }
  GraphDtype dtype;
  GraphShape shape = {0};
  if (!expect(ps, ':') || !read_type(ps, &dtype, &shape)) return false;
  if (!at_line_end(ps)) return parse_error(ps, "unexpected text after the type");

  /* The declared type supplies the attributes that the printer leaves out. */
  a.shape = shape;
  a.dtype = dtype;
  a.rows = shape.rank > 0 ? shape.dims[0] : 0;
  for (int i = 0; op == GRAPH_OP_SLICE && i < GRAPH_MAX_RANK; i++)
    if (a.step[i] == 0) a.step[i] = 1; /* step may be left out */
  GraphId id = graph_add_node(ps->g, op, ps->operands, ps->num_operands, &a);
  if (id == GRAPH_NONE) {
    parse_error(ps, "%s", graph_error(ps->g));
    return false;
  }
  const GraphNode *n = graph_node(ps->g, id);
  if (n->dtype != dtype || !graph_shape_equal(&n->shape, &shape)) {
    char declared[160], derived[160];
    graph_format_type(declared, sizeof declared, dtype, &shape);
    graph_format_type(derived, sizeof derived, n->dtype, &n->shape);
    return parse_error(ps, "declared %s but %s gives %s", declared, graph_op_name(op), derived);
  }
  return define_id(ps, text_id, id);
}

static bool parse_line(Parser *ps) {
  if (at_line_end(ps)) return true;
  if (*ps->p == '%') return parse_node(ps);
  char word[16], name[512];
  GraphId a, b;
  if (!read_word(ps, word, sizeof word)) return false;
  if (strcmp(word, "output") == 0) {
    if (!read_string(ps, name, sizeof name) || !expect(ps, '=') || !read_ref(ps, &a)) return false;
    if (!graph_output(ps->g, name, a)) return parse_error(ps, "%s", graph_error(ps->g));
  } else if (strcmp(word, "update") == 0) {
    if (!read_ref(ps, &a) || !expect(ps, '=') || !read_ref(ps, &b)) return false;
    if (!graph_update(ps->g, a, b)) return parse_error(ps, "%s", graph_error(ps->g));
  } else {
    return parse_error(ps, "expected a node, output or update, found '%s'", word);
  }
  return at_line_end(ps) || parse_error(ps, "unexpected text at the end of the line");
}

Graph *graph_parse(const char *text, char *err, size_t err_size) {
  Parser ps = {.p = text, .line = 1, .g = graph_new(), .err = err, .err_size = err_size};
  if (err_size) err[0] = '\0';
  if (!ps.g) {
    snprintf(err, err_size, "out of memory");
    return NULL;
  }
  while (!ps.failed) {
    if (!parse_line(&ps)) break;
    while (*ps.p && *ps.p != '\n') ps.p++; /* rest is a comment */
    if (!*ps.p) break;
    ps.p++;
    ps.line++;
  }
  free(ps.ids);
  free(ps.values);
  free(ps.operands);
  if (ps.failed) {
    graph_free(ps.g);
    return NULL;
  }
  return ps.g;
}
