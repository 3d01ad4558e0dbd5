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
  /* Compare each tensor as a whole: |compiled - reference|_2 <= tolerance *
   * max(|reference|_2, 1e-3 sqrt(numel)), instead of element by element
   * (|c - r| <= tolerance * max(s, 1e-3), s = |r|, or sum_k |a||b| for a
   * dot, whose rounding error scales with that). Whole models reorder long sums,
   * so single tiny elements (a gradient that is zero up to rounding) would
   * fail elementwise while the tensor agrees. */
  bool norm;
  bool serial;      /* run without a thread pool */
  /* also run the first step without the pool (the thread pool splits rows
   * differently; on the GPU: a second time, on another arena) and require
   * every output to be the same bit for bit */
  bool same_serial;
  /* NULL, or the same graph evaluated in f64 from the same leaves (cg_run
   * steps it alongside the reference). In norm mode a tensor then also
   * passes when its error is within CG_ROUNDING_FACTOR times the f32
   * reference's own distance from the f64 one: a tensor that f32 rounding
   * alone moves by more than tolerance / CG_ROUNDING_FACTOR (a gradient
   * that is zero in exact arithmetic, and what Adam makes of it) is not
   * something two correct f32 implementations agree on to `tolerance`, but
   * they do agree to a small multiple of the rounding's effect. Every other
   * tensor is held to `tolerance` as before. */
  EvalValues *rounding;
  const char *cpu;  /* NULL: native */
} CgRunOptions;

/* Two f32 computations that each lie about one rounding distance from the
 * exact result lie at most about twice that from each other; 4 leaves room
 * for the compiled code's sums being longer or ordered differently. */
#define CG_ROUNDING_FACTOR 4.0

/* Compiles g, runs it against `ref` (whose leaves it copies first) and
 * prints "ok"/"FAIL name" (with the largest relative error in norm mode).
 * Frees nothing. */
bool cg_run(const char *name, const Graph *g, EvalValues *ref, const CgRunOptions *options);

/* cg_reference (f32 unless every float is f64) + cg_run with 1 step at
 * tolerance 1e-5, after `fill` (may be NULL) set leaves; then frees g. */
typedef void (*CgFillFn)(const Graph *g, EvalValues *ref);
bool cg_check_graph(const char *name, Graph *g, CgFillFn fill);

/* The relative error of `values` (laid out as the reference's storage)
 * against `reference` in the 2-norm, as CgRunOptions.norm compares. */
double cg_norm_error(const EvalTensor *reference, const void *values);

/* Whether cg_run runs the kernels on the GPU (TFM_CG_TARGET=cuda): its
 * reference then rounds f32 dot operands to tf32, as the tensor cores do,
 * and the GPU's sums run in other orders than the evaluator's. */
bool cg_on_gpu(void);

/* Called first by each suite: with TFM_CG_TARGET=ptxas and no ptxas, says
 * so and exits 77 (skipped). */
int cg_start(const char *suite);
bool cg_ptxas_available(void);

/* Prints a summary and returns the exit status. */
int cg_finish(const char *suite);

#endif
