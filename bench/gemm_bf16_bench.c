/* The generated bf16 GEMM of one kernel family (TFM_CPU_KERNELS, chosen
 * once per process), two threads: every case is a graph with one bf16 dot,
 * compiled by the CPU backend (native), loaded as a shared object and run
 * through the runtime's pool. Prints one line a case: the median of ROUNDS
 * timed runs (each enough repetitions for about 50 ms), GFLOP/s, and the
 * largest error of 4096 sampled elements against an f64 sum of the same
 * bf16 operands, relative to sum_k |a||b| (the bound tests/codegen holds
 * the bf16 GEMM to is 2^-7). bench/gemm_bf16.sh runs it once per family,
 * alternating with PyTorch's torch.matmul on bf16 (oneDNN), and prints
 * ratios; a benchmark, not a test (bench/RESULTS.md).
 * usage: gemm_bf16_bench [ROUNDS [FILTER]] */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"
#include "graph.h"
#include "kernel.h"
#include "link.h"
#include "tfmrt.h"

typedef struct Case {
  const char *name;
  bool ta, tb;
  int64_t m, n, k;
} Case;

/* Squares, and the 2-D dots of a gpt-small training step (as bench/gemm_bench.c
 * lists them: [B*T, d] activations, weight gradients over k = B*T). */
static const Case cases[] = {
    {"square 512", false, false, 512, 512, 512},
    {"square 1024", false, false, 1024, 1024, 1024},
    {"square 2048", false, false, 2048, 2048, 2048},
    {"gpt nn [2048x256]x[256x768]", false, false, 2048, 768, 256},
    {"gpt nn [2048x256]x[256x1024]", false, false, 2048, 1024, 256},
    {"gpt nn [2048x1024]x[1024x256]", false, false, 2048, 256, 1024},
    {"gpt nt [2048x768]x[256x768]^T", false, true, 2048, 256, 768},
    {"gpt nt [2048x256]x[1024x256]^T", false, true, 2048, 1024, 256},
    {"gpt tn [2048x256]^Tx[2048x768]", true, false, 256, 768, 2048},
    {"gpt tn [2048x1024]^Tx[2048x256]", true, false, 1024, 256, 2048},
};

typedef void (*RunFn)(uint8_t *persistent, uint8_t *scratch, tfm_pool *pool);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static float widen(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

typedef struct Compiled {
  void *handle;
  RunFn run;
  tfm_arena arena;
  uint16_t *a, *b, *c;
} Compiled;

static bool build(const Case *cs, const char *dir, int serial, Compiled *out) {
  char err[512] = "", object[256], library[256];
  Graph *g = graph_new();
  GraphShape sa = {2, {cs->ta ? cs->k : cs->m, cs->ta ? cs->m : cs->k}};
  GraphShape sb = {2, {cs->tb ? cs->n : cs->k, cs->tb ? cs->k : cs->n}};
  GraphId a = graph_input(g, "a", GRAPH_BF16, sa), b = graph_input(g, "b", GRAPH_BF16, sb);
  GraphId c = graph_dot(g, a, b, cs->ta, cs->tb);
  graph_output(g, "c", c);
  KernelPlan *p = kernel_plan_build(g, NULL, err, sizeof err);
  CpuModule *m = p ? cpu_compile(p, &(CpuOptions){.prefix = "bench"}, err, sizeof err) : NULL;
  snprintf(object, sizeof object, "%s/case%d.o", dir, serial);
  snprintf(library, sizeof library, "%s/case%d.so", dir, serial);
  const char *objects[1] = {object};
  bool ok = m && cpu_emit_object(m, object, err, sizeof err) &&
            link_shared_object(objects, 1, library, err, sizeof err);
  cpu_module_free(m);
  remove(object);
  if (ok && !(out->handle = dlopen(library, RTLD_NOW | RTLD_LOCAL)))
    snprintf(err, sizeof err, "%s", dlerror()), ok = false;
  if (!getenv("GEMM_BENCH_KEEP")) /* for perf to name the functions */
    remove(library);
  if (ok) {
    out->run = (RunFn)(uintptr_t)dlsym(out->handle, "bench_run");
    ok = out->run && tfm_arena_create(&out->arena, (size_t)p->persistent_bytes,
                                      (size_t)p->scratch_bytes) == TFM_OK;
  }
  if (ok) {
    GraphId ids[3] = {a, b, c};
    uint16_t **at[3] = {&out->a, &out->b, &out->c};
    for (int i = 0; i < 3; i++) {
      const KernelBuffer *buffer = kernel_plan_buffer(p, ids[i]);
      *at[i] = (uint16_t *)((buffer->region == KERNEL_PERSISTENT ? out->arena.persistent
                                                                  : out->arena.scratch) +
                            buffer->offset);
    }
  } else {
    fprintf(stderr, "gemm_bf16_bench: %s: %s\n", cs->name, err);
  }
  kernel_plan_free(p);
  graph_free(g);
  return ok;
}

/* The largest |c - exact| / sum_k |a||b| over sampled elements. */
static double sampled_error(const Case *cs, const Compiled *x) {
  int64_t lda = cs->ta ? cs->m : cs->k, ldb = cs->tb ? cs->k : cs->n;
  uint64_t state = 7;
  double worst = 0;
  for (int s = 0; s < 4096; s++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    int64_t i = (int64_t)((state >> 33) % (uint64_t)cs->m), j = (int64_t)((state >> 13) % (uint64_t)cs->n);
    double sum = 0, bound = 0;
    for (int64_t p = 0; p < cs->k; p++) {
      double av = widen(x->a[cs->ta ? p * lda + i : i * lda + p]);
      double bv = widen(x->b[cs->tb ? j * ldb + p : p * ldb + j]);
      sum += av * bv, bound += fabs(av * bv);
    }
    worst = fmax(worst, fabs(widen(x->c[i * cs->n + j]) - sum) / fmax(bound, 1e-30));
  }
  return worst;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  const char *filter = argc > 2 ? argv[2] : "";
  if (rounds < 1 || rounds > 100 || argc > 3) {
    fprintf(stderr, "usage: gemm_bf16_bench [ROUNDS (1..100) [FILTER]]\n");
    return 2;
  }
  char dir[] = "/tmp/tfm_gemm_bf16_bench_XXXXXX";
  tfm_pool *pool;
  if (tfm_cpu_kernels_choose() != TFM_OK || !mkdtemp(dir) || tfm_pool_create(&pool, 2) != TFM_OK) {
    fprintf(stderr, "gemm_bf16_bench: cannot set up: %s\n", tfm_error());
    return 1;
  }
  const char *family = tfm_cpu_kernels_name(tfm_cpu_kernels());
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
    const Case *cs = &cases[ci];
    if (!strstr(cs->name, filter))
      continue;
    Compiled x = {0};
    if (!build(cs, dir, (int)ci, &x))
      return 1;
    uint64_t state = 1;
    for (int64_t i = 0; i < cs->m * cs->k + cs->k * cs->n; i++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      uint16_t h = (uint16_t)(((state >> 48) & 0x7f) | 0x3f00u | ((state >> 40) & 0x8000u));
      if (i < cs->m * cs->k)
        x.a[i] = h; /* +-[0.5, 1) */
      else
        x.b[i - cs->m * cs->k] = h;
    }
    double flops = 2.0 * (double)cs->m * (double)cs->n * (double)cs->k;
    double t0 = now();
    x.run(x.arena.persistent, x.arena.scratch, pool);
    double once = now() - t0;
    int reps = once > 0.05 ? 1 : (int)(0.05 / once) + 1;
    double times[100];
    for (int r = 0; r < rounds; r++) {
      t0 = now();
      for (int i = 0; i < reps; i++)
        x.run(x.arena.persistent, x.arena.scratch, pool);
      times[r] = (now() - t0) / reps;
    }
    qsort(times, (size_t)rounds, sizeof *times, compare);
    double median = times[(rounds - 1) / 2];
    printf("%s\t%s\t%.6f\t%.1f\t%.1e\n", cs->name, family, median, flops / median * 1e-9,
           sampled_error(cs, &x));
    fflush(stdout);
    tfm_arena_destroy(&x.arena);
    dlclose(x.handle);
  }
  tfm_pool_destroy(pool);
  if (!getenv("GEMM_BENCH_KEEP"))
    remove(dir);
  return 0;
}
