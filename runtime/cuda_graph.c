/* CUDA graphs through the driver API (cuda_graph.h), built node by node
 * (cuGraphAddKernelNode) rather than by stream capture: tfm's launches go
 * to the legacy default stream, which cannot be captured, and a graph made
 * from the launch plan needs no second stream. The entry points are looked
 * up when the first graph is made, so only a run that asks for a graph
 * needs a driver that has them. Types and values as cuda.h (CUDA 12)
 * declares them. */
#include "cuda_graph.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;

/* CUDA_KERNEL_NODE_PARAMS_v2 */
typedef struct {
  void *func;
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void **params, **extra;
  void *kern, *ctx; /* a CUkernel and its context, for func == NULL only */
} KernelNodeParams;

enum { CU_MEMORYTYPE_DEVICE = 2 };

/* CUDA_MEMCPY3D: a 1-D copy is a width, one row, one slice. */
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

typedef struct {
  CUresult (*create)(CUgraph *graph, unsigned flags);
  CUresult (*add_kernel)(CUgraphNode *node, CUgraph graph, const CUgraphNode *dependencies,
                         size_t count, const KernelNodeParams *params);
  CUresult (*add_memcpy)(CUgraphNode *node, CUgraph graph, const CUgraphNode *dependencies,
                         size_t count, const Memcpy3D *copy, void *context);
  CUresult (*instantiate)(CUgraphExec *exec, CUgraph graph, unsigned long long flags);
  CUresult (*launch)(CUgraphExec exec, void *stream);
  CUresult (*exec_destroy)(CUgraphExec exec);
  CUresult (*destroy)(CUgraph graph);
} GraphApi;

struct tfm_cuda_graph {
  tfm_cuda *cuda;
  const GraphApi *api;
  CUgraph graph;
  CUgraphNode last; /* NULL before the first node */
  CUgraphExec exec; /* NULL until instantiated */
};

static GraphApi api;
static int api_found;

static int find_api(tfm_cuda *cuda) {
  if (api_found) return TFM_OK;
  static const char *const names[] = {"cuGraphCreate", "cuGraphAddKernelNode_v2",
                                      "cuGraphAddMemcpyNode", "cuGraphInstantiateWithFlags",
                                      "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy"};
  void *found[sizeof names / sizeof names[0]];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!(found[i] = tfm_cuda_driver_symbol(cuda, names[i])))
      return tfm_fail("CUDA: the driver has no %s (older than CUDA 12?): train with "
                      "--no-cuda-graph", names[i]);
  /* ISO C has no cast from void * to a function pointer: copy the bits */
  void *fields[] = {&api.create, &api.add_kernel, &api.add_memcpy, &api.instantiate,
                    &api.launch, &api.exec_destroy, &api.destroy};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    memcpy(fields[i], &found[i], sizeof found[i]);
  api_found = 1;
  return TFM_OK;
}

int tfm_cuda_graph_create(tfm_cuda *cuda, tfm_cuda_graph **out) {
  if (find_api(cuda)) return TFM_FAILED;
  tfm_cuda_graph *g = calloc(1, sizeof *g);
  if (!g) return tfm_fail("CUDA: out of memory");
  g->cuda = cuda;
  g->api = &api;
  if (tfm_cuda_check(cuda, api.create(&g->graph, 0), "cuGraphCreate")) {
    free(g);
    return TFM_FAILED;
  }
  *out = g;
  return TFM_OK;
}

/* The node just added (*node, once `result` is known) follows the last one. */
static int chain(tfm_cuda_graph *g, CUresult result, const CUgraphNode *node, const char *call) {
  if (tfm_cuda_check(g->cuda, result, call)) return TFM_FAILED;
  g->last = *node;
  return TFM_OK;
}

int tfm_cuda_graph_add_kernel(tfm_cuda_graph *g, tfm_cuda_kernel kernel, const unsigned grid[3],
                              const unsigned block[3], unsigned shared_bytes, void **params) {
  KernelNodeParams p = {.func = kernel, .grid_x = grid[0], .grid_y = grid[1], .grid_z = grid[2],
                        .block_x = block[0], .block_y = block[1], .block_z = block[2],
                        .shared_bytes = shared_bytes, .params = params};
  CUgraphNode node;
  size_t after = g->last ? 1 : 0;
  return chain(g, g->api->add_kernel(&node, g->graph, after ? &g->last : NULL, after, &p), &node,
               "cuGraphAddKernelNode");
}

int tfm_cuda_graph_add_copy(tfm_cuda_graph *g, tfm_device_ptr dst, tfm_device_ptr src,
                            size_t bytes) {
  Memcpy3D c = {.src_memory_type = CU_MEMORYTYPE_DEVICE, .src_device = src,
                .src_pitch = bytes, .src_height = 1, .dst_memory_type = CU_MEMORYTYPE_DEVICE,
                .dst_device = dst, .dst_pitch = bytes, .dst_height = 1, .width_bytes = bytes,
                .height = 1, .depth = 1};
  CUgraphNode node;
  size_t after = g->last ? 1 : 0;
  return chain(g, g->api->add_memcpy(&node, g->graph, after ? &g->last : NULL, after, &c,
                                     tfm_cuda_context(g->cuda)),
               &node, "cuGraphAddMemcpyNode");
}

int tfm_cuda_graph_instantiate(tfm_cuda_graph *g) {
  return tfm_cuda_check(g->cuda, g->api->instantiate(&g->exec, g->graph, 0),
                        "cuGraphInstantiateWithFlags");
}

int tfm_cuda_graph_launch(tfm_cuda_graph *g) {
  return tfm_cuda_check(g->cuda, g->api->launch(g->exec, NULL), "cuGraphLaunch");
}

/* Errors here would leak the graph's driver memory only. */
void tfm_cuda_graph_destroy(tfm_cuda_graph *g) {
  if (!g) return;
  if (g->exec) g->api->exec_destroy(g->exec);
  g->api->destroy(g->graph);
  free(g);
}
