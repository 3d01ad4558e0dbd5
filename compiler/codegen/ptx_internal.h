/* What the parts of the GPU backend share. */
#ifndef TFM_PTX_INTERNAL_H
#define TFM_PTX_INTERNAL_H

#include "cpu_internal.h"

/* The most buffers one kernel entry takes: PTX allows 4 KiB of parameters
 * (8 bytes a pointer, plus the item count). */
#define KERNEL_MAX_ARGS_PTX 480


#endif
