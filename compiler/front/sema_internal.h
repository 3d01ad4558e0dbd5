/* What the checker's files share (sema.c: scopes, expressions and calls;
 * sema_stmt.c: statements; sema_config.c: config, variants, -D, the train
 * block and the entry point; sema_load.c: loading the files). One module,
 * sema_pretrained.c: pretrained blocks. One module,
 * split by concept: builtins.c, shape.c, lower.c and messages.c, which it
 * calls, never call back into it. */
#ifndef TFM_SEMA_INTERNAL_H
#define TFM_SEMA_INTERNAL_H
#include "diag.h"
#include "scope.h"
#include "sema.h"

/* Bounds on compile-time work, so that no program can hang the compiler.
 * The 6-layer base Transformer takes about 10,000 steps. */
enum { MAX_STEPS = 2000000, MAX_CALL_DEPTH = 200 };

extern CheckedModel *sema_model;     /* the model being checked */
extern const FrontOptions *sema_opt;
extern PtrVec sema_call_names; /* const char*: "fn heads", parallel to sema_call_stack */
extern PtrVec sema_call_sites; /* const Node* of the calls, parallel to sema_call_stack */
extern PtrVec sema_call_stack; /* const Node* of the fn/layer bodies being evaluated */
extern Scope *sema_config_scope; /* config entries: what the model and train blocks see */
extern Scope *sema_global_scope; /* items and built-ins: what fn and layer bodies see */
extern NameMap sema_items; /* fn and layer definitions by name */
extern long sema_steps;
extern int sema_steps_reported;

Value *eval_expr(Ctx *ctx, const Node *n);

/* sema.c: scopes and names (a new scope, a binding, a name looked up
 * here or through the parents and built-ins, an unknown name reported with
 * the closest visible one, a candidate for that suggestion). */
Scope *sema_scope_new(Scope *parent);
Binding *sema_bind(Scope *s, const char *name, Value *v, Span at, BindingKind kind);
/* Tells the observer (if any) that `name` now has value v; sema_bind does. */
void sema_observe_bound(const char *name, const Value *v, Span at);
Binding *sema_scope_find_here(Scope *s, const char *name);
Binding *sema_lookup(Scope *s, const char *name);
void sema_report_unknown(Scope *s, const Node *n, const char *name, const char *tail);
void sema_consider(const char *name, const char *cand, const char **best, int *best_d);

/* sema.c: the work bound (one more evaluation step, or an error), the
 * chain of calls a message shows, numbers and booleans of values, a
 * declared type, a call's arguments, a layer instantiated. */
int sema_step_ok(const Node *n);
void sema_show_call_chain(Span at);
int sema_is_number(const Value *v);
double sema_num(const Value *v);
int sema_want_bool(const Value *v, const Node *n, const char *what, int *out);
int sema_decl_type(Ctx *ctx, const Node *t, TensorType *out);
int sema_eval_args(Ctx *ctx, const Node *call, Arg **out);
Value *sema_instantiate(Ctx *ctx, const Node *def, Arg *args, int nargs, const Node *call,
                        const char *path);

/* sema_stmt.c: the statements of a block, in order. */
void sema_exec_block(Ctx *ctx, const Node *block);

/* sema_pretrained.c: a `pretrained NAME { ... }` block, checked after the
 * model (and lowered when it is the one lower_pretrained_target names);
 * `target = value` and `_ = source("name")` in its body. */
void sema_check_pretrained(const Node *block);
void sema_pretrained_assign(Ctx *ctx, const Node *s);

/* sema_config.c: a config entry's value, evaluated on first use in scope
 * s (cycles reported with their path). */
Value *sema_eval_lazy(ConfigEntry *e, Scope *s);
/* sema_load.c: */
/* Loads the root file and its imports; fills sema_model->programs. Returns
 * 0 after a syntax error or a failed import: checking a partial program
 * would only report the names it lost. (Too-deep nesting is not counted:
 * the tree is whole, with an N_ERROR in place of the deep part.) */
int front_load(const FrontOptions *opt, CheckedModel *m);

#endif
