/* The checker's evaluation context, shared by the evaluator (sema*.c) and
 * the built-in functions (builtins.c): bindings, scopes, a call's
 * arguments and the context of a body. */
#ifndef TFM_SCOPE_H
#define TFM_SCOPE_H
#include "value.h"

typedef enum BindingKind {
  B_LET, B_PARAM, B_ARG, B_LOOP, B_INPUT, B_INSTANCE, B_SHAPEVAR, B_BUILTIN
} BindingKind;

typedef struct Binding {
  const char *name;
  Value *value;
  Span at;
  BindingKind kind;
} Binding;

/* Names visible in a body. A lazy scope (config, train) evaluates each of
 * its entries on first use, which allows any order and finds cycles. */
struct Scope {
  Scope *parent;
  NameMap names;       /* Binding* */
  PtrVec *lazy;        /* ConfigEntry*, or NULL */
  NameMap lazy_index;  /* name -> ConfigEntry* */
  int is_global;       /* the scope of fn and layer items */
};

/* One evaluated argument of a call. */
typedef struct Arg {
  const char *name; /* keyword, or NULL */
  Value *value;
  const Node *node; /* the value's expression */
  Span at;          /* the whole argument, from its keyword if it has one */
} Arg;

/* source(name, shape) in a pretrained block (sema_pretrained.c): `declare`
 * records the tensor `name` of the other tool's checkpoint with type t and
 * returns its graph node (GRAPH_NONE when not lowering), or reports a
 * conflict at `at` and returns -2. `hint` is the type of the parameter the
 * call's value is assigned to whole, for a source() given no shape. */
typedef struct SourceHook {
  int32_t (*declare)(struct SourceHook *self, const char *name, const TensorType *t, Span at);
  const TensorType *hint;
} SourceHook;

/* The evaluation context of a body. */
typedef struct Ctx {
  Scope *scope;
  Instance *inst;     /* where `param` and `let x = layer(...)` go; NULL in fn bodies */
  Instance *body_of;  /* a layer's fn (...) body: its `output NAME = ...` are probes */
  int allow_io;       /* model body: input/output allowed */
  const char *where;  /* "fn gelu", "layer mha", "model gpt": for messages */
  Value *returned;    /* set by `return` */
  const Node *returned_at; /* its expression, for messages about the result */
  SourceHook *source; /* a pretrained block's body: source() reads its checkpoint */
} Ctx;

#endif
