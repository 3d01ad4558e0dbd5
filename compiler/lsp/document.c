#define _POSIX_C_SOURCE 200809L /* strdup */
#include "document.h"
#include "checked.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The byte where a 0-based line starts (len when there are fewer lines). */
static size_t line_start(const char *text, size_t len, long line) {
  size_t at = 0;
  for (long l = 0; l < line && at < len; at++)
    if (text[at] == '\n') l++;
  return at;
}

/* UTF-16 units of the UTF-8 sequence that starts with byte c; a stray
 * continuation byte counts as one (the editor would show U+FFFD). */
static int units_of(unsigned char c, int *bytes) {
  *bytes = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  return c >= 0xF0 ? 2 : 1;
}

size_t doc_offset(const char *text, size_t len, long line, long character) {
  size_t at = line_start(text, len, line < 0 ? 0 : line);
  long units = 0;
  while (at < len && text[at] != '\n' && units < character) {
    int bytes;
    units += units_of((unsigned char)text[at], &bytes);
    for (int i = 0; i < bytes && at < len && text[at] != '\n'; i++) at++;
  }
  return at;
}

int doc_byte_col(const char *text, size_t len, long line, long character) {
  return (int)(doc_offset(text, len, line, character) - line_start(text, len, line < 0 ? 0 : line)) + 1;
}

long doc_character(const char *text, size_t len, int line, int byte_col) {
  size_t at = line_start(text, len, line - 1), end = at + (byte_col > 0 ? (size_t)byte_col - 1 : 0);
  long units = 0;
  while (at < end && at < len && text[at] != '\n') {
    int bytes;
    units += units_of((unsigned char)text[at], &bytes);
    at += (size_t)bytes;
  }
  return units;
}

void doc_set_text(Document *d, const char *text, size_t len) {
  char *t = checked(malloc(len + 1));
  memcpy(t, text, len);
  t[len] = 0;
  free(d->text);
  d->text = t;
  d->len = len;
}

void doc_replace(Document *d, long start_line, long start_char, long end_line, long end_char,
                 const char *with, size_t with_len) {
  size_t a = doc_offset(d->text, d->len, start_line, start_char);
  size_t b = doc_offset(d->text, d->len, end_line, end_char);
  if (b < a) b = a;
  size_t len = d->len - (b - a) + with_len;
  char *t = checked(malloc(len + 1));
  memcpy(t, d->text, a);
  memcpy(t + a, with, with_len);
  memcpy(t + a + with_len, d->text + b, d->len - b);
  t[len] = 0;
  free(d->text);
  d->text = t;
  d->len = len;
}

static int hex(int c) { return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10; }

char *doc_uri_to_path(const char *uri) {
  if (strncmp(uri, "file://", 7)) return checked(strdup(uri));
  const char *s = uri + 7;
  if (*s != '/') s = strchr(s, '/') ? strchr(s, '/') : s + strlen(s); /* file://host/path */
  char *out = checked(malloc(strlen(s) + 1)), *o = out;
  for (; *s; s++) {
    if (*s == '%' && isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2])) {
      int c = hex((unsigned char)s[1]) * 16 + hex((unsigned char)s[2]);
      if (c) *o++ = (char)c; /* a %00 would cut the path short: dropped */
      s += 2;
    } else {
      *o++ = *s;
    }
  }
  *o = 0;
  return out;
}

char *doc_path_to_uri(const char *path) {
  char *out = checked(malloc(strlen(path) * 3 + 8)), *o = out;
  o += sprintf(o, "file://");
  for (const unsigned char *s = (const unsigned char *)path; *s; s++) {
    if (isalnum(*s) || strchr("/-._~", *s)) *o++ = (char)*s;
    else o += sprintf(o, "%%%02X", *s);
  }
  *o = 0;
  return out;
}

void doc_free(Document *d) {
  free(d->uri);
  free(d->path);
  free(d->text);
  *d = (Document){0};
}
