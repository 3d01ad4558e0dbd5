/* Kernel formation: groups the nodes of a graph into kernels and places
 * every buffer in one arena.
 *
 * A kernel computes one materialised node (its root) as a loop nest over the
 * root's output. Every other node of the kernel is inlined: computed on the
 * fly at the index the consumer asks for, so elementwise chains fuse and
 * movement ops (permute, broadcast, reshape, slice, pad, concat) become index
 * arithmetic instead of copies. A reduction may be inlined too when its
 * result depends only on the kernel's outer (row) loop: it is then computed
 * once per row before the inner loops ("hoisted"), which makes a softmax or
 * a layernorm row one kernel. Contractions and scatter_add are kernels of
 * their own over materialised operands. Before planning, kernel_recompute
 * copies a cheap kernel read by several loop kernels into each of them, so
 * what the backward pass reads again is recomputed rather than stored.
 *
 * Kernels with the same structure (same ops, attributes, shapes and argument
 * types; only their buffers differ) share one function. */
#ifndef TFM_KERNEL_H
#define TFM_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph.h"

/* How a node is computed. */
typedef enum KernelPlacement {
  KERNEL_UNUSED,  /* dead: no output or update needs it */
  KERNEL_LEAF,    /* input, param or state: a buffer the caller fills */
  KERNEL_FREE,    /* constant or iota: recomputed wherever it is read */
  KERNEL_INLINED, /* computed inside the kernel kernel_of names */
  KERNEL_ROOT,    /* the output of the kernel kernel_of names */
  KERNEL_VIEW,    /* a reshape of a materialised node: shares its buffer */
} KernelPlacement;

typedef enum KernelKind {
  KERNEL_LOOP,    /* elementwise, movement, reduction, source roots */
  KERNEL_DOT,     /* a batched contraction */
  KERNEL_SCATTER, /* scatter_add */
  KERNEL_ATTENTION, /* a fused attention op: one row of its output per range item */
} KernelKind;

typedef enum KernelRegion {
  KERNEL_PERSISTENT, /* leaves and outputs: live across steps */
  KERNEL_SCRATCH,    /* intermediates: offsets reused by liveness */
} KernelRegion;

/* The affine index of one axis: constant + sum coef[v] * var v, where the
 * vars are the kernel's loop counters (its axes first, then the reduced axes
 * of its reductions). */
#define KERNEL_MAX_VARS 24
typedef struct KernelAffine {
  int64_t constant;
  int64_t coef[KERNEL_MAX_VARS];
} KernelAffine;

/* Where a hoisted reduction is read, as a function of the kernel's outer
 * axes (vars 0 .. outer_axes-1). */
typedef struct KernelHoisted {
  GraphId node;
  KernelAffine index[GRAPH_MAX_RANK];
} KernelHoisted;

typedef struct KernelBuffer {
  GraphId node;       /* the materialised node */
  GraphDtype storage; /* f32, f64, i32 or bf16 (2 bytes) */
  int64_t bytes;
  KernelRegion region;
  int64_t offset;   /* into the region, 64-byte aligned */
  int first_kernel; /* -1 for leaves */
  int last_kernel;  /* num_kernels for buffers live at the end of a step */
} KernelBuffer;

typedef struct Kernel {
  KernelKind kind;
  GraphId root;
  int num_nodes; /* the fused nodes in id order, the root last */
  GraphId *nodes;
  int num_hoisted; /* in id order, so a hoisted input comes first */
  KernelHoisted *hoisted;
  int outer_axes; /* root axes [0, outer_axes) form the parallel range */
  int64_t rows;   /* length of that range */
  GraphId also;   /* written by this kernel too (args[1]), else GRAPH_NONE: an
                   * attention's attention_lse of its q, k and mask, an
                   * attention_grad_k's attention_grad_v of its operands, or
                   * with KernelPlanOptions.merge_update_values a loop
                   * kernel's update value of the root's shape, computed at
                   * each element, or with store_row_statistics one of its
                   * hoisted reductions, stored once a row */
  GraphId also_q; /* with KernelPlanOptions.merge_attention_backward_from, an
                   * attention_grad_k kernel's attention_grad_q of the same
                   * operands (args[2]), else GRAPH_NONE: its range is then
                   * (batch, head), so that one thread sums each dq row; or
                   * a loop kernel's second update value, as also */
  int num_args;   /* buffers: the outputs (args[0] the root's, then also's and
                   * also_q's), then the inputs */
  int *args;
  int function; /* kernels with equal structure share a function */
} Kernel;

typedef struct KernelPlan {
  const Graph *graph;
  KernelPlacement *placement; /* per node */
  int *kernel_of;             /* per node: kernel of INLINED and ROOT nodes, else -1 */
  int *buffer_of;             /* per node: buffer of LEAF, ROOT and VIEW nodes, else -1 */
  int num_kernels;
  Kernel *kernels; /* in execution order */
  int num_buffers;
  KernelBuffer *buffers;
  int num_functions;
  int *function_kernel; /* per function: the first kernel that has it */
  int64_t persistent_bytes, scratch_bytes;
} KernelPlan;

/* Copies cheap loop kernels whose output several loop kernels read into
 * each of those kernels (kernel_recompute.c), so the value is recomputed
 * where it is read instead of stored: run on the optimised graph before
 * planning it. Returns a new graph (in is unchanged), or NULL with a
 * message in err. When map is not NULL it receives the new id of every
 * node of `in` (graph_count(in) entries; a copied node: its first copy). */
Graph *kernel_recompute(const Graph *in, GraphId *map, char *err, size_t err_size);

/* What a plan may assume about the backend that runs it. */
typedef struct KernelPlanOptions {
  /* attention_grad_q joins the attention_grad_k (+ grad_v) kernel of the
   * same operands when they have at least this many (batch, head) pairs
   * (0: never): that kernel then runs one pair a range item, and its
   * scores and dp serve dq, dk and dv. For the CPU; the GPU's warps need a
   * row each. */
  int64_t merge_attention_backward_from;
  /* Sums over leading axes of many rows (a bias's gradient) are computed
   * in groups of rows and then over the groups (kernel_column_sums.c), so
   * that each thread reads whole rows. For the CPU; the GPU's threads
   * share a long column instead (ptx/row.c). */
  bool split_column_sums;
  /* An update value that one loop kernel alone reads at its own element
   * (Adam's moments, read by the parameter's update) is stored by that
   * kernel (Kernel.also, also_q) rather than by a kernel of its own: one
   * pass over the gradient and the state instead of three. For the CPU. */
  bool merge_update_values;
  /* A row reduction that several kernels read (a cross-entropy's max and
   * sum of exponentials, a layernorm's variance) is computed by the first
   * of them among its hoisted reductions and stored from there
   * (Kernel.also, also_q), one element a row, rather than by a kernel of
   * its own that reads the rows once more. For the CPU; the GPU's split
   * rows do not store hoisted values. */
  bool store_row_statistics;
  /* A sum or max of at least 2 x long_reduction_chunk elements a row into
   * at most long_reduction_rows rows (0: never) is reduced in chunks of
   * that many elements and then over the chunks
   * (kernel_block_reductions.c), so that a long row spreads over many
   * threads. For the GPU, whose rows get a block each at most. */
  int64_t long_reduction_chunk, long_reduction_rows;
  /* A kernel hoists at most this many row reductions (0: as many as its
   * loop variables allow); the others become kernels of their own. For
   * the GPU, where each hoisted value holds registers through the rest of
   * the row (a sum of many parameters' squared gradients spilled). */
  int max_hoisted;
} KernelPlanOptions;

/* The graph a backend plans: `in` (optimised) with its column sums and
 * its long reductions split where options say (kernel_split_column_sums,
 * kernel_split_long_reductions), then recomputed (kernel_recompute). NULL
 * with a message in err on failure; map as for kernel_recompute. */
Graph *kernel_prepare(const Graph *in, const KernelPlanOptions *options, GraphId *map, char *err,
                      size_t err_size);
/* Sums over leading axes of rows computed as sums of groups of rows and
 * then of the groups (kernel_column_sums.c). Returns a new graph, or NULL
 * with a message in err; map as for kernel_recompute. */
Graph *kernel_split_column_sums(const Graph *in, GraphId *map, char *err, size_t err_size);
/* Reductions of rows of at least 2 x `chunk` elements into at most
 * `max_rows` rows computed over chunks of `chunk` elements, then over the
 * chunks' results (kernel_block_reductions.c). Returns a new graph, or
 * NULL with a message in err; map as for kernel_recompute. */
Graph *kernel_split_long_reductions(const Graph *in, int64_t chunk, int64_t max_rows,
                                    GraphId *map, char *err, size_t err_size);

/* Plans `g` (which must outlive the plan); options NULL: none. NULL with a
 * message in err on failure. */
KernelPlan *kernel_plan_build(const Graph *g, const KernelPlanOptions *options, char *err,
                              size_t err_size);
/* The nodes kernel k writes, in the order of args[0 ..): the root, then
 * also and also_q where set; returns how many (1 to 3). */
int kernel_outputs(const Kernel *k, GraphId out[3]);
/* Whether `id` is one of kernel k's hoisted reductions. */
bool kernel_is_hoisted(const Kernel *k, GraphId id);
void kernel_plan_free(KernelPlan *plan);

/* The buffer of a node, or NULL when it has none (inlined, free, unused). */
const KernelBuffer *kernel_plan_buffer(const KernelPlan *plan, GraphId node);

/* Human-readable listing (tfmc emit kernels): one kernel a line with its
 * fused nodes and buffers, then the buffers. */
void kernel_plan_print(const KernelPlan *plan, FILE *out);
/* Whether `op` is one of the fused attention ops (a KERNEL_ATTENTION root). */
bool kernel_op_is_attention(GraphOp op);
/* Whether node `id` is a bf16 value widened (a cast of a bf16 node), so
 * that rounding it to bf16 is exact: attention's operands in --dtype bf16
 * graphs, which its tensor-core and AMX kernels take as bf16. */
bool kernel_bf16_valued(const Graph *g, GraphId id);
/* "loop", "dot", "scatter" or "attention": the listing's and --profile's name of a kind. */
const char *kernel_kind_name(KernelKind kind);

/* Nominal cost of one kernel (kernel_cost.c): floating-point operations
 * and the bytes of its argument buffers. */
int64_t kernel_flops(const KernelPlan *plan, int kernel);
int64_t kernel_bytes(const KernelPlan *plan, int kernel);

/* Storage type of a dtype: the dtype itself. bf16 is stored in 2 bytes
 * and computed in f32 (loads widen, stores round to nearest even). */
GraphDtype kernel_storage_dtype(GraphDtype dtype);
int64_t kernel_storage_size(GraphDtype dtype);

#endif
