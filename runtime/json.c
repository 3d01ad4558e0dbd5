/* Recursive-descent JSON parser into a tree of json_value. */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const unsigned char *text;
  size_t size, pos;
  char *error;
  size_t error_size;
} parser;

static int parse_value(parser *p, size_t depth, json_value **out);

__attribute__((format(printf, 3, 4)))
static int fail_at(parser *p, size_t offset, const char *fmt, ...) {
  int used = snprintf(p->error, p->error_size, "at byte %zu: ", offset);
  if (used >= 0 && (size_t)used < p->error_size) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(p->error + used, p->error_size - (size_t)used, fmt, args);
    va_end(args);
  }
  return 1;
}

/* What is at the cursor, for "expected X, found Y" messages. */
static const char *describe_next(const parser *p, char *buf, size_t size) {
  if (p->pos >= p->size) return "end of header";
  unsigned char c = p->text[p->pos];
  if (c >= 0x20 && c < 0x7F) snprintf(buf, size, "'%c'", c);
  else snprintf(buf, size, "byte 0x%02X", c);
  return buf;
}

static int expected(parser *p, const char *what) {
  char buf[16];
  return fail_at(p, p->pos, "expected %s, found %s", what, describe_next(p, buf, sizeof buf));
}

static void skip_whitespace(parser *p) {
  while (p->pos < p->size) {
    unsigned char c = p->text[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

static bool consume(parser *p, char c) {
  if (p->pos < p->size && p->text[p->pos] == (unsigned char)c) {
    p->pos++;
    return true;
  }
  return false;
}

static bool consume_word(parser *p, const char *word) {
  size_t len = strlen(word);
  if (p->size - p->pos < len || memcmp(p->text + p->pos, word, len) != 0) return false;
  p->pos += len;
  return true;
}

static json_value *new_value(parser *p, json_kind kind, size_t offset) {
  json_value *v = calloc(1, sizeof *v);
  if (!v) fail_at(p, offset, "out of memory");
  else {
    v->kind = kind;
    v->offset = offset;
  }
  return v;
}

static int hex_digit(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int parse_hex4(parser *p, unsigned *out) {
  if (p->size - p->pos < 4) return fail_at(p, p->pos, "truncated \\u escape");
  unsigned value = 0;
  for (int i = 0; i < 4; i++) {
    int d = hex_digit(p->text[p->pos + (size_t)i]);
    if (d < 0) return fail_at(p, p->pos, "bad hex digit in \\u escape");
    value = value * 16 + (unsigned)d;
  }
  p->pos += 4;
  *out = value;
  return 0;
}

static size_t encode_utf8(unsigned cp, char *out) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Length of the well-formed UTF-8 sequence at s (no overlongs, no surrogates,
 * nothing above U+10FFFF), or 0 when it is not one. */
static size_t utf8_sequence_length(const unsigned char *s, size_t avail) {
  unsigned char c = s[0];
  size_t len;
  unsigned cp;
  if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
  else return 0;
  if (avail < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

static int parse_escape(parser *p, char *out, size_t *len) {
  size_t start = p->pos - 1;
  if (p->pos >= p->size) return fail_at(p, start, "unterminated string");
  unsigned char c = p->text[p->pos++];
  const char *simple = strchr("\"\\/bfnrt", c);
  if (c != 'u') {
    if (!simple || c == '\0') return fail_at(p, start, "invalid escape '\\%c'", c);
    static const char replacements[] = "\"\\/\b\f\n\r\t";
    out[0] = replacements[simple - "\"\\/bfnrt"];
    *len = 1;
    return 0;
  }
  unsigned cp;
  if (parse_hex4(p, &cp)) return 1;
  if (cp >= 0xDC00 && cp <= 0xDFFF) return fail_at(p, start, "lone low surrogate in \\u escape");
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    unsigned low;
    if (!consume_word(p, "\\u")) return fail_at(p, start, "high surrogate without a low one");
    if (parse_hex4(p, &low)) return 1;
    if (low < 0xDC00 || low > 0xDFFF) return fail_at(p, start, "high surrogate without a low one");
    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
  }
  if (cp == 0) return fail_at(p, start, "NUL character (\\u0000) in string");
  *len = encode_utf8(cp, out);
  return 0;
}

static int parse_string(parser *p, char **out) {
  size_t start = p->pos;
  if (!consume(p, '"')) return expected(p, "'\"'");
  /* Decoded text is never longer than the source text. */
  size_t end = p->pos;
  while (end < p->size && p->text[end] != '"') end += p->text[end] == '\\' ? 2 : 1;
  char *s = malloc(end - p->pos + 1);
  if (!s) return fail_at(p, start, "out of memory");
  size_t len = 0;
  for (;;) {
    if (p->pos >= p->size) {
      free(s);
      return fail_at(p, start, "unterminated string");
    }
    unsigned char c = p->text[p->pos];
    if (c == '"') { p->pos++; break; }
    if (c < 0x20) {
      free(s);
      return fail_at(p, p->pos, "control character 0x%02X in string", c);
    }
    if (c == '\\') {
      p->pos++;
      size_t n = 0;
      if (parse_escape(p, s + len, &n)) { free(s); return 1; }
      len += n;
    } else if (c < 0x80) {
      s[len++] = (char)c;
      p->pos++;
    } else {
      size_t n = utf8_sequence_length(p->text + p->pos, p->size - p->pos);
      if (n == 0) {
        free(s);
        return fail_at(p, p->pos, "invalid UTF-8 in string");
      }
      memcpy(s + len, p->text + p->pos, n);
      len += n;
      p->pos += n;
    }
  }
  s[len] = '\0';
  *out = s;
  return 0;
}

static bool is_digit(const parser *p) {
  return p->pos < p->size && p->text[p->pos] >= '0' && p->text[p->pos] <= '9';
}

static int parse_number(parser *p, json_value *v) {
  bool negative = consume(p, '-');
  if (!is_digit(p)) return expected(p, "a digit");
  bool fits = true;
  uint64_t value = 0;
  if (consume(p, '0')) {
    if (is_digit(p)) return fail_at(p, v->offset, "number with a leading zero");
  } else {
    while (is_digit(p)) {
      unsigned d = p->text[p->pos++] - '0';
      if (value > (UINT64_MAX - d) / 10) fits = false;
      value = value * 10 + d;
    }
  }
  bool integer = true;
  if (consume(p, '.')) {
    integer = false;
    if (!is_digit(p)) return expected(p, "a digit after '.'");
    while (is_digit(p)) p->pos++;
  }
  if (consume(p, 'e') || consume(p, 'E')) {
    integer = false;
    if (!consume(p, '+')) consume(p, '-');
    if (!is_digit(p)) return expected(p, "a digit in the exponent");
    while (is_digit(p)) p->pos++;
  }
  v->is_uint = integer && fits && !negative;
  v->uint = v->is_uint ? value : 0;
  return 0;
}

static int compare_keys(const void *a, const void *b) {
  return strcmp((*(json_value *const *)a)->key, (*(json_value *const *)b)->key);
}

static int check_unique_keys(parser *p, json_value *object) {
  if (object->child_count < 2) return 0;
  json_value **members = malloc(object->child_count * sizeof *members);
  if (!members) return fail_at(p, object->offset, "out of memory");
  size_t n = 0;
  for (json_value *m = object->first_child; m; m = m->next) members[n++] = m;
  qsort(members, n, sizeof *members, compare_keys);
  for (size_t i = 1; i < n; i++) {
    if (strcmp(members[i - 1]->key, members[i]->key) == 0) {
      json_value *later = members[i - 1]->offset > members[i]->offset ? members[i - 1] : members[i];
      char key[80];
      snprintf(key, sizeof key, "%s", later->key);
      free(members);
      return fail_at(p, later->offset, "duplicate key \"%s\"", key);
    }
  }
  free(members);
  return 0;
}

/* Arrays and objects: `close` ends the list; objects have "key": before each. */
static int parse_container(parser *p, size_t depth, json_value *v, char close) {
  bool is_object = v->kind == JSON_OBJECT;
  json_value **tail = &v->first_child;
  skip_whitespace(p);
  if (consume(p, close)) return 0;
  for (;;) {
    char *key = NULL;
    size_t key_offset = 0;
    if (is_object) {
      skip_whitespace(p);
      key_offset = p->pos;
      if (p->pos >= p->size || p->text[p->pos] != '"') return expected(p, "a string key");
      if (parse_string(p, &key)) return 1;
      skip_whitespace(p);
      if (!consume(p, ':')) {
        free(key);
        return expected(p, "':' after object key");
      }
    }
    json_value *child = NULL;
    if (parse_value(p, depth + 1, &child)) {
      json_free(child);
      free(key);
      return 1;
    }
    if (is_object) {
      child->key = key;
      child->offset = key_offset;
    }
    *tail = child;
    tail = &child->next;
    v->child_count++;
    skip_whitespace(p);
    if (consume(p, close)) break;
    if (!consume(p, ',')) return expected(p, close == '}' ? "',' or '}'" : "',' or ']'");
  }
  return is_object ? check_unique_keys(p, v) : 0;
}

static int parse_value(parser *p, size_t depth, json_value **out) {
  skip_whitespace(p);
  size_t start = p->pos;
  if (depth > JSON_MAX_DEPTH)
    return fail_at(p, start, "nesting deeper than %d levels", JSON_MAX_DEPTH);
  if (p->pos >= p->size) return expected(p, "a value");
  unsigned char c = p->text[p->pos];
  json_kind kind;
  if (c == '{') kind = JSON_OBJECT;
  else if (c == '[') kind = JSON_ARRAY;
  else if (c == '"') kind = JSON_STRING;
  else if (c == '-' || (c >= '0' && c <= '9')) kind = JSON_NUMBER;
  else if (consume_word(p, "null")) kind = JSON_NULL;
  else if (consume_word(p, "true")) kind = JSON_TRUE;
  else if (consume_word(p, "false")) kind = JSON_FALSE;
  else return expected(p, "a value");
  json_value *v = new_value(p, kind, start);
  if (!v) return 1;
  *out = v;  /* owned by the caller from here on, even on failure */
  switch (kind) {
    case JSON_OBJECT: p->pos++; return parse_container(p, depth, v, '}');
    case JSON_ARRAY: p->pos++; return parse_container(p, depth, v, ']');
    case JSON_STRING: return parse_string(p, &v->string);
    case JSON_NUMBER: return parse_number(p, v);
    default: return 0;
  }
}

int json_parse(const char *text, size_t size, json_value **root, char *error,
               size_t error_size) {
  parser p = {(const unsigned char *)text, size, 0, error, error_size};
  json_value *v = NULL;
  if (parse_value(&p, 1, &v)) {
    json_free(v);
    return 1;
  }
  skip_whitespace(&p);
  if (p.pos != p.size) {
    json_free(v);
    return expected(&p, "end of header after the top-level value");
  }
  *root = v;
  return 0;
}

void json_free(json_value *value) {
  if (!value) return;
  json_value *child = value->first_child;
  while (child) {
    json_value *next = child->next;
    json_free(child);
    child = next;
  }
  free(value->key);
  free(value->string);
  free(value);
}

const char *json_kind_name(json_kind kind) {
  static const char *const names[] = {"null", "false", "true", "a number", "a string",
                                      "an array", "an object"};
  return names[kind];
}

bool json_is_utf8(const char *text, size_t size) {
  const unsigned char *s = (const unsigned char *)text;
  for (size_t i = 0; i < size;) {
    size_t n = s[i] < 0x80 ? 1 : utf8_sequence_length(s + i, size - i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void json_write_string(FILE *out, const char *bytes, size_t size) {
  const unsigned char *s = (const unsigned char *)bytes;
  fputc('"', out);
  for (size_t i = 0; i < size;) {
    unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : utf8_sequence_length(s + i, size - i);
    if (n == 0) {
      fprintf(out, "\\\\x%02x", c);
      i++;
    } else if (n > 1) {
      fwrite(s + i, 1, n, out);
      i += n;
    } else if (c == '"' || c == '\\') {
      fprintf(out, "\\%c", c);
      i++;
    } else if (c < 0x20 || c == '<' || c == 0x7f) {
      fprintf(out, "\\u%04x", c);
      i++;
    } else {
      fputc(c, out);
      i++;
    }
  }
  fputc('"', out);
}
