/* Compiled vs reference: a graph is planned, compiled to an object, linked
 * into a shared object, loaded and run, and every output (and, after each
 * step's update, every param and state) is compared with the evaluator. */
#ifndef TFM_CG_HARNESS_H
#define TFM_CG_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "eval.h"
#include "graph.h"
#include "kernel.h"

extern int cg_failures;

/* A check that records a failure and goes on. */
#define CG_CHECK(cond) cg_check_true((cond), #cond, __FILE__, __LINE__)
bool cg_check_true(bool ok, const char *what, const char *file, int line);

/* Evaluator values at `precision` (f32, or f64 for graphs whose floats are
 * all f64) with every leaf uniform in [-1, 1) (i32 leaves in [0, 4)); tests
 * overwrite leaves that need other values. */
EvalValues *cg_reference(const Graph *g, GraphDtype precision, uint64_t seed);
void cg_fill(EvalValues *v, GraphId id, double lo, double hi, uint64_t *state);

typedef struct CgRunOptions {
  int steps;        /* runs (with updates between them); the "step" input counts from 1 */
  double tolerance; /* relative */
  bool serial;      /* run without a thread pool */
  const char *cpu;  /* NULL: native */
} CgRunOptions;

/* Compiles g, runs it against `ref` (whose leaves it copies first) and
 * prints "ok"/"FAIL name". Frees nothing. */
bool cg_run(const char *name, const Graph *g, EvalValues *ref, const CgRunOptions *options);

/* cg_reference (f32 unless every float is f64) + cg_run with 1 step at
 * tolerance 1e-5, after `fill` (may be NULL) set leaves; then frees g. */
typedef void (*CgFillFn)(const Graph *g, EvalValues *ref);
bool cg_check_graph(const char *name, Graph *g, CgFillFn fill);

/* Prints a summary and returns the exit status. */
int cg_finish(const char *suite);

#endif
