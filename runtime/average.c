/* Checkpoint averaging: the element-wise mean of the parameters of several
 * checkpoints of one model (Vaswani et al. average the last checkpoints of a
 * run). Each file is loaded into the model's train graph, so it is validated
 * exactly as a load is (names, dtypes, shapes, checksums). The optimizer state
 * and the metadata are those of the last file, so the result also loads (and
 * resumes) like any checkpoint. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

static double get(const void *data, tfm_dtype dtype, int64_t i) {
  switch (dtype) {
    case TFM_F32: return ((const float *)data)[i];
    case TFM_F64: return ((const double *)data)[i];
    case TFM_BF16: {
      uint32_t bits = (uint32_t)((const uint16_t *)data)[i] << 16;
      float f;
      memcpy(&f, &bits, sizeof f);
      return f;
    }
    default: return 0;
  }
}

/* Round to nearest even, as the compiled code converts to bf16. */
static void put(void *data, tfm_dtype dtype, int64_t i, double v) {
  if (dtype == TFM_F64) {
    ((double *)data)[i] = v;
    return;
  }
  float f = (float)v;
  if (dtype == TFM_F32) {
    ((float *)data)[i] = f;
    return;
  }
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  bits += 0x7fff + ((bits >> 16) & 1);
  ((uint16_t *)data)[i] = (uint16_t)(bits >> 16);
}

int tfm_graph_average(tfm_graph *g, const char *const *paths, size_t count, tfm_meta *meta) {
  if (!count) return tfm_fail("average: no checkpoints given");
  const tfm_graph_desc *d = g->desc;
  double **sums = calloc((size_t)d->num_buffers + 1, sizeof *sums);
  int status = sums ? TFM_OK : tfm_fail("average: out of memory");
  for (int32_t b = 0; !status && b < d->num_buffers; b++) {
    const tfm_buffer_desc *desc = &d->buffers[b];
    if (desc->role != TFM_ROLE_PARAM) continue;
    if (desc->dtype != TFM_F32 && desc->dtype != TFM_F64 && desc->dtype != TFM_BF16)
      status = tfm_fail("average: parameter '%s' is %s, not a floating-point tensor", desc->name,
                        tfm_dtype_name((tfm_dtype)desc->dtype));
    else if (!(sums[b] = calloc((size_t)tfm_buffer_numel(desc) + 1, sizeof(double))))
      status = tfm_fail("average: out of memory");
  }
  for (size_t k = 0; !status && k < count; k++) {
    if ((status = tfm_graph_load(g, paths[k], meta))) break;
    for (int32_t b = 0; b < d->num_buffers; b++) {
      const tfm_buffer_desc *desc = &d->buffers[b];
      if (!sums[b]) continue;
      const void *data = tfm_graph_buffer(g, desc->name, TFM_ROLE_PARAM, NULL);
      for (int64_t i = 0; i < tfm_buffer_numel(desc); i++)
        sums[b][i] += get(data, (tfm_dtype)desc->dtype, i);
    }
  }
  for (int32_t b = 0; !status && b < d->num_buffers; b++) {
    const tfm_buffer_desc *desc = &d->buffers[b];
    if (!sums[b]) continue;
    void *data = tfm_graph_buffer(g, desc->name, TFM_ROLE_PARAM, NULL);
    for (int64_t i = 0; i < tfm_buffer_numel(desc); i++)
      put(data, (tfm_dtype)desc->dtype, i, sums[b][i] / (double)count);
  }
  for (int32_t b = 0; sums && b < d->num_buffers; b++) free(sums[b]);
  free(sums);
  return status;
}
