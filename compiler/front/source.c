#include "source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

static PtrVec files; /* SourceFile*, index 0 unused */

static int add_file(const char *path, char *text, size_t len) {
  if (files.len == 0) vec_push(&files, NULL);
  SourceFile *f = pool_alloc(sizeof *f);
  f->path = pool_strdup(path);
  f->text = text;
  f->len = len;
  int n = 1;
  for (size_t i = 0; i < len; i++) n += text[i] == '\n';
  f->line_starts = pool_alloc(sizeof(size_t) * (size_t)(n + 1));
  int k = 0;
  f->line_starts[k++] = 0;
  for (size_t i = 0; i < len; i++)
    if (text[i] == '\n') f->line_starts[k++] = i + 1;
  f->nlines = n;
  vec_push(&files, f);
  return files.len - 1;
}

int source_load(const char *path, const char **err) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    *err = pool_strdup(strerror(errno));
    return 0;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    size_t got = fread(buf + len, 1, cap - len - 1, fp);
    len += got;
    if (got == 0) break;
    if (cap - len - 1 == 0) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  int bad = ferror(fp) || !buf;
  fclose(fp);
  if (bad) {
    free(buf);
    *err = buf ? "read error" : "out of memory";
    return 0;
  }
  char *text = pool_strndup(buf, len);
  free(buf);
  return add_file(path, text, len);
}

int source_add_text(const char *name, const char *text, size_t len) {
  return add_file(name, pool_strndup(text, len), len);
}

const SourceFile *source_get(int file) {
  if (file <= 0 || file >= files.len) return NULL;
  return files.items[file];
}

const char *source_line(int file, int line, size_t *len) {
  const SourceFile *f = source_get(file);
  if (!f || line < 1 || line > f->nlines) {
    *len = 0;
    return "";
  }
  size_t b = f->line_starts[line - 1];
  size_t e = line < f->nlines ? f->line_starts[line] - 1 : f->len;
  *len = e - b;
  return f->text + b;
}

const char *span_str(Span s) {
  const SourceFile *f = source_get(s.file);
  if (!f) return "<unknown>";
  return pool_printf("%s:%d:%d", f->path, s.line, s.col);
}

Span span_join(Span a, Span b) {
  if (a.file == 0) return b;
  if (b.file == 0 || b.file != a.file) return a;
  Span s = a;
  s.end_line = b.end_line;
  s.end_col = b.end_col;
  return s;
}

void source_reset(void) { files = (PtrVec){0}; }
