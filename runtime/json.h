/* A small strict JSON parser (RFC 8259) for safetensors headers.
 *
 * Strict: valid UTF-8 only, no trailing commas, no comments, no duplicate
 * object keys, no NUL inside strings, nesting bounded by JSON_MAX_DEPTH so a
 * hostile file cannot exhaust the stack. */
#ifndef TFMRT_JSON_H
#define TFMRT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

typedef enum {
  JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT
} json_kind;

typedef struct json_value json_value;
struct json_value {
  json_kind kind;
  size_t offset;            /* where it starts in the text (a member: its key) */
  char *key;                /* member name when the parent is an object */
  char *string;             /* JSON_STRING, decoded and NUL-terminated */
  bool is_uint;             /* JSON_NUMBER that is an integer in [0, 2^64) */
  uint64_t uint;
  json_value *first_child;  /* JSON_ARRAY / JSON_OBJECT, in document order */
  json_value *next;
  size_t child_count;
};

/* Parses exactly one value (surrounded by optional whitespace) from text.
 * On failure returns nonzero with a description, "at byte N: ...", in error. */
int json_parse(const char *text, size_t size, json_value **root, char *error,
               size_t error_size);
void json_free(json_value *value);

const char *json_kind_name(json_kind kind);

/* Whether the bytes are well-formed UTF-8 (what a JSON string may hold). */
bool json_is_utf8(const char *text, size_t size);

/* Writes the bytes as a JSON string literal, quotes included: well-formed
 * UTF-8 as it is, a byte that is not part of it as the text "\xNN" (a
 * token of a byte vocabulary can be half a character), control characters
 * and '<' escaped (so the string may sit inside an HTML <script>). */
void json_write_string(FILE *out, const char *bytes, size_t size);

#endif
