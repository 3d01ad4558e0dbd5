/* The checker, its scopes, calls and expressions: evaluates the program at
 * compile time. Config entries, loop
 * bounds and shapes are all known here, so every expression gets an exact
 * dtype and shape, functions are inlined, layers are instantiated with
 * dotted parameter names, and compile-time `if`/`for` are unrolled. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "builtins.h"
#include "lower.h"
#include "messages.h"
#include "parser.h"
#include "sema_internal.h"
#include "shape.h"

CheckedModel *sema_model;
const FrontOptions *sema_opt;

NameMap sema_items;          /* fn and layer definitions by name */
Scope *sema_global_scope;    /* sema_items and built-ins: what fn and layer bodies see */
Scope *sema_config_scope;    /* config entries: what the model and train blocks see */
long sema_steps;
int sema_steps_reported;
PtrVec sema_call_stack;      /* const Node* of the fn/layer bodies being evaluated */
PtrVec sema_call_sites;      /* const Node* of the calls, parallel to sema_call_stack */
PtrVec sema_call_names;      /* const char*: "fn heads", parallel to sema_call_stack */

static int span_within(Span in, Span out) {
  return in.file == out.file && (in.line > out.line || (in.line == out.line && in.col >= out.col)) &&
         (in.line < out.end_line || (in.line == out.end_line && in.col <= out.end_col));
}

/* After an error inside inlined code: where each enclosing call came from,
 * innermost first. An error in the innermost call itself (its arguments)
 * needs no note that repeats its position. */
void sema_show_call_chain(Span at) {
  enum { SHOWN = 6 };
  int top = sema_call_stack.len - 1;
  if (top >= 0 && span_within(at, ((const Node *)sema_call_sites.items[top])->span)) top--;
  for (int i = top, k = 0; i >= 0; i--, k++) {
    if (k == SHOWN) {
      diag_note((Span){0}, "... and %d more enclosing calls", i + 1);
      break;
    }
    const Node *site = sema_call_sites.items[i];
    diag_note(site->span, "in %s, called here", (const char *)sema_call_names.items[i]);
  }
}

/* ------------------------------------------------------------------------ */
/* Scopes and names                                                          */

Scope *sema_scope_new(Scope *parent) {
  Scope *s = pool_alloc(sizeof *s);
  s->parent = parent;
  return s;
}

Binding *sema_scope_find_here(Scope *s, const char *name) { return map_get(&s->names, name); }

Binding *sema_bind(Scope *s, const char *name, Value *v, Span at, BindingKind kind) {
  Binding *b = pool_alloc(sizeof *b);
  b->name = name;
  b->value = v;
  b->at = at;
  b->kind = kind;
  map_put(&s->names, name, b);
  sema_observe_bound(name, v, at);
  return b;
}

void sema_observe_bound(const char *name, const Value *v, Span at) {
  const FrontObserver *o = sema_opt ? sema_opt->observer : NULL;
  if (o && o->bound && at.file) o->bound(o->user, name, v, at);
}


/* Finds a name from scope `s` outwards; NULL if unknown. */
Binding *sema_lookup(Scope *s, const char *name) {
  for (; s; s = s->parent) {
    Binding *b = sema_scope_find_here(s, name);
    if (b) return b;
    if (s->lazy) {
      ConfigEntry *e = map_get(&s->lazy_index, name);
      if (e) {
        Value *v = sema_eval_lazy(e, s);
        return sema_bind(s, name, v, e->at, B_LET);
      }
    }
    if (s->is_global) {
      Node *def = map_get(&sema_items, name);
      if (def) {
        Value *v = value_new(def->kind == N_FN ? V_FN : V_LAYER);
        v->def = def;
        return sema_bind(s, name, v, def->span, B_LET);
      }
      Value *bv = builtin_lookup(name);
      if (bv) return sema_bind(s, name, bv, (Span){0}, B_BUILTIN);
    }
  }
  return NULL;
}

void sema_consider(const char *name, const char *cand, const char **best, int *best_d) {
  if (!cand || strcmp(cand, "...") == 0) return;
  int d = name_distance(name, cand);
  if (d < *best_d) {
    *best_d = d;
    *best = cand;
  }
}

/* The closest visible name, when it is close enough to be a likely typo. */
static const char *suggest(Scope *s, const char *name) {
  const char *best = NULL;
  int best_d = 99;
  for (; s; s = s->parent) {
    for (int i = 0; i < s->names.cap; i++) sema_consider(name, s->names.keys[i], &best, &best_d);
    for (int i = 0; i < s->lazy_index.cap; i++)
      sema_consider(name, s->lazy_index.keys[i], &best, &best_d);
    if (s->is_global)
      for (int i = 0; i < sema_items.cap; i++) sema_consider(name, sema_items.keys[i], &best, &best_d);
  }
  for (int id = 0; builtin_name(id); id++) sema_consider(name, builtin_name(id), &best, &best_d);
  return best_d <= name_typo_limit(name) ? best : NULL;
}

/* `tail` follows the message (and the hint), e.g. advice on what to write. */
void sema_report_unknown(Scope *s, const Node *n, const char *name, const char *tail) {
  const char *hint = suggest(s, name);
  if (hint)
    diag_error(n->span, "unknown name '%s'; did you mean '%s'?%s", name, hint, tail);
  else
    diag_error(n->span, "unknown name '%s'%s", name, tail);
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

int sema_want_bool(const Value *v, const Node *n, const char *what, int *out) {
  if (v->kind == V_ERROR) return 0;
  if (v->kind != V_BOOL) {
    if (v->kind == V_TENSOR)
      diag_error(n->span, "%s must be known at compile time, but it is a %s; "
                 "use select(c, a, b) to choose between tensors", what, value_kind_name(v));
    else
      diag_error(n->span, "%s must be a boolean, got %s", what, value_kind_name(v));
    return 0;
  }
  *out = (int)v->i;
  return 1;
}

/* Counts one unit of compile-time work; false once the budget is spent. */
int sema_step_ok(const Node *n) {
  if (++sema_steps <= MAX_STEPS) return 1;
  if (!sema_steps_reported) {
    sema_steps_reported = 1;
    diag_error(n->span, "compile-time evaluation takes too long (more than %d steps); "
               "is a loop bound or the model size far too large?", MAX_STEPS);
  }
  return 0;
}

static const Origin *origin_here(const Node *n, const char *fmt_value) {
  Origin *o = pool_alloc(sizeof *o);
  o->at = n->span;
  o->what = pool_printf("%s at %s", fmt_value, span_str(n->span));
  return o;
}

/* ------------------------------------------------------------------------ */
/* Compile-time arithmetic                                                   */

int sema_is_number(const Value *v) { return v->kind == V_INT || v->kind == V_FLOAT; }
double sema_num(const Value *v) { return v->kind == V_INT ? (double)v->i : v->f; }

static Value *int_result(const Node *n, int64_t r) {
  return value_int(r, origin_here(n, pool_printf("%s = %" PRId64, expr_text(n), r)));
}

static Value *arith_int(Op op, int64_t a, int64_t b, const Node *n) {
  int64_t r = 0;
  switch (op) {
    case OP_ADD:
      if (__builtin_add_overflow(a, b, &r)) goto overflow;
      return int_result(n, r);
    case OP_SUB:
      if (__builtin_sub_overflow(a, b, &r)) goto overflow;
      return int_result(n, r);
    case OP_MUL:
      if (__builtin_mul_overflow(a, b, &r)) goto overflow;
      return int_result(n, r);
    case OP_DIV:
      if (b == 0) goto divzero;
      if (a % b != 0) {
        diag_error(n->span, "%" PRId64 " / %" PRId64 " is not a whole number: '/' on integers "
                   "must divide exactly (write float(a) / b for a fraction or a // b to round "
                   "down)", a, b);
        return value_error();
      }
      return int_result(n, a / b);
    case OP_IDIV:
    case OP_MOD: {
      if (b == 0) goto divzero;
      if (a == INT64_MIN && b == -1) goto overflow;
      int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {
        q -= 1;
        m += b;
      }
      return int_result(n, op == OP_IDIV ? q : m);
    }
    case OP_POW: {
      if (b < 0) return value_float(pow((double)a, (double)b));
      r = 1;
      for (int64_t i = 0; i < b; i++)
        if (__builtin_mul_overflow(r, a, &r)) goto overflow;
      return int_result(n, r);
    }
    default: break;
  }
  return value_error();
overflow:
  diag_error(n->span, "integer overflow in compile-time arithmetic");
  return value_error();
divzero:
  diag_error(n->span, "division by zero");
  return value_error();
}

static Value *compare(Op op, int c) {
  switch (op) {
    case OP_EQ: return value_bool(c == 0);
    case OP_NE: return value_bool(c != 0);
    case OP_LT: return value_bool(c < 0);
    case OP_LE: return value_bool(c <= 0);
    case OP_GT: return value_bool(c > 0);
    default: return value_bool(c >= 0);
  }
}

static int is_comparison(Op op) {
  return op == OP_EQ || op == OP_NE || op == OP_LT || op == OP_LE || op == OP_GT || op == OP_GE;
}

static Value *eval_binary(Ctx *ctx, const Node *n) {
  if (n->op == OP_AND || n->op == OP_OR) {
    int a, b;
    if (!sema_want_bool(eval_expr(ctx, n->a), n->a, pool_printf("the left side of '%s'", op_text(n->op)), &a))
      return value_error();
    if (n->op == OP_AND && !a) return value_bool(0);
    if (n->op == OP_OR && a) return value_bool(1);
    if (!sema_want_bool(eval_expr(ctx, n->b), n->b, pool_printf("the right side of '%s'", op_text(n->op)), &b))
      return value_error();
    return value_bool(b);
  }
  Value *a = eval_expr(ctx, n->a), *b = eval_expr(ctx, n->b);
  if (a->kind == V_ERROR || b->kind == V_ERROR) return value_error();
  if (n->op == OP_MATMUL) return tensor_matmul(a, b, n->a, n->b, n);
  if (a->kind == V_TENSOR || b->kind == V_TENSOR) return tensor_binary(n->op, a, b, n->a, n->b, n);
  if (is_comparison(n->op)) {
    if (sema_is_number(a) && sema_is_number(b)) {
      double x = sema_num(a), y = sema_num(b);
      if (a->kind == V_INT && b->kind == V_INT) return compare(n->op, (a->i > b->i) - (a->i < b->i));
      return compare(n->op, (x > y) - (x < y));
    }
    if (a->kind == V_STR && b->kind == V_STR) return compare(n->op, strcmp(a->s, b->s));
    if (a->kind == V_BOOL && b->kind == V_BOOL && (n->op == OP_EQ || n->op == OP_NE))
      return compare(n->op, (int)(a->i - b->i));
    if (a->kind == V_DTYPE && b->kind == V_DTYPE && (n->op == OP_EQ || n->op == OP_NE))
      return compare(n->op, (int)a->dtype - (int)b->dtype);
    diag_error(n->span, "cannot compare %s with %s", value_kind_name(a), value_kind_name(b));
    return value_error();
  }
  if (n->op == OP_ADD && a->kind == V_STR && b->kind == V_STR)
    return value_str(pool_printf("%s%s", a->s, b->s));
  if (!sema_is_number(a) || !sema_is_number(b)) {
    diag_error(n->span, "operator '%s' needs numbers or tensors, got %s and %s", op_text(n->op),
               value_kind_name(a), value_kind_name(b));
    return value_error();
  }
  if (a->kind == V_INT && b->kind == V_INT) return arith_int(n->op, a->i, b->i, n);
  double x = sema_num(a), y = sema_num(b);
  switch (n->op) {
    case OP_ADD: return value_float(x + y);
    case OP_SUB: return value_float(x - y);
    case OP_MUL: return value_float(x * y);
    case OP_DIV:
      if (y == 0) {
        diag_error(n->span, "division by zero");
        return value_error();
      }
      return value_float(x / y);
    case OP_POW: return value_float(pow(x, y));
    default:
      diag_error(n->span, "operator '%s' needs integers", op_text(n->op));
      return value_error();
  }
}

static Value *eval_unary(Ctx *ctx, const Node *n) {
  Value *a = eval_expr(ctx, n->a);
  if (a->kind == V_ERROR) return a;
  if (n->op == OP_NOT) {
    int b;
    if (!sema_want_bool(a, n->a, "the operand of 'not'", &b)) return value_error();
    return value_bool(!b);
  }
  if (a->kind == V_TENSOR) {
    if (n->op == OP_PLUS) return a;
    Value *r = tensor_value(&a->t);
    r->node = lower_unary("neg", a);
    return r;
  }
  if (a->kind == V_INT) {
    if (n->op == OP_PLUS) return a;
    if (a->i == INT64_MIN) {
      diag_error(n->span, "integer overflow in compile-time arithmetic");
      return value_error();
    }
    return int_result(n, -a->i);
  }
  if (a->kind == V_FLOAT) return n->op == OP_PLUS ? a : value_float(-a->f);
  diag_error(n->span, "unary '%s' needs a number or a tensor, got %s", op_text(n->op),
             value_kind_name(a));
  return value_error();
}

/* ------------------------------------------------------------------------ */
/* Types in signatures and declarations                                      */

static int type_dtype(const char *name, DType *dt) {
  static const char *const names[] = {"f32", "f64", "i32", "bf16"};
  for (int i = 0; i < 4; i++)
    if (strcmp(name, names[i]) == 0) {
      *dt = (DType)i;
      return 1;
    }
  return 0;
}

static int is_scalar_type(const char *name) {
  return !strcmp(name, "int") || !strcmp(name, "float") || !strcmp(name, "bool") ||
         !strcmp(name, "str");
}

/* Checks that a type node names a known type; reports otherwise. */
static int type_known(const Node *t) {
  DType dt;
  if (type_dtype(t->name, &dt)) return 1;
  if (is_scalar_type(t->name) && !t->b) return 1;
  if (is_scalar_type(t->name))
    diag_error(t->span, "'%s' is a compile-time type and takes no dimensions; tensor types are "
               "f32[...], f64[...], i32[...] or bf16[...]", t->name);
  else
    diag_error(t->span, "unknown type '%s' (types are int, float, bool, str, f32[...], "
               "f64[...], i32[...], bf16[...])", t->name);
  return 0;
}

/* Builds a tensor type from a declaration (param, input): every dimension
 * must be known. */
int sema_decl_type(Ctx *ctx, const Node *t, TensorType *out) {
  memset(out, 0, sizeof *out);
  if (!type_known(t)) return 0;
  if (!type_dtype(t->name, &out->dtype)) {
    diag_error(t->span, "expected a tensor type such as f32[d], got '%s'", t->name);
    return 0;
  }
  if (!t->b) return 1;
  const PtrVec *dims = &t->b->list;
  if (dims->len > MAX_RANK) {
    diag_error(t->span, "tensors have at most %d dimensions, this type has %d", MAX_RANK, dims->len);
    return 0;
  }
  int ok = 1;
  for (int i = 0; i < dims->len; i++) {
    const Node *d = dims->items[i];
    if (d->kind == N_ELLIPSIS) {
      diag_error(d->span, "'...' is allowed only in the types of a signature (fn and layer fn parameters and results)");
      ok = 0;
      continue;
    }
    Value *v = eval_expr(ctx, d);
    int64_t x;
    if (!want_int(v, d, "a tensor dimension", &x)) {
      ok = 0;
      continue;
    }
    if (!check_dim(x, d)) {
      /* The value may come from far away: a config entry or a -D override. */
      if (d->kind != N_INT && v->origin && v->origin->what)
        diag_note(v->origin->at, "%s is %s", expr_text(d), v->origin->what);
      ok = 0;
      continue;
    }
    out->dims[i] = x;
    out->origin[i] = v->origin ? v->origin : origin_here(d, pool_printf("%" PRId64, x));
  }
  out->rank = dims->len;
  return ok && check_numel(out, t);
}

/* Matches a value against a signature type, binding shape variables (names
 * not yet known in `scope`) and '...' on first use. `what` names the value.
 * Returns the value (converted where numbers meet float/tensor types). */
static Value *match_type(Ctx *ctx, const Node *t, Value *v, const Node *vn, const char *what) {
  if (v->kind == V_ERROR) return v;
  if (!type_known(t)) return value_error();
  const char *tn = t->name;
  if (!strcmp(tn, "int") || !strcmp(tn, "bool") || !strcmp(tn, "str") || !strcmp(tn, "float")) {
    int ok = (!strcmp(tn, "int") && v->kind == V_INT) || (!strcmp(tn, "bool") && v->kind == V_BOOL) ||
             (!strcmp(tn, "str") && v->kind == V_STR) ||
             (!strcmp(tn, "float") && sema_is_number(v));
    if (!ok) {
      diag_error(vn->span, "%s must be %s %s, got %s", what, !strcmp(tn, "int") ? "an" : "a", tn,
                 value_kind_name(v));
      return value_error();
    }
    return !strcmp(tn, "float") && v->kind == V_INT ? value_float((double)v->i) : v;
  }
  DType dt = DT_F32;
  type_dtype(tn, &dt);
  if (sema_is_number(v) && !t->b) {
    if (!dtype_is_float(dt) && v->kind == V_FLOAT) {
      diag_error(vn->span, "%s must be %s, got the float %g", what, tn, v->f);
      return value_error();
    }
    TensorType s = {.dtype = dt};
    Value *r = tensor_value(&s);
    r->node = lower_as(v, &s);
    return r;
  }
  if (v->kind != V_TENSOR) {
    diag_error(vn->span, "%s must be a tensor %s, got %s", what, tn, value_kind_name(v));
    return value_error();
  }
  if (v->t.dtype != dt) {
    diag_error(vn->span, "%s must have dtype %s, got %s", what, tn, tensor_type_str(&v->t));
    return value_error();
  }
  const PtrVec *dims = t->b ? &t->b->list : &(PtrVec){0};
  int ellipsis = -1;
  for (int i = 0; i < dims->len; i++) {
    const Node *d = dims->items[i];
    if (d->kind != N_ELLIPSIS) continue;
    if (ellipsis >= 0) {
      diag_error(d->span, "a type may contain '...' only once");
      return value_error();
    }
    ellipsis = i;
  }
  int fixed = dims->len - (ellipsis >= 0);
  int rank = v->t.rank;
  if (ellipsis < 0 ? rank != fixed : rank < fixed) {
    diag_error(vn->span, "%s must have rank %s%d to match %s, got %s", what,
               ellipsis >= 0 ? "at least " : "", fixed, expr_text(t), tensor_type_str(&v->t));
    return value_error();
  }
  int extra = rank - fixed;
  for (int i = 0, axis = 0; i < dims->len; i++) {
    const Node *d = dims->items[i];
    if (d->kind == N_ELLIPSIS) {
      Binding *eb = sema_scope_find_here(ctx->scope, "...");
      if (!eb) {
        Value *l = value_new(V_LIST);
        for (int k = 0; k < extra; k++) vec_push(&l->items, value_int(v->t.dims[axis + k], v->t.origin[axis + k]));
        sema_bind(ctx->scope, "...", l, d->span, B_SHAPEVAR);
      } else {
        const Value *l = eb->value;
        int same = l->items.len == extra;
        for (int k = 0; same && k < extra; k++)
          same = ((Value *)l->items.items[k])->i == v->t.dims[axis + k];
        if (!same) {
          diag_error(vn->span, "%s: its leading dimensions (the '...' part of %s) differ from "
                     "those bound earlier", what, tensor_type_str(&v->t));
          diag_note(eb->at, "'...' was bound here");
          return value_error();
        }
      }
      axis += extra;
      continue;
    }
    if (d->kind == N_NAME && !sema_lookup(ctx->scope, d->name)) {
      sema_bind(ctx->scope, d->name, value_int(v->t.dims[axis], v->t.origin[axis]), d->span, B_SHAPEVAR);
      axis++;
      continue;
    }
    Value *want = eval_expr(ctx, d);
    int64_t w;
    if (!want_int(want, d, "a tensor dimension", &w)) return value_error();
    if (w != v->t.dims[axis]) {
      /* A literal needs no "'4' = 4" and no note on where it came from. */
      const char *req = d->kind == N_INT ? pool_printf("%" PRId64, w)
                                         : pool_printf("%s = %" PRId64, expr_text(d), w);
      diag_error(vn->span, "%s: dimension %d is %" PRId64 ", but %s requires %s (the value "
                 "has type %s)", what, axis, v->t.dims[axis], expr_text(t), req,
                 tensor_type_str(&v->t));
      note_dims(vn, &v->t, axis);
      if (d->kind != N_INT && want->origin && want->origin->what)
        diag_note(want->origin->at, "%s is %s", expr_text(d), want->origin->what);
      return value_error();
    }
    axis++;
  }
  return v;
}

/* ------------------------------------------------------------------------ */
/* Calls                                                                     */

static int on_call_stack(const Node *def) {
  for (int i = 0; i < sema_call_stack.len; i++)
    if (sema_call_stack.items[i] == def) return 1;
  return 0;
}

static int enter_call(const Node *def, const Node *call, const char *what) {
  if (on_call_stack(def)) {
    diag_error(call->span, "%s calls itself: functions and layers are inlined at compile time, "
               "so recursion is not allowed (use a for loop)", what);
    return 0;
  }
  if (sema_call_stack.len >= MAX_CALL_DEPTH) {
    diag_error(call->span, "calls nest more than %d deep", MAX_CALL_DEPTH);
    return 0;
  }
  vec_push(&sema_call_stack, (void *)def);
  vec_push(&sema_call_sites, (void *)call);
  vec_push(&sema_call_names, (void *)what);
  return 1;
}

static void leave_call(void) {
  sema_call_stack.len--;
  sema_call_sites.len--;
  sema_call_names.len--;
}

/* Binds the arguments of a call to the parameters of a definition in the
 * new scope of ctx. Parameters with types are checked (binding shape
 * variables); defaults are evaluated in the callee's scope. */
static int bind_args(Ctx *ctx, const PtrVec *params, Arg *args, int nargs, const Node *call,
                     const char *callee) {
  int ok = 1, npos = 0;
  for (int i = 0; i < nargs; i++) {
    if (args[i].name) continue;
    if (i > npos) {
      diag_error(args[i].node->span, "a positional argument cannot follow a keyword argument");
      return 0;
    }
    npos++;
  }
  if (npos > params->len) {
    diag_error(call->span, "%s takes %d argument%s, got %d", callee, params->len,
               params->len == 1 ? "" : "s", npos);
    return 0;
  }
  Arg **given = pool_alloc(sizeof(Arg *) * (size_t)(params->len + 1));
  for (int i = 0; i < npos; i++) given[i] = &args[i];
  for (int i = npos; i < nargs; i++) {
    int found = -1;
    for (int k = 0; k < params->len; k++)
      if (!strcmp(((Node *)params->items[k])->name, args[i].name)) found = k;
    if (found < 0) {
      const char *names = "", *hint = NULL;
      for (int k = 0; k < params->len; k++) {
        const char *pn = ((Node *)params->items[k])->name;
        names = pool_printf("%s%s%s", names, k ? ", " : "", pn);
        if (!hint && name_is_typo_of(args[i].name, pn)) hint = pn;
      }
      diag_error(args[i].at, "%s has no parameter named '%s' (it takes: %s)%s", callee,
                 args[i].name, params->len ? names : "nothing",
                 hint ? pool_printf("; did you mean '%s'?", hint) : "");
      ok = 0;
    } else if (given[found]) {
      diag_error(args[i].at, "argument '%s' of %s is given twice", args[i].name, callee);
      ok = 0;
    } else {
      given[found] = &args[i];
    }
  }
  if (!ok) return 0;
  for (int k = 0; k < params->len; k++) {
    const Node *p = params->items[k];
    Value *v;
    const Node *vn;
    if (given[k]) {
      v = given[k]->value;
      vn = given[k]->node;
    } else if (p->a) {
      v = eval_expr(ctx, p->a);
      vn = p->a;
    } else {
      diag_error(call->span, "%s: missing argument '%s'", callee, p->name);
      diag_note(p->span, "'%s' is declared here", p->name);
      ok = 0;
      continue;
    }
    if (p->t) v = match_type(ctx, p->t, v, vn, pool_printf("argument '%s' of %s", p->name, callee));
    if (v->kind == V_ERROR) ok = 0;
    Binding *dim = sema_scope_find_here(ctx->scope, p->name);
    if (dim && dim->kind == B_SHAPEVAR && v->kind != V_ERROR &&
        (v->kind != V_INT || v->i != dim->value->i)) {
      /* fn f(x: f32[N], N: int): the argument must agree with the shape. */
      diag_error(vn->span, "argument '%s' of %s is %s, but the shape of an earlier argument "
                 "makes %s = %" PRId64, p->name, callee,
                 v->kind == V_INT ? pool_printf("%" PRId64, v->i) : value_kind_name(v), p->name,
                 dim->value->i);
      diag_note(dim->at, "'%s' is bound here", p->name);
      ok = 0;
    } else if (dim && dim->kind != B_SHAPEVAR) {
      diag_error(p->span, "parameter '%s' is declared twice", p->name);
      ok = 0;
    }
    sema_bind(ctx->scope, p->name, v, p->span, B_ARG);
  }
  return ok;
}


/* Runs a function-like body (fn or forward) and checks its result type. */
static Value *run_body(Ctx *ctx, const Node *body, const Node *ret_type, const Node *call,
                       const char *callee) {
  sema_exec_block(ctx, body);
  Value *r = ctx->returned;
  if (!r) {
    if (diag_error_count() == 0)
      diag_error(call->span, "%s ended without a return", callee);
    return value_error();
  }
  if (ret_type && r->kind != V_ERROR)
    r = match_type(ctx, ret_type, r, ctx->returned_at ? ctx->returned_at : call,
                   pool_printf("the result of %s", callee));
  return r;
}

static Value *call_fn(const Node *def, Arg *args, int nargs, const Node *call) {
  const char *callee = pool_printf("fn %s", def->name);
  if (!enter_call(def, call, callee)) return value_error();
  Ctx c = {.scope = sema_scope_new(sema_global_scope), .where = callee};
  Value *r = value_error();
  if (bind_args(&c, &def->params, args, nargs, call, callee))
    r = run_body(&c, def->c, def->t, call, callee);
  leave_call();
  return r;
}

static Value *call_instance(Instance *inst, Arg *args, int nargs, const Node *call) {
  const char *callee = pool_printf("%s (layer %s)", inst->path[0] ? inst->path : "the model",
                                   inst->def ? inst->def->name : "?");
  if (!inst->forward) {
    diag_error(call->span, "%s cannot be called: its layer has no 'fn (...)' body", callee);
    return value_error();
  }
  if (!enter_call(inst->forward, call, callee)) return value_error();
  Ctx c = {.scope = sema_scope_new(inst->scope), .body_of = inst, .where = callee};
  inst->calls++;
  Value *r = value_error();
  const char *outer = lower_enter_scope(inst->path);
  if (bind_args(&c, &inst->forward->params, args, nargs, call, callee))
    r = run_body(&c, inst->forward->c, inst->forward->t, call, callee);
  lower_enter_scope(outer);
  leave_call();
  return r;
}

/* Creates a layer instance named `path` inside ctx's instance. */
Value *sema_instantiate(Ctx *ctx, const Node *def, Arg *args, int nargs, const Node *call,
                          const char *path) {
  const char *callee = pool_printf("layer %s", def->name);
  if (!enter_call(def, call, callee)) return value_error();
  Instance *inst = pool_alloc(sizeof *inst);
  inst->path = path;
  inst->def = def;
  inst->at = call->span;
  inst->scope = sema_scope_new(sema_global_scope);
  Ctx c = {.scope = inst->scope, .inst = inst, .where = callee};
  if (!bind_args(&c, &def->params, args, nargs, call, callee)) {
    leave_call();
    return value_error(); /* its uses stay silent */
  }
  const char *outer = lower_enter_scope(path); /* its params and what makes them */
  sema_exec_block(&c, def->c);
  lower_enter_scope(outer);
  leave_call();
  if (c.returned) diag_error(call->span, "%s: 'return' belongs in its fn (...) body", callee);
  vec_push(&ctx->inst->children, inst);
  Value *v = value_new(V_INSTANCE);
  v->inst = inst;
  return v;
}

int sema_eval_args(Ctx *ctx, const Node *call, Arg **out) {
  int n = call->list.len, ok = 1;
  Arg *args = pool_alloc(sizeof(Arg) * (size_t)(n + 1));
  for (int i = 0; i < n; i++) {
    const Node *a = call->list.items[i];
    args[i].name = a->name;
    args[i].node = a->a;
    args[i].at = a->name ? span_join(a->span, a->a->span) : a->a->span;
    args[i].value = eval_expr(ctx, a->a);
    if (args[i].value->kind == V_ERROR) ok = 0;
  }
  *out = args;
  return ok ? n : -1;
}

static Value *eval_call(Ctx *ctx, const Node *n) {
  Value *f = eval_expr(ctx, n->a);
  if (f->kind == V_ERROR) return f;
  if (f->kind == V_LAYER) {
    diag_error(n->span, "layer '%s' must be instantiated with a name, so that its parameters "
               "have one: write 'let NAME = %s(...)' in a model or layer body, then call NAME(...)",
               f->def->name, f->def->name);
    return value_error();
  }
  if (f->kind != V_FN && f->kind != V_INSTANCE && f->kind != V_BUILTIN) {
    diag_error(n->a->span, "%s is %s, which cannot be called", expr_text(n->a), value_kind_name(f));
    return value_error();
  }
  Arg *args;
  int nargs = sema_eval_args(ctx, n, &args);
  if (nargs < 0) return value_error();
  if (f->kind == V_FN) return call_fn(f->def, args, nargs, n);
  if (f->kind == V_INSTANCE) return call_instance(f->inst, args, nargs, n);
  return builtin_call(ctx, f, n, args, nargs);
}

/* ------------------------------------------------------------------------ */
/* Expressions                                                               */

static Value *eval_member(Ctx *ctx, const Node *n) {
  Value *a = eval_expr(ctx, n->a);
  if (a->kind == V_ERROR) return a;
  if (a->kind != V_INSTANCE) {
    diag_error(n->span, "%s is %s, which has no members", expr_text(n->a), value_kind_name(a));
    return value_error();
  }
  Binding *b = sema_scope_find_here(a->inst->scope, n->name);
  if (!b || (b->kind != B_PARAM && b->kind != B_INSTANCE)) {
    /* Point at the member's name, the last thing in `a.name`. */
    Span at = n->span;
    if (at.line == at.end_line && at.end_col - (int)strlen(n->name) + 1 > at.col)
      at.col = at.end_col - (int)strlen(n->name) + 1;
    const char *best = NULL;
    int best_d = 99;
    const NameMap *names = &a->inst->scope->names;
    for (int i = 0; i < names->cap; i++) {
      const Binding *m = names->keys[i] ? names->vals[i] : NULL;
      if (m && (m->kind == B_PARAM || m->kind == B_INSTANCE)) sema_consider(n->name, m->name, &best, &best_d);
    }
    const char *layer = a->inst->def ? a->inst->def->name : "?";
    if (best && best_d <= name_typo_limit(n->name))
      diag_error(at, "%s (layer %s) has no parameter or sub-layer '%s'; did you mean '%s'?",
                 expr_text(n->a), layer, n->name, best);
    else
      diag_error(at, "%s (layer %s) has no parameter or sub-layer '%s'", expr_text(n->a), layer,
                 n->name);
    return value_error();
  }
  return b->value;
}

static Value *eval_index(Ctx *ctx, const Node *n) {
  Value *a = eval_expr(ctx, n->a);
  if (a->kind == V_ERROR) return a;
  if (a->kind == V_TENSOR) {
    diag_error(n->span, "tensors are not indexed with [...]; use slice(), gather() or reshape()");
    return value_error();
  }
  if (a->kind != V_LIST && a->kind != V_TABLE) {
    diag_error(n->span, "%s is %s, which cannot be indexed", expr_text(n->a), value_kind_name(a));
    return value_error();
  }
  int64_t i;
  if (!want_int(eval_expr(ctx, n->b), n->b, "an index", &i)) return value_error();
  int64_t len = a->items.len;
  int64_t k = (a->kind == V_LIST && i < 0) ? i + len : i;
  if (k < 0 || k >= len || !a->items.items[k]) {
    if (a->kind == V_LIST)
      diag_error(n->b->span, "index %" PRId64 " is out of range for a list of %" PRId64, i, len);
    else
      diag_error(n->b->span, "%s has no entry [%" PRId64 "]", expr_text(n->a), i);
    return value_error();
  }
  return a->items.items[k];
}

static Value *eval_kind(Ctx *ctx, const Node *n) {
  switch (n->kind) {
    case N_INT: return value_int(n->ival, origin_here(n, pool_printf("%" PRId64 " written", n->ival)));
    case N_FLOAT: return value_float(n->fval);
    case N_STRING: return value_str(n->sval);
    case N_BOOL: return value_bool((int)n->ival);
    case N_NAME: {
      Binding *b = sema_lookup(ctx->scope, n->name);
      if (!b) {
        sema_report_unknown(ctx->scope, n, n->name, "");
        return value_error();
      }
      const FrontObserver *o = sema_opt->observer;
      if (o && o->used) o->used(o->user, n, b->at);
      return b->value;
    }
    case N_UNARY: return eval_unary(ctx, n);
    case N_BINARY: return eval_binary(ctx, n);
    case N_CALL: return eval_call(ctx, n);
    case N_MEMBER: return eval_member(ctx, n);
    case N_INDEX: return eval_index(ctx, n);
    case N_LIST: {
      Value *l = value_new(V_LIST);
      for (int i = 0; i < n->list.len; i++) {
        Value *e = eval_expr(ctx, n->list.items[i]);
        if (e->kind == V_ERROR) return e;
        vec_push(&l->items, e);
      }
      return l;
    }
    case N_ELLIPSIS:
      diag_error(n->span, "'...' is allowed only inside a tensor type");
      return value_error();
    case N_ERROR: return value_error();
    default:
      diag_error(n->span, "a %s is not an expression", node_kind_name(n->kind));
      return value_error();
  }
}

Value *eval_expr(Ctx *ctx, const Node *n) {
  if (!sema_step_ok(n) || diag_stopped()) return value_error();
  Value *v = eval_kind(ctx, n);
  const FrontObserver *o = sema_opt->observer;
  if (o && o->value) o->value(o->user, n, v);
  return v;
}
