/* The tiled tensor-core dot's geometry and index formulas, shared by its
 * emitter (ptx/dot.c) and its CPU model (tests/gpu/dot_tile_model.c), so
 * that the model checks the mapping the emitter uses.
 *
 * A block of PTX_BLOCK_THREADS (8 warps) computes a BM x BN tile of C; warp
 * w computes the 32 x 32 sub-tile at (ptx_dot_warp_row, ptx_dot_warp_col)
 * as 2 x 4 mma.m16n8k8 tf32 tiles. Each step over k stages BM x BK of A and
 * BK x BN of B in shared memory, already rounded to tf32. A bf16 dot has
 * the same blocks, warps and staging order, with one mma.m16n8k16 bf16 per
 * tile and step (BK = 16): its tiles are staged as bf16 (2 bytes), A as
 * [BM][BK] and B transposed, [BN][BK], so that the two bf16 of each
 * fragment register (neighbours along k) are one 32-bit word in both. */
#ifndef TFM_PTX_DOT_TILE_H
#define TFM_PTX_DOT_TILE_H

#include <stdbool.h>
#include <stdint.h>

#define PTX_DOT_THREADS 256
#define PTX_DOT_BM 64
#define PTX_DOT_BN 128
#define PTX_DOT_BK 16
#define PTX_DOT_WARP_TILE 32
#define PTX_DOT_WARPS_N (PTX_DOT_BN / PTX_DOT_WARP_TILE)
#define PTX_MMA_M 16
#define PTX_MMA_N 8
#define PTX_MMA_K 8
/* mma lanes come in groups of 4 (PTX ISA: groupID = lane / 4,
 * threadID_in_group = lane % 4). */
#define PTX_MMA_GROUP 4
/* Shared-memory row strides, padded so that a warp's fragment loads hit 32
 * distinct banks: A's rows g (0..7) at stride 20 words fall on banks
 * 20g mod 32 = {0, 20, 8, 28, 16, 4, 24, 12}, plus the lane's 0..3; B's
 * rows q (0..3) at stride 136 on 8q, plus the lane's 0..7. */
#define PTX_DOT_AS_STRIDE (PTX_DOT_BK + 4)
#define PTX_DOT_BS_STRIDE (PTX_DOT_BN + 8)

static inline int64_t ptx_dot_tiles(int64_t extent, int64_t tile) {
  return (extent + tile - 1) / tile;
}

static inline int64_t ptx_dot_warp_row(int64_t warp) {
  return warp / PTX_DOT_WARPS_N * PTX_DOT_WARP_TILE;
}
static inline int64_t ptx_dot_warp_col(int64_t warp) {
  return warp % PTX_DOT_WARPS_N * PTX_DOT_WARP_TILE;
}

/* Fragment layouts of mma.m16n8k8 tf32 (PTX ISA, "Matrix Fragments for
 * mma.m16n8k8"): register i of a lane sits at (group + row offset,
 * quad + column offset) of its A (16 x 8), B (8 x 8, as k x n) or C
 * (16 x 8) tile; C's column is 2 quad + (i & 1). */
static inline int64_t ptx_mma_a_row(int i) { return (i & 1) * 8; }
static inline int64_t ptx_mma_a_col(int i) { return (i >> 1) * 4; }
static inline int64_t ptx_mma_b_row(int i) { return i * 4; }
static inline int64_t ptx_mma_c_row(int i) { return (i >> 1) * 8; }
static inline int64_t ptx_mma_c_col(int i) { return i & 1; }

/* Fragment layouts of mma.m16n8k16 with .bf16 operands (PTX ISA,
 * "Matrix Fragments for mma.m16n8k16 with floating point type"): element i
 * of a lane's A fragment (8 bf16, i = 0..7, two to a .b32 register, the
 * lower i in the low half) sits at (group + row offset, 2 quad + column
 * offset) of the 16 x 16 A tile; element i of B (4 bf16) at
 * (k = 2 quad + row offset, n = group) of the 16 x 8 B tile; C (f32) is
 * laid out as for tf32 above. Elements 2r and 2r + 1 (register r) are
 * neighbours along k: one 32-bit word of the staged tiles. */
#define PTX_MMA16_K 16
static inline int64_t ptx_mma16_a_row(int i) { return ((i >> 1) & 1) * 8; }
static inline int64_t ptx_mma16_a_col(int i) { return (i & 1) + (i >> 2) * 8; }
static inline int64_t ptx_mma16_b_row(int i) { return (i & 1) + (i >> 1) * 8; }
/* bf16 tiles' row strides in bf16 elements: 24 = 12 words, so rows g
 * (0..7) start on banks 12g mod 32 = {0, 12, 24, 4, 16, 28, 8, 20} and a
 * warp's fragment words (plus quad 0..3) hit 32 distinct banks, for A's
 * rows and B's (transposed) columns alike. */
#define PTX_DOT16_AS_STRIDE (PTX_DOT_BK + 8)
#define PTX_DOT16_BS_STRIDE (PTX_DOT_BK + 8)

/* Staging: step s of thread t loads element e = s * PTX_DOT_THREADS + t of
 * a tile, counting along the axis contiguous in global memory (so a warp's
 * loads coalesce): e / inner and e % inner are the slow and fast axes. */
static inline int64_t ptx_dot_a_inner(bool ta) { return ta ? PTX_DOT_BM : PTX_DOT_BK; }
static inline int64_t ptx_dot_b_inner(bool tb) { return tb ? PTX_DOT_BK : PTX_DOT_BN; }
#define PTX_DOT_A_STEPS (PTX_DOT_BM * PTX_DOT_BK / PTX_DOT_THREADS)
#define PTX_DOT_B_STEPS (PTX_DOT_BK * PTX_DOT_BN / PTX_DOT_THREADS)

#endif
