/* The three cuBLAS calls tfm's runtime makes (runtime/cublas.c), for
 * --gemm=cublas on the PTX simulator. They live in the simulator's library,
 * which the build also names libcublas.so.13: the dynamic loader maps a
 * file once whatever name opens it, so cuBLAS and the driver share the
 * simulator's device memory and its allocations. The product is computed
 * on the host, column-major as cuBLAS defines it, each element summed in
 * double over k and rounded once; every operand's extent is checked
 * against the allocations first. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ptx_sim.h"

#define EXPORT __attribute__((visibility("default")))

enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
};
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };

static int handle_token;

EXPORT int cublasCreate_v2(void **handle) {
  *handle = &handle_token;
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT int cublasSetMathMode(void *handle, int mode) {
  return handle == &handle_token ? (mode == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE)
                                 : CUBLAS_STATUS_NOT_INITIALIZED;
}

/* Whether the `rows` x `cols` column-major matrices of a batch, leading
 * dimension ld, lie inside the allocations; says which does not. */
static bool inside(const char *name, const float *base, int rows, int cols, int ld,
                   long long stride, int batch) {
  if (rows == 0 || cols == 0 || batch == 0)
    return true;
  if (ld < rows) {
    fprintf(stderr, "ptx sim: cublasSgemmStridedBatched: %s's leading dimension %d < %d rows\n",
            name, ld, rows);
    return false;
  }
  uintptr_t first = (uintptr_t)base;
  uintptr_t last = first + sizeof(float) * (uintptr_t)((long long)(batch - 1) * stride +
                                                       (long long)(cols - 1) * ld + rows - 1);
  if (stride >= 0 && ptx_sim_inside(first, last + sizeof(float) - first))
    return true;
  fprintf(stderr, "ptx sim: cublasSgemmStridedBatched: %s (%d x %d, ld %d, batch %d, stride %lld) "
                  "at %#lx is outside every allocation\n",
          name, rows, cols, ld, batch, stride, (unsigned long)first);
  return false;
}

EXPORT int cublasSgemmStridedBatched(void *handle, int transa, int transb, int m, int n, int k,
                                     const float *alpha, const float *a, int lda,
                                     long long stride_a, const float *b, int ldb,
                                     long long stride_b, const float *beta, float *c, int ldc,
                                     long long stride_c, int batch) {
  if (handle != &handle_token)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N; /* OP_C is OP_T for real matrices */
  if (!inside("A", a, ta ? k : m, ta ? m : k, lda, stride_a, batch) ||
      !inside("B", b, tb ? n : k, tb ? k : n, ldb, stride_b, batch) ||
      !inside("C", c, m, n, ldc, stride_c, batch))
    return CUBLAS_STATUS_EXECUTION_FAILED;
  for (int p = 0; p < batch; p++) {
    const float *ap = a + p * stride_a, *bp = b + p * stride_b;
    float *cp = c + p * stride_c;
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        double sum = 0;
        for (int q = 0; q < k; q++)
          sum += (double)(ta ? ap[q + (long long)i * lda] : ap[i + (long long)q * lda]) *
                 (tb ? bp[j + (long long)q * ldb] : bp[q + (long long)j * ldb]);
        float *out = &cp[i + (long long)j * ldc];
        *out = (float)(*alpha * sum + (*beta != 0 ? *beta * (double)*out : 0));
      }
  }
  return CUBLAS_STATUS_SUCCESS;
}
