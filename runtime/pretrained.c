/* --init FILE: another tool's checkpoint through a pretrained block's graph
 * (pretrained.h). */
#include "pretrained.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tfm_pretrained_find(const tfm_model_info *model, const char *name,
                        const tfm_pretrained_desc **out) {
  *out = NULL;
  if (model->num_pretrained == 0)
    return tfm_fail("model %s has no pretrained block to read another tool's checkpoint with "
                    "(add 'pretrained NAME { ... }' to %s: docs/language.md, \"Pretrained "
                    "weights\")", model->name, model->source);
  if (!name && model->num_pretrained > 1)
    return tfm_fail("model %s has %d pretrained blocks: say which with --pretrained NAME",
                    model->name, (int)model->num_pretrained);
  for (int32_t i = 0; i < model->num_pretrained; i++)
    if (!name || !strcmp(model->pretrained[i].name, name)) {
      *out = &model->pretrained[i];
      return TFM_OK;
    }
  char names[512] = "";
  for (int32_t i = 0; i < model->num_pretrained; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
             model->pretrained[i].name);
  return tfm_fail("model %s has no pretrained block '%s' (it has: %s)", model->name, name, names);
}

/* One kind of problem with the file, listed by name: as many whole
 * entries as fit, then "...". */
typedef struct {
  const char *what;
  size_t count, listed;
  char list[240]; /* three lists and the head fit tfm_error's 1 KiB */
} problems;

static void note(problems *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(problems *p, const char *fmt, ...) {
  char entry[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(entry, sizeof entry, fmt, ap);
  va_end(ap);
  size_t used = strlen(p->list);
  p->count++;
  if (p->listed + 1 < p->count || used + strlen(entry) + 3 >= sizeof p->list) return;
  snprintf(p->list + used, sizeof p->list - used, "%s%s", used ? "; " : "", entry);
  p->listed++;
}

static void append_problems(char *out, size_t size, const problems *p) {
  if (!p->count) return;
  size_t used = strlen(out);
  snprintf(out + used, size - used, "\n  %s (%zu): %s%s", p->what, p->count, p->list,
           p->listed < p->count ? "; ..." : "");
}

static void shape_text(char *buf, size_t size, size_t rank, const int64_t *dims) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (size_t i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)dims[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
}

static int compare_by_name(const void *key, const void *item) {
  return strcmp(key, ((const tfm_tensor *)item)->name);
}

static float bf16_to_f32(uint16_t bits) {
  uint32_t wide = (uint32_t)bits << 16;
  float f;
  memcpy(&f, &wide, sizeof f);
  return f;
}

/* The file's tensor into the block's input buffer: same shape; f32 from
 * f32, bf16 or f64, i32 from i32. 0 when the dtypes do not go together. */
static int fill_input(void *out, const tfm_buffer_desc *b, const tfm_tensor *t) {
  size_t n = (size_t)tfm_buffer_numel(b);
  if ((tfm_dtype)b->dtype == t->dtype) {
    memcpy(out, t->data, n * tfm_dtype_size(t->dtype));
    return 1;
  }
  if (b->dtype != TFM_F32) return 0;
  float *f = out;
  if (t->dtype == TFM_BF16)
    for (size_t i = 0; i < n; i++) f[i] = bf16_to_f32(((const uint16_t *)t->data)[i]);
  else if (t->dtype == TFM_F64)
    for (size_t i = 0; i < n; i++) f[i] = (float)((const double *)t->data)[i];
  else
    return 0;
  return 1;
}

/* Binds every tensor of the file the block reads; fills the problems. */
static void bind_inputs(tfm_graph *imp, const tfm_pretrained_desc *pre, const tfm_tensor *tensors,
                        size_t count, char *used, problems *missing, problems *misshaped,
                        problems *extra) {
  for (int32_t i = 0; i < imp->desc->num_buffers; i++) {
    const tfm_buffer_desc *b = &imp->desc->buffers[i];
    if (b->role != TFM_ROLE_INPUT) continue;
    const tfm_tensor *t = bsearch(b->name, tensors, count, sizeof *tensors, compare_by_name);
    if (!t) {
      note(missing, "%s", b->name);
      continue;
    }
    used[t - tensors] = 1;
    int64_t dims[TFM_MAX_RANK];
    int same = t->rank == (size_t)b->rank;
    for (size_t d = 0; d < t->rank; d++) {
      dims[d] = (int64_t)t->shape[d];
      same = same && dims[d] == b->shape[d];
    }
    char have[128], want[128];
    shape_text(have, sizeof have, t->rank, dims);
    shape_text(want, sizeof want, (size_t)b->rank, b->shape);
    if (!same) {
      note(misshaped, "%s is %s in the file, the block reads %s", b->name, have, want);
      continue;
    }
    void *in = tfm_graph_buffer(imp, b->name, TFM_ROLE_INPUT, NULL);
    if (!fill_input(in, b, t))
      note(misshaped, "%s is %s in the file, the block reads %s", b->name,
           tfm_dtype_name(t->dtype), tfm_dtype_name((tfm_dtype)b->dtype));
  }
  for (size_t j = 0; j < count; j++) {
    int ignored = 0;
    for (int32_t k = 0; k < pre->num_ignored && !ignored; k++)
      ignored = !strcmp(pre->ignored[k], tensors[j].name);
    if (!used[j] && !ignored) note(extra, "%s", tensors[j].name);
  }
}

static void report_params(const tfm_graph *dst, const tfm_graph *imp, tfm_pretrained_report *r) {
  *r = (tfm_pretrained_report){0};
  for (int32_t i = 0; i < dst->desc->num_buffers; i++) {
    const tfm_buffer_desc *b = &dst->desc->buffers[i];
    if (b->role != TFM_ROLE_PARAM) continue;
    int set = 0;
    for (int32_t k = 0; k < imp->desc->num_buffers && !set; k++)
      set = imp->desc->buffers[k].role == TFM_ROLE_OUTPUT && !strcmp(imp->desc->buffers[k].name, b->name);
    if (set) {
      r->params_set++;
      continue;
    }
    size_t used = strlen(r->kept);
    if (used + strlen(b->name) + 6 < sizeof r->kept)
      snprintf(r->kept + used, sizeof r->kept - used, "%s%s", r->params_kept ? ", " : "", b->name);
    else if (!strstr(r->kept, "..."))
      snprintf(r->kept + used, sizeof r->kept - used, ", ...");
    r->params_kept++;
  }
}

int tfm_pretrained_load(tfm_graph *dst, const tfm_pretrained_desc *pre, const char *path,
                        tfm_pool *pool, tfm_pretrained_report *report) {
  tfm_tensor *tensors;
  size_t count;
  if (tfm_ckpt_read(path, &tensors, &count, NULL)) return TFM_FAILED;
  tfm_graph imp;
  char *used = calloc(count + 1, 1);
  int status = !used ? tfm_fail("%s: out of memory", path) : tfm_graph_open(&imp, pre->graph);
  if (!status) {
    problems missing = {.what = "missing, read by the block"},
             misshaped = {.what = "of another shape or dtype"},
             extra = {.what = "in the file but neither read nor left out with "
                              "_ = source(\"name\")"};
    bind_inputs(&imp, pre, tensors, count, used, &missing, &misshaped, &extra);
    if (missing.count || misshaped.count || extra.count) {
      char why[4096];
      snprintf(why, sizeof why, "does not match the model's pretrained %s:", pre->name);
      append_problems(why, sizeof why, &missing);
      append_problems(why, sizeof why, &misshaped);
      append_problems(why, sizeof why, &extra);
      status = tfm_fail_file(path, "%s", why);
    }
    if (!status) {
      tfm_graph_run(&imp, pool);
      status = tfm_graph_take_init(dst, &imp);
    }
    if (!status && report) {
      report_params(dst, &imp, report);
      for (size_t j = 0; j < count; j++) report->tensors_read += used[j] != 0;
    }
    tfm_graph_close(&imp);
  }
  free(used);
  tfm_ckpt_free_tensors(tensors, count);
  return status;
}
