/* The row-major -> column-major mapping of --gemm=cublas's dots, checked
 * without a GPU: a naive column-major strided batched GEMM with
 * cublasSgemmStridedBatched's conventions, called with the arguments
 * tfm_gpu_gemm_colmajor gives (its first operand the row-major B buffer),
 * must compute the row-major C = op(A) op(B) a naive triple loop does, for
 * every transpose pair, batches, and an operand shared by every batch
 * (stride 0). Small integers keep every sum exact. And without a driver,
 * tfm_gpu_gemm itself fails cleanly. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

static int failures;

/* C[i + j ldc] = sum_p op(A)[i, p] op(B)[p, j], column-major, per batch. */
static void colmajor_gemm(const tfm_gpu_colmajor *g, const float *a, const float *b, float *c) {
  for (int t = 0; t < g->batch; t++)
    for (int j = 0; j < g->n; j++)
      for (int i = 0; i < g->m; i++) {
        float sum = 0;
        for (int p = 0; p < g->k; p++) {
          float x = g->trans_a ? a[t * g->stride_a + p + i * g->lda]
                               : a[t * g->stride_a + i + p * g->lda];
          float y = g->trans_b ? b[t * g->stride_b + j + p * g->ldb]
                               : b[t * g->stride_b + p + j * g->ldb];
          sum += x * y;
        }
        c[t * g->stride_c + i + j * g->ldc] = sum;
      }
}

/* Row-major C[b][i, j] = sum_p op(A)[i, p] op(B)[p, j]. */
static void rowmajor_reference(const int64_t *d, const float *a, const float *b, float *c) {
  int64_t ta = d[0], tb = d[1], m = d[2], n = d[3], k = d[4];
  for (int64_t t = 0; t < d[5]; t++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        float sum = 0;
        for (int64_t p = 0; p < k; p++)
          sum += a[t * d[6] + (ta ? p * m + i : i * k + p)] *
                 b[t * d[7] + (tb ? j * k + p : p * n + j)];
        c[t * d[8] + i * n + j] = sum;
      }
}

static void check(int ta, int tb, int m, int n, int k, int batch, int share_a, int share_b) {
  int64_t d[9] = {ta, tb, m, n, k, batch, share_a ? 0 : m * k, share_b ? 0 : k * n, m * n};
  size_t na = (size_t)(m * k * (share_a ? 1 : batch)), nb = (size_t)(k * n * (share_b ? 1 : batch));
  size_t nc = (size_t)(m * n * batch);
  float *a = malloc(sizeof *a * (na + 1)), *b = malloc(sizeof *b * (nb + 1));
  float *want = calloc(nc + 1, sizeof *want), *got = calloc(nc + 1, sizeof *got);
  if (!a || !b || !want || !got) abort();
  for (size_t i = 0; i < na; i++) a[i] = (float)((int)(i * 7 % 11) - 5);
  for (size_t i = 0; i < nb; i++) b[i] = (float)((int)(i * 5 % 13) - 6);
  rowmajor_reference(d, a, b, want);
  tfm_gpu_colmajor g = tfm_gpu_gemm_colmajor(d);
  colmajor_gemm(&g, b, a, got); /* swapped, as tfm_gpu_gemm passes them */
  int bad = 0;
  for (size_t i = 0; i < nc; i++) bad += got[i] != want[i];
  /* Leading dimensions cuBLAS accepts: at least the rows it reads. */
  bad += g.lda < (g.trans_a ? g.k : g.m) || g.ldb < (g.trans_b ? g.n : g.k) || g.ldc < g.m;
  printf("%s  ta=%d tb=%d m=%d n=%d k=%d batch=%d%s%s\n", bad ? "FAIL" : "ok  ", ta, tb, m, n, k,
         batch, share_a ? " A shared" : "", share_b ? " B shared" : "");
  failures += bad != 0;
  free(a);
  free(b);
  free(want);
  free(got);
}

/* Without a driver, tfm_gpu_gemm fails with one line, never crashes:
 * cuBLAS missing, or present (as with the toolkit installed) but unable to
 * create its handle. With a driver there is no context here to call it in. */
static void no_driver(void) {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver) {
    printf("skip  a CUDA driver is installed: tests/gpu/run.sh runs cuBLAS\n");
    return;
  }
  int64_t d[9] = {0, 0, 2, 2, 2, 1, 4, 4, 4};
  int status = tfm_gpu_gemm(d, 0, 0, 0);
  const char *missing = "cuBLAS not found (libcublas.so): build without --gemm=cublas or install "
                        "the CUDA toolkit's cuBLAS";
  int ok = status == TFM_FAILED &&
           (!strcmp(tfm_error(), missing) || !strncmp(tfm_error(), "cuBLAS: ", 8));
  printf("%s  no driver: tfm_gpu_gemm said \"%s\"\n", ok ? "ok  " : "FAIL", tfm_error());
  failures += !ok;
}

int main(void) {
  no_driver();
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      check(ta, tb, 3, 5, 4, 1, 0, 0);
      check(ta, tb, 4, 2, 7, 3, 0, 0);
      check(ta, tb, 1, 6, 1, 2, 0, 0);
      check(ta, tb, 3, 4, 5, 3, 1, 0); /* a weight shared by every batch */
      check(ta, tb, 3, 4, 5, 3, 0, 1);
    }
  printf("gpu.gemm_colmajor: %s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
