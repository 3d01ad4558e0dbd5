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
  const char *features; /* with a named cpu: LLVM features added to it ("+amx-tile,..."), or NULL */
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

/* --cpu generic-dispatch (dispatch.c): a graph compiled once per variant,
 * chosen at start-up by runtime/cpu_kernels.c, in tfmrt.h's order. */
typedef struct CpuVariant {
  const char *name;     /* "avx2", "avx512", "amx": the runtime's and TFM_CPU_VARIANT's names */
  const char *cpu;      /* the LLVM CPU it is compiled for */
  const char *features; /* and the features added to it */
} CpuVariant;
enum { CPU_VARIANTS = 3 };
extern const CpuVariant cpu_variants[CPU_VARIANTS];

/* PREFIX__NAME, the symbol prefix of variant v's module, in buf. */
const char *cpu_variant_prefix(const char *prefix, int v, char *buf, size_t size);

/* Makes the module of variant 0 (compiled with prefix PREFIX) the graph's
 * dispatcher: its PREFIX_run and PREFIX_update become PREFIX__avx2_run and
 * PREFIX__avx2_update, and new PREFIX_run and PREFIX_update call the
 * variant that tfm_cpu_variant() returns, whose modules (compiled with
 * cpu_variant_prefix's prefixes) are linked beside it. */
bool cpu_add_dispatch(CpuModule *baseline, const char *prefix, char *err, size_t err_size);

#endif
