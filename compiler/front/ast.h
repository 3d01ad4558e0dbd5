/* The syntax tree of a .tfm program. One Node type for every construct; the
 * comment on each kind says which fields it uses. Lists are PtrVec of Node*. */
#ifndef TFM_AST_H
#define TFM_AST_H
#include <stdint.h>
#include <stdio.h>

#include "pool.h"
#include "source.h"

/* Deeper trees are refused with a diagnostic, so that every recursive walk
 * over the tree (checker, printer) stays far from the C stack's limit. */
enum { AST_MAX_DEPTH = 256 };

typedef enum NodeKind {
  /* expressions */
  N_INT,      /* ival */
  N_FLOAT,    /* fval */
  N_STRING,   /* sval */
  N_BOOL,     /* ival */
  N_NAME,     /* name */
  N_ELLIPSIS, /* "..." inside a tensor type's dimension list */
  N_UNARY,    /* op, a */
  N_BINARY,   /* op, a, b */
  N_CALL,     /* a = callee, list = args (N_ARG) */
  N_ARG,      /* name (NULL when positional), a = value */
  N_MEMBER,   /* a . name */
  N_INDEX,    /* a [ b ] */
  N_LIST,     /* [ list ] */
  N_TYPE,     /* name = dtype or int/float/bool/str; b = dims (N_LIST; NULL: scalar) */
  /* statements */
  N_LET,      /* name, b = index (or NULL), a = value */
  N_ASSIGN,   /* name, a = value */
  N_SET,      /* a = target (N_MEMBER: instance.param), b = value; pretrained blocks */
  N_PARAM,    /* list = names (N_NAME), t = type, a = initialiser (or NULL) */
  N_INPUT,    /* name, t = type */
  N_OUTPUT,   /* name, a = value (or NULL: mark an existing name) */
  N_IF,       /* a = condition, b = then (N_BLOCK), c = else (N_BLOCK/N_IF/NULL) */
  N_FOR,      /* name = variable, a = from, b = to, c = body (N_BLOCK) */
  N_RETURN,   /* a */
  N_ASSERT,   /* a = condition, b = message (N_STRING or NULL) */
  N_FORWARD,  /* a layer's "fn (...) -> T { }": params, t = result type, c = body */
  N_BLOCK,    /* list = statements */
  /* items */
  N_IMPORT,   /* sval = path */
  N_CONFIG,   /* list = entries (N_ENTRY) */
  N_VARIANT,  /* name, list = entries */
  N_ENTRY,    /* name, a = value */
  N_FN,       /* name, params, t = result type (or NULL), c = body */
  N_LAYER,    /* name, params, c = body (N_BLOCK) */
  N_MODEL,    /* name, c = body */
  N_TRAIN,    /* list = entries */
  N_PRETRAINED, /* name, c = body (N_BLOCK): how another tool's tensors become the params */
  N_PARAMDEF, /* name, t = type (or NULL), a = default (or NULL) */
  N_PROGRAM,  /* list = items */
  N_ERROR     /* stands for a construct that already had a diagnostic */
} NodeKind;

typedef enum Op {
  OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_IDIV, OP_MOD, OP_POW, OP_MATMUL,
  OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_AND, OP_OR,
  OP_NEG, OP_NOT, OP_PLUS
} Op;

typedef struct Node Node;
struct Node {
  NodeKind kind;
  Span span;
  int depth;           /* height of the subtree; see AST_MAX_DEPTH */
  Op op;
  int64_t ival;
  double fval;
  const char *sval;
  const char *name;
  Node *a, *b, *c, *t;
  PtrVec list;
  PtrVec params;       /* N_PARAMDEF */
};

Node *ast_new(NodeKind kind, Span span);
/* Sets a, b, c and recomputes depth; reports a too-deep tree once per file. */
Node *ast_node3(NodeKind kind, Span span, Node *a, Node *b, Node *c);
void ast_push(Node *parent, PtrVec *list, Node *child);
void ast_set_type(Node *n, Node *type); /* sets n->t, keeping depth bounded */
const char *op_text(Op op);
const char *node_kind_name(NodeKind kind);
void ast_reset(void);

/* Prints the tree as an indented outline (tfmc emit ast). */
void ast_print(const Node *n, FILE *out);

#endif
