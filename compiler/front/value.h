/* Compile-time values of the checker. Checking a .tfm program means running
 * it at compile time: config values, loop indices and shapes are known, and a
 * tensor is a value that knows its dtype and static shape (and, for every
 * dimension, where that number came from, for diagnostics). */
#ifndef TFM_VALUE_H
#define TFM_VALUE_H
#include <stdint.h>

#include "ast.h"

enum { MAX_RANK = 8 };

typedef enum DType { DT_F32, DT_F64, DT_I32, DT_BF16 } DType;
const char *dtype_name(DType dt);
int dtype_is_float(DType dt);

/* Where a compile-time number came from, in words with a location:
 * "d_model = 512 set at m.tfm:3:11, overridden by -D d_model=256". */
typedef struct Origin {
  Span at;
  const char *what;
  const char *name; /* the config key the number is, or NULL: "d_model" */
} Origin;

typedef struct TensorType {
  DType dtype;
  int rank;
  int64_t dims[MAX_RANK];
  const Origin *origin[MAX_RANK]; /* may be NULL */
} TensorType;

typedef enum ValueKind {
  V_ERROR,    /* already reported; consumers stay silent */
  V_INT, V_FLOAT, V_BOOL, V_STR,
  V_LIST,     /* items */
  V_TENSOR,   /* t */
  V_DTYPE,    /* dtype */
  V_FN,       /* def = N_FN */
  V_LAYER,    /* def = N_LAYER */
  V_INSTANCE, /* inst */
  V_TABLE,    /* items indexed by int key (NULL = absent): let name[i] = ... */
  V_BUILTIN,  /* builtin */
  V_INIT,     /* s = initialiser kind, items = its numeric arguments */
  V_OPTIM     /* s = optimizer kind, items = arguments as V_ENTRY-like pairs */
} ValueKind;

typedef struct Instance Instance;
typedef struct Scope Scope;

typedef struct Value {
  ValueKind kind;
  int64_t i;
  double f;
  const char *s;
  DType dtype;
  const Origin *origin; /* V_INT: where the number came from */
  PtrVec items;         /* Value* */
  PtrVec keys;          /* V_OPTIM: const char* names parallel to items */
  TensorType t;
  int32_t node;         /* V_TENSOR: its graph node when lowering (lower.h) */
  const Node *def;
  Instance *inst;
  int builtin;
} Value;

/* A parameter tensor of the model, with its dotted name. */
typedef struct Param {
  const char *name;
  TensorType type;
  Value *init;     /* V_INIT */
  Span at;
  Instance *owner;
} Param;

/* A layer instance: its parameters and sub-instances live in its scope. */
struct Instance {
  const char *path;     /* dotted prefix: "encoder.3.attn"; "" for the model */
  const Node *def;      /* N_LAYER (NULL for the model itself) */
  Scope *scope;
  const Node *forward;  /* N_FORWARD, or NULL */
  PtrVec params;        /* Param* declared directly here */
  PtrVec children;      /* Instance* */
  Span at;              /* where it was created */
  int calls;            /* of its fn (...) body so far: names the probes of each call */
};

Value *value_new(ValueKind kind);
Value *value_int(int64_t i, const Origin *origin);
Value *value_float(double f);
Value *value_bool(int b);
Value *value_str(const char *s);
Value *value_error(void);
const char *value_kind_name(const Value *v); /* "int", "tensor f32[2, 3]", ... */
const char *tensor_type_str(const TensorType *t);
int64_t tensor_numel(const TensorType *t);

#endif
