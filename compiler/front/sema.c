/* The checker: evaluates the program at compile time. Config entries, loop
 * bounds and shapes are all known here, so every expression gets an exact
 * dtype and shape, functions are inlined, layers are instantiated with
 * dotted parameter names, and compile-time `if`/`for` are unrolled. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "parser.h"
#include "sema_internal.h"

/* Bounds on compile-time work, so that no program can hang the compiler. */
/* The 6-layer base Transformer takes about 10,000 steps. */
enum { MAX_STEPS = 2000000, MAX_CALL_DEPTH = 200 };

CheckedModel *sema_model;
const FrontOptions *sema_opt;

static NameMap items;          /* fn and layer definitions by name */
static Scope *global_scope;    /* items and built-ins: what fn and layer bodies see */
static Scope *config_scope;    /* config entries: what the model and train blocks see */
static long steps;
static int steps_reported;
static PtrVec call_stack;      /* const Node* of the fn/layer bodies being evaluated */
static PtrVec call_sites;      /* const Node* of the calls, parallel to call_stack */
static PtrVec call_names;      /* const char*: "fn heads", parallel to call_stack */

static int span_within(Span in, Span out) {
  return in.file == out.file && (in.line > out.line || (in.line == out.line && in.col >= out.col)) &&
         (in.line < out.end_line || (in.line == out.end_line && in.col <= out.end_col));
}

/* After an error inside inlined code: where each enclosing call came from,
 * innermost first. An error in the innermost call itself (its arguments)
 * needs no note that repeats its position. */
static void show_call_chain(Span at) {
  enum { SHOWN = 6 };
  int top = call_stack.len - 1;
  if (top >= 0 && span_within(at, ((const Node *)call_sites.items[top])->span)) top--;
  for (int i = top, k = 0; i >= 0; i--, k++) {
    if (k == SHOWN) {
      diag_note((Span){0}, "... and %d more enclosing calls", i + 1);
      break;
    }
    const Node *site = call_sites.items[i];
    diag_note(site->span, "in %s, called here", (const char *)call_names.items[i]);
  }
}

/* ------------------------------------------------------------------------ */
/* Scopes and names                                                          */

static Scope *scope_new(Scope *parent) {
  Scope *s = pool_alloc(sizeof *s);
  s->parent = parent;
  return s;
}

static Binding *scope_find_here(Scope *s, const char *name) { return map_get(&s->names, name); }

static Binding *bind(Scope *s, const char *name, Value *v, Span at, BindingKind kind) {
  Binding *b = pool_alloc(sizeof *b);
  b->name = name;
  b->value = v;
  b->at = at;
  b->kind = kind;
  map_put(&s->names, name, b);
  return b;
}

static Value *eval_lazy(ConfigEntry *e, Scope *s);

/* Finds a name from scope `s` outwards; NULL if unknown. */
static Binding *lookup(Scope *s, const char *name) {
  for (; s; s = s->parent) {
    Binding *b = scope_find_here(s, name);
    if (b) return b;
    if (s->lazy) {
      ConfigEntry *e = map_get(&s->lazy_index, name);
      if (e) {
        Value *v = eval_lazy(e, s);
        return bind(s, name, v, e->at, B_LET);
      }
    }
    if (s->is_global) {
      Node *def = map_get(&items, name);
      if (def) {
        Value *v = value_new(def->kind == N_FN ? V_FN : V_LAYER);
        v->def = def;
        return bind(s, name, v, def->span, B_LET);
      }
      Value *bv = builtin_lookup(name);
      if (bv) return bind(s, name, bv, (Span){0}, B_BUILTIN);
    }
  }
  return NULL;
}

static int edit_distance(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la > 40 || lb > 40) return 99;
  int d[41][41];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
      d[i][j] = c;
    }
  return d[la][lb];
}

static void consider(const char *name, const char *cand, const char **best, int *best_d) {
  if (!cand || strcmp(cand, "...") == 0) return;
  int d = edit_distance(name, cand);
  if (d < *best_d) {
    *best_d = d;
    *best = cand;
  }
}

/* The largest edit distance at which a name still looks like a typo of
 * another. Any two one-letter names are one edit apart, so those get none. */
static int typo_limit(const char *name) {
  int len = (int)strlen(name);
  return len <= 1 ? 0 : len <= 3 ? 1 : len / 3 + 1;
}

int name_is_typo_of(const char *name, const char *cand) {
  return edit_distance(name, cand) <= typo_limit(name);
}

/* The closest visible name, when it is close enough to be a likely typo. */
static const char *suggest(Scope *s, const char *name) {
  const char *best = NULL;
  int best_d = 99;
  for (; s; s = s->parent) {
    for (int i = 0; i < s->names.cap; i++) consider(name, s->names.keys[i], &best, &best_d);
    for (int i = 0; i < s->lazy_index.cap; i++)
      consider(name, s->lazy_index.keys[i], &best, &best_d);
    if (s->is_global)
      for (int i = 0; i < items.cap; i++) consider(name, items.keys[i], &best, &best_d);
  }
  for (int id = 0; builtin_name(id); id++) consider(name, builtin_name(id), &best, &best_d);
  return best_d <= typo_limit(name) ? best : NULL;
}

/* `tail` follows the message (and the hint), e.g. advice on what to write. */
static void report_unknown(Scope *s, const Node *n, const char *name, const char *tail) {
  const char *hint = suggest(s, name);
  if (hint)
    diag_error(n->span, "unknown name '%s'; did you mean '%s'?%s", name, hint, tail);
  else
    diag_error(n->span, "unknown name '%s'%s", name, tail);
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

const char *expr_text(const Node *n) {
  const SourceFile *f = source_get(n->span.file);
  if (f && n->span.line == n->span.end_line && n->span.end_col >= n->span.col &&
      n->span.end_col - n->span.col < 40) {
    size_t len;
    const char *line = source_line(n->span.file, n->span.line, &len);
    if ((size_t)n->span.end_col <= len)
      return pool_printf("'%.*s'", n->span.end_col - n->span.col + 1, line + n->span.col - 1);
  }
  return "the expression";
}

int want_int(const Value *v, const Node *n, const char *what, int64_t *out) {
  if (v->kind == V_ERROR) return 0;
  if (v->kind != V_INT) {
    diag_error(n->span, "%s must be a compile-time integer, got %s", what, value_kind_name(v));
    return 0;
  }
  *out = v->i;
  return 1;
}

static int want_bool(const Value *v, const Node *n, const char *what, int *out) {
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
static int step_ok(const Node *n) {
  if (++steps <= MAX_STEPS) return 1;
  if (!steps_reported) {
    steps_reported = 1;
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

static int is_number(const Value *v) { return v->kind == V_INT || v->kind == V_FLOAT; }
static double num(const Value *v) { return v->kind == V_INT ? (double)v->i : v->f; }

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
    if (!want_bool(eval_expr(ctx, n->a), n->a, pool_printf("the left side of '%s'", op_text(n->op)), &a))
      return value_error();
    if (n->op == OP_AND && !a) return value_bool(0);
    if (n->op == OP_OR && a) return value_bool(1);
    if (!want_bool(eval_expr(ctx, n->b), n->b, pool_printf("the right side of '%s'", op_text(n->op)), &b))
      return value_error();
    return value_bool(b);
  }
  Value *a = eval_expr(ctx, n->a), *b = eval_expr(ctx, n->b);
  if (a->kind == V_ERROR || b->kind == V_ERROR) return value_error();
  if (n->op == OP_MATMUL) return tensor_matmul(a, b, n->a, n->b, n);
  if (a->kind == V_TENSOR || b->kind == V_TENSOR) return tensor_binary(n->op, a, b, n->a, n->b, n);
  if (is_comparison(n->op)) {
    if (is_number(a) && is_number(b)) {
      double x = num(a), y = num(b);
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
  if (!is_number(a) || !is_number(b)) {
    diag_error(n->span, "operator '%s' needs numbers or tensors, got %s and %s", op_text(n->op),
               value_kind_name(a), value_kind_name(b));
    return value_error();
  }
  if (a->kind == V_INT && b->kind == V_INT) return arith_int(n->op, a->i, b->i, n);
  double x = num(a), y = num(b);
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
    if (!want_bool(a, n->a, "the operand of 'not'", &b)) return value_error();
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
static int decl_type(Ctx *ctx, const Node *t, TensorType *out) {
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
             (!strcmp(tn, "float") && is_number(v));
    if (!ok) {
      diag_error(vn->span, "%s must be %s %s, got %s", what, !strcmp(tn, "int") ? "an" : "a", tn,
                 value_kind_name(v));
      return value_error();
    }
    return !strcmp(tn, "float") && v->kind == V_INT ? value_float((double)v->i) : v;
  }
  DType dt = DT_F32;
  type_dtype(tn, &dt);
  if (is_number(v) && !t->b) {
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
      Binding *eb = scope_find_here(ctx->scope, "...");
      if (!eb) {
        Value *l = value_new(V_LIST);
        for (int k = 0; k < extra; k++) vec_push(&l->items, value_int(v->t.dims[axis + k], v->t.origin[axis + k]));
        bind(ctx->scope, "...", l, d->span, B_SHAPEVAR);
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
    if (d->kind == N_NAME && !lookup(ctx->scope, d->name)) {
      bind(ctx->scope, d->name, value_int(v->t.dims[axis], v->t.origin[axis]), d->span, B_SHAPEVAR);
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
  for (int i = 0; i < call_stack.len; i++)
    if (call_stack.items[i] == def) return 1;
  return 0;
}

static int enter_call(const Node *def, const Node *call, const char *what) {
  if (on_call_stack(def)) {
    diag_error(call->span, "%s calls itself: functions and layers are inlined at compile time, "
               "so recursion is not allowed (use a for loop)", what);
    return 0;
  }
  if (call_stack.len >= MAX_CALL_DEPTH) {
    diag_error(call->span, "calls nest more than %d deep", MAX_CALL_DEPTH);
    return 0;
  }
  vec_push(&call_stack, (void *)def);
  vec_push(&call_sites, (void *)call);
  vec_push(&call_names, (void *)what);
  return 1;
}

static void leave_call(void) {
  call_stack.len--;
  call_sites.len--;
  call_names.len--;
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
    Binding *dim = scope_find_here(ctx->scope, p->name);
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
    bind(ctx->scope, p->name, v, p->span, B_ARG);
  }
  return ok;
}

static void exec_block(Ctx *ctx, const Node *block);

/* Runs a function-like body (fn or forward) and checks its result type. */
static Value *run_body(Ctx *ctx, const Node *body, const Node *ret_type, const Node *call,
                       const char *callee) {
  exec_block(ctx, body);
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
  Ctx c = {.scope = scope_new(global_scope), .where = callee};
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
  Ctx c = {.scope = scope_new(inst->scope), .where = callee};
  Value *r = value_error();
  if (bind_args(&c, &inst->forward->params, args, nargs, call, callee))
    r = run_body(&c, inst->forward->c, inst->forward->t, call, callee);
  leave_call();
  return r;
}

/* Creates a layer instance named `path` inside ctx's instance. */
static Value *instantiate(Ctx *ctx, const Node *def, Arg *args, int nargs, const Node *call,
                          const char *path) {
  const char *callee = pool_printf("layer %s", def->name);
  if (!enter_call(def, call, callee)) return value_error();
  Instance *inst = pool_alloc(sizeof *inst);
  inst->path = path;
  inst->def = def;
  inst->at = call->span;
  inst->scope = scope_new(global_scope);
  Ctx c = {.scope = inst->scope, .inst = inst, .where = callee};
  if (!bind_args(&c, &def->params, args, nargs, call, callee)) {
    leave_call();
    return value_error(); /* its uses stay silent */
  }
  exec_block(&c, def->c);
  leave_call();
  if (c.returned) diag_error(call->span, "%s: 'return' belongs in its fn (...) body", callee);
  vec_push(&ctx->inst->children, inst);
  Value *v = value_new(V_INSTANCE);
  v->inst = inst;
  return v;
}

static int eval_args(Ctx *ctx, const Node *call, Arg **out) {
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
  int nargs = eval_args(ctx, n, &args);
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
  Binding *b = scope_find_here(a->inst->scope, n->name);
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
      if (m && (m->kind == B_PARAM || m->kind == B_INSTANCE)) consider(n->name, m->name, &best, &best_d);
    }
    const char *layer = a->inst->def ? a->inst->def->name : "?";
    if (best && best_d <= typo_limit(n->name))
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

Value *eval_expr(Ctx *ctx, const Node *n) {
  if (!step_ok(n) || diag_stopped()) return value_error();
  switch (n->kind) {
    case N_INT: return value_int(n->ival, origin_here(n, pool_printf("%" PRId64 " written", n->ival)));
    case N_FLOAT: return value_float(n->fval);
    case N_STRING: return value_str(n->sval);
    case N_BOOL: return value_bool((int)n->ival);
    case N_NAME: {
      Binding *b = lookup(ctx->scope, n->name);
      if (!b) {
        report_unknown(ctx->scope, n, n->name, "");
        return value_error();
      }
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

/* ------------------------------------------------------------------------ */
/* Statements                                                                */

/* After an error in a declaration its names still exist, bound to an error
 * value, so that their uses are not reported as unknown names too. */
static void bind_failed(Scope *scope, const char *name, Span at) {
  if (!scope_find_here(scope, name)) bind(scope, name, value_error(), at, B_LET);
}

static int check_param(Ctx *ctx, const Node *s, TensorType *t, Value **init) {
  if (!ctx->inst) {
    diag_error(s->span, "'param' is allowed only in a layer or model body, not in %s", ctx->where);
    return 0;
  }
  if (!decl_type(ctx, s->t, t)) return 0;
  if (!s->a) {
    diag_error(s->span, "param needs an initialiser, e.g. '= xavier_uniform', '= zeros' or "
               "'= normal(0, 0.02)'");
    return 0;
  }
  *init = eval_expr(ctx, s->a);
  if ((*init)->kind == V_ERROR) return 0;
  if ((*init)->kind != V_INIT) {
    diag_error(s->a->span, "%s is %s, not an initialiser (zeros, ones, constant(v), "
               "normal(mean, std), uniform(lo, hi), xavier_uniform, xavier_normal)",
               expr_text(s->a), value_kind_name(*init));
    return 0;
  }
  const char *kind = (*init)->s;
  if (t->rank < 2 && (!strcmp(kind, "xavier_uniform") || !strcmp(kind, "xavier_normal"))) {
    diag_error(s->a->span, "%s needs a parameter of rank 2 or more (fan-in and fan-out), "
               "this one is %s", kind, tensor_type_str(t));
    return 0;
  }
  return 1;
}

static void declare_param(Ctx *ctx, const Node *s) {
  TensorType t;
  Value *init = NULL;
  if (!check_param(ctx, s, &t, &init)) {
    for (int i = 0; i < s->list.len; i++) {
      const Node *nm = s->list.items[i];
      bind_failed(ctx->scope, nm->name, nm->span);
    }
    return;
  }
  for (int i = 0; i < s->list.len; i++) {
    const Node *nm = s->list.items[i];
    Binding *prev = scope_find_here(ctx->inst->scope, nm->name);
    if (prev && prev->kind != B_LET) {
      diag_error(nm->span, "'%s' is already defined in this %s", nm->name,
                 ctx->inst->def ? "layer" : "model");
      diag_note(prev->at, "previous definition");
      continue;
    }
    Param *p = pool_alloc(sizeof *p);
    p->name = ctx->inst->path[0] ? pool_printf("%s.%s", ctx->inst->path, nm->name) : nm->name;
    p->type = t;
    p->init = init;
    p->at = nm->span;
    p->owner = ctx->inst;
    vec_push(&ctx->inst->params, p);
    vec_push(&sema_model->params, p);
    Value *v = tensor_value(&t);
    v->node = lower_param(p->name, &t);
    bind(ctx->inst->scope, nm->name, v, nm->span, B_PARAM);
  }
}

/* `let NAME = expr` and `let NAME[i] = expr`; a layer call on the right
 * creates a named instance. */
static void exec_let(Ctx *ctx, const Node *s) {
  int64_t index = -1;
  if (s->b && !want_int(eval_expr(ctx, s->b), s->b, "the index in 'let name[index]'", &index))
    return;
  if (s->b && (index < 0 || index > 1000000)) {
    diag_error(s->b->span, "the index in 'let name[index]' must be between 0 and 1000000");
    return;
  }
  /* On an error the name is still bound (to the error value), so that its
   * uses further on stay silent instead of each reporting an unknown name. */
  Value *v = NULL;
  const Node *e = s->a;
  if (e->kind == N_CALL) {
    Value *f = eval_expr(ctx, e->a);
    if (f->kind == V_ERROR) v = f;
    if (f->kind == V_LAYER) {
      Arg *args;
      int nargs;
      if (!ctx->inst) {
        diag_error(e->span, "layers are instantiated in a model or layer body, not in %s; pass "
                   "the instance in as an argument instead", ctx->where);
        v = value_error();
      } else if ((nargs = eval_args(ctx, e, &args)) < 0) {
        v = value_error();
      } else {
        const char *local = s->b ? pool_printf("%s.%" PRId64, s->name, index) : s->name;
        const char *path = ctx->inst->path[0] ? pool_printf("%s.%s", ctx->inst->path, local) : local;
        v = instantiate(ctx, f->def, args, nargs, e, path);
      }
    }
  }
  if (!v) v = eval_expr(ctx, e);
  /* Instances belong to the layer or model (visible to its fn body and as
   * members); plain values belong to the block they are defined in. */
  Scope *target = (v->kind == V_INSTANCE && ctx->inst) ? ctx->inst->scope : ctx->scope;
  BindingKind kind = v->kind == V_INSTANCE ? B_INSTANCE : B_LET;
  Binding *prev = scope_find_here(target, s->name);
  if (s->b) {
    if (!prev) {
      Value *t = value_new(V_TABLE);
      prev = bind(target, s->name, t, s->span, kind);
    } else if (prev->value->kind != V_TABLE) {
      diag_error(s->span, "'%s' is already defined as %s", s->name, value_kind_name(prev->value));
      diag_note(prev->at, "previous definition");
      return;
    }
    Value *t = prev->value;
    while (t->items.len <= index) vec_push(&t->items, NULL);
    if (t->items.items[index]) {
      diag_error(s->span, "'%s[%" PRId64 "]' is already defined", s->name, index);
      return;
    }
    t->items.items[index] = v;
    return;
  }
  if (prev && prev->kind != B_SHAPEVAR) {
    diag_error(s->span, "'%s' is already defined in this scope; write '%s = ...' to give it a "
               "new value", s->name, s->name);
    if (prev->at.file) diag_note(prev->at, "previous definition");
    return;
  }
  bind(target, s->name, v, s->span, kind);
}

static void exec_assign(Ctx *ctx, const Node *s) {
  Value *v = eval_expr(ctx, s->a);
  for (Scope *sc = ctx->scope; sc; sc = sc->parent) {
    /* A config value already used is bound in its scope too: check first. */
    if (sc->lazy && map_get(&sc->lazy_index, s->name)) {
      diag_error(s->span, "cannot assign to the config value '%s'; override it with -D %s=...",
                 s->name, s->name);
      return;
    }
    if (sc->is_global) {
      const Node *def = map_get(&items, s->name);
      if (def || builtin_lookup(s->name)) {
        diag_error(s->span, "cannot assign to '%s': it is %s", s->name,
                   def ? (def->kind == N_FN ? "a fn" : "a layer") : "a built-in");
        return;
      }
      break;
    }
    Binding *b = scope_find_here(sc, s->name);
    if (!b) continue;
    if (b->kind != B_LET && b->kind != B_ARG && b->kind != B_INPUT) {
      static const char *const what[] = {
          [B_PARAM] = "a parameter", [B_LOOP] = "a loop variable", [B_INSTANCE] = "a layer instance",
          [B_SHAPEVAR] = "a dimension of the signature", [B_BUILTIN] = "a built-in"};
      diag_error(s->span, "cannot assign to '%s': it is %s", s->name, what[b->kind]);
      return;
    }
    b->value = v;
    return;
  }
  report_unknown(ctx->scope, s, s->name,
                 pool_printf(" (write 'let %s = ...' to define a new name)", s->name));
}

/* Records a model input or output; false (reported) when the name is taken. */
static int add_model_io(PtrVec *list, const char *kind, const Node *s, const TensorType *t) {
  for (int i = 0; i < list->len; i++) {
    const ModelIO *io = list->items[i];
    if (!strcmp(io->name, s->name)) {
      diag_error(s->span, "%s '%s' is declared twice", kind, s->name);
      diag_note(io->at, "first declared here");
      return 0;
    }
  }
  ModelIO *io = pool_alloc(sizeof *io);
  io->name = s->name;
  io->type = *t;
  io->at = s->span;
  vec_push(list, io);
  return 1;
}

static void exec_input(Ctx *ctx, const Node *s) {
  if (!ctx->allow_io) {
    diag_error(s->span, "'input' is allowed only in the model body");
    return;
  }
  TensorType t;
  if (!decl_type(ctx, s->t, &t)) {
    bind_failed(ctx->scope, s->name, s->span);
    return;
  }
  if (!add_model_io(&sema_model->inputs, "input", s, &t)) return;
  Value *v = tensor_value(&t);
  v->node = lower_input(s->name, &t);
  bind(ctx->scope, s->name, v, s->span, B_INPUT);
}

static void exec_output(Ctx *ctx, const Node *s) {
  if (!ctx->allow_io) {
    diag_error(s->span, "'output' is allowed only in the model body");
    return;
  }
  Value *v;
  if (s->a) {
    v = eval_expr(ctx, s->a);
    if (scope_find_here(ctx->scope, s->name)) {
      diag_error(s->span, "'%s' is already defined; write 'output %s' to mark it", s->name, s->name);
      return;
    }
    bind(ctx->scope, s->name, v, s->span, B_LET);
  } else {
    Binding *b = lookup(ctx->scope, s->name);
    if (!b) {
      report_unknown(ctx->scope, s, s->name, "");
      return;
    }
    v = b->value;
  }
  if (v->kind == V_ERROR) return;
  if (v->kind != V_TENSOR) {
    diag_error(s->span, "output '%s' must be a tensor, got %s", s->name, value_kind_name(v));
    return;
  }
  if (!add_model_io(&sema_model->outputs, "output", s, &v->t)) return;
  lower_output(s->name, v);
}

static void exec_stmt(Ctx *ctx, const Node *s);

static void exec_block(Ctx *ctx, const Node *block) {
  for (int i = 0; i < block->list.len && !ctx->returned && !diag_stopped(); i++)
    exec_stmt(ctx, block->list.items[i]);
}

/* A nested block gets its own scope for `let`, but shares the return slot. */
static void exec_nested(Ctx *ctx, const Node *block, Scope *scope) {
  Ctx inner = *ctx;
  inner.scope = scope;
  exec_block(&inner, block);
  ctx->returned = inner.returned;
  ctx->returned_at = inner.returned_at;
}

static void exec_stmt(Ctx *ctx, const Node *s) {
  if (!step_ok(s)) return;
  switch (s->kind) {
    case N_LET: exec_let(ctx, s); break;
    case N_ASSIGN: exec_assign(ctx, s); break;
    case N_PARAM: declare_param(ctx, s); break;
    case N_BLOCK: /* `input a: ..., b: ...` */
      for (int i = 0; i < s->list.len; i++) exec_input(ctx, s->list.items[i]);
      break;
    case N_OUTPUT: exec_output(ctx, s); break;
    case N_IF: {
      int c;
      if (!want_bool(eval_expr(ctx, s->a), s->a, "the condition of 'if'", &c)) break;
      const Node *branch = c ? s->b : s->c;
      if (!branch) break;
      if (branch->kind == N_IF) exec_stmt(ctx, branch);
      else exec_nested(ctx, branch, scope_new(ctx->scope));
      break;
    }
    case N_FOR: {
      int64_t lo, hi;
      if (!want_int(eval_expr(ctx, s->a), s->a, "the start of a for range", &lo) ||
          !want_int(eval_expr(ctx, s->b), s->b, "the end of a for range", &hi))
        break;
      /* The body is the same code each time: after an iteration with an
       * error, the next ones would only report it again. */
      int errors = diag_error_count();
      for (int64_t i = lo; i < hi && !ctx->returned && !diag_stopped() && step_ok(s) &&
                           diag_error_count() == errors; i++) {
        Scope *body = scope_new(ctx->scope);
        Origin *o = pool_alloc(sizeof *o);
        o->at = s->span;
        o->what = pool_printf("the loop variable %s = %" PRId64 " at %s", s->name, i, span_str(s->span));
        bind(body, s->name, value_int(i, o), s->span, B_LOOP);
        exec_nested(ctx, s->c, body);
      }
      break;
    }
    case N_RETURN:
      if (ctx->inst || ctx->allow_io) {
        diag_error(s->span, "'return' is allowed only in a fn body");
        break;
      }
      ctx->returned = eval_expr(ctx, s->a);
      ctx->returned_at = s->a;
      break;
    case N_ASSERT: {
      int c;
      if (!want_bool(eval_expr(ctx, s->a), s->a, "the condition of 'assert'", &c)) break;
      if (!c) diag_error(s->span, "assertion failed: %s", s->b ? s->b->sval : expr_text(s->a));
      break;
    }
    case N_FORWARD:
      if (!ctx->inst || !ctx->inst->def) {
        diag_error(s->span, "'fn (...)' without a name is the body of a layer and belongs in a "
                   "layer");
        break;
      }
      if (ctx->inst->forward) {
        diag_error(s->span, "layer %s has two fn (...) bodies", ctx->inst->def->name);
        break;
      }
      ctx->inst->forward = s;
      break;
    case N_ERROR: break;
    default:
      diag_error(s->span, "a %s is not a statement", node_kind_name(s->kind));
  }
}

/* ------------------------------------------------------------------------ */
/* Config, variants, -D overrides and the train block                        */

static PtrVec lazy_chain; /* ConfigEntry* being evaluated, outermost first */

/* Kind of a config value for override checks: int and float mix. */
static const char *config_kind(const Value *v) {
  return v->kind == V_INT || v->kind == V_FLOAT ? "number" : value_kind_name(v);
}

static Value *eval_lazy(ConfigEntry *e, Scope *s) {
  if (e->state == 2) return e->value;
  if (e->state == 1) {
    diag_error(e->at, "'%s' depends on itself", e->name);
    int k = lazy_chain.len - 1;
    while (k > 0 && lazy_chain.items[k] != e) k--;
    for (k++; k < lazy_chain.len; k++) {
      const ConfigEntry *via = lazy_chain.items[k];
      const ConfigEntry *next = k + 1 < lazy_chain.len ? lazy_chain.items[k + 1] : e;
      diag_note(via->at, "through '%s', which uses '%s'", via->name, next->name);
    }
    return value_error();
  }
  e->state = 1;
  Ctx c = {.scope = s, .where = "the config"};
  vec_push(&lazy_chain, e);
  Value *v = eval_expr(&c, e->expr);
  /* An override keeps the kind of the value it replaces. The replaced value
   * is evaluated here, after every override is in place, so that it sees
   * the overridden config (and evaluating it caches nothing stale). */
  Value *old = e->override ? eval_expr(&c, e->original) : NULL;
  lazy_chain.len--;
  if (old && old->kind != V_ERROR && v->kind != V_ERROR) {
    const char *was = config_kind(old), *now = config_kind(v);
    if (strcmp(was, now)) {
      diag_error(e->expr->span, "%s: '%s' is %s %s, but the new value is %s %s", e->override,
                 e->name, strchr("aeiou", was[0]) ? "an" : "a", was,
                 strchr("aeiou", now[0]) ? "an" : "a", now);
      diag_note(e->at, "'%s' is set here", e->name);
      v = value_error();
    } else if (old->kind == V_INT && v->kind == V_FLOAT) {
      diag_error(e->expr->span, "%s: '%s' is an integer, but the new value is %g", e->override,
                 e->name, v->f);
      diag_note(e->at, "'%s' is set here", e->name);
      v = value_error();
    } else if (old->kind == V_FLOAT && v->kind == V_INT) {
      v = value_float((double)v->i); /* -D scale=1 for a float entry */
    }
  }
  if (v->kind == V_INT) {
    /* "d_model = 512 set at m.tfm:3:13, overridden by -D d_model=256" */
    Origin *o = pool_alloc(sizeof *o);
    o->at = e->override ? e->original->span : e->expr->span;
    const char *was = old && old->kind == V_INT ? pool_printf("%" PRId64, old->i)
                                                : e->override ? expr_text(e->original) : NULL;
    o->what = e->override
                  ? pool_printf("%s = %s set at %s, overridden by %s", e->name, was,
                                span_str(o->at), e->override)
                  : pool_printf("%s = %" PRId64 " set at %s", e->name, v->i, span_str(o->at));
    v = value_int(v->i, o);
  }
  e->value = v;
  e->state = 2;
  return v;
}

static ConfigEntry *config_find(const char *name) {
  return config_scope ? map_get(&config_scope->lazy_index, name) : NULL;
}

static const char *nearest_config_key(const char *name) {
  const char *best = NULL;
  int best_d = 99;
  for (int i = 0; i < sema_model->config.len; i++)
    consider(name, ((ConfigEntry *)sema_model->config.items[i])->name, &best, &best_d);
  return best_d <= typo_limit(name) ? best : NULL;
}


static void add_entries(Scope *s, PtrVec *list, const Node *block, const char *what) {
  for (int i = 0; i < block->list.len; i++) {
    const Node *en = block->list.items[i];
    ConfigEntry *prev = map_get(&s->lazy_index, en->name);
    if (prev) {
      diag_error(en->span, "%s '%s' is set twice", what, en->name);
      diag_note(prev->at, "first set here");
      continue;
    }
    ConfigEntry *e = pool_alloc(sizeof *e);
    e->name = en->name;
    e->at = en->span;
    e->expr = en->a;
    vec_push(list, e);
    map_put(&s->lazy_index, e->name, e);
  }
}

/* Replaces an entry's expression, remembering the default for the message
 * and checking that the kind stays the same. */
/* Replaces an entry's expression; the kind check happens when the entry is
 * evaluated (eval_lazy), once every override is in place. */
static void override_entry(ConfigEntry *e, const Node *expr, const char *how) {
  if (!e->override) e->original = e->expr;
  e->expr = expr;
  e->override = how;
}

static void apply_variant(const char *name, PtrVec *variants) {
  const Node *var = NULL;
  for (int i = 0; i < variants->len; i++)
    if (!strcmp(((Node *)variants->items[i])->name, name)) var = variants->items[i];
  if (!var) {
    const char *list = "";
    for (int i = 0; i < variants->len; i++)
      list = pool_printf("%s%s%s", list, i ? ", " : "", ((Node *)variants->items[i])->name);
    diag_error_noloc("--variant %s: the model has no such variant (%s%s)", name,
                     variants->len ? "variants: " : "it defines none", list);
    return;
  }
  for (int i = 0; i < var->list.len; i++) {
    const Node *en = var->list.items[i];
    ConfigEntry *e = config_find(en->name);
    if (!e) {
      const char *hint = nearest_config_key(en->name);
      if (hint) diag_error(en->span, "variant %s sets '%s', which is not in the config; did you "
                           "mean '%s'?", name, en->name, hint);
      else diag_error(en->span, "variant %s sets '%s', which is not in the config", name, en->name);
      continue;
    }
    override_entry(e, en->a, pool_printf("variant %s at %s", name, span_str(en->span)));
  }
}

/* Turns "name=value" into a literal node in a source file of its own, so
 * that errors point into the text the user typed. */
static void apply_define(const char *text) {
  int file = source_add_text("<command line>", pool_printf("-D %s", text), strlen(text) + 3);
  const char *eq = strchr(text, '=');
  Span all = {file, 1, 4, 1, (int)strlen(text) + 3};
  if (!eq || eq == text) {
    diag_error(all, "-D expects NAME=VALUE, got '%s'", text);
    return;
  }
  const char *name = pool_strndup(text, (size_t)(eq - text));
  const char *val = eq + 1;
  Span vspan = {file, 1, 4 + (int)(eq - text) + 1, 1, (int)strlen(text) + 3};
  Span nspan = {file, 1, 4, 1, 3 + (int)(eq - text)};
  ConfigEntry *e = config_find(name);
  if (!e) {
    const char *hint = nearest_config_key(name);
    if (hint) diag_error(nspan, "-D %s: '%s' is not in the config; did you mean '%s'?", text, name, hint);
    else diag_error(nspan, "-D %s: '%s' is not in the config", text, name);
    return;
  }
  /* The value is a literal: true/false, an integer, a number, or else a
   * string (quotes optional). */
  Node *lit = ast_new(N_STRING, vspan);
  char *end;
  int numeric = *val && strspn(val, "0123456789+-.eE") == strlen(val);
  if (!strcmp(val, "true") || !strcmp(val, "false")) {
    lit->kind = N_BOOL;
    lit->ival = !strcmp(val, "true");
  } else if (numeric && (errno = 0, strtoll(val, &end, 10), *end == 0)) {
    lit->kind = N_INT;
    lit->ival = strtoll(val, NULL, 10);
    if (errno == ERANGE) {
      diag_error(vspan, "-D %s: the integer is too large", text);
      return;
    }
  } else if (numeric && (strtod(val, &end), *end == 0)) {
    lit->kind = N_FLOAT;
    lit->fval = strtod(val, NULL);
  } else {
    size_t n = strlen(val);
    lit->sval = (n >= 2 && val[0] == '"' && val[n - 1] == '"') ? pool_strndup(val + 1, n - 2) : val;
  }
  override_entry(e, lit, pool_printf("-D %s", text));
}

static void check_train(const Node *train) {
  TrainSpec *ts = &sema_model->train;
  ts->present = 1;
  ts->at = train->span;
  Scope *step_scope = scope_new(config_scope);
  TensorType scalar = {.dtype = DT_F32};
  Value *step = tensor_value(&scalar);
  step->node = lower_step();
  bind(step_scope, "step", step, train->span, B_BUILTIN);
  Scope *s = scope_new(step_scope);
  PtrVec *list = pool_alloc(sizeof *list);
  s->lazy = list;
  add_entries(s, list, train, "train setting");
  for (int i = 0; i < list->len; i++) eval_lazy(list->items[i], s);
  ConfigEntry *opt = map_get(&s->lazy_index, "optimizer");
  ConfigEntry *lr = map_get(&s->lazy_index, "lr");
  ConfigEntry *clip = map_get(&s->lazy_index, "clip");
  if (!opt) diag_error(train->span, "train needs 'optimizer = sgd(...) | adam(...) | adamw(...)'");
  else if (opt->value->kind != V_ERROR && opt->value->kind != V_OPTIM)
    diag_error(opt->at, "'optimizer' must be sgd(...), adam(...) or adamw(...), got %s",
               value_kind_name(opt->value));
  else ts->optimizer = opt->value;
  if (!lr) diag_error(train->span, "train needs 'lr = ...' (a number or an expression of step)");
  else if (lr->value->kind == V_TENSOR && (lr->value->t.rank != 0 || lr->value->t.dtype != DT_F32))
    diag_error(lr->at, "'lr' must be a scalar, got %s", value_kind_name(lr->value));
  else if (lr->value->kind != V_ERROR && lr->value->kind != V_TENSOR && !is_number(lr->value))
    diag_error(lr->at, "'lr' must be a number or an expression of step, got %s",
               value_kind_name(lr->value));
  else {
    ts->lr = lr->value;
    ts->lr_expr = lr->expr;
  }
  if (clip) {
    if (!is_number(clip->value) || num(clip->value) < 0)
      diag_error(clip->at, "'clip' must be a non-negative number (0 turns clipping off)");
    else ts->clip = num(clip->value);
  }
  const ModelIO *loss = NULL;
  for (int i = 0; i < sema_model->outputs.len; i++)
    if (!strcmp(((ModelIO *)sema_model->outputs.items[i])->name, "loss")) loss = sema_model->outputs.items[i];
  if (!loss && diag_error_count() == 0) /* else the output may be missing because of them */
    diag_error(train->span, "train minimises the output named 'loss', but the model has none");
  else if (loss && (loss->type.rank != 0 || !dtype_is_float(loss->type.dtype)))
    diag_error(loss->at, "the output 'loss' must be a float scalar to train on, got %s",
               tensor_type_str(&loss->type));
}

/* ------------------------------------------------------------------------ */
/* Entry point                                                               */

static void register_items(void) {
  /* Imports first, the root file last: a clash is reported at the user's
   * definition, with the library's as the note. */
  for (int p = sema_model->programs.len - 1; p >= 0; p--) {
    const Node *prog = sema_model->programs.items[p];
    for (int i = 0; i < prog->list.len; i++) {
      Node *it = prog->list.items[i];
      if (it->kind != N_FN && it->kind != N_LAYER) {
        if (p > 0 && it->kind != N_IMPORT && it->kind != N_ERROR)
          diag_error(it->span, "a %s block belongs in the file given to tfmc, not in an imported "
                     "file", node_kind_name(it->kind));
        continue;
      }
      Node *prev = map_get(&items, it->name);
      if (prev) {
        diag_error(it->span, "'%s' is already defined", it->name);
        diag_note(prev->span, "previous definition");
        continue;
      }
      if (builtin_lookup(it->name)) {
        diag_error(it->span, "'%s' is a built-in and cannot be redefined", it->name);
        continue;
      }
      map_put(&items, it->name, it);
    }
  }
}

CheckedModel *sema_check(const FrontOptions *opt) {
  sema_opt = opt;
  sema_model = pool_alloc(sizeof *sema_model);
  sema_model->variant = opt->variant;
  items = (NameMap){0};
  steps = 0;
  steps_reported = 0;
  call_stack = call_sites = call_names = lazy_chain = (PtrVec){0};
  diag_set_context_hook(show_call_chain);
  if (!front_load(opt, sema_model) || diag_stopped()) return NULL;
  register_items();
  global_scope = scope_new(NULL);
  global_scope->is_global = 1;
  config_scope = scope_new(global_scope);
  config_scope->lazy = &sema_model->config;

  const Node *root = sema_model->programs.items[0];
  const Node *model = NULL, *train = NULL;
  PtrVec variants = {0};
  for (int i = 0; i < root->list.len; i++) {
    const Node *it = root->list.items[i];
    if (it->kind == N_CONFIG) add_entries(config_scope, &sema_model->config, it, "config value");
    if (it->kind == N_VARIANT) {
      for (int k = 0; k < variants.len; k++)
        if (!strcmp(((Node *)variants.items[k])->name, it->name)) {
          diag_error(it->span, "variant '%s' is defined twice", it->name);
          diag_note(((Node *)variants.items[k])->span, "first defined here");
        }
      vec_push(&variants, (void *)it);
    }
    if (it->kind == N_MODEL || it->kind == N_TRAIN) {
      const Node **slot = it->kind == N_MODEL ? &model : &train;
      if (*slot) {
        diag_error(it->span, "a file may have only one %s block", node_kind_name(it->kind));
        diag_note((*slot)->span, "the first one is here");
      } else {
        *slot = it;
      }
    }
  }
  if (opt->variant) apply_variant(opt->variant, &variants);
  for (int i = 0; i < opt->defines.len; i++) apply_define(opt->defines.items[i]);
  /* Every config value is evaluated, used or not, so errors show up early. */
  for (int i = 0; i < sema_model->config.len; i++) {
    ConfigEntry *e = sema_model->config.items[i];
    Value *v = eval_lazy(e, config_scope);
    if (v->kind != V_ERROR && v->kind != V_INT && v->kind != V_FLOAT && v->kind != V_BOOL &&
        v->kind != V_STR)
      diag_error(e->at, "config value '%s' must be a number, a boolean or a string, got %s",
                 e->name, value_kind_name(v));
  }
  if (!model) {
    const SourceFile *f = source_get(root->span.file);
    diag_error(root->span, "%s defines no model (a file given to tfmc needs a 'model NAME { ... }')",
               f ? f->path : "the file");
  } else if (diag_error_count() == 0 || !diag_stopped()) {
    sema_model->name = model->name;
    sema_model->at = model->span;
    Instance *rootinst = pool_alloc(sizeof *rootinst);
    rootinst->path = "";
    rootinst->at = model->span;
    rootinst->scope = scope_new(config_scope);
    sema_model->root = rootinst;
    Ctx c = {.scope = rootinst->scope, .inst = rootinst, .allow_io = 1,
             .where = pool_printf("model %s", model->name)};
    exec_block(&c, model->c);
    if (sema_model->outputs.len == 0 && diag_error_count() == 0)
      diag_error(model->span, "model %s has no output (add 'output loss = ...')", model->name);
    if (train && !diag_stopped()) check_train(train);
  }
  return diag_error_count() ? NULL : sema_model;
}

int64_t instance_param_count(const Instance *inst) {
  int64_t n = 0;
  for (int i = 0; i < inst->params.len; i++) n += tensor_numel(&((Param *)inst->params.items[i])->type);
  for (int i = 0; i < inst->children.len; i++) n += instance_param_count(inst->children.items[i]);
  return n;
}

int64_t model_param_count(const CheckedModel *m) {
  int64_t n = 0;
  for (int i = 0; i < m->params.len; i++) n += tensor_numel(&((Param *)m->params.items[i])->type);
  return n;
}

void front_reset(void) {
  pool_reset();
  source_reset();
  diag_reset();
  ast_reset();
  sema_model = NULL;
  global_scope = config_scope = NULL;
  items = (NameMap){0};
  call_stack = call_sites = call_names = (PtrVec){0};
}
