/* The GPU's cooperative rows: the geometry and index formulas of a loop
 * kernel whose reductions several threads share, used by its emitter
 * (llvm/loop_rows.c's split rows, row.c's combine) and by its CPU model
 * (tests/gpu/row_reduce_model.c), so that the model checks the mapping the
 * emitter uses.
 *
 * A row (one element of a root reduction's output, or one row of the outer
 * axes of a kernel with hoisted reductions) is shared by `threads`
 * consecutive threads: one warp for rows of up to PTX_ROW_WARP_MAX
 * elements, else one block of PTX_ROW_BLOCK_THREADS. Thread `tid` of the
 * row takes elements tid, tid + threads, tid + 2 threads, ... of the
 * flattened reduced axes (neighbouring threads, neighbouring elements:
 * coalesced), accumulating them privately in that order. A warp then
 * combines its 32 partials by butterfly shuffles (offsets 16, 8, 4, 2, 1),
 * each pair always combined as (lower lane's value, upper lane's value), so
 * both lanes compute the same operation and every lane ends with the same
 * bits; a block's warps then put their values in shared memory and every
 * thread combines them in warp order. The tree is fixed by the row length
 * and the thread count alone, so the result is the same on every run. The
 * elementwise part of a row (after its hoisted reductions) is split the
 * same way: thread tid writes elements tid, tid + threads, ... */
#ifndef TFM_PTX_ROW_H
#define TFM_PTX_ROW_H

#include <stdbool.h>
#include <stdint.h>

#define PTX_WARP 32
#define PTX_ROW_BLOCK_THREADS 256
#define PTX_ROW_WARP_MAX 1024
#define PTX_ROW_SHUFFLES 5 /* log2(PTX_WARP) */
/* Threads below which a launch leaves much of a GPU idle (an H100 or H200
 * holds 132 x 2048 resident threads; a quarter of that). */
#define PTX_FILL_THREADS 65536
/* A row longer than 2 chunks of PTX_ROW_CHUNK elements, of a reduction
 * into fewer rows than PTX_LONG_ROWS_MAX (which, a block a row, would
 * leave the GPU idle), is reduced a chunk a block and then over its chunks
 * (KernelPlanOptions.long_reduction_chunk): 32 elements a thread. */
#define PTX_ROW_CHUNK (32 * PTX_ROW_BLOCK_THREADS)
#define PTX_LONG_ROWS_MAX (PTX_FILL_THREADS / PTX_ROW_BLOCK_THREADS)
/* Row reductions a kernel hoists at most (KernelPlanOptions.max_hoisted):
 * each one's value stays live through the loops and barriers of those
 * after it. GPT-2's gradient-norm kernel hoisted as many parameters' sums
 * as its 24 loop variables allowed, beside the others' read as scalars:
 * 255 registers, 548 bytes spilled on sm_80; at most 8, 48 registers. */
#define PTX_MAX_HOISTED 8

/* Threads that share a row whose longest loop (reduction or elementwise
 * part) has `length` elements. */
static inline int64_t ptx_row_threads(int64_t length) {
  return length <= PTX_ROW_WARP_MAX ? PTX_WARP : PTX_ROW_BLOCK_THREADS;
}

/* Work item `item` of a launch is thread ptx_row_tid of row ptx_row_of. */
static inline int64_t ptx_row_of(int64_t item, int64_t threads) { return item / threads; }
static inline int64_t ptx_row_tid(int64_t item, int64_t threads) { return item % threads; }

/* How many elements of a `length`-element loop thread `tid` takes, and the
 * element of its step `step`. */
static inline int64_t ptx_row_steps(int64_t length, int64_t threads, int64_t tid) {
  return (length + threads - 1 - tid) / threads;
}
static inline int64_t ptx_row_element(int64_t tid, int64_t step, int64_t threads) {
  return tid + step * threads;
}

/* Shuffle `i` (0 .. PTX_ROW_SHUFFLES - 1) exchanges with lane ^ offset. */
static inline int ptx_row_offset(int i) { return PTX_WARP >> (i + 1); }
/* Whether lane's own value is the left operand of shuffle `offset`'s combine. */
static inline bool ptx_row_lower(int64_t lane, int offset) { return (lane & offset) == 0; }

static inline int64_t ptx_row_lane(int64_t tid) { return tid % PTX_WARP; }
static inline int64_t ptx_row_warp(int64_t tid) { return tid / PTX_WARP; }
static inline int64_t ptx_row_warps(int64_t threads) { return threads / PTX_WARP; }

#endif
