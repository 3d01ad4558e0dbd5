/* Reference implementations of the primitives: plain loops over dense
 * row-major buffers. Float math runs in the storage type (tgmath picks expf
 * for float, exp for double), so an f32 evaluation rounds as f32 code does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "eval_refs.h"
#include "philox.h"

static size_t element_size(GraphDtype storage) { return storage == GRAPH_F64 ? 8 : 4; }

static void strides_of(const GraphShape *s, int64_t *strides) {
  int64_t stride = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    strides[i] = stride;
    stride *= s->dims[i];
  }
}

/* Advances a multi-index over `s` in row-major order. */
static void next_index(int64_t *index, const GraphShape *s) {
  for (int i = s->rank - 1; i >= 0; i--) {
    if (++index[i] < s->dims[i]) return;
    index[i] = 0;
  }
}

static int32_t saturate_i32(double x) {
  if (x != x) return 0;
  if (x >= 2147483647.0) return INT32_MAX;
  if (x <= -2147483648.0) return INT32_MIN;
  return (int32_t)x;
}

/* Wrapping i32 arithmetic, as two's-complement hardware does it. */
static int32_t wrap_i32(uint32_t x) { return (int32_t)x; }

/* ---- elementwise --------------------------------------------------------- */

#define FLOAT_UNARY(fn, expr)                                                          \
  void fn(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {              \
    (void)node;                                                                        \
    if (out->dtype == GRAPH_F32) {                                                     \
      const float *xs = in[0].data;                                                    \
      float *ys = out->data;                                                           \
      for (int64_t i = 0; i < out->numel; i++) {                                       \
        float x = xs[i];                                                               \
        ys[i] = (expr);                                                                \
      }                                                                                \
    } else {                                                                           \
      const double *xs = in[0].data;                                                   \
      double *ys = out->data;                                                          \
      for (int64_t i = 0; i < out->numel; i++) {                                       \
        double x = xs[i];                                                              \
        ys[i] = (expr);                                                                \
      }                                                                                \
    }                                                                                  \
  }

/* The same, plus an i32 case. */
#define ANY_UNARY(fn, expr, int_expr)                                                  \
  static void fn##_float(const GraphNode *node, const EvalTensor *in, EvalTensor *out); \
  FLOAT_UNARY(fn##_float, expr)                                                        \
  void fn(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {              \
    if (out->dtype != GRAPH_I32) {                                                     \
      fn##_float(node, in, out);                                                       \
      return;                                                                          \
    }                                                                                  \
    const int32_t *xs = in[0].data;                                                    \
    int32_t *ys = out->data;                                                           \
    for (int64_t i = 0; i < out->numel; i++) {                                         \
      int32_t x = xs[i];                                                               \
      ys[i] = (int_expr);                                                              \
    }                                                                                  \
  }

ANY_UNARY(eval_ref_neg, -x, wrap_i32(0u - (uint32_t)x))
ANY_UNARY(eval_ref_abs, fabs(x), x < 0 ? wrap_i32(0u - (uint32_t)x) : x)
ANY_UNARY(eval_ref_stop_gradient, x, x)
FLOAT_UNARY(eval_ref_exp, exp(x))
FLOAT_UNARY(eval_ref_log, log(x))
FLOAT_UNARY(eval_ref_sqrt, sqrt(x))
FLOAT_UNARY(eval_ref_rsqrt, 1 / sqrt(x))
FLOAT_UNARY(eval_ref_tanh, tanh(x))
FLOAT_UNARY(eval_ref_sin, sin(x))
FLOAT_UNARY(eval_ref_cos, cos(x))
FLOAT_UNARY(eval_ref_erf, erf(x))
FLOAT_UNARY(eval_ref_recip, 1 / x)

#define FLOAT_BINARY(fn, expr)                                                         \
  void fn(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {              \
    (void)node;                                                                        \
    if (out->dtype == GRAPH_F32) {                                                     \
      const float *as = in[0].data, *bs = in[1].data;                                  \
      float *ys = out->data;                                                           \
      for (int64_t i = 0; i < out->numel; i++) {                                       \
        float a = as[i], b = bs[i];                                                    \
        ys[i] = (expr);                                                                \
      }                                                                                \
    } else {                                                                           \
      const double *as = in[0].data, *bs = in[1].data;                                 \
      double *ys = out->data;                                                          \
      for (int64_t i = 0; i < out->numel; i++) {                                       \
        double a = as[i], b = bs[i];                                                   \
        ys[i] = (expr);                                                                \
      }                                                                                \
    }                                                                                  \
  }

#define ANY_BINARY(fn, expr, int_expr)                                                 \
  static void fn##_float(const GraphNode *node, const EvalTensor *in, EvalTensor *out); \
  FLOAT_BINARY(fn##_float, expr)                                                       \
  void fn(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {              \
    if (out->dtype != GRAPH_I32) {                                                     \
      fn##_float(node, in, out);                                                       \
      return;                                                                          \
    }                                                                                  \
    const int32_t *as = in[0].data, *bs = in[1].data;                                  \
    int32_t *ys = out->data;                                                           \
    for (int64_t i = 0; i < out->numel; i++) {                                         \
      int32_t a = as[i], b = bs[i];                                                    \
      ys[i] = (int_expr);                                                              \
    }                                                                                  \
  }

ANY_BINARY(eval_ref_add, a + b, wrap_i32((uint32_t)a + (uint32_t)b))
ANY_BINARY(eval_ref_sub, a - b, wrap_i32((uint32_t)a - (uint32_t)b))
ANY_BINARY(eval_ref_mul, a *b, wrap_i32((uint32_t)a * (uint32_t)b))
/* max and min keep `a` on ties (the VJP relies on it) and propagate NaN. */
ANY_BINARY(eval_ref_max, (a < b || isnan(b)) ? b : a, a < b ? b : a)
ANY_BINARY(eval_ref_min, (b < a || isnan(b)) ? b : a, b < a ? b : a)
FLOAT_BINARY(eval_ref_div, a / b)
FLOAT_BINARY(eval_ref_pow, pow(a, b))

static void compare(const EvalTensor *in, EvalTensor *out, bool less) {
  int32_t *ys = out->data;
  for (int64_t i = 0; i < out->numel; i++) {
    if (in[0].dtype == GRAPH_I32) {
      int32_t a = ((const int32_t *)in[0].data)[i], b = ((const int32_t *)in[1].data)[i];
      ys[i] = less ? a < b : a == b;
    } else {
      double a = eval_tensor_get(&in[0], i), b = eval_tensor_get(&in[1], i);
      ys[i] = less ? a < b : a == b;
    }
  }
}

void eval_ref_cmplt(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node;
  compare(in, out, true);
}

void eval_ref_cmpeq(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node;
  compare(in, out, false);
}

void eval_ref_select(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node;
  const int32_t *cond = in[0].data;
  size_t es = element_size(out->dtype);
  for (int64_t i = 0; i < out->numel; i++) {
    const char *from = cond[i] ? in[1].data : in[2].data;
    memcpy((char *)out->data + i * es, from + i * es, es);
  }
}

void eval_ref_cast(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node;
  for (int64_t i = 0; i < out->numel; i++) eval_tensor_set(out, i, eval_tensor_get(&in[0], i));
}

/* ---- reductions ---------------------------------------------------------- */

/* Offset in the (keepdims) output of the element at `index` of the input. */
static int64_t reduced_offset(const int64_t *index, const GraphShape *out_shape,
                              const int64_t *out_strides) {
  int64_t offset = 0;
  for (int d = 0; d < out_shape->rank; d++)
    if (out_shape->dims[d] > 1) offset += index[d] * out_strides[d];
  return offset;
}

#define REDUCE_LOOP(T, init, combine)                                                  \
  do {                                                                                 \
    const T *xs = in[0].data;                                                          \
    T *ys = out->data;                                                                 \
    for (int64_t i = 0; i < out->numel; i++) ys[i] = (init);                           \
    for (int64_t i = 0; i < in[0].numel; i++, next_index(index, &in[0].shape)) {       \
      T *acc = &ys[reduced_offset(index, &out->shape, strides)];                       \
      T x = xs[i];                                                                     \
      combine;                                                                         \
    }                                                                                  \
  } while (0)

void eval_ref_reduce_sum(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node;
  int64_t index[GRAPH_MAX_RANK] = {0}, strides[GRAPH_MAX_RANK];
  strides_of(&out->shape, strides);
  if (out->dtype == GRAPH_F32)
    REDUCE_LOOP(float, 0.0f, *acc += x);
  else if (out->dtype == GRAPH_F64)
    REDUCE_LOOP(double, 0.0, *acc += x);
  else
    REDUCE_LOOP(int32_t, 0, *acc = wrap_i32((uint32_t)*acc + (uint32_t)x));
}

void eval_ref_reduce_max(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node;
  int64_t index[GRAPH_MAX_RANK] = {0}, strides[GRAPH_MAX_RANK];
  strides_of(&out->shape, strides);
  if (out->dtype == GRAPH_F32)
    REDUCE_LOOP(float, -INFINITY, if (*acc < x || isnan(x)) *acc = x);
  else if (out->dtype == GRAPH_F64)
    REDUCE_LOOP(double, -INFINITY, if (*acc < x || isnan(x)) *acc = x);
  else
    REDUCE_LOOP(int32_t, INT32_MIN, if (*acc < x) *acc = x);
}

/* ---- movement ------------------------------------------------------------ */

static void copy_element(EvalTensor *out, int64_t to, const EvalTensor *in, int64_t from) {
  size_t es = element_size(out->dtype);
  memcpy((char *)out->data + to * es, (const char *)in->data + from * es, es);
}

void eval_ref_reshape(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node;
  memcpy(out->data, in[0].data, (size_t)out->numel * element_size(out->dtype));
}

void eval_ref_permute(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  int64_t index[GRAPH_MAX_RANK] = {0}, in_strides[GRAPH_MAX_RANK];
  strides_of(&in[0].shape, in_strides);
  for (int64_t i = 0; i < out->numel; i++, next_index(index, &out->shape)) {
    int64_t from = 0;
    for (int d = 0; d < out->shape.rank; d++) from += index[d] * in_strides[node->attrs.perm[d]];
    copy_element(out, i, &in[0], from);
  }
}

void eval_ref_broadcast(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node;
  int64_t index[GRAPH_MAX_RANK] = {0}, in_strides[GRAPH_MAX_RANK];
  const GraphShape *s = &in[0].shape;
  strides_of(s, in_strides);
  int offset = out->shape.rank - s->rank;
  for (int64_t i = 0; i < out->numel; i++, next_index(index, &out->shape)) {
    int64_t from = 0;
    for (int d = 0; d < s->rank; d++)
      if (s->dims[d] > 1) from += index[d + offset] * in_strides[d];
    copy_element(out, i, &in[0], from);
  }
}

void eval_ref_slice(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  int64_t index[GRAPH_MAX_RANK] = {0}, in_strides[GRAPH_MAX_RANK];
  strides_of(&in[0].shape, in_strides);
  for (int64_t i = 0; i < out->numel; i++, next_index(index, &out->shape)) {
    int64_t from = 0;
    for (int d = 0; d < out->shape.rank; d++)
      from += (node->attrs.start[d] + index[d] * node->attrs.step[d]) * in_strides[d];
    copy_element(out, i, &in[0], from);
  }
}

void eval_ref_concat(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  int axis = node->attrs.axis;
  int64_t out_strides[GRAPH_MAX_RANK], base = 0;
  strides_of(&out->shape, out_strides);
  for (int k = 0; k < node->num_inputs; k++) {
    int64_t index[GRAPH_MAX_RANK] = {0};
    for (int64_t i = 0; i < in[k].numel; i++, next_index(index, &in[k].shape)) {
      int64_t to = base * out_strides[axis];
      for (int d = 0; d < out->shape.rank; d++) to += index[d] * out_strides[d];
      copy_element(out, to, &in[k], i);
    }
    base += in[k].shape.dims[axis];
  }
}

void eval_ref_pad(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  int64_t index[GRAPH_MAX_RANK] = {0}, out_strides[GRAPH_MAX_RANK];
  strides_of(&out->shape, out_strides);
  for (int64_t i = 0; i < out->numel; i++) eval_tensor_set(out, i, node->attrs.pad_value);
  for (int64_t i = 0; i < in[0].numel; i++, next_index(index, &in[0].shape)) {
    int64_t to = 0;
    for (int d = 0; d < out->shape.rank; d++)
      to += (node->attrs.lo[d] + index[d] * (node->attrs.interior[d] + 1)) * out_strides[d];
    copy_element(out, to, &in[0], i);
  }
}

void eval_ref_gather(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node;
  const int32_t *rows = in[1].data;
  int64_t num_rows = in[0].shape.dims[0], width = in[0].shape.dims[1];
  size_t row_bytes = (size_t)width * element_size(out->dtype);
  for (int64_t n = 0; n < in[1].numel; n++) {
    char *to = (char *)out->data + n * row_bytes;
    if (rows[n] >= 0 && rows[n] < num_rows)
      memcpy(to, (const char *)in[0].data + rows[n] * row_bytes, row_bytes);
    else
      memset(to, 0, row_bytes);
  }
}

#define SCATTER_LOOP(T, combine)                                                       \
  do {                                                                                 \
    const T *xs = in[0].data;                                                          \
    T *ys = out->data;                                                                 \
    for (int64_t n = 0; n < in[1].numel; n++) {                                        \
      if (rows[n] < 0 || rows[n] >= num_rows) continue;                                \
      for (int64_t j = 0; j < width; j++) {                                            \
        T *acc = &ys[rows[n] * width + j];                                             \
        T x = xs[n * width + j];                                                       \
        combine;                                                                       \
      }                                                                                \
    }                                                                                  \
  } while (0)

void eval_ref_scatter_add(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node;
  const int32_t *rows = in[1].data;
  int64_t num_rows = out->shape.dims[0], width = out->shape.dims[1];
  memset(out->data, 0, (size_t)out->numel * element_size(out->dtype));
  if (out->dtype == GRAPH_F32)
    SCATTER_LOOP(float, *acc += x);
  else if (out->dtype == GRAPH_F64)
    SCATTER_LOOP(double, *acc += x);
  else
    SCATTER_LOOP(int32_t, *acc = wrap_i32((uint32_t)*acc + (uint32_t)x));
}

/* ---- contraction --------------------------------------------------------- */

#define DOT_LOOP(T)                                                                    \
  do {                                                                                 \
    const T *as = in[0].data, *bs = in[1].data;                                        \
    T *cs = out->data;                                                                 \
    for (int64_t batch = 0; batch < batches; batch++) {                                \
      const T *a = as + (a_batched ? batch * m * k : 0);                               \
      const T *b = bs + (b_batched ? batch * k * n : 0);                               \
      T *c = cs + batch * m * n;                                                       \
      for (int64_t i = 0; i < m; i++) {                                                \
        for (int64_t j = 0; j < n; j++) {                                              \
          T acc = 0;                                                                   \
          for (int64_t p = 0; p < k; p++)                                              \
            acc += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]); \
          c[i * n + j] = acc;                                                          \
        }                                                                              \
      }                                                                                \
    }                                                                                  \
  } while (0)

void eval_ref_dot(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  bool ta = node->attrs.transpose_a, tb = node->attrs.transpose_b;
  int r = out->shape.rank;
  int64_t m = out->shape.dims[r - 2], n = out->shape.dims[r - 1];
  const GraphShape *sa = &in[0].shape;
  int64_t k = sa->dims[sa->rank - (ta ? 2 : 1)];
  int64_t batches = out->numel / (m * n);
  bool a_batched = in[0].shape.rank > 2, b_batched = in[1].shape.rank > 2;
  if (out->dtype == GRAPH_F32)
    DOT_LOOP(float);
  else
    DOT_LOOP(double);
}

/* ---- fused attention ------------------------------------------------------ */

/* Sizes of an attention node and where its mask is read: the mask's axes
 * are the last of [batch..., T, S]; a size-1 axis has stride 0. */
typedef struct AttentionDims {
  int64_t batch, t, s, d, dv;
  int rank;
  const EvalTensor *mask;
  int64_t batch_dims[GRAPH_MAX_RANK], mask_stride[GRAPH_MAX_RANK];
} AttentionDims;

static AttentionDims attention_dims(const GraphNode *node, const EvalTensor *in) {
  AttentionDims a = {0};
  int fixed = node->op == GRAPH_OP_ATTENTION ? 3 : node->op == GRAPH_OP_ATTENTION_LSE ? 2 : 6;
  const GraphShape *q = &in[0].shape;
  int r = a.rank = q->rank;
  a.t = q->dims[r - 2];
  a.d = q->dims[r - 1];
  a.s = in[1].shape.dims[r - 2];
  a.dv = fixed > 2 ? in[2].shape.dims[r - 1] : 0;
  a.batch = 1;
  for (int i = 0; i < r - 2; i++) a.batch *= a.batch_dims[i] = q->dims[i];
  if (node->num_inputs > fixed) {
    a.mask = &in[fixed];
    const GraphShape *m = &a.mask->shape;
    int64_t stride = 1;
    for (int i = m->rank - 1; i >= 0; i--) {
      a.mask_stride[r - m->rank + i] = m->dims[i] == 1 ? 0 : stride;
      stride *= m->dims[i];
    }
  }
  return a;
}

/* Offset of mask element (b, i, 0) for flat batch index b. */
static int64_t attention_mask_base(const AttentionDims *a, int64_t b, int64_t i) {
  int64_t at = i * a->mask_stride[a->rank - 2];
  for (int axis = a->rank - 3; axis >= 0; axis--) {
    at += (b % a->batch_dims[axis]) * a->mask_stride[axis];
    b /= a->batch_dims[axis];
  }
  return at;
}

/* s_ij for one row i of batch b, into s[0..S). */
#define ATTENTION_SCORES(T)                                                              \
  do {                                                                                  \
    const T *qi = q + (b * a.t + i) * a.d;                                               \
    int64_t mbase = a.mask ? attention_mask_base(&a, b, i) : 0;                          \
    for (int64_t j = 0; j < a.s; j++) {                                                 \
      const T *kj = k + (b * a.s + j) * a.d;                                             \
      T dot = 0;                                                                        \
      for (int64_t x = 0; x < a.d; x++) dot += qi[x] * kj[x];                            \
      T sij = (T)node->attrs.scale * dot;                                                \
      if (a.mask) sij += mask[mbase + j * a.mask_stride[a.rank - 1]];                    \
      if (node->attrs.causal && j > i) sij = (T)-INFINITY;                               \
      s[j] = sij;                                                                       \
    }                                                                                   \
  } while (0)

/* As the guarded softmax: max taken as 0 and sum as 1 in a fully masked row. */
#define ATTENTION_FORWARD(T)                                                             \
  do {                                                                                  \
    const T *q = in[0].data, *k = in[1].data;                                            \
    const T *v = node->op == GRAPH_OP_ATTENTION ? in[2].data : NULL;                     \
    const T *mask = a.mask ? a.mask->data : NULL;                                        \
    T *o = out->data, *s = scratch;                                                      \
    for (int64_t b = 0; b < a.batch; b++)                                                \
      for (int64_t i = 0; i < a.t; i++) {                                                \
        ATTENTION_SCORES(T);                                                             \
        T m = (T)-INFINITY, l = 0;                                                       \
        for (int64_t j = 0; j < a.s; j++) m = s[j] > m ? s[j] : m;                        \
        if (!v) {                                                                       \
          if (m == (T)-INFINITY) {                                                       \
            o[b * a.t + i] = m;                                                          \
            continue;                                                                   \
          }                                                                             \
          for (int64_t j = 0; j < a.s; j++) l += exp(s[j] - m);                          \
          o[b * a.t + i] = m + log(l);                                                   \
          continue;                                                                     \
        }                                                                               \
        T shift = m == (T)-INFINITY ? 0 : m;                                             \
        for (int64_t j = 0; j < a.s; j++) l += s[j] = exp(s[j] - shift);                 \
        if (l == 0) l = 1;                                                               \
        T *oi = o + (b * a.t + i) * a.dv;                                                \
        for (int64_t x = 0; x < a.dv; x++) oi[x] = 0;                                    \
        for (int64_t j = 0; j < a.s; j++) {                                             \
          T p = s[j] / l;                                                                \
          const T *vj = v + (b * a.s + j) * a.dv;                                        \
          for (int64_t x = 0; x < a.dv; x++) oi[x] += p * vj[x];                          \
        }                                                                               \
      }                                                                                 \
  } while (0)

void eval_ref_attention(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  AttentionDims a = attention_dims(node, in);
  void *scratch = calloc((size_t)a.s, element_size(out->dtype));
  if (!scratch) return;
  if (out->dtype == GRAPH_F32)
    ATTENTION_FORWARD(float);
  else
    ATTENTION_FORWARD(double);
  free(scratch);
}

/* P_ij = exp(s_ij - lse_i) (0 in a fully masked row), dS = P (do_i.v_j -
 * delta_i); dq_i = scale sum_j dS_ij k_j, dk_j = scale sum_i dS_ij q_i,
 * dv_j = sum_i P_ij do_i, summed in ascending order of the other index. */
#define ATTENTION_BACKWARD(T)                                                            \
  do {                                                                                  \
    const T *q = in[0].data, *k = in[1].data, *v = in[2].data, *dout = in[3].data;       \
    const T *lse = in[4].data, *delta = in[5].data;                                      \
    const T *mask = a.mask ? a.mask->data : NULL;                                        \
    T *o = out->data, *s = scratch, scale = (T)node->attrs.scale;                        \
    for (int64_t x = 0; x < out->numel; x++) o[x] = 0;                                   \
    for (int64_t b = 0; b < a.batch; b++)                                                \
      for (int64_t i = 0; i < a.t; i++) {                                                \
        T li = lse[b * a.t + i];                                                         \
        if (li == (T)-INFINITY) continue;                                                \
        ATTENTION_SCORES(T);                                                             \
        const T *doi = dout + (b * a.t + i) * a.dv;                                      \
        for (int64_t j = 0; j < a.s; j++) {                                             \
          T p = exp(s[j] - li);                                                          \
          const T *vj = v + (b * a.s + j) * a.dv;                                        \
          if (node->op == GRAPH_OP_ATTENTION_GRAD_V) {                                   \
            T *dvj = o + (b * a.s + j) * a.dv;                                           \
            for (int64_t x = 0; x < a.dv; x++) dvj[x] += p * doi[x];                      \
            continue;                                                                   \
          }                                                                             \
          T dp = 0;                                                                     \
          for (int64_t x = 0; x < a.dv; x++) dp += doi[x] * vj[x];                        \
          T ds = scale * (p * (dp - delta[b * a.t + i]));                                \
          if (node->op == GRAPH_OP_ATTENTION_GRAD_Q) {                                   \
            const T *kj = k + (b * a.s + j) * a.d;                                       \
            T *dqi = o + (b * a.t + i) * a.d;                                            \
            for (int64_t x = 0; x < a.d; x++) dqi[x] += ds * kj[x];                       \
          } else {                                                                      \
            const T *qi = q + (b * a.t + i) * a.d;                                       \
            T *dkj = o + (b * a.s + j) * a.d;                                            \
            for (int64_t x = 0; x < a.d; x++) dkj[x] += ds * qi[x];                       \
          }                                                                             \
        }                                                                               \
      }                                                                                 \
  } while (0)

void eval_ref_attention_grad(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  AttentionDims a = attention_dims(node, in);
  void *scratch = calloc((size_t)a.s, element_size(out->dtype));
  if (!scratch) return;
  if (out->dtype == GRAPH_F32)
    ATTENTION_BACKWARD(float);
  else
    ATTENTION_BACKWARD(double);
  free(scratch);
}

/* ---- sources ------------------------------------------------------------- */

void eval_ref_iota(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)in;
  int64_t index[GRAPH_MAX_RANK] = {0};
  for (int64_t i = 0; i < out->numel; i++, next_index(index, &out->shape))
    eval_tensor_set(out, i, (double)index[node->attrs.axis]);
}

void eval_ref_constant(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)in;
  const double *values = node->attrs.values;
  bool splat = node->attrs.num_values == 1;
  for (int64_t i = 0; i < out->numel; i++) eval_tensor_set(out, i, values[splat ? 0 : i]);
}

void eval_ref_random(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  uint32_t offset = (uint32_t)((const int32_t *)in[0].data)[0];
  for (int64_t i = 0; i < out->numel; i++)
    eval_tensor_set(out, i,
                    philox_uniform(node->attrs.seed, node->attrs.stream, offset, (uint64_t)i));
}

/* Leaves hold whatever the caller stored. */
void eval_ref_leaf(const GraphNode *node, const EvalTensor *in, EvalTensor *out) {
  (void)node, (void)in, (void)out;
}

/* ---- buffers ------------------------------------------------------------- */

double eval_tensor_get(const EvalTensor *t, int64_t index) {
  switch (t->dtype) {
  case GRAPH_F32: return ((const float *)t->data)[index];
  case GRAPH_F64: return ((const double *)t->data)[index];
  default: return ((const int32_t *)t->data)[index];
  }
}

void eval_tensor_set(EvalTensor *t, int64_t index, double value) {
  switch (t->dtype) {
  case GRAPH_F32: ((float *)t->data)[index] = (float)value; break;
  case GRAPH_F64: ((double *)t->data)[index] = value; break;
  default: ((int32_t *)t->data)[index] = saturate_i32(value); break;
  }
}
