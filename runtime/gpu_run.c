/* The host side of a GPU graph: one device arena per program, kernels
 * launched in plan order through the driver (runtime/cuda.c), the dots of
 * a --gemm=cublas build called through cuBLAS (runtime/cublas.c). */
#include "gpu.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "profile.h"

#define ARENA_ALIGN 256

typedef struct GpuState {
  tfm_cuda_module module;
  tfm_cuda_kernel *kernels;
  tfm_device_ptr arena;
} GpuState;

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

static GpuState *load(const tfm_gpu_program *p) {
  if (!cuda && tfm_cuda_open(&cuda, 0)) refuse();
  GpuState *s = calloc(1, sizeof *s);
  if (s) s->kernels = calloc((size_t)p->num_launches + 1, sizeof *s->kernels);
  if (!s || !s->kernels) {
    tfm_fail("out of memory");
    refuse();
  }
  if (tfm_cuda_module_load(cuda, p->ptx, &s->module)) refuse();
  for (int64_t i = 0; i < p->num_launches; i++)
    if (!p->launches[i].gemm &&
        tfm_cuda_kernel_get(cuda, s->module, p->launches[i].entry, &s->kernels[i]))
      refuse();
  int64_t bytes = tfm_gpu_scratch_offset(p) + p->scratch_bytes;
  if (tfm_cuda_alloc(cuda, (size_t)(bytes > 0 ? bytes : 1), &s->arena)) refuse();
  return s;
}

void tfm_gpu_run(const tfm_gpu_program *p, uint8_t *persistent, uint8_t *scratch) {
  GpuState *s = *p->state;
  if (!s) *p->state = s = load(p);
  tfm_device_ptr dev_persistent = s->arena;
  tfm_device_ptr dev_scratch = s->arena + (tfm_device_ptr)tfm_gpu_scratch_offset(p);
  if (p->persistent_bytes &&
      tfm_cuda_upload(cuda, dev_persistent, persistent, (size_t)p->persistent_bytes))
    refuse();
  int64_t most = 1;
  for (int64_t i = 0; i < p->num_launches; i++)
    if (p->launches[i].num_args > most) most = p->launches[i].num_args;
  tfm_device_ptr *pointers = malloc(sizeof *pointers * (size_t)most);
  void **params = malloc(sizeof *params * (size_t)(most + 1));
  if (!pointers || !params) {
    tfm_fail("out of memory");
    refuse();
  }
  for (int64_t i = 0; i < p->num_launches; i++) {
    int64_t items;
    tfm_gpu_pack(p, i, dev_persistent, dev_scratch, pointers, &items, params);
    const tfm_gpu_launch *l = &p->launches[i];
    int64_t start_ns = tfm_profiling ? tfm_profile_now_ns() : 0;
    if (l->gemm) { /* a dot of x with itself has one input buffer */
      if (tfm_gpu_gemm(l->gemm, pointers[0], pointers[1], pointers[l->num_args > 2 ? 2 : 1]))
        refuse();
      finish_launch(l, i, start_ns);
      continue;
    }
    unsigned grid[3] = {tfm_gpu_blocks(items, p->block_threads), 1, 1};
    unsigned block[3] = {(unsigned)p->block_threads, 1, 1};
    /* Launches are asynchronous: the parameters are copied at the call. */
    if (tfm_cuda_launch(cuda, s->kernels[i], grid, block, 0, params)) refuse();
    finish_launch(l, i, start_ns);
  }
  free(pointers);
  free(params);
  if (tfm_cuda_synchronize(cuda)) refuse();
  if (p->persistent_bytes &&
      tfm_cuda_download(cuda, persistent, dev_persistent, (size_t)p->persistent_bytes))
    refuse();
  for (int64_t i = 0; i < p->num_downloads; i++)
    if (tfm_cuda_download(cuda, scratch + p->download_offset[i],
                          dev_scratch + (tfm_device_ptr)p->download_offset[i],
                          (size_t)p->download_bytes[i]))
      refuse();
}
