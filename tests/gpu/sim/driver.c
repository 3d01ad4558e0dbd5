/* The CUDA driver API calls tfm's runtime makes (runtime/cuda.c), over the
 * PTX simulator: built as a libcuda.so.1 that a test puts first on
 * LD_LIBRARY_PATH, so that the codegen suites under TFM_CG_TARGET=cuda and
 * binaries built with --target cuda run their GPU path, unchanged, on the
 * CPU. Device memory is host memory (a device pointer is its address),
 * filled with 0xff bytes when allocated; launches run to completion before
 * they return. A simulator error prints its message on stderr and fails
 * the launch (CUDA_ERROR_LAUNCH_FAILED), and cuGetErrorString returns it.
 * CUDA graphs are recorded node by node (kernels and device copies, each
 * after the one before: the chains tfm builds) and replayed in that order.
 * TFM_PTX_SIM_COUNTS=FILE writes, at exit, how many kernels were launched
 * directly and how many graph launches ran how many kernels, so a test can
 * count the host's launches independently of tfm's own --profile. */
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_sim.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_LAUNCH_FAILED = 719,
};

static char last_error[1024];

#define EXPORT __attribute__((visibility("default")))

static struct {
  unsigned long long kernel_launches, graph_launches, graph_kernels;
} counts;

static void write_counts(void) {
  FILE *out = fopen(getenv("TFM_PTX_SIM_COUNTS"), "w");
  if (!out)
    return;
  fprintf(out, "cuLaunchKernel %llu\ncuGraphLaunch %llu\ngraph kernels %llu\n",
          counts.kernel_launches, counts.graph_launches, counts.graph_kernels);
  fclose(out);
}

EXPORT CUresult cuInit(unsigned flags) {
  static bool counting;
  if (!counting && getenv("TFM_PTX_SIM_COUNTS"))
    counting = atexit(write_counts) == 0;
  return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
  *count = 1;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(int *device, int ordinal) {
  if (ordinal != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}

static int context_token;

EXPORT CUresult cuCtxCreate_v2(void **context, unsigned flags, int device) {
  (void)flags, (void)device;
  *context = &context_token;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxDestroy_v2(void *context) {
  (void)context;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }

/* The JIT's error log option, as cuda.h numbers it. */
enum { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

EXPORT CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned count,
                                   int *options, void **values) {
  /* a file: each module loaded is written there (the last one stays) */
  const char *keep = getenv("TFM_PTX_SIM_KEEP");
  FILE *out = keep ? fopen(keep, "w") : NULL;
  if (out) {
    fputs(image, out);
    fclose(out);
  }
  PtxModule *parsed = ptx_sim_parse(image, last_error, sizeof last_error);
  if (!parsed) {
    char *log = NULL;
    size_t log_size = 0;
    for (unsigned i = 0; i < count; i++) {
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
        log = values[i];
      else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        log_size = (size_t)(uintptr_t)values[i];
    }
    if (log && log_size)
      snprintf(log, log_size, "ptx sim: %s", last_error);
    fprintf(stderr, "ptx sim: %s\n", last_error);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *module = parsed;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(void *module) {
  ptx_sim_free(module);
  return CUDA_SUCCESS;
}

/* A function is its entry, which knows its module. */
EXPORT CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  const PtxEntry *entry = ptx_sim_entry(module, name);
  if (!entry)
    return CUDA_ERROR_NOT_FOUND;
  *function = (void *)entry;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                               unsigned block_x, unsigned block_y, unsigned block_z,
                               unsigned shared_bytes, void *stream, void **params, void **extra) {
  (void)stream;
  if (grid_y != 1 || grid_z != 1 || block_y != 1 || block_z != 1 || shared_bytes || extra) {
    snprintf(last_error, sizeof last_error,
             "ptx sim: only 1-D launches without dynamic shared memory are simulated");
    return CUDA_ERROR_INVALID_VALUE;
  }
  counts.kernel_launches++;
  if (ptx_sim_launch(function, grid_x, block_x, params, last_error, sizeof last_error)) {
    fprintf(stderr, "%s\n", last_error);
    return CUDA_ERROR_LAUNCH_FAILED;
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 256, bytes ? bytes : 1))
    return CUDA_ERROR_OUT_OF_MEMORY;
  memset(p, 0xff, bytes);
  ptx_sim_add_region((uintptr_t)p, bytes);
  *ptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  ptx_sim_remove_region((uintptr_t)ptr);
  free((void *)(uintptr_t)ptr);
  return CUDA_SUCCESS;
}

/* Whether [ptr, ptr + bytes) is device memory, saying which copy when not. */
static bool device_range(const char *call, CUdeviceptr ptr, size_t bytes) {
  if (bytes == 0 || ptx_sim_inside((uintptr_t)ptr, bytes))
    return true;
  snprintf(last_error, sizeof last_error, "ptx sim: %s of %zu bytes at %#llx: outside every "
           "allocation", call, bytes, ptr);
  fprintf(stderr, "%s\n", last_error);
  return false;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
  if (!device_range("cuMemcpyHtoD", dst, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy((void *)(uintptr_t)dst, src, bytes);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
  if (!device_range("cuMemcpyDtoH", src, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy(dst, (const void *)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void *stream) {
  (void)stream;
  if (!device_range("cuMemcpyDtoD (destination)", dst, bytes) ||
      !device_range("cuMemcpyDtoD (source)", src, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}

/* --- CUDA graphs ---------------------------------------------------------- */

/* A node: a kernel with its parameters' values (copied when added, as the
 * driver does), or a device-to-device copy. */
typedef struct SimNode {
  const PtxEntry *entry; /* NULL: a copy */
  unsigned grid, block;
  uint8_t *values;       /* the parameters, one after another */
  void **params;         /* into values */
  CUdeviceptr dst, src;
  size_t bytes;
} SimNode;

/* A graph and an instantiated graph alike: nodes in order. */
typedef struct SimGraph {
  SimNode *nodes;
  size_t count, cap;
} SimGraph;

/* cuda.h's CUDA_KERNEL_NODE_PARAMS_v2 and CUDA_MEMCPY3D */
typedef struct {
  void *func;
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void **params, **extra;
  void *kern, *ctx;
} KernelNodeParams;
enum { CU_MEMORYTYPE_DEVICE = 2 };
typedef struct {
  size_t src_x_bytes, src_y, src_z, src_lod;
  int src_memory_type;
  const void *src_host;
  CUdeviceptr src_device;
  void *src_array, *reserved0;
  size_t src_pitch, src_height;
  size_t dst_x_bytes, dst_y, dst_z, dst_lod;
  int dst_memory_type;
  void *dst_host;
  CUdeviceptr dst_device;
  void *dst_array, *reserved1;
  size_t dst_pitch, dst_height;
  size_t width_bytes, height, depth;
} Memcpy3D;

static CUresult refuse(const char *message) {
  snprintf(last_error, sizeof last_error, "ptx sim: %s", message);
  fprintf(stderr, "%s\n", last_error);
  return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGraphCreate(SimGraph **graph, unsigned flags) {
  if (flags)
    return refuse("cuGraphCreate: flags must be 0");
  *graph = calloc(1, sizeof **graph);
  return *graph ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Appends a node that depends on exactly the graph's last node (none for
 * the first); node handles are 1-based indices. */
static CUresult append(SimGraph *g, const size_t *dependencies, size_t count, SimNode node,
                       size_t *handle) {
  if (count != (g->count ? 1u : 0u) || (count && dependencies[0] != g->count))
    return refuse("graph nodes must form a chain, each after the last one added");
  if (g->count == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 64;
    SimNode *nodes = realloc(g->nodes, cap * sizeof *nodes);
    if (!nodes)
      return CUDA_ERROR_OUT_OF_MEMORY;
    g->nodes = nodes, g->cap = cap;
  }
  g->nodes[g->count++] = node;
  *handle = g->count;
  return CUDA_SUCCESS;
}

/* A kernel node's own copy of its parameter values. */
static bool copy_params(SimNode *n, void *const *params) {
  int count = ptx_sim_num_params(n->entry);
  size_t total = 0;
  for (int i = 0; i < count; i++)
    total += ptx_sim_param_bytes(n->entry, i);
  n->values = malloc(total ? total : 1);
  n->params = malloc(sizeof *n->params * (size_t)(count ? count : 1));
  if (!n->values || !n->params)
    return false;
  for (int i = 0, at = 0; i < count; at += (int)ptx_sim_param_bytes(n->entry, i), i++) {
    memcpy(n->values + at, params[i], ptx_sim_param_bytes(n->entry, i));
    n->params[i] = n->values + at;
  }
  return true;
}

EXPORT CUresult cuGraphAddKernelNode_v2(size_t *node, SimGraph *graph, const size_t *dependencies,
                                        size_t count, const KernelNodeParams *p) {
  if (!p->func || p->grid_y != 1 || p->grid_z != 1 || p->block_y != 1 || p->block_z != 1 ||
      p->shared_bytes || p->extra)
    return refuse("cuGraphAddKernelNode: only 1-D kernels without dynamic shared memory are "
                  "simulated");
  SimNode n = {.entry = p->func, .grid = p->grid_x, .block = p->block_x};
  if (!copy_params(&n, p->params))
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = append(graph, dependencies, count, n, node);
  if (r) {
    free(n.values);
    free(n.params);
  }
  return r;
}

EXPORT CUresult cuGraphAddMemcpyNode(size_t *node, SimGraph *graph, const size_t *dependencies,
                                     size_t count, const Memcpy3D *c, void *context) {
  if (context != &context_token)
    return refuse("cuGraphAddMemcpyNode: not the context cuCtxCreate made");
  if (c->src_memory_type != CU_MEMORYTYPE_DEVICE || c->dst_memory_type != CU_MEMORYTYPE_DEVICE ||
      c->height != 1 || c->depth != 1 || c->src_x_bytes || c->src_y || c->src_z ||
      c->dst_x_bytes || c->dst_y || c->dst_z || c->src_pitch < c->width_bytes ||
      c->dst_pitch < c->width_bytes)
    return refuse("cuGraphAddMemcpyNode: only 1-D device-to-device copies are simulated");
  SimNode n = {.dst = c->dst_device, .src = c->src_device, .bytes = c->width_bytes};
  return append(graph, dependencies, count, n, node);
}

static void free_nodes(SimGraph *g) {
  for (size_t i = 0; i < g->count; i++) {
    free(g->nodes[i].values);
    free(g->nodes[i].params);
  }
  free(g->nodes);
  free(g);
}

/* An instantiated graph is a snapshot: later changes to the graph, or its
 * destruction, leave it as it was. */
EXPORT CUresult cuGraphInstantiateWithFlags(SimGraph **exec, SimGraph *graph,
                                            unsigned long long flags) {
  if (flags)
    return refuse("cuGraphInstantiateWithFlags: flags must be 0");
  SimGraph *e = calloc(1, sizeof *e);
  if (!e || !(e->nodes = malloc((graph->count ? graph->count : 1) * sizeof *e->nodes))) {
    free(e);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  e->cap = graph->count ? graph->count : 1;
  for (; e->count < graph->count; e->count++) {
    SimNode n = graph->nodes[e->count];
    n.values = NULL, n.params = NULL;
    if (n.entry && !copy_params(&n, graph->nodes[e->count].params)) {
      free_nodes(e);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->nodes[e->count] = n;
  }
  *exec = e;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphLaunch(SimGraph *exec, void *stream) {
  (void)stream;
  counts.graph_launches++;
  for (size_t i = 0; i < exec->count; i++) {
    const SimNode *n = &exec->nodes[i];
    if (!n->entry) {
      if (!device_range("graph copy node (destination)", n->dst, n->bytes) ||
          !device_range("graph copy node (source)", n->src, n->bytes))
        return CUDA_ERROR_INVALID_VALUE;
      memmove((void *)(uintptr_t)n->dst, (const void *)(uintptr_t)n->src, n->bytes);
      continue;
    }
    counts.graph_kernels++;
    if (ptx_sim_launch(n->entry, n->grid, n->block, n->params, last_error, sizeof last_error)) {
      fprintf(stderr, "%s (graph node %zu)\n", last_error, i);
      return CUDA_ERROR_LAUNCH_FAILED;
    }
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecDestroy(SimGraph *exec) {
  free_nodes(exec);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(SimGraph *graph) {
  free_nodes(graph);
  return CUDA_SUCCESS;
}

/* Streams and events: launches and copies run to completion when called,
 * so every order the runtime asks for holds already. */
static int stream_token, event_token;

EXPORT CUresult cuStreamCreate(void **stream, unsigned flags) {
  (void)flags;
  *stream = &stream_token;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(void *stream) {
  (void)stream;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(void **event, unsigned flags) {
  (void)flags;
  *event = &event_token;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(void *event) {
  (void)event;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(void *event, void *stream) {
  (void)event, (void)stream;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
  (void)stream, (void)event;
  return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **text) {
  *text = error == CUDA_ERROR_LAUNCH_FAILED || error == CUDA_ERROR_INVALID_IMAGE ||
                  error == CUDA_ERROR_INVALID_VALUE
              ? last_error
              : error == CUDA_ERROR_NOT_FOUND ? "named symbol not found"
              : error == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory"
                                                 : "unknown error";
  return CUDA_SUCCESS;
}
