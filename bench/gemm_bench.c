/* The generated GEMM against OpenBLAS sgemm and, where a Python with PyTorch
 * 2.x is named, MKL's sgemm (torch.matmul; bench/gemm_peer.py), two threads
 * each: every case is a graph with one dot, planned and compiled by the CPU
 * backend (native), loaded as a shared object and run through the runtime's
 * pool; OpenBLAS runs the same product (one cblas_sgemm per batch) on copies
 * of the operands, the MKL peer in a child process on the same values. Runs
 * alternate case by case (ours, OpenBLAS, MKL), medians are printed with
 * GFLOP/s and the ratios (peer time / ours); "best" is the ratio of the
 * fastest runs, which other load on the machine disturbs less.
 *
 * The peers run at their best: OpenBLAS picks its own kernel for the CPU (an
 * OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE in the environment, which some
 * machines set to keep older OpenBLAS builds on a safe kernel, is removed by
 * re-executing without it; the kernel used is printed), and no side is
 * timed while another's threads still spin. OpenBLAS's workers busy-wait
 * for about 2^28 cycles after each call (its THREAD_TIMEOUT), a tenth of a
 * second here, and the peer's OpenMP threads spin too: on 2 cores our two
 * threads then share them with a third, which halved our times in whichever
 * rounds followed a BLAS run closely.
 * usage: gemm_bench [ROUNDS [FILTER]]   (a benchmark, not a test: see bench/RESULTS.md);
 * FILTER runs only the cases whose name contains it. GEMM_BENCH_PYTHON=PATH
 * (a python with torch, e.g. /work/benchenv/bin/python) adds the MKL peer;
 * GEMM_BENCH_THREADS=1 runs every side on one thread and times it by that
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID; the peer's time.thread_time),
 * which other load on the machine distorts far less than wall time: a
 * measure of the kernels, not of the threading. GEMM_BENCH_KEEP=1 keeps the compiled case libraries in /tmp/tfm_gemm_bench_*
 * so `perf report` can name their functions. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

/* 1 or 2 (GEMM_BENCH_THREADS): with 1, times are the thread's CPU time. */
static int threads = 2;

static double now(void) {
  struct timespec t;
  clock_gettime(threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Whether any thread of process `pid` other than this process's main one
 * (whose thread id is the process id) is running (state R in
 * /proc/PID/task/TID/stat), i.e. still spinning after its last job. */
static bool threads_running(pid_t pid) {
  char self[32], path[300], stat[512];
  snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
  DIR *tasks = opendir(path);
  if (!tasks) return false;
  snprintf(self, sizeof self, "%ld", (long)getpid());
  bool running = false;
  for (struct dirent *t; !running && (t = readdir(tasks));) {
    if (t->d_name[0] == '.' || strcmp(t->d_name, self) == 0) continue;
    snprintf(path, sizeof path, "/proc/%ld/task/%s/stat", (long)pid, t->d_name);
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

/* The MKL peer's process (bench/gemm_peer.py) and its pipes; pid 0 when
 * there is none. */
typedef struct Peer {
  pid_t pid;
  FILE *to, *from;
} Peer;

/* Waits (up to a second) until the other threads, ours and the peer's, sleep,
 * so the next timed run has both cores to itself. */
static void wait_for_idle_threads(const Peer *peer) {
  for (int i = 0; i < 1000 && (threads_running(getpid()) || (peer->pid && threads_running(peer->pid)));
       i++)
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
}

/* Starts `python bench/gemm_peer.py` beside this binary's source (the path is
 * fixed at build time) with a pipe each way. */
static bool peer_start(Peer *peer, const char *python) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return false;
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    dup2(down[0], 0), dup2(up[1], 1);
    close(down[0]), close(down[1]), close(up[0]), close(up[1]);
    execl(python, python, TFM_BENCH_DIR "/gemm_peer.py", threads == 1 ? "1" : "2", (char *)NULL);
    fprintf(stderr, "gemm_bench: cannot run %s: %s\n", python, strerror(errno));
    _exit(127);
  }
  close(down[0]), close(up[1]);
  *peer = (Peer){.pid = pid, .to = fdopen(down[1], "w"), .from = fdopen(up[0], "r")};
  return peer->to && peer->from;
}

/* Sends one command line and returns the answer line in `answer`. */
static bool peer_ask(const Peer *peer, const char *command, char *answer, size_t size) {
  if (fprintf(peer->to, "%s\n", command) < 0 || fflush(peer->to) != 0 ||
      !fgets(answer, (int)size, peer->from)) {
    fprintf(stderr, "gemm_bench: the MKL peer stopped answering (after \"%s\")\n", command);
    return false;
  }
  return true;
}

static bool write_floats(const char *dir, const char *name, const float *x, size_t count) {
  char path[300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(x, sizeof *x, count, f) == count;
  return (f && fclose(f) == 0) && ok;
}

static bool read_floats(const char *dir, const char *name, float *x, size_t count) {
  char path[300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  bool ok = f && fread(x, sizeof *x, count, f) == count;
  if (f) fclose(f);
  unlink(path);
  return ok;
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

/* The largest |x - ref| / max(|ref|, 1e-3): the two round differently. */
static double worst_difference(const float *x, const float *ref, size_t count) {
  double worst = 0;
  for (size_t i = 0; i < count; i++)
    worst = fmax(worst, fabs(x[i] - ref[i]) / fmax(fabs(ref[i]), 1e-3));
  return worst;
}

/* Hands the case's operands to the MKL peer and checks its result against
 * OpenBLAS's (in `ref`); returns its largest difference, or -1 on failure. */
static double peer_case(const Peer *peer, const char *dir, const Case *cs, const float *a, size_t na,
                        const float *b, size_t nb, const float *ref, size_t nc) {
  char command[512], answer[256];
  if (!write_floats(dir, "a.bin", a, na) || !write_floats(dir, "b.bin", b, nb)) return -1;
  snprintf(command, sizeof command, "case %s %d %d %lld %lld %lld %lld %d %d", dir, cs->ta, cs->tb,
           (long long)cs->batch, (long long)cs->m, (long long)cs->n, (long long)cs->k,
           cs->a_batched, cs->b_batched);
  float *c = malloc(nc * sizeof *c);
  bool ok = c && peer_ask(peer, command, answer, sizeof answer) && strncmp(answer, "ready", 5) == 0 &&
            peer_ask(peer, "check", answer, sizeof answer) && read_floats(dir, "c.bin", c, nc);
  double worst = ok ? worst_difference(c, ref, nc) : -1;
  free(c);
  snprintf(command, sizeof command, "%s/a.bin", dir), unlink(command);
  snprintf(command, sizeof command, "%s/b.bin", dir), unlink(command);
  return worst;
}

/* One timed run of the MKL peer: seconds per repetition, or -1. */
static double peer_time(const Peer *peer, int reps) {
  char command[64], answer[256];
  snprintf(command, sizeof command, "time %d", reps);
  return peer_ask(peer, command, answer, sizeof answer) ? atof(answer) : -1;
}

int main(int argc, char **argv) {
  reexec_without_openblas_overrides(argv);
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  const char *filter = argc > 2 ? argv[2] : "";
  if (rounds < 1 || rounds > 100 || argc > 3) {
    fprintf(stderr, "usage: gemm_bench [ROUNDS (1..100) [FILTER]]\n");
    return 2;
  }
  const char *threads_env = getenv("GEMM_BENCH_THREADS");
  if (threads_env && (threads = atoi(threads_env)) != 1 && threads != 2) {
    fprintf(stderr, "gemm_bench: GEMM_BENCH_THREADS must be 1 or 2, not %s\n", threads_env);
    return 2;
  }
  char dir[] = "/tmp/tfm_gemm_bench_XXXXXX";
  tfm_pool *pool;
  if (!mkdtemp(dir) || tfm_pool_create(&pool, (size_t)threads) != TFM_OK) {
    fprintf(stderr, "gemm_bench: cannot set up: %s\n", tfm_error());
    return 1;
  }
  Peer peer = {0};
  const char *python = getenv("GEMM_BENCH_PYTHON");
  if (python && *python && !peer_start(&peer, python)) {
    fprintf(stderr, "gemm_bench: cannot start the MKL peer %s: %s\n", python, strerror(errno));
    return 1;
  }
  openblas_set_num_threads(threads);
  printf("%d thread(s), %s; OpenBLAS kernel: %s (%s)\n", threads,
         threads == 1 ? "CPU time of the thread" : "wall time", openblas_get_corename(),
         openblas_get_config());
  if (!peer.pid) printf("MKL peer: none (set GEMM_BENCH_PYTHON to a python with torch)\n");
  fflush(stdout);
  double step[3] = {0, 0, 0}, step_flops = 0;
  printf("%-38s %9s %9s %9s %7s %6s %6s %8s %8s %6s %6s\n", "case", "ours ms", "blas ms", "mkl ms",
         "ours GF", "/blas", "/mkl", "rel blas", "rel mkl", "best b", "best m");
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
    double worst = worst_difference(ours.c, c, nc), worst_mkl = 0;
    if (peer.pid && (worst_mkl = peer_case(&peer, dir, cs, a, na, b, nb, c, nc)) < 0)
      return 1;
    double t[3][100];
    for (int r = 0; r < rounds; r++) {
      wait_for_idle_threads(&peer);
      t0 = now();
      for (int i = 0; i < reps; i++)
        ours.run(ours.arena.persistent, ours.arena.scratch, pool);
      t[0][r] = (now() - t0) / reps;
      wait_for_idle_threads(&peer);
      t0 = now();
      for (int i = 0; i < reps; i++)
        blas(cs, a, b, c);
      t[1][r] = (now() - t0) / reps;
      t[2][r] = 0;
      if (peer.pid) {
        wait_for_idle_threads(&peer);
        if ((t[2][r] = peer_time(&peer, reps)) < 0)
          return 1;
      }
    }
    double median[3];
    for (int s = 0; s < 3; s++) {
      qsort(t[s], (size_t)rounds, sizeof *t[s], compare);
      median[s] = t[s][(rounds - 1) / 2];
      step[s] += cs->per_step * median[s];
    }
    double mo = median[0];
    printf("%-38s %9.3f %9.3f %9.3f %7.1f %6.2f %6.2f %8.1e %8.1e %6.2f %6.2f\n", cs->name,
           1e3 * mo, 1e3 * median[1], 1e3 * median[2], flops / mo * 1e-9, median[1] / mo,
           median[2] / mo, worst, worst_mkl, t[1][0] / t[0][0], t[2][0] / t[0][0]);
    fflush(stdout);
    step_flops += cs->per_step * flops;
    free(a), free(b), free(c);
    tfm_arena_destroy(&ours.arena);
    dlclose(ours.handle);
    kernel_plan_free(plan);
    graph_free(g);
  }
  if (step[0] > 0)
    printf("%-38s %9.3f %9.3f %9.3f %7.1f %6.2f %6.2f\n", "gpt step (sum x per_step)",
           1e3 * step[0], 1e3 * step[1], 1e3 * step[2], step_flops / step[0] * 1e-9,
           step[1] / step[0], step[2] / step[0]);
  if (peer.pid) {
    fclose(peer.to); /* the peer ends at the end of its input */
    fclose(peer.from);
    waitpid(peer.pid, NULL, 0);
  }
  tfm_pool_destroy(pool);
  rmdir(dir);
  return 0;
}
