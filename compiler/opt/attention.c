/* Fused attention: finds softmax(scale * q kT + mask) v as the front end
 * lowers it (models/std/attention.tfm and nn.tfm's guarded softmax):
 *
 *   z  = dot q, kT                     kT a permute swapping the last two
 *   y  = div z, c | mul z, c | z        c a splat constant
 *   x  = add y, broadcast mask | y
 *   m  = select(r == -inf, 0, r)        r = reduce_max x or its stop_gradient
 *   e  = exp(x - broadcast m)
 *   l  = select(reduce_sum e == 0, 1, reduce_sum e)
 *   o  = dot (div e, broadcast l), v
 *
 * and replaces o with attention(q, k, v, mask?) (scale, causal). The
 * comparisons may be wrapped in casts and cmpeq(…, 0) pairs (the front end
 * casts comparisons back to floats and select needs an i32 condition). A
 * mask computed from constants alone (iota comparisons) is evaluated here:
 * 0 / -inf in the causal pattern becomes the causal attribute, all zeros no
 * mask. A mask that depends on a param is left unfused (the fused op gives
 * it no gradient). Every node is still copied (the unfused chain becomes
 * dead and DCE drops it), so `map` covers the whole input graph. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "pass.h"
#include "rewrite.h"

enum { MASK_UNKNOWN = 0, MASK_NONE, MASK_CAUSAL, MASK_OTHER };

typedef struct Matcher {
  const Graph *g;
  int *uses;         /* live consumers per node */
  signed char *kind; /* memo: MASK_* of a constant mask node */
} Matcher;

typedef struct AttentionMatch {
  GraphId q, k, v, mask; /* k: [..., S, D] or the kT to permute back */
  bool k_transposed;     /* k is kT ([..., D, S]) */
  double scale;
  bool causal;
} AttentionMatch;

static const GraphNode *node(const Matcher *m, GraphId id) { return graph_node(m->g, id); }

static GraphId strip_broadcast(const Matcher *m, GraphId id) {
  while (node(m, id)->op == GRAPH_OP_BROADCAST) id = node(m, id)->inputs[0];
  return id;
}

static bool is_splat(const Matcher *m, GraphId id, double *value) {
  return graph_constant_is_splat(node(m, strip_broadcast(m, id)), value);
}

static bool is_splat_of(const Matcher *m, GraphId id, double want) {
  double v;
  return is_splat(m, id, &v) && v == want;
}

/* Whether `c` (i32 or a float 0/1) is (value == bad) xor *negated. */
static bool truth(const Matcher *m, GraphId c, GraphId value, double bad, bool *negated) {
  const GraphNode *n = node(m, c);
  if (n->op == GRAPH_OP_CAST) return truth(m, n->inputs[0], value, bad, negated);
  if (n->op != GRAPH_OP_CMPEQ) return false;
  for (int side = 0; side < 2; side++) {
    GraphId a = n->inputs[side], b = n->inputs[1 - side];
    if (a == value && is_splat_of(m, b, bad)) {
      *negated = false;
      return true;
    }
    if (is_splat_of(m, b, 0.0) && truth(m, a, value, bad, negated)) {
      *negated = !*negated;
      return true;
    }
  }
  return false;
}

/* The node `guarded` is select(value == bad, replacement, value), value a
 * `reduce` node or, for the max, its stop_gradient (std's softmax: the max
 * shifts every score alike, so the fused op's gradient is the same; a
 * stop on the sum would not be); returns the reduction or GRAPH_NONE. */
static GraphId guarded(const Matcher *m, GraphId guarded_id, GraphOp reduce, double bad,
                       double replacement) {
  const GraphNode *s = node(m, guarded_id);
  if (s->op != GRAPH_OP_SELECT) return GRAPH_NONE;
  GraphId a = s->inputs[1], b = s->inputs[2];
  GraphId value = is_splat_of(m, a, replacement) ? b : a;
  GraphId other = value == b ? a : b;
  bool negated;
  GraphId reduced = node(m, value)->op == GRAPH_OP_STOP_GRADIENT && reduce == GRAPH_OP_REDUCE_MAX
                        ? node(m, value)->inputs[0]
                        : value;
  if (node(m, reduced)->op != reduce || !truth(m, s->inputs[0], value, bad, &negated))
    return GRAPH_NONE;
  /* cond true picks input 1: it must be the replacement unless negated */
  bool ok = negated ? (a == value && is_splat_of(m, other, replacement))
                    : (b == value && is_splat_of(m, other, replacement));
  return ok ? reduced : GRAPH_NONE;
}

static bool last_axis_only(const GraphNode *n) {
  return n->attrs.axes == 1u << (n->shape.rank - 1);
}

static bool swaps_last_two(const GraphNode *n) {
  int r = n->shape.rank;
  for (int i = 0; i < r - 2; i++)
    if (n->attrs.perm[i] != i) return false;
  return n->attrs.perm[r - 2] == r - 1 && n->attrs.perm[r - 1] == r - 2;
}

/* y = dot(q, kT) scaled by a splat constant, or the dot alone; y has
 * `uses` consumers in the chain. */
static bool match_scores(const Matcher *m, GraphId y, int uses, AttentionMatch *out) {
  const GraphNode *n = node(m, y);
  double c;
  out->scale = 1.0;
  if (m->uses[y] != uses) return false;
  if (n->op == GRAPH_OP_DIV || n->op == GRAPH_OP_MUL) {
    int side = n->op == GRAPH_OP_MUL && is_splat(m, n->inputs[0], &c) ? 0 : 1;
    if (!is_splat(m, n->inputs[side], &c) || c == 0 || !isfinite(c)) return false;
    out->scale = n->op == GRAPH_OP_DIV ? 1.0 / c : c;
    y = n->inputs[1 - side];
    n = node(m, y);
    if (m->uses[y] != 1) return false;
  }
  if (n->op != GRAPH_OP_DOT || n->attrs.transpose_a) return false;
  int r = n->shape.rank;
  const GraphNode *q = node(m, n->inputs[0]), *kt = node(m, n->inputs[1]);
  if (q->shape.rank != r || kt->shape.rank != r || !graph_dtype_is_float(n->dtype)) return false;
  out->q = n->inputs[0];
  out->k = n->inputs[1];
  out->k_transposed = !n->attrs.transpose_b;
  if (out->k_transposed && kt->op == GRAPH_OP_PERMUTE && swaps_last_two(kt)) {
    out->k = kt->inputs[0];
    out->k_transposed = false;
  }
  return true;
}

static bool depends_on(const Matcher *m, GraphId id, bool (*leaf)(GraphOp), bool *seen) {
  if (seen[id]) return false;
  seen[id] = true;
  const GraphNode *n = node(m, id);
  if (leaf(n->op)) return true;
  for (int i = 0; i < n->num_inputs; i++)
    if (depends_on(m, n->inputs[i], leaf, seen)) return true;
  return false;
}

static bool is_param(GraphOp op) { return op == GRAPH_OP_PARAM || op == GRAPH_OP_STATE; }
static bool is_variable(GraphOp op) {
  return op == GRAPH_OP_PARAM || op == GRAPH_OP_STATE || op == GRAPH_OP_INPUT ||
         op == GRAPH_OP_RANDOM;
}

static bool reaches(const Matcher *m, GraphId id, bool (*leaf)(GraphOp)) {
  bool *seen = calloc((size_t)graph_count(m->g), sizeof(bool));
  bool yes = !seen || depends_on(m, id, leaf, seen); /* out of memory: assume it does */
  free(seen);
  return yes;
}

/* Evaluates a mask of constants alone and names its pattern over the
 * scores [..., t, s]. */
static int constant_mask_kind(Matcher *m, GraphId mask, int64_t t, int64_t s) {
  if (m->kind[mask] != MASK_UNKNOWN) return m->kind[mask];
  const GraphNode *mn = node(m, mask);
  int kind = MASK_OTHER;
  int64_t numel = graph_shape_numel(&mn->shape);
  int r = mn->shape.rank;
  bool square = r >= 2 && mn->shape.dims[r - 2] == t && mn->shape.dims[r - 1] == s && t == s;
  Graph *tmp = numel <= (1 << 22) ? graph_new() : NULL;
  GraphId *map = tmp ? malloc(sizeof(GraphId) * (size_t)(mask + 1)) : NULL;
  bool *need = tmp ? calloc((size_t)mask + 1, sizeof(bool)) : NULL;
  if (map && need) {
    need[mask] = true;
    for (GraphId id = mask; id >= 0; id--)
      if (need[id])
        for (int i = 0; i < node(m, id)->num_inputs; i++) need[node(m, id)->inputs[i]] = true;
    GraphId inputs[GRAPH_MAX_RANK + 8];
    for (GraphId id = 0; id <= mask; id++) {
      if (!need[id]) continue;
      const GraphNode *n = node(m, id);
      for (int i = 0; i < n->num_inputs && i < (int)(sizeof inputs / sizeof inputs[0]); i++)
        inputs[i] = map[n->inputs[i]];
      map[id] = n->num_inputs <= (int)(sizeof inputs / sizeof inputs[0])
                    ? graph_copy_node(tmp, m->g, id, inputs)
                    : GRAPH_NONE;
    }
    EvalValues *v = !graph_error(tmp) && map[mask] != GRAPH_NONE ? eval_new(tmp, GRAPH_F64) : NULL;
    if (v) {
      eval_run(v);
      bool zeros = true, causal = square;
      for (int64_t e = 0; e < numel && (zeros || causal); e++) {
        double x = eval_get(v, map[mask], e);
        int64_t j = e % s, i = (e / s) % t;
        zeros = zeros && x == 0.0;
        causal = causal && x == (j > i ? -INFINITY : 0.0);
      }
      kind = zeros ? MASK_NONE : causal ? MASK_CAUSAL : MASK_OTHER;
      eval_free(v);
    }
  }
  free(map);
  free(need);
  graph_free(tmp);
  m->kind[mask] = (signed char)kind;
  return kind;
}

/* x = y + broadcast(mask), either order, or y alone. */
static bool match_masked(Matcher *m, GraphId x, AttentionMatch *out) {
  const GraphNode *n = node(m, x);
  out->mask = GRAPH_NONE;
  out->causal = false;
  if (n->op != GRAPH_OP_ADD) return match_scores(m, x, 2, out);
  int side = -1;
  for (int i = 0; i < 2 && side < 0; i++)
    if (match_scores(m, n->inputs[i], 1, out)) side = i;
  if (side < 0) return false;
  GraphId mask = strip_broadcast(m, n->inputs[1 - side]);
  const GraphNode *mn = node(m, mask);
  int r = n->shape.rank, mr = mn->shape.rank;
  if (mr > r || mn->dtype != n->dtype) return false;
  for (int i = 0; i < mr; i++) {
    int64_t d = mn->shape.dims[i], want = n->shape.dims[r - mr + i];
    if (d != want && d != 1) return false;
  }
  if (reaches(m, mask, is_param)) return false;
  int64_t t = n->shape.dims[r - 2], s = n->shape.dims[r - 1];
  int kind = reaches(m, mask, is_variable) ? MASK_OTHER : constant_mask_kind(m, mask, t, s);
  if (kind == MASK_OTHER) out->mask = mask;
  out->causal = kind == MASK_CAUSAL;
  return true;
}

/* o = dot(p, v): the whole chain, or false. */
static bool match(Matcher *m, GraphId o, AttentionMatch *out) {
  const GraphNode *n = node(m, o);
  if (n->op != GRAPH_OP_DOT || n->attrs.transpose_a || n->attrs.transpose_b) return false;
  int r = n->shape.rank;
  GraphId p = n->inputs[0];
  const GraphNode *pn = node(m, p);
  if (node(m, n->inputs[1])->shape.rank != r || pn->op != GRAPH_OP_DIV || m->uses[p] != 1)
    return false;
  GraphId e = pn->inputs[0];
  GraphId sum = guarded(m, strip_broadcast(m, pn->inputs[1]), GRAPH_OP_REDUCE_SUM, 0.0, 1.0);
  const GraphNode *en = node(m, e);
  if (sum == GRAPH_NONE || node(m, sum)->inputs[0] != e || !last_axis_only(node(m, sum)) ||
      en->op != GRAPH_OP_EXP || m->uses[e] != 2)
    return false;
  const GraphNode *shifted = node(m, en->inputs[0]);
  if (shifted->op != GRAPH_OP_SUB || m->uses[en->inputs[0]] != 1) return false;
  GraphId x = shifted->inputs[0];
  GraphId max = guarded(m, strip_broadcast(m, shifted->inputs[1]), GRAPH_OP_REDUCE_MAX,
                        -INFINITY, 0.0);
  if (max == GRAPH_NONE || node(m, max)->inputs[0] != x || !last_axis_only(node(m, max)) ||
      m->uses[x] != 2)
    return false;
  out->v = n->inputs[1];
  return match_masked(m, x, out);
}

Graph *pass_attention(const Graph *in, GraphId *map, char *err, size_t err_size) {
  int count = graph_count(in);
  size_t n = (size_t)(count ? count : 1);
  Matcher m = {.g = in, .uses = calloc(n, sizeof(int)), .kind = calloc(n, 1)};
  bool *live = calloc(n, sizeof(bool));
  PassRewrite r;
  if (!m.uses || !m.kind || !live || !pass_rewrite_begin(&r, in, err, err_size)) {
    free(m.uses);
    free(m.kind);
    free(live);
    return NULL;
  }
  for (int i = 0; i < graph_num_outputs(in); i++) live[graph_output_at(in, i).node] = true;
  for (int i = 0; i < graph_num_updates(in); i++) live[graph_update_at(in, i).value] = true;
  for (GraphId id = count - 1; id >= 0; id--)
    if (live[id])
      for (int i = 0; i < graph_node(in, id)->num_inputs; i++) {
        live[graph_node(in, id)->inputs[i]] = true;
        m.uses[graph_node(in, id)->inputs[i]]++;
      }
  for (GraphId id = 0; id < count; id++) {
    AttentionMatch a;
    if (!live[id] || !match(&m, id, &a)) {
      r.map[id] = pass_rewrite_copy(&r, id);
      continue;
    }
    graph_set_scope_from(r.out, in, id);
    GraphId k = r.map[a.k];
    if (a.k_transposed) {
      int perm[GRAPH_MAX_RANK], rank = graph_node(in, a.k)->shape.rank;
      for (int i = 0; i < rank; i++) perm[i] = i;
      perm[rank - 2] = rank - 1;
      perm[rank - 1] = rank - 2;
      k = graph_permute(r.out, k, perm);
    }
    r.map[id] = graph_attention(r.out, r.map[a.q], k, r.map[a.v],
                                a.mask == GRAPH_NONE ? GRAPH_NONE : r.map[a.mask], a.scale,
                                a.causal);
  }
  if (map)
    memcpy(map, r.map, sizeof(GraphId) * (size_t)count);
  free(m.uses);
  free(m.kind);
  free(live);
  return pass_rewrite_finish(&r, err, err_size);
}
