/* The server's loop: frames in, JSON-RPC requests and notifications
 * dispatched, the open documents kept and checked after each change,
 * answers and diagnostics out. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "server.h"

#include <stdlib.h>
#include <string.h>

#include "answers.h"
#include "checked.h"
#include "frame.h"
#include "json.h"

/* JSON-RPC and LSP error codes. */
enum {
  PARSE_ERROR = -32700, INVALID_REQUEST = -32600, METHOD_NOT_FOUND = -32601,
  INVALID_PARAMS = -32602, SERVER_NOT_INITIALIZED = -32002
};

typedef struct OpenDocument {
  Document doc;
  Analysis *analysis;
} OpenDocument;

typedef struct Server {
  FILE *out;
  CheckSettings settings; /* -D, --variant, -I: the command line's, then the client's */
  int initialized, shut_down, exit_requested, broken;
  OpenDocument *docs;
  int ndocs;
  char **owned; /* strings the options point at (from initializationOptions) */
  int nowned;
} Server;

static void send(Server *s, const JsonBuf *b) {
  if (frame_write(s->out, b->text, b->len)) s->broken = 1;
}

/* ------------------------------------------------------------------------ */
/* Reading the request's JSON                                                */

static const json_value *member(const json_value *v, const char *key) {
  if (!v || v->kind != JSON_OBJECT) return NULL;
  for (const json_value *c = v->first_child; c; c = c->next)
    if (!strcmp(c->key, key)) return c;
  return NULL;
}

static const char *string_at(const json_value *v, const char *key) {
  const json_value *m = member(v, key);
  return m && m->kind == JSON_STRING ? m->string : NULL;
}

/* A non-negative integer member (a line, a character, a version). */
static int count_at(const json_value *v, const char *key, long *out) {
  const json_value *m = member(v, key);
  if (!m || m->kind != JSON_NUMBER || !m->is_uint || m->uint > 0x7fffffff) return 0;
  *out = (long)m->uint;
  return 1;
}

/* The request's id as JSON text: a number or a string (null when absent). */
static void write_id(JsonBuf *b, const json_value *id, const char *body) {
  if (id && id->kind == JSON_STRING) {
    jb_str(b, id->string);
  } else if (id && id->kind == JSON_NUMBER) {
    /* as written (the parser keeps only unsigned integers' values): after
     * the member's key, which is where its offset points */
    const char *p = body + id->offset + 1;
    while (*p != '"') p += *p == '\\' ? 2 : 1;
    p += strspn(p + 1, " \t\r\n:") + 1;
    jb_printf(b, "%.*s", (int)strspn(p, "-+.eE0123456789"), p);
  } else {
    jb_raw(b, "null");
  }
}

static void reply_error(Server *s, const json_value *id, const char *body, int code,
                        const char *message) {
  JsonBuf b = {0};
  jb_raw(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
  write_id(&b, id, body);
  jb_printf(&b, ",\"error\":{\"code\":%d,\"message\":", code);
  jb_str(&b, message);
  jb_raw(&b, "}}");
  send(s, &b);
  jb_free(&b);
}

/* Sends {"id": id, "result": result} and frees result. */
static void reply(Server *s, const json_value *id, const char *body, JsonBuf *result) {
  JsonBuf b = {0};
  jb_raw(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
  write_id(&b, id, body);
  jb_raw(&b, ",\"result\":");
  jb_raw(&b, result->text ? result->text : "null");
  jb_raw(&b, "}");
  send(s, &b);
  jb_free(&b);
  jb_free(result);
}

static void notify(Server *s, const char *method, JsonBuf *params) {
  JsonBuf b = {0};
  jb_raw(&b, "{\"jsonrpc\":\"2.0\",\"method\":");
  jb_str(&b, method);
  jb_raw(&b, ",\"params\":");
  jb_raw(&b, params->text);
  jb_raw(&b, "}");
  send(s, &b);
  jb_free(&b);
  jb_free(params);
}

/* ------------------------------------------------------------------------ */
/* Documents                                                                 */

static OpenDocument *find_document(Server *s, const char *uri) {
  for (int i = 0; uri && i < s->ndocs; i++)
    if (!strcmp(s->docs[i].doc.uri, uri)) return &s->docs[i];
  return NULL;
}

/* Checks the document again and publishes what was found (an empty list
 * clears what the editor shows). */
static void check_and_publish(Server *s, OpenDocument *o) {
  analysis_free(o->analysis);
  o->analysis = analysis_run(&s->settings, o->doc.path, o->doc.text, o->doc.len);
  JsonBuf params = {0};
  answer_diagnostics(&params, &o->doc, o->analysis);
  notify(s, "textDocument/publishDiagnostics", &params);
  if (getenv("TFM_LSP_TIMING"))
    fprintf(stderr, "tfmc lsp: checked %s in %.1f ms\n", o->doc.path, o->analysis->milliseconds);
}

static const char *did_open(Server *s, const json_value *params) {
  const json_value *td = member(params, "textDocument");
  const char *uri = string_at(td, "uri"), *text = string_at(td, "text");
  long version = 0;
  if (!uri || !text) return "didOpen needs textDocument.uri and textDocument.text";
  count_at(td, "version", &version);
  OpenDocument *o = find_document(s, uri);
  if (!o) {
    s->docs = checked(realloc(s->docs, sizeof *s->docs * (size_t)(s->ndocs + 1)));
    o = &s->docs[s->ndocs++];
    *o = (OpenDocument){0};
    o->doc.uri = checked(strdup(uri));
    o->doc.path = doc_uri_to_path(uri);
  }
  doc_set_text(&o->doc, text, strlen(text));
  o->doc.version = version;
  check_and_publish(s, o);
  return NULL;
}

/* Full or ranged changes, applied in order. */
static const char *did_change(Server *s, const json_value *params) {
  const json_value *td = member(params, "textDocument");
  const json_value *changes = member(params, "contentChanges");
  OpenDocument *o = find_document(s, string_at(td, "uri"));
  if (!o) return "didChange for a document that is not open";
  if (!changes || changes->kind != JSON_ARRAY) return "didChange needs contentChanges";
  for (const json_value *c = changes->first_child; c; c = c->next) {
    const char *text = string_at(c, "text");
    if (!text) return "a content change without text";
    const json_value *r = member(c, "range");
    if (!r) {
      doc_set_text(&o->doc, text, strlen(text));
      continue;
    }
    long sl, sc, el, ec;
    const json_value *start = member(r, "start"), *end = member(r, "end");
    if (!count_at(start, "line", &sl) || !count_at(start, "character", &sc) ||
        !count_at(end, "line", &el) || !count_at(end, "character", &ec))
      return "a content change with a malformed range";
    doc_replace(&o->doc, sl, sc, el, ec, text, strlen(text));
  }
  count_at(td, "version", &o->doc.version);
  check_and_publish(s, o);
  return NULL;
}

static const char *did_close(Server *s, const json_value *params) {
  OpenDocument *o = find_document(s, string_at(member(params, "textDocument"), "uri"));
  if (!o) return "didClose for a document that is not open";
  JsonBuf cleared = {0};
  answer_diagnostics(&cleared, &o->doc, NULL);
  notify(s, "textDocument/publishDiagnostics", &cleared);
  analysis_free(o->analysis);
  doc_free(&o->doc);
  *o = s->docs[--s->ndocs];
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */

static char *own(Server *s, const char *text) {
  s->owned = checked(realloc(s->owned, sizeof *s->owned * (size_t)(s->nowned + 1)));
  return s->owned[s->nowned++] = checked(strdup(text));
}

static void add_to(const char ***list, int *n, const char *text) {
  *list = checked(realloc(*list, sizeof **list * (size_t)(*n + 1)));
  (*list)[(*n)++] = text;
}

/* initializationOptions: {"defines": [...], "variant": "...", "includeDirs": [...]}. */
static const char *take_options(Server *s, const json_value *o) {
  if (!o || o->kind == JSON_NULL) return NULL;
  if (o->kind != JSON_OBJECT) return "initializationOptions must be an object";
  const json_value *defines = member(o, "defines"), *dirs = member(o, "includeDirs");
  const json_value *variant = member(o, "variant");
  if ((defines && defines->kind != JSON_ARRAY) || (dirs && dirs->kind != JSON_ARRAY) ||
      (variant && variant->kind != JSON_STRING))
    return "initializationOptions: defines and includeDirs are lists of strings, variant a string";
  for (const json_value *d = defines ? defines->first_child : NULL; d; d = d->next)
    if (d->kind != JSON_STRING) return "initializationOptions.defines: each is a \"NAME=VALUE\" string";
  for (const json_value *d = dirs ? dirs->first_child : NULL; d; d = d->next)
    if (d->kind != JSON_STRING) return "initializationOptions.includeDirs: each is a folder";
  CheckSettings *c = &s->settings;
  for (const json_value *d = defines ? defines->first_child : NULL; d; d = d->next)
    add_to(&c->defines, &c->ndefines, own(s, d->string));
  for (const json_value *d = dirs ? dirs->first_child : NULL; d; d = d->next)
    add_to(&c->include_dirs, &c->ninclude_dirs, own(s, d->string));
  if (variant) c->variant = own(s, variant->string);
  return NULL;
}

static const char *initialize(Server *s, const json_value *params, JsonBuf *result) {
  const char *bad = take_options(s, member(params, "initializationOptions"));
  if (bad) return bad;
  s->initialized = 1;
  jb_raw(result,
         "{\"capabilities\":{\"positionEncoding\":\"utf-16\","
         "\"textDocumentSync\":{\"openClose\":true,\"change\":2},"
         "\"hoverProvider\":true,\"definitionProvider\":true,\"documentSymbolProvider\":true,"
         "\"completionProvider\":{\"triggerCharacters\":[\".\"]}},"
         "\"serverInfo\":{\"name\":\"tfmc lsp\",\"version\":\"" TFM_VERSION "\"}}");
  return NULL;
}

/* hover / definition: the document and the position the params name. */
static const char *at_position(Server *s, const json_value *params, OpenDocument **o, long *line,
                               long *character) {
  const json_value *p = member(params, "position");
  *o = find_document(s, string_at(member(params, "textDocument"), "uri"));
  if (!*o) return "the document is not open";
  if (!count_at(p, "line", line) || !count_at(p, "character", character))
    return "position needs line and character (non-negative integers)";
  return NULL;
}

/* The analyses of the open documents other than o. */
static const Analysis **others_of(Server *s, const OpenDocument *o, int *n) {
  const Analysis **list = checked(calloc((size_t)s->ndocs + 1, sizeof *list));
  *n = 0;
  for (int i = 0; i < s->ndocs; i++)
    if (&s->docs[i] != o && s->docs[i].analysis) list[(*n)++] = s->docs[i].analysis;
  return list;
}

static const char *request(Server *s, const char *method, const json_value *params,
                           JsonBuf *result, int *unknown) {
  OpenDocument *o;
  long line, character;
  const char *bad;
  if (!strcmp(method, "shutdown")) {
    s->shut_down = 1;
    jb_raw(result, "null");
  } else if (!strcmp(method, "textDocument/hover") || !strcmp(method, "textDocument/definition")) {
    if ((bad = at_position(s, params, &o, &line, &character))) return bad;
    int n;
    const Analysis **others = others_of(s, o, &n);
    if (method[13] == 'h') answer_hover(result, &o->doc, line, character, o->analysis, others, n);
    else answer_definition(result, &o->doc, line, character, o->analysis, others, n);
    free(others);
  } else if (!strcmp(method, "textDocument/documentSymbol")) {
    if (!(o = find_document(s, string_at(member(params, "textDocument"), "uri"))))
      return "the document is not open";
    answer_symbols(result, &o->doc, o->analysis);
  } else if (!strcmp(method, "textDocument/completion")) {
    if (!(o = find_document(s, string_at(member(params, "textDocument"), "uri"))))
      return "the document is not open";
    answer_completion(result, o->analysis);
  } else {
    *unknown = 1;
  }
  return NULL;
}

static const char *notification(Server *s, const char *method, const json_value *params) {
  if (!strcmp(method, "textDocument/didOpen")) return did_open(s, params);
  if (!strcmp(method, "textDocument/didChange")) return did_change(s, params);
  if (!strcmp(method, "textDocument/didClose")) return did_close(s, params);
  if (!strcmp(method, "exit")) s->exit_requested = 1;
  return NULL; /* initialized, didSave, $/cancelRequest, $/setTrace...: nothing to do */
}

/* A notification that cannot be carried out has nobody to answer: the
 * client's log (window/logMessage) is told instead. */
static void log_message(Server *s, const char *method, const char *problem) {
  JsonBuf params = {0};
  jb_raw(&params, "{\"type\":1,\"message\":");
  size_t n = strlen(method) + strlen(problem) + 32;
  char *text = checked(malloc(n));
  snprintf(text, n, "tfmc lsp: %s: %s", method, problem);
  jb_str(&params, text);
  free(text);
  jb_raw(&params, "}");
  notify(s, "window/logMessage", &params);
}

static void handle(Server *s, const char *body, size_t len) {
  json_value *root = NULL;
  char error[256];
  if (json_parse(body, len, &root, error, sizeof error)) {
    reply_error(s, NULL, body, PARSE_ERROR, error);
    return;
  }
  const json_value *id = member(root, "id");
  const char *method = string_at(root, "method");
  const json_value *params = member(root, "params");
  if (id && id->kind != JSON_NUMBER && id->kind != JSON_STRING) id = NULL;
  if (root->kind != JSON_OBJECT || !method) {
    /* a response to a request of ours (we send none) is dropped */
    if (!(root->kind == JSON_OBJECT && id && (member(root, "result") || member(root, "error"))))
      reply_error(s, id, body, INVALID_REQUEST, "a request is an object with a \"method\" string");
  } else if (id) {
    JsonBuf result = {0};
    int unknown = 0;
    const char *bad = NULL;
    if (!strcmp(method, "initialize")) {
      bad = s->initialized ? "initialize was already called" : initialize(s, params, &result);
    } else if (!s->initialized) {
      reply_error(s, id, body, SERVER_NOT_INITIALIZED, "the first request must be initialize");
      goto done;
    } else {
      bad = request(s, method, params, &result, &unknown);
    }
    if (unknown) {
      size_t n = strlen(method) + 32;
      char *text = checked(malloc(n));
      snprintf(text, n, "unknown method '%s'", method);
      reply_error(s, id, body, METHOD_NOT_FOUND, text);
      free(text);
      jb_free(&result);
    } else if (bad) {
      reply_error(s, id, body, INVALID_PARAMS, bad);
      jb_free(&result);
    } else {
      reply(s, id, body, &result);
    }
  } else if (s->initialized || !strcmp(method, "exit")) {
    const char *bad = notification(s, method, params);
    if (bad) log_message(s, method, bad);
  }
done:
  json_free(root);
}

int lsp_serve(FILE *in, FILE *out, const CheckSettings *base) {
  Server s = {.out = out};
  /* the lists grow with the client's: copies, not the caller's */
  CheckSettings *c = &s.settings;
  for (int i = 0; i < base->ndefines; i++) add_to(&c->defines, &c->ndefines, base->defines[i]);
  for (int i = 0; i < base->ninclude_dirs; i++)
    add_to(&c->include_dirs, &c->ninclude_dirs, base->include_dirs[i]);
  c->variant = base->variant;
  while (!s.exit_requested && !s.broken) {
    char *body, error[256];
    size_t len;
    FrameStatus st = frame_read(in, &body, &len, error, sizeof error);
    if (st == FRAME_EOF) break;
    if (st == FRAME_BAD) {
      reply_error(&s, NULL, "", PARSE_ERROR, error);
      continue;
    }
    handle(&s, body, len);
    free(body);
  }
  for (int i = 0; i < s.ndocs; i++) analysis_free(s.docs[i].analysis), doc_free(&s.docs[i].doc);
  for (int i = 0; i < s.nowned; i++) free(s.owned[i]);
  free(s.docs);
  free(s.owned);
  free(c->defines);
  free(c->include_dirs);
  return s.shut_down && s.exit_requested ? 0 : 1;
}
