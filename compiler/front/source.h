/* Source files and positions. Every AST node and diagnostic carries a Span. */
#ifndef TFM_SOURCE_H
#define TFM_SOURCE_H
#include <stddef.h>

typedef struct Span {
  int file;          /* index from source_add; 0 means "no location" */
  int line, col;     /* 1-based start */
  int end_line, end_col; /* inclusive end */
} Span;

typedef struct SourceFile {
  const char *path;  /* as the user (or the import) named it */
  const char *text;  /* NUL-terminated copy; may contain other NUL bytes */
  size_t len;
  size_t *line_starts;
  int nlines;
} SourceFile;

/* Reads a file; returns its index, or 0 with *err set (strerror text). */
int source_load(const char *path, const char **err);
/* Registers in-memory text (e.g. "<command line>"). */
int source_add_text(const char *name, const char *text, size_t len);
const SourceFile *source_get(int file);
/* The text of one line without its newline; *len receives its length. */
const char *source_line(int file, int line, size_t *len);
/* "path:line:col" for a span, in the pool. */
const char *span_str(Span s);
Span span_join(Span a, Span b);
void source_reset(void);

#endif
