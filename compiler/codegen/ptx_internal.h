/* What the parts of the GPU backend share. */
#ifndef TFM_PTX_INTERNAL_H
#define TFM_PTX_INTERNAL_H

#include "cpu_internal.h"

/* The most buffers one kernel entry takes: PTX allows 4 KiB of parameters
 * (8 bytes a pointer, plus the item count). */
#define KERNEL_MAX_ARGS_PTX 480

/* Whether a dot runs on the GPU as the tiled tensor-core kernel (f32), and
 * then its work items: whole blocks of PTX_DOT_THREADS, one a tile of C. */
bool ptx_dot_tiled(const GraphNode *dot);
int64_t ptx_dot_tiled_items(const GraphNode *dot);

#endif
