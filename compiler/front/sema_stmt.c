/* The checker's statements: params, let (with a layer instance's name),
 * assignments, inputs and outputs of the model, return, compile-time if
 * and for (unrolled). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "builtins.h"
#include "lower.h"
#include "messages.h"
#include "sema_internal.h"
#include "shape.h"

/* ------------------------------------------------------------------------ */
/* Statements                                                                */

/* After an error in a declaration its names still exist, bound to an error
 * value, so that their uses are not reported as unknown names too. */
static void bind_failed(Scope *scope, const char *name, Span at) {
  if (!sema_scope_find_here(scope, name)) sema_bind(scope, name, value_error(), at, B_LET);
}

static int check_param(Ctx *ctx, const Node *s, TensorType *t, Value **init) {
  if (!ctx->inst) {
    diag_error(s->span, "'param' is allowed only in a layer or model body, not in %s", ctx->where);
    return 0;
  }
  if (!sema_decl_type(ctx, s->t, t)) return 0;
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
    Binding *prev = sema_scope_find_here(ctx->inst->scope, nm->name);
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
    sema_bind(ctx->inst->scope, nm->name, v, nm->span, B_PARAM);
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
      } else if ((nargs = sema_eval_args(ctx, e, &args)) < 0) {
        v = value_error();
      } else {
        const char *local = s->b ? pool_printf("%s.%" PRId64, s->name, index) : s->name;
        const char *path = ctx->inst->path[0] ? pool_printf("%s.%s", ctx->inst->path, local) : local;
        v = sema_instantiate(ctx, f->def, args, nargs, e, path);
      }
    }
  }
  if (!v) v = eval_expr(ctx, e);
  /* Instances belong to the layer or model (visible to its fn body and as
   * members); plain values belong to the block they are defined in. */
  Scope *target = (v->kind == V_INSTANCE && ctx->inst) ? ctx->inst->scope : ctx->scope;
  BindingKind kind = v->kind == V_INSTANCE ? B_INSTANCE : B_LET;
  Binding *prev = sema_scope_find_here(target, s->name);
  if (s->b) {
    if (!prev) {
      Value *t = value_new(V_TABLE);
      prev = sema_bind(target, s->name, t, s->span, kind);
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
    sema_observe_bound(s->name, v, s->span);
    return;
  }
  if (prev && prev->kind != B_SHAPEVAR) {
    diag_error(s->span, "'%s' is already defined in this scope; write '%s = ...' to give it a "
               "new value", s->name, s->name);
    if (prev->at.file) diag_note(prev->at, "previous definition");
    return;
  }
  sema_bind(target, s->name, v, s->span, kind);
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
      const Node *def = map_get(&sema_items, s->name);
      if (def || builtin_lookup(s->name)) {
        diag_error(s->span, "cannot assign to '%s': it is %s", s->name,
                   def ? (def->kind == N_FN ? "a fn" : "a layer") : "a built-in");
        return;
      }
      break;
    }
    Binding *b = sema_scope_find_here(sc, s->name);
    if (!b) continue;
    if (b->kind != B_LET && b->kind != B_ARG && b->kind != B_INPUT) {
      static const char *const what[] = {
          [B_PARAM] = "a parameter", [B_LOOP] = "a loop variable", [B_INSTANCE] = "a layer instance",
          [B_SHAPEVAR] = "a dimension of the signature", [B_BUILTIN] = "a built-in"};
      diag_error(s->span, "cannot assign to '%s': it is %s", s->name, what[b->kind]);
      return;
    }
    b->value = v;
    sema_observe_bound(s->name, v, s->span);
    return;
  }
  sema_report_unknown(ctx->scope, s, s->name,
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
  if (!sema_decl_type(ctx, s->t, &t)) {
    bind_failed(ctx->scope, s->name, s->span);
    return;
  }
  if (!add_model_io(&sema_model->inputs, "input", s, &t)) return;
  /* The decode-step graph (FrontOptions.decoding) of a language model:
   * tokens and targets [B, T] hold one new token per row, at the positions
   * of the i32[B] input `pos`; the caches hold T rows. */
  int decode = sema_opt->decoding && t.rank == 2 &&
               (!strcmp(s->name, "tokens") || !strcmp(s->name, "targets"));
  int64_t window = t.dims[1];
  if (decode) {
    t.dims[1] = 1;
    t.origin[1] = NULL;
  }
  Value *v = tensor_value(&t);
  v->node = lower_input(s->name, &t);
  sema_bind(ctx->scope, s->name, v, s->span, B_INPUT);
  if (decode && !strcmp(s->name, "tokens")) {
    TensorType pt = {.dtype = DT_I32, .rank = 1, .dims = {t.dims[0]}, .origin = {t.origin[0]}};
    Value *pos = tensor_value(&pt);
    pos->node = lower_input("pos", &pt);
    builtins_set_decode_positions(pos, window);
  }
}

/* A probe's name: the instance's path and the name, with "@N" from the
 * instance's second call on (a layer applied twice has two of each). */
static const char *probe_name(const Instance *inst, const char *name) {
  const char *base = inst->path[0] ? pool_printf("%s.%s", inst->path, name) : name;
  return inst->calls > 1 ? pool_printf("%s@%d", base, inst->calls) : base;
}

/* `output NAME [= expr]`: in the model body, an output of every graph; in a
 * layer's fn (...) body, a probe: an output of the inspect graph only
 * (FrontOptions.probes), so that asking for attention weights does not
 * change the graphs that train and run the model. */
static void exec_output(Ctx *ctx, const Node *s) {
  if (!ctx->allow_io && !ctx->body_of) {
    diag_error(s->span, "'output' is allowed only in the model body and in a layer's fn (...) body");
    return;
  }
  Value *v;
  if (s->a) {
    v = eval_expr(ctx, s->a);
    if (sema_scope_find_here(ctx->scope, s->name)) {
      diag_error(s->span, "'%s' is already defined; write 'output %s' to mark it", s->name, s->name);
      return;
    }
    sema_bind(ctx->scope, s->name, v, s->span, B_LET);
  } else {
    Binding *b = sema_lookup(ctx->scope, s->name);
    if (!b) {
      sema_report_unknown(ctx->scope, s, s->name, "");
      return;
    }
    v = b->value;
  }
  if (v->kind == V_ERROR) return;
  if (v->kind != V_TENSOR) {
    diag_error(s->span, "output '%s' must be a tensor, got %s", s->name, value_kind_name(v));
    return;
  }
  if (ctx->allow_io) {
    /* The decode-step graph computes only the next token's logits. */
    if (add_model_io(&sema_model->outputs, "output", s, &v->t) &&
        (!sema_opt->decoding || !strcmp(s->name, "logits")))
      lower_output(s->name, v);
    return;
  }
  Node named = *s;
  named.name = probe_name(ctx->body_of, s->name);
  if (add_model_io(&sema_model->probes, "output", &named, &v->t) && sema_opt->probes)
    lower_output(named.name, v);
}

static void exec_stmt(Ctx *ctx, const Node *s);

void sema_exec_block(Ctx *ctx, const Node *block) {
  for (int i = 0; i < block->list.len && !ctx->returned && !diag_stopped(); i++)
    exec_stmt(ctx, block->list.items[i]);
}

/* A nested block gets its own scope for `let`, but shares the return slot. */
static void exec_nested(Ctx *ctx, const Node *block, Scope *scope) {
  Ctx inner = *ctx;
  inner.scope = scope;
  sema_exec_block(&inner, block);
  ctx->returned = inner.returned;
  ctx->returned_at = inner.returned_at;
}

/* Whether `name` is bound by the block's own code (below the config). */
static int bound_in_block(Ctx *ctx, const char *name) {
  for (Scope *sc = ctx->scope; sc && sc != sema_config_scope; sc = sc->parent)
    if (sema_scope_find_here(sc, name)) return 1;
  return 0;
}

static void exec_stmt(Ctx *ctx, const Node *s) {
  if (!sema_step_ok(s)) return;
  switch (s->kind) {
    case N_LET: exec_let(ctx, s); break;
    case N_ASSIGN:
      if (ctx->source && !bound_in_block(ctx, s->name)) sema_pretrained_assign(ctx, s);
      else exec_assign(ctx, s);
      break;
    case N_SET:
      if (ctx->source) sema_pretrained_assign(ctx, s);
      else diag_error(s->span, "'%s = ...' gives a parameter a value only in a 'pretrained NAME "
                      "{ ... }' block", expr_text(s->a));
      break;
    case N_PARAM: declare_param(ctx, s); break;
    case N_BLOCK: /* `input a: ..., b: ...` */
      for (int i = 0; i < s->list.len; i++) exec_input(ctx, s->list.items[i]);
      break;
    case N_OUTPUT: exec_output(ctx, s); break;
    case N_IF: {
      int c;
      if (!sema_want_bool(eval_expr(ctx, s->a), s->a, "the condition of 'if'", &c)) break;
      const Node *branch = c ? s->b : s->c;
      if (!branch) break;
      if (branch->kind == N_IF) exec_stmt(ctx, branch);
      else exec_nested(ctx, branch, sema_scope_new(ctx->scope));
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
      for (int64_t i = lo; i < hi && !ctx->returned && !diag_stopped() && sema_step_ok(s) &&
                           diag_error_count() == errors; i++) {
        Scope *body = sema_scope_new(ctx->scope);
        Origin *o = pool_alloc(sizeof *o);
        o->at = s->span;
        o->what = pool_printf("the loop variable %s = %" PRId64 " at %s", s->name, i, span_str(s->span));
        sema_bind(body, s->name, value_int(i, o), s->span, B_LOOP);
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
      if (!sema_want_bool(eval_expr(ctx, s->a), s->a, "the condition of 'assert'", &c)) break;
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
