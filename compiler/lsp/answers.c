#include "answers.h"

#include <stdlib.h>
#include <string.h>

#include "builtins.h"

/* The text of a file the analysis read, for counting UTF-16 columns: the
 * document's own when it is that file, else read from disk (NULL when it
 * cannot be: columns are then bytes). */
static char *text_of(const Document *d, const char *path, size_t *len) {
  if (!strcmp(path, d->path)) {
    *len = d->len;
    return NULL;
  }
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = NULL;
  size_t n = 0, cap = 0, got;
  do {
    if (n + 4096 > cap) {
      cap = cap ? 2 * cap : 8192;
      char *t = realloc(text, cap);
      if (!t) break;
      text = t;
    }
    got = fread(text + n, 1, cap - n, f);
    n += got;
  } while (got);
  fclose(f);
  *len = n;
  return text;
}

static void position(JsonBuf *b, const char *text, size_t len, int line, int byte_col) {
  long character = text ? doc_character(text, len, line, byte_col) : byte_col - 1;
  jb_printf(b, "{\"line\":%d,\"character\":%ld}", line > 0 ? line - 1 : 0, character < 0 ? 0 : character);
}

/* An LSP range (end exclusive) of a front-end range (end inclusive). */
static void range(JsonBuf *b, const Document *d, const Analysis *a, Range r) {
  size_t len = 0;
  const char *path = r.file >= 0 && r.file < a->npaths ? a->paths[r.file] : d->path;
  char *read = text_of(d, path, &len);
  const char *text = !strcmp(path, d->path) ? d->text : read;
  jb_raw(b, "{\"start\":");
  position(b, text, len, r.line, r.col);
  jb_raw(b, ",\"end\":");
  position(b, text, len, r.end_line, r.end_col + 1);
  jb_raw(b, "}");
  free(read);
}

static void location(JsonBuf *b, const Document *d, const Analysis *a, Range r) {
  char *uri = doc_path_to_uri(r.file >= 0 && r.file < a->npaths ? a->paths[r.file] : d->path);
  jb_raw(b, "{\"uri\":");
  jb_str(b, uri);
  jb_raw(b, ",\"range\":");
  range(b, d, a, r);
  jb_raw(b, "}");
  free(uri);
}

void answer_diagnostics(JsonBuf *b, const Document *d, const Analysis *a) {
  jb_raw(b, "{\"uri\":");
  jb_str(b, d->uri);
  jb_printf(b, ",\"version\":%ld,\"diagnostics\":[", d->version);
  int first = 1;
  for (int i = 0; a && i < a->ndiagnostics; i++) {
    const Diagnostic *g = &a->diagnostics[i];
    if (g->at.file != 0) continue;
    jb_raw(b, first ? "{\"range\":" : ",{\"range\":");
    first = 0;
    range(b, d, a, g->at);
    jb_raw(b, ",\"severity\":1,\"source\":\"tfmc\",\"message\":");
    jb_str(b, g->message);
    jb_raw(b, ",\"relatedInformation\":[");
    int any = 0;
    for (int k = 0; k < g->nnotes; k++) {
      if (!g->notes[k].at.line) continue;
      jb_raw(b, any++ ? ",{\"location\":" : "{\"location\":");
      location(b, d, a, g->notes[k].at);
      jb_raw(b, ",\"message\":");
      jb_str(b, g->notes[k].message);
      jb_raw(b, "}");
    }
    jb_raw(b, "]}");
  }
  jb_raw(b, "]}");
}

/* The analysis (d's own first) and file index that know d's file. */
static const Analysis *knowing(const Document *d, const Analysis *own,
                               const Analysis *const *others, int nothers, int which, int *file) {
  if (which == 0) {
    *file = 0;
    return own;
  }
  const Analysis *a = which - 1 < nothers ? others[which - 1] : NULL;
  *file = a ? analysis_file(a, d->path) : -1;
  return a;
}

void answer_hover(JsonBuf *b, const Document *d, long line, long character, const Analysis *own,
                  const Analysis *const *others, int nothers) {
  int col = doc_byte_col(d->text, d->len, line, character), file;
  for (int w = 0; w <= nothers; w++) {
    const Analysis *a = knowing(d, own, others, nothers, w, &file);
    const Hover *h = a && file >= 0 ? analysis_hover_at(a, file, (int)line + 1, col) : NULL;
    if (!h) continue;
    JsonBuf text = {0};
    jb_raw(&text, "```tfm\n");
    jb_raw(&text, h->text);
    jb_raw(&text, "\n```");
    if (h->seen > 1 && h->distinct > 1)
      jb_printf(&text, "\n\n%d distinct values in %ld evaluations%s", h->distinct, h->seen,
                h->distinct == 4 ? " (the first 4 shown)" : "");
    jb_raw(b, "{\"contents\":{\"kind\":\"markdown\",\"value\":");
    jb_str(b, text.text);
    jb_raw(b, "},\"range\":");
    Range r = h->at;
    r.file = -1; /* d's own text: the position is in d */
    range(b, d, a, r);
    jb_raw(b, "}");
    jb_free(&text);
    return;
  }
  jb_raw(b, "null");
}

void answer_definition(JsonBuf *b, const Document *d, long line, long character,
                       const Analysis *own, const Analysis *const *others, int nothers) {
  int col = doc_byte_col(d->text, d->len, line, character), file;
  for (int w = 0; w <= nothers; w++) {
    const Analysis *a = knowing(d, own, others, nothers, w, &file);
    const Definition *def = a && file >= 0 ? analysis_definition_at(a, file, (int)line + 1, col) : NULL;
    if (!def) continue;
    location(b, d, a, def->target);
    return;
  }
  jb_raw(b, "null");
}

/* Symbol i and, under "children", those whose parent it is. */
static void symbol(JsonBuf *b, const Document *d, const Analysis *a, int i) {
  const Symbol *s = &a->symbols[i];
  jb_raw(b, "{\"name\":");
  jb_str(b, s->name);
  jb_raw(b, ",\"detail\":");
  jb_str(b, s->detail);
  jb_printf(b, ",\"kind\":%d,\"range\":", (int)s->kind);
  range(b, d, a, s->range);
  jb_raw(b, ",\"selectionRange\":");
  range(b, d, a, s->selection);
  jb_raw(b, ",\"children\":[");
  int any = 0;
  for (int k = i + 1; k < a->nsymbols; k++)
    if (a->symbols[k].parent == i) {
      if (any++) jb_raw(b, ",");
      symbol(b, d, a, k);
    }
  jb_raw(b, "]}");
}

void answer_symbols(JsonBuf *b, const Document *d, const Analysis *a) {
  jb_raw(b, "[");
  int any = 0;
  for (int i = 0; a && i < a->nsymbols; i++)
    if (a->symbols[i].parent < 0) {
      if (any++) jb_raw(b, ",");
      symbol(b, d, a, i);
    }
  jb_raw(b, "]");
}

static void completion_item(JsonBuf *b, int *any, const char *label, const char *detail, int kind) {
  jb_raw(b, (*any)++ ? ",{\"label\":" : "{\"label\":");
  jb_str(b, label);
  jb_printf(b, ",\"kind\":%d,\"detail\":", kind);
  jb_str(b, detail);
  jb_raw(b, "}");
}

void answer_completion(JsonBuf *b, const Analysis *a) {
  static const char *const keywords[] = {
      "import", "config", "variant", "fn", "layer", "model", "train", "let", "param", "input",
      "output", "if", "else", "for", "in", "return", "assert", "and", "or", "not", "true",
      "false", NULL};
  int any = 0;
  jb_raw(b, "{\"isIncomplete\":false,\"items\":[");
  for (int i = 0; keywords[i]; i++) completion_item(b, &any, keywords[i], "keyword", 14);
  for (int i = 0; builtin_name(i); i++) completion_item(b, &any, builtin_name(i), "built-in", 3);
  for (int i = 0; a && i < a->ncompletions; i++)
    completion_item(b, &any, a->completions[i].label, a->completions[i].detail,
                    a->completions[i].kind);
  jb_raw(b, "]}");
}
