/* The CUDA driver API calls tfm's runtime makes (runtime/cuda.c), over the
 * PTX simulator: built as a libcuda.so.1 that a test puts first on
 * LD_LIBRARY_PATH, so that the codegen suites under TFM_CG_TARGET=cuda and
 * binaries built with --target cuda run their GPU path, unchanged, on the
 * CPU. Device memory is host memory (a device pointer is its address),
 * filled with 0xff bytes when allocated; launches run to completion before
 * they return. A simulator error prints its message on stderr and fails
 * the launch (CUDA_ERROR_LAUNCH_FAILED), and cuGetErrorString returns it. */
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

EXPORT CUresult cuInit(unsigned flags) { return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }

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
