/* cuBLAS for the dots of a --gemm=cublas build, loaded with dlopen at the
 * first call so that nothing links against it: a binary that never runs a
 * dot on the GPU needs no cuBLAS, and one that does says clearly that it
 * is missing. The few types and prototypes used are declared here, with
 * the values cublas_api.h documents, instead of including the toolkit's
 * headers (which need not be installed where tfm is built). */
#define _POSIX_C_SOURCE 200809L
#include "dl.h"
#include "gpu.h"

#include <dlfcn.h>

#define NO_CUBLAS_MESSAGE "cuBLAS not found (libcublas.so): build without --gemm=cublas or " \
                          "install the CUDA toolkit's cuBLAS"

typedef int cublasStatus_t; /* CUBLAS_STATUS_SUCCESS = 0 */
typedef struct cublasContext *cublasHandle_t;
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
/* CUBLAS_DEFAULT_MATH: FP32 products and sums, no TF32 tensor cores
 * (CUBLAS_TF32_TENSOR_OP_MATH = 3), so a cuBLAS build trains to the same
 * losses as the generated kernels within FP32 rounding. */
enum { CUBLAS_DEFAULT_MATH = 0 };

typedef struct Cublas {
  cublasHandle_t handle;
  cublasStatus_t (*create)(cublasHandle_t *handle);
  cublasStatus_t (*set_math_mode)(cublasHandle_t handle, int mode);
  cublasStatus_t (*sgemm_strided_batched)(cublasHandle_t handle, int transa, int transb, int m,
                                          int n, int k, const float *alpha, const float *a,
                                          int lda, long long stride_a, const float *b, int ldb,
                                          long long stride_b, const float *beta, float *c,
                                          int ldc, long long stride_c, int batch);
} Cublas;

static Cublas cublas;

static int at_least_1(int v) { return v > 1 ? v : 1; }

tfm_gpu_colmajor tfm_gpu_gemm_colmajor(const int64_t *g) {
  int ta = (int)g[0], tb = (int)g[1];
  int m = (int)g[2], n = (int)g[3], k = (int)g[4];
  /* Row-major A is (ta ? k x m : m x k), B (tb ? n x k : k x n): their row
   * lengths are the column-major leading dimensions. cuBLAS refuses a
   * leading dimension under 1 even for an empty matrix, hence the floors. */
  return (tfm_gpu_colmajor){.trans_a = tb, .trans_b = ta, .m = n, .n = m, .k = k,
                            .lda = at_least_1(tb ? k : n), .ldb = at_least_1(ta ? m : k),
                            .ldc = at_least_1(n), .batch = (int)g[5],
                            .stride_a = g[7], .stride_b = g[6], .stride_c = g[8]};
}

static int resolve(void *library, const char *name, void *field) {
  if (tfm_dl_symbol(library, name, field))
    return tfm_fail("cuBLAS: the library has no %s (too old?)", name);
  return TFM_OK;
}

static int open_cublas(void) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
                                      "libcublas.so"};
  void *library = NULL;
  for (size_t i = 0; !library && i < sizeof names / sizeof names[0]; i++)
    library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!library) return tfm_fail(NO_CUBLAS_MESSAGE);
  if (resolve(library, "cublasCreate_v2", &cublas.create) ||
      resolve(library, "cublasSetMathMode", &cublas.set_math_mode) ||
      resolve(library, "cublasSgemmStridedBatched", &cublas.sgemm_strided_batched))
    return TFM_FAILED;
  /* The handle uses the context current on this thread (tfm_cuda_open's)
   * and the default stream, the one the PTX launches go to, so dots and
   * kernels run in plan order. */
  cublasStatus_t status = cublas.create(&cublas.handle);
  if (status) return tfm_fail("cuBLAS: cublasCreate failed (status %d)", status);
  status = cublas.set_math_mode(cublas.handle, CUBLAS_DEFAULT_MATH);
  if (status) return tfm_fail("cuBLAS: cublasSetMathMode failed (status %d)", status);
  return TFM_OK;
}

int tfm_gpu_gemm(const int64_t *gemm, tfm_device_ptr c, tfm_device_ptr a, tfm_device_ptr b) {
  if (!cublas.handle && open_cublas()) return TFM_FAILED;
  tfm_gpu_colmajor g = tfm_gpu_gemm_colmajor(gemm);
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t status = cublas.sgemm_strided_batched(
      cublas.handle, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.m, g.n, g.k, &one, (const float *)(uintptr_t)b, g.lda, g.stride_a,
      (const float *)(uintptr_t)a, g.ldb, g.stride_b, &zero, (float *)(uintptr_t)c, g.ldc,
      g.stride_c, g.batch);
  if (status)
    return tfm_fail("cuBLAS: cublasSgemmStridedBatched(%d x %d x %d, batch %d) failed (status %d)",
                    g.m, g.n, g.k, g.batch, status);
  return TFM_OK;
}
