#include "ast.h"

#include "diag.h"

static int depth_reported_file; /* one "nested too deeply" error per file */

Node *ast_new(NodeKind kind, Span span) {
  Node *n = pool_alloc(sizeof *n);
  n->kind = kind;
  n->span = span;
  n->depth = 1;
  return n;
}

/* A child that would make its parent deeper than the limit is replaced by
 * N_ERROR (reported once per file), so no tree ever passes AST_MAX_DEPTH. */
static Node *bounded(Node *child) {
  if (!child || child->depth < AST_MAX_DEPTH) return child;
  if (depth_reported_file != child->span.file) {
    depth_reported_file = child->span.file;
    diag_error(child->span, "program is nested too deeply (more than %d levels)",
               AST_MAX_DEPTH);
  }
  return ast_new(N_ERROR, child->span);
}

static void grow_depth(Node *parent, const Node *child) {
  if (child && child->depth + 1 > parent->depth) parent->depth = child->depth + 1;
}

Node *ast_node3(NodeKind kind, Span span, Node *a, Node *b, Node *c) {
  Node *n = ast_new(kind, span);
  n->a = bounded(a);
  n->b = bounded(b);
  n->c = bounded(c);
  grow_depth(n, n->a);
  grow_depth(n, n->b);
  grow_depth(n, n->c);
  return n;
}

void ast_push(Node *parent, PtrVec *list, Node *child) {
  child = bounded(child);
  vec_push(list, child);
  grow_depth(parent, child);
}

const char *op_text(Op op) {
  static const char *const text[] = {
      [OP_ADD] = "+",  [OP_SUB] = "-",  [OP_MUL] = "*",   [OP_DIV] = "/",
      [OP_IDIV] = "//", [OP_MOD] = "%", [OP_POW] = "**",  [OP_MATMUL] = "@",
      [OP_EQ] = "==",  [OP_NE] = "!=",  [OP_LT] = "<",    [OP_LE] = "<=",
      [OP_GT] = ">",   [OP_GE] = ">=",  [OP_AND] = "and", [OP_OR] = "or",
      [OP_NEG] = "-",  [OP_NOT] = "not", [OP_PLUS] = "+"};
  return text[op];
}

const char *node_kind_name(NodeKind kind) {
  static const char *const names[] = {
      [N_INT] = "int", [N_FLOAT] = "float", [N_STRING] = "string", [N_BOOL] = "bool",
      [N_NAME] = "name", [N_ELLIPSIS] = "ellipsis", [N_UNARY] = "unary",
      [N_BINARY] = "binary", [N_CALL] = "call", [N_ARG] = "arg", [N_MEMBER] = "member",
      [N_INDEX] = "index", [N_LIST] = "list", [N_TYPE] = "type", [N_LET] = "let",
      [N_ASSIGN] = "assign", [N_SET] = "set", [N_PARAM] = "param", [N_INPUT] = "input",
      [N_OUTPUT] = "output", [N_IF] = "if", [N_FOR] = "for", [N_RETURN] = "return",
      [N_ASSERT] = "assert", [N_FORWARD] = "forward", [N_BLOCK] = "block",
      [N_IMPORT] = "import", [N_CONFIG] = "config", [N_VARIANT] = "variant",
      [N_ENTRY] = "entry", [N_FN] = "fn", [N_LAYER] = "layer", [N_MODEL] = "model",
      [N_TRAIN] = "train", [N_PRETRAINED] = "pretrained", [N_PARAMDEF] = "paramdef", [N_PROGRAM] = "program",
      [N_ERROR] = "error"};
  return names[kind];
}

void ast_reset(void) { depth_reported_file = 0; }

void ast_set_type(Node *n, Node *type) {
  n->t = bounded(type);
  grow_depth(n, n->t);
}
