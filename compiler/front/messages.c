/* What the checker's messages are made of: an expression's text, how far
 * a name is from another (for "did you mean"), and the error for a value
 * that must be a compile-time integer. */
#include <string.h>

#include "diag.h"
#include "messages.h"
#include "pool.h"

int name_distance(const char *a, const char *b) {
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

/* The largest edit distance at which a name still looks like a typo of
 * another. Any two one-letter names are one edit apart, so those get none. */
int name_typo_limit(const char *name) {
  int len = (int)strlen(name);
  return len <= 1 ? 0 : len <= 3 ? 1 : len / 3 + 1;
}

int name_is_typo_of(const char *name, const char *cand) {
  return name_distance(name, cand) <= name_typo_limit(name);
}

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
