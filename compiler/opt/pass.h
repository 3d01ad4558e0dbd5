/* Graph-to-graph passes, one per file. Each reads `in` (unchanged) and
 * returns a new graph with the same inputs, params, states, outputs and
 * updates, nodes renumbered densely in topological order; or NULL with a
 * message in err (when err_size > 0) if a node could not be rebuilt. */
#ifndef TFM_PASS_H
#define TFM_PASS_H

#include "graph.h"

/* Evaluates nodes whose inputs are all constants (small results, or any
 * size when the result is a splat). */
Graph *pass_fold(const Graph *in, char *err, size_t err_size);
/* Algebraic identities: x*1, x+0, x-0, x/1, neg(neg x), composed and
 * identity permutes, reshape of reshape, broadcast of broadcast and of
 * splat constants, no-op casts, slices, pads and reductions, a
 * transpose of the last two axes folded into dot's transpose flag, a
 * dot read only through such a transpose computed swapped
 * (dot(a, b)^T = dot(b^T, a^T)), and a sum of zero pads whose data lie
 * side by side as the concat of their data. */
Graph *pass_simplify(const Graph *in, char *err, size_t err_size);
/* Merges structurally equal nodes (same op, attributes and inputs). */
Graph *pass_cse(const Graph *in, char *err, size_t err_size);
/* The same, merging only nodes of equal group[id] (one entry per node of
 * `in`, or NULL: one group; PASS_CSE_NO_GROUP: never merged):
 * kernel_recompute's merge of the copies that two rounds put in one
 * kernel. `map` as for pass_attention. */
#define PASS_CSE_NO_GROUP (-1)
Graph *pass_cse_within(const Graph *in, const int *group, GraphId *map, char *err,
                       size_t err_size);
/* Drops nodes that no output or update depends on; inputs, params and
 * states always stay. */
Graph *pass_dce(const Graph *in, char *err, size_t err_size);
/* pass_dce that also drops the params and states nothing uses (inputs are
 * kept): a graph that updates some params only (a ZeRO-1 per-param update
 * graph, train.h) then holds those alone. */
Graph *pass_dce_unused_params(const Graph *in, char *err, size_t err_size);
/* Replaces softmax(scale * q kT + mask) v, as the front end lowers it, by
 * the fused attention op (compiler/opt/attention.c). Every node of `in` is
 * still copied (the replaced chain is left dead for DCE); when `map` is not
 * NULL it receives the new id of every node of `in` (graph_count(in)
 * entries), for callers that hold node ids across the pass. */
Graph *pass_attention(const Graph *in, GraphId *map, char *err, size_t err_size);
/* Dots of one left operand by untransposed matrices (the Q, K and V
 * projections) become one dot by the matrices concatenated along their
 * columns, each old dot a column slice of it (merge_dots.c). Run before
 * autodiff; `map` as for pass_attention. */
Graph *pass_merge_dots(const Graph *in, GraphId *map, char *err, size_t err_size);
/* --dtype bf16 (autocast.c, which says which nodes become bf16): run on a
 * forward graph before autodiff. map (graph_count(in) entries) receives
 * in id -> out id. Float leaves, reductions and what is computed from
 * them alone stay f32, other float intermediates become bf16, bf16
 * outputs are cast back to their f32. */
Graph *pass_autocast_bf16(const Graph *in, GraphId *map, char *err, size_t err_size);
/* bf16 chains (autocast.c): a chain of bf16 elementwise ops whose links
 * each have one use, by the next, is computed in f32 and rounded once at
 * its end, as a fused kernel computes when bf16 is only the format of what
 * it stores; values that are stored stay bf16. A no-op on graphs without
 * bf16. Runs last in pass_standard: after it, CSE would merge the widening
 * casts it makes, and one cast read by two kernels is stored as f32. */
Graph *pass_bf16_chains(const Graph *in, char *err, size_t err_size);
/* fold, simplify, CSE, DCE in that order, then bf16 chains (what tfmc
 * compiles). */
Graph *pass_standard(const Graph *in, char *err, size_t err_size);

#endif
