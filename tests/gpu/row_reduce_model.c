/* A CPU model of the GPU's cooperative row reductions (ptx_row.h, emitted
 * by llvm/loop_rows.c's split rows and ptx/row.c's combine): every work item of a
 * launch finds its row and its place in it, accumulates its strided share
 * of the row, and the row's threads combine their partials by butterfly
 * shuffles, addressed as the hardware does (the partner of the thread in
 * launch position item is item ^ offset, the same lane of the 32-aligned
 * warp), then across warps through shared memory, all with the formulas
 * of ptx_row.h. Checked against a plain loop over the row: every element
 * taken exactly once (and the strided elementwise part writing each
 * element once), sums of integer-valued floats and ints exact, other
 * sums within the reordering bound, max exact with NaN and -inf rows,
 * every thread of a row holding the same bits (rows mixing +0 and -0
 * catch a combine whose operands depend on the lane), for odd lengths,
 * rows shorter than a warp, one warp, several warps and many steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_row.h"

static int failures;
#define CHECK(cond, ...)                                                         \
  ((cond) ? 1 : (failures++, fprintf(stderr, "row_reduce_model: " __VA_ARGS__), \
                 fprintf(stderr, "\n"), 0))

typedef enum { SUM, MAX } Op;

/* The emitter's combine (emit_reduction_step): a sum, or a max that keeps
 * `a` on ties and takes a NaN `v`. */
#define STEPS(T, NAME, ISNAN)                                    \
  static T NAME(Op op, T a, T v) {                               \
    if (op == SUM) return a + v;                                 \
    return (a < v || ISNAN(v)) ? v : a;                          \
  }
#define FLOAT_NAN(x) isnan(x)
#define INT_NAN(x) 0
STEPS(float, step_f32, FLOAT_NAN)
STEPS(double, step_f64, FLOAT_NAN)
STEPS(int32_t, step_i32, INT_NAN)

/* One launch over `rows` rows of `length` elements, `threads` a row; out
 * receives every thread's final value (rows x threads). Returns false when
 * the mapping itself is wrong (an element outside the row, taken twice or
 * never, a warp spanning two rows). */
#define MODEL(T, NAME, STEP, IDENTITY)                                                          \
  static bool NAME(Op op, const T *x, int64_t rows, int64_t length, int64_t threads, T *out) {   \
    int64_t items = rows * threads;                                                            \
    T *v = malloc(sizeof *v * (size_t)items), *next = malloc(sizeof *v * (size_t)items);        \
    int *taken = calloc((size_t)(rows * length), sizeof *taken);                               \
    T shared[PTX_ROW_BLOCK_THREADS / PTX_WARP];                                                \
    bool ok = v && next && taken;                                                              \
    /* Each thread's private accumulation over its strided share. */                          \
    for (int64_t item = 0; ok && item < items; item++) {                                       \
      int64_t row = ptx_row_of(item, threads), tid = ptx_row_tid(item, threads);               \
      T acc = IDENTITY;                                                                        \
      for (int64_t s = 0; s < ptx_row_steps(length, threads, tid); s++) {                      \
        int64_t e = ptx_row_element(tid, s, threads);                                          \
        if (!CHECK(e >= 0 && e < length, "element %ld of a %ld-row", (long)e, (long)length)) { \
          ok = false;                                                                          \
          break;                                                                               \
        }                                                                                      \
        taken[row * length + e]++;                                                             \
        acc = STEP(op, acc, x[row * length + e]);                                              \
      }                                                                                        \
      v[item] = acc;                                                                           \
    }                                                                                          \
    for (int64_t i = 0; ok && i < rows * length; i++)                                          \
      ok = CHECK(taken[i] == 1, "element %ld taken %d times (length %ld, %ld threads)",       \
                 (long)(i % length), taken[i], (long)length, (long)threads);                   \
    /* The butterfly: the hardware lane is the launch position's within its block   */        \
    /* (launch blocks are PTX_ROW_BLOCK_THREADS, ptx/row.c asserts).                 */        \
    for (int i = 0; ok && i < PTX_ROW_SHUFFLES; i++) {                                         \
      int offset = ptx_row_offset(i);                                                          \
      for (int64_t item = 0; ok && item < items; item++) {                                     \
        int64_t partner = item ^ offset, tid = ptx_row_tid(item, threads);                     \
        int64_t lane = ptx_row_lane(tid);                                                      \
        ok = CHECK(lane == item % PTX_ROW_BLOCK_THREADS % PTX_WARP, "lane %ld at item %ld",        \
                   (long)lane, (long)item) &&                                                  \
             CHECK(partner < items && ptx_row_of(partner, threads) == ptx_row_of(item, threads), \
                   "a warp spans two rows");                                                   \
        if (ok)                                                                                \
          next[item] = ptx_row_lower(lane, offset) ? STEP(op, v[item], v[partner])             \
                                                   : STEP(op, v[partner], v[item]);            \
      }                                                                                        \
      memcpy(v, next, sizeof *v * (size_t)items);                                              \
    }                                                                                          \
    /* Across warps: each warp's lane 0 writes its slot; then all combine in warp order.  */  \
    int64_t warps = ptx_row_warps(threads);                                                    \
    for (int64_t row = 0; ok && warps > 1 && row < rows; row++) {                              \
      for (size_t w = 0; w < sizeof shared / sizeof *shared; w++)                              \
        memset(&shared[w], 0xff, sizeof shared[w]); /* unwritten slots poison */              \
      for (int64_t tid = 0; tid < threads; tid++)                                              \
        if (ptx_row_lane(tid) == 0)                                                            \
          shared[ptx_row_warp(tid)] = v[row * threads + tid];                                  \
      for (int64_t tid = 0; tid < threads; tid++) {                                            \
        T acc = shared[0];                                                                     \
        for (int64_t w = 1; w < warps; w++)                                                    \
          acc = STEP(op, acc, shared[w]);                                                      \
        next[row * threads + tid] = acc;                                                       \
      }                                                                                        \
    }                                                                                          \
    if (ok && warps > 1)                                                                       \
      memcpy(v, next, sizeof *v * (size_t)items);                                              \
    if (ok)                                                                                    \
      memcpy(out, v, sizeof *v * (size_t)items);                                               \
    free(v);                                                                                   \
    free(next);                                                                                \
    free(taken);                                                                               \
    return ok;                                                                                 \
  }
MODEL(float, model_f32, step_f32, (op == SUM ? 0.0f : -INFINITY))
MODEL(double, model_f64, step_f64, (op == SUM ? 0.0 : -INFINITY))
MODEL(int32_t, model_i32, step_i32, (op == SUM ? 0 : INT32_MIN))

/* Every thread of every row holds the same bits, and that value matches
 * the plain loop: exactly (`exact`) or within `bound` x sum |x|. */
#define CHECK_ROWS(T, NAME, STEP, IDENTITY, ABS)                                                \
  static void NAME(const char *what, Op op, const T *x, int64_t rows, int64_t length,          \
                   int64_t threads, bool exact, double bound) {                                 \
    T *out = malloc(sizeof *out * (size_t)(rows * threads));                                   \
    if (!out || !CHECK(MODEL_OF_##T(op, x, rows, length, threads, out), "%s: mapping", what)) { \
      free(out);                                                                               \
      return;                                                                                  \
    }                                                                                          \
    for (int64_t row = 0; row < rows; row++) {                                                 \
      T want = IDENTITY;                                                                       \
      double magnitude = 0;                                                                    \
      for (int64_t e = 0; e < length; e++) {                                                   \
        want = STEP(op, want, x[row * length + e]);                                            \
        magnitude += ABS((double)x[row * length + e]);                                         \
      }                                                                                        \
      T got = out[row * threads];                                                              \
      bool same = true;                                                                        \
      for (int64_t tid = 1; tid < threads; tid++)                                              \
        same &= memcmp(&out[row * threads + tid], &got, sizeof got) == 0;                      \
      CHECK(same, "%s: row %ld: threads disagree (length %ld, %ld threads)", what, (long)row,  \
            (long)length, (long)threads);                                                      \
      bool nan_ok = (double)want != (double)want && (double)got != (double)got;                \
      bool close = exact ? (got == want || nan_ok)                                             \
                         : ABS((double)got - (double)want) <= bound * magnitude + 1e-300;      \
      CHECK(close, "%s: row %ld: %.17g, plain loop %.17g (length %ld, %ld threads)", what,     \
            (long)row, (double)got, (double)want, (long)length, (long)threads);                \
    }                                                                                          \
    free(out);                                                                                 \
  }
#define MODEL_OF_float model_f32
#define MODEL_OF_double model_f64
#define MODEL_OF_int32_t model_i32
static double int_abs(double x) { return fabs(x); }
CHECK_ROWS(float, check_f32, step_f32, (op == SUM ? 0.0f : -INFINITY), fabs)
CHECK_ROWS(double, check_f64, step_f64, (op == SUM ? 0.0 : -INFINITY), fabs)
CHECK_ROWS(int32_t, check_i32, step_i32, (op == SUM ? 0 : INT32_MIN), int_abs)

static uint64_t state = 0x9e3779b97f4a7c15u;
static double uniform(void) { /* [-1, 1) */
  state = state * 6364136223846793005u + 1442695040888963407u;
  return (double)(state >> 11) / 9007199254740992.0 * 2 - 1;
}

static void lengths(int64_t length, int64_t threads) {
  enum { ROWS = 3 };
  int64_t n = ROWS * length;
  /* calloc: gcc -O2 cannot see that the loop below fills all n, and warns. */
  float *f = calloc((size_t)n, sizeof *f);
  double *d = calloc((size_t)n, sizeof *d);
  int32_t *i = calloc((size_t)n, sizeof *i);
  if (!f || !d || !i)
    abort();
  /* Integer values: any order sums them exactly (|sum| < 2^24). */
  for (int64_t e = 0; e < n; e++)
    f[e] = (float)(int)(uniform() * 100), d[e] = f[e], i[e] = (int32_t)f[e];
  check_f32("f32 sum, integers", SUM, f, ROWS, length, threads, true, 0);
  check_f64("f64 sum, integers", SUM, d, ROWS, length, threads, true, 0);
  check_i32("i32 sum", SUM, i, ROWS, length, threads, true, 0);
  check_i32("i32 max", MAX, i, ROWS, length, threads, true, 0);
  for (int64_t e = 0; e < n; e++)
    f[e] = (float)uniform(), d[e] = uniform();
  /* Reordered sums: each within (length - 1) u of sum |x| of the exact one. */
  check_f32("f32 sum", SUM, f, ROWS, length, threads, false, 2.0 * (double)length * 0x1p-24);
  check_f64("f64 sum", SUM, d, ROWS, length, threads, false, 2.0 * (double)length * 0x1p-53);
  check_f32("f32 max", MAX, f, ROWS, length, threads, true, 0);
  check_f64("f64 max", MAX, d, ROWS, length, threads, true, 0);
  /* Row 0 all -inf, row 1 with a NaN in its middle, row 2 zeros of both
   * signs (ties: a lane-dependent combine would disagree between lanes). */
  for (int64_t e = 0; e < length; e++) {
    f[e] = -INFINITY;
    f[length + e] = (float)uniform();
    f[2 * length + e] = e % 3 ? -0.0f : 0.0f;
  }
  f[length + length / 2] = NAN;
  check_f32("f32 max, -inf / NaN / signed zeros", MAX, f, ROWS, length, threads, true, 0);
  for (int64_t e = 0; e < n; e++)
    d[e] = f[e];
  check_f64("f64 max, -inf / NaN / signed zeros", MAX, d, ROWS, length, threads, true, 0);
  free(f);
  free(d);
  free(i);
}

int main(void) {
  /* The split's choice: a warp up to PTX_ROW_WARP_MAX, then a block. */
  CHECK(ptx_row_threads(1) == PTX_WARP && ptx_row_threads(PTX_ROW_WARP_MAX) == PTX_WARP &&
            ptx_row_threads(PTX_ROW_WARP_MAX + 1) == PTX_ROW_BLOCK_THREADS,
        "ptx_row_threads");
  CHECK(PTX_WARP >> PTX_ROW_SHUFFLES == 1 && ptx_row_offset(PTX_ROW_SHUFFLES - 1) == 1,
        "shuffles span the warp");
  static const int64_t sizes[] = {1, 2, 7, 31, 32, 33, 100, 255, 256, 257, 1000, 1024, 1025,
                                  4099, 9900};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    lengths(sizes[s], ptx_row_threads(sizes[s]));
    /* Either split works for any length (short rows on a block, long on a warp). */
    lengths(sizes[s], ptx_row_threads(sizes[s]) == PTX_WARP ? PTX_ROW_BLOCK_THREADS : PTX_WARP);
  }
  printf("gpu.row_reduce_model: %s (%zu lengths, warp and block splits, f32 f64 i32, sum and max)\n",
         failures ? "FAILED" : "all checks passed", sizeof sizes / sizeof *sizes);
  return failures ? 1 : 0;
}
