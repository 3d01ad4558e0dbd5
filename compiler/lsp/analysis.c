/* The front end run with an observer and a diagnostic sink, and what they
 * report turned into an Analysis. */
#define _DEFAULT_SOURCE /* realpath, strdup, clock_gettime */
#include "analysis.h"
#include "checked.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diag.h"
#include "source.h"

enum { HOVER_MAX_DISTINCT = 4 };

static char *copy(const char *s) { return checked(strdup(s ? s : "")); }

/* Appends one zeroed element to a malloc'd array; returns it. */
#define GROW(array, count, cap)                                                        \
  (((count) == (cap) ? ((cap) = (cap) ? 2 * (cap) : 16,                                \
                        (array) = checked(realloc((array), sizeof *(array) * (cap)))) \
                     : 0),                                                             \
   memset(&(array)[(count)], 0, sizeof *(array)), &(array)[(count)++])

/* Ranges seen, each to the index of what was recorded for it. */
typedef struct RangeTable {
  Range *keys;
  int *index;
  int cap, len;
} RangeTable;

static unsigned range_hash(Range r) {
  unsigned h = 2166136261u;
  int parts[5] = {r.file, r.line, r.col, r.end_line, r.end_col};
  for (int i = 0; i < 5; i++) h = (h ^ (unsigned)parts[i]) * 16777619u;
  return h;
}

static int range_equal(Range a, Range b) {
  return a.file == b.file && a.line == b.line && a.col == b.col && a.end_line == b.end_line &&
         a.end_col == b.end_col;
}

/* The index recorded for r, or -1 (then *slot is where it would go). */
static int table_find(RangeTable *t, Range r, int *slot) {
  if (t->len * 2 >= t->cap) {
    RangeTable bigger = {.cap = t->cap ? t->cap * 2 : 256};
    bigger.keys = checked(calloc((size_t)bigger.cap, sizeof *bigger.keys));
    bigger.index = checked(malloc(sizeof *bigger.index * (size_t)bigger.cap));
    for (int i = 0; i < bigger.cap; i++) bigger.index[i] = -1;
    for (int i = 0; i < t->cap; i++)
      if (t->index[i] >= 0) {
        int s;
        table_find(&bigger, t->keys[i], &s);
        bigger.keys[s] = t->keys[i];
        bigger.index[s] = t->index[i];
        bigger.len++;
      }
    free(t->keys);
    free(t->index);
    *t = bigger;
  }
  unsigned mask = (unsigned)t->cap - 1;
  for (unsigned i = range_hash(r) & mask;; i = (i + 1) & mask) {
    if (t->index[i] < 0) {
      *slot = (int)i;
      return -1;
    }
    if (range_equal(t->keys[i], r)) return t->index[i];
  }
}

static void table_put(RangeTable *t, Range r, int slot, int index) {
  t->keys[slot] = r;
  t->index[slot] = index;
  t->len++;
}

static void table_free(RangeTable *t) {
  free(t->keys);
  free(t->index);
  *t = (RangeTable){0};
}

/* The collection under way (the front end is one global state too). */
typedef struct Run {
  Analysis *a;
  int *file_index; /* front-end file -> a->paths index, -1 unmapped */
  int nfiles;
  RangeTable hovers, definitions;
  int hover_cap, definition_cap, diagnostic_cap, symbol_cap, completion_cap;
} Run;
static Run run;

static int add_path(Analysis *a, const char *path) {
  char resolved[PATH_MAX];
  const char *p = realpath(path, resolved) ? resolved : path;
  for (int i = 0; i < a->npaths; i++)
    if (!strcmp(a->paths[i], p)) return i;
  a->paths = checked(realloc(a->paths, sizeof *a->paths * (size_t)(a->npaths + 1)));
  a->paths[a->npaths] = copy(p);
  return a->npaths++;
}

/* The analysis's file for a front-end file; -1 for no location. */
static int file_of(int file) {
  if (file <= 0) return -1;
  if (file >= run.nfiles) {
    int n = file + 8;
    run.file_index = checked(realloc(run.file_index, sizeof *run.file_index * (size_t)n));
    for (int i = run.nfiles; i < n; i++) run.file_index[i] = -1;
    run.nfiles = n;
  }
  if (run.file_index[file] < 0) {
    const SourceFile *f = source_get(file);
    run.file_index[file] = f ? add_path(run.a, f->path) : -1;
  }
  return run.file_index[file];
}

static Range range_of(Span s) {
  return (Range){file_of(s.file), s.line, s.col, s.end_line, s.end_col};
}

/* Where `name` is written inside span s: its first whole-word occurrence on
 * the span's first line (a let's name after "let", a layer's after
 * "layer"); when it is not there (the train block's `step`), the span's
 * start, or with `exact` no range (file -1). */
static Range name_range(Span s, const char *name, int exact) {
  Range r = range_of(s);
  size_t len, n = strlen(name);
  const char *line = source_line(s.file, s.line, &len);
  for (size_t i = s.col > 0 ? (size_t)s.col - 1 : 0; line && n && i + n <= len; i++) {
    int starts = i == 0 || !(isalnum((unsigned char)line[i - 1]) || line[i - 1] == '_');
    int ends = i + n == len || !(isalnum((unsigned char)line[i + n]) || line[i + n] == '_');
    if (starts && ends && !memcmp(line + i, name, n)) {
      r.col = (int)i + 1;
      r.end_line = r.line;
      r.end_col = (int)(i + n);
      return r;
    }
  }
  r.end_line = r.line;
  r.end_col = r.col;
  if (exact) r.file = -1;
  return r;
}

/* A fn's or layer's head, from its name up to its body:
 * "layer layernorm(d: int, eps: float = 1e-5)". */
static const char *signature(const Node *def) {
  const char *kind = def->kind == N_FN ? "fn" : "layer";
  size_t len;
  const char *line = source_line(def->span.file, def->span.line, &len);
  const char *name = line ? strstr(line, def->name) : NULL;
  if (!name || (size_t)(name - line) >= len) return pool_printf("%s %s", kind, def->name);
  len -= (size_t)(name - line);
  const char *brace = memchr(name, '{', len);
  size_t n = brace ? (size_t)(brace - name) : len;
  while (n && isspace((unsigned char)name[n - 1])) n--;
  return pool_printf("%s %.*s", kind, (int)n, name);
}

/* "f32[batch=16, seq_len=128, d_model=256]": a dimension that is a config
 * value shows its name. */
static const char *tensor_text(const TensorType *t) {
  const char *s = dtype_name(t->dtype);
  if (t->rank == 0) return s;
  s = pool_printf("%s[", s);
  for (int i = 0; i < t->rank; i++) {
    const Origin *o = t->origin[i];
    s = pool_printf("%s%s%s%s%" PRId64, s, i ? ", " : "", o && o->name ? o->name : "",
                    o && o->name ? "=" : "", t->dims[i]);
  }
  return pool_printf("%s]", s);
}

static const char *value_text(const Value *v) {
  switch (v->kind) {
    case V_TENSOR: return tensor_text(&v->t);
    case V_INT:
      return v->origin && v->origin->what && v->origin->name
                 ? pool_printf("int = %" PRId64 "  (%s)", v->i, v->origin->what)
                 : pool_printf("int = %" PRId64, v->i);
    case V_FLOAT: return pool_printf("float = %g", v->f);
    case V_BOOL: return v->i ? "bool = true" : "bool = false";
    case V_STR: return pool_printf("str = \"%s\"", v->s);
    case V_LIST: return pool_printf("list of %d", v->items.len);
    case V_INSTANCE:
      return pool_printf("%s (layer %s, %" PRId64 " parameters)", v->inst->path,
                         v->inst->def ? v->inst->def->name : "?", instance_param_count(v->inst));
    case V_FN:
    case V_LAYER: return signature(v->def);
    case V_BUILTIN: return pool_printf("built-in fn %s", v->s);
    case V_OPTIM: return pool_printf("optimizer %s", v->s);
    case V_TABLE: /* filled entry by entry: its size would differ at each use */
      return v->items.len && v->items.items[0] && ((Value *)v->items.items[0])->kind == V_INSTANCE
                 ? "table of layer instances" : "table";
    default: return value_kind_name(v);
  }
}

/* Adds a line to the hover at r unless the same line is there already;
 * `replace`: the line is the whole hover. */
static void add_hover(Range r, const char *line, int replace) {
  if (r.file < 0) return;
  int slot, k = table_find(&run.hovers, r, &slot);
  Analysis *a = run.a;
  if (k >= 0 && replace) {
    free(a->hovers[k].text);
    a->hovers[k].text = copy(line);
    a->hovers[k].distinct = 1;
    return;
  }
  if (k < 0) {
    table_put(&run.hovers, r, slot, a->nhovers);
    Hover *h = GROW(a->hovers, a->nhovers, run.hover_cap);
    h->at = r;
    h->text = copy(line);
    h->distinct = 1;
    h->seen = 1;
    return;
  }
  Hover *h = &a->hovers[k];
  h->seen++;
  size_t n = strlen(line);
  for (const char *p = h->text; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, line, n) && (p[n] == '\n' || !p[n])) return;
  if (h->distinct == HOVER_MAX_DISTINCT) return;
  size_t old = strlen(h->text);
  h->text = checked(realloc(h->text, old + n + 2));
  h->text[old] = '\n';
  memcpy(h->text + old + 1, line, n + 1);
  h->distinct++;
}

static void on_value(void *user, const Node *expr, const Value *v) {
  (void)user;
  if (v->kind != V_ERROR) add_hover(range_of(expr->span), value_text(v), 0);
}

static void on_bound(void *user, const char *name, const Value *v, Span at) {
  (void)user;
  /* a table is reported empty when made, then entry by entry */
  if (v->kind != V_ERROR && v->kind != V_TABLE)
    add_hover(name_range(at, name, 1), pool_printf("%s: %s", name, value_text(v)), 0);
}

static void add_definition(Range use, Range target) {
  if (use.file < 0 || target.file < 0) return;
  int slot;
  if (table_find(&run.definitions, use, &slot) >= 0) return;
  table_put(&run.definitions, use, slot, run.a->ndefinitions);
  Definition *d = GROW(run.a->definitions, run.a->ndefinitions, run.definition_cap);
  d->use = use;
  d->target = target;
}

static void on_used(void *user, const Node *name, Span defined_at) {
  (void)user;
  if (defined_at.file) add_definition(range_of(name->span), name_range(defined_at, name->name, 0));
}

static void on_diagnostic(void *user, DiagKind kind, Span at, const char *message) {
  (void)user;
  Analysis *a = run.a;
  if (kind == DIAG_ERROR) {
    Diagnostic *d = GROW(a->diagnostics, a->ndiagnostics, run.diagnostic_cap);
    d->at = at.file ? range_of(at) : (Range){0, 1, 1, 1, 1};
    d->message = copy(message);
  } else if (a->ndiagnostics) {
    Diagnostic *d = &a->diagnostics[a->ndiagnostics - 1];
    d->notes = checked(realloc(d->notes, sizeof *d->notes * (size_t)(d->nnotes + 1)));
    d->notes[d->nnotes].at = at.file ? range_of(at) : (Range){0};
    d->notes[d->nnotes++].message = copy(message);
  }
}

static int add_symbol(const char *name, const char *detail, SymbolKind kind, const Node *n,
                      int parent) {
  Symbol *s = GROW(run.a->symbols, run.a->nsymbols, run.symbol_cap);
  s->name = copy(name);
  s->detail = copy(detail);
  s->kind = kind;
  s->range = range_of(n->span);
  s->selection = name_range(n->span, name, 0);
  s->parent = parent;
  return run.a->nsymbols - 1;
}

static void add_completion(const char *label, const char *detail, int kind) {
  for (int i = 0; i < run.a->ncompletions; i++)
    if (!strcmp(run.a->completions[i].label, label)) return;
  Completion *c = GROW(run.a->completions, run.a->ncompletions, run.completion_cap);
  c->label = copy(label);
  c->detail = copy(detail);
  c->kind = kind;
}

/* The document's items as symbols, entries and declarations under them. */
static void collect_symbols(const Node *program) {
  for (int i = 0; i < program->list.len; i++) {
    const Node *it = program->list.items[i];
    int top;
    switch (it->kind) {
      case N_CONFIG:
      case N_VARIANT:
        top = add_symbol(it->kind == N_CONFIG ? "config" : it->name,
                         it->kind == N_CONFIG ? "config" : "variant", SYM_NAMESPACE, it, -1);
        for (int k = 0; k < it->list.len; k++) {
          const Node *e = it->list.items[k];
          if (e->kind == N_ENTRY) add_symbol(e->name, "", SYM_CONSTANT, e, top);
        }
        break;
      case N_FN: add_symbol(it->name, "fn", SYM_FUNCTION, it, -1); break;
      case N_LAYER: add_symbol(it->name, "layer", SYM_CLASS, it, -1); break;
      case N_TRAIN: add_symbol("train", "train", SYM_OBJECT, it, -1); break;
      case N_MODEL:
        top = add_symbol(it->name, "model", SYM_MODULE, it, -1);
        for (int k = 0; it->c && k < it->c->list.len; k++) {
          const Node *s = it->c->list.items[k];
          if (s->kind == N_INPUT || s->kind == N_OUTPUT)
            add_symbol(s->name, s->kind == N_INPUT ? "input" : "output", SYM_FIELD, s, top);
        }
        break;
      default: break;
    }
  }
}

/* Config entries: hover on their names (value, where set, override) and
 * completion; items of every file read: completion, and imports as links. */
static void on_checked(void *user, const CheckedModel *m) {
  (void)user;
  for (int i = 0; i < m->config.len; i++) {
    const ConfigEntry *e = m->config.items[i];
    const char *value = e->value ? value_text(e->value) : "not evaluated";
    const char *text = pool_printf("config %s: %s%s%s", e->name, value,
                                   e->override ? ", overridden by " : "",
                                   e->override ? e->override : "");
    add_hover(name_range(e->at, e->name, 1), text, 1); /* not the binding's line too */
    add_completion(e->name, text, 21 /* Constant */);
  }
  for (int p = 0; p < m->programs.len; p++) {
    const Node *program = m->programs.items[p];
    if (p == 0) collect_symbols(program);
    for (int i = 0; i < program->list.len; i++) {
      const Node *it = program->list.items[i];
      if (it->kind == N_FN || it->kind == N_LAYER) {
        const SourceFile *f = source_get(it->span.file);
        add_completion(it->name, pool_printf("%s %s (%s)", it->kind == N_FN ? "fn" : "layer",
                                             it->name, f ? f->path : "?"),
                       it->kind == N_FN ? 3 /* Function */ : 7 /* Class */);
      }
      if (it->kind != N_IMPORT) continue;
      /* the import's file: the program read whose path ends with it */
      size_t n = strlen(it->sval);
      for (int q = 1; q < m->programs.len; q++) {
        const Node *imported = m->programs.items[q];
        const SourceFile *f = source_get(imported->span.file);
        size_t len = f ? strlen(f->path) : 0;
        if (len >= n && !strcmp(f->path + len - n, it->sval) &&
            (len == n || f->path[len - n - 1] == '/')) {
          add_definition(range_of(it->span), (Range){file_of(imported->span.file), 1, 1, 1, 1});
          break;
        }
      }
    }
  }
}

/* An error in another file (a std layer called from the model) is also
 * shown in the document: at its first note there (the call), else at the
 * top, with the place it happened. */
static void surface_foreign_errors(Analysis *a) {
  int n = a->ndiagnostics;
  for (int i = 0; i < n; i++) {
    Diagnostic d = a->diagnostics[i];
    if (d.at.file == 0) continue;
    Range at = {0, 1, 1, 1, 1};
    for (int k = 0; k < d.nnotes; k++)
      if (d.notes[k].at.file == 0 && d.notes[k].at.line) {
        at = d.notes[k].at;
        break;
      }
    const char *where = d.at.file > 0 ? a->paths[d.at.file] : "?";
    size_t len = strlen(where) + strlen(d.message) + 64;
    char *message = checked(malloc(len));
    snprintf(message, len, "%s:%d:%d: %s", where, d.at.line, d.at.col, d.message);
    Diagnostic *copy_of = GROW(a->diagnostics, a->ndiagnostics, run.diagnostic_cap);
    copy_of->at = at;
    copy_of->message = message;
  }
}

Analysis *analysis_run(const CheckSettings *settings, const char *path, const char *text, size_t len) {
  static FILE *quiet;
  if (!quiet) quiet = fopen("/dev/null", "w");
  Analysis *a = checked(calloc(1, sizeof *a));
  run = (Run){.a = a};
  add_path(a, path);
  FrontObserver observer = {.value = on_value, .bound = on_bound, .used = on_used,
                            .checked = on_checked};
  FrontOptions opt = {.path = path, .text = text, .text_len = len, .variant = settings->variant,
                      .training = 1, .observer = &observer, .library_ok = 1};
  for (int i = 0; i < settings->ndefines; i++) vec_push(&opt.defines, (void *)settings->defines[i]);
  for (int i = 0; i < settings->ninclude_dirs; i++)
    vec_push(&opt.include_dirs, (void *)settings->include_dirs[i]);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  diag_set_stream(quiet ? quiet : stderr);
  diag_set_sink(on_diagnostic, NULL);
  sema_check(&opt);
  diag_set_sink(NULL, NULL);
  diag_set_stream(NULL);
  front_reset();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  a->milliseconds = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  surface_foreign_errors(a);
  table_free(&run.hovers);
  table_free(&run.definitions);
  free(run.file_index);
  run = (Run){0};
  return a;
}

static int contains(Range r, int file, int line, int col) {
  return r.file == file && (line > r.line || (line == r.line && col >= r.col)) &&
         (line < r.end_line || (line == r.end_line && col <= r.end_col));
}

/* Smaller ranges first: fewer lines, then fewer columns. */
static int narrower(Range a, Range b) {
  if (a.end_line - a.line != b.end_line - b.line) return a.end_line - a.line < b.end_line - b.line;
  return a.end_col - a.col < b.end_col - b.col;
}

const Hover *analysis_hover_at(const Analysis *a, int file, int line, int col) {
  const Hover *best = NULL;
  for (int i = 0; i < a->nhovers; i++)
    if (contains(a->hovers[i].at, file, line, col) && (!best || narrower(a->hovers[i].at, best->at)))
      best = &a->hovers[i];
  return best;
}

const Definition *analysis_definition_at(const Analysis *a, int file, int line, int col) {
  const Definition *best = NULL;
  for (int i = 0; i < a->ndefinitions; i++)
    if (contains(a->definitions[i].use, file, line, col) &&
        (!best || narrower(a->definitions[i].use, best->use)))
      best = &a->definitions[i];
  return best;
}

int analysis_file(const Analysis *a, const char *path) {
  char resolved[PATH_MAX];
  const char *p = realpath(path, resolved) ? resolved : path;
  for (int i = 0; i < a->npaths; i++)
    if (!strcmp(a->paths[i], p)) return i;
  return -1;
}

void analysis_free(Analysis *a) {
  if (!a) return;
  for (int i = 0; i < a->npaths; i++) free(a->paths[i]);
  for (int i = 0; i < a->ndiagnostics; i++) {
    for (int k = 0; k < a->diagnostics[i].nnotes; k++) free(a->diagnostics[i].notes[k].message);
    free(a->diagnostics[i].notes);
    free(a->diagnostics[i].message);
  }
  for (int i = 0; i < a->nhovers; i++) free(a->hovers[i].text);
  for (int i = 0; i < a->nsymbols; i++) free(a->symbols[i].name), free(a->symbols[i].detail);
  for (int i = 0; i < a->ncompletions; i++)
    free(a->completions[i].label), free(a->completions[i].detail);
  free(a->paths);
  free(a->diagnostics);
  free(a->hovers);
  free(a->definitions);
  free(a->symbols);
  free(a->completions);
  free(a);
}
