/* A graph compiled for the GPU (tfmc build --target cuda), as its host
 * object describes it to the runtime: the PTX of its kernels and, in plan
 * order, each launch with the arena offsets of its buffers. The generated
 * P_run calls tfm_gpu_run and P_update tfm_gpu_update; the binary's main
 * (cli.c) drives a GPU model exactly as a CPU one.
 *
 * Each host arena a GPU program runs on has a device copy of the same
 * layout. Params and states stay on the device between runs: a run
 * uploads the inputs and downloads the outputs, and the update copies new
 * values on the device. The host copy of params and states is brought up
 * to date only where the runtime reads them (checkpoints, copies between
 * graphs, averaging: graph.c), through the calls at the end of this file.
 * Moving the whole persistent region both ways at every run cost gpt-small
 * about 10 ms of a 17 ms step on an H200. */
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
  /* The inputs, uploaded before each run, and the outputs, downloaded
   * after it: num_inputs and num_outputs triples {tfm_region, offset,
   * bytes}. */
  int64_t num_inputs;
  const int64_t *inputs;
  int64_t num_outputs;
  const int64_t *outputs;
  /* The update on the device: num_copies quadruples {target's persistent
   * offset, value's tfm_region, value's offset, bytes}. */
  int64_t num_copies;
  const int64_t *copies;
  void **state; /* the runtime's module and kernels for this program; NULL at first */
} tfm_gpu_program;

/* A training step (the run of a program whose update follows at once,
 * tfm_graph_step) is one CUDA graph, built at the arena's first step and
 * replayed at every later one: the kernels in plan order, then the
 * update's copies, so tfm_gpu_update has nothing left to do. The graph
 * reads its inputs (the batch, the step number that the learning rate,
 * Adam's bias correction and dropout's counters come from) in the device
 * arena, uploaded before each launch. Every other run launches each
 * kernel. cli.c clears tfm_gpu_graphs for train --no-cuda-graph; a
 * --gemm=cublas program and TFM_CUDA_SYNC launch directly too. */
extern int tfm_gpu_graphs;
extern int tfm_gpu_update_follows; /* set by tfm_graph_step around its run */

/* Runs every kernel of the program on the GPU on the device copy of the
 * host arena (persistent, scratch): uploads the whole persistent region at
 * the arena's first run and after tfm_gpu_arena_written, else the inputs;
 * launches; downloads the outputs. The first call loads the driver
 * (dlopen libcuda.so.1) and the module, an arena's first run its device
 * copy; any failure (no driver, no device, a launch error) prints one line
 * and exits with status 1. */
void tfm_gpu_run(const tfm_gpu_program *program, uint8_t *persistent, uint8_t *scratch);

/* Unloads what the program's first run loaded (its module and kernels),
 * for a program about to go with the library holding it (the codegen
 * harness's cases); a later run would load them again. */
void tfm_gpu_program_unload(const tfm_gpu_program *program);

/* The program's update on the arena's device copy (the host's is then out
 * of date until tfm_gpu_arena_to_host); nothing before the arena's first
 * run. */
void tfm_gpu_update(const tfm_gpu_program *program, uint8_t *persistent, uint8_t *scratch);

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

/* The host arena whose persistent region starts at `persistent` and its
 * device copy, for code that reads or writes the host's params or states
 * between runs; each is a no-op for an arena no GPU program ran on. */
/* Before reading: the device's persistent region, if newer, comes back. */
void tfm_gpu_arena_to_host(const uint8_t *persistent);
/* After writing: the next run uploads the whole persistent region. */
void tfm_gpu_arena_written(const uint8_t *persistent);
/* When the host arena goes (tfm_arena_destroy): its device copy goes too,
 * and the links to or from it. */
void tfm_gpu_arena_forget(const uint8_t *persistent);

/* --- data-parallel training (train_dist.c, train_nccl.c) ----------------- */

/* The process's driver context, opened if no program ran yet on the
 * device of this process's rank on its machine (tfm_cuda_open_for_rank;
 * 0 for a process alone). */
int tfm_gpu_driver(tfm_cuda **cuda);

/* A buffer of a host arena a GPU program runs on: the arena, by its
 * persistent region, and the buffer's tfm_region and offset in it. */
typedef struct tfm_gpu_place {
  const uint8_t *arena;
  int64_t region, offset;
} tfm_gpu_place;

/* The buffer's address in its arena's device copy; fails before the
 * arena's first run. */
int tfm_gpu_device_address(tfm_gpu_place at, tfm_device_ptr *address);

/* One graph's buffer feeding another's on the device (the gradients
 * graph's outputs into the apply graph's inputs, the updated params back):
 * at every run of `to`'s arena, after the uploads and before the first
 * kernel, `to` takes the `bytes` of `from` device to device, once `from`'s
 * arena has a device copy (before, the host copies must agree). Neither
 * crosses the host: `to` is not uploaded as an input, nor `from`
 * downloaded as an output. */
int tfm_gpu_link(tfm_gpu_place to, tfm_gpu_place from, int64_t bytes);

#endif
