/* runtime/cuda_graph.c on the PTX simulator (its libcuda.so.1 first on
 * LD_LIBRARY_PATH): a graph of a copy and two kernels, replayed twice,
 * reads the device memory of each replay (what the host uploaded between
 * them), keeps the kernel parameters it was given when the nodes were
 * added (the caller's variables change after), and runs its nodes in the
 * order they were added. */
#include <stdio.h>
#include <string.h>

#include "cuda_graph.h"

/* p[tid] = p[tid] * 2 + 1: the order of two launches on one buffer shows. */
static const char TWICE_PLUS_ONE[] =
    ".version 7.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .entry twice_plus_one(\n"
    "\t.param .u64 p\n"
    ")\n"
    "{\n"
    "\t.reg .b32 %r<3>;\n"
    "\t.reg .b64 %rd<4>;\n"
    "\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd1, %rd1;\n"
    "\tmov.u32 %r1, %tid.x;\n"
    "\tmul.wide.u32 %rd2, %r1, 4;\n"
    "\tadd.s64 %rd3, %rd1, %rd2;\n"
    "\tld.global.u32 %r2, [%rd3];\n"
    "\tmad.lo.s32 %r2, %r2, 2, 1;\n"
    "\tst.global.u32 [%rd3], %r2;\n"
    "\tret;\n"
    "}\n";

#define N 32

static int fail(const char *what) {
  printf("FAIL: %s: %s\n", what, tfm_error());
  return 1;
}

int main(void) {
  tfm_cuda *cuda;
  tfm_cuda_module module;
  tfm_cuda_kernel kernel;
  tfm_device_ptr src, dst, other;
  if (tfm_cuda_open(&cuda, 0)) {
    printf("skipped: no CUDA driver (run with the PTX simulator's libcuda.so.1): %s\n",
           tfm_error());
    return 77;
  }
  if (tfm_cuda_module_load(cuda, TWICE_PLUS_ONE, &module) ||
      tfm_cuda_kernel_get(cuda, module, "twice_plus_one", &kernel) ||
      tfm_cuda_alloc(cuda, N * 4, &src) || tfm_cuda_alloc(cuda, N * 4, &dst) ||
      tfm_cuda_alloc(cuda, N * 4, &other))
    return fail("setup");
  tfm_cuda_graph *graph;
  const unsigned grid[3] = {1, 1, 1}, block[3] = {N, 1, 1};
  tfm_device_ptr arg = dst;
  void *params[] = {&arg};
  if (tfm_cuda_graph_create(cuda, &graph) || tfm_cuda_graph_add_copy(graph, dst, src, N * 4) ||
      tfm_cuda_graph_add_kernel(graph, kernel, grid, block, 0, params))
    return fail("building the graph");
  arg = other; /* the node keeps dst */
  params[0] = &arg;
  arg = dst;
  if (tfm_cuda_graph_add_kernel(graph, kernel, grid, block, 0, params) ||
      tfm_cuda_graph_instantiate(graph))
    return fail("building the graph");
  arg = other;
  int failures = 0;
  for (int replay = 0; replay < 2; replay++) {
    int in[N], out[N], untouched[N];
    for (int i = 0; i < N; i++) in[i] = 10 * replay + i, untouched[i] = -7;
    if (tfm_cuda_upload(cuda, src, in, sizeof in) ||
        tfm_cuda_upload(cuda, other, untouched, sizeof untouched) ||
        tfm_cuda_graph_launch(graph) || tfm_cuda_synchronize(cuda) ||
        tfm_cuda_download(cuda, out, dst, sizeof out) ||
        tfm_cuda_download(cuda, untouched, other, sizeof untouched))
      return fail("replaying the graph");
    for (int i = 0; i < N; i++) {
      int want = (in[i] * 2 + 1) * 2 + 1; /* copy, then the kernels in order */
      if (out[i] != want || untouched[i] != -7) {
        printf("FAIL: replay %d, element %d: %d (want %d), other buffer %d (want -7)\n", replay,
               i, out[i], want, untouched[i]);
        failures++;
        break;
      }
    }
  }
  tfm_cuda_graph_destroy(graph);
  if (tfm_cuda_free(cuda, src) || tfm_cuda_free(cuda, dst) || tfm_cuda_free(cuda, other) ||
      tfm_cuda_module_unload(cuda, module))
    return fail("cleaning up");
  tfm_cuda_close(cuda);
  if (!failures)
    printf("ok: a copy and two kernels replayed twice, in order, on each replay's data\n");
  return failures != 0;
}
