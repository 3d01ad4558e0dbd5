/* Shape rules of the language's tensor operators (broadcasting, matmul) and
 * the notes that explain where a dimension came from. */
#include <inttypes.h>
#include <string.h>

#include "diag.h"
#include "lower.h"
#include "messages.h"
#include "shape.h"

/* Above this many elements a tensor is certainly a mistake (2^40 ≈ 1.1e12). */
static const int64_t MAX_NUMEL = (int64_t)1 << 40;

void note_dims(const Node *n, const TensorType *t, int axis) {
  const Origin *o = t->origin[axis];
  if (o && o->what)
    diag_note(o->at, "dimension %d of %s (%" PRId64 ") is %s", axis, expr_text(n),
              t->dims[axis], o->what);
}

int check_dim(int64_t d, const Node *at) {
  if (d <= 0) {
    diag_error(at->span, "tensor dimension must be positive, got %" PRId64, d);
    return 0;
  }
  if (d > MAX_NUMEL) {
    diag_error(at->span, "tensor dimension %" PRId64 " is too large (the limit is 2^40)", d);
    return 0;
  }
  return 1;
}

int check_numel(const TensorType *t, const Node *at) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] > MAX_NUMEL / n) {
      diag_error(at->span, "tensor %s has more than 2^40 elements", tensor_type_str(t));
      return 0;
    }
    n *= t->dims[i];
  }
  return 1;
}

Value *tensor_value(const TensorType *t) {
  Value *v = value_new(V_TENSOR);
  v->t = *t;
  return v;
}

int norm_axis(int64_t axis, int rank, const Node *at, const char *fn) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank || rank == 0) {
    if (rank == 0)
      diag_error(at->span, "%s: a scalar tensor has no axis %" PRId64, fn, axis);
    else
      diag_error(at->span, "%s: axis %" PRId64 " is out of range for a tensor of rank %d "
                 "(axes are %d..%d)", fn, axis, rank, -rank, rank - 1);
    return -1;
  }
  return (int)a;
}

/* Numpy broadcasting: align from the right; sizes must be equal or 1. */
int broadcast_types(const TensorType *a, const TensorType *b, TensorType *out, int *bad_a,
                    int *bad_b) {
  int rank = a->rank > b->rank ? a->rank : b->rank;
  out->dtype = a->dtype;
  out->rank = rank;
  for (int i = 0; i < rank; i++) {
    int ia = a->rank - rank + i, ib = b->rank - rank + i;
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    const Origin *oa = ia >= 0 ? a->origin[ia] : NULL, *ob = ib >= 0 ? b->origin[ib] : NULL;
    if (da != db && da != 1 && db != 1) {
      *bad_a = ia;
      *bad_b = ib;
      return 0;
    }
    out->dims[i] = da == 1 ? db : da;
    out->origin[i] = (da == 1 && ib >= 0) ? ob : (oa ? oa : ob);
  }
  return 1;
}

int scalar_to_tensor(Value *v, DType dt, const Node *at, TensorType *out) {
  memset(out, 0, sizeof *out);
  out->dtype = dt;
  if (v->kind == V_TENSOR) {
    *out = v->t;
    return 1;
  }
  if (v->kind == V_INT || v->kind == V_BOOL) return 1;
  if (v->kind == V_FLOAT) {
    if (!dtype_is_float(dt)) {
      diag_error(at->span, "cannot mix the float %g with an %s tensor; use cast()", v->f,
                 dtype_name(dt));
      return 0;
    }
    return 1;
  }
  diag_error(at->span, "expected a tensor or a number, got %s", value_kind_name(v));
  return 0;
}

Value *tensor_binary(Op op, Value *a, Value *b, const Node *an, const Node *bn, const Node *at) {
  DType dt = a->kind == V_TENSOR ? a->t.dtype : b->t.dtype;
  TensorType ta, tb, out;
  if (!scalar_to_tensor(a, dt, an, &ta) || !scalar_to_tensor(b, dt, bn, &tb))
    return value_error();
  if (ta.dtype != tb.dtype) {
    diag_error(at->span, "operator '%s' needs operands of one dtype, got %s (%s) and %s (%s); "
               "use cast()", op_text(op), dtype_name(ta.dtype), expr_text(an),
               dtype_name(tb.dtype), expr_text(bn));
    return value_error();
  }
  if (op == OP_AND || op == OP_OR) {
    diag_error(at->span, "'%s' needs compile-time booleans; for tensors use select() or "
               "multiply masks", op_text(op));
    return value_error();
  }
  if (!dtype_is_float(dt) && (op == OP_DIV || op == OP_POW || op == OP_IDIV || op == OP_MOD)) {
    diag_error(at->span, "operator '%s' is not defined on integer tensors; cast to f32 first",
               op_text(op));
    return value_error();
  }
  if (dtype_is_float(dt) && (op == OP_IDIV || op == OP_MOD)) {
    diag_error(at->span, "operator '%s' is defined on compile-time integers only",
               op_text(op));
    return value_error();
  }
  int bad_a, bad_b;
  if (!broadcast_types(&ta, &tb, &out, &bad_a, &bad_b)) {
    diag_error(at->span, "operator '%s': shapes %s (%s) and %s (%s) do not broadcast: "
               "dimension %d of the left is %" PRId64 ", dimension %d of the right is %" PRId64,
               op_text(op), tensor_type_str(&ta), expr_text(an), tensor_type_str(&tb),
               expr_text(bn), bad_a, ta.dims[bad_a], bad_b, tb.dims[bad_b]);
    note_dims(an, &ta, bad_a);
    note_dims(bn, &tb, bad_b);
    return value_error();
  }
  Value *r = tensor_value(&out);
  r->node = lower_binary(op, a, b, &out);
  return r;
}

/* a[..., m, k] @ b[..., k, n] -> [..., m, n] with the batch dims broadcast. */
Value *tensor_matmul(Value *a, Value *b, const Node *an, const Node *bn, const Node *at) {
  if (a->kind != V_TENSOR || b->kind != V_TENSOR) {
    diag_error(at->span, "operator '@' needs two tensors, got %s and %s", value_kind_name(a),
               value_kind_name(b));
    return value_error();
  }
  const TensorType *ta = &a->t, *tb = &b->t;
  if (ta->dtype != tb->dtype) {
    diag_error(at->span, "operator '@' needs operands of one dtype, got %s and %s; use cast()",
               dtype_name(ta->dtype), dtype_name(tb->dtype));
    return value_error();
  }
  if (ta->rank < 2 || tb->rank < 2) {
    const Node *n = ta->rank < 2 ? an : bn;
    diag_error(n->span, "operator '@' needs operands of rank 2 or more; %s is %s "
               "(reshape a vector to [1, n] or [n, 1])", expr_text(n),
               tensor_type_str(ta->rank < 2 ? ta : tb));
    return value_error();
  }
  int64_t k1 = ta->dims[ta->rank - 1], k2 = tb->dims[tb->rank - 2];
  if (k1 != k2) {
    diag_error(at->span, "operator '@': inner dimensions differ: %s is %s and %s is %s "
               "(%" PRId64 " vs %" PRId64 ")", expr_text(an), tensor_type_str(ta),
               expr_text(bn), tensor_type_str(tb), k1, k2);
    note_dims(an, ta, ta->rank - 1);
    note_dims(bn, tb, tb->rank - 2);
    return value_error();
  }
  TensorType ba = *ta, bb = *tb, out;
  ba.rank -= 2;
  bb.rank -= 2;
  int bad_a, bad_b;
  if (!broadcast_types(&ba, &bb, &out, &bad_a, &bad_b)) {
    diag_error(at->span, "operator '@': batch dimensions of %s (%s) and %s (%s) do not "
               "broadcast", tensor_type_str(ta), expr_text(an), tensor_type_str(tb),
               expr_text(bn));
    note_dims(an, ta, bad_a);
    note_dims(bn, tb, bad_b);
    return value_error();
  }
  if (out.rank + 2 > MAX_RANK) {
    diag_error(at->span, "operator '@': result has rank above %d", MAX_RANK);
    return value_error();
  }
  out.dims[out.rank] = ta->dims[ta->rank - 2];
  out.origin[out.rank] = ta->origin[ta->rank - 2];
  out.dims[out.rank + 1] = tb->dims[tb->rank - 1];
  out.origin[out.rank + 1] = tb->origin[tb->rank - 1];
  out.rank += 2;
  out.dtype = ta->dtype;
  Value *r = tensor_value(&out);
  r->node = lower_matmul(a, b, &out);
  return r;
}
