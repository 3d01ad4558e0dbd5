/* A minimal test harness for the IR tests: checks that record a failure
 * and continue, and a few graph helpers. */
#ifndef TFM_TESTUTIL_H
#define TFM_TESTUTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "eval.h"
#include "graph.h"

extern int test_failures;

#define CHECK(cond) test_check((cond), #cond, __FILE__, __LINE__)
bool test_check(bool ok, const char *what, const char *file, int line);
/* |got - want| <= tol; prints both on failure. */
#define CHECK_NEAR(got, want, tol) test_near((got), (want), (tol), #got, __FILE__, __LINE__)
bool test_near(double got, double want, double tol, const char *what, const char *file, int line);

/* Parses a graph, reporting the parser's message as a failure. */
Graph *test_parse(const char *text);
/* Reads a whole file into a malloc'd string, or NULL. */
char *test_read_file(const char *path);

/* Deterministic numbers for test data (an LCG, independent of Philox). */
double test_uniform(uint64_t *state, double lo, double hi);

/* Prints a summary and returns the process exit status. */
int test_finish(const char *name);

#endif
