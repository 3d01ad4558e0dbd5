/* In-place reuse: a loop kernel may write its output over an input buffer
 * that no later kernel reads, when every element of that input is read
 * before the same element of the output is written:
 *   - an intermediate that dies with the kernel (x -> gelu(x)), and
 *   - an update target (p -> p - lr * g): the new value is written over the
 *     parameter or optimizer state itself, so the step's copy-back vanishes.
 *
 * A kernel writes row by row (its outer axes) and, inside a row, runs its
 * hoisted reductions before the inner loops. So an input read is safe when
 * it sits at the output's own element (the identity map), or, inside a
 * hoisted reduction, anywhere in the output's own row. The two buffers then
 * become one: the kernel's argument list names it once, and the structural
 * signature (which records how inputs map to arguments) tells the in-place
 * kernel apart from an out-of-place one of the same shape. */
#include <stdlib.h>
#include <string.h>

#include "kernel_internal.h"

#define MAX_PATHS 8

typedef struct Reads {
  int num_paths;
  KernelIndexMap paths[MAX_PATHS];
  int first_var; /* reductions: var of the first reduced axis */
} Reads;

typedef struct InPlace {
  KernelPlan *plan;
  int *canonical;   /* per buffer: the buffer it was merged into (itself if none) */
  int *last_reader; /* per canonical buffer: last kernel that reads it, -1 if none */
  int *update_of;   /* per buffer: the update target's buffer it holds the value of, or -1 */
  bool *fixed;      /* per buffer: an output, or read by the step's copy-back */
  Reads *reads;     /* per node, valid for the nodes of the kernel being checked */
} InPlace;

static int find(const InPlace *ip, int buffer) {
  while (ip->canonical[buffer] != buffer)
    buffer = ip->canonical[buffer];
  return buffer;
}

static bool is_reduce(GraphOp op) { return op == GRAPH_OP_REDUCE_SUM || op == GRAPH_OP_REDUCE_MAX; }

static bool add_path(Reads *r, const KernelIndexMap *map) {
  for (int i = 0; i < r->num_paths; i++)
    if (kernel_index_equal(&r->paths[i], map))
      return true;
  if (r->num_paths == MAX_PATHS)
    return false;
  r->paths[r->num_paths++] = *map;
  return true;
}

/* Is a read of a [rank] tensor at `map` safe for an in-place kernel whose
 * output has that shape, `outer` outer axes and `rank` loop vars? */
static bool safe_read(const KernelIndexMap *map, int outer, int rank) {
  uint32_t deps = 0;
  bool identity = true;
  for (int d = 0; d < map->rank; d++) {
    const KernelIndexAxis *a = &map->axis[d];
    if (!a->affine)
      return false;
    deps |= a->deps;
    bool is_var_d = a->value.constant == 0 && a->value.coef[d] == 1;
    for (int v = 0; v < KERNEL_MAX_VARS && is_var_d; v++)
      if (v != d && a->value.coef[v] != 0)
        is_var_d = false;
    if (d < outer && !is_var_d)
      return false;
    identity = identity && is_var_d;
  }
  if (identity)
    return true;
  /* Inside a hoisted reduction: reads a reduction var, no inner-loop var. */
  uint32_t inner = ((1u << rank) - 1) & ~((1u << outer) - 1);
  return (deps >> rank) != 0 && (deps & inner) == 0;
}

/* Whether every read of canonical buffer `target` in kernel `ki` is safe. */
static bool reads_are_safe(InPlace *ip, int ki, int target) {
  const KernelPlan *plan = ip->plan;
  const Graph *g = plan->graph;
  const Kernel *k = &plan->kernels[ki];
  const GraphNode *root = graph_node(g, k->root);
  int rank = root->shape.rank;
  int64_t extent[KERNEL_MAX_VARS] = {0};
  for (int d = 0; d < rank; d++)
    extent[d] = root->shape.dims[d];
  int num_vars = rank;
  for (int i = 0; i < k->num_nodes; i++)
    ip->reads[k->nodes[i]].num_paths = 0;
  /* The outputs computed at each element (not the hoisted row statistics,
   * read where their consumers in the kernel read them). */
  GraphId out[3];
  for (int o = 0, count = kernel_outputs(k, out); o < count; o++)
    if (out[o] == k->root || !is_reduce(graph_node(g, out[o])->op)) {
      kernel_index_identity(&ip->reads[out[o]].paths[0], rank);
      ip->reads[out[o]].num_paths = 1;
    }
  /* Consumers first, allocating reduction vars in the planner's order. */
  for (int i = k->num_nodes - 1; i >= 0; i--) {
    const GraphNode *n = graph_node(g, k->nodes[i]);
    Reads *r = &ip->reads[k->nodes[i]];
    if (is_reduce(n->op)) {
      const GraphShape *in = &graph_node(g, n->inputs[0])->shape;
      r->first_var = num_vars;
      for (int d = 0; d < in->rank; d++)
        if (n->attrs.axes & (1u << d)) {
          if (num_vars == KERNEL_MAX_VARS)
            return false;
          extent[num_vars++] = in->dims[d];
        }
    }
    for (int s = 0; s < n->num_inputs; s++) {
      GraphId x = n->inputs[s];
      /* computed here: inlined, or a further output */
      bool inlined = plan->kernel_of[x] == ki && (plan->placement[x] == KERNEL_INLINED ||
                                                  plan->placement[x] == KERNEL_ROOT);
      bool reads_target = plan->buffer_of[x] >= 0 && find(ip, plan->buffer_of[x]) == target;
      if (!inlined && !reads_target)
        continue;
      for (int p = 0; p < r->num_paths; p++) {
        KernelIndexMap map;
        kernel_index_through(g, n, s, r->first_var, extent, &r->paths[p], &map);
        if (inlined && !add_path(&ip->reads[x], &map))
          return false;
        if (reads_target && (!graph_shape_equal(&graph_node(g, x)->shape, &root->shape) ||
                             !safe_read(&map, k->outer_axes, rank)))
          return false;
      }
    }
  }
  return true;
}

/* The input buffer that output `node` of kernel `ki` may be written over,
 * or -1; `outputs` of the kernel's args are its outputs, and an input
 * another output took (canonical, then, to an output) is not taken again. */
static int choose(InPlace *ip, int ki, GraphId node, int outputs) {
  const KernelPlan *plan = ip->plan;
  const Kernel *k = &plan->kernels[ki];
  const GraphNode *root = graph_node(plan->graph, k->root);
  int out = plan->buffer_of[node];
  /* A row statistic is stored before the row's elements read the inputs. */
  if (k->kind != KERNEL_LOOP || is_reduce(root->op) ||
      is_reduce(graph_node(plan->graph, node)->op) || ip->fixed[out])
    return -1;
  const KernelBuffer *ob = &plan->buffers[out];
  for (int i = outputs; i < k->num_args; i++) {
    int in = find(ip, k->args[i]);
    bool taken = false;
    for (int o = 0; o < outputs; o++)
      taken |= ip->canonical[k->args[o]] == in;
    if (taken)
      continue;
    const KernelBuffer *ib = &plan->buffers[in];
    if (ib->bytes != ob->bytes || ib->storage != ob->storage || ip->last_reader[in] != ki)
      continue;
    /* An update value must survive to the copy-back at the end of the step. */
    bool scratch = ib->first_kernel >= 0 && !ip->fixed[in] && ip->update_of[in] < 0 &&
                   ip->update_of[out] < 0;
    bool own_target = ip->update_of[out] >= 0 && find(ip, ip->update_of[out]) == in;
    if ((scratch || own_target) && reads_are_safe(ip, ki, in))
      return in;
  }
  return -1;
}

static void mark_fixed_and_readers(InPlace *ip) {
  KernelPlan *plan = ip->plan;
  const Graph *g = plan->graph;
  for (int b = 0; b < plan->num_buffers; b++) {
    ip->canonical[b] = b;
    ip->last_reader[b] = ip->update_of[b] = -1;
  }
  for (int ki = 0; ki < plan->num_kernels; ki++)
    for (int i = 1; i < plan->kernels[ki].num_args; i++)
      ip->last_reader[plan->kernels[ki].args[i]] = ki;
  for (int i = 0; i < graph_num_outputs(g); i++)
    ip->fixed[plan->buffer_of[graph_output_at(g, i).node]] = true;
  for (int i = 0; i < graph_num_updates(g); i++) {
    GraphUpdate u = graph_update_at(g, i);
    int value = plan->buffer_of[u.value], target = plan->buffer_of[u.target];
    /* A value that is a leaf or shared (p' = p, or two updates of one
     * value) keeps its copy-back. */
    if (plan->buffers[value].first_kernel < 0 || ip->update_of[value] >= 0)
      ip->fixed[value] = true;
    else
      ip->update_of[value] = target;
  }
}

/* Applies the merges: buffer numbers, node buffers and argument lists. */
static bool renumber(InPlace *ip) {
  KernelPlan *plan = ip->plan;
  int n = plan->num_buffers, kept = 0;
  int *number = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!number)
    return false;
  for (int b = 0; b < n; b++)
    if (ip->canonical[b] == b) {
      number[b] = kept;
      plan->buffers[kept++] = plan->buffers[b];
    }
  for (int b = 0; b < n; b++)
    number[b] = number[find(ip, b)];
  plan->num_buffers = kept;
  for (GraphId id = 0; id < graph_count(plan->graph); id++)
    if (plan->buffer_of[id] >= 0)
      plan->buffer_of[id] = number[plan->buffer_of[id]];
  for (int ki = 0; ki < plan->num_kernels; ki++) {
    Kernel *k = &plan->kernels[ki];
    int count = 0;
    for (int i = 0; i < k->num_args; i++) {
      int b = number[k->args[i]];
      bool seen = false;
      for (int j = 0; j < count && !seen; j++)
        seen = k->args[j] == b;
      if (!seen)
        k->args[count++] = b;
    }
    k->num_args = count;
  }
  free(number);
  return true;
}

bool kernel_inplace_plan(KernelPlan *plan) {
  int n = plan->num_buffers;
  size_t nb = (size_t)(n ? n : 1);
  InPlace ip = {.plan = plan};
  ip.canonical = malloc(sizeof(int) * nb);
  ip.last_reader = malloc(sizeof(int) * nb);
  ip.update_of = malloc(sizeof(int) * nb);
  ip.fixed = calloc(nb, sizeof(bool));
  ip.reads = malloc(sizeof(Reads) * (size_t)(graph_count(plan->graph) + 1));
  bool ok = ip.canonical && ip.last_reader && ip.update_of && ip.fixed && ip.reads;
  if (ok) {
    mark_fixed_and_readers(&ip);
    for (int ki = 0; ki < plan->num_kernels; ki++) {
      GraphId outputs[3];
      int count = kernel_outputs(&plan->kernels[ki], outputs);
      for (int o = 0; o < count; o++) {
        int in = choose(&ip, ki, outputs[o], count);
        if (in < 0)
          continue;
        int out = plan->buffer_of[outputs[o]];
        ip.canonical[out] = in;
        if (ip.last_reader[out] > ip.last_reader[in])
          ip.last_reader[in] = ip.last_reader[out];
      }
    }
    ok = renumber(&ip);
  }
  free(ip.canonical);
  free(ip.last_reader);
  free(ip.update_of);
  free(ip.fixed);
  free(ip.reads);
  return ok;
}
