/* The IR tests' harness. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph_text.h"

int test_failures;

bool test_check(bool ok, const char *what, const char *file, int line) {
  if (!ok) {
    test_failures++;
    fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
  }
  return ok;
}

bool test_near(double got, double want, double tol, const char *what, const char *file, int line) {
  bool ok = fabs(got - want) <= tol;
  if (!ok) {
    test_failures++;
    fprintf(stderr, "%s:%d: %s = %.17g, expected %.17g (tolerance %g)\n", file, line, what, got,
            want, tol);
  }
  return ok;
}

Graph *test_parse(const char *text) {
  char err[256];
  Graph *g = graph_parse(text, err, sizeof err);
  if (!g) {
    test_failures++;
    fprintf(stderr, "parse failed: %s\n--- in:\n%s\n", err, text);
  }
  return g;
}

char *test_read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t size = 0, capacity = 4096;
  char *text = malloc(capacity);
  while (text) {
    if (size + 1 == capacity) {
      char *grown = realloc(text, capacity * 2);
      if (!grown) free(text);
      text = grown;
      capacity *= 2;
      continue;
    }
    size_t n = fread(text + size, 1, capacity - size - 1, f);
    if (n == 0) break;
    size += n;
  }
  fclose(f);
  if (text) text[size] = '\0';
  return text;
}

double test_uniform(uint64_t *state, double lo, double hi) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  double u = (double)(*state >> 11) / 9007199254740992.0;
  return lo + (hi - lo) * u;
}

int test_finish(const char *name) {
  if (test_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}
