/* A compiled graph at run time: one arena, buffers found by name. */
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "model.h"
#include "profile.h"

int tfm_graph_open(tfm_graph *g, const tfm_graph_desc *desc) {
  memset(g, 0, sizeof *g);
  g->desc = desc;
  if (desc->persistent_bytes < 0 || desc->scratch_bytes < 0)
    return tfm_fail("graph %s: negative arena size", desc->name);
  return tfm_arena_create(&g->arena, (size_t)desc->persistent_bytes, (size_t)desc->scratch_bytes);
}

void tfm_graph_close(tfm_graph *g) {
  if (g->desc) tfm_arena_destroy(&g->arena);
  memset(g, 0, sizeof *g);
}

int64_t tfm_buffer_numel(const tfm_buffer_desc *b) {
  int64_t n = 1;
  for (int i = 0; i < b->rank; i++) n *= b->shape[i];
  return n;
}

int64_t tfm_buffer_bytes(const tfm_buffer_desc *b) {
  return tfm_buffer_numel(b) * (int64_t)tfm_dtype_size((tfm_dtype)b->dtype);
}

static void *buffer_at(tfm_graph *g, const tfm_buffer_desc *b) {
  uint8_t *base = b->region == TFM_REGION_PERSISTENT ? g->arena.persistent : g->arena.scratch;
  return base + b->offset;
}

void *tfm_graph_buffer(tfm_graph *g, const char *name, tfm_role role,
                       const tfm_buffer_desc **desc_out) {
  for (int32_t i = 0; i < g->desc->num_buffers; i++) {
    const tfm_buffer_desc *b = &g->desc->buffers[i];
    if (b->role == (int32_t)role && !strcmp(b->name, name)) {
      if (desc_out) *desc_out = b;
      if (role == TFM_ROLE_PARAM || role == TFM_ROLE_STATE) { /* the caller may write it */
        tfm_gpu_arena_to_host(g->arena.persistent);
        tfm_gpu_arena_written(g->arena.persistent);
      }
      return buffer_at(g, b);
    }
  }
  return NULL;
}

void tfm_graph_run(tfm_graph *g, tfm_pool *pool) {
  if (tfm_profiling) tfm_profile_run(g, pool);
  else g->desc->run(g->arena.persistent, g->arena.scratch, pool);
}

void tfm_graph_update(tfm_graph *g) {
  if (g->desc->update) g->desc->update(g->arena.persistent, g->arena.scratch);
}

void tfm_graph_step(tfm_graph *g, tfm_pool *pool) {
  tfm_gpu_update_follows = g->desc->update != NULL;
  tfm_graph_run(g, pool);
  tfm_gpu_update_follows = 0;
  tfm_graph_update(g);
}

static int same_type(const tfm_buffer_desc *a, const tfm_buffer_desc *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

/* Copies each src buffer of role `from` into dst's same-named one of role `to`. */
static int copy_by_name(tfm_graph *dst, const tfm_graph *src, tfm_role from, tfm_role to) {
  tfm_gpu_arena_to_host(src->arena.persistent);
  tfm_gpu_arena_to_host(dst->arena.persistent); /* what is not copied stays as it was */
  tfm_gpu_arena_written(dst->arena.persistent);
  for (int32_t i = 0; i < src->desc->num_buffers; i++) {
    const tfm_buffer_desc *s = &src->desc->buffers[i];
    if (s->role != (int32_t)from) continue;
    const tfm_buffer_desc *d;
    void *out = tfm_graph_buffer(dst, s->name, to, &d);
    if (!out) continue;
    if (!same_type(s, d))
      return tfm_fail("%s: '%s' differs between the %s and %s graphs", "copy", s->name,
                      src->desc->name, dst->desc->name);
    memcpy(out, buffer_at((tfm_graph *)src, s), (size_t)tfm_buffer_bytes(s));
  }
  return TFM_OK;
}

int tfm_graph_copy_params(tfm_graph *dst, const tfm_graph *src) {
  if (copy_by_name(dst, src, TFM_ROLE_PARAM, TFM_ROLE_PARAM)) return TFM_FAILED;
  return copy_by_name(dst, src, TFM_ROLE_STATE, TFM_ROLE_STATE);
}

int tfm_graph_take_init(tfm_graph *dst, const tfm_graph *init) {
  return copy_by_name(dst, init, TFM_ROLE_OUTPUT, TFM_ROLE_PARAM);
}

/* The params and states of g as checkpoint tensors (malloc'd array). */
static tfm_tensor *checkpoint_tensors(tfm_graph *g, size_t *count) {
  size_t n = 0;
  tfm_tensor *t = calloc((size_t)g->desc->num_buffers + 1, sizeof *t);
  if (!t) return NULL;
  for (int32_t i = 0; i < g->desc->num_buffers; i++) {
    const tfm_buffer_desc *b = &g->desc->buffers[i];
    if (b->role != TFM_ROLE_PARAM && b->role != TFM_ROLE_STATE) continue;
    t[n].name = b->name;
    t[n].dtype = (tfm_dtype)b->dtype;
    t[n].rank = (size_t)b->rank;
    for (int k = 0; k < b->rank; k++) t[n].shape[k] = (size_t)b->shape[k];
    t[n].data = buffer_at(g, b);
    n++;
  }
  *count = n;
  return t;
}

int tfm_graph_save(const tfm_graph *g, const char *path, const tfm_meta *meta) {
  tfm_gpu_arena_to_host(g->arena.persistent);
  size_t n;
  tfm_tensor *t = checkpoint_tensors((tfm_graph *)g, &n);
  if (!t) return tfm_fail("%s: out of memory", path);
  int status = tfm_ckpt_save(path, t, n, meta);
  free(t);
  return status;
}

int tfm_graph_load(tfm_graph *g, const char *path, tfm_meta *meta_out) {
  tfm_gpu_arena_to_host(g->arena.persistent); /* a load that fails part way keeps the rest */
  tfm_gpu_arena_written(g->arena.persistent);
  size_t n;
  tfm_tensor *t = checkpoint_tensors(g, &n);
  if (!t) return tfm_fail("%s: out of memory", path);
  int status = tfm_ckpt_load(path, t, n, meta_out);
  free(t);
  return status;
}
