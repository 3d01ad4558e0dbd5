/* What the pieces of kernel formation share: index maps used while
 * deciding which nodes to fuse, the structural signature and the memory
 * plan. */
#ifndef TFM_KERNEL_INTERNAL_H
#define TFM_KERNEL_INTERNAL_H

#include "kernel.h"

/* One axis of an index map: affine in the kernel's vars, or opaque (data
 * dependent or a div/mod that does not simplify) with the vars it may read. */
typedef struct KernelIndexAxis {
  bool affine;
  uint32_t deps;
  KernelAffine value;
} KernelIndexAxis;

/* The index at which a node is read, one axis per dimension of the node. */
typedef struct KernelIndexMap {
  int rank;
  KernelIndexAxis axis[GRAPH_MAX_RANK];
} KernelIndexMap;

void kernel_index_identity(KernelIndexMap *map, int rank);

/* Given the index `out` at which `consumer` is read, the index at which it
 * reads input `slot`. A reduction's reduced axes become the vars
 * reduce_first_var, reduce_first_var + 1, ... in axis order. `extent`
 * bounds every var (for simplifying reshapes). */
void kernel_index_through(const Graph *g, const GraphNode *consumer, int slot, int reduce_first_var,
                          const int64_t *extent, const KernelIndexMap *out, KernelIndexMap *in);

/* Equal affine maps: the same element for every value of the vars. */
bool kernel_index_equal(const KernelIndexMap *a, const KernelIndexMap *b);

/* Affine and reading only vars below `outer_axes`. */
bool kernel_index_outer_only(const KernelIndexMap *map, int outer_axes);

/* What computing one element of an op costs, in adds: movement 0, an add
 * or multiply 1, a division or square root 4, a transcendental
 * KERNEL_COST_TRANSCENDENTAL; anything not elementwise (reductions,
 * contractions, random) KERNEL_COST_NOT_ELEMENTWISE. */
#define KERNEL_COST_TRANSCENDENTAL 16
#define KERNEL_COST_NOT_ELEMENTWISE 1000
int kernel_op_cost(GraphOp op);

/* Assigns Kernel.function by structural equality; false when out of memory. */
bool kernel_signature_assign(KernelPlan *plan);

/* Merges an output buffer with a dying input where a kernel may write in
 * place (before the signature, which sees the merged argument lists). */
bool kernel_inplace_plan(KernelPlan *plan);

/* Sets each buffer's region and offset from the kernels' use of it. */
bool kernel_memory_plan(KernelPlan *plan);

#endif
