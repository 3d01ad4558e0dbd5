/* The language's built-in names: tensor functions (each maps onto graph
 * primitives: see compiler/ir/ops.def), compile-time helpers, dtypes,
 * initialisers and optimizers. Each function checks its arguments and
 * computes the dtype and shape of its result. The argument checkers are
 * shared with builtins_source.c and builtins_decode.c (builtins_internal.h). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "builtins.h"
#include "builtins_internal.h"
#include "diag.h"
#include "lower.h"
#include "messages.h"
#include "shape.h"

static int training_value = 1;

void builtins_set_training(int training) { training_value = training; }

Value *builtin_lowered(const TensorType *t, int32_t node) {
  Value *v = tensor_value(t);
  v->node = node;
  return v;
}

/* ------------------------------------------------------------------------ */
/* Argument matching                                                         */

/* The parameters for messages: "x ?axis" is shown as "x, axis (optional)". */
static const char *params_shown(const char *const *names, const int *optional, int n) {
  const char *shown = n ? "" : "nothing";
  for (int k = 0; k < n; k++)
    shown = pool_printf("%s%s%s%s", shown, k ? ", " : "", names[k], optional[k] ? " (optional)" : "");
  return shown;
}

/* Fills out[i] for each name in `params` (NULL when an optional one is
 * absent). Reports and returns 0 on a missing, unknown or repeated one. */
int builtin_get_args(const Node *call, const char *fname, const char *params, Arg *args, int nargs,
                     Arg **out) {
  const char *names[8];
  int optional[8], n = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", params);
  for (char *tok = strtok(buf, " "); tok && n < 8; tok = strtok(NULL, " ")) {
    optional[n] = tok[0] == '?';
    names[n] = pool_strdup(tok + optional[n]);
    out[n++] = NULL;
  }
  int pos = 0;
  for (int i = 0; i < nargs; i++) {
    if (!args[i].name) {
      if (i != pos) {
        diag_error(args[i].node->span, "a positional argument cannot follow a keyword argument");
        return 0;
      }
      if (pos >= n) {
        diag_error(call->span, "%s takes at most %d argument%s, got %d", fname, n, n == 1 ? "" : "s",
                   nargs);
        return 0;
      }
      out[pos++] = &args[i];
      continue;
    }
    int k = 0;
    while (k < n && strcmp(names[k], args[i].name)) k++;
    if (k == n) {
      const char *hint = NULL;
      for (int j = 0; j < n && !hint; j++)
        if (name_is_typo_of(args[i].name, names[j])) hint = names[j];
      diag_error(args[i].at, "%s has no parameter named '%s' (it takes: %s)%s", fname,
                 args[i].name, params_shown(names, optional, n),
                 hint ? pool_printf("; did you mean '%s'?", hint) : "");
      return 0;
    }
    if (out[k]) {
      diag_error(args[i].at, "argument '%s' of %s is given twice", names[k], fname);
      return 0;
    }
    out[k] = &args[i];
  }
  for (int k = 0; k < n; k++)
    if (!out[k] && !optional[k]) {
      diag_error(call->span, "%s: missing argument '%s' (it takes: %s)", fname, names[k],
                 params_shown(names, optional, n));
      return 0;
    }
  return 1;
}

const Value *builtin_tensor_arg(const Arg *a, const char *fname, const char *what) {
  if (a->value->kind != V_TENSOR) {
    diag_error(a->node->span, "%s: %s must be a tensor, got %s", fname, what,
               value_kind_name(a->value));
    return NULL;
  }
  return a->value;
}

static int int_arg(const Arg *a, const char *fname, const char *what, int64_t *out) {
  return want_int(a->value, a->node, pool_printf("%s: %s", fname, what), out);
}

static int bool_arg(const Arg *a, const char *fname, const char *what, int *out) {
  if (a->value->kind != V_BOOL) {
    diag_error(a->node->span, "%s: %s must be true or false, got %s", fname, what,
               value_kind_name(a->value));
    return 0;
  }
  *out = (int)a->value->i;
  return 1;
}

static int number_arg(const Arg *a, const char *fname, const char *what, double *out) {
  if (a->value->kind == V_INT) *out = (double)a->value->i;
  else if (a->value->kind == V_FLOAT) *out = a->value->f;
  else {
    diag_error(a->node->span, "%s: %s must be a number, got %s", fname, what,
               value_kind_name(a->value));
    return 0;
  }
  return 1;
}

int builtin_dtype_arg(const Arg *a, const char *fname, DType *out) {
  if (a->value->kind != V_DTYPE) {
    diag_error(a->node->span, "%s: expected a dtype (f32, f64, i32, bf16), got %s", fname,
               value_kind_name(a->value));
    return 0;
  }
  *out = a->value->dtype;
  return 1;
}

/* A list of compile-time ints (a shape or a permutation). */
static int int_list_arg(const Arg *a, const char *fname, const char *what, int64_t *out,
                        const Origin **origins, int *len) {
  const Value *v = a->value;
  if (v->kind != V_LIST) {
    diag_error(a->node->span, "%s: %s must be a list of integers such as [2, 3], got %s", fname,
               what, value_kind_name(v));
    return 0;
  }
  if (v->items.len > MAX_RANK) {
    diag_error(a->node->span, "%s: %s has %d entries; tensors have at most %d dimensions", fname,
               what, v->items.len, MAX_RANK);
    return 0;
  }
  for (int i = 0; i < v->items.len; i++) {
    const Value *e = v->items.items[i];
    if (e->kind != V_INT) {
      diag_error(a->node->span, "%s: entry %d of %s must be an integer, got %s", fname, i, what,
                 value_kind_name(e));
      return 0;
    }
    out[i] = e->i;
    if (origins) origins[i] = e->origin;
  }
  *len = v->items.len;
  return 1;
}

/* The set of axes named by `axis=` (an int or a list), as a bit mask. */
static int axes_arg(const Arg *a, int rank, const char *fname, unsigned *mask) {
  *mask = 0;
  int64_t list[MAX_RANK];
  int n = 1;
  if (a->value->kind == V_INT) list[0] = a->value->i;
  else if (!int_list_arg(a, fname, "axis", list, NULL, &n)) return 0;
  for (int i = 0; i < n; i++) {
    int ax = norm_axis(list[i], rank, a->node, fname);
    if (ax < 0) return 0;
    if (*mask & (1u << ax)) {
      diag_error(a->node->span, "%s: axis %d is named twice", fname, ax);
      return 0;
    }
    *mask |= 1u << ax;
  }
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Elementwise                                                               */

static const char *const unary_names[] = {"exp", "log", "sqrt", "rsqrt", "tanh", "sin",
                                          "cos", "erf", "abs", "recip", "stop_gradient"};

static Value *fn_unary(const char *name, const Node *call, Arg *args, int nargs) {
  Arg *a[1];
  if (!builtin_get_args(call, name, "x", args, nargs, a)) return value_error();
  Value *x = a[0]->value;
  bool any_dtype = !strcmp(name, "abs") || !strcmp(name, "stop_gradient");
  if ((x->kind == V_INT || x->kind == V_FLOAT) && !strcmp(name, "stop_gradient")) return x;
  if (x->kind == V_INT || x->kind == V_FLOAT) {
    double v = x->kind == V_INT ? (double)x->i : x->f, r;
    if ((!strcmp(name, "log") && v <= 0) || ((!strcmp(name, "sqrt") || !strcmp(name, "rsqrt")) && v < 0) ||
        ((!strcmp(name, "recip") || !strcmp(name, "rsqrt")) && v == 0)) {
      diag_error(call->span, "%s(%g) is undefined", name, v);
      return value_error();
    }
    if (!strcmp(name, "exp")) r = exp(v);
    else if (!strcmp(name, "log")) r = log(v);
    else if (!strcmp(name, "sqrt")) r = sqrt(v);
    else if (!strcmp(name, "rsqrt")) r = 1 / sqrt(v);
    else if (!strcmp(name, "tanh")) r = tanh(v);
    else if (!strcmp(name, "sin")) r = sin(v);
    else if (!strcmp(name, "cos")) r = cos(v);
    else if (!strcmp(name, "erf")) r = erf(v);
    else if (!strcmp(name, "abs")) r = fabs(v);
    else r = 1 / v;
    if (!strcmp(name, "abs") && x->kind == V_INT) return value_int(x->i < 0 ? -x->i : x->i, NULL);
    return value_float(r);
  }
  const Value *t = builtin_tensor_arg(a[0], name, "its argument");
  if (!t) return value_error();
  if (!dtype_is_float(t->t.dtype) && !any_dtype) {
    diag_error(a[0]->node->span, "%s needs a float tensor, got %s; use cast(x, f32)", name,
               tensor_type_str(&t->t));
    return value_error();
  }
  return builtin_lowered(&t->t, lower_unary(name, t));
}

/* max(a, b) / min(a, b) elementwise; max(x, axis=...) / min(...) reduce. */
static Value *reduce(const char *name, const Node *call, Arg *args, int nargs);

static Value *fn_maxmin(const char *name, const Node *call, Arg *args, int nargs) {
  for (int i = 0; i < nargs; i++)
    if (args[i].name && !strcmp(args[i].name, "axis")) return reduce(name, call, args, nargs);
  Arg *a[2];
  if (!builtin_get_args(call, name, "a b", args, nargs, a)) {
    diag_note((Span){0}, "%s(a, b) is elementwise; %s(x, axis = k) reduces over an axis", name, name);
    return value_error();
  }
  Value *x = a[0]->value, *y = a[1]->value;
  int is_max = !strcmp(name, "max");
  if (x->kind == V_INT && y->kind == V_INT)
    return (is_max ? x->i >= y->i : x->i <= y->i) ? x : y;
  if ((x->kind == V_INT || x->kind == V_FLOAT) && (y->kind == V_INT || y->kind == V_FLOAT)) {
    double p = x->kind == V_INT ? (double)x->i : x->f, q = y->kind == V_INT ? (double)y->i : y->f;
    return value_float(is_max ? fmax(p, q) : fmin(p, q));
  }
  /* Shape and dtype as for '+'; the node is max or min. */
  Value *r = tensor_binary(OP_ADD, x, y, a[0]->node, a[1]->node, call);
  if (r->kind == V_TENSOR) r->node = lower_minmax(is_max, x, y, &r->t);
  return r;
}

static Value *fn_select(const Node *call, Arg *args, int nargs) {
  Arg *a[3];
  if (!builtin_get_args(call, "select", "cond a b", args, nargs, a)) return value_error();
  const Value *c = builtin_tensor_arg(a[0], "select", "the condition");
  if (!c) return value_error();
  Value *ab;
  if (a[1]->value->kind != V_TENSOR && a[2]->value->kind != V_TENSOR) {
    /* select(mask, -inf, 0.0): two numbers give an f32 result. */
    TensorType scalar = {.dtype = DT_F32};
    if (!scalar_to_tensor(a[1]->value, DT_F32, a[1]->node, &scalar) ||
        !scalar_to_tensor(a[2]->value, DT_F32, a[2]->node, &scalar))
      return value_error();
    ab = tensor_value(&scalar);
  } else {
    ab = tensor_binary(OP_ADD, a[1]->value, a[2]->value, a[1]->node, a[2]->node, call);
  }
  if (ab->kind == V_ERROR) return ab;
  TensorType cond = c->t, out;
  cond.dtype = ab->t.dtype;
  int bad_a, bad_b;
  if (!broadcast_types(&cond, &ab->t, &out, &bad_a, &bad_b)) {
    diag_error(call->span, "select: the condition %s does not broadcast with the values %s",
               tensor_type_str(&c->t), tensor_type_str(&ab->t));
    return value_error();
  }
  return builtin_lowered(&out, lower_select(c, a[1]->value, a[2]->value, &out));
}

static Value *fn_cast(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  DType dt;
  if (!builtin_get_args(call, "cast", "x dtype", args, nargs, a) || !builtin_dtype_arg(a[1], "cast", &dt))
    return value_error();
  const Value *x = builtin_tensor_arg(a[0], "cast", "x");
  if (!x) return value_error();
  TensorType t = x->t;
  t.dtype = dt;
  return builtin_lowered(&t, lower_cast(x, dt));
}

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */

static Value *reduce(const char *name, const Node *call, Arg *args, int nargs) {
  Arg *a[3];
  if (!builtin_get_args(call, name, "x ?axis ?keepdims", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], name, "x");
  if (!x) return value_error();
  if (!a[1]) {
    diag_error(call->span, "%s needs an explicit axis (axis = -1, or a list such as axis = [0, 1]); "
               "reductions never default to all axes", name);
    return value_error();
  }
  unsigned mask;
  int keep = 0;
  if (!axes_arg(a[1], x->t.rank, name, &mask)) return value_error();
  if (a[2] && !bool_arg(a[2], name, "keepdims", &keep)) return value_error();
  if (!strcmp(name, "mean") && !dtype_is_float(x->t.dtype)) {
    diag_error(call->span, "mean needs a float tensor, got %s", tensor_type_str(&x->t));
    return value_error();
  }
  TensorType t = {.dtype = x->t.dtype};
  for (int i = 0; i < x->t.rank; i++) {
    if (mask & (1u << i)) {
      if (!keep) continue;
      t.dims[t.rank] = 1;
      t.origin[t.rank++] = NULL;
    } else {
      t.dims[t.rank] = x->t.dims[i];
      t.origin[t.rank++] = x->t.origin[i];
    }
  }
  return builtin_lowered(&t, lower_reduce(name, x, mask, &t));
}

/* ------------------------------------------------------------------------ */
/* Movement                                                                  */

static Value *fn_reshape(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  int64_t dims[MAX_RANK];
  const Origin *org[MAX_RANK];
  int n;
  if (!builtin_get_args(call, "reshape", "x shape", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], "reshape", "x");
  if (!x || !int_list_arg(a[1], "reshape", "the shape", dims, org, &n)) return value_error();
  int64_t known = 1, total = tensor_numel(&x->t);
  int infer = -1, overflow = 0;
  for (int i = 0; i < n; i++) {
    if (dims[i] == -1 && infer < 0) {
      infer = i;
      continue;
    }
    if (!check_dim(dims[i], a[1]->node)) return value_error();
    /* Eight dimensions of up to 2^40 each can overflow the count. */
    if (!overflow && __builtin_mul_overflow(known, dims[i], &known)) overflow = 1;
  }
  if (overflow) known = total + 1;
  if (infer >= 0) {
    if (known == 0 || total % known) {
      diag_error(call->span, "reshape: %s has %" PRId64 " elements, which do not divide into the "
                 "shape %s", tensor_type_str(&x->t), total, expr_text(a[1]->node));
      return value_error();
    }
    dims[infer] = total / known;
    org[infer] = NULL;
    known = total;
  }
  if (known != total) {
    TensorType want = {.rank = n, .dtype = x->t.dtype};
    memcpy(want.dims, dims, sizeof(int64_t) * (size_t)n);
    diag_error(call->span, "reshape: %s (%s) has %" PRId64 " elements, but the shape %s asks for %s",
               tensor_type_str(&x->t), expr_text(a[0]->node), total, expr_text(a[1]->node),
               overflow ? "more than 2^63" : pool_printf("%" PRId64, known));
    return value_error();
  }
  TensorType t = {.dtype = x->t.dtype, .rank = n};
  memcpy(t.dims, dims, sizeof(int64_t) * (size_t)n);
  memcpy(t.origin, org, sizeof(Origin *) * (size_t)n);
  return builtin_lowered(&t, lower_reshape(x, &t));
}

static Value *permuted(const Value *x, const int64_t *perm) {
  TensorType t = x->t;
  for (int i = 0; i < x->t.rank; i++) {
    t.dims[i] = x->t.dims[perm[i]];
    t.origin[i] = x->t.origin[perm[i]];
  }
  return builtin_lowered(&t, lower_permute(x, perm));
}

static Value *fn_permute(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  int64_t perm[MAX_RANK];
  int n;
  if (!builtin_get_args(call, "permute", "x axes", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], "permute", "x");
  if (!x || !int_list_arg(a[1], "permute", "the axes", perm, NULL, &n)) return value_error();
  if (n != x->t.rank) {
    diag_error(a[1]->node->span, "permute: %s has rank %d, but %d axes are given", expr_text(a[0]->node),
               x->t.rank, n);
    return value_error();
  }
  unsigned seen = 0;
  for (int i = 0; i < n; i++) {
    int ax = norm_axis(perm[i], n, a[1]->node, "permute");
    if (ax < 0) return value_error();
    if (seen & (1u << ax)) {
      diag_error(a[1]->node->span, "permute: axis %d appears twice; the axes must be a "
                 "permutation of 0..%d", ax, n - 1);
      return value_error();
    }
    seen |= 1u << ax;
    perm[i] = ax;
  }
  return permuted(x, perm);
}

static Value *fn_transpose(const Node *call, Arg *args, int nargs) {
  Arg *a[3];
  if (!builtin_get_args(call, "transpose", "x ?a ?b", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], "transpose", "x");
  if (!x) return value_error();
  if (x->t.rank < 2) {
    diag_error(call->span, "transpose needs a tensor of rank 2 or more, got %s", tensor_type_str(&x->t));
    return value_error();
  }
  int64_t i = -2, j = -1;
  if ((a[1] && !int_arg(a[1], "transpose", "a", &i)) || (a[2] && !int_arg(a[2], "transpose", "b", &j)))
    return value_error();
  int ai = norm_axis(i, x->t.rank, a[1] ? a[1]->node : call, "transpose");
  int aj = norm_axis(j, x->t.rank, a[2] ? a[2]->node : call, "transpose");
  if (ai < 0 || aj < 0) return value_error();
  int64_t perm[MAX_RANK];
  for (int k = 0; k < x->t.rank; k++) perm[k] = k;
  perm[ai] = aj;
  perm[aj] = ai;
  return permuted(x, perm);
}

static Value *fn_broadcast(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  int64_t dims[MAX_RANK];
  const Origin *org[MAX_RANK];
  int n;
  if (!builtin_get_args(call, "broadcast", "x shape", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], "broadcast", "x");
  if (!x || !int_list_arg(a[1], "broadcast", "the shape", dims, org, &n)) return value_error();
  TensorType want = {.dtype = x->t.dtype, .rank = n}, out;
  for (int i = 0; i < n; i++) {
    if (!check_dim(dims[i], a[1]->node)) return value_error();
    want.dims[i] = dims[i];
    want.origin[i] = org[i];
  }
  int bad_a, bad_b;
  if (n < x->t.rank || !broadcast_types(&x->t, &want, &out, &bad_a, &bad_b) ||
      memcmp(out.dims, want.dims, sizeof(int64_t) * (size_t)n)) {
    diag_error(call->span, "broadcast: %s cannot be broadcast to the shape %s (sizes must be equal "
               "or 1, aligned from the right)", tensor_type_str(&x->t), expr_text(a[1]->node));
    return value_error();
  }
  return builtin_lowered(&want, lower_broadcast(x, &want));
}

static Value *fn_expand(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  int64_t axis;
  if (!builtin_get_args(call, "expand", "x axis", args, nargs, a) || !int_arg(a[1], "expand", "axis", &axis))
    return value_error();
  const Value *x = builtin_tensor_arg(a[0], "expand", "x");
  if (!x) return value_error();
  if (x->t.rank >= MAX_RANK) {
    diag_error(call->span, "expand: the result would have more than %d dimensions", MAX_RANK);
    return value_error();
  }
  int ax = norm_axis(axis, x->t.rank + 1, a[1]->node, "expand");
  if (ax < 0) return value_error();
  TensorType t = x->t;
  for (int i = t.rank; i > ax; i--) {
    t.dims[i] = t.dims[i - 1];
    t.origin[i] = t.origin[i - 1];
  }
  t.dims[ax] = 1;
  t.origin[ax] = NULL;
  t.rank++;
  return builtin_lowered(&t, lower_reshape(x, &t));
}

static Value *fn_squeeze(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  int64_t axis;
  if (!builtin_get_args(call, "squeeze", "x axis", args, nargs, a) || !int_arg(a[1], "squeeze", "axis", &axis))
    return value_error();
  const Value *x = builtin_tensor_arg(a[0], "squeeze", "x");
  if (!x) return value_error();
  int ax = norm_axis(axis, x->t.rank, a[1]->node, "squeeze");
  if (ax < 0) return value_error();
  if (x->t.dims[ax] != 1) {
    diag_error(call->span, "squeeze: dimension %d of %s is %" PRId64 ", not 1", ax,
               tensor_type_str(&x->t), x->t.dims[ax]);
    return value_error();
  }
  TensorType t = x->t;
  for (int i = ax; i + 1 < t.rank; i++) {
    t.dims[i] = t.dims[i + 1];
    t.origin[i] = t.origin[i + 1];
  }
  t.rank--;
  return builtin_lowered(&t, lower_reshape(x, &t));
}

static Value *fn_slice(const Node *call, Arg *args, int nargs) {
  Arg *a[4];
  int64_t axis, start, end;
  if (!builtin_get_args(call, "slice", "x axis start end", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], "slice", "x");
  if (!x || !int_arg(a[1], "slice", "axis", &axis) || !int_arg(a[2], "slice", "start", &start) ||
      !int_arg(a[3], "slice", "end", &end))
    return value_error();
  int ax = norm_axis(axis, x->t.rank, a[1]->node, "slice");
  if (ax < 0) return value_error();
  int64_t d = x->t.dims[ax];
  int64_t s = start < 0 ? start + d : start, e = end < 0 ? end + d : end;
  if (s < 0 || e > d || s >= e) {
    diag_error(call->span, "slice: [%" PRId64 ", %" PRId64 ") is not a non-empty range within "
               "dimension %d of %s (size %" PRId64 ")", start, end, ax, tensor_type_str(&x->t), d);
    note_dims(a[0]->node, &x->t, ax);
    return value_error();
  }
  TensorType t = x->t;
  t.dims[ax] = e - s;
  t.origin[ax] = NULL;
  return builtin_lowered(&t, lower_slice(x, ax, s, e));
}

static Value *fn_concat(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  int64_t axis;
  if (!builtin_get_args(call, "concat", "xs axis", args, nargs, a) || !int_arg(a[1], "concat", "axis", &axis))
    return value_error();
  const Value *xs = a[0]->value;
  if (xs->kind != V_LIST || xs->items.len == 0) {
    diag_error(a[0]->node->span, "concat: the first argument must be a non-empty list of tensors "
               "such as [a, b]");
    return value_error();
  }
  const Value *first = xs->items.items[0];
  if (first->kind != V_TENSOR) {
    diag_error(a[0]->node->span, "concat: entry 0 is %s, not a tensor", value_kind_name(first));
    return value_error();
  }
  int ax = norm_axis(axis, first->t.rank, a[1]->node, "concat");
  if (ax < 0) return value_error();
  TensorType t = first->t;
  t.origin[ax] = NULL;
  for (int i = 1; i < xs->items.len; i++) {
    const Value *x = xs->items.items[i];
    int same = x->kind == V_TENSOR && x->t.rank == t.rank && x->t.dtype == t.dtype;
    for (int k = 0; same && k < t.rank; k++) same = k == ax || x->t.dims[k] == t.dims[k];
    if (!same) {
      diag_error(a[0]->node->span, "concat: entry %d is %s, which does not match %s except along "
                 "axis %d", i, value_kind_name(x), tensor_type_str(&first->t), ax);
      return value_error();
    }
    t.dims[ax] += x->t.dims[ax];
  }
  if (!check_numel(&t, call)) return value_error();
  return builtin_lowered(&t, lower_concat(xs, ax));
}

static Value *fn_pad(const Node *call, Arg *args, int nargs) {
  Arg *a[5];
  int64_t axis, before, after;
  double value = 0;
  if (!builtin_get_args(call, "pad", "x axis before after ?value", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], "pad", "x");
  if (!x || !int_arg(a[1], "pad", "axis", &axis) || !int_arg(a[2], "pad", "before", &before) ||
      !int_arg(a[3], "pad", "after", &after) || (a[4] && !number_arg(a[4], "pad", "value", &value)))
    return value_error();
  int ax = norm_axis(axis, x->t.rank, a[1]->node, "pad");
  if (ax < 0) return value_error();
  if (before < 0 || after < 0 || before > ((int64_t)1 << 32) || after > ((int64_t)1 << 32)) {
    diag_error(call->span, "pad: before and after must be between 0 and 2^32");
    return value_error();
  }
  TensorType t = x->t;
  t.dims[ax] += before + after;
  t.origin[ax] = NULL;
  if (!check_numel(&t, call)) return value_error();
  return builtin_lowered(&t, lower_pad(x, ax, before, after, value));
}

static Value *fn_gather(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  if (!builtin_get_args(call, "gather", "table indices", args, nargs, a)) return value_error();
  const Value *tab = builtin_tensor_arg(a[0], "gather", "the table");
  const Value *idx = builtin_tensor_arg(a[1], "gather", "the indices");
  if (!tab || !idx) return value_error();
  if (idx->t.dtype != DT_I32) {
    diag_error(a[1]->node->span, "gather: the indices must be i32, got %s", tensor_type_str(&idx->t));
    return value_error();
  }
  if (tab->t.rank < 1) {
    diag_error(a[0]->node->span, "gather: the table must have rank 1 or more");
    return value_error();
  }
  if (idx->t.rank + tab->t.rank - 1 > MAX_RANK) {
    diag_error(call->span, "gather: the result would have more than %d dimensions", MAX_RANK);
    return value_error();
  }
  TensorType t = idx->t;
  t.dtype = tab->t.dtype;
  for (int i = 1; i < tab->t.rank; i++) {
    t.dims[t.rank] = tab->t.dims[i];
    t.origin[t.rank++] = tab->t.origin[i];
  }
  return builtin_lowered(&t, lower_gather(tab, idx, &t));
}

static Value *fn_one_hot(const Node *call, Arg *args, int nargs) {
  Arg *a[3];
  int64_t n;
  DType dt = DT_F32;
  if (!builtin_get_args(call, "one_hot", "indices n ?dtype", args, nargs, a) ||
      !int_arg(a[1], "one_hot", "n", &n) || (a[2] && !builtin_dtype_arg(a[2], "one_hot", &dt)))
    return value_error();
  const Value *idx = builtin_tensor_arg(a[0], "one_hot", "the indices");
  if (!idx || !check_dim(n, a[1]->node)) return value_error();
  if (idx->t.dtype != DT_I32) {
    diag_error(a[0]->node->span, "one_hot: the indices must be i32, got %s", tensor_type_str(&idx->t));
    return value_error();
  }
  if (idx->t.rank >= MAX_RANK) {
    diag_error(call->span, "one_hot: the result would have more than %d dimensions", MAX_RANK);
    return value_error();
  }
  TensorType t = idx->t;
  t.dtype = dt;
  t.dims[t.rank] = n;
  t.origin[t.rank++] = a[1]->value->origin;
  if (!check_numel(&t, call)) return value_error();
  return builtin_lowered(&t, lower_one_hot(idx, &t));
}

/* ------------------------------------------------------------------------ */
/* Sources                                                                   */

Value *builtin_shaped(const Node *call, const char *fname, Arg *shape, DType dt) {
  int64_t dims[MAX_RANK];
  const Origin *org[MAX_RANK];
  int n;
  if (!int_list_arg(shape, fname, "the shape", dims, org, &n)) return value_error();
  TensorType t = {.dtype = dt, .rank = n};
  for (int i = 0; i < n; i++) {
    if (!check_dim(dims[i], shape->node)) return value_error();
    t.dims[i] = dims[i];
    t.origin[i] = org[i];
  }
  if (!check_numel(&t, call)) return value_error();
  return tensor_value(&t); /* the caller sets the node */
}

static Value *fn_iota(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  int64_t n;
  DType dt = DT_I32;
  if (!builtin_get_args(call, "iota", "n ?dtype", args, nargs, a) || !int_arg(a[0], "iota", "n", &n) ||
      (a[1] && !builtin_dtype_arg(a[1], "iota", &dt)) || !check_dim(n, a[0]->node))
    return value_error();
  TensorType t = {.dtype = dt, .rank = 1, .dims = {n}, .origin = {a[0]->value->origin}};
  return builtin_lowered(&t, lower_iota(&t));
}

static Value *fn_full(const Node *call, Arg *args, int nargs) {
  Arg *a[3];
  double v;
  DType dt = DT_F32;
  if (!builtin_get_args(call, "full", "shape value ?dtype", args, nargs, a) ||
      !number_arg(a[1], "full", "value", &v) || (a[2] && !builtin_dtype_arg(a[2], "full", &dt)))
    return value_error();
  Value *r = builtin_shaped(call, "full", a[0], dt);
  if (r->kind == V_TENSOR) r->node = lower_full(&r->t, v);
  return r;
}

/* tensor([[1, 0], [0, 1]]): a constant from nested lists of numbers. */
static int tensor_literal(const Value *v, int depth, TensorType *t, PtrVec *values,
                          const Node *at) {
  if (v->kind == V_INT || v->kind == V_FLOAT) {
    if (depth != t->rank) goto ragged;
    vec_push(values, (void *)v);
    return 1;
  }
  if (v->kind != V_LIST || v->items.len == 0) {
    diag_error(at->span, "tensor: expected numbers in nested lists such as [[1, 2], [3, 4]], "
               "found %s", v->kind == V_LIST ? "an empty list" : value_kind_name(v));
    return 0;
  }
  if (depth == t->rank && values->len == 0) {
    if (depth == MAX_RANK) {
      diag_error(at->span, "tensor: more than %d levels of nesting", MAX_RANK);
      return 0;
    }
    t->dims[t->rank++] = v->items.len;
  } else if (depth >= t->rank || t->dims[depth] != v->items.len) {
    goto ragged;
  }
  for (int i = 0; i < v->items.len; i++)
    if (!tensor_literal(v->items.items[i], depth + 1, t, values, at)) return 0;
  return 1;
ragged:
  diag_error(at->span, "tensor: the nested lists are ragged (every row must have the same "
             "length and depth)");
  return 0;
}

static Value *fn_tensor(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  DType dt = DT_F32;
  if (!builtin_get_args(call, "tensor", "values ?dtype", args, nargs, a) ||
      (a[1] && !builtin_dtype_arg(a[1], "tensor", &dt)))
    return value_error();
  TensorType t = {.dtype = dt};
  PtrVec values = {0};
  if (!tensor_literal(a[0]->value, 0, &t, &values, a[0]->node)) return value_error();
  double *nums = pool_alloc(sizeof(double) * (size_t)values.len);
  for (int i = 0; i < values.len; i++) {
    const Value *x = values.items[i];
    if (dt == DT_I32 && x->kind == V_FLOAT) {
      diag_error(a[0]->node->span, "tensor: %g is not an integer, but the dtype is i32", x->f);
      return value_error();
    }
    nums[i] = x->kind == V_INT ? (double)x->i : x->f;
  }
  return builtin_lowered(&t, lower_constant(&t, nums));
}

static Value *fn_random_uniform(const Node *call, Arg *args, int nargs) {
  Arg *a[1];
  if (!builtin_get_args(call, "random_uniform", "shape", args, nargs, a)) return value_error();
  Value *r = builtin_shaped(call, "random_uniform", a[0], DT_F32);
  if (r->kind == V_TENSOR) r->node = lower_random_uniform(&r->t);
  return r;
}

/* ------------------------------------------------------------------------ */
/* Compile-time helpers                                                      */

static Value *fn_shape(const Node *call, Arg *args, int nargs) {
  Arg *a[1];
  if (!builtin_get_args(call, "shape", "x", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], "shape", "x");
  if (!x) return value_error();
  Value *l = value_new(V_LIST);
  for (int i = 0; i < x->t.rank; i++) vec_push(&l->items, value_int(x->t.dims[i], x->t.origin[i]));
  return l;
}

static Value *fn_dim(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  int64_t axis;
  if (!builtin_get_args(call, "dim", "x axis", args, nargs, a) || !int_arg(a[1], "dim", "axis", &axis))
    return value_error();
  const Value *x = builtin_tensor_arg(a[0], "dim", "x");
  if (!x) return value_error();
  int ax = norm_axis(axis, x->t.rank, a[1]->node, "dim");
  if (ax < 0) return value_error();
  return value_int(x->t.dims[ax], x->t.origin[ax]);
}

static Value *fn_rank(const Node *call, Arg *args, int nargs) {
  Arg *a[1];
  if (!builtin_get_args(call, "rank", "x", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], "rank", "x");
  return x ? value_int(x->t.rank, NULL) : value_error();
}

static Value *fn_dtype(const Node *call, Arg *args, int nargs) {
  Arg *a[1];
  if (!builtin_get_args(call, "dtype", "x", args, nargs, a)) return value_error();
  const Value *x = builtin_tensor_arg(a[0], "dtype", "x");
  if (!x) return value_error();
  Value *v = value_new(V_DTYPE);
  v->dtype = x->t.dtype;
  return v;
}

static Value *fn_len(const Node *call, Arg *args, int nargs) {
  Arg *a[1];
  if (!builtin_get_args(call, "len", "list", args, nargs, a)) return value_error();
  if (a[0]->value->kind != V_LIST) {
    diag_error(a[0]->node->span, "len needs a list, got %s", value_kind_name(a[0]->value));
    return value_error();
  }
  return value_int(a[0]->value->items.len, NULL);
}

/* append(list, x): a new list, list's items then x; the list itself is not
 * changed. With `xs = append(xs, h)` a for loop collects one value per step
 * (the states of a recurrent layer, then concat(xs, axis)). */
static Value *fn_append(const Node *call, Arg *args, int nargs) {
  Arg *a[2];
  if (!builtin_get_args(call, "append", "list x", args, nargs, a)) return value_error();
  const Value *xs = a[0]->value;
  if (xs->kind != V_LIST) {
    diag_error(a[0]->node->span, "append needs a list first, got %s", value_kind_name(xs));
    return value_error();
  }
  if (xs->items.len >= 4096) {
    diag_error(call->span, "append: lists have at most 4096 entries");
    return value_error();
  }
  Value *l = value_new(V_LIST);
  for (int i = 0; i < xs->items.len; i++) vec_push(&l->items, xs->items.items[i]);
  vec_push(&l->items, a[1]->value);
  return l;
}

static Value *fn_range(const Node *call, Arg *args, int nargs) {
  Arg *a[1];
  int64_t n;
  if (!builtin_get_args(call, "range", "n", args, nargs, a) || !int_arg(a[0], "range", "n", &n))
    return value_error();
  if (n < 0 || n > 4096) {
    diag_error(a[0]->node->span, "range(n) needs 0 <= n <= 4096, got %" PRId64, n);
    return value_error();
  }
  Value *l = value_new(V_LIST);
  for (int64_t i = 0; i < n; i++) vec_push(&l->items, value_int(i, NULL));
  return l;
}

static Value *fn_convert(const char *name, const Node *call, Arg *args, int nargs) {
  Arg *a[1];
  double v;
  if (!builtin_get_args(call, name, "x", args, nargs, a) || !number_arg(a[0], name, "x", &v))
    return value_error();
  if (!strcmp(name, "float")) return value_float(v);
  if (!(fabs(v) < 9.2e18)) {
    diag_error(call->span, "int(%g) does not fit in an integer", v);
    return value_error();
  }
  return value_int((int64_t)v, NULL);
}

/* str(x): a number, boolean or string as text ("transformer.h." + str(i)). */
static Value *fn_str(const Node *call, Arg *args, int nargs) {
  Arg *a[1];
  if (!builtin_get_args(call, "str", "x", args, nargs, a)) return value_error();
  const Value *v = a[0]->value;
  switch (v->kind) {
    case V_INT: return value_str(pool_printf("%" PRId64, v->i));
    case V_FLOAT: return value_str(pool_printf("%.17g", v->f));
    case V_BOOL: return value_str(v->i ? "true" : "false");
    case V_STR: return value_str(v->s);
    default:
      diag_error(a[0]->node->span, "str: needs a number, a boolean or a string, got %s",
                 value_kind_name(v));
      return value_error();
  }
}

/* ------------------------------------------------------------------------ */
/* Initialisers and optimizers                                               */

static Value *make_init(const char *kind, const double *nums, int n) {
  Value *v = value_new(V_INIT);
  v->s = kind;
  for (int i = 0; i < n; i++) vec_push(&v->items, value_float(nums[i]));
  return v;
}

static Value *fn_init(const char *name, const Node *call, Arg *args, int nargs) {
  const char *params = !strcmp(name, "normal") ? "mean std" : !strcmp(name, "uniform") ? "lo hi" : "value";
  Arg *a[2];
  double nums[2] = {0, 0};
  if (!builtin_get_args(call, name, params, args, nargs, a)) return value_error();
  int n = !strcmp(name, "constant") ? 1 : 2;
  for (int i = 0; i < n; i++)
    if (!number_arg(a[i], name, "each argument", &nums[i])) return value_error();
  if (!strcmp(name, "normal") && !(nums[1] > 0)) {
    diag_error(call->span, "normal: std must be positive, got %g", nums[1]);
    return value_error();
  }
  if (!strcmp(name, "uniform") && !(nums[0] < nums[1])) {
    diag_error(call->span, "uniform: lo must be below hi, got [%g, %g)", nums[0], nums[1]);
    return value_error();
  }
  return make_init(name, nums, n);
}

/* Optimizer settings with their defaults and valid ranges. */
static Value *fn_optim(const char *name, const Node *call, Arg *args, int nargs) {
  static const struct { const char *opt, *key; double def, lo, hi; } known[] = {
      {"sgd", "momentum", 0.0, 0.0, 0.999999},   {"sgd", "weight_decay", 0.0, 0.0, 1.0},
      {"adam", "beta1", 0.9, 0.0, 0.999999},     {"adam", "beta2", 0.999, 0.0, 0.999999999},
      {"adam", "eps", 1e-8, 1e-30, 1.0},         {"adamw", "beta1", 0.9, 0.0, 0.999999},
      {"adamw", "beta2", 0.999, 0.0, 0.999999999}, {"adamw", "eps", 1e-8, 1e-30, 1.0},
      {"adamw", "weight_decay", 0.01, 0.0, 1.0}};
  enum { NKNOWN = sizeof known / sizeof known[0] };
  Value *v = value_new(V_OPTIM);
  v->s = name;
  char params[128] = "";
  for (int k = 0; k < NKNOWN; k++)
    if (!strcmp(known[k].opt, name)) {
      strcat(params, params[0] ? " ?" : "?");
      strcat(params, known[k].key);
    }
  Arg *a[8];
  if (!builtin_get_args(call, name, params, args, nargs, a)) return value_error();
  for (int k = 0, i = 0; k < NKNOWN; k++) {
    if (strcmp(known[k].opt, name)) continue;
    double x = known[k].def;
    if (a[i] && !number_arg(a[i], name, known[k].key, &x)) return value_error();
    if (!(x >= known[k].lo && x <= known[k].hi)) {
      diag_error(a[i]->node->span, "%s: %s = %g is outside [%g, %g]", name, known[k].key, x,
                 known[k].lo, known[k].hi);
      return value_error();
    }
    vec_push(&v->keys, (void *)known[k].key);
    vec_push(&v->items, value_float(x));
    i++;
  }
  return v;
}

/* ------------------------------------------------------------------------ */
/* The table                                                                 */

static const char *const function_names[] = {
    "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "erf", "abs", "recip", "stop_gradient",
    "max", "min", "sum", "mean", "select", "cast", "reshape", "permute", "transpose",
    "broadcast", "expand", "squeeze", "slice", "concat", "pad", "gather", "one_hot", "iota",
    "full", "tensor", "random_uniform", "shape", "dim", "rank", "dtype", "len", "append", "range", "float", "int",
    "normal", "uniform", "constant", "sgd", "adam", "adamw", "source", "str", "decode_pos",
    "kv_cache", NULL};

static const char *const value_names[] = {"f32", "f64", "i32", "bf16", "inf", "pi", "training",
                                          "decoding", "zeros", "ones", "xavier_uniform", "xavier_normal", NULL};

enum { NFUNCTIONS = sizeof function_names / sizeof function_names[0] - 1 };

const char *builtin_name(int id) {
  if (id < NFUNCTIONS) return function_names[id];
  id -= NFUNCTIONS;
  int n = sizeof value_names / sizeof value_names[0] - 1;
  return id < n ? value_names[id] : NULL;
}

Value *builtin_lookup(const char *name) {
  for (int i = 0; function_names[i]; i++)
    if (!strcmp(function_names[i], name)) {
      Value *v = value_new(V_BUILTIN);
      v->builtin = i;
      v->s = function_names[i];
      return v;
    }
  for (int i = 0; i < 4; i++)
    if (!strcmp(value_names[i], name)) {
      Value *v = value_new(V_DTYPE);
      v->dtype = (DType)i;
      return v;
    }
  if (!strcmp(name, "inf")) return value_float(INFINITY);
  if (!strcmp(name, "pi")) return value_float(3.14159265358979323846);
  if (!strcmp(name, "training")) return value_bool(training_value);
  if (!strcmp(name, "decoding")) return value_bool(builtins_decoding());
  for (int i = 8; value_names[i]; i++)
    if (!strcmp(value_names[i], name)) return make_init(value_names[i], NULL, 0);
  return NULL;
}

Value *builtin_call(Ctx *ctx, const Value *fn, const Node *call, Arg *args, int nargs) {
  const char *name = fn->s;
  for (int i = 0; i < (int)(sizeof unary_names / sizeof unary_names[0]); i++)
    if (!strcmp(name, unary_names[i])) return fn_unary(name, call, args, nargs);
  if (!strcmp(name, "max") || !strcmp(name, "min")) return fn_maxmin(name, call, args, nargs);
  if (!strcmp(name, "sum") || !strcmp(name, "mean")) return reduce(name, call, args, nargs);
  if (!strcmp(name, "select")) return fn_select(call, args, nargs);
  if (!strcmp(name, "cast")) return fn_cast(call, args, nargs);
  if (!strcmp(name, "reshape")) return fn_reshape(call, args, nargs);
  if (!strcmp(name, "permute")) return fn_permute(call, args, nargs);
  if (!strcmp(name, "transpose")) return fn_transpose(call, args, nargs);
  if (!strcmp(name, "broadcast")) return fn_broadcast(call, args, nargs);
  if (!strcmp(name, "expand")) return fn_expand(call, args, nargs);
  if (!strcmp(name, "squeeze")) return fn_squeeze(call, args, nargs);
  if (!strcmp(name, "slice")) return fn_slice(call, args, nargs);
  if (!strcmp(name, "concat")) return fn_concat(call, args, nargs);
  if (!strcmp(name, "pad")) return fn_pad(call, args, nargs);
  if (!strcmp(name, "gather")) return fn_gather(call, args, nargs);
  if (!strcmp(name, "one_hot")) return fn_one_hot(call, args, nargs);
  if (!strcmp(name, "iota")) return fn_iota(call, args, nargs);
  if (!strcmp(name, "full")) return fn_full(call, args, nargs);
  if (!strcmp(name, "random_uniform")) return fn_random_uniform(call, args, nargs);
  if (!strcmp(name, "decode_pos")) return builtin_decode_pos(call, args, nargs);
  if (!strcmp(name, "kv_cache")) return builtin_kv_cache(call, args, nargs);
  if (!strcmp(name, "tensor")) return fn_tensor(call, args, nargs);
  if (!strcmp(name, "shape")) return fn_shape(call, args, nargs);
  if (!strcmp(name, "dim")) return fn_dim(call, args, nargs);
  if (!strcmp(name, "rank")) return fn_rank(call, args, nargs);
  if (!strcmp(name, "dtype")) return fn_dtype(call, args, nargs);
  if (!strcmp(name, "len")) return fn_len(call, args, nargs);
  if (!strcmp(name, "append")) return fn_append(call, args, nargs);
  if (!strcmp(name, "range")) return fn_range(call, args, nargs);
  if (!strcmp(name, "float") || !strcmp(name, "int")) return fn_convert(name, call, args, nargs);
  if (!strcmp(name, "str")) return fn_str(call, args, nargs);
  if (!strcmp(name, "source")) return builtin_source(ctx, call, args, nargs);
  if (!strcmp(name, "normal") || !strcmp(name, "uniform") || !strcmp(name, "constant"))
    return fn_init(name, call, args, nargs);
  return fn_optim(name, call, args, nargs);
}
