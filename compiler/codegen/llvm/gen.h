/* What every target's LLVM emission shares: the LLVM objects of one
 * module, small builders for types, loops and calls, and the emitters of
 * the kernels whose code is the same on every target (loops, scatters,
 * attention, the thread-pool entry). A target (target.h) chooses, kernel
 * by kernel, which emitter runs and how. */
#ifndef TFM_GEN_H
#define TFM_GEN_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include <stdbool.h>
#include <stddef.h>

#include "kernel.h"
#include "target.h"

typedef struct Gen {
  LLVMContextRef context;
  LLVMModuleRef module;
  LLVMBuilderRef builder;
  const KernelPlan *plan;
  const Graph *graph;
  const char *prefix;
  const Target *target;        /* what the module is for: its kernels and entry */
  LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, void_type, ptr; /* ptr is i8* */
  LLVMTypeRef range_fn;        /* void (i8*, i64, i64), as tfm_range_fn */
  LLVMValueRef *functions;     /* one per plan function */
  LLVMValueRef *constant_data; /* per node: global of a non-splat constant */
  int vector_bits;             /* of the machine's widest float vectors: 512, 256, or 0 (none) */
  /* NULL, or functions gen_bf16_round and gen_bf16_narrow call instead of
   * their integer sequence: float -> float, float -> i16 (the CPU's
   * AVX512-BF16 instruction, cpu/bf16_convert.c) */
  LLVMValueRef bf16_round_fn, bf16_narrow_fn;
} Gen;

/* A counted loop [begin, end) whose counter lives in an alloca (mem2reg
 * turns it into a phi), so loops nest anywhere inside an expression. */
typedef struct GenLoop {
  LLVMValueRef counter, index;
  LLVMBasicBlockRef header, exit;
} GenLoop;

/* The type a value of this dtype is computed in (bf16: f32). */
LLVMTypeRef gen_type(const Gen *gen, GraphDtype dtype);
/* The type it is stored in (bf16: i16, the high half of an f32). */
LLVMTypeRef gen_storage_type(const Gen *gen, GraphDtype dtype);
/* bf16 conversions: widen (exact), round an f32 to the nearest bf16 value
 * (ties to even, NaN stays NaN) as f32, narrow to the i16 bits so rounded;
 * through gen->bf16_round_fn / bf16_narrow_fn where the target gives them. */
LLVMValueRef gen_bf16_widen(Gen *gen, LLVMValueRef bits);
LLVMValueRef gen_bf16_round(Gen *gen, LLVMValueRef x);
LLVMValueRef gen_bf16_narrow(Gen *gen, LLVMValueRef x);
/* A load or store of one element of a buffer of this dtype: a value in
 * gen_type, memory in gen_storage_type. */
LLVMValueRef gen_load_value(Gen *gen, GraphDtype dtype, LLVMValueRef ptr);
void gen_store_value(Gen *gen, GraphDtype dtype, LLVMValueRef v, LLVMValueRef ptr);
LLVMValueRef gen_i64(const Gen *gen, int64_t value);
LLVMValueRef gen_i32(const Gen *gen, int32_t value);
/* `value` converted as the evaluator stores a double into this dtype. */
LLVMValueRef gen_constant(const Gen *gen, GraphDtype dtype, double value);

LLVMValueRef gen_entry_alloca(Gen *gen, LLVMTypeRef type, const char *name);
void gen_loop_begin(Gen *gen, GenLoop *loop, LLVMValueRef begin, LLVMValueRef end);
void gen_loop_end(Gen *gen, GenLoop *loop);
/* The same, asking LLVM's vectorizer to interleave `count` iterations of
 * its vectors (independent chains that hide each other's latency). */
void gen_loop_end_interleaved(Gen *gen, GenLoop *loop, unsigned count);

/* x y + z as llvm.fmuladd at the operands' type (scalar or vector): one
 * rounding where the target has FMA (half the instructions of a multiply
 * and an add). */
LLVMValueRef gen_fmuladd(Gen *gen, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z);
/* The scalar x in every one of `lanes` lanes. */
LLVMValueRef gen_splat(Gen *gen, LLVMValueRef x, unsigned lanes);
/* The sum of a vector's lanes, halves added pairwise (a scalar is itself). */
LLVMValueRef gen_lane_sum(Gen *gen, LLVMValueRef v);
/* v[0..n) (n vectors of n lanes, n a power of two, at most 32) transposed
 * in place: one stage per bit of the index swaps that bit of the row with
 * the same bit of the lane, one two-source shuffle a row a stage. */
void gen_transpose_square(Gen *gen, LLVMValueRef *v, int n);
/* Calls an overloaded intrinsic such as "llvm.sqrt" at `type`. */
LLVMValueRef gen_intrinsic(Gen *gen, const char *name, LLVMTypeRef *types, int num_types,
                           LLVMValueRef *args, int num_args);
/* Calls a C library function (declared on first use). */
LLVMValueRef gen_libcall(Gen *gen, const char *name, LLVMTypeRef result, LLVMTypeRef *params,
                         LLVMValueRef *args, int num_args);
/* Calls a libm function of one or two `type` arguments, marked pure. */
LLVMValueRef gen_math_call(Gen *gen, const char *name, LLVMTypeRef type, LLVMValueRef *args,
                           int num_args);

/* expf / tanhf of an f32, or of each lane of a vector of f32, as inline
 * arithmetic (math.c), so that loops over them vectorize. */
LLVMValueRef gen_exp_f32(Gen *gen, LLVMValueRef x);
LLVMValueRef gen_tanh_f32(Gen *gen, LLVMValueRef x);

/* Typed pointer to element `index` of `base`. */
LLVMValueRef gen_element(Gen *gen, LLVMTypeRef element, LLVMValueRef base, LLVMValueRef index);
/* i64 a * c and a + b; element i of base, of type t, loaded. */
LLVMValueRef gen_imul(Gen *gen, LLVMValueRef a, int64_t c);
LLVMValueRef gen_iadd(Gen *gen, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef gen_load_at(Gen *gen, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef i);
/* The kernel's buffer argument `i` as a pointer to `element`. */
LLVMValueRef gen_kernel_arg(Gen *gen, LLVMValueRef args, int i, LLVMTypeRef element);
/* The index of node `node`'s buffer among the kernel's arguments, or -1
 * (a kernel's arguments are distinct buffers). */
int gen_kernel_arg_of(const Gen *gen, const Kernel *kernel, GraphId node);
/* A new kernel function (internal, of the range type) positioned at its entry. */
LLVMValueRef gen_kernel_function(Gen *gen, int function);
/* Adds enum function attributes ("noinline", ...) by name. */
void gen_add_attributes(Gen *gen, LLVMValueRef fn, const char *const *names, int count);

/* Element `index` (i64) of random node `node`: Philox 4x32-10 as philox.c. */
LLVMValueRef gen_philox_uniform(Gen *gen, const GraphNode *node, LLVMValueRef offset,
                                LLVMValueRef index);

void emit_loop_kernel(Gen *gen, int function, const Kernel *kernel);

/* A loop kernel as the GPU's cooperative rows (ptx_row.h): `threads`
 * consecutive work items share each row, the range function's begin being
 * the work item (its end is ignored). `combine` turns each thread's partial
 * accumulator of reduction `reduce` (the kernel's `slot`-th shared one:
 * its hoisted reductions in order, then its root) into the row's value, in
 * every thread of the row (ptx/row.c: warp shuffles, shared memory). */
typedef struct RowSplit {
  int64_t threads;
  bool over_range; /* the function runs every work item of [begin, end) (on the CPU) */
  LLVMValueRef (*combine)(Gen *gen, int function, int slot, const GraphNode *reduce,
                          LLVMValueRef partial, LLVMValueRef tid, int64_t threads);
} RowSplit;
void emit_split_loop_kernel(Gen *gen, int function, const Kernel *kernel,
                                const RowSplit *split);
/* A reduction's identity, and its accumulator after one more element (a
 * sum, or a max that keeps `a` on ties and takes a NaN `v`). */
LLVMValueRef emit_reduction_init(Gen *gen, const GraphNode *reduce);
LLVMValueRef emit_reduction_step(Gen *gen, const GraphNode *reduce, LLVMValueRef a,
                                LLVMValueRef v);
/* scatter_add: the range over the result's columns, or with block_rows
 * > 0 (the GPU's) over (block of block_rows rows, column) pairs. */
void emit_scatter_kernel(Gen *gen, int function, const Kernel *kernel,
                             int64_t block_rows);
/* The GPU's lanes sharing one attention row (ptx/row.c): lane l of a row
 * takes elements l, l + lanes, ... of each whole chunk of `lanes` elements
 * of the head's vectors, and `sum` adds a value over the row's lanes, every
 * lane getting the same bits. */
typedef struct RowLanes {
  int lanes;
  LLVMValueRef (*sum)(Gen *gen, LLVMValueRef value, LLVMValueRef lane);
} RowLanes;
/* Where a fused attention op's mask input is read: its axes are the last
 * of the scores' [batch..., T, S] (each equal or 1, ops.def), a size-1
 * axis has stride 0 (gen_mask_map, from the mask's shape and q's
 * [batch..., T, D]); gen_mask_row: the offset of row i of batch `batch`
 * (flat over the batch axes), key j at j * stride[rank - 1] on. */
typedef struct GenMaskMap {
  LLVMValueRef data; /* NULL: no mask */
  int rank;
  int64_t dims[GRAPH_MAX_RANK], stride[GRAPH_MAX_RANK];
} GenMaskMap;
GenMaskMap gen_mask_map(LLVMValueRef data, const GraphShape *mask, const GraphShape *q);
LLVMValueRef gen_mask_row(Gen *gen, const GenMaskMap *m, LLVMValueRef batch, LLVMValueRef i);
/* attention.c: the fused attention ops, one output row per range item
 * (vectors of gen->vector_bits; scalars when it is 0), or with `lanes`
 * (the GPU) one row per `lanes` consecutive items. */
void emit_attention_kernel(Gen *gen, int function, const Kernel *kernel,
                               const RowLanes *lanes);
/* pool_entry.c: P_run calling each kernel over its range
 * (gen->target->range_items items) on the runtime's thread pool, P_update
 * and the region sizes (the CPU's entry, cpu.h). */
void emit_pool_entry(Gen *gen);
/* The parts of emit_pool_entry that a CUDA host module shares: an entry
 * PREFIX_SUFFIX(persistent, scratch[, pool]) with the builder at its
 * start, and a region size PREFIX_SUFFIX. */
LLVMValueRef gen_add_entry(Gen *gen, const char *suffix, int num_params);
void gen_emit_size(Gen *gen, const char *suffix, int64_t bytes);
/* Fills the type fields of gen from gen->context. */
void gen_init_types(Gen *gen);
/* The module's functions and constants, one slot per plan function and
 * node (gen_free_tables frees them); false when out of memory. */
bool gen_alloc_tables(Gen *gen);
void gen_free_tables(Gen *gen);
/* Every plan function through gen->target->emit_kernel, then its entry
 * (gen->target->emit_entry); false when out of memory. */
bool gen_emit_module(Gen *gen);
/* module.c, the steps every driver takes: false with the reason in err
 * ("WHAT: LLVM's message"). */
bool gen_fail_llvm(char *err, size_t size, const char *what, char *message);
bool gen_verify(LLVMModuleRef module, char *err, size_t size);
bool gen_optimize(LLVMModuleRef module, LLVMTargetMachineRef machine, char *err, size_t size);
/* The module as the machine's assembly (malloc'd), NULL with a message. */
char *gen_machine_text(LLVMTargetMachineRef machine, LLVMModuleRef module, const char *what,
                       char *err, size_t size);

#endif
