/* What the checker shows a watcher while it runs (the language server uses
 * it): every expression with its value, every name bound, every name used
 * with where it was bound, and the model as far as it got. All pointers
 * live in the front end's pool: a watcher copies what it keeps before
 * front_reset. Any hook may be NULL. */
#ifndef TFM_OBSERVE_H
#define TFM_OBSERVE_H
#include "value.h"

typedef struct CheckedModel CheckedModel;

typedef struct FrontObserver {
  void *user;
  /* An expression evaluated (once per evaluation: a loop body or a layer
   * used six times reports its expressions six times). */
  void (*value)(void *user, const Node *expr, const Value *v);
  /* A name given a value, by let, an assignment, param, input, a loop or a
   * call's arguments; `at` is the statement or name that did it. */
  void (*bound)(void *user, const char *name, const Value *v, Span at);
  /* A name in an expression and where its binding was made ({0}: built-in). */
  void (*used)(void *user, const Node *name, Span defined_at);
  /* At the end of checking, with or without errors: the config, inputs,
   * outputs and programs read so far (root NULL when the model was not
   * reached). */
  void (*checked)(void *user, const CheckedModel *model);
} FrontObserver;

#endif
