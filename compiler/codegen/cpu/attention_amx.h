/* What the fused attention kernels on AMX tiles share (attention_amx.c:
 * the forward and the choice of kernel; attention_amx_backward.c: the
 * merged backward): zmm helpers, the bf16 packings of their operands as
 * tiles, p's (and ds's) rounding into two bf16 parts.
 *
 * Tiles are 16 rows x 64 bytes (512 bf16 elements); a packed operand is a
 * sequence of such tiles in an i16 array. Every packing reads rows of a
 * row-major f32 matrix (a batch's q, k, v or do, whose values are bf16)
 * and takes their high halves, exact for bf16 values; rows past the
 * matrix's `rows` repeat its last, elements past a row's `len` are 0. */
#ifndef TFM_ATTENTION_AMX_H
#define TFM_ATTENTION_AMX_H

#include "cpu_internal.h"

enum { AMX_TILE_ELEMENTS = 512, AMX_ROW_BYTES = 64 };

/* The most stack an AMX attention kernel's packed operands and
 * accumulators may take; past it the op keeps attention.c's kernel. */
#define AMX_ATTENTION_MAX_BYTES (512 * 1024)

/* The smaller of two sizes known when the kernel is emitted. */
static inline int64_t amx_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* <16 x float> and <16 x i32>; constants in every lane; lanes[l] = first
 * + l step (i32). */
LLVMTypeRef amx_f32x16(Gen *gen);
LLVMTypeRef amx_i32x16(Gen *gen);
LLVMValueRef amx_splat_f32(Gen *gen, double x);
LLVMValueRef amx_splat_i32(Gen *gen, int32_t x);
LLVMValueRef amx_lanes(Gen *gen, int first, int step);
/* 16 floats at base[0..16): the first `valid` (a constant) read, the rest
 * 0; stored, the first `valid` only. */
LLVMValueRef amx_load16(Gen *gen, LLVMValueRef base, int64_t valid);
void amx_store16(Gen *gen, LLVMValueRef v, LLVMValueRef base, int64_t valid);
/* x > y ? x : y, lane by lane (vmaxps). */
LLVMValueRef amx_max(Gen *gen, LLVMValueRef x, LLVMValueRef y);
/* Tile outer count + inner of a packed operand (an i16 array). */
LLVMValueRef amx_tile(Gen *gen, LLVMValueRef base, LLVMValueRef outer, int64_t count, int64_t inner);
/* A stack array of count elements, 64-byte aligned, as an element pointer. */
LLVMValueRef amx_stack_array(Gen *gen, LLVMTypeRef element, int64_t count, const char *name);

/* x[0] and x[1] (16 f32 lanes each) as two bf16 parts, each a tile row at
 * element `index`: bf16(x) (vcvtne2ps2bf16) in `hi` and bf16(x - bf16(x))
 * in `lo`. Interleaved, the B layout's row of pairs (x[0] lane l, x[1]
 * lane l); or not, an A row (x[0]'s 16 then x[1]'s). */
void amx_split_pair(Gen *gen, LLVMValueRef *x, bool interleave, LLVMValueRef hi, LLVMValueRef lo,
                    LLVMValueRef index);

/* x[c] (16 f32 lanes, one a row) is column `column` + c of rows row0 ..
 * row0 + 15 of dst (row-major, len columns): stored, transposed, for the
 * rows i < count (count at most 16) and the columns below len. */
void amx_store_columns(Gen *gen, LLVMValueRef *x, LLVMValueRef dst, LLVMValueRef row0, LLVMValueRef count,
                       int64_t len, int64_t column);

/* Whether these kernels take a mask input of this shape: one value per
 * (batch, key), the same for every query (its query axis 1 or absent: a
 * padding mask [B, 1, 1, S]); read through gen.h's GenMaskMap. */
bool amx_mask_per_key(const GraphShape *mask);
/* Key `key`'s mask value (key clamped to s - 1), from `keys`, a batch's
 * values of mask map m (gen_mask_row), in all 16 lanes. */
LLVMValueRef amx_key_mask(Gen *gen, const GenMaskMap *m, LLVMValueRef keys, LLVMValueRef key, int64_t s);

/* Row groups of 16 (groups of them, rows 16 g on), their elements in
 * steps of 32: tile (g steps + step) holds row j's elements 32 step ..
 * 32 step + 31 as row j (an A tile: rows x head), or transposed, row p
 * the pairs 2p, 2p + 1 of the 16 rows (a B tile: head pairs x rows). */
void amx_pack_row_steps(Gen *gen, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef rows, int64_t len,
                        LLVMValueRef groups, bool transposed);
/* Row blocks of 32 (blocks of them), their columns in tiles of 16: tile
 * (b tiles + ct) holds in row p rows 32 b + 2p and + 1 as pairs, lane c
 * column 16 ct + c (a B tile: row pairs x columns), or transposed, row c
 * the 32 rows' column c (an A tile: columns x rows). */
void amx_pack_row_pairs(Gen *gen, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef rows, int64_t len,
                        LLVMValueRef blocks, bool transposed);

/* attention_amx_backward.c: whether the merged backward kernel (grad_k
 * with grad_v and grad_q) has an AMX version, and that version: void
 * name(i8 *args, i64 begin, i64 end) over (batch, head) pairs. */
bool cpu_attention_amx_backward_applies(const Gen *gen, const Kernel *kernel);
LLVMValueRef cpu_emit_attention_amx_backward(Gen *gen, const Kernel *kernel, const char *name);

#endif
