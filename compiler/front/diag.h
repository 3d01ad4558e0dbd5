/* Diagnostics in gcc form: "file:line:col: error: message", the source line,
 * a caret under the span, then "note:" lines. Output goes to stderr (or a
 * stream set with diag_set_stream). After DIAG_MAX_ERRORS errors the front end
 * stops: diag_stopped() becomes true and later diagnostics are dropped. */
#ifndef TFM_DIAG_H
#define TFM_DIAG_H
#include <stdio.h>

#include "source.h"

enum { DIAG_MAX_ERRORS = 20 };

void diag_error(Span at, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_note(Span at, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An error with no source position (command line, I/O): "tfmc: error: ...". */
void diag_error_noloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Called with the error's span after each error's source line, to add
 * context notes (the checker uses it to show the chain of inlined calls that
 * led to the error). */
void diag_set_context_hook(void (*hook)(Span at));
/* Receives every error and note as it is reported (besides the stream),
 * with its message text (in the pool): how the language server collects
 * them. NULL: none. diag_reset keeps it. */
typedef enum DiagKind { DIAG_ERROR, DIAG_NOTE } DiagKind;
typedef void (*DiagSink)(void *user, DiagKind kind, Span at, const char *message);
void diag_set_sink(DiagSink sink, void *user);
int diag_error_count(void);
int diag_stopped(void);
void diag_set_stream(FILE *out);
void diag_reset(void);

#endif
