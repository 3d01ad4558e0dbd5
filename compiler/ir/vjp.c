/* The VJP rules of ops.def: for y = op(x...), each builds dL/dx_i from
 * g = dL/dy out of primitives. Forward values are read through
 * autodiff_value so that random-derived values are regenerated. */
#include "autodiff_vjp.h"

/* ---- small builders ------------------------------------------------------ */

static GraphId sub(Graph *g, GraphId a, GraphId b) { return graph_binary(g, GRAPH_OP_SUB, a, b); }
static GraphId mul(Graph *g, GraphId a, GraphId b) { return graph_binary(g, GRAPH_OP_MUL, a, b); }
static GraphId divide(Graph *g, GraphId a, GraphId b) {
  return graph_binary(g, GRAPH_OP_DIV, a, b);
}
static GraphId neg(Graph *g, GraphId a) { return graph_unary(g, GRAPH_OP_NEG, a); }

/* A constant with the shape and dtype of x. */
static GraphId like(Graph *g, GraphId x, double value) {
  const GraphNode *n = graph_node(g, x);
  if (!n) return GRAPH_NONE;
  return graph_splat(g, n->dtype, n->shape, value);
}

static GraphShape shape_of(Graph *g, GraphId x) { return graph_node(g, x)->shape; }

static bool wants(AutodiffContext *ctx, const GraphNode *node, int i) {
  return autodiff_needs_grad(ctx, node->inputs[i]);
}

static GraphId input_value(AutodiffContext *ctx, const GraphNode *node, int i) {
  return autodiff_value(ctx, node->inputs[i]);
}

/* Sums g (shaped like a broadcast result) back to `shape`. */
static GraphId unbroadcast(Graph *g, GraphId grad, GraphShape shape) {
  GraphShape out = shape_of(g, grad);
  int offset = out.rank - shape.rank;
  uint32_t axes = 0;
  for (int j = 0; j < out.rank; j++) {
    int i = j - offset;
    if (i < 0 || (shape.dims[i] == 1 && out.dims[j] != 1)) axes |= 1u << j;
  }
  GraphId summed = axes ? graph_reduce(g, GRAPH_OP_REDUCE_SUM, grad, axes) : grad;
  GraphShape summed_shape = shape_of(g, summed);
  return graph_shape_equal(&summed_shape, &shape) ? summed : graph_reshape(g, summed, shape);
}

/* ---- no gradient --------------------------------------------------------- */

void autodiff_vjp_none(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                       GraphId *dx) {
  (void)ctx, (void)node, (void)self, (void)grad, (void)dx;
}

/* ---- unary --------------------------------------------------------------- */

void autodiff_vjp_neg(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)node, (void)self;
  dx[0] = neg(autodiff_graph(ctx), grad);
}

void autodiff_vjp_exp(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)node;
  dx[0] = mul(autodiff_graph(ctx), grad, autodiff_value(ctx, self));
}

void autodiff_vjp_log(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  dx[0] = divide(autodiff_graph(ctx), grad, input_value(ctx, node, 0));
}

/* d sqrt(x) = 1 / (2 sqrt(x)) */
void autodiff_vjp_sqrt(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                       GraphId *dx) {
  (void)node;
  Graph *g = autodiff_graph(ctx);
  GraphId y = autodiff_value(ctx, self);
  dx[0] = divide(g, grad, mul(g, y, like(g, y, 2.0)));
}

/* d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3 */
void autodiff_vjp_rsqrt(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                        GraphId *dx) {
  (void)node;
  Graph *g = autodiff_graph(ctx);
  GraphId y = autodiff_value(ctx, self);
  GraphId y3 = mul(g, y, mul(g, y, y));
  dx[0] = mul(g, grad, mul(g, like(g, y, -0.5), y3));
}

/* d tanh(x) = 1 - y^2 */
void autodiff_vjp_tanh(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                       GraphId *dx) {
  (void)node;
  Graph *g = autodiff_graph(ctx);
  GraphId y = autodiff_value(ctx, self);
  dx[0] = mul(g, grad, sub(g, like(g, y, 1.0), mul(g, y, y)));
}

void autodiff_vjp_sin(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  dx[0] = mul(g, grad, graph_unary(g, GRAPH_OP_COS, input_value(ctx, node, 0)));
}

void autodiff_vjp_cos(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  dx[0] = neg(g, mul(g, grad, graph_unary(g, GRAPH_OP_SIN, input_value(ctx, node, 0))));
}

/* d erf(x) = 2/sqrt(pi) exp(-x^2) */
void autodiff_vjp_erf(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  GraphId x = input_value(ctx, node, 0);
  GraphId bell = graph_unary(g, GRAPH_OP_EXP, neg(g, mul(g, x, x)));
  dx[0] = mul(g, grad, mul(g, like(g, x, 1.1283791670955126), bell));
}

/* sign(x) * g, with 0 at x = 0 */
void autodiff_vjp_abs(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  GraphId x = input_value(ctx, node, 0), zero = like(g, x, 0.0);
  GraphId negative = graph_binary(g, GRAPH_OP_CMPLT, x, zero);
  GraphId positive = graph_binary(g, GRAPH_OP_CMPLT, zero, x);
  dx[0] = graph_select(g, negative, neg(g, grad), graph_select(g, positive, grad, zero));
}

/* d 1/x = -1/x^2 = -y^2 */
void autodiff_vjp_recip(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                        GraphId *dx) {
  (void)node;
  Graph *g = autodiff_graph(ctx);
  GraphId y = autodiff_value(ctx, self);
  dx[0] = neg(g, mul(g, grad, mul(g, y, y)));
}

/* ---- binary -------------------------------------------------------------- */

void autodiff_vjp_add(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)ctx, (void)node, (void)self;
  dx[0] = grad;
  dx[1] = grad;
}

void autodiff_vjp_sub(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  dx[0] = grad;
  if (wants(ctx, node, 1)) dx[1] = neg(autodiff_graph(ctx), grad);
}

void autodiff_vjp_mul(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  if (wants(ctx, node, 0)) dx[0] = mul(g, grad, input_value(ctx, node, 1));
  if (wants(ctx, node, 1)) dx[1] = mul(g, grad, input_value(ctx, node, 0));
}

/* d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -y/b */
void autodiff_vjp_div(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  Graph *g = autodiff_graph(ctx);
  GraphId b = input_value(ctx, node, 1);
  if (wants(ctx, node, 0)) dx[0] = divide(g, grad, b);
  if (wants(ctx, node, 1)) dx[1] = neg(g, divide(g, mul(g, grad, autodiff_value(ctx, self)), b));
}

/* The forward op keeps `a` on ties, so `a` gets the gradient unless the
 * other operand strictly won. */
static void vjp_choice(AutodiffContext *ctx, const GraphNode *node, GraphId grad, GraphId *dx,
                       bool is_max) {
  Graph *g = autodiff_graph(ctx);
  GraphId a = input_value(ctx, node, 0), b = input_value(ctx, node, 1);
  GraphId b_won = is_max ? graph_binary(g, GRAPH_OP_CMPLT, a, b)
                         : graph_binary(g, GRAPH_OP_CMPLT, b, a);
  GraphId zero = like(g, grad, 0.0);
  if (wants(ctx, node, 0)) dx[0] = graph_select(g, b_won, zero, grad);
  if (wants(ctx, node, 1)) dx[1] = graph_select(g, b_won, grad, zero);
}

void autodiff_vjp_max(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  vjp_choice(ctx, node, grad, dx, true);
}

void autodiff_vjp_min(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  vjp_choice(ctx, node, grad, dx, false);
}

/* d a^b / da = b a^(b-1), d a^b / db = y log a */
void autodiff_vjp_pow(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  Graph *g = autodiff_graph(ctx);
  GraphId a = input_value(ctx, node, 0), b = input_value(ctx, node, 1);
  if (wants(ctx, node, 0)) {
    GraphId power = graph_binary(g, GRAPH_OP_POW, a, sub(g, b, like(g, b, 1.0)));
    dx[0] = mul(g, grad, mul(g, b, power));
  }
  if (wants(ctx, node, 1))
    dx[1] = mul(g, grad, mul(g, autodiff_value(ctx, self), graph_unary(g, GRAPH_OP_LOG, a)));
}

void autodiff_vjp_select(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                         GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  GraphId cond = input_value(ctx, node, 0), zero = like(g, grad, 0.0);
  if (wants(ctx, node, 1)) dx[1] = graph_select(g, cond, grad, zero);
  if (wants(ctx, node, 2)) dx[2] = graph_select(g, cond, zero, grad);
}

void autodiff_vjp_cast(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                       GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  const GraphNode *x = graph_node(g, node->inputs[0]);
  if (graph_dtype_is_float(x->dtype)) dx[0] = graph_cast(g, grad, x->dtype);
}

/* ---- reductions ---------------------------------------------------------- */

void autodiff_vjp_reduce_sum(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                             GraphId grad, GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  dx[0] = graph_broadcast(g, grad, shape_of(g, node->inputs[0]));
}

/* The gradient is shared equally among the elements that attain the max. */
void autodiff_vjp_reduce_max(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                             GraphId grad, GraphId *dx) {
  Graph *g = autodiff_graph(ctx);
  GraphId x = input_value(ctx, node, 0);
  GraphShape shape = shape_of(g, x);
  GraphDtype dtype = graph_node(g, x)->dtype;
  GraphId y = graph_broadcast(g, autodiff_value(ctx, self), shape);
  GraphId mask = graph_cast(g, graph_binary(g, GRAPH_OP_CMPEQ, x, y), dtype);
  GraphId count = graph_reduce(g, GRAPH_OP_REDUCE_SUM, mask, node->attrs.axes);
  dx[0] = mul(g, mask, graph_broadcast(g, divide(g, grad, count), shape));
}

/* ---- movement ------------------------------------------------------------ */

void autodiff_vjp_reshape(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                          GraphId grad, GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  dx[0] = graph_reshape(g, grad, shape_of(g, node->inputs[0]));
}

void autodiff_vjp_permute(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                          GraphId grad, GraphId *dx) {
  (void)self;
  int inverse[GRAPH_MAX_RANK];
  for (int i = 0; i < node->shape.rank; i++) inverse[node->attrs.perm[i]] = i;
  dx[0] = graph_permute(autodiff_graph(ctx), grad, inverse);
}

void autodiff_vjp_broadcast(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                            GraphId grad, GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  dx[0] = unbroadcast(g, grad, shape_of(g, node->inputs[0]));
}

/* The adjoint of a strided slice pads the gradient back into place, with
 * step - 1 zeros between elements. */
void autodiff_vjp_slice(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                        GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  GraphShape in = shape_of(g, node->inputs[0]);
  int64_t lo[GRAPH_MAX_RANK], hi[GRAPH_MAX_RANK], interior[GRAPH_MAX_RANK];
  for (int i = 0; i < in.rank; i++) {
    const GraphAttrs *a = &node->attrs;
    int64_t last = a->start[i] + (node->shape.dims[i] - 1) * a->step[i];
    lo[i] = a->start[i];
    hi[i] = in.dims[i] - 1 - last;
    interior[i] = a->step[i] - 1;
  }
  dx[0] = graph_pad(g, grad, lo, hi, interior, 0.0);
}

void autodiff_vjp_concat(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                         GraphId grad, GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  int axis = node->attrs.axis;
  int64_t start[GRAPH_MAX_RANK] = {0}, stop[GRAPH_MAX_RANK];
  for (int i = 0; i < node->shape.rank; i++) stop[i] = node->shape.dims[i];
  stop[axis] = 0;
  for (int k = 0; k < node->num_inputs; k++) {
    start[axis] = stop[axis];
    stop[axis] += shape_of(g, node->inputs[k]).dims[axis];
    if (wants(ctx, node, k)) dx[k] = graph_slice(g, grad, start, stop, NULL);
  }
}

/* The adjoint of padding reads back the elements that came from the input. */
void autodiff_vjp_pad(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  GraphShape in = shape_of(g, node->inputs[0]);
  int64_t start[GRAPH_MAX_RANK], stop[GRAPH_MAX_RANK], step[GRAPH_MAX_RANK];
  for (int i = 0; i < in.rank; i++) {
    step[i] = node->attrs.interior[i] + 1;
    start[i] = node->attrs.lo[i];
    stop[i] = start[i] + (in.dims[i] - 1) * step[i] + 1;
  }
  dx[0] = graph_slice(g, grad, start, stop, step);
}

void autodiff_vjp_gather(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                         GraphId grad, GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  int64_t rows = shape_of(g, node->inputs[0]).dims[0];
  /* A bf16 table's gradient sums its rows' updates in f32, then rounds. */
  if (graph_node(g, grad)->dtype == GRAPH_BF16)
    dx[0] = graph_cast(g, graph_scatter_add(g, graph_cast(g, grad, GRAPH_F32), node->inputs[1], rows),
                       GRAPH_BF16);
  else
    dx[0] = graph_scatter_add(g, grad, node->inputs[1], rows);
}

void autodiff_vjp_scatter_add(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                              GraphId grad, GraphId *dx) {
  (void)self;
  dx[0] = graph_gather(autodiff_graph(ctx), grad, node->inputs[1]);
}

/* ---- contraction --------------------------------------------------------- */

/* A rank-2 operand shared across the other's batch gets the batch sum. */
static GraphId sum_to_operand(Graph *g, GraphId grad, GraphId operand) {
  GraphShape want = shape_of(g, operand), have = shape_of(g, grad);
  if (have.rank == want.rank) return grad;
  uint32_t batch_axes = (1u << (have.rank - 2)) - 1;
  return graph_reshape(g, graph_reduce(g, GRAPH_OP_REDUCE_SUM, grad, batch_axes), want);
}

/* C = A' B' with A' = A or A^T, B' = B or B^T:
 *   dA' = G B'^T, dB' = A'^T G, and a transposed operand takes the transpose. */
void autodiff_vjp_dot(AutodiffContext *ctx, const GraphNode *node, GraphId self, GraphId grad,
                      GraphId *dx) {
  (void)self;
  Graph *g = autodiff_graph(ctx);
  bool ta = node->attrs.transpose_a, tb = node->attrs.transpose_b;
  GraphId a = input_value(ctx, node, 0), b = input_value(ctx, node, 1);
  if (wants(ctx, node, 0)) {
    GraphId da = ta ? graph_dot(g, b, grad, tb, true) : graph_dot(g, grad, b, false, !tb);
    dx[0] = sum_to_operand(g, da, a);
  }
  if (wants(ctx, node, 1)) {
    GraphShape as = shape_of(g, a);
    if (!ta && as.rank > 2 && shape_of(g, b).rank == 2) {
      /* x @ w with w shared across x's batch (a weight): x's rows over all
       * batches are the rows of one [rows, k] matrix, so the gradient is one
       * contraction over them (k = B*T), not a product per batch and a sum
       * over the batch written and read back. */
      GraphShape gs = shape_of(g, grad);
      int64_t rows = graph_shape_numel(&as) / as.dims[as.rank - 1];
      GraphId a2 = graph_reshape(g, a, graph_shape_of(2, (int64_t[]){rows, as.dims[as.rank - 1]}));
      GraphId g2 = graph_reshape(g, grad, graph_shape_of(2, (int64_t[]){rows, gs.dims[gs.rank - 1]}));
      dx[1] = tb ? graph_dot(g, g2, a2, true, false) : graph_dot(g, a2, g2, true, false);
    } else {
      GraphId db = tb ? graph_dot(g, grad, a, true, ta) : graph_dot(g, a, grad, !ta, false);
      dx[1] = sum_to_operand(g, db, b);
    }
  }
}

/* ---- fused attention ----------------------------------------------------- */

/* Only o and the inputs are kept from the forward pass: the backward ops
 * recompute the probabilities row by row from lse ([..., T, 1]), so no
 * [..., T, S] tensor is stored. delta = rowsum(do * o) is
 * sum_j P_ij dP_ij, the term the softmax's Jacobian subtracts. The mask
 * gets no gradient (pass_attention fuses only masks that need none). */
void autodiff_vjp_attention(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                            GraphId grad, GraphId *dx) {
  Graph *g = autodiff_graph(ctx);
  bool masked = node->num_inputs == 4;
  if (masked && wants(ctx, node, 3)) {
    graph_fail(g, "autodiff: the mask of a fused attention has no gradient");
    return;
  }
  GraphId q = input_value(ctx, node, 0), k = input_value(ctx, node, 1);
  GraphId v = input_value(ctx, node, 2), mask = masked ? input_value(ctx, node, 3) : GRAPH_NONE;
  GraphAttrs attrs = node->attrs;
  GraphId lse_in[3] = {q, k, mask};
  GraphId lse = graph_add_node(g, GRAPH_OP_ATTENTION_LSE, lse_in, masked ? 3 : 2, &attrs);
  int last = node->shape.rank - 1;
  GraphId delta = graph_reduce(g, GRAPH_OP_REDUCE_SUM,
                               mul(g, grad, autodiff_value(ctx, self)), 1u << last);
  GraphId in[7] = {q, k, v, grad, lse, delta, mask};
  const GraphOp ops[3] = {GRAPH_OP_ATTENTION_GRAD_Q, GRAPH_OP_ATTENTION_GRAD_K,
                          GRAPH_OP_ATTENTION_GRAD_V};
  for (int i = 0; i < 3; i++)
    if (wants(ctx, node, i)) dx[i] = graph_add_node(g, ops[i], in, masked ? 7 : 6, &attrs);
}

/* The backward ops are made by the VJP above and never differentiated. */
void autodiff_vjp_attention_backward(AutodiffContext *ctx, const GraphNode *node, GraphId self,
                                     GraphId grad, GraphId *dx) {
  (void)self, (void)grad, (void)dx;
  graph_fail(autodiff_graph(ctx), "autodiff: %s has no gradient", graph_op_name(node->op));
}
