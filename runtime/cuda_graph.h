/* CUDA graphs (cuda_graph.c): a fixed sequence of kernel launches and
 * device-to-device copies, built once and replayed with one cuGraphLaunch,
 * so the host's cost of a training step is one call however many kernels
 * it has. Nodes run in the order they were added (each depends on the one
 * before), as launches on one stream do. A node keeps its kernel
 * parameters' values (copied when added), so a graph replays the same
 * buffers every time: whatever changes between replays must be in device
 * memory that the kernels read. */
#ifndef TFM_CUDA_GRAPH_H
#define TFM_CUDA_GRAPH_H
#include <stddef.h>

#include "tfmrt.h"

typedef struct tfm_cuda_graph tfm_cuda_graph;

/* An empty graph; TFM_FAILED with a message when the driver has no graph
 * entry points (older than CUDA 12) or the call fails. */
int tfm_cuda_graph_create(tfm_cuda *cuda, tfm_cuda_graph **graph);
/* A kernel node after the last node: as tfm_cuda_launch's arguments. */
int tfm_cuda_graph_add_kernel(tfm_cuda_graph *graph, tfm_cuda_kernel kernel,
                              const unsigned grid[3], const unsigned block[3],
                              unsigned shared_bytes, void **params);
/* A device-to-device copy node after the last node. */
int tfm_cuda_graph_add_copy(tfm_cuda_graph *graph, tfm_device_ptr dst, tfm_device_ptr src,
                            size_t bytes);
/* Makes the graph launchable; no node can be added after. */
int tfm_cuda_graph_instantiate(tfm_cuda_graph *graph);
/* Queues one replay of every node on the default stream (asynchronous). */
int tfm_cuda_graph_launch(tfm_cuda_graph *graph);
void tfm_cuda_graph_destroy(tfm_cuda_graph *graph);

/* cuda.c's, for cuda_graph.c: a driver entry point by name (NULL when
 * missing), the context, and a result worded as every driver failure is. */
void *tfm_cuda_driver_symbol(const tfm_cuda *cuda, const char *name);
void *tfm_cuda_context(const tfm_cuda *cuda);
int tfm_cuda_check(const tfm_cuda *cuda, int result, const char *call);

#endif
