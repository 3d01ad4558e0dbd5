/* Recomputation across kernels. Kernel formation inlines a node only when
 * every consumer is in one kernel, so a cheap value read by two loop
 * kernels (a broadcast of a layernorm's statistics, x * 0.5 in a GELU that
 * the backward pass reads again) is stored by a kernel of its own and read
 * back twice. Here such a kernel is copied into each of its consumers'
 * kernels instead, when that costs few operations per element and moves no
 * more bytes than storing it: XLA's duplication of cheap producers.
 *
 * The choice needs the plan, so this plans the graph, copies the nodes of
 * the chosen kernels once per consumer kernel and plans again, until no
 * kernel is worth copying. A chosen kernel's producers and consumers wait
 * for the next round, so the copies of one round never feed each other. */
#include "kernel.h"
#include "errbuf.h"

#include <stdlib.h>
#include <string.h>

#include "kernel_internal.h"
#include "pass.h"
#include "rewrite.h"

/* A copy costing at most CHEAP_COST operations an element (kernel_op_cost:
 * an add 1, a division 4, a transcendental 16) is always cheaper than
 * storing the value and reading it back. Beyond that, copied into c
 * consumer kernels the value is computed in each of their passes over a
 * row that read it (the elementwise pass, an upper bound, and each hoisted
 * reduction that reads it), e evaluations in all, e - 1 more
 * than now, and is no longer stored and read back c times. That copy is
 * made when the extra operations come to at most FLOAT_MOVE_COST per
 * float not moved: in a vector of 16 lanes an add is a sixteenth of a
 * cycle an element, storing or loading a float from L3 a few cycles. 8
 * lets a GELU's tanh (with its bias add, 23) be recomputed in the
 * forward's product and in the backward (c = e = 2, at most 24): one pass
 * over [B, T, d_ff] less each way in gpt-small. So is a cross-entropy's
 * exp (with its subtraction, 17): in the loss's row sum and in the
 * gradient (e = 2; with a gradient through the row max, the backward's
 * row sum for it read the exp too, e = 3, and it was stored). */
#define CHEAP_COST 4
#define FLOAT_MOVE_COST 8
#define MAX_COPIES 4
/* A kernel that only expands its input through movement ops (a broadcast of
 * a scalar or a row statistic) costs nothing to copy and each copy reads
 * fewer bytes than the stored value, so it is copied into as many readers as
 * it has, up to this many: one CSE'd broadcast of the clipping factor or of
 * Adam's bias correction is read by every update of its shape (60 in
 * gpt-small), and storing it made each of them read a full-size tensor
 * where one value a row would do. */
#define MAX_EXPANSION_COPIES 64
#define MAX_ROUNDS 8

#define MAX_VIEWS 4

typedef struct Choice {
  int num_copies;           /* 0: the kernel stays */
  int consumer[MAX_EXPANSION_COPIES]; /* the consumer kernels, one copy each */
  int num_views;            /* reshapes of the root that share its buffer: copied too */
  GraphId view[MAX_VIEWS];
} Choice;

static bool has_arg(const Kernel *k, int buffer) {
  for (int i = 0; i < k->num_args; i++)
    if (k->args[i] == buffer)
      return true;
  return false;
}

/* Whether `x` is the root of kernel `ki` or one of its views in c. */
static bool reads_root(const KernelPlan *plan, int ki, const Choice *c, GraphId x) {
  if (x == plan->kernels[ki].root)
    return true;
  for (int v = 0; v < c->num_views; v++)
    if (c->view[v] == x)
      return true;
  return false;
}

/* The loop kernels other than `ki` that read its root, directly or through
 * views; false when some reader is not a loop kernel or there are more than
 * `most`. */
static bool consumer_kernels(const KernelPlan *plan, int ki, int most, Choice *c) {
  const Graph *g = plan->graph;
  c->num_copies = c->num_views = 0;
  for (GraphId id = plan->kernels[ki].root + 1; id < graph_count(g); id++) {
    const GraphNode *n = graph_node(g, id);
    KernelPlacement pl = plan->placement[id];
    bool reads = false;
    for (int i = 0; i < n->num_inputs; i++)
      reads |= reads_root(plan, ki, c, n->inputs[i]);
    if (!reads || pl == KERNEL_UNUSED)
      continue;
    if (pl == KERNEL_VIEW) {
      if (c->num_views == MAX_VIEWS)
        return false;
      c->view[c->num_views++] = id;
      continue;
    }
    if ((pl != KERNEL_INLINED && pl != KERNEL_ROOT) ||
        plan->kernels[plan->kernel_of[id]].kind != KERNEL_LOOP)
      return false;
    int kc = plan->kernel_of[id], j = 0;
    while (j < c->num_copies && c->consumer[j] != kc)
      j++;
    if (j == c->num_copies) {
      if (c->num_copies == most)
        return false;
      c->consumer[c->num_copies++] = kc;
    }
  }
  return true;
}

/* The index of kernel k's first input in its args (its outputs come first). */
static int first_input(const Kernel *k) {
  GraphId out[3];
  return kernel_outputs(k, out);
}

/* Whether copying kernel `ki` into each consumer moves no more bytes than
 * storing its root once and reading it back in each. */
static bool copying_pays(const KernelPlan *plan, int ki, const Choice *c) {
  const Kernel *k = &plan->kernels[ki];
  int64_t inputs = 0, out = plan->buffers[k->args[0]].bytes, copied = 0;
  for (int a = first_input(k); a < k->num_args; a++) {
    int64_t bytes = plan->buffers[k->args[a]].bytes;
    inputs += bytes;
    for (int j = 0; j < c->num_copies; j++)
      if (!has_arg(&plan->kernels[c->consumer[j]], k->args[a]))
        copied += bytes;
  }
  return copied <= inputs + out * (1 + c->num_copies);
}

static int node_index(const Kernel *k, GraphId id) {
  for (int i = 0; i < k->num_nodes; i++)
    if (k->nodes[i] == id)
      return i;
  return -1;
}

/* Marks in copied[] (one flag per node of k) the nodes that a copy of k
 * takes: all but its hoisted reductions and what only they read, which stay
 * behind to be stored, one value a row (a softmax's max broadcast to two
 * kernels: the broadcast is copied, the max stored). False when a copied
 * node reads inside a reduction, which would then be stored whole. */
static bool copied_part(const KernelPlan *plan, const Kernel *k, bool *copied) {
  const Graph *g = plan->graph;
  for (int i = 0; i < k->num_nodes; i++)
    copied[i] = true;
  for (int h = 0; h < k->num_hoisted; h++)
    copied[node_index(k, k->hoisted[h].node)] = false;
  /* Nodes come in id order: a reduction's inputs precede it. */
  for (int i = k->num_nodes - 1; i >= 0; i--) {
    if (copied[i])
      continue;
    const GraphNode *n = graph_node(g, k->nodes[i]);
    for (int s = 0; s < n->num_inputs; s++) {
      int at = node_index(k, n->inputs[s]);
      if (at >= 0)
        copied[at] = false;
    }
  }
  for (int i = 0; i < k->num_nodes; i++) {
    const GraphNode *n = graph_node(g, k->nodes[i]);
    for (int s = 0; copied[i] && s < n->num_inputs; s++) {
      int at = node_index(k, n->inputs[s]);
      if (at >= 0 && !copied[at] && !kernel_is_hoisted(k, n->inputs[s]))
        return false;
    }
  }
  return true;
}

/* Whether the kernel's inputs together are smaller than its output. */
static bool expands(const KernelPlan *plan, const Kernel *k) {
  int64_t inputs = 0;
  for (int a = first_input(k); a < k->num_args; a++)
    inputs += plan->buffers[k->args[a]].bytes;
  return inputs < plan->buffers[k->args[0]].bytes;
}

/* How many passes over a row of consumer kernel kc would compute a copy
 * of kernel ki: its elementwise pass (an upper bound: it may read the
 * value only inside reductions), and each hoisted reduction that reads the
 * root, directly or through nodes it computes (not through another hoisted
 * reduction, computed once a row). `reads` holds a flag per node of kc. */
static int passes_reading(const KernelPlan *plan, int ki, const Choice *c, int kc, bool *reads) {
  const Kernel *k = &plan->kernels[kc];
  int passes = 1;
  for (int i = 0; i < k->num_nodes; i++) {
    const GraphNode *n = graph_node(plan->graph, k->nodes[i]);
    reads[i] = false;
    for (int s = 0; s < n->num_inputs && !reads[i]; s++) {
      GraphId x = n->inputs[s];
      int at = node_index(k, x); /* nodes in id order: x's flag is set */
      reads[i] = reads_root(plan, ki, c, x) || (at >= 0 && plan->placement[x] == KERNEL_INLINED &&
                                                !kernel_is_hoisted(k, x) && reads[at]);
    }
    passes += reads[i] && kernel_is_hoisted(k, k->nodes[i]);
  }
  return passes;
}

static bool worth_copying(const KernelPlan *plan, int ki, Choice *c, bool *copied, bool *reads) {
  const Kernel *k = &plan->kernels[ki];
  if (k->kind != KERNEL_LOOP || graph_is_output(plan->graph, k->root) ||
      graph_is_update_value(plan->graph, k->root) || !copied_part(plan, k, copied))
    return false;
  int cost = 0;
  for (int i = 0; i < k->num_nodes; i++)
    if (copied[i])
      cost += kernel_op_cost(graph_node(plan->graph, k->nodes[i])->op);
  int most = cost == 0 && expands(plan, k) ? MAX_EXPANSION_COPIES : MAX_COPIES;
  if (!consumer_kernels(plan, ki, most, c) || c->num_copies < 2 || !copying_pays(plan, ki, c))
    return false;
  int evaluations = 0;
  for (int j = 0; j < c->num_copies; j++)
    evaluations += passes_reading(plan, ki, c, c->consumer[j], reads);
  return cost <= CHEAP_COST ||
         cost * (evaluations - 1) <= FLOAT_MOVE_COST * (c->num_copies + 1);
}

/* Chooses kernels to copy, none of them a producer or consumer of another,
 * and sets owner[id] to the chosen kernel each copied node (the kernel's
 * nodes and the root's views) belongs to, -1 elsewhere; returns how many. */
static int choose(const KernelPlan *plan, Choice *choice, int *owner) {
  const Graph *g = plan->graph;
  int most = 1;
  for (int ki = 0; ki < plan->num_kernels; ki++)
    if (plan->kernels[ki].num_nodes > most)
      most = plan->kernels[ki].num_nodes;
  bool *blocked = calloc((size_t)plan->num_kernels + 1, sizeof(bool));
  bool *copied = malloc(sizeof(bool) * (size_t)most);
  bool *reads = malloc(sizeof(bool) * (size_t)most);
  if (!blocked || !copied || !reads) {
    free(blocked);
    free(copied);
    free(reads);
    return -1;
  }
  for (GraphId id = 0; id < graph_count(g); id++)
    owner[id] = -1;
  int chosen = 0;
  for (int ki = 0; ki < plan->num_kernels; ki++) {
    choice[ki].num_copies = 0;
    Choice c;
    if (blocked[ki] || !worth_copying(plan, ki, &c, copied, reads))
      continue;
    choice[ki] = c;
    chosen++;
    for (int j = 0; j < c.num_copies; j++)
      blocked[c.consumer[j]] = true;
    for (int v = 0; v < c.num_views; v++)
      owner[c.view[v]] = ki;
    const Kernel *k = &plan->kernels[ki];
    for (int i = 0; i < k->num_nodes; i++) {
      const GraphNode *n = graph_node(g, k->nodes[i]);
      if (!copied[i])
        continue; /* stays, and becomes its own kernel's root */
      owner[k->nodes[i]] = ki;
      for (int s = 0; s < n->num_inputs; s++) {
        int producer = plan->kernel_of[n->inputs[s]];
        if (producer >= 0 && producer != ki)
          blocked[producer] = true;
      }
    }
  }
  free(blocked);
  free(copied);
  free(reads);
  return chosen;
}

/* Which copy of chosen kernel `kx` kernel `reader` reads. */
static int copy_for(const Choice *c, int reader) {
  int j = 0;
  while (j < c->num_copies - 1 && c->consumer[j] != reader)
    j++;
  return j;
}

/* map[i] = round[map[i]]: the ids of the graph before all rounds in the
 * graph after this one. */
static void compose(GraphId *map, const GraphId *round, int count) {
  for (int i = 0; map && i < count; i++)
    map[i] = round[map[i]];
}

/* Rebuilds the graph with every node of a chosen kernel, and every view of
 * its root, copied once per consumer kernel (copies[id * most + j], most the
 * largest number of copies of any kernel) and each consumer reading its own
 * copy. */
static Graph *copy_kernels(const KernelPlan *plan, const Choice *choice, const int *owner,
                           GraphId *map, int map_count, char *err, size_t err_size) {
  const Graph *in = plan->graph;
  PassRewrite r;
  int most = 1;
  for (int ki = 0; ki < plan->num_kernels; ki++)
    if (choice[ki].num_copies > most)
      most = choice[ki].num_copies;
  GraphId *copies = malloc(sizeof(GraphId) * (size_t)(graph_count(in) * most + 1));
  if (!copies || !pass_rewrite_begin(&r, in, err, err_size)) {
    free(copies);
    errbuf_set(err, err_size, "recomputation: out of memory");
    return NULL;
  }
  for (GraphId id = 0; id < graph_count(in); id++) {
    const GraphNode *n = graph_node(in, id);
    GraphId *inputs = (GraphId *)pass_rewrite_inputs(&r, id);
    int own = owner[id];
    if (own >= 0) {
      for (int j = 0; j < choice[own].num_copies; j++) {
        for (int s = 0; s < n->num_inputs; s++)
          if (owner[n->inputs[s]] == own)
            inputs[s] = copies[n->inputs[s] * most + j];
        copies[id * most + j] = graph_copy_node(r.out, in, id, inputs);
      }
      r.map[id] = copies[id * most];
      continue;
    }
    /* A reader of a copied root or view is in one of its consumer kernels
     * (or dead, and then any copy will do). */
    for (int s = 0; s < n->num_inputs; s++) {
      int kx = owner[n->inputs[s]];
      if (kx >= 0)
        inputs[s] = copies[n->inputs[s] * most + copy_for(&choice[kx], plan->kernel_of[id])];
    }
    r.map[id] = graph_copy_node(r.out, in, id, inputs);
  }
  free(copies);
  compose(map, r.map, map_count);
  return pass_rewrite_finish(&r, err, err_size);
}

static Graph *copy_graph(const Graph *in, GraphId *map, char *err, size_t err_size) {
  PassRewrite r;
  if (!pass_rewrite_begin(&r, in, err, err_size))
    return NULL;
  for (GraphId id = 0; id < graph_count(in); id++)
    r.map[id] = pass_rewrite_copy(&r, id);
  for (GraphId id = 0; map && id < graph_count(in); id++)
    map[id] = r.map[id];
  return pass_rewrite_finish(&r, err, err_size);
}

/* Two rounds can put two copies of one value in one kernel: a GELU's tanh
 * copied into its readers, 1 + tanh and the backward's tanh * tanh, and in
 * the next round 1 + tanh, now with a tanh of its own, copied into the
 * backward as well. Equal nodes of one kernel are merged, as CSE merges
 * them, but not equal nodes of different kernels, which are the copies.
 * Constants and views cost nothing wherever they are and merge anywhere. */
#define ANY_KERNEL (-2)
static Graph *merge_within_kernels(Graph *g, GraphId *map, int map_count, char *err,
                                   size_t err_size) {
  KernelPlan *plan = kernel_plan_build(g, NULL, err, err_size);
  int *group = plan ? malloc(sizeof(int) * (size_t)(graph_count(g) + 1)) : NULL;
  GraphId *round = group ? malloc(sizeof(GraphId) * (size_t)(graph_count(g) + 1)) : NULL;
  Graph *out = NULL;
  if (round) {
    for (GraphId id = 0; id < graph_count(g); id++) {
      KernelPlacement p = plan->placement[id];
      group[id] = p == KERNEL_INLINED || p == KERNEL_ROOT ? plan->kernel_of[id]
                  : p == KERNEL_FREE || p == KERNEL_VIEW  ? ANY_KERNEL
                                                          : PASS_CSE_NO_GROUP;
    }
    out = pass_cse_within(g, group, round, err, err_size);
    if (out)
      compose(map, round, map_count);
  } else if (plan) {
    errbuf_set(err, err_size, "recomputation: out of memory");
  }
  free(round);
  free(group);
  kernel_plan_free(plan);
  graph_free(g);
  return out;
}

Graph *kernel_recompute(const Graph *in, GraphId *map, char *err, size_t err_size) {
  Graph *g = copy_graph(in, map, err, err_size);
  for (int round = 0; g && round < MAX_ROUNDS; round++) {
    KernelPlan *plan = kernel_plan_build(g, NULL, err, err_size);
    Choice *choice = plan ? malloc(sizeof(Choice) * (size_t)(plan->num_kernels + 1)) : NULL;
    int *owner = choice ? malloc(sizeof(int) * (size_t)(graph_count(g) + 1)) : NULL;
    int chosen = owner ? choose(plan, choice, owner) : -1;
    Graph *next = chosen > 0 ? copy_kernels(plan, choice, owner, map, graph_count(in), err,
                                            err_size)
                             : NULL;
    if (chosen < 0 && plan)
      errbuf_set(err, err_size, "recomputation: out of memory");
    free(owner);
    free(choice);
    kernel_plan_free(plan);
    if (chosen == 0)
      return merge_within_kernels(g, map, graph_count(in), err, err_size);
    graph_free(g);
    g = next;
  }
  return g ? merge_within_kernels(g, map, graph_count(in), err, err_size) : NULL;
}
