/* JSON text built up in a growable buffer, for the language server's
 * replies. The caller writes the structure (commas included); strings are
 * escaped here. */
#ifndef TFM_JSON_WRITE_H
#define TFM_JSON_WRITE_H
#include <stddef.h>
#include <stdint.h>

typedef struct JsonBuf {
  char *text; /* NUL-terminated; malloc'd */
  size_t len, cap;
} JsonBuf;

void jb_raw(JsonBuf *b, const char *s);
void jb_printf(JsonBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal of s (control characters as \u00XX; invalid UTF-8
 * bytes as U+FFFD, so the reply stays valid JSON whatever the source holds). */
void jb_str(JsonBuf *b, const char *s);
void jb_strn(JsonBuf *b, const char *s, size_t n);
/* "key": (a comma first when the object already has a member, that is
 * when the last byte written is not '{'). */
void jb_key(JsonBuf *b, const char *key);
void jb_free(JsonBuf *b);

#endif
