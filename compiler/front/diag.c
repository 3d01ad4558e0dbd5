#include "diag.h"

#include <stdarg.h>
#include <string.h>

#include "pool.h"

static FILE *stream;
static int errors;
static int stopped;
static int last_error_shown; /* notes attach to the last shown error */
static void (*context_hook)(Span at);
static DiagSink sink;
static void *sink_user;

void diag_set_sink(DiagSink fn, void *user) {
  sink = fn;
  sink_user = user;
}

void diag_set_context_hook(void (*hook)(Span at)) { context_hook = hook; }

void diag_set_stream(FILE *out) { stream = out; }
static FILE *out(void) { return stream ? stream : stderr; }

/* Prints the source line with tabs kept (so the caret lines up) and control
 * bytes shown as '?', then a caret line under the span's first line. */
static void show_source(Span at) {
  size_t len;
  const char *line = source_line(at.file, at.line, &len);
  if (len > 400) return; /* a 10 MB one-line file would flood the terminal */
  FILE *o = out();
  fputc(' ', o);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)line[i];
    fputc(c == '\t' || c >= 0x20 ? c : '?', o);
  }
  fputc('\n', o);
  fputc(' ', o);
  int col = at.col < 1 ? 1 : at.col;
  for (int i = 1; i < col && (size_t)(i - 1) < len; i++)
    fputc(line[i - 1] == '\t' ? '\t' : ' ', o);
  fputc('^', o);
  int end = at.end_line == at.line ? at.end_col : (int)len;
  for (int i = col + 1; i <= end && (size_t)i <= len; i++) fputc('~', o);
  fputc('\n', o);
}

/* Prints one diagnostic (an error with its source line, a note without)
 * and hands it to the sink. */
static void emit(DiagKind kind, Span at, const char *fmt, va_list ap) {
  char *message = pool_vprintf(fmt, ap);
  const char *word = kind == DIAG_ERROR ? "error" : "note";
  FILE *o = out();
  if (at.file) fprintf(o, "%s: %s: %s\n", span_str(at), word, message);
  else fprintf(o, "tfmc: %s: %s\n", word, message);
  if (at.file && kind == DIAG_ERROR) show_source(at);
  if (sink) sink(sink_user, kind, at, message);
}

void diag_error(Span at, const char *fmt, ...) {
  last_error_shown = 0;
  if (stopped) return;
  errors++;
  va_list ap;
  va_start(ap, fmt);
  emit(DIAG_ERROR, at, fmt, ap);
  va_end(ap);
  last_error_shown = 1;
  if (context_hook) context_hook(at);
  if (errors >= DIAG_MAX_ERRORS) {
    fprintf(out(), "tfmc: too many errors (%d), stopping\n", errors);
    stopped = 1;
  }
}

void diag_error_noloc(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  last_error_shown = 0;
  if (!stopped) {
    errors++;
    emit(DIAG_ERROR, (Span){0}, fmt, ap);
    last_error_shown = 1;
  }
  va_end(ap);
}

void diag_note(Span at, const char *fmt, ...) {
  if (!last_error_shown) return;
  va_list ap;
  va_start(ap, fmt);
  emit(DIAG_NOTE, at, fmt, ap);
  va_end(ap);
}

int diag_error_count(void) { return errors; }
int diag_stopped(void) { return stopped; }

void diag_reset(void) {
  errors = 0;
  stopped = 0;
  last_error_shown = 0;
  context_hook = NULL;
}
