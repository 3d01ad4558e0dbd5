/* What the parts of the CPU backend share: the LLVM objects of one module
 * and small builders for types, loops and calls. */
#ifndef TFM_CPU_INTERNAL_H
#define TFM_CPU_INTERNAL_H

#include <llvm-c/Core.h>

#include "cpu.h"

typedef struct CpuGen {
  LLVMContextRef context;
  LLVMModuleRef module;
  LLVMBuilderRef builder;
  const KernelPlan *plan;
  const Graph *graph;
  const char *prefix;
  LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, void_type, ptr; /* ptr is i8* */
  LLVMTypeRef range_fn;        /* void (i8*, i64, i64), as tfm_range_fn */
  LLVMValueRef *functions;     /* one per plan function */
  LLVMValueRef *constant_data; /* per node: global of a non-splat constant */
  int vector_bits;             /* of the target's widest float vectors: 512 or 256 */
  LLVMValueRef gemm[2][2][2];  /* [f64][ta][tb]: the module's GEMM functions, made on use */
  LLVMValueRef gemm_bf16[2][2]; /* [ta][tb]: bf16 operands and C, f32 accumulation */
  const char *gpu_ptx;         /* CpuOptions.gpu_ptx */
  bool gpu_cublas;             /* CpuOptions.gpu_cublas */
  bool gpu_threads;            /* CpuOptions.gpu_threads */
  bool ptx;                    /* the module is NVPTX (ptx.c), not the host's */
} CpuGen;

/* A counted loop [begin, end) whose counter lives in an alloca (mem2reg
 * turns it into a phi), so loops nest anywhere inside an expression. */
typedef struct CpuLoop {
  LLVMValueRef counter, index;
  LLVMBasicBlockRef header, exit;
} CpuLoop;

/* The type a value of this dtype is computed in (bf16: f32). */
LLVMTypeRef cpu_type(const CpuGen *gen, GraphDtype dtype);
/* The type it is stored in (bf16: i16, the high half of an f32). */
LLVMTypeRef cpu_storage_type(const CpuGen *gen, GraphDtype dtype);
/* bf16 conversions: widen (exact), round an f32 to the nearest bf16 value
 * (ties to even, NaN stays NaN) as f32, narrow to the i16 bits so rounded. */
LLVMValueRef cpu_bf16_widen(CpuGen *gen, LLVMValueRef bits);
LLVMValueRef cpu_bf16_round(CpuGen *gen, LLVMValueRef x);
LLVMValueRef cpu_bf16_narrow(CpuGen *gen, LLVMValueRef x);
/* A load or store of one element of a buffer of this dtype: a value in
 * cpu_type, memory in cpu_storage_type. */
LLVMValueRef cpu_load_value(CpuGen *gen, GraphDtype dtype, LLVMValueRef ptr);
void cpu_store_value(CpuGen *gen, GraphDtype dtype, LLVMValueRef v, LLVMValueRef ptr);
LLVMValueRef cpu_i64(const CpuGen *gen, int64_t value);
LLVMValueRef cpu_i32(const CpuGen *gen, int32_t value);
/* `value` converted as the evaluator stores a double into this dtype. */
LLVMValueRef cpu_constant(const CpuGen *gen, GraphDtype dtype, double value);

LLVMValueRef cpu_entry_alloca(CpuGen *gen, LLVMTypeRef type, const char *name);
void cpu_loop_begin(CpuGen *gen, CpuLoop *loop, LLVMValueRef begin, LLVMValueRef end);
void cpu_loop_end(CpuGen *gen, CpuLoop *loop);

/* x y + z as llvm.fmuladd at the operands' type (scalar or vector): one
 * rounding where the target has FMA (half the instructions of a multiply
 * and an add). */
LLVMValueRef cpu_fmuladd(CpuGen *gen, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z);
/* The scalar x in every one of `lanes` lanes. */
LLVMValueRef cpu_splat(CpuGen *gen, LLVMValueRef x, unsigned lanes);
/* The sum of a vector's lanes, halves added pairwise (a scalar is itself). */
LLVMValueRef cpu_lane_sum(CpuGen *gen, LLVMValueRef v);
/* Calls an overloaded intrinsic such as "llvm.sqrt" at `type`. */
LLVMValueRef cpu_intrinsic(CpuGen *gen, const char *name, LLVMTypeRef *types, int num_types,
                           LLVMValueRef *args, int num_args);
/* Calls a C library function (declared on first use). */
LLVMValueRef cpu_libcall(CpuGen *gen, const char *name, LLVMTypeRef result, LLVMTypeRef *params,
                         LLVMValueRef *args, int num_args);
/* Calls a libm function of one or two `type` arguments, marked pure. */
LLVMValueRef cpu_math_call(CpuGen *gen, const char *name, LLVMTypeRef type, LLVMValueRef *args,
                           int num_args);

/* expf / tanhf of an f32, or of each lane of a vector of f32, as inline
 * arithmetic (cpu_math.c), so that loops over them vectorize. */
LLVMValueRef cpu_exp_f32(CpuGen *gen, LLVMValueRef x);
LLVMValueRef cpu_tanh_f32(CpuGen *gen, LLVMValueRef x);

/* Typed pointer to element `index` of `base`. */
LLVMValueRef cpu_element(CpuGen *gen, LLVMTypeRef element, LLVMValueRef base, LLVMValueRef index);
/* The kernel's buffer argument `i` as a pointer to `element`. */
LLVMValueRef cpu_kernel_arg(CpuGen *gen, LLVMValueRef args, int i, LLVMTypeRef element);
/* A new kernel function (internal, of the range type) positioned at its entry. */
LLVMValueRef cpu_kernel_function(CpuGen *gen, int function);
/* Adds enum function attributes ("noinline", ...) by name. */
void cpu_add_attributes(CpuGen *gen, LLVMValueRef fn, const char *const *names, int count);

/* Element `index` (i64) of random node `node`: Philox 4x32-10 as philox.c. */
LLVMValueRef cpu_philox_uniform(CpuGen *gen, const GraphNode *node, LLVMValueRef offset,
                                LLVMValueRef index);

/* The module's GEMM for element type t (f32 or f64) and the transpose
 * flags, emitted on first use: void (T *c, T *a, T *b, i64 m, i64 n, i64 k,
 * i64 lda, i64 ldb, i64 ldc) computing c = op(a) op(b), row-major. */
LLVMValueRef cpu_gemm_function(CpuGen *gen, LLVMTypeRef t, bool ta, bool tb);
/* The same for bf16 (i16) a, b and c, summed in f32 and rounded once. */
LLVMValueRef cpu_gemm_bf16_function(CpuGen *gen, bool ta, bool tb);

void cpu_emit_loop_kernel(CpuGen *gen, int function, const Kernel *kernel);

/* A loop kernel as the GPU's cooperative rows (ptx_row.h): `threads`
 * consecutive work items share each row, the range function's begin being
 * the work item (its end is ignored). `combine` turns each thread's partial
 * accumulator of reduction `reduce` (the kernel's `slot`-th shared one:
 * its hoisted reductions in order, then its root) into the row's value, in
 * every thread of the row (ptx_row.c: warp shuffles, shared memory). */
typedef struct CpuRowSplit {
  int64_t threads;
  bool over_range; /* the function runs every work item of [begin, end) (on the CPU) */
  LLVMValueRef (*combine)(CpuGen *gen, int function, int slot, const GraphNode *reduce,
                          LLVMValueRef partial, LLVMValueRef tid, int64_t threads);
} CpuRowSplit;
void cpu_emit_split_loop_kernel(CpuGen *gen, int function, const Kernel *kernel,
                                const CpuRowSplit *split);
/* A reduction's identity, and its accumulator after one more element (a
 * sum, or a max that keeps `a` on ties and takes a NaN `v`). */
LLVMValueRef cpu_reduction_init(CpuGen *gen, const GraphNode *reduce);
LLVMValueRef cpu_reduction_step(CpuGen *gen, const GraphNode *reduce, LLVMValueRef a,
                                LLVMValueRef v);
void cpu_emit_dot_kernel(CpuGen *gen, int function, const Kernel *kernel);
/* A CPU dot kernel's range: rows x column blocks of this width (cpu_dot.c). */
int64_t cpu_dot_column_block(const CpuGen *gen, const Kernel *kernel);
int64_t cpu_dot_items(const CpuGen *gen, const Kernel *kernel);
/* scatter_add: the range over the result's columns, or with block_rows
 * > 0 (the GPU's) over (block of block_rows rows, column) pairs. */
void cpu_emit_scatter_kernel(CpuGen *gen, int function, const Kernel *kernel,
                             int64_t block_rows);
/* The GPU's lanes sharing one attention row (ptx_row.c): lane l of a row
 * takes elements l, l + lanes, ... of each whole chunk of `lanes` elements
 * of the head's vectors, and `sum` adds a value over the row's lanes, every
 * lane getting the same bits. */
typedef struct CpuLanes {
  int lanes;
  LLVMValueRef (*sum)(CpuGen *gen, LLVMValueRef value, LLVMValueRef lane);
} CpuLanes;
/* cpu_attention.c: the fused attention ops, one output row per range item
 * (vectors of gen->vector_bits; scalars when it is 0), or with `lanes`
 * (the GPU) one row per `lanes` consecutive items. */
void cpu_emit_attention_kernel(CpuGen *gen, int function, const Kernel *kernel,
                               const CpuLanes *lanes);
void cpu_emit_entry(CpuGen *gen);
/* The parts of cpu_emit_entry that a CUDA host module shares: an entry
 * PREFIX_SUFFIX(persistent, scratch[, pool]) with the builder at its
 * start, and a region size PREFIX_SUFFIX. */
LLVMValueRef cpu_add_entry(CpuGen *gen, const char *suffix, int num_params);
void cpu_emit_size(CpuGen *gen, const char *suffix, int64_t bytes);
/* Fills the type fields of gen from gen->context. */
void cpu_init_types(CpuGen *gen);
/* gpu_host.c: P_run, P_update and the sizes of a CUDA build's host module. */
void gpu_emit_host_entry(CpuGen *gen, const char *ptx);
/* ptx_row.c: for the GPU plan run on the CPU (gpu_threads), a kernel that
 * the GPU splits into cooperative rows as those rows with one thread each
 * (a range over rows): the split's loops and indexing without shuffles.
 * False, emitting nothing, for a kernel the GPU does not split. */
bool ptx_emit_row_kernel_serial(CpuGen *gen, int function, const Kernel *kernel);
/* The rows of a scatter_add's [V, D] result one GPU thread takes (of one
 * column): enough (V / R) x D threads to fill the GPU, R >= 1. */
int64_t ptx_scatter_block_rows(const GraphNode *scatter);
/* ptx_dot.c: a dot as a range over elements of C (one GPU thread each). */
void ptx_emit_dot_kernel(CpuGen *gen, int function, const Kernel *kernel);

#endif
