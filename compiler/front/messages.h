/* What the checker's messages are made of (messages.c). */
#ifndef TFM_MESSAGES_H
#define TFM_MESSAGES_H
#include <stdint.h>

#include "value.h"

/* Describes an expression for messages: its source text when short. */
const char *expr_text(const Node *n);
/* The edit distance of two names (99 past 40 characters), and the largest
 * at which `name` still looks like a typo of another. */
int name_distance(const char *a, const char *b);
int name_typo_limit(const char *name);
/* Whether `name` is close enough to `cand` to be a likely typo of it. */
int name_is_typo_of(const char *name, const char *cand);
/* A compile-time int from a value, reporting an error with `what` otherwise. */
int want_int(const Value *v, const Node *n, const char *what, int64_t *out);

#endif
