#include "json_write.h"
#include "checked.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(JsonBuf *b, size_t more) {
  if (b->len + more + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + more + 1) cap *= 2;
  b->text = checked(realloc(b->text, cap));
  b->cap = cap;
}

static void put(JsonBuf *b, const char *s, size_t n) {
  reserve(b, n);
  memcpy(b->text + b->len, s, n);
  b->len += n;
  b->text[b->len] = 0;
}

void jb_raw(JsonBuf *b, const char *s) { put(b, s, strlen(s)); }

void jb_printf(JsonBuf *b, const char *fmt, ...) {
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  reserve(b, (size_t)n);
  vsnprintf(b->text + b->len, (size_t)n + 1, fmt, again);
  va_end(again);
  b->len += (size_t)n;
}

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_length(const unsigned char *s, size_t n) {
  size_t len = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
  if (!len || len > n) return 0;
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if (len == 3 && s[0] == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
  if (len == 3 && s[0] == 0xED && s[1] >= 0xA0) return 0; /* surrogates */
  if (len == 4 && s[0] == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
  if (len == 4 && s[0] == 0xF4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
  return len;
}

void jb_strn(JsonBuf *b, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  put(b, "\"", 1);
  for (size_t i = 0; i < n;) {
    unsigned char c = u[i];
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      put(b, esc, 2);
      i++;
    } else if (c < 0x20) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(b, esc, 6);
      i++;
    } else if (c < 0x80) {
      put(b, (const char *)u + i, 1);
      i++;
    } else {
      size_t len = utf8_length(u + i, n - i);
      if (len) put(b, (const char *)u + i, len), i += len;
      else put(b, "\\ufffd", 6), i++;
    }
  }
  put(b, "\"", 1);
}

void jb_str(JsonBuf *b, const char *s) { jb_strn(b, s, strlen(s)); }

void jb_key(JsonBuf *b, const char *key) {
  if (b->len && b->text[b->len - 1] != '{') put(b, ",", 1);
  jb_str(b, key);
  put(b, ":", 1);
}

void jb_free(JsonBuf *b) {
  free(b->text);
  *b = (JsonBuf){0};
}
