/* The CPU target and the host module every build has, through the LLVM
 * C API.
 *
 * The module defines, for a symbol prefix P (default "tfm_model"):
 *   void P_run(uint8_t *persistent, uint8_t *scratch, tfm_pool *pool);
 *       runs every kernel in plan order over buffers at the plan's offsets
 *       into the two arena regions; with a pool each kernel's outer range is
 *       split by tfm_parallel_for, with pool == NULL it runs on the caller;
 *   void P_update(uint8_t *persistent, uint8_t *scratch);
 *       copies each update's value into its target (the optimizer step);
 *   const int64_t P_persistent_bytes, P_scratch_bytes;
 *       the region sizes the plan needs.
 * With the CPU's own target, one internal function per distinct kernel, of
 * the tfm_range_fn type:
 *   void kernel(void *args, size_t begin, size_t end)
 * where args is the kernel's array of buffer pointers (output first). A
 * CUDA build's host module has the same entry points, which launch the
 * plan's PTX kernels instead (ptx_host_target, ptx.h). */
#ifndef TFM_CPU_H
#define TFM_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "kernel.h"
#include "target.h"

/* The host CPU's kernels (dots on the generated GEMM, vector loops), run
 * on the runtime's thread pool. */
extern const Target cpu_target;

/* The plan options the CPU's kernels are formed with (tfmc build's
 * default target). */
KernelPlanOptions cpu_plan_options(void);

typedef struct CpuOptions {
  const char *cpu;    /* "native" (the default when NULL) or an LLVM CPU such as "x86-64-v3" */
  const char *prefix; /* symbol prefix; "tfm_model" when NULL */
  /* What the module holds: cpu_target when NULL; ptx_host_target for the
   * host side of a CUDA build, ptx_serial_target to run the GPU's kernels
   * on the CPU (ptx.h). */
  const Target *target;
} CpuOptions;

typedef struct CpuModule CpuModule;
struct LLVMOpaqueModule;
struct LLVMOpaqueContext;

/* Registers LLVM's native target; false when it has none. cpu_compile does
 * it too, but threads compiling modules at once must have it done first. */
bool cpu_initialize(void);

/* Generates the module, verifies it and optimises it (default<O3>). Modules
 * may be compiled and emitted on several threads at once (each has its own
 * LLVM context) once cpu_initialize has run. */
CpuModule *cpu_compile(const KernelPlan *plan, const CpuOptions *options, char *err,
                       size_t err_size);
void cpu_module_free(CpuModule *module);

/* The LLVM module and context (LLVMModuleRef, LLVMContextRef), for adding
 * globals before emitting; spelled as their structs so that this header
 * needs no LLVM include path. */
struct LLVMOpaqueModule *cpu_module_llvm(CpuModule *module, struct LLVMOpaqueContext **context);

bool cpu_emit_object(CpuModule *module, const char *path, char *err, size_t err_size);
/* The optimised module as LLVM IR text and as assembly; malloc'd, NULL on failure. */
char *cpu_llvm_text(CpuModule *module);
char *cpu_assembly_text(CpuModule *module, char *err, size_t err_size);

#endif
