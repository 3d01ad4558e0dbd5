/* `pretrained NAME { ... }` blocks: how the tensors of another tool's
 * checkpoint (a Hugging Face safetensors file, say) become the model's
 * parameters. The body runs after the model, in a scope that sees the
 * config and the fns but none of the model's tensors: its values come
 * from source("name", shape) alone, and its statements
 *
 *   block[i].attn.wq = slice(qkv, 1, 0, d_model)    (a parameter, by path)
 *   w = transpose(source("w"))                       (a parameter of the model body)
 *   _ = source("lm_head.weight")                     (a tensor left out on purpose)
 *
 * give parameters their values, each at most once and of exactly the
 * parameter's type. When the block is the one lowered (lower.h), its
 * sources are the graph's inputs and the parameters its outputs. */
#include <inttypes.h>
#include <string.h>

#include "lower.h"
#include "messages.h"
#include "sema_internal.h"

typedef struct Run {
  SourceHook hook; /* first: builtins see the run as its hook */
  Pretrained *p;
} Run;

static int same_type(const TensorType *a, const TensorType *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

static int32_t declare_source(SourceHook *hook, const char *name, const TensorType *t, Span at) {
  Run *run = (Run *)hook;
  for (int i = 0; i < run->p->sources.len; i++) {
    const PretrainedSource *s = run->p->sources.items[i];
    if (strcmp(s->name, name)) continue;
    if (!same_type(&s->type, t)) {
      diag_error(at, "source \"%s\" is read as %s here but as %s before", name,
                 tensor_type_str(t), tensor_type_str(&s->type));
      diag_note(s->at, "first read here");
      return -2;
    }
    return lower_graph ? graph_find_leaf(lower_graph, name) : GRAPH_NONE;
  }
  PretrainedSource *s = pool_alloc(sizeof *s);
  s->name = name;
  s->type = *t;
  s->at = at;
  vec_push(&run->p->sources, s);
  return lower_input(name, t);
}

/* The model's instance or parameter that a target path names: names are
 * looked up in the model body, indices evaluated here. */
static Value *resolve_path(Ctx *ctx, const Node *n) {
  if (n->kind == N_NAME) {
    Binding *b = sema_scope_find_here(sema_model->root->scope, n->name);
    if (!b || (b->kind != B_INSTANCE && b->kind != B_PARAM && b->value->kind != V_TABLE)) {
      diag_error(n->span, "model %s has no layer instance or parameter '%s'", sema_model->name,
                 n->name);
      return value_error();
    }
    return b->value;
  }
  if (n->kind == N_INDEX) {
    Value *table = resolve_path(ctx, n->a);
    if (table->kind == V_ERROR) return table;
    int64_t i;
    if (!want_int(eval_expr(ctx, n->b), n->b, "the index", &i)) return value_error();
    if (table->kind != V_TABLE || i < 0 || i >= table->items.len || !table->items.items[i]) {
      diag_error(n->span, "%s has no entry %" PRId64, expr_text(n->a), i);
      return value_error();
    }
    return table->items.items[i];
  }
  /* N_MEMBER */
  Value *base = resolve_path(ctx, n->a);
  if (base->kind == V_ERROR) return base;
  Binding *b = base->kind == V_INSTANCE ? sema_scope_find_here(base->inst->scope, n->name) : NULL;
  if (!b || (b->kind != B_PARAM && b->kind != B_INSTANCE)) {
    diag_error(n->span, "%s has no parameter or sub-layer '%s'", expr_text(n->a), n->name);
    return value_error();
  }
  return b->value;
}

/* The parameter a target names (NULL after a reported error): the path's
 * instance, then its parameter by its dotted name. */
static Param *target_param(Ctx *ctx, const Node *target) {
  const char *name = target->name;
  const char *prefix = "";
  if (target->kind == N_MEMBER) {
    Value *inst = resolve_path(ctx, target->a);
    if (inst->kind == V_ERROR) return NULL;
    if (inst->kind != V_INSTANCE) {
      diag_error(target->a->span, "%s is %s, not a layer instance", expr_text(target->a),
                 value_kind_name(inst));
      return NULL;
    }
    prefix = inst->inst->path;
  }
  const char *full = prefix[0] ? pool_printf("%s.%s", prefix, name) : name;
  for (int i = 0; i < sema_model->params.len; i++) {
    Param *p = sema_model->params.items[i];
    if (!strcmp(p->name, full)) return p;
  }
  const char *best = NULL;
  int best_d = 99;
  for (int i = 0; i < sema_model->params.len; i++)
    sema_consider(full, ((const Param *)sema_model->params.items[i])->name, &best, &best_d);
  if (best && best_d <= name_typo_limit(full))
    diag_error(target->span, "model %s has no parameter '%s'; did you mean '%s'?", sema_model->name,
               full, best);
  else
    diag_error(target->span, "model %s has no parameter '%s'", sema_model->name, full);
  return NULL;
}

/* `_ = source("name")`: a tensor of the checkpoint the map leaves out. */
static void ignore_source(Ctx *ctx, const Node *s) {
  const Node *call = s->a;
  const Node *arg = call->kind == N_CALL && call->list.len == 1 ? call->list.items[0] : NULL;
  if (!arg || call->a->kind != N_NAME || strcmp(call->a->name, "source") || arg->name) {
    diag_error(s->a->span, "'_ = ...' takes source(\"name\") alone: the tensor of the checkpoint "
               "that is left out");
    return;
  }
  Value *name = eval_expr(ctx, arg->a);
  if (name->kind == V_ERROR) return;
  if (name->kind != V_STR) {
    diag_error(arg->span, "source: the name must be a string, got %s", value_kind_name(name));
    return;
  }
  Run *run = (Run *)ctx->source;
  vec_push(&run->p->ignored, (void *)name->s);
}

/* What a source() with no shape takes: the parameter's type, reversed in
 * its last two axes under a transpose(). */
static const TensorType *shape_hint(const Node *value, const Param *p, TensorType *buf) {
  const Node *inner = value;
  int transposed = 0;
  if (value->kind == N_CALL && value->a->kind == N_NAME && !strcmp(value->a->name, "transpose") &&
      value->list.len == 1) {
    inner = ((const Node *)value->list.items[0])->a;
    transposed = 1;
  }
  if (inner->kind != N_CALL || inner->a->kind != N_NAME || strcmp(inner->a->name, "source"))
    return NULL;
  *buf = p->type;
  if (transposed) {
    if (buf->rank < 2) return NULL;
    int64_t last = buf->dims[buf->rank - 1];
    const Origin *origin = buf->origin[buf->rank - 1];
    buf->dims[buf->rank - 1] = buf->dims[buf->rank - 2];
    buf->origin[buf->rank - 1] = buf->origin[buf->rank - 2];
    buf->dims[buf->rank - 2] = last;
    buf->origin[buf->rank - 2] = origin;
  }
  return buf;
}

void sema_pretrained_assign(Ctx *ctx, const Node *s) {
  const Node *target = s->kind == N_SET ? s->a : s;
  if (s->kind == N_ASSIGN && !strcmp(s->name, "_")) {
    ignore_source(ctx, s);
    return;
  }
  Param *p = target_param(ctx, target);
  if (!p) return;
  const Node *value = s->kind == N_SET ? s->b : s->a;
  TensorType hint_buf;
  ctx->source->hint = shape_hint(value, p, &hint_buf);
  Value *v = eval_expr(ctx, value);
  ctx->source->hint = NULL;
  if (v->kind == V_ERROR) return;
  if (v->kind != V_TENSOR || !same_type(&v->t, &p->type)) {
    diag_error(value->span, "parameter %s is %s, but the value is %s", p->name,
               tensor_type_str(&p->type), value_kind_name(v));
    diag_note(p->at, "%s is declared here", p->name);
    return;
  }
  Run *run = (Run *)ctx->source;
  for (int i = 0; i < run->p->assigned.len; i++)
    if (run->p->assigned.items[i] == p) {
      diag_error(target->span, "parameter %s is given a value twice in pretrained %s", p->name,
                 run->p->name);
      return;
    }
  vec_push(&run->p->assigned, p);
  lower_output(p->name, v);
}

void sema_check_pretrained(const Node *block) {
  for (int i = 0; i < sema_model->pretrained.len; i++) {
    const Pretrained *other = sema_model->pretrained.items[i];
    if (!strcmp(other->name, block->name)) {
      diag_error(block->span, "pretrained %s is defined twice", block->name);
      diag_note(other->at, "first defined here");
      return;
    }
  }
  Pretrained *p = pool_alloc(sizeof *p);
  p->name = block->name;
  p->at = block->span;
  vec_push(&sema_model->pretrained, p);
  Run run = {.hook = {.declare = declare_source}, .p = p};
  Ctx c = {.scope = sema_scope_new(sema_config_scope), .source = &run.hook,
           .where = pool_printf("pretrained %s", block->name)};
  /* Only the block being lowered gets a graph: the model's graphs never
   * see its nodes. */
  Graph *outer = lower_switch(lower_pretrained_target(block->name));
  sema_exec_block(&c, block->c);
  lower_switch(outer);
}
