/* What the fused attention kernels (attention.c) are built from
 * (attention_blocks.c): one row's vector chunks (or, on the GPU, lanes),
 * accumulators, the scores of a block of keys as small matrix products,
 * their exponentials and maxima, transposes, masks. See attention.c for
 * the algorithm. */
#ifndef TFM_ATTENTION_INTERNAL_H
#define TFM_ATTENTION_INTERNAL_H

#include "gen.h"

/* Private arrays a tile allocates (row_array), for lane mode's indexing. */
#define MAX_PRIVATE 16

typedef struct Att {
  Gen *gen;
  LLVMBuilderRef b;
  LLVMTypeRef t;  /* element type */
  int width;      /* lanes of a vector chunk; 1 = scalars only */
  LLVMValueRef fn;
  const RowLanes *lanes; /* the GPU's: width = lanes->lanes; else NULL */
  LLVMValueRef lane;     /* with lanes: this thread's lane of its row */
  LLVMValueRef private_arrays[MAX_PRIVATE];
  int num_private;
} Att;

typedef enum { ACC_ZERO, ACC_SCALE, ACC_STORE } AccOp;

/* Keys (or queries) are visited in blocks of this many: the scores of a
 * block are computed first, then their exponentials in one loop of plain
 * arithmetic that LLVM vectorizes (gen_exp_f32), then the products. */
#define BLOCK 16
/* Rows of the output computed together on a vector target: each key (or
 * query) row loaded serves this many dot products and accumulations, whose
 * independent chains hide the latency of one. The GPU keeps one row. */
#define TILE 4

/* The most stack the transposed other side of block_dots may take; past
 * it (very long keys or heads) the kernel keeps dot_rows. */
#define TRANSPOSED_MAX_BYTES (512 * 1024)

/* Small builders: an i64 or element-type constant, integer arithmetic,
 * a stack slot (set to init unless NULL) and its value, minimum and
 * maximum, exp and log at the element type, x == -inf. */
LLVMValueRef att_i64c(Att *a, int64_t v);
LLVMValueRef att_real(Att *a, double v);
LLVMValueRef att_iadd(Att *a, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef att_imul(Att *a, LLVMValueRef x, int64_t c);
LLVMValueRef att_slot(Att *a, LLVMTypeRef ty, LLVMValueRef init);
LLVMValueRef att_get(Att *a, LLVMValueRef s);
LLVMValueRef att_min_i64(Att *a, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef att_max_t(Att *a, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef att_exp_t(Att *a, LLVMValueRef x);
LLVMValueRef att_log_t(Att *a, LLVMValueRef x);
LLVMValueRef att_is_neg_inf(Att *a, LLVMValueRef x);

/* Chunks of w elements (vectors, or a lane each on the GPU): load, store
 * and splat; the two passes (whole chunks, then the rest) over [0, len);
 * accumulators zeroed, scaled or stored. */
LLVMValueRef att_load_w(Att *a, LLVMValueRef base, LLVMValueRef index, int w);
LLVMValueRef att_store_w(Att *a, LLVMValueRef value, LLVMValueRef base, LLVMValueRef index, int w);
LLVMValueRef att_splat_w(Att *a, LLVMValueRef x, int w);
bool att_chunk_pass_begin(Att *a, int pass, int64_t len, GenLoop *loop, int *lw, LLVMValueRef *at);
void att_acc_apply(Att *a, AccOp op, LLVMValueRef acc, int64_t len, LLVMValueRef c, LLVMValueRef x);

/* Control flow: skip what follows while `skip` holds. */
LLVMBasicBlockRef att_begin_unless(Att *a, LLVMValueRef skip);
void att_end_unless(Att *a, LLVMBasicBlockRef next);

/* A row of len elements (private to the thread on the GPU), and a stack
 * array aligned for vectors. */
LLVMValueRef att_row_array(Att *a, int64_t len, const char *name);
LLVMValueRef att_tr_array(Att *a, int64_t len);

/* n rows against one: dot products and accumulations (dot_rows,
 * axpy_rows); a block of BLOCK keys at once: transposed other side
 * (transpose_rows), its scores (block_dots), exponentials, maximum and
 * accumulation (block_axpy). */
void att_dot_rows(Att *a, LLVMValueRef *xs, LLVMValueRef y, int n, int64_t len, LLVMValueRef *out);
void att_axpy_rows(Att *a, LLVMValueRef *acc, LLVMValueRef *c, int n, int64_t len, LLVMValueRef x);
void att_transpose_rows(Att *a, LLVMValueRef src, int64_t rows, int64_t len, LLVMValueRef dst,
                        int64_t padded);
void att_block_dots(Att *a, LLVMValueRef *xs, int n, int64_t len, LLVMValueRef tr,
                    LLVMValueRef at, LLVMValueRef *out);
void att_block_exp(Att *a, LLVMValueRef s, LLVMValueRef sub, LLVMValueRef sub0, LLVMValueRef p);
LLVMValueRef att_block_max(Att *a, LLVMValueRef s);
void att_block_axpy(Att *a, LLVMValueRef *acc, LLVMValueRef *c, int n, int64_t len,
                    LLVMValueRef x, int64_t stride, LLVMValueRef count);

#endif
