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
  const char *entry;  /* PTX entry name */
  int64_t items;      /* threads (work items); the entry's last parameter */
  int64_t num_args;   /* buffer pointers, output first */
  int64_t first_arg;  /* into the program's arg_region/arg_offset arrays */
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

/* Where the scratch region starts in the device arena. */
int64_t tfm_gpu_scratch_offset(const tfm_gpu_program *program);

#endif
