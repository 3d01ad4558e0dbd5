/* The checker's config (entries evaluated lazily, cycles found), named
 * variants, -D overrides, the train block, and the entry point sema_check.
 */
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
/* Config, variants, -D overrides and the train block                        */

static PtrVec lazy_chain; /* ConfigEntry* being evaluated, outermost first */

/* Kind of a config value for override checks: int and float mix. */
static const char *config_kind(const Value *v) {
  return v->kind == V_INT || v->kind == V_FLOAT ? "number" : value_kind_name(v);
}

Value *sema_eval_lazy(ConfigEntry *e, Scope *s) {
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
    o->name = e->name;
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
  return sema_config_scope ? map_get(&sema_config_scope->lazy_index, name) : NULL;
}

static const char *nearest_config_key(const char *name) {
  const char *best = NULL;
  int best_d = 99;
  for (int i = 0; i < sema_model->config.len; i++)
    sema_consider(name, ((ConfigEntry *)sema_model->config.items[i])->name, &best, &best_d);
  return best_d <= name_typo_limit(name) ? best : NULL;
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
 * evaluated (sema_eval_lazy), once every override is in place. */
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
  Scope *step_scope = sema_scope_new(sema_config_scope);
  TensorType scalar = {.dtype = DT_F32};
  Value *step = tensor_value(&scalar);
  step->node = lower_step();
  sema_bind(step_scope, "step", step, train->span, B_BUILTIN);
  Scope *s = sema_scope_new(step_scope);
  PtrVec *list = pool_alloc(sizeof *list);
  s->lazy = list;
  add_entries(s, list, train, "train setting");
  for (int i = 0; i < list->len; i++) sema_eval_lazy(list->items[i], s);
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
  else if (lr->value->kind != V_ERROR && lr->value->kind != V_TENSOR && !sema_is_number(lr->value))
    diag_error(lr->at, "'lr' must be a number or an expression of step, got %s",
               value_kind_name(lr->value));
  else {
    ts->lr = lr->value;
    ts->lr_expr = lr->expr;
  }
  if (clip) {
    if (!sema_is_number(clip->value) || sema_num(clip->value) < 0)
      diag_error(clip->at, "'clip' must be a non-negative number (0 turns clipping off)");
    else ts->clip = sema_num(clip->value);
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
        if (p > 0 && it->kind != N_IMPORT && it->kind != N_ERROR && it->kind != N_PRETRAINED)
          diag_error(it->span, "a %s block belongs in the file given to tfmc, not in an imported "
                     "file", node_kind_name(it->kind));
        continue;
      }
      Node *prev = map_get(&sema_items, it->name);
      if (prev) {
        diag_error(it->span, "'%s' is already defined", it->name);
        diag_note(prev->span, "previous definition");
        continue;
      }
      if (builtin_lookup(it->name)) {
        diag_error(it->span, "'%s' is a built-in and cannot be redefined", it->name);
        continue;
      }
      map_put(&sema_items, it->name, it);
    }
  }
}

/* The model to the observer, as far as it got; the model when it has no errors. */
static CheckedModel *sema_finish(void) {
  const FrontObserver *o = sema_opt->observer;
  if (o && o->checked) o->checked(o->user, sema_model);
  return diag_error_count() ? NULL : sema_model;
}

CheckedModel *sema_check(const FrontOptions *opt) {
  sema_opt = opt;
  builtins_set_training(opt->training);
  builtins_set_decoding(opt->decoding);
  sema_model = pool_alloc(sizeof *sema_model);
  sema_model->variant = opt->variant;
  sema_items = (NameMap){0};
  sema_steps = 0;
  sema_steps_reported = 0;
  sema_call_stack = sema_call_sites = sema_call_names = lazy_chain = (PtrVec){0};
  diag_set_context_hook(sema_show_call_chain);
  if (!front_load(opt, sema_model) || diag_stopped()) return sema_finish();
  register_items();
  sema_global_scope = sema_scope_new(NULL);
  sema_global_scope->is_global = 1;
  sema_config_scope = sema_scope_new(sema_global_scope);
  sema_config_scope->lazy = &sema_model->config;

  const Node *root = sema_model->programs.items[0];
  const Node *model = NULL, *train = NULL;
  PtrVec variants = {0};
  for (int i = 0; i < root->list.len; i++) {
    const Node *it = root->list.items[i];
    if (it->kind == N_CONFIG) add_entries(sema_config_scope, &sema_model->config, it, "config value");
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
  /* -D and --variant set up a model; a library is read as it is written */
  int library = !model && opt->library_ok;
  if (opt->variant && !library) apply_variant(opt->variant, &variants);
  for (int i = 0; i < opt->defines.len && !library; i++) apply_define(opt->defines.items[i]);
  /* Every config value is evaluated, used or not, so errors show up early. */
  for (int i = 0; i < sema_model->config.len; i++) {
    ConfigEntry *e = sema_model->config.items[i];
    Value *v = sema_eval_lazy(e, sema_config_scope);
    if (v->kind != V_ERROR && v->kind != V_INT && v->kind != V_FLOAT && v->kind != V_BOOL &&
        v->kind != V_STR)
      diag_error(e->at, "config value '%s' must be a number, a boolean or a string, got %s",
                 e->name, value_kind_name(v));
  }
  if (!model) {
    /* A library's fns and layers run only when a model uses them. */
    if (library) return sema_finish();
    const SourceFile *f = source_get(root->span.file);
    diag_error(root->span, "%s defines no model (a file given to tfmc needs a 'model NAME { ... }')",
               f ? f->path : "the file");
  } else if (diag_error_count() == 0 || !diag_stopped()) {
    sema_model->name = model->name;
    sema_model->at = model->span;
    Instance *rootinst = pool_alloc(sizeof *rootinst);
    rootinst->path = "";
    rootinst->at = model->span;
    rootinst->scope = sema_scope_new(sema_config_scope);
    sema_model->root = rootinst;
    Ctx c = {.scope = rootinst->scope, .inst = rootinst, .allow_io = 1,
             .where = pool_printf("model %s", model->name)};
    sema_exec_block(&c, model->c);
    if (sema_model->outputs.len == 0 && diag_error_count() == 0)
      diag_error(model->span, "model %s has no output (add 'output loss = ...')", model->name);
    if (train && !diag_stopped()) check_train(train);
    /* Pretrained blocks, of the file or of a map file it imports. */
    for (int f = 0; f < sema_model->programs.len && !diag_stopped(); f++) {
      const Node *program = sema_model->programs.items[f];
      for (int i = 0; i < program->list.len; i++) {
        const Node *it = program->list.items[i];
        if (it->kind == N_PRETRAINED) sema_check_pretrained(it);
      }
    }
  }
  return sema_finish();
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
  sema_global_scope = sema_config_scope = NULL;
  sema_items = (NameMap){0};
  sema_call_stack = sema_call_sites = sema_call_names = (PtrVec){0};
}
