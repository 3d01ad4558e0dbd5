/* The generated GEMM against OpenBLAS sgemm, two threads each: every case is
 * a graph with one dot, planned and compiled by the CPU backend (native),
 * loaded as a shared object and run through the runtime's pool; OpenBLAS
 * runs the same product (one cblas_sgemm per batch) on copies of the
 * operands. Runs alternate, medians are printed with GFLOP/s and the ratio
 * (OpenBLAS time / ours); "best" is the ratio of the fastest runs, which
 * other load on the machine disturbs less.
 *
 * The peer runs at its best: OpenBLAS picks its own kernel for the CPU (an
 * OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE in the environment, which some
 * machines set to keep older OpenBLAS builds on a safe kernel, is removed by
 * re-executing without it; the kernel used is printed), and neither side is
 * timed while the other's threads still spin. OpenBLAS's workers busy-wait
 * for about 2^28 cycles after each call (its THREAD_TIMEOUT), a tenth of a
 * second here: on 2 cores our two threads then share them with a third, which
 * halved our times in whichever rounds followed a BLAS run closely.
 * usage: gemm_bench [ROUNDS [FILTER]]   (a benchmark, not a test: see bench/RESULTS.md);
 * FILTER runs only the cases whose name contains it. GEMM_BENCH_KEEP=1 keeps the
 * compiled case libraries in /tmp/tfm_gemm_bench_* so `perf report` can name
 * their functions. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "graph.h"
#include "kernel.h"
#include "link.h"
#include "tfmrt.h"

typedef struct Case {
  const char *name;
  bool ta, tb;
  int64_t batch, m, n, k;
  bool a_batched, b_batched;
  int per_step; /* how many times one gpt-small training step runs it */
} Case;

/* Square sizes; the dots of one gpt-small training step (models/gpt.tfm
 * defaults: B=16, T=128, d=256, d_ff=1024, V=1024, h=4, L=4) as the train
 * graph has them (`tfmc emit graph --train`, `tfmc emit kernels --train`):
 * a [16, 128, d] activation times a shared weight is one [2048, d] GEMM
 * (cpu/dot.c folds the batch into the rows, and OpenBLAS gets the same one
 * call), the weight gradients contract over k = B*T; then batched products
 * with both operands batched (one GEMM per batch for both). The gpt cases
 * end with their sum weighted by per_step: the dots' share of a step. */
static const Case cases[] = {
    {"square 128", false, false, 1, 128, 128, 128, false, false, 0},
    {"square 256", false, false, 1, 256, 256, 256, false, false, 0},
    {"square 512", false, false, 1, 512, 512, 512, false, false, 0},
    {"square 1024", false, false, 1, 1024, 1024, 1024, false, false, 0},
    {"square 2048", false, false, 1, 2048, 2048, 2048, false, false, 0},
    /* q, k and v projections, one dot (compiler/opt/merge_dots.c); the out projection */
    {"gpt nn [2048x256]x[256x768]", false, false, 1, 2048, 768, 256, false, false, 4},
    {"gpt nn [2048x256]x[256x256]", false, false, 1, 2048, 256, 256, false, false, 4},
    /* FFN up */
    {"gpt nn [2048x256]x[256x1024]", false, false, 1, 2048, 1024, 256, false, false, 4},
    /* FFN down; the LM head's dx (g times the tied embedding) */
    {"gpt nn [2048x1024]x[1024x256]", false, false, 1, 2048, 256, 1024, false, false, 5},
    /* dx of the q/k/v and the out projections */
    {"gpt nt [2048x768]x[256x768]^T", false, true, 1, 2048, 256, 768, false, false, 4},
    {"gpt nt [2048x256]x[256x256]^T", false, true, 1, 2048, 256, 256, false, false, 4},
    /* dx of FFN down; the LM head (x times the embedding transposed) */
    {"gpt nt [2048x256]x[1024x256]^T", false, true, 1, 2048, 1024, 256, false, false, 5},
    /* dx of FFN up */
    {"gpt nt [2048x1024]x[256x1024]^T", false, true, 1, 2048, 256, 1024, false, false, 4},
    /* dW of the q/k/v and out projections, of FFN up and the embedding (LM head), of FFN down */
    {"gpt tn [2048x256]^Tx[2048x768]", true, false, 1, 256, 768, 2048, false, false, 4},
    {"gpt tn [2048x256]^Tx[2048x256]", true, false, 1, 256, 256, 2048, false, false, 4},
    {"gpt tn [2048x256]^Tx[2048x1024]", true, false, 1, 256, 1024, 2048, false, false, 5},
    {"gpt tn [2048x1024]^Tx[2048x256]", true, false, 1, 1024, 256, 2048, false, false, 4},
    {"batched tn 16x[128x256]^Tx[128x1024]", true, false, 16, 256, 1024, 128, true, true, 0},
    {"batched nt 64x[128x64]x[128x64]^T", false, true, 64, 128, 128, 64, true, true, 0},
    {"batched nn 64x[128x128]x[128x64]", false, false, 64, 128, 64, 128, true, true, 0},
    {"batched tn 64x[128x128]^Tx[128x64]", true, false, 64, 128, 64, 128, true, true, 0},
};

typedef void (*RunFn)(uint8_t *persistent, uint8_t *scratch, tfm_pool *pool);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Whether any thread of this process other than the main one (whose thread id
 * is the process id) is running (state R in /proc/self/task/TID/stat), i.e.
 * still spinning after its last job. */
static bool other_threads_running(void) {
  DIR *tasks = opendir("/proc/self/task");
  if (!tasks) return false;
  char self[32], path[300], stat[512];
  snprintf(self, sizeof self, "%ld", (long)getpid());
  bool running = false;
  for (struct dirent *t; !running && (t = readdir(tasks));) {
    if (t->d_name[0] == '.' || strcmp(t->d_name, self) == 0) continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", t->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t got = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[got] = '\0';
    const char *state = strrchr(stat, ')'); /* the name in (...) may hold spaces */
    running = state && state[1] == ' ' && state[2] == 'R';
  }
  closedir(tasks);
  return running;
}

/* Waits (up to a second) until the other threads sleep, so the next timed run
 * has both cores to itself. */
static void wait_for_idle_threads(void) {
  for (int i = 0; i < 1000 && other_threads_running(); i++)
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
}

/* OpenBLAS reads these when it is loaded: drop them by running again without. */
static void reexec_without_openblas_overrides(char **argv) {
  const char *names[] = {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"};
  bool found = false;
  for (int i = 0; i < 2; i++)
    if (getenv(names[i])) {
      fprintf(stderr, "gemm_bench: running OpenBLAS without %s=%s\n", names[i], getenv(names[i]));
      unsetenv(names[i]);
      found = true;
    }
  if (!found) return;
  execv("/proc/self/exe", argv);
  fprintf(stderr, "gemm_bench: cannot re-execute itself: %s\n", strerror(errno));
  exit(1);
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static GraphShape shape(bool batched, int64_t batch, int64_t rows, int64_t cols) {
  GraphShape s = {.rank = batched ? 3 : 2};
  int i = 0;
  if (batched)
    s.dims[i++] = batch;
  s.dims[i++] = rows;
  s.dims[i] = cols;
  return s;
}

typedef struct Ours {
  void *handle;
  RunFn run;
  tfm_arena arena;
  float *a, *b, *c;
} Ours;

static bool build(const Case *cs, const char *dir, int serial, Graph **graph, KernelPlan **plan,
                  Ours *ours) {
  char err[512], object[256], library[256];
  Graph *g = graph_new();
  GraphId a = graph_input(g, "a", GRAPH_F32,
                          shape(cs->a_batched, cs->batch, cs->ta ? cs->k : cs->m,
                                cs->ta ? cs->m : cs->k));
  GraphId b = graph_input(g, "b", GRAPH_F32,
                          shape(cs->b_batched, cs->batch, cs->tb ? cs->n : cs->k,
                                cs->tb ? cs->k : cs->n));
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
  unlink(object);
  if (ok && !(ours->handle = dlopen(library, RTLD_NOW | RTLD_LOCAL)))
    snprintf(err, sizeof err, "%s", dlerror()), ok = false;
  if (!getenv("GEMM_BENCH_KEEP")) unlink(library);
  if (ok) {
    ours->run = (RunFn)(uintptr_t)dlsym(ours->handle, "bench_run");
    ok = ours->run && tfm_arena_create(&ours->arena, (size_t)p->persistent_bytes,
                                       (size_t)p->scratch_bytes) == TFM_OK;
  }
  if (!ok) {
    fprintf(stderr, "gemm_bench: %s: %s\n", cs->name, err);
    return false;
  }
  const KernelBuffer *buffers[3] = {kernel_plan_buffer(p, a), kernel_plan_buffer(p, b),
                                    kernel_plan_buffer(p, c)};
  float **at[3] = {&ours->a, &ours->b, &ours->c};
  for (int i = 0; i < 3; i++)
    *at[i] = (float *)((buffers[i]->region == KERNEL_PERSISTENT ? ours->arena.persistent
                                                                 : ours->arena.scratch) +
                       buffers[i]->offset);
  *graph = g;
  *plan = p;
  return true;
}

static void blas(const Case *cs, const float *a, const float *b, float *c) {
  int64_t sa = cs->a_batched ? cs->m * cs->k : 0, sb = cs->b_batched ? cs->k * cs->n : 0;
  for (int64_t i = 0; i < cs->batch; i++)
    cblas_sgemm(CblasRowMajor, cs->ta ? CblasTrans : CblasNoTrans,
                cs->tb ? CblasTrans : CblasNoTrans, (int)cs->m, (int)cs->n, (int)cs->k, 1.0f,
                a + i * sa, (int)(cs->ta ? cs->m : cs->k), b + i * sb,
                (int)(cs->tb ? cs->k : cs->n), 0.0f, c + i * cs->m * cs->n, (int)cs->n);
}

int main(int argc, char **argv) {
  reexec_without_openblas_overrides(argv);
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  const char *filter = argc > 2 ? argv[2] : "";
  if (rounds < 1 || rounds > 100 || argc > 3) {
    fprintf(stderr, "usage: gemm_bench [ROUNDS (1..100) [FILTER]]\n");
    return 2;
  }
  char dir[] = "/tmp/tfm_gemm_bench_XXXXXX";
  tfm_pool *pool;
  if (!mkdtemp(dir) || tfm_pool_create(&pool, 2) != TFM_OK) {
    fprintf(stderr, "gemm_bench: cannot set up: %s\n", tfm_error());
    return 1;
  }
  openblas_set_num_threads(2);
  printf("OpenBLAS kernel: %s (%s)\n", openblas_get_corename(), openblas_get_config());
  double step_ours = 0, step_blas = 0, step_flops = 0;
  printf("%-38s %10s %10s %8s %8s %7s %9s %7s\n", "case", "ours ms", "blas ms", "ours GF", "blas GF",
         "ratio", "max rel", "best");
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
    const Case *cs = &cases[ci];
    if (!strstr(cs->name, filter))
      continue;
    Graph *g;
    KernelPlan *plan;
    Ours ours = {0};
    if (!build(cs, dir, (int)ci, &g, &plan, &ours))
      return 1;
    size_t na = (size_t)((cs->a_batched ? cs->batch : 1) * cs->m * cs->k);
    size_t nb = (size_t)((cs->b_batched ? cs->batch : 1) * cs->k * cs->n);
    size_t nc = (size_t)(cs->batch * cs->m * cs->n);
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
    uint64_t state = 1;
    for (size_t i = 0; i < na + nb; i++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      float x = (float)((double)(state >> 11) / 9007199254740992.0 * 2 - 1);
      if (i < na)
        a[i] = ours.a[i] = x;
      else
        b[i - na] = ours.b[i - na] = x;
    }
    /* Enough repetitions that one timed run takes about 50 ms. */
    double flops = 2.0 * (double)cs->batch * (double)cs->m * (double)cs->n * (double)cs->k;
    double t0 = now();
    ours.run(ours.arena.persistent, ours.arena.scratch, pool);
    blas(cs, a, b, c);
    double once = (now() - t0) / 2;
    int reps = once > 0.05 ? 1 : (int)(0.05 / once) + 1;
    double worst = 0;
    for (size_t i = 0; i < nc; i++)
      worst = fmax(worst, fabs(ours.c[i] - c[i]) / fmax(fabs(c[i]), 1e-3));
    double t_ours[100], t_blas[100];
    for (int r = 0; r < rounds; r++) {
      wait_for_idle_threads();
      t0 = now();
      for (int i = 0; i < reps; i++)
        ours.run(ours.arena.persistent, ours.arena.scratch, pool);
      t_ours[r] = (now() - t0) / reps;
      wait_for_idle_threads();
      t0 = now();
      for (int i = 0; i < reps; i++)
        blas(cs, a, b, c);
      t_blas[r] = (now() - t0) / reps;
    }
    qsort(t_ours, (size_t)rounds, sizeof *t_ours, compare);
    qsort(t_blas, (size_t)rounds, sizeof *t_blas, compare);
    double mo = t_ours[(rounds - 1) / 2], mb = t_blas[(rounds - 1) / 2];
    printf("%-38s %10.3f %10.3f %8.1f %8.1f %7.2f %9.1e %7.2f\n", cs->name, 1e3 * mo, 1e3 * mb,
           flops / mo * 1e-9, flops / mb * 1e-9, mb / mo, worst, t_blas[0] / t_ours[0]);
    fflush(stdout);
    step_ours += cs->per_step * mo, step_blas += cs->per_step * mb;
    step_flops += cs->per_step * flops;
    free(a), free(b), free(c);
    tfm_arena_destroy(&ours.arena);
    dlclose(ours.handle);
    kernel_plan_free(plan);
    graph_free(g);
  }
  if (step_ours > 0)
    printf("%-38s %10.3f %10.3f %8.1f %8.1f %7.2f\n", "gpt step (sum x per_step)", 1e3 * step_ours,
           1e3 * step_blas, step_flops / step_ours * 1e-9, step_flops / step_blas * 1e-9,
           step_blas / step_ours);
  tfm_pool_destroy(pool);
  rmdir(dir);
  return 0;
}
