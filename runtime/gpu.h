/* A graph compiled for the GPU (tfmc build --target cuda), as its host
 * object describes it to the runtime: the PTX of its kernels and, in plan
 * order, each launch with the arena offsets of its buffers. The generated
 * P_run calls tfm_gpu_run; nothing else of the runtime changes, so the
 * binary's main (cli.c) drives a GPU model exactly as a CPU one. */
#ifndef TFM_GPU_H
#define TFM_GPU_H
#include <stdint.h>

#include "tfmrt.h"

typedef struct tfm_gpu_launch {
  const char *entry;  /* PTX entry name; NULL for a cuBLAS call */
  int64_t items;      /* threads (work items); the entry's last parameter */
  int64_t num_args;   /* buffer pointers, output first */
  int64_t first_arg;  /* into the program's arg_region/arg_offset arrays */
  /* NULL for a PTX launch. A dot of tfmc build --gemm=cublas: transa,
   * transb, m, n, k, batch, stride_a, stride_b, stride_c (in elements),
   * of row-major C = op(A) op(B), the buffers C, A, B (B = A when the
   * launch has two). */
  const int64_t *gemm;
} tfm_gpu_launch;

/* Every field is 64 bits wide so that the compiler's LLVM struct and this
 * one agree without padding rules. */
typedef struct tfm_gpu_program {
  const char *ptx;
  int64_t persistent_bytes, scratch_bytes;
  int64_t block_threads;
  int64_t num_launches;
  const tfm_gpu_launch *launches;
  const int64_t *arg_region; /* tfm_region of each buffer argument */
  const int64_t *arg_offset; /* bytes into that region */
  /* Scratch ranges the host-side update reads (updated values that are not
   * outputs), copied back after each run with the persistent region. */
  int64_t num_downloads;
  const int64_t *download_offset, *download_bytes;
  void **state; /* the runtime's device state for this program; NULL at first */
} tfm_gpu_program;

/* Runs every kernel of the program on the GPU: uploads the host persistent
 * region, launches, downloads the persistent region and the program's
 * scratch ranges. The first call loads the driver (dlopen libcuda.so.1),
 * the module and one device arena; any failure (no driver, no device, a
 * launch error) prints one line and exits with status 1. */
void tfm_gpu_run(const tfm_gpu_program *program, uint8_t *persistent, uint8_t *scratch);

/* Blocks of a launch of `items` threads, `block_threads` per block. */
unsigned tfm_gpu_blocks(int64_t items, int64_t block_threads);

/* The parameters of launch `index` for an arena at these device addresses:
 * pointers[i] and *items receive the values, params[i] their addresses
 * (cuLaunchKernel's kernelParams); params has num_args + 1 slots. */
void tfm_gpu_pack(const tfm_gpu_program *program, int64_t index, tfm_device_ptr persistent,
                  tfm_device_ptr scratch, tfm_device_ptr *pointers, int64_t *items, void **params);

/* A row-major dot as the column-major call cuBLAS takes: a row-major
 * matrix is its transpose in column-major order, so C = op(A) op(B) is
 * C^T = op(B)^T op(A)^T; the call's first operand is the row-major B
 * buffer and its second the row-major A buffer. */
typedef struct tfm_gpu_colmajor {
  int trans_a, trans_b; /* of the call's operands: 1 for CUBLAS_OP_T */
  int m, n, k, lda, ldb, ldc, batch;
  long long stride_a, stride_b, stride_c;
} tfm_gpu_colmajor;

/* The call for a launch's gemm description (tfm_gpu_launch.gemm). */
tfm_gpu_colmajor tfm_gpu_gemm_colmajor(const int64_t *gemm);

/* C = op(A) op(B) on the device for a launch's gemm description, through
 * cublasSgemmStridedBatched. The first call loads cuBLAS (dlopen; it is
 * not linked) and creates its handle in the current context; TFM_FAILED
 * with a message when cuBLAS is missing or the call fails. */
int tfm_gpu_gemm(const int64_t *gemm, tfm_device_ptr c, tfm_device_ptr a, tfm_device_ptr b);

/* Where the scratch region starts in the device arena. */
int64_t tfm_gpu_scratch_offset(const tfm_gpu_program *program);

#endif
