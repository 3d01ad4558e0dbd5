/* The strict JSON parser behind safetensors headers: what it accepts, what
 * it refuses and why. */
#include "check.h"
#include "json.h"

#include <string.h>

static json_value *parse(const char *text) {
  char error[256];
  json_value *root = NULL;
  if (json_parse(text, strlen(text), &root, error, sizeof error)) {
    fprintf(stderr, "refused %s: %s\n", text, error);
    check_failures++;
    return NULL;
  }
  return root;
}

static void check_refused_json(const char *text, const char *reason) {
  char error[256];
  json_value *root = NULL;
  if (!json_parse(text, strlen(text), &root, error, sizeof error)) {
    fprintf(stderr, "accepted %s\n", text);
    check_failures++;
    json_free(root);
  } else if (!strstr(error, reason)) {
    fprintf(stderr, "refused %s with \"%s\", expected \"%s\"\n", text, error, reason);
    check_failures++;
  }
}

int main(void) {
  json_value *v = parse(" {\"a\": [1, 18446744073709551615, 18446744073709551616, -1, 2.5, 1e3],"
                        " \"b\": {\"c\": null, \"d\": true, \"e\": false},"
                        " \"s\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00fc\\ud83d\\ude00\"} ");
  if (v) {
    CHECK(v->kind == JSON_OBJECT && v->child_count == 3);
    const json_value *a = v->first_child, *b = a->next, *s = b->next;
    CHECK(strcmp(a->key, "a") == 0 && a->kind == JSON_ARRAY && a->child_count == 6);
    const json_value *n = a->first_child;
    CHECK(n->is_uint && n->uint == 1);
    CHECK(n->next->is_uint && n->next->uint == 18446744073709551615u);
    CHECK(!n->next->next->is_uint);                /* 2^64 does not fit */
    CHECK(!n->next->next->next->is_uint);          /* negative */
    CHECK(n->next->next->next->next->kind == JSON_NUMBER && !n->next->next->next->next->is_uint);
    CHECK(strcmp(b->key, "b") == 0 && b->child_count == 3);
    CHECK(b->first_child->kind == JSON_NULL && b->first_child->next->kind == JSON_TRUE);
    CHECK(strcmp(s->string, "x\"\\/\b\f\n\r\t\xc3\xbc\xf0\x9f\x98\x80") == 0);
  }
  json_free(v);
  v = parse("\"caf\xc3\xa9\"");
  CHECK(v && strcmp(v->string, "caf\xc3\xa9") == 0);
  json_free(v);

  check_refused_json("", "expected a value, found end of header");
  check_refused_json("{", "expected a string key, found end of header");
  check_refused_json("{\"a\":1,}", "at byte 7: expected a string key, found '}'");
  check_refused_json("[1,]", "expected a value");
  check_refused_json("[1 2]", "expected ',' or ']'");
  check_refused_json("{\"a\" 1}", "expected ':' after object key");
  check_refused_json("{\"a\":1}x", "expected end of header after the top-level value");
  check_refused_json("{\"a\":1,\"a\":2}", "at byte 7: duplicate key \"a\"");
  check_refused_json("[01]", "leading zero");
  check_refused_json("[1.]", "expected a digit after '.'");
  check_refused_json("[1e]", "expected a digit in the exponent");
  check_refused_json("[-]", "expected a digit");
  check_refused_json("[+1]", "expected a value, found '+'");
  check_refused_json("[nul]", "expected a value");
  check_refused_json("[\"abc]", "unterminated string");
  check_refused_json("[\"a\nb\"]", "control character 0x0A in string");
  check_refused_json("[\"\\x\"]", "invalid escape '\\x'");
  check_refused_json("[\"\\u12G4\"]", "bad hex digit");
  check_refused_json("[\"\\u0000\"]", "NUL character");
  check_refused_json("[\"\\udc00\"]", "lone low surrogate");
  check_refused_json("[\"\\ud800x\"]", "high surrogate without a low one");
  check_refused_json("[\"\xc3\"]", "invalid UTF-8");
  check_refused_json("[\"\xc0\xaf\"]", "invalid UTF-8");       /* overlong '/' */
  check_refused_json("[\"\xed\xa0\x80\"]", "invalid UTF-8");   /* UTF-8 surrogate */
  check_refused_json("[\"\xf4\x90\x80\x80\"]", "invalid UTF-8"); /* above U+10FFFF */
  check_refused_json("// comment\n{}", "expected a value");
  check_refused_json("{'a':1}", "expected a string key, found '''");

  char deep[128] = "";
  for (int i = 0; i < JSON_MAX_DEPTH; i++) strcat(deep, "[");
  for (int i = 0; i < JSON_MAX_DEPTH; i++) strcat(deep, "]");
  json_free(parse(deep));
  char deeper[128] = "[";
  strcat(deeper, deep);
  strcat(deeper, "]");
  check_refused_json(deeper, "nesting deeper than 32 levels");

  CHECK(json_is_utf8("plain \xc3\xbc \xe2\x82\xac \xf0\x9f\x98\x80", 17));
  CHECK(!json_is_utf8("\xff", 1));
  return check_result("json");
}
