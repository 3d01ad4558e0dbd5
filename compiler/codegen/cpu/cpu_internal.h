/* What the CPU target's files share: its dots on the generated GEMM. */
#ifndef TFM_CPU_INTERNAL_H
#define TFM_CPU_INTERNAL_H

#include <llvm-c/TargetMachine.h>

#include "cpu.h"
#include "gen.h"

/* dot.c: a dot kernel (GEMM calls, or matrix-vector rows), and its range:
 * rows x column blocks of cpu_dot_column_block's width. */
void cpu_emit_dot_kernel(Gen *gen, int function, const Kernel *kernel);
int64_t cpu_dot_column_block(const Gen *gen, const Kernel *kernel);
int64_t cpu_dot_items(const Gen *gen, const Kernel *kernel);

/* gemm.c: the module's GEMM for element type t (f32 or f64) and the
 * transpose flags, emitted on first use: void (T *c, T *a, T *b, i64 m,
 * i64 n, i64 k, i64 lda, i64 ldb, i64 ldc) computing c = op(a) op(b),
 * row-major. */
LLVMValueRef cpu_gemm_function(Gen *gen, LLVMTypeRef t, bool ta, bool tb);
/* The same for bf16 (i16) a, b and c, summed in f32 and rounded once:
 * gemm_bf16.c's dispatcher among the kernel families (the runtime's
 * tfm_cpu_kernels), and gemm.c's family that widens to f32 (AVX2,
 * AVX-512F). */
LLVMValueRef cpu_gemm_bf16_function(Gen *gen, bool ta, bool tb);
LLVMValueRef cpu_gemm_bf16_widen_function(Gen *gen, bool ta, bool tb);

/* A family of bf16 GEMMs on pair dot products (gemm_bf16.c's driver):
 * `micro` emits the body of its micro-kernel (the driver makes the
 * function, once a module, with the family's features and the builder at
 * its entry) void (i64 kc, i64 kp, i16 *a, i16 *b, f32 *c, i64 ldc, i1
 * accumulate), which sets the rows x 32 f32 block at c (row stride ldc
 * elements) to (accumulate ? c : 0) plus the sums over kc (a multiple of
 * 32) k steps of `rows` rows of packed A times two 16-column strips of B
 * in the pair layout (the second kp * 16 elements on). Packed A: 16-row
 * strips (kp * 16 elements apart) of blocks of 16 rows x 32 k (512
 * elements); a points at the tile's first row at the block's first k step
 * (element (r, p) of a 16-row strip at (p / 32) 512 + 32 r + p % 32). */
typedef struct CpuPairFamily {
  const char *name;     /* in its functions' names */
  const char *features; /* the target features its functions add */
  int rows;             /* of its micro tile; divides 32 */
  void (*micro)(Gen *gen, LLVMValueRef fn);
  void (*begin)(Gen *gen); /* NULL, or emitted before the driver's loops */
  void (*end)(Gen *gen);   /* NULL, or emitted after them */
} CpuPairFamily;
/* gemm_amx.c: Intel's tile registers through LLVM 14's intrinsics with
 * immediate tile numbers, every tile configured as 16 rows x 64 bytes
 * (cpu_amx_configure, in a function with the AMX features; release them
 * before it returns); loads and stores of tile t at base, rows
 * stride_bytes apart; tile t zeroed; tile c += a b (tdpbf16ps: a's 16
 * rows x 32 bf16, b's 16 rows of 16 bf16 pairs). */
void cpu_amx_configure(Gen *gen);
void cpu_amx_release(Gen *gen);
void cpu_amx_load(Gen *gen, int t, LLVMValueRef base, LLVMValueRef stride_bytes);
void cpu_amx_store(Gen *gen, int t, LLVMValueRef base, LLVMValueRef stride_bytes);
void cpu_amx_zero(Gen *gen, int t);
void cpu_amx_dot(Gen *gen, int c, int a, int b);
/* attention_amx.c: the fused attention kernel; its forward on AMX tiles
 * (picked at run time, beside attention.c's kernel) where it applies. */
void cpu_emit_attention_kernel(Gen *gen, int function, const Kernel *kernel);
extern const CpuPairFamily cpu_amx_family;        /* gemm_amx.c */
extern const CpuPairFamily cpu_avx512bf16_family; /* gemm_avx512bf16.c */
/* gemm_pack_bf16.c: packs the bf16 operand element (p, q) = src[p sp +
 * min(q, count - 1) sq], p < k, q < padded (a multiple of 32), into A's
 * blocks or (pairs) B's pair layout, with zeros for k <= p < kp;
 * p_contiguous says which of sp and sq is 1. */
void cpu_pack_bf16(Gen *gen, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef k, LLVMValueRef kp,
                   LLVMValueRef count, LLVMValueRef padded, LLVMValueRef sp, LLVMValueRef sq,
                   bool p_contiguous, bool pairs);
/* bf16_convert.c: on a CPU with AVX512-BF16, the functions through which
 * the module's kernels round f32 to bf16 (gen->bf16_round_fn and
 * bf16_narrow_fn), made before the kernels; and, after the optimisation
 * that vectorized the loops calling them, their inlining (true when the
 * module has none). */
void cpu_bf16_convert_begin(Gen *gen);
bool cpu_bf16_convert_inline(LLVMModuleRef module, LLVMTargetMachineRef machine, char *err,
                             size_t err_size);
/* gemm.c, for every GEMM of this folder: the smaller of two i64; a counted
 * loop over begin, begin + step, ... < end (loop->index is the element, not
 * the count; end it with cpu_step_loop_end); a call of the runtime's
 * tfm_thread_scratch(bytes), the calling thread's scratch. */
LLVMValueRef cpu_min64(Gen *gen, LLVMValueRef a, LLVMValueRef b);
void cpu_step_loop_begin(Gen *gen, GenLoop *loop, LLVMValueRef end, int64_t step);
void cpu_step_loop_end(Gen *gen, GenLoop *loop);
LLVMValueRef cpu_thread_scratch(Gen *gen, LLVMValueRef bytes);
/* gemm.c: a new internal, noinline function void name(params) with the builder at
 * its entry, adding `features` (NULL: none) to the target's. */
LLVMValueRef cpu_gemm_function_begin(Gen *gen, const char *name, LLVMTypeRef *params,
                                     int num_params, const char *features);

#endif
