#include "value.h"

#include <stdio.h>

const char *dtype_name(DType dt) {
  static const char *const names[] = {"f32", "f64", "i32", "bf16"};
  return names[dt];
}

int dtype_is_float(DType dt) { return dt != DT_I32; }

Value *value_new(ValueKind kind) {
  Value *v = pool_alloc(sizeof *v);
  v->kind = kind;
  v->node = -1; /* GRAPH_NONE */
  return v;
}

Value *value_int(int64_t i, const Origin *origin) {
  Value *v = value_new(V_INT);
  v->i = i;
  v->origin = origin;
  return v;
}

Value *value_float(double f) {
  Value *v = value_new(V_FLOAT);
  v->f = f;
  return v;
}

Value *value_bool(int b) {
  Value *v = value_new(V_BOOL);
  v->i = b != 0;
  return v;
}

Value *value_str(const char *s) {
  Value *v = value_new(V_STR);
  v->s = s;
  return v;
}

Value *value_error(void) { return value_new(V_ERROR); }

const char *tensor_type_str(const TensorType *t) {
  char buf[256];
  int n = snprintf(buf, sizeof buf, "%s", dtype_name(t->dtype));
  if (t->rank > 0) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, "[");
    for (int i = 0; i < t->rank; i++)
      n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%lld", i ? ", " : "",
                    (long long)t->dims[i]);
    snprintf(buf + n, sizeof buf - (size_t)n, "]");
  }
  return pool_strdup(buf);
}

int64_t tensor_numel(const TensorType *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

const char *value_kind_name(const Value *v) {
  switch (v->kind) {
    case V_ERROR: return "error";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_BOOL: return "bool";
    case V_STR: return "string";
    case V_LIST: return "list";
    case V_TENSOR: return pool_printf("tensor %s", tensor_type_str(&v->t));
    case V_DTYPE: return "dtype";
    case V_FN: return "function";
    case V_LAYER: return "layer";
    case V_INSTANCE: return "layer instance";
    case V_TABLE: return "indexed name";
    case V_BUILTIN: return "built-in function";
    case V_INIT: return "initialiser";
    case V_OPTIM: return "optimizer";
  }
  return "?";
}
