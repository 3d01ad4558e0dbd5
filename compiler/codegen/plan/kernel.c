/* Kernel formation: decides for every node, consumers first, whether it is
 * inlined into the kernel of its consumers or materialised as a kernel
 * root, then lists the kernels, their buffers and arguments. */
#include "kernel.h"
#include "errbuf.h"

#include <stdlib.h>
#include <string.h>

#include "kernel_internal.h"

/* An inlined node is recomputed once per distinct index it is read at;
 * beyond this many it is cheaper to store it. */
#define MAX_PATHS 4
/* An inlined node is also recomputed for every iteration of its kernel,
 * however few elements it has: a transcendental read through a broadcast
 * (sinusoidal positions added to each batch row's embeddings ran sincosf
 * 32 times per element in the small Transformer, its slowest loop kernel)
 * is stored by a kernel of its own when the kernel would evaluate it more
 * than this many times per element. */
#define MAX_TRANSCENDENTAL_REPEATS 4

typedef struct NodeDraft {
  int num_paths;
  KernelIndexMap *paths;      /* where the kernel reads this node */
  KernelIndexMap *hoisted_at; /* inlined reductions: the one place, kept to the end */
  int first_var;              /* reductions: var of the first reduced axis */
  bool must_materialise;      /* a view reads it as a buffer */
  int next_to_free;           /* list of nodes whose paths die with the same input */
} NodeDraft;

typedef struct KernelDraft {
  KernelKind kind;
  GraphId root, also, also_q;
  int outer_axes;
  int num_vars;
  int64_t extent[KERNEL_MAX_VARS];
  int num_hoisted;
} KernelDraft;

typedef struct Planner {
  const Graph *g;
  KernelPlanOptions options;
  KernelPlan *plan;
  bool *live, *forced;
  int *use_start, *use_node, *use_slot; /* consumers of each node, CSR */
  NodeDraft *draft;
  GraphId *also_of;  /* per attention node: the second output its kernel writes, or GRAPH_NONE */
  GraphId *also_q_of; /* per attention_grad_k: the grad_q its kernel writes, or GRAPH_NONE */
  bool *by_attention; /* per node: an attention op some also_of names */
  int *free_head;  /* per node: drafts to free after it */
  KernelDraft *kernels;
  int num_kernels, kernels_capacity;
} Planner;


GraphDtype kernel_storage_dtype(GraphDtype dtype) { return dtype; }

int64_t kernel_storage_size(GraphDtype dtype) {
  return dtype == GRAPH_F64 ? 8 : dtype == GRAPH_BF16 ? 2 : 4;
}

static bool is_leaf(GraphOp op) {
  return op == GRAPH_OP_INPUT || op == GRAPH_OP_PARAM || op == GRAPH_OP_STATE;
}

static bool is_reduce(GraphOp op) { return op == GRAPH_OP_REDUCE_SUM || op == GRAPH_OP_REDUCE_MAX; }

static void mark_live(Planner *p) {
  const Graph *g = p->g;
  for (int i = 0; i < graph_num_outputs(g); i++) {
    p->live[graph_output_at(g, i).node] = p->forced[graph_output_at(g, i).node] = true;
  }
  for (int i = 0; i < graph_num_updates(g); i++) {
    GraphUpdate u = graph_update_at(g, i);
    p->live[u.value] = p->forced[u.value] = true;
    p->live[u.target] = true;
  }
  for (GraphId id = graph_count(g) - 1; id >= 0; id--) {
    const GraphNode *n = graph_node(g, id);
    if (p->live[id])
      for (int i = 0; i < n->num_inputs; i++)
        p->live[n->inputs[i]] = true;
  }
}

static bool index_consumers(Planner *p) {
  const Graph *g = p->g;
  int count = graph_count(g), edges = 0;
  p->use_start = calloc((size_t)count + 1, sizeof(int));
  if (!p->use_start)
    return false;
  for (GraphId id = 0; id < count; id++) {
    if (!p->live[id])
      continue;
    const GraphNode *n = graph_node(g, id);
    for (int i = 0; i < n->num_inputs; i++)
      p->use_start[n->inputs[i] + 1]++;
    edges += n->num_inputs;
  }
  for (int i = 0; i < count; i++)
    p->use_start[i + 1] += p->use_start[i];
  p->use_node = malloc(sizeof(int) * (size_t)(edges + 1));
  p->use_slot = malloc(sizeof(int) * (size_t)(edges + 1));
  int *fill = malloc(sizeof(int) * (size_t)(count + 1));
  if (!p->use_node || !p->use_slot || !fill) {
    free(fill);
    return false;
  }
  memcpy(fill, p->use_start, sizeof(int) * (size_t)count);
  for (GraphId id = 0; id < count; id++) {
    if (!p->live[id])
      continue;
    const GraphNode *n = graph_node(g, id);
    for (int i = 0; i < n->num_inputs; i++) {
      int at = fill[n->inputs[i]]++;
      p->use_node[at] = id;
      p->use_slot[at] = i;
    }
  }
  free(fill);
  return true;
}

static int new_kernel(Planner *p, KernelKind kind, GraphId root) {
  if (p->num_kernels == p->kernels_capacity) {
    int capacity = p->kernels_capacity ? 2 * p->kernels_capacity : 16;
    KernelDraft *grown = realloc(p->kernels, sizeof *grown * (size_t)capacity);
    if (!grown)
      return -1;
    p->kernels = grown;
    p->kernels_capacity = capacity;
  }
  KernelDraft *k = &p->kernels[p->num_kernels];
  memset(k, 0, sizeof *k);
  k->kind = kind;
  k->root = root;
  k->also = k->also_q = GRAPH_NONE;
  return p->num_kernels++;
}

/* Gives the reduced axes of reduction `id` fresh vars of kernel k. */
static bool allocate_reduce_vars(Planner *p, KernelDraft *k, GraphId id) {
  const GraphNode *n = graph_node(p->g, id);
  const GraphShape *in = &graph_node(p->g, n->inputs[0])->shape;
  int needed = 0;
  for (int d = 0; d < in->rank; d++)
    needed += (n->attrs.axes >> d) & 1;
  if (k->num_vars + needed > KERNEL_MAX_VARS)
    return false;
  p->draft[id].first_var = k->num_vars;
  for (int d = 0; d < in->rank; d++)
    if (n->attrs.axes & (1u << d))
      k->extent[k->num_vars++] = in->dims[d];
  return true;
}

bool kernel_op_is_attention(GraphOp op) {
  return op == GRAPH_OP_ATTENTION || op == GRAPH_OP_ATTENTION_LSE ||
         op == GRAPH_OP_ATTENTION_GRAD_Q || op == GRAPH_OP_ATTENTION_GRAD_K ||
         op == GRAPH_OP_ATTENTION_GRAD_V;
}

bool kernel_bf16_valued(const Graph *g, GraphId id) {
  const GraphNode *n = graph_node(g, id);
  return n->op == GRAPH_OP_CAST && graph_node(g, n->inputs[0])->dtype == GRAPH_BF16;
}

/* The softmax of an attention op gives its log-sum-exp for free, so an
 * attention_lse of the same q, k, mask and attributes (the VJP's) is
 * written by the attention kernel instead of recomputed by its own. */
static bool lse_pairs(const GraphNode *a, const GraphNode *lse) {
  return a->op == GRAPH_OP_ATTENTION && a->num_inputs == lse->num_inputs + 1 &&
         a->inputs[0] == lse->inputs[0] && a->inputs[1] == lse->inputs[1] &&
         (lse->num_inputs == 2 || a->inputs[3] == lse->inputs[2]);
}

/* grad_k and grad_v run over the same key rows and recompute the same
 * p = exp(s - lse) and the pairs' do . v, so the grad_k kernel of the same
 * q, k, v, do, lse, delta and mask writes the grad_v too. */
static bool same_operands(const GraphNode *a, const GraphNode *b) {
  if (a->num_inputs != b->num_inputs)
    return false;
  for (int i = 0; i < a->num_inputs; i++)
    if (a->inputs[i] != b->inputs[i])
      return false;
  return true;
}

/* The attributes and dtype two attention ops must share to be computed
 * by one kernel. */
static bool same_attributes(const GraphNode *a, const GraphNode *b) {
  return a->attrs.scale == b->attrs.scale && a->attrs.causal == b->attrs.causal &&
         a->dtype == b->dtype;
}

static bool grad_v_pairs(const GraphNode *a, const GraphNode *gv) {
  return a->op == GRAPH_OP_ATTENTION_GRAD_K && same_operands(a, gv);
}

/* Whether every live reader of `id` comes after node `after`. */
static bool read_after(const Planner *p, GraphId id, GraphId after) {
  for (int u = p->use_start[id]; u < p->use_start[id + 1]; u++)
    if (p->live[p->use_node[u]] && p->use_node[u] <= after)
      return false;
  return true;
}

/* (batch, head) pairs of an attention op: its leading axes. */
static int64_t attention_batches(const GraphNode *n) {
  int64_t batches = 1;
  for (int d = 0; d < n->shape.rank - 2; d++)
    batches *= n->shape.dims[d];
  return batches;
}

/* Joins each attention_grad_q to the attention_grad_k (already paired with
 * its grad_v) of the same operands that follows it, when nothing reads the
 * grad_q before that and there are enough (batch, head) pairs: the grad_k
 * kernel, at its place in the order, writes all three. */
static void pair_grad_q(Planner *p) {
  const Graph *g = p->g;
  for (GraphId id = 0; id < graph_count(g); id++) {
    const GraphNode *x = graph_node(g, id);
    if (!p->live[id] || x->op != GRAPH_OP_ATTENTION_GRAD_Q)
      continue;
    for (int u = p->use_start[x->inputs[0]]; u < p->use_start[x->inputs[0] + 1]; u++) {
      GraphId a = p->use_node[u];
      const GraphNode *n = graph_node(g, a);
      if (a <= id || !p->live[a] || p->also_of[a] == GRAPH_NONE ||
          p->also_q_of[a] != GRAPH_NONE || !same_attributes(n, x) || !same_operands(n, x) ||
          !read_after(p, id, a) ||
          attention_batches(n) < p->options.merge_attention_backward_from)
        continue;
      p->also_q_of[a] = id;
      p->by_attention[id] = true;
      break;
    }
  }
}

/* Pairs each attention_lse (attention_grad_v) with an attention
 * (attention_grad_k) of the same operands and attributes that comes before
 * it: that op's kernel writes both (Kernel.also), at the earlier node's
 * place in the order, which is before every reader of either. */
static void pair_attention_outputs(Planner *p) {
  const Graph *g = p->g;
  for (GraphId id = 0; id < graph_count(g); id++) {
    const GraphNode *x = graph_node(g, id);
    if (!p->live[id] || (x->op != GRAPH_OP_ATTENTION_LSE && x->op != GRAPH_OP_ATTENTION_GRAD_V))
      continue;
    /* the partner reads q too */
    for (int u = p->use_start[x->inputs[0]]; u < p->use_start[x->inputs[0] + 1]; u++) {
      GraphId a = p->use_node[u];
      const GraphNode *n = graph_node(g, a);
      if (a >= id || !p->live[a] || p->also_of[a] != GRAPH_NONE || !same_attributes(n, x) ||
          !(x->op == GRAPH_OP_ATTENTION_LSE ? lse_pairs(n, x) : grad_v_pairs(n, x)))
        continue;
      p->also_of[a] = id;
      p->by_attention[id] = true;
      break;
    }
  }
  if (p->options.merge_attention_backward_from > 0)
    pair_grad_q(p);
}

static bool make_root(Planner *p, GraphId id) {
  const GraphNode *n = graph_node(p->g, id);
  KernelKind kind = n->op == GRAPH_OP_DOT             ? KERNEL_DOT
                    : n->op == GRAPH_OP_SCATTER_ADD   ? KERNEL_SCATTER
                    : kernel_op_is_attention(n->op) ? KERNEL_ATTENTION
                                                      : KERNEL_LOOP;
  int index = new_kernel(p, kind, id);
  if (index < 0)
    return false;
  p->plan->placement[id] = KERNEL_ROOT;
  p->plan->kernel_of[id] = index;
  KernelDraft *k = &p->kernels[index];
  if (kind == KERNEL_ATTENTION && (k->also = p->also_of[id]) != GRAPH_NONE)
    p->plan->kernel_of[k->also] = index;
  if (kind == KERNEL_ATTENTION && (k->also_q = p->also_q_of[id]) != GRAPH_NONE)
    p->plan->kernel_of[k->also_q] = index;
  int rank = n->shape.rank;
  /* A dot's rows are its (batch, i) pairs, an attention op's the rows of
   * its output; a scatter's range is set apart. */
  if (kind == KERNEL_DOT || kind == KERNEL_ATTENTION)
    k->outer_axes = k->also_q != GRAPH_NONE ? rank - 2 : rank - 1;
  if (kind != KERNEL_LOOP)
    return true;
  /* A reduction root computes one output element per row; other roots keep
   * their last axis as the inner (vectorisable) loop. */
  k->outer_axes = is_reduce(n->op) ? rank : (rank > 0 ? rank - 1 : 0);
  k->num_vars = rank;
  for (int d = 0; d < rank; d++)
    k->extent[d] = n->shape.dims[d];
  if (is_reduce(n->op) && !allocate_reduce_vars(p, k, id))
    return false;
  NodeDraft *draft = &p->draft[id];
  draft->paths = malloc(sizeof *draft->paths);
  if (!draft->paths)
    return false;
  kernel_index_identity(draft->paths, rank);
  draft->num_paths = 1;
  return true;
}

static bool add_path(KernelIndexMap *paths, int *count, const KernelIndexMap *map) {
  for (int i = 0; i < *count; i++)
    if (kernel_index_equal(&paths[i], map))
      return true;
  if (*count == MAX_PATHS)
    return false;
  paths[(*count)++] = *map;
  return true;
}

/* The kernel every consumer of `id` belongs to, or -1 when they differ or
 * one of them is not part of a loop kernel. */
static int consumers_kernel(const Planner *p, GraphId id) {
  int kernel = -1;
  for (int u = p->use_start[id]; u < p->use_start[id + 1]; u++) {
    GraphId c = p->use_node[u];
    KernelPlacement pc = p->plan->placement[c];
    if (pc != KERNEL_INLINED && pc != KERNEL_ROOT)
      return -1;
    int k = p->plan->kernel_of[c];
    if (kernel != -1 && k != kernel)
      return -1;
    kernel = k;
  }
  if (kernel >= 0 && p->kernels[kernel].kind != KERNEL_LOOP)
    return -1;
  return kernel;
}

/* Constants and iota are recomputed in place, unless a dot, scatter or view
 * needs them as a buffer. */
static bool only_loop_consumers(const Planner *p, GraphId id) {
  for (int u = p->use_start[id]; u < p->use_start[id + 1]; u++) {
    GraphId c = p->use_node[u];
    KernelPlacement pc = p->plan->placement[c];
    if ((pc != KERNEL_INLINED && pc != KERNEL_ROOT) ||
        p->kernels[p->plan->kernel_of[c]].kind != KERNEL_LOOP)
      return false;
  }
  return true;
}

/* How often kernel k computes a node it reads at these paths: once per row
 * (an item of its range) and, within a row, once per value of the inner
 * vars a path reads (LLVM hoists what a loop does not depend on); -1 when
 * a path is inside a hoisted reduction (reads a reduced axis' var), whose
 * recomputation kernel formation accepts to keep a softmax row one kernel. */
static int64_t evaluations(const KernelDraft *k, int root_rank, const KernelIndexMap *paths,
                           int count) {
  int64_t rows = 1, total = 0;
  for (int v = 0; v < k->outer_axes; v++) rows *= k->extent[v];
  for (int i = 0; i < count; i++) {
    uint32_t deps = 0;
    for (int d = 0; d < paths[i].rank; d++) deps |= paths[i].axis[d].deps;
    if (deps >> root_rank) return -1;
    int64_t per_row = 1;
    for (int v = k->outer_axes; v < root_rank; v++)
      if (deps & (1u << v)) per_row *= k->extent[v];
    total += rows * per_row;
  }
  return total;
}

/* The distinct indices at which the consumers of `id` in kernel `kernel`
 * read it, into paths (MAX_PATHS); false when there are more. */
static bool consumer_paths(const Planner *p, GraphId id, int kernel, KernelIndexMap *paths,
                           int *count) {
  const KernelDraft *k = &p->kernels[kernel];
  *count = 0;
  for (int u = p->use_start[id]; u < p->use_start[id + 1]; u++) {
    GraphId c = p->use_node[u];
    if (p->plan->kernel_of[c] != kernel)
      continue;
    const NodeDraft *dc = &p->draft[c];
    for (int i = 0; i < dc->num_paths; i++) {
      KernelIndexMap map;
      kernel_index_through(p->g, graph_node(p->g, c), p->use_slot[u], dc->first_var, k->extent,
                           &dc->paths[i], &map);
      if (!add_path(paths, count, &map))
        return false;
    }
  }
  return true;
}

/* Puts `id` in kernel `kernel`, read there at `paths`: a reduction is
 * hoisted (computed once per row, read at paths[0]). */
static bool place_in(Planner *p, GraphId id, int kernel, const KernelIndexMap *paths, int count,
                     KernelPlacement placement) {
  NodeDraft *draft = &p->draft[id];
  bool hoist = is_reduce(graph_node(p->g, id)->op);
  KernelIndexMap *copy = malloc(sizeof *copy * (size_t)count);
  KernelIndexMap *at = hoist ? malloc(sizeof *at) : NULL;
  if (!copy || (hoist && (!at || !allocate_reduce_vars(p, &p->kernels[kernel], id)))) {
    free(copy);
    free(at);
    return false;
  }
  if (hoist) {
    *at = paths[0];
    draft->hoisted_at = at;
    p->kernels[kernel].num_hoisted++;
  }
  draft->paths = copy;
  memcpy(draft->paths, paths, sizeof *paths * (size_t)count);
  draft->num_paths = count;
  p->plan->placement[id] = placement;
  p->plan->kernel_of[id] = kernel;
  return true;
}

/* Inlines `id` into its consumers' kernel when that is legal and cheap;
 * returns false (and changes nothing) otherwise. */
static bool try_inline(Planner *p, GraphId id) {
  const GraphNode *n = graph_node(p->g, id);
  int kernel = consumers_kernel(p, id);
  if (kernel < 0 || p->draft[id].must_materialise)
    return false;
  KernelDraft *k = &p->kernels[kernel];
  KernelIndexMap paths[MAX_PATHS];
  int count;
  if (!consumer_paths(p, id, kernel, paths, &count))
    return false;
  if (kernel_op_cost(n->op) == KERNEL_COST_TRANSCENDENTAL &&
      evaluations(k, graph_node(p->g, k->root)->shape.rank, paths, count) >
          MAX_TRANSCENDENTAL_REPEATS * graph_shape_numel(&n->shape))
    return false;
  int most_hoisted = p->options.max_hoisted;
  if (is_reduce(n->op) && (count != 1 || !kernel_index_outer_only(&paths[0], k->outer_axes) ||
                           (most_hoisted > 0 && k->num_hoisted >= most_hoisted)))
    return false;
  return place_in(p, id, kernel, paths, count, KERNEL_INLINED);
}

/* A node's paths are needed until its inputs are decided; hang it on the
 * list of its smallest input. */
static void schedule_free(Planner *p, GraphId id) {
  const GraphNode *n = graph_node(p->g, id);
  if (n->num_inputs == 0)
    return;
  GraphId first = n->inputs[0];
  for (int i = 1; i < n->num_inputs; i++)
    if (n->inputs[i] < first)
      first = n->inputs[i];
  p->draft[id].next_to_free = p->free_head[first];
  p->free_head[first] = id;
}

static void free_paths_after(Planner *p, GraphId id) {
  for (int at = p->free_head[id]; at >= 0; at = p->draft[at].next_to_free) {
    free(p->draft[at].paths);
    p->draft[at].paths = NULL;
    p->draft[at].num_paths = 0;
  }
}

/* With KernelPlanOptions.merge_update_values: an update value that one
 * loop kernel alone reads, at its own element, where the kernel's root has
 * its shape (Adam's new moments, read by the parameter's update), is
 * computed there and stored by that kernel as a further output (also, then
 * also_q) instead of by a kernel of its own whose output is read back. */
static bool store_alongside(Planner *p, GraphId id) {
  const GraphNode *n = graph_node(p->g, id);
  if (!p->options.merge_update_values || is_reduce(n->op) || n->op == GRAPH_OP_DOT ||
      n->op == GRAPH_OP_SCATTER_ADD || kernel_op_is_attention(n->op) ||
      p->draft[id].must_materialise || !graph_is_update_value(p->g, id) ||
      graph_is_output(p->g, id))
    return false;
  int kernel = consumers_kernel(p, id);
  if (kernel < 0)
    return false;
  KernelDraft *k = &p->kernels[kernel];
  const GraphNode *root = graph_node(p->g, k->root);
  KernelIndexMap paths[MAX_PATHS], own;
  int count;
  kernel_index_identity(&own, n->shape.rank);
  /* (A concat root stores each input's part in loops of its own, llvm/loop_rows.c.) */
  if (k->also_q != GRAPH_NONE || is_reduce(root->op) || root->op == GRAPH_OP_CONCAT ||
      !graph_shape_equal(&root->shape, &n->shape) ||
      !consumer_paths(p, id, kernel, paths, &count) || count != 1 ||
      !kernel_index_equal(&paths[0], &own) || !place_in(p, id, kernel, &own, 1, KERNEL_ROOT))
    return false;
  *(k->also == GRAPH_NONE ? &k->also : &k->also_q) = id;
  return true;
}

/* Whether reading a reduction of `shape` at `path` in kernel k reads each
 * of its elements in exactly one row of k, at its own index: an axis of
 * length 1 at 0, any other an outer var of k of its length, a different
 * one each, and the reduction has as many elements as k has rows. (A read
 * through a concat or pad along the row has an index of its own, shifted
 * or inner: that is not the statistic's element.) */
static bool one_element_a_row(const KernelDraft *k, const KernelIndexMap *path,
                              const GraphShape *shape) {
  int64_t rows = 1;
  for (int v = 0; v < k->outer_axes; v++)
    rows *= k->extent[v];
  if (graph_shape_numel(shape) != rows)
    return false;
  uint32_t used = 0;
  for (int d = 0; d < shape->rank; d++) {
    const KernelIndexAxis *a = &path->axis[d];
    if (!a->affine || a->value.constant != 0)
      return false;
    int var = -1;
    for (int v = 0; v < KERNEL_MAX_VARS; v++)
      if (a->value.coef[v] != 0) {
        if (var >= 0 || a->value.coef[v] != 1)
          return false;
        var = v;
      }
    if (var < 0 ? shape->dims[d] != 1
                : var >= k->outer_axes || k->extent[var] != shape->dims[d] ||
                      (used & (1u << var)))
      return false;
    if (var >= 0)
      used |= 1u << var;
  }
  return true;
}

/* With KernelPlanOptions.store_row_statistics: a row reduction read by
 * several kernels (a cross-entropy's row max and sum of exponentials, read
 * by the loss and by its gradient; a layernorm's variance, read by the
 * normalisation and by the backward) is hoisted into the one of them that
 * runs first, when that is a loop kernel computing one of its elements a
 * row, and stored there as a further output (also, then also_q); the
 * others read it. No kernel of its own reads the row again. */
static bool store_row_statistic(Planner *p, GraphId id) {
  const GraphNode *n = graph_node(p->g, id);
  if (!p->options.store_row_statistics || !is_reduce(n->op) || p->draft[id].must_materialise ||
      graph_is_output(p->g, id) || graph_is_update_value(p->g, id))
    return false;
  int kernel = -1; /* drafts are made consumers first: the last runs first */
  bool several = false;
  for (int u = p->use_start[id]; u < p->use_start[id + 1]; u++) {
    GraphId c = p->use_node[u];
    KernelPlacement pc = p->plan->placement[c];
    if (pc != KERNEL_INLINED && pc != KERNEL_ROOT)
      return false;
    several |= kernel >= 0 && p->plan->kernel_of[c] != kernel;
    if (p->plan->kernel_of[c] > kernel)
      kernel = p->plan->kernel_of[c];
  }
  if (!several || p->kernels[kernel].kind != KERNEL_LOOP ||
      p->kernels[kernel].also_q != GRAPH_NONE)
    return false;
  KernelDraft *k = &p->kernels[kernel];
  KernelIndexMap paths[MAX_PATHS];
  int count;
  if (!consumer_paths(p, id, kernel, paths, &count) || count != 1 ||
      !one_element_a_row(k, &paths[0], &n->shape) ||
      !place_in(p, id, kernel, paths, 1, KERNEL_ROOT))
    return false;
  *(k->also == GRAPH_NONE ? &k->also : &k->also_q) = id;
  return true;
}

static bool decide(Planner *p, GraphId id) {
  const GraphNode *n = graph_node(p->g, id);
  KernelPlan *plan = p->plan;
  if (is_leaf(n->op)) {
    plan->placement[id] = KERNEL_LEAF;
    return true;
  }
  if (!p->live[id])
    return true;
  bool must = p->forced[id] || p->draft[id].must_materialise;
  if ((n->op == GRAPH_OP_CONSTANT || n->op == GRAPH_OP_IOTA) && !must &&
      only_loop_consumers(p, id)) {
    plan->placement[id] = KERNEL_FREE;
    return true;
  }
  if (p->by_attention[id]) {
    plan->placement[id] = KERNEL_ROOT; /* kernel_of: set by its attention's make_root */
    return true;
  }
  bool view_candidate = n->op == GRAPH_OP_RESHAPE && !p->forced[id];
  bool ok = true;
  if (store_alongside(p, id)) {
    schedule_free(p, id);
    return true;
  }
  if (n->op == GRAPH_OP_DOT || n->op == GRAPH_OP_SCATTER_ADD || kernel_op_is_attention(n->op) ||
      p->forced[id]) {
    ok = make_root(p, id);
  } else if (!p->draft[id].must_materialise && (try_inline(p, id) || store_row_statistic(p, id))) {
    schedule_free(p, id);
    return true;
  } else if (view_candidate) {
    plan->placement[id] = KERNEL_VIEW;
    p->draft[n->inputs[0]].must_materialise = true;
    return true;
  } else {
    ok = make_root(p, id);
    /* A broadcast that loop kernels read from different kernels: its
     * input is stored, and the broadcast, a kernel that only expands it,
     * is copied into each reader by kernel_recompute, instead of the
     * expanded tensor being written and read back (the GRU seq2seq's
     * attention gradients broadcast [32, 25, 1] values to [32, 25, 128]
     * this way, 24 kernels a step). */
    if (n->op == GRAPH_OP_BROADCAST && only_loop_consumers(p, id))
      p->draft[n->inputs[0]].must_materialise = true;
  }
  if (ok)
    schedule_free(p, id);
  return ok;
}

static bool list_kernels(Planner *p) {
  KernelPlan *plan = p->plan;
  int count = graph_count(p->g), num = p->num_kernels;
  plan->num_kernels = num;
  plan->kernels = calloc((size_t)(num ? num : 1), sizeof(Kernel));
  if (!plan->kernels)
    return false;
  /* Drafts were made consumers first; execution runs producers first. */
  for (GraphId id = 0; id < count; id++)
    if (plan->kernel_of[id] >= 0)
      plan->kernel_of[id] = num - 1 - plan->kernel_of[id];
  for (int d = 0; d < num; d++) {
    Kernel *k = &plan->kernels[num - 1 - d];
    k->kind = p->kernels[d].kind;
    k->root = p->kernels[d].root;
    k->also = p->kernels[d].also;
    k->also_q = p->kernels[d].also_q;
    k->outer_axes = p->kernels[d].outer_axes;
    const GraphShape *s = &graph_node(p->g, k->root)->shape;
    k->rows = 1;
    for (int a = 0; a < k->outer_axes; a++)
      k->rows *= s->dims[a];
    if (k->kind == KERNEL_SCATTER)
      k->rows = s->dims[1]; /* columns of [V, D] */
  }
  for (GraphId id = 0; id < count; id++) {
    int ki = plan->kernel_of[id];
    if (ki < 0 || p->by_attention[id])
      continue;
    plan->kernels[ki].num_nodes++;
    if (p->draft[id].hoisted_at)
      plan->kernels[ki].num_hoisted++;
  }
  for (int ki = 0; ki < num; ki++) {
    Kernel *k = &plan->kernels[ki];
    k->nodes = malloc(sizeof(GraphId) * (size_t)k->num_nodes);
    k->hoisted = malloc(sizeof(KernelHoisted) * (size_t)(k->num_hoisted ? k->num_hoisted : 1));
    if (!k->nodes || !k->hoisted)
      return false;
    k->num_nodes = k->num_hoisted = 0;
  }
  for (GraphId id = 0; id < count; id++) {
    int ki = plan->kernel_of[id];
    if (ki < 0 || p->by_attention[id])
      continue;
    Kernel *k = &plan->kernels[ki];
    k->nodes[k->num_nodes++] = id;
    const KernelIndexMap *at = p->draft[id].hoisted_at;
    if (!at)
      continue;
    KernelHoisted *h = &k->hoisted[k->num_hoisted++];
    memset(h, 0, sizeof *h); /* the signature reads every axis */
    h->node = id;
    for (int a = 0; a < at->rank; a++)
      h->index[a] = at->axis[a].value;
  }
  return true;
}

static bool list_buffers(KernelPlan *plan) {
  const Graph *g = plan->graph;
  int count = graph_count(g);
  plan->buffers = calloc((size_t)(count ? count : 1), sizeof(KernelBuffer));
  if (!plan->buffers)
    return false;
  for (GraphId id = 0; id < count; id++) {
    KernelPlacement pl = plan->placement[id];
    const GraphNode *n = graph_node(g, id);
    if (pl == KERNEL_VIEW) {
      plan->buffer_of[id] = plan->buffer_of[n->inputs[0]];
      continue;
    }
    if (pl != KERNEL_LEAF && pl != KERNEL_ROOT)
      continue;
    KernelBuffer *b = &plan->buffers[plan->num_buffers];
    b->node = id;
    b->storage = kernel_storage_dtype(n->dtype);
    b->bytes = graph_shape_numel(&n->shape) * kernel_storage_size(b->storage);
    b->first_kernel = pl == KERNEL_ROOT ? plan->kernel_of[id] : -1;
    b->last_kernel = b->first_kernel;
    plan->buffer_of[id] = plan->num_buffers++;
  }
  return true;
}

static bool add_arg(Kernel *k, int buffer) {
  for (int i = 0; i < k->num_args; i++)
    if (k->args[i] == buffer)
      return true;
  k->args[k->num_args++] = buffer;
  return true;
}

static bool list_args(KernelPlan *plan) {
  const Graph *g = plan->graph;
  for (int ki = 0; ki < plan->num_kernels; ki++) {
    Kernel *k = &plan->kernels[ki];
    int most = 3;
    for (int i = 0; i < k->num_nodes; i++)
      most += graph_node(g, k->nodes[i])->num_inputs;
    if (!(k->args = malloc(sizeof(int) * (size_t)most)))
      return false;
    GraphId out[3];
    for (int o = 0, count = kernel_outputs(k, out); o < count; o++)
      add_arg(k, plan->buffer_of[out[o]]);
    for (int i = 0; i < k->num_nodes; i++) {
      const GraphNode *n = graph_node(g, k->nodes[i]);
      for (int s = 0; s < n->num_inputs; s++) {
        GraphId x = n->inputs[s];
        if (plan->buffer_of[x] >= 0 && plan->kernel_of[x] != ki)
          add_arg(k, plan->buffer_of[x]);
      }
    }
  }
  return true;
}

static void planner_release(Planner *p) {
  if (p->draft)
    for (GraphId id = 0; id < graph_count(p->g); id++) {
      free(p->draft[id].paths);
      free(p->draft[id].hoisted_at);
    }
  free(p->draft);
  free(p->also_of);
  free(p->also_q_of);
  free(p->by_attention);
  free(p->free_head);
  free(p->kernels);
  free(p->live);
  free(p->forced);
  free(p->use_start);
  free(p->use_node);
  free(p->use_slot);
}

/* One rewrite of kernel_prepare: a new graph with map (when not NULL)
 * taking in's nodes to it, or NULL with a message in err. */
typedef Graph *(*PrepareStep)(const Graph *in, const KernelPlanOptions *options, GraphId *map,
                              char *err, size_t err_size);

static Graph *split_column_sums(const Graph *in, const KernelPlanOptions *options, GraphId *map,
                                char *err, size_t err_size) {
  (void)options;
  return kernel_split_column_sums(in, map, err, err_size);
}

static Graph *split_long_reductions(const Graph *in, const KernelPlanOptions *options,
                                    GraphId *map, char *err, size_t err_size) {
  return kernel_split_long_reductions(in, options->long_reduction_chunk,
                                      options->long_reduction_rows, map, err, err_size);
}

static Graph *recompute(const Graph *in, const KernelPlanOptions *options, GraphId *map,
                        char *err, size_t err_size) {
  (void)options;
  return kernel_recompute(in, map, err, err_size);
}

Graph *kernel_prepare(const Graph *in, const KernelPlanOptions *options, GraphId *map, char *err,
                      size_t err_size) {
  KernelPlanOptions none = {0};
  if (!options)
    options = &none;
  PrepareStep steps[3];
  int count = 0;
  if (options->split_column_sums)
    steps[count++] = split_column_sums;
  if (options->long_reduction_chunk > 0)
    steps[count++] = split_long_reductions;
  steps[count++] = recompute;
  const Graph *g = in;
  Graph *owned = NULL;
  for (int s = 0; s < count; s++) {
    GraphId *step_map = map ? malloc(sizeof(GraphId) * (size_t)(graph_count(g) + 1)) : NULL;
    Graph *next = !map || step_map ? steps[s](g, options, step_map, err, err_size) : NULL;
    if (map && !step_map)
      errbuf_set(err, err_size, "planning: out of memory");
    /* map takes `in`'s nodes to g's: now to next's */
    for (GraphId id = 0; next && map && id < graph_count(in); id++)
      map[id] = s == 0 ? step_map[id] : map[id] < 0 ? map[id] : step_map[map[id]];
    free(step_map);
    graph_free(owned);
    if (!next)
      return NULL;
    g = owned = next;
  }
  return owned;
}

bool kernel_is_hoisted(const Kernel *k, GraphId id) {
  for (int i = 0; i < k->num_hoisted; i++)
    if (k->hoisted[i].node == id)
      return true;
  return false;
}

int kernel_outputs(const Kernel *k, GraphId out[3]) {
  int count = 0;
  out[count++] = k->root;
  if (k->also != GRAPH_NONE) out[count++] = k->also;
  if (k->also_q != GRAPH_NONE) out[count++] = k->also_q;
  return count;
}

KernelPlan *kernel_plan_build(const Graph *g, const KernelPlanOptions *options, char *err,
                              size_t err_size) {
  int count = graph_count(g);
  size_t n = (size_t)(count ? count : 1);
  KernelPlan *plan = calloc(1, sizeof *plan);
  Planner p = {.g = g, .options = options ? *options : (KernelPlanOptions){0}, .plan = plan};
  bool ok = plan && (plan->placement = calloc(n, sizeof *plan->placement)) &&
            (plan->kernel_of = malloc(n * sizeof(int))) &&
            (plan->buffer_of = malloc(n * sizeof(int))) && (p.live = calloc(n, sizeof(bool))) &&
            (p.forced = calloc(n, sizeof(bool))) && (p.draft = calloc(n, sizeof(NodeDraft))) &&
            (p.also_of = malloc(n * sizeof(GraphId))) &&
            (p.also_q_of = malloc(n * sizeof(GraphId))) &&
            (p.by_attention = calloc(n, sizeof(bool))) && (p.free_head = malloc(n * sizeof(int)));
  if (ok) {
    plan->graph = g;
    for (GraphId id = 0; id < count; id++) {
      plan->kernel_of[id] = plan->buffer_of[id] = p.free_head[id] = -1;
      p.also_of[id] = p.also_q_of[id] = GRAPH_NONE;
      p.draft[id].next_to_free = -1;
    }
    mark_live(&p);
    ok = index_consumers(&p);
    if (ok)
      pair_attention_outputs(&p);
  }
  /* A bf16 scatter_add would accumulate in its bf16 output; autodiff
   * scatters in f32 (the gather VJP), so only a hand-built graph has one. */
  for (GraphId id = 0; ok && id < count; id++)
    if (graph_node(g, id)->op == GRAPH_OP_SCATTER_ADD && graph_node(g, id)->dtype == GRAPH_BF16) {
      planner_release(&p);
      kernel_plan_free(plan);
      errbuf_set(err, err_size, "kernel formation: scatter_add of bf16 is not supported "
                                "(cast its updates to f32)");
      return NULL;
    }
  for (GraphId id = count - 1; ok && id >= 0; id--) {
    ok = decide(&p, id);
    free_paths_after(&p, id);
  }
  ok = ok && list_kernels(&p) && list_buffers(plan) && list_args(plan) &&
       kernel_inplace_plan(plan) && kernel_signature_assign(plan) && kernel_memory_plan(plan);
  planner_release(&p);
  if (!ok) {
    kernel_plan_free(plan);
    errbuf_set(err, err_size, "kernel formation: out of memory");
    return NULL;
  }
  return plan;
}

void kernel_plan_free(KernelPlan *plan) {
  if (!plan)
    return;
  for (int i = 0; plan->kernels && i < plan->num_kernels; i++) {
    free(plan->kernels[i].nodes);
    free(plan->kernels[i].hoisted);
    free(plan->kernels[i].args);
  }
  free(plan->kernels);
  free(plan->buffers);
  free(plan->function_kernel);
  free(plan->placement);
  free(plan->kernel_of);
  free(plan->buffer_of);
  free(plan);
}

const KernelBuffer *kernel_plan_buffer(const KernelPlan *plan, GraphId node) {
  if (node < 0 || node >= graph_count(plan->graph) || plan->buffer_of[node] < 0)
    return NULL;
  return &plan->buffers[plan->buffer_of[node]];
}
