/* What the parts of the GPU backend share. */
#ifndef TFM_PTX_INTERNAL_H
#define TFM_PTX_INTERNAL_H

#include "cpu_internal.h"

/* The most buffers one kernel entry takes: PTX allows 4 KiB of parameters
 * (8 bytes a pointer, plus the item count). */
#define KERNEL_MAX_ARGS_PTX 480

/* A dot as a range function over elements of its output: one work item
 * per element of C, k ascending as the evaluator sums. */
void ptx_emit_dot_kernel(CpuGen *gen, int function, const Kernel *kernel);

#endif
