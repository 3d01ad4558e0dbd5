/* What the parts of the GPU backend share. */
#ifndef TFM_PTX_INTERNAL_H
#define TFM_PTX_INTERNAL_H

#include "gen.h"
#include "ptx.h"

/* The most buffers one kernel entry takes: PTX allows 4 KiB of parameters
 * (8 bytes a pointer, plus the item count). */
#define KERNEL_MAX_ARGS_PTX 480

/* Whether a dot runs on the GPU as the tiled tensor-core kernel (f32), and
 * then its work items: whole blocks of PTX_DOT_THREADS, one a tile of C. */
bool ptx_dot_tiled(const GraphNode *dot);
int64_t ptx_dot_tiled_items(const GraphNode *dot);

/* row.c: the threads that share each row of loop kernel `kernel`
 * (PTX_WARP or PTX_ROW_BLOCK_THREADS, ptx_row.h), or 0 when the kernel
 * keeps one thread a row (or an element); and such a kernel's function
 * (one work item a thread of a row). */
int64_t ptx_row_split_threads(const KernelPlan *plan, int kernel);
/* The threads that share each row of a kernel's launch: a warp for an
 * attention kernel's rows, ptx_row_split_threads for a loop's, else 0. */
int64_t ptx_row_sharing(const KernelPlan *plan, int kernel);
void ptx_emit_row_kernel(Gen *gen, int function, const Kernel *kernel, int64_t threads);
/* An attention kernel with a warp a row (llvm/attention.c's lanes): its
 * launch has PTX_WARP work items a row. */
void ptx_emit_attention_kernel(Gen *gen, int function, const Kernel *kernel);

/* attention_mma.c: whether an attention kernel runs on tensor cores
 * (bf16-valued q, k, v and do, no mask input, heads of at most 64), its
 * work items (a warp for each 16 rows of its side) and its function. */
bool ptx_attention_mma(const Graph *graph, const Kernel *kernel);
int64_t ptx_attention_mma_items(const Graph *graph, const Kernel *kernel);
void ptx_emit_attention_mma(Gen *gen, int function, const Kernel *kernel);

/* dot.c: every lane must run every mma.sync: its call marked convergent,
 * and 4 values pinned where the whole warp is (see dot.c). */
void ptx_mark_convergent(Gen *gen, LLVMValueRef call);
void ptx_pin(Gen *gen, LLVMValueRef values[4]);

/* dot.c: a dot kernel as the GPU runs it (tiled, or one thread an
 * element of C), and always one thread an element (the thread plan the
 * CPU runs, serial.c). */
void ptx_emit_dot_kernel(Gen *gen, int function, const Kernel *kernel);
void ptx_emit_dot_elements(Gen *gen, int function, const Kernel *kernel);
/* row.c: the rows of a scatter_add's [V, D] result one GPU thread takes
 * (of one column): enough (V / R) x D threads to fill the GPU, R >= 1. */
int64_t ptx_scatter_block_rows(const GraphNode *scatter);

/* A module-level shared-memory (addrspace 3) array of `count` elements,
 * internal and uninitialised, and a pointer to its element i. */
LLVMValueRef ptx_shared_array(Gen *gen, const char *name, LLVMTypeRef element, int64_t count,
                              unsigned align);
LLVMValueRef ptx_shared_element(Gen *gen, LLVMValueRef array, LLVMValueRef i);

#endif
