/* forward (--load CKPT | --init FILE) --inputs IN.safetensors --out OUT.safetensors:
 * the forward graph run once on given inputs, every output written: how a
 * script compares tfm's numbers with another tool's, or reads a model's
 * outputs without writing C. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The forward graph's inputs from the file: each by name, same dtype and
 * shape; the file may hold nothing else. The training step ("step", which
 * keys dropout's random numbers) is 0 unless the file gives it. */
static int bind_inputs(tfm_graph *g, const char *path) {
  tfm_tensor *tensors;
  size_t count;
  if (tfm_ckpt_read(path, &tensors, &count, NULL)) return TFM_FAILED;
  int status = TFM_OK;
  size_t bound = 0;
  for (int32_t i = 0; i < g->desc->num_buffers && !status; i++) {
    const tfm_buffer_desc *b = &g->desc->buffers[i];
    if (b->role != TFM_ROLE_INPUT) continue;
    const tfm_tensor *t = NULL;
    for (size_t k = 0; k < count && !t; k++)
      if (!strcmp(tensors[k].name, b->name)) t = &tensors[k];
    if (!t && !strcmp(b->name, "step")) {
      *(int32_t *)tfm_graph_buffer(g, b->name, TFM_ROLE_INPUT, NULL) = 0;
      continue;
    }
    if (!t) {
      status = tfm_fail_file(path, "no tensor '%s' (model %s's input, %s of %d axes)", b->name,
                             tfm_model.name, tfm_dtype_name((tfm_dtype)b->dtype), (int)b->rank);
      break;
    }
    int same = t->dtype == (tfm_dtype)b->dtype && t->rank == (size_t)b->rank;
    for (int d = 0; d < b->rank && same; d++) same = t->shape[d] == (size_t)b->shape[d];
    if (!same) {
      status = tfm_fail_file(path, "tensor '%s' is not the model's input: the model reads %s of "
                             "shape [%lld%s]", b->name, tfm_dtype_name((tfm_dtype)b->dtype),
                             (long long)(b->rank ? b->shape[0] : 1), b->rank > 1 ? ", ..." : "");
      break;
    }
    memcpy(tfm_graph_buffer(g, b->name, TFM_ROLE_INPUT, NULL), t->data, (size_t)tfm_buffer_bytes(b));
    bound++;
  }
  if (!status && bound != count)
    status = tfm_fail_file(path, "holds %zu tensors, but model %s has %zu of them as inputs",
                           count, tfm_model.name, bound);
  tfm_ckpt_free_tensors(tensors, count);
  return status;
}

/* Every output of g as a tensor to save (pointing into g). */
static int save_outputs(tfm_graph *g, const char *path) {
  tfm_tensor *out = calloc((size_t)g->desc->num_buffers + 1, sizeof *out);
  if (!out) return tfm_fail("out of memory");
  size_t n = 0;
  for (int32_t i = 0; i < g->desc->num_buffers; i++) {
    const tfm_buffer_desc *b = &g->desc->buffers[i];
    if (b->role != TFM_ROLE_OUTPUT) continue;
    tfm_tensor *t = &out[n++];
    t->name = b->name;
    t->dtype = (tfm_dtype)b->dtype;
    t->rank = (size_t)b->rank;
    for (int d = 0; d < b->rank; d++) t->shape[d] = (size_t)b->shape[d];
    t->data = tfm_graph_buffer(g, b->name, TFM_ROLE_OUTPUT, NULL);
  }
  tfm_meta meta = {0};
  int status = tfm_meta_set(&meta, TFM_META_MODEL, tfm_model.name) ||
               tfm_ckpt_save(path, out, n, &meta);
  tfm_meta_clear(&meta);
  free(out);
  return status;
}

int cli_forward(const char *prog, const Cli *c, tfm_pool *pool) {
  if (!c->inputs || !c->out)
    return cli_usage_error(prog, "%s", "forward needs --inputs IN.safetensors --out OUT.safetensors");
  Task t = {.cli = c, .pool = pool, .sharded = 1}; /* ids come as they are: no vocabulary */
  tfm_graph g;
  int status = cli_open_trained(prog, c, &t, tfm_model.forward, &g);
  if (status) return status;
  status = bind_inputs(&g, c->inputs);
  if (!status) {
    tfm_graph_run(&g, pool);
    status = save_outputs(&g, c->out);
  }
  tfm_vocab_free(&t.vocab);
  tfm_graph_close(&g);
  if (status) return cli_fail(prog);
  printf("wrote the outputs of model %s to %s\n", tfm_model.name, c->out);
  return 0;
}
