/* The GPU backend: PTX for a kernel plan, through LLVM's NVPTX target
 * (nvptx64-nvidia-cuda).
 *
 * Every distinct kernel function of the plan becomes one PTX entry named
 * P_kF (P the prefix, F the plan function) whose parameters are the
 * kernel's buffer pointers (output first) followed by an i64 count of work
 * items. One thread computes one work item (ptx_work_items): an element
 * of a loop kernel's output, a column of a scatter, an element of an f64
 * or integer dot's output; a row reduction (a kernel that hoists
 * reductions, as softmax and layernorm rows do, or a root reduction over
 * its input's last axis) is a warp or a block a row (ptx_row.h, one work
 * item a thread of the row); an f32 dot is a tiled tensor-core kernel, one
 * block of PTX_BLOCK_THREADS a tile of its output (dot.c). Loop and
 * scatter kernels are the shared emitters
 * (llvm/loop.c, llvm/scatter.c), called by the entry with the range
 * [item, item + 1) and inlined, so both targets compute every node with
 * the same code. Math functions come from CUDA's libdevice. */
#ifndef TFM_PTX_H
#define TFM_PTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel.h"
#include "target.h"

/* Threads per block of every launch. */
#define PTX_BLOCK_THREADS 256

typedef struct PtxOptions {
  const char *arch;   /* "sm_80" (the default when NULL) or "sm_90" */
  const char *prefix; /* symbol prefix; "tfm_model" when NULL */
  bool cublas;        /* --gemm=cublas: leave out the dots ptx_dot_on_cublas accepts */
} PtxOptions;

/* The row-major description of a dot kernel that cuBLAS computes instead
 * of a PTX entry (tfm_gpu_gemm's arguments, runtime/gpu.h): */
enum { PTX_GEMM_TRANSA, PTX_GEMM_TRANSB, PTX_GEMM_M, PTX_GEMM_N, PTX_GEMM_K, PTX_GEMM_BATCH,
       PTX_GEMM_STRIDE_A, PTX_GEMM_STRIDE_B, PTX_GEMM_STRIDE_C, PTX_GEMM_FIELDS };

/* With --gemm=cublas, whether kernel `kernel` goes to cuBLAS: an f32 dot
 * whose sizes fit cuBLAS's int arguments (f64 dots keep their PTX entry:
 * only cublasSgemmStridedBatched is loaded). Fills desc when true. Kernels
 * sharing a function agree, as they have the same shapes and types. */
bool ptx_dot_on_cublas(const KernelPlan *plan, int kernel, int64_t desc[PTX_GEMM_FIELDS]);

/* The kernel plan options of the GPU (row.c): long reductions split over
 * blocks; none of the CPU's. */
KernelPlanOptions ptx_plan_options(void);

/* True for the GPU architectures --gpu-arch accepts. */
int ptx_arch_known(const char *arch);

/* The PTX text of the plan's kernels (malloc'd), or NULL with a message. */
char *ptx_compile(const KernelPlan *plan, const PtxOptions *options, char *err, size_t err_size);

/* The work items (threads) of a launch of kernel `kernel` of the plan. */
int64_t ptx_work_items(const KernelPlan *plan, int kernel);

/* The plan as the GPU runs it: the same buffers and functions, each
 * kernel's outer axes and rows being what one thread and the launch cover,
 * but for tiled dots, which it keeps one thread an element of C.
 * Shares everything but its kernels with `plan`; free it with
 * ptx_thread_plan_free. Compiled for the CPU with ptx_serial_target,
 * it runs the GPU's kernels on the CPU (ptx_serial_target). */
KernelPlan *ptx_thread_plan(const KernelPlan *plan);
void ptx_thread_plan_free(KernelPlan *plan);

/* The host side of a CUDA build (host.c), for cpu_compile's
 * CpuOptions.target: P_run and P_update launch the kernels of `ptx` (the
 * PTX of the same plan) through the runtime (runtime/gpu.h), with cuBLAS
 * for the dots ptx_dot_on_cublas accepts when `cublas` (the PTX was
 * compiled with PtxOptions.cublas). The Target refers to *host, which
 * must outlive the compilation. */
typedef struct PtxHost {
  const char *ptx;
  bool cublas;
} PtxHost;
Target ptx_host_target(const PtxHost *host);

/* The GPU's kernels run on the CPU (serial.c): compiled by cpu_compile
 * with CpuOptions.target = &ptx_serial_target from ptx_thread_plan's plan,
 * every kernel computes what the GPU's threads compute, in their order
 * (the codegen_gpuplan tests). */
extern const Target ptx_serial_target;

/* The PTX entry name of plan function `function`. */
void ptx_entry_name(const char *prefix, int function, char *name, size_t size);

#endif
