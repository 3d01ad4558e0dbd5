/* Shared between the checker's files (sema.c, builtins.c, shape.c, front.c). */
#ifndef TFM_SEMA_INTERNAL_H
#define TFM_SEMA_INTERNAL_H
#include "diag.h"
#include "sema.h"

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

/* The evaluation context of a body. */
typedef struct Ctx {
  Scope *scope;
  Instance *inst;     /* where `param` and `let x = layer(...)` go; NULL in fn bodies */
  int allow_io;       /* model body: input/output allowed */
  const char *where;  /* "fn gelu", "layer mha", "model gpt": for messages */
  Value *returned;    /* set by `return` */
  const Node *returned_at; /* its expression, for messages about the result */
} Ctx;

/* --- sema.c ---------------------------------------------------------------- */
extern CheckedModel *sema_model;     /* the model being checked */
extern const FrontOptions *sema_opt;
Value *eval_expr(Ctx *ctx, const Node *n);
/* Describes an expression for messages: its source text when short. */
const char *expr_text(const Node *n);
/* Whether `name` is close enough to `cand` to be a likely typo of it. */
int name_is_typo_of(const char *name, const char *cand);
/* A compile-time int from a value, reporting an error with `what` otherwise. */
int want_int(const Value *v, const Node *n, const char *what, int64_t *out);

/* --- shape.c --------------------------------------------------------------- */
/* Notes naming where each dimension of a tensor came from. */
void note_dims(const Node *n, const TensorType *t, int axis);
int broadcast_types(const TensorType *a, const TensorType *b, TensorType *out, int *bad_a,
                    int *bad_b);
/* Normalises a possibly negative axis; reports and returns -1 when out of range. */
int norm_axis(int64_t axis, int rank, const Node *at, const char *fn);
/* Checks a dimension value (positive, bounded). */
int check_dim(int64_t d, const Node *at);
int check_numel(const TensorType *t, const Node *at);
Value *tensor_value(const TensorType *t);
/* The tensor result of an operator between tensors and/or numbers. */
Value *tensor_binary(Op op, Value *a, Value *b, const Node *an, const Node *bn, const Node *at);
Value *tensor_matmul(Value *a, Value *b, const Node *an, const Node *bn, const Node *at);
/* Numbers become tensors of `dt` (rank 0) when mixed with tensors. */
int scalar_to_tensor(Value *v, DType dt, const Node *at, TensorType *out);

/* --- builtins.c ------------------------------------------------------------ */
/* Looks up a built-in name (functions, dtypes, initialisers, constants). */
Value *builtin_lookup(const char *name);
Value *builtin_call(Ctx *ctx, const Value *fn, const Node *call, Arg *args, int nargs);
const char *builtin_name(int id);

/* --- front.c --------------------------------------------------------------- */
/* Loads the root file and its imports; fills sema_model->programs. Returns
 * 0 after a syntax error or a failed import: checking a partial program
 * would only report the names it lost. (Too-deep nesting is not counted:
 * the tree is whole, with an N_ERROR in place of the deep part.) */
int front_load(const FrontOptions *opt, CheckedModel *m);

#endif
