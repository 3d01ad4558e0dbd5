/* The host side of a GPU graph: a device copy of each host arena it runs
 * on (gpu.h says what moves when), kernels launched in plan order through
 * the driver (runtime/cuda.c) or, for a training step, replayed as one CUDA
 * graph (runtime/cuda_graph.c), the dots of a --gemm=cublas build called
 * through cuBLAS (runtime/cublas.c). */
#include "gpu.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_graph.h"
#include "model.h"
#include "profile.h"

#define ARENA_ALIGN 256

typedef struct GpuState {
  tfm_cuda_module module;
  tfm_cuda_kernel *kernels;
  int64_t cublas_calls; /* launches that are cuBLAS dots */
  /* The training step's graph, for the device arena at graph_base: its
   * kernels' parameters hold that arena's addresses. */
  tfm_cuda_graph *graph;
  tfm_device_ptr graph_base;
} GpuState;

int tfm_gpu_graphs = 1;
int tfm_gpu_update_follows;

/* The device copy of one host arena, found by the host's persistent
 * region: the same layout, the scratch region at tfm_gpu_scratch_offset. */
typedef struct DeviceArena {
  struct DeviceArena *next;
  const uint8_t *host;
  const tfm_gpu_program *program; /* the last to run on it: its inputs stay the host's */
  tfm_device_ptr base;
  int64_t bytes;
  bool host_newer;   /* the host wrote params or states: upload all before the next run */
  bool device_newer; /* a run or an update changed them on the device */
  bool update_done;  /* the last run's graph made its update: tfm_gpu_update skips it */
} DeviceArena;

static DeviceArena *arenas;

/* tfm_gpu_link's: `to` takes `from` on the device before each run of its arena. */
typedef struct Link {
  struct Link *next;
  tfm_gpu_place to, from;
  int64_t bytes;
} Link;

static Link *links;

/* One driver context for the process: init, train and forward share it. */
static tfm_cuda *cuda;

static void refuse(void) {
  fprintf(stderr, "%s\n", tfm_error());
  exit(1);
}

/* TFM_CUDA_SYNC=1 waits for each kernel and names the one that failed
 * (launches are asynchronous: otherwise a fault shows at the end of the
 * run, in cuCtxSynchronize, with no kernel named). For debugging: slow. */
static bool sync_each_launch(void) {
  static int on = -1;
  if (on < 0) {
    const char *v = getenv("TFM_CUDA_SYNC");
    on = v && *v && strcmp(v, "0") != 0;
  }
  return on;
}

/* After launch `index`, started at `start_ns`: under TFM_CUDA_SYNC or
 * --profile, waits for it, names it if it failed, and times it for the
 * profile (wall time, the launch's own overhead included). */
static void finish_launch(const tfm_gpu_launch *l, int64_t index, int64_t start_ns) {
  if (!sync_each_launch() && !tfm_profiling) return;
  if (!tfm_cuda_synchronize(cuda)) {
    if (tfm_profiling) tfm_profile_kernel((int32_t)index, tfm_profile_now_ns() - start_ns);
    return;
  }
  char first[512];
  snprintf(first, sizeof first, "%s", tfm_error());
  tfm_fail("%s (launch %lld, %s)", first, (long long)index, l->entry ? l->entry : "cuBLAS dot");
  refuse();
}

unsigned tfm_gpu_blocks(int64_t items, int64_t block_threads) {
  int64_t blocks = (items + block_threads - 1) / block_threads;
  return (unsigned)(blocks > 0 ? blocks : 1);
}

int64_t tfm_gpu_scratch_offset(const tfm_gpu_program *p) {
  return (p->persistent_bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

void tfm_gpu_pack(const tfm_gpu_program *p, int64_t index, tfm_device_ptr persistent,
                  tfm_device_ptr scratch, tfm_device_ptr *pointers, int64_t *items, void **params) {
  const tfm_gpu_launch *l = &p->launches[index];
  for (int64_t i = 0; i < l->num_args; i++) {
    int64_t a = l->first_arg + i;
    tfm_device_ptr base = p->arg_region[a] == TFM_REGION_PERSISTENT ? persistent : scratch;
    pointers[i] = base + (tfm_device_ptr)p->arg_offset[a];
    params[i] = &pointers[i];
  }
  *items = l->items;
  params[l->num_args] = items;
}

/* This process's rank among a launcher's ranks on this machine (Open MPI,
 * MPICH and Intel MPI, Slurm); 0 for a process alone. */
static int local_rank(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                     "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atoi(v) > 0 ? atoi(v) : 0;
  }
  return 0;
}

int tfm_gpu_driver(tfm_cuda **out) {
  if (!cuda && tfm_cuda_open_for_rank(&cuda, local_rank())) return TFM_FAILED;
  *out = cuda;
  return TFM_OK;
}

static GpuState *load(const tfm_gpu_program *p) {
  tfm_cuda *opened;
  if (tfm_gpu_driver(&opened)) refuse();
  GpuState *s = calloc(1, sizeof *s);
  if (s) s->kernels = calloc((size_t)p->num_launches + 1, sizeof *s->kernels);
  if (!s || !s->kernels) {
    tfm_fail("out of memory");
    refuse();
  }
  if (tfm_cuda_module_load(cuda, p->ptx, &s->module)) refuse();
  for (int64_t i = 0; i < p->num_launches; i++)
    if (p->launches[i].gemm) s->cublas_calls++;
    else if (tfm_cuda_kernel_get(cuda, s->module, p->launches[i].entry, &s->kernels[i]))
      refuse();
  return s;
}

void tfm_gpu_program_unload(const tfm_gpu_program *p) {
  GpuState *s = *p->state;
  if (!s) return;
  tfm_cuda_graph_destroy(s->graph);
  if (tfm_cuda_module_unload(cuda, s->module)) refuse();
  free(s->kernels);
  free(s);
  *p->state = NULL;
}

static DeviceArena *find_arena(const uint8_t *persistent) {
  for (DeviceArena *a = arenas; a; a = a->next)
    if (a->host == persistent) return a;
  return NULL;
}

/* The host arena's device copy, made (to be uploaded whole) at its first run. */
static DeviceArena *open_arena(const tfm_gpu_program *p, const uint8_t *persistent) {
  int64_t bytes = tfm_gpu_scratch_offset(p) + p->scratch_bytes;
  DeviceArena *a = find_arena(persistent);
  if (a && a->bytes < bytes) {
    tfm_fail("GPU: a host arena of %lld device bytes run with a program that needs %lld",
             (long long)a->bytes, (long long)bytes);
    refuse();
  }
  if (!a) {
    tfm_device_ptr base;
    if (tfm_cuda_alloc(cuda, (size_t)(bytes > 0 ? bytes : 1), &base)) refuse();
    if (!(a = malloc(sizeof *a))) {
      tfm_fail("out of memory");
      refuse();
    }
    *a = (DeviceArena){.next = arenas, .host = persistent, .base = base, .bytes = bytes,
                       .host_newer = true};
    arenas = a;
  }
  a->program = p;
  return a;
}

static tfm_device_ptr device_at(const DeviceArena *a, int64_t region, int64_t offset) {
  int64_t start = region == TFM_REGION_PERSISTENT ? 0 : tfm_gpu_scratch_offset(a->program);
  return a->base + (tfm_device_ptr)(start + offset);
}

static bool same_place(tfm_gpu_place a, const uint8_t *arena, int64_t region, int64_t offset) {
  return a.arena == arena && a.region == region && a.offset == offset;
}

/* Whether a link takes the buffer (up: its destination) or gives it (down:
 * its source): it stays on the device. */
static bool linked(const uint8_t *arena, int64_t region, int64_t offset, bool up) {
  for (const Link *l = links; l; l = l->next)
    if (same_place(up ? l->to : l->from, arena, region, offset)) return true;
  return false;
}

/* Each {region, offset, bytes} of `ranges` from the host to the device or
 * back, but those a link keeps on the device. */
static void move_ranges(const DeviceArena *a, const int64_t *ranges, int64_t count,
                        uint8_t *persistent, uint8_t *scratch, bool up) {
  for (int64_t i = 0; i < count; i++) {
    const int64_t *r = &ranges[3 * i];
    if (links && linked(a->host, r[0], r[1], up)) continue;
    uint8_t *host = (r[0] == TFM_REGION_PERSISTENT ? persistent : scratch) + r[1];
    tfm_device_ptr device = device_at(a, r[0], r[1]);
    if (up ? tfm_cuda_upload(cuda, device, host, (size_t)r[2])
           : tfm_cuda_download(cuda, host, device, (size_t)r[2]))
      refuse();
  }
}

/* Where the host wrote params or states since the device last had them
 * (first run, tfm_gpu_arena_written): the whole persistent region up. */
static void upload_host_writes(DeviceArena *a, const tfm_gpu_program *p,
                               const uint8_t *persistent) {
  if (a->host_newer && p->persistent_bytes &&
      tfm_cuda_upload(cuda, device_at(a, TFM_REGION_PERSISTENT, 0), persistent,
                      (size_t)p->persistent_bytes))
    refuse();
  a->host_newer = false;
}

/* The links into arena `a`, from arenas that have a device copy (before
 * the source's first run the host copies agree: the caller saw to it). */
static void copy_links(const DeviceArena *a) {
  for (const Link *l = links; l; l = l->next) {
    const DeviceArena *from = l->to.arena == a->host ? find_arena(l->from.arena) : NULL;
    if (from && tfm_cuda_copy(cuda, device_at(a, l->to.region, l->to.offset),
                              device_at(from, l->from.region, l->from.offset), (size_t)l->bytes))
      refuse();
  }
}

/* The update's copy i in arena a: a param (persistent, at c[0]) takes its
 * new value (region c[1], offset c[2]), c[3] bytes. */
static void update_copy(const tfm_gpu_program *p, const DeviceArena *a, int64_t i,
                        tfm_device_ptr *dst, tfm_device_ptr *src, size_t *bytes) {
  const int64_t *c = &p->copies[4 * i];
  *dst = device_at(a, TFM_REGION_PERSISTENT, c[0]);
  *src = device_at(a, c[1], c[2]);
  *bytes = (size_t)c[3];
}

/* The parameters of every launch, packed one launch at a time. */
typedef struct Packing {
  tfm_device_ptr *pointers;
  void **params;
} Packing;

static Packing packing_open(const tfm_gpu_program *p) {
  int64_t most = 1;
  for (int64_t i = 0; i < p->num_launches; i++)
    if (p->launches[i].num_args > most) most = p->launches[i].num_args;
  Packing k = {malloc(sizeof *k.pointers * (size_t)most),
               malloc(sizeof *k.params * (size_t)(most + 1))};
  if (!k.pointers || !k.params) {
    tfm_fail("out of memory");
    refuse();
  }
  return k;
}

static void packing_close(Packing *k) {
  free(k->pointers);
  free(k->params);
}

static void launch_shape(const tfm_gpu_program *p, int64_t items, unsigned grid[3],
                         unsigned block[3]) {
  grid[0] = tfm_gpu_blocks(items, p->block_threads), grid[1] = grid[2] = 1;
  block[0] = (unsigned)p->block_threads, block[1] = block[2] = 1;
}

/* Every launch in plan order, one driver call (or cuBLAS call) each. */
static void launch_each(const tfm_gpu_program *p, const GpuState *s, const DeviceArena *arena) {
  tfm_device_ptr dev_persistent = device_at(arena, TFM_REGION_PERSISTENT, 0);
  tfm_device_ptr dev_scratch = device_at(arena, TFM_REGION_SCRATCH, 0);
  Packing k = packing_open(p);
  for (int64_t i = 0; i < p->num_launches; i++) {
    int64_t items;
    tfm_gpu_pack(p, i, dev_persistent, dev_scratch, k.pointers, &items, k.params);
    const tfm_gpu_launch *l = &p->launches[i];
    int64_t start_ns = tfm_profiling ? tfm_profile_now_ns() : 0;
    if (l->gemm) { /* a dot of x with itself has one input buffer */
      if (tfm_gpu_gemm(l->gemm, k.pointers[0], k.pointers[1], k.pointers[l->num_args > 2 ? 2 : 1]))
        refuse();
      finish_launch(l, i, start_ns);
      tfm_kernel_hook_call((int32_t)i);
      continue;
    }
    unsigned grid[3], block[3];
    launch_shape(p, items, grid, block);
    /* Launches are asynchronous: the parameters are copied at the call. */
    if (tfm_cuda_launch(cuda, s->kernels[i], grid, block, 0, k.params)) refuse();
    finish_launch(l, i, start_ns);
    tfm_kernel_hook_call((int32_t)i);
  }
  packing_close(&k);
}

/* The training step's graph for this arena: every kernel, then the
 * update's copies; made at the arena's first step (and again should the
 * program move to another arena). */
static tfm_cuda_graph *step_graph(const tfm_gpu_program *p, GpuState *s, const DeviceArena *arena) {
  if (s->graph && s->graph_base == arena->base) return s->graph;
  tfm_cuda_graph_destroy(s->graph);
  s->graph = NULL;
  tfm_cuda_graph *g;
  if (tfm_cuda_graph_create(cuda, &g)) refuse();
  tfm_device_ptr dev_persistent = device_at(arena, TFM_REGION_PERSISTENT, 0);
  tfm_device_ptr dev_scratch = device_at(arena, TFM_REGION_SCRATCH, 0);
  Packing k = packing_open(p);
  for (int64_t i = 0; i < p->num_launches; i++) {
    int64_t items;
    tfm_gpu_pack(p, i, dev_persistent, dev_scratch, k.pointers, &items, k.params);
    unsigned grid[3], block[3];
    launch_shape(p, items, grid, block);
    if (tfm_cuda_graph_add_kernel(g, s->kernels[i], grid, block, 0, k.params)) refuse();
  }
  packing_close(&k);
  for (int64_t i = 0; i < p->num_copies; i++) {
    tfm_device_ptr dst, src;
    size_t bytes;
    update_copy(p, arena, i, &dst, &src, &bytes);
    if (tfm_cuda_graph_add_copy(g, dst, src, bytes)) refuse();
  }
  if (tfm_cuda_graph_instantiate(g)) refuse();
  s->graph = g;
  s->graph_base = arena->base;
  return g;
}

/* Why this run launches each kernel rather than one graph; NULL: a graph. */
static const char *launched_directly(const GpuState *s) {
  if (!tfm_gpu_update_follows) return "not a training step";
  if (!tfm_gpu_graphs) return "--no-cuda-graph";
  if (sync_each_launch()) return "TFM_CUDA_SYNC";
  if (s->cublas_calls) return "--gemm=cublas, whose cuBLAS calls are made one by one";
  return NULL;
}

/* --profile's line for the run: what the host launched. */
static void profile_launches(const tfm_gpu_program *p, const GpuState *s, const char *direct) {
  char line[256];
  long long kernels = (long long)(p->num_launches - s->cublas_calls);
  long long copies = tfm_gpu_update_follows ? (long long)p->num_copies : 0;
  if (!direct)
    snprintf(line, sizeof line, "1 graph launch (%lld kernels, %lld copies)", kernels, copies);
  else
    snprintf(line, sizeof line, "%lld kernel launches, %lld cuBLAS calls, %lld copies "
             "(not a CUDA graph: %s)", kernels, (long long)s->cublas_calls, copies, direct);
  tfm_profile_launches(line);
}

void tfm_gpu_run(const tfm_gpu_program *p, uint8_t *persistent, uint8_t *scratch) {
  GpuState *s = *p->state;
  if (!s) *p->state = s = load(p);
  DeviceArena *arena = open_arena(p, persistent);
  upload_host_writes(arena, p, persistent);
  move_ranges(arena, p->inputs, p->num_inputs, persistent, scratch, true);
  copy_links(arena);
  const char *direct = launched_directly(s);
  if (direct) launch_each(p, s, arena);
  else if (tfm_cuda_graph_launch(step_graph(p, s, arena))) refuse();
  if (tfm_cuda_synchronize(cuda)) refuse();
  move_ranges(arena, p->outputs, p->num_outputs, persistent, scratch, false);
  arena->device_newer = true;
  arena->update_done = !direct;
  if (tfm_profiling) profile_launches(p, s, direct);
}

void tfm_gpu_update(const tfm_gpu_program *p, uint8_t *persistent, uint8_t *scratch) {
  (void)scratch;
  DeviceArena *arena = find_arena(persistent);
  if (!arena) return;
  if (arena->update_done) { /* by the step's graph, right after its kernels */
    arena->update_done = false;
    return;
  }
  /* what the host wrote since the run (tfm_graph_buffer) first: the update
   * goes over it, as on the CPU */
  upload_host_writes(arena, p, persistent);
  for (int64_t i = 0; i < p->num_copies; i++) {
    tfm_device_ptr dst, src;
    size_t bytes;
    update_copy(p, arena, i, &dst, &src, &bytes);
    if (tfm_cuda_copy(cuda, dst, src, bytes)) refuse();
  }
  if (tfm_cuda_synchronize(cuda)) refuse();
  arena->device_newer = true;
}

/* The offset of the program's first persistent input at or after `from`
 * (persistent_bytes when there is none), and in *input_end its end. */
static int64_t next_input(const tfm_gpu_program *p, int64_t from, int64_t *input_end) {
  int64_t next = p->persistent_bytes;
  for (int64_t i = 0; i < p->num_inputs; i++) {
    const int64_t *r = &p->inputs[3 * i];
    if (r[0] == TFM_REGION_PERSISTENT && r[1] >= from && r[1] < next) {
      next = r[1];
      *input_end = r[1] + r[2];
    }
  }
  return next;
}

/* The inputs stay as the host has them: it may have written the next
 * batch already. */
void tfm_gpu_arena_to_host(const uint8_t *persistent) {
  DeviceArena *a = find_arena(persistent);
  if (!a || !a->device_newer) return;
  const tfm_gpu_program *p = a->program;
  uint8_t *host = (uint8_t *)persistent;
  for (int64_t at = 0; at < p->persistent_bytes;) {
    int64_t input_end = at;
    int64_t gap_end = next_input(p, at, &input_end);
    if (gap_end > at &&
        tfm_cuda_download(cuda, host + at, device_at(a, TFM_REGION_PERSISTENT, at),
                          (size_t)(gap_end - at)))
      refuse();
    at = gap_end < p->persistent_bytes ? input_end : gap_end;
  }
  a->device_newer = false;
}

void tfm_gpu_arena_written(const uint8_t *persistent) {
  DeviceArena *a = find_arena(persistent);
  if (a) a->host_newer = true;
}

int tfm_gpu_device_address(tfm_gpu_place at, tfm_device_ptr *address) {
  const DeviceArena *a = find_arena(at.arena);
  if (!a) return tfm_fail("GPU: a buffer's device address asked before its graph's first run");
  *address = device_at(a, at.region, at.offset);
  return TFM_OK;
}

int tfm_gpu_link(tfm_gpu_place to, tfm_gpu_place from, int64_t bytes) {
  Link *l = malloc(sizeof *l);
  if (!l) return tfm_fail("out of memory");
  *l = (Link){.next = links, .to = to, .from = from, .bytes = bytes};
  links = l;
  return TFM_OK;
}

/* The links to or from the arena go with it. */
static void unlink_arena(const uint8_t *persistent) {
  for (Link **link = &links; *link;) {
    Link *l = *link;
    if (l->to.arena != persistent && l->from.arena != persistent) {
      link = &l->next;
      continue;
    }
    *link = l->next;
    free(l);
  }
}

void tfm_gpu_arena_forget(const uint8_t *persistent) {
  unlink_arena(persistent);
  for (DeviceArena **link = &arenas; *link; link = &(*link)->next) {
    DeviceArena *a = *link;
    if (a->host != persistent) continue;
    *link = a->next;
    tfm_cuda_free(cuda, a->base); /* an error here leaks device memory only */
    free(a);
    return;
  }
}
