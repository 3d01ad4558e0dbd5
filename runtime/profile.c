/* --profile: wall time per kernel, per graph. tfm_graph_run says which graph
 * is running (its kernel table) and times the whole run; tfm_kernel_for
 * (threads.c) times each kernel's tfm_parallel_for and adds it here by the
 * index the generated code passes. Runs come one at a time from the
 * caller's thread, so the counters need no lock. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile.h"

/* init, train and forward, with room for a program that opens more. */
#define MAX_GRAPHS 8

typedef struct {
  const tfm_graph_desc *desc;
  uint64_t runs;
  int64_t run_ns;     /* the whole of each run: kernels and the calls between */
  uint64_t *calls;    /* per kernel */
  int64_t *ns;
  char launches[256]; /* tfm_profile_launches; empty on the CPU */
} graph_profile;

int tfm_profiling;
static graph_profile graphs[MAX_GRAPHS];
static int num_graphs;
static graph_profile *running; /* NULL outside a run, or for a graph not kept */

int64_t tfm_profile_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void tfm_profile_start(void) { tfm_profiling = 1; }

void tfm_profile_kernel(int32_t kernel, int64_t ns) {
  /* A model compiled before kernel tables has none: its kernels go uncounted. */
  if (!running || kernel < 0 || kernel >= running->desc->num_kernels) return;
  running->calls[kernel]++;
  running->ns[kernel] += ns;
}

void tfm_profile_launches(const char *line) {
  if (running) snprintf(running->launches, sizeof running->launches, "%s", line);
}

static graph_profile *profile_of(const tfm_graph_desc *desc) {
  for (int i = 0; i < num_graphs; i++)
    if (graphs[i].desc == desc) return &graphs[i];
  if (num_graphs == MAX_GRAPHS) return NULL;
  size_t n = desc->num_kernels > 0 ? (size_t)desc->num_kernels : 1;
  graph_profile p = {desc, 0, 0, calloc(n, sizeof *p.calls), calloc(n, sizeof *p.ns), ""};
  if (!p.calls || !p.ns) {
    free(p.calls);
    free(p.ns);
    return NULL; /* out of memory: this graph is not profiled, the run goes on */
  }
  graphs[num_graphs] = p;
  return &graphs[num_graphs++];
}

void tfm_profile_run(tfm_graph *g, tfm_pool *pool) {
  running = profile_of(g->desc);
  int64_t start = tfm_profile_now_ns();
  g->desc->run(g->arena.persistent, g->arena.scratch, pool);
  int64_t ns = tfm_profile_now_ns() - start;
  if (running) {
    running->runs++;
    running->run_ns += ns;
  }
  running = NULL;
}

static const graph_profile *sorting;

static int by_time(const void *a, const void *b) {
  int64_t x = sorting->ns[*(const int32_t *)a], y = sorting->ns[*(const int32_t *)b];
  return x < y ? 1 : x > y ? -1 : *(const int32_t *)a - *(const int32_t *)b;
}

static void report_graph(const graph_profile *p, FILE *out) {
  const tfm_graph_desc *d = p->desc;
  int32_t *order = malloc((d->num_kernels > 0 ? (size_t)d->num_kernels : 1) * sizeof *order);
  if (!order) return;
  for (int32_t i = 0; i < d->num_kernels; i++) order[i] = i;
  sorting = p;
  qsort(order, (size_t)d->num_kernels, sizeof *order, by_time);
  double run_ms = (double)p->run_ns / 1e6;
  fprintf(out, "profile: %s graph, %llu runs, %d kernels\n", d->name, (unsigned long long)p->runs,
          (int)d->num_kernels);
  fprintf(out, "%6s %6s %11s %7s %9s %8s  %s\n", "kernel", "calls", "total ms", "% run", "GFLOP/s",
          "GB/s", "label");
  int64_t kernel_ns = 0;
  double flops = 0, bytes = 0;
  for (int32_t i = 0; i < d->num_kernels; i++) {
    int32_t k = order[i];
    if (!p->calls[k]) continue;
    const tfm_kernel_desc *kd = &d->kernels[k];
    double ns = (double)p->ns[k] > 0 ? (double)p->ns[k] : 1;
    /* FLOP per ns is GFLOP per s, byte per ns GB per s. */
    double f = (double)kd->flops * (double)p->calls[k], b = (double)kd->bytes * (double)p->calls[k];
    fprintf(out, "%6d %6llu %11.3f %7.2f %9.2f %8.2f  %s\n", (int)k, (unsigned long long)p->calls[k],
            (double)p->ns[k] / 1e6, run_ms > 0 ? 100 * (double)p->ns[k] / 1e6 / run_ms : 0, f / ns,
            b / ns, kd->label);
    kernel_ns += p->ns[k];
    flops += f;
    bytes += b;
  }
  free(order);
  /* The run's own time, so that what the kernels leave out (the calls
   * between them) shows as the kernels summing to less than 100%. */
  double run_ns = p->run_ns > 0 ? (double)p->run_ns : 1;
  fprintf(out, "%6s %6llu %11.3f %7.2f %9.2f %8.2f  %s graph runs (kernels %.3f ms)\n", "total",
          (unsigned long long)p->runs, run_ms, 100.0, flops / run_ns, bytes / run_ns, d->name,
          (double)kernel_ns / 1e6);
  /* A CUDA graph's kernels are not timed one by one (--no-cuda-graph times them). */
  if (p->launches[0])
    fprintf(out, "launches per %s: %s\n", strcmp(d->name, "train") ? "run" : "step", p->launches);
}

void tfm_profile_report(FILE *out) {
  for (int i = 0; i < num_graphs; i++)
    if (graphs[i].runs) report_graph(&graphs[i], out);
}
