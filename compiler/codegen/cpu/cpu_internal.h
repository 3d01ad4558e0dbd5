/* What the CPU target's files share: its dots on the generated GEMM. */
#ifndef TFM_CPU_INTERNAL_H
#define TFM_CPU_INTERNAL_H

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
/* The same for bf16 (i16) a, b and c, summed in f32 and rounded once. */
LLVMValueRef cpu_gemm_bf16_function(Gen *gen, bool ta, bool tb);

#endif
