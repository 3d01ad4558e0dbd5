/* The CUDA driver API, loaded with dlopen at run time so that nothing links
 * against CUDA: a binary built for the GPU starts anywhere and says clearly
 * why it cannot run when there is no driver or no device. */
#define _POSIX_C_SOURCE 200809L
#include "tfmrt.h"
#include "cuda_graph.h"
#include "dl.h"

#include <dlfcn.h>
#include <stdlib.h>

#define DRIVER_LIBRARY "libcuda.so.1"
#define NO_DRIVER_MESSAGE "no CUDA driver found (" DRIVER_LIBRARY "): build with --target " \
                          "cpu or run on a machine with an NVIDIA GPU"
#define NO_DEVICE_MESSAGE "no CUDA device found: " DRIVER_LIBRARY " loaded but reports no " \
                          "device; build with --target cpu or run on a machine with an NVIDIA GPU"

/* The driver types used here, as cuda.h declares them. */
typedef int CUresult;
typedef int CUdevice;
typedef int CUjit_option;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_STUB_LIBRARY = 34, /* the toolkit's link stub, not a driver */
  CUDA_ERROR_NO_DEVICE = 100,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_STREAM_NON_BLOCKING = 1, /* no implicit wait on (or for) the default stream */
  CU_EVENT_DISABLE_TIMING = 2,
};

/* Field, exported symbol (the versioned names cuda.h's macros select), parameters. */
#define DRIVER_FUNCTIONS(X)                                                             \
  X(init, "cuInit", (unsigned flags))                                                   \
  X(device_get_count, "cuDeviceGetCount", (int *count))                                 \
  X(device_get, "cuDeviceGet", (CUdevice *device, int ordinal))                         \
  X(ctx_create, "cuCtxCreate_v2", (CUcontext *ctx, unsigned flags, CUdevice device))    \
  X(ctx_destroy, "cuCtxDestroy_v2", (CUcontext ctx))                                    \
  X(ctx_synchronize, "cuCtxSynchronize", (void))                                        \
  X(module_load_data_ex, "cuModuleLoadDataEx",                                          \
    (CUmodule *module, const void *image, unsigned count, CUjit_option *options,        \
     void **values))                                                                    \
  X(module_unload, "cuModuleUnload", (CUmodule module))                                \
  X(module_get_function, "cuModuleGetFunction",                                         \
    (CUfunction *function, CUmodule module, const char *name))                          \
  X(launch_kernel, "cuLaunchKernel",                                                    \
    (CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,            \
     unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,       \
     CUstream stream, void **params, void **extra))                                     \
  X(mem_alloc, "cuMemAlloc_v2", (CUdeviceptr *ptr, size_t bytes))                       \
  X(mem_free, "cuMemFree_v2", (CUdeviceptr ptr))                                        \
  X(memcpy_htod, "cuMemcpyHtoD_v2", (CUdeviceptr dst, const void *src, size_t bytes))   \
  X(memcpy_dtoh, "cuMemcpyDtoH_v2", (void *dst, CUdeviceptr src, size_t bytes))         \
  X(memcpy_dtod_async, "cuMemcpyDtoDAsync_v2",                                          \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                  \
  X(stream_create, "cuStreamCreate", (CUstream *stream, unsigned flags))               \
  X(stream_destroy, "cuStreamDestroy_v2", (CUstream stream))                            \
  X(event_create, "cuEventCreate", (CUevent *event, unsigned flags))                    \
  X(event_destroy, "cuEventDestroy_v2", (CUevent event))                                \
  X(event_record, "cuEventRecord", (CUevent event, CUstream stream))                    \
  X(stream_wait_event, "cuStreamWaitEvent", (CUstream stream, CUevent event, unsigned flags)) \
  X(get_error_string, "cuGetErrorString", (CUresult error, const char **text))

struct tfm_cuda {
  void *library;
  CUcontext context;
  CUevent default_done; /* tfm_cuda_stream_wait_default's, made at its first call */
#define DECLARE_FIELD(field, symbol, params) CUresult (*field) params;
  DRIVER_FUNCTIONS(DECLARE_FIELD)
#undef DECLARE_FIELD
};

static int check(const tfm_cuda *cuda, CUresult result, const char *call) {
  return tfm_cuda_check(cuda, result, call);
}

int tfm_cuda_check(const tfm_cuda *cuda, int result, const char *call) {
  if (result == CUDA_SUCCESS) return TFM_OK;
  const char *text = NULL;
  if (cuda->get_error_string(result, &text) != CUDA_SUCCESS || !text) text = "unknown error";
  return tfm_fail("CUDA: %s failed: %s (error %d)", call, text, result);
}

static int resolve_symbols(tfm_cuda *cuda) {
#define RESOLVE(field, name, params)                                                     \
  if (tfm_dl_symbol(cuda->library, name, &cuda->field))                                 \
    return tfm_fail("CUDA: the driver " DRIVER_LIBRARY " has no %s (driver too old?)", name);
  DRIVER_FUNCTIONS(RESOLVE)
#undef RESOLVE
  return TFM_OK;
}

/* rank >= 0: the device of the rank-th process on this machine (see
 * tfm_cuda_open_for_rank); else `ordinal`. */
static int open_device(tfm_cuda *cuda, int ordinal, int rank) {
  if (resolve_symbols(cuda)) return TFM_FAILED;
  CUresult result = cuda->init(0);
  if (result == CUDA_ERROR_STUB_LIBRARY) return tfm_fail(NO_DRIVER_MESSAGE);
  if (result == CUDA_ERROR_NO_DEVICE) return tfm_fail(NO_DEVICE_MESSAGE);
  if (check(cuda, result, "cuInit")) return TFM_FAILED;
  int count = 0;
  if (check(cuda, cuda->device_get_count(&count), "cuDeviceGetCount")) return TFM_FAILED;
  if (count == 0) return tfm_fail(NO_DEVICE_MESSAGE);
  if (rank >= 0) {
    if (count > 1 && rank >= count)
      return tfm_fail("CUDA: this process is rank %d on its machine but the driver shows %d "
                      "devices: start at most %d ranks per machine (one per GPU)", rank, count,
                      count);
    ordinal = count == 1 ? 0 : rank;
  }
  if (ordinal < 0 || ordinal >= count)
    return tfm_fail("CUDA: device %d requested but the driver reports %d (0 to %d)", ordinal,
                    count, count - 1);
  CUdevice device;
  if (check(cuda, cuda->device_get(&device, ordinal), "cuDeviceGet")) return TFM_FAILED;
  return check(cuda, cuda->ctx_create(&cuda->context, 0, device), "cuCtxCreate");
}

static int open_driver(tfm_cuda **out, int ordinal, int rank) {
  void *library = dlopen(DRIVER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!library) return tfm_fail(NO_DRIVER_MESSAGE);
  tfm_cuda *cuda = calloc(1, sizeof *cuda);
  if (!cuda) return tfm_fail("CUDA: out of memory");
  cuda->library = library;
  if (open_device(cuda, ordinal, rank)) {
    free(cuda);
    return TFM_FAILED;
  }
  *out = cuda;
  return TFM_OK;
}

int tfm_cuda_open(tfm_cuda **cuda, int ordinal) { return open_driver(cuda, ordinal, -1); }

int tfm_cuda_open_for_rank(tfm_cuda **cuda, int local_rank) {
  return open_driver(cuda, 0, local_rank);
}

/* The library stays loaded: the driver's own threads may still run in it. */
void tfm_cuda_close(tfm_cuda *cuda) {
  if (!cuda) return;
  if (cuda->default_done) cuda->event_destroy(cuda->default_done);
  if (cuda->context) cuda->ctx_destroy(cuda->context);
  free(cuda);
}

int tfm_cuda_module_load(tfm_cuda *cuda, const char *ptx, tfm_cuda_module *module) {
  char log[4096] = "";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, (void *)(uintptr_t)sizeof log};
  CUmodule loaded;
  CUresult result = cuda->module_load_data_ex(&loaded, ptx, 2, options, values);
  if (result != CUDA_SUCCESS) {
    check(cuda, result, "cuModuleLoadDataEx");
    if (log[0]) {
      char first[512];
      snprintf(first, sizeof first, "%s", tfm_error());
      return tfm_fail("%s: %s", first, log);
    }
    return TFM_FAILED;
  }
  *module = loaded;
  return TFM_OK;
}

int tfm_cuda_module_unload(tfm_cuda *cuda, tfm_cuda_module module) {
  return check(cuda, cuda->module_unload(module), "cuModuleUnload");
}

int tfm_cuda_kernel_get(tfm_cuda *cuda, tfm_cuda_module module, const char *name,
                        tfm_cuda_kernel *kernel) {
  CUfunction function;
  CUresult result = cuda->module_get_function(&function, module, name);
  if (result != CUDA_SUCCESS) {
    char call[160];
    snprintf(call, sizeof call, "cuModuleGetFunction(\"%s\")", name);
    return check(cuda, result, call);
  }
  *kernel = function;
  return TFM_OK;
}

int tfm_cuda_launch(tfm_cuda *cuda, tfm_cuda_kernel kernel, const unsigned grid[3],
                    const unsigned block[3], unsigned shared_bytes, void **params) {
  return check(cuda, cuda->launch_kernel(kernel, grid[0], grid[1], grid[2], block[0], block[1],
                                         block[2], shared_bytes, NULL, params, NULL),
               "cuLaunchKernel");
}

int tfm_cuda_alloc(tfm_cuda *cuda, size_t bytes, tfm_device_ptr *ptr) {
  CUdeviceptr allocated;
  char call[64];
  snprintf(call, sizeof call, "cuMemAlloc(%zu bytes)", bytes);
  if (check(cuda, cuda->mem_alloc(&allocated, bytes), call)) return TFM_FAILED;
  *ptr = allocated;
  return TFM_OK;
}

int tfm_cuda_free(tfm_cuda *cuda, tfm_device_ptr ptr) {
  return check(cuda, cuda->mem_free(ptr), "cuMemFree");
}

int tfm_cuda_upload(tfm_cuda *cuda, tfm_device_ptr dst, const void *src, size_t bytes) {
  return check(cuda, cuda->memcpy_htod(dst, src, bytes), "cuMemcpyHtoD");
}

int tfm_cuda_download(tfm_cuda *cuda, void *dst, tfm_device_ptr src, size_t bytes) {
  return check(cuda, cuda->memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH");
}

int tfm_cuda_copy(tfm_cuda *cuda, tfm_device_ptr dst, tfm_device_ptr src, size_t bytes) {
  return check(cuda, cuda->memcpy_dtod_async(dst, src, bytes, NULL), "cuMemcpyDtoDAsync");
}

int tfm_cuda_synchronize(tfm_cuda *cuda) {
  return check(cuda, cuda->ctx_synchronize(), "cuCtxSynchronize");
}

void *tfm_cuda_driver_symbol(const tfm_cuda *cuda, const char *name) {
  return dlsym(cuda->library, name);
}

void *tfm_cuda_context(const tfm_cuda *cuda) { return cuda->context; }
int tfm_cuda_stream_create(tfm_cuda *cuda, void **stream) {
  CUstream created;
  if (check(cuda, cuda->stream_create(&created, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return TFM_FAILED;
  *stream = created;
  return TFM_OK;
}

int tfm_cuda_stream_destroy(tfm_cuda *cuda, void *stream) {
  return check(cuda, cuda->stream_destroy(stream), "cuStreamDestroy");
}

/* An event recorded on the default stream, waited for by `stream`: the
 * wait takes the record made just before it, so one event serves every call. */
int tfm_cuda_stream_wait_default(tfm_cuda *cuda, void *stream) {
  if (!cuda->default_done &&
      check(cuda, cuda->event_create(&cuda->default_done, CU_EVENT_DISABLE_TIMING),
            "cuEventCreate"))
    return TFM_FAILED;
  if (check(cuda, cuda->event_record(cuda->default_done, NULL), "cuEventRecord")) return TFM_FAILED;
  return check(cuda, cuda->stream_wait_event(stream, cuda->default_done, 0), "cuStreamWaitEvent");
}
