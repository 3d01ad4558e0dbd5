/* Index maps through movement ops. Fusion uses them to prove that an
 * inlined reduction is read at one place per row (so it can be computed once
 * per row) and to count how many distinct places an inlined node is read at
 * (each one is a recomputation). */
#include <string.h>

#include "kernel_internal.h"

static KernelIndexAxis constant_axis(int64_t value) {
  KernelIndexAxis a;
  memset(&a, 0, sizeof a);
  a.affine = true;
  a.value.constant = value;
  return a;
}

static KernelIndexAxis var_axis(int var) {
  KernelIndexAxis a = constant_axis(0);
  a.value.coef[var] = 1;
  a.deps = 1u << var;
  return a;
}

static KernelIndexAxis opaque_axis(uint32_t deps) {
  KernelIndexAxis a = constant_axis(0);
  a.affine = false;
  a.deps = deps;
  return a;
}

/* scale * a + shift */
static KernelIndexAxis scaled(KernelIndexAxis a, int64_t scale, int64_t shift) {
  if (!a.affine)
    return a;
  for (int v = 0; v < KERNEL_MAX_VARS; v++)
    a.value.coef[v] *= scale;
  a.value.constant = a.value.constant * scale + shift;
  return a;
}

void kernel_index_identity(KernelIndexMap *map, int rank) {
  map->rank = rank;
  for (int d = 0; d < rank; d++)
    map->axis[d] = var_axis(d);
}

static void strides_of(const GraphShape *s, int64_t *strides) {
  int64_t stride = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    strides[d] = stride;
    stride *= s->dims[d];
  }
}

/* (linear / stride) % dim of an affine linear index with non-negative
 * terms, when no carry can cross the digit: terms that are multiples of
 * stride * dim vanish, multiples of stride land in the digit, and the rest
 * must stay below stride together. */
static KernelIndexAxis digit_of(const KernelAffine *linear, uint32_t deps, int64_t stride,
                                int64_t dim, const int64_t *extent) {
  int64_t period = stride * dim;
  KernelIndexAxis out = constant_axis(0);
  int64_t c = linear->constant % period;
  int64_t low = c % stride, digit_max = c / stride;
  out.value.constant = c / stride;
  for (int v = 0; v < KERNEL_MAX_VARS; v++) {
    int64_t k = linear->coef[v];
    if (k == 0 || extent[v] <= 1 || k % period == 0)
      continue;
    if (k % stride == 0) {
      out.value.coef[v] = k / stride;
      out.deps |= 1u << v;
      digit_max += (k / stride) * (extent[v] - 1);
    } else {
      low += k * (extent[v] - 1);
    }
  }
  if (low >= stride || digit_max >= dim)
    return opaque_axis(deps);
  return out;
}

static void through_reshape(const GraphShape *out_shape, const GraphShape *in_shape,
                            const int64_t *extent, const KernelIndexMap *out, KernelIndexMap *in) {
  int64_t out_strides[GRAPH_MAX_RANK], in_strides[GRAPH_MAX_RANK];
  strides_of(out_shape, out_strides);
  strides_of(in_shape, in_strides);
  KernelAffine linear;
  memset(&linear, 0, sizeof linear);
  uint32_t deps = 0;
  bool affine = true;
  for (int d = 0; d < out_shape->rank; d++) {
    if (out_shape->dims[d] == 1)
      continue;
    const KernelIndexAxis *a = &out->axis[d];
    deps |= a->deps;
    affine = affine && a->affine && a->value.constant >= 0;
    for (int v = 0; v < KERNEL_MAX_VARS; v++) {
      affine = affine && a->value.coef[v] >= 0;
      linear.coef[v] += a->value.coef[v] * out_strides[d];
    }
    linear.constant += a->value.constant * out_strides[d];
  }
  in->rank = in_shape->rank;
  for (int d = 0; d < in_shape->rank; d++) {
    if (in_shape->dims[d] == 1)
      in->axis[d] = constant_axis(0);
    else if (!affine)
      in->axis[d] = opaque_axis(deps);
    else
      in->axis[d] = digit_of(&linear, deps, in_strides[d], in_shape->dims[d], extent);
  }
}

void kernel_index_through(const Graph *g, const GraphNode *consumer, int slot, int reduce_first_var,
                          const int64_t *extent, const KernelIndexMap *out, KernelIndexMap *in) {
  const GraphAttrs *a = &consumer->attrs;
  const GraphShape *input_shape = &graph_node(g, consumer->inputs[slot])->shape;
  int rank = input_shape->rank;
  in->rank = rank;
  switch (consumer->op) {
  case GRAPH_OP_REDUCE_SUM:
  case GRAPH_OP_REDUCE_MAX: {
    int var = reduce_first_var;
    for (int d = 0; d < rank; d++)
      in->axis[d] = (a->axes & (1u << d)) ? var_axis(var++) : out->axis[d];
    return;
  }
  case GRAPH_OP_PERMUTE:
    for (int d = 0; d < rank; d++)
      in->axis[a->perm[d]] = out->axis[d];
    return;
  case GRAPH_OP_BROADCAST: {
    int offset = out->rank - rank;
    for (int d = 0; d < rank; d++)
      in->axis[d] = input_shape->dims[d] == 1 ? constant_axis(0) : out->axis[d + offset];
    return;
  }
  case GRAPH_OP_SLICE:
    for (int d = 0; d < rank; d++)
      in->axis[d] = scaled(out->axis[d], a->step[d], a->start[d]);
    return;
  case GRAPH_OP_PAD:
    for (int d = 0; d < rank; d++)
      in->axis[d] =
          a->interior[d] == 0 ? scaled(out->axis[d], 1, -a->lo[d]) : opaque_axis(out->axis[d].deps);
    return;
  case GRAPH_OP_CONCAT: {
    *in = *out;
    int64_t base = 0;
    for (int k = 0; k < slot; k++)
      base += graph_node(g, consumer->inputs[k])->shape.dims[a->axis];
    in->axis[a->axis] = scaled(out->axis[a->axis], 1, -base);
    return;
  }
  case GRAPH_OP_RESHAPE: through_reshape(&consumer->shape, input_shape, extent, out, in); return;
  case GRAPH_OP_GATHER:
    if (slot == 1) {
      for (int d = 0; d < rank; d++)
        in->axis[d] = out->axis[d];
    } else {
      uint32_t deps = 0;
      for (int d = 0; d + 1 < out->rank; d++)
        deps |= out->axis[d].deps;
      in->axis[0] = opaque_axis(deps);
      in->axis[1] = out->axis[out->rank - 1];
    }
    return;
  case GRAPH_OP_RANDOM: /* the offset is a scalar */ return;
  default: /* elementwise */ *in = *out; return;
  }
}

bool kernel_index_equal(const KernelIndexMap *a, const KernelIndexMap *b) {
  if (a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++) {
    const KernelIndexAxis *x = &a->axis[d], *y = &b->axis[d];
    if (!x->affine || !y->affine || memcmp(&x->value, &y->value, sizeof x->value) != 0)
      return false;
  }
  return true;
}

bool kernel_index_outer_only(const KernelIndexMap *map, int outer_axes) {
  for (int d = 0; d < map->rank; d++) {
    if (!map->axis[d].affine)
      return false;
    for (int v = outer_axes; v < KERNEL_MAX_VARS; v++)
      if (map->axis[d].value.coef[v] != 0)
        return false;
  }
  return true;
}
