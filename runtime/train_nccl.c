/* NCCL for data-parallel training on GPUs (train_nccl.h). The stream is
 * non-blocking so that NCCL's kernels run beside the backward's; each
 * bucket waits, through an event, for the kernels queued before it, and
 * the gradients graph's run ends with cuCtxSynchronize, which waits for
 * this stream too, before the apply graph takes the averages (gpu.h's
 * links). */
#include <stdio.h>
#include <stdlib.h>

#include "dist.h"
#include "train_nccl.h"

struct tfm_nccl_train {
  tfm_cuda *cuda;
  void *stream;
  tfm_nccl *nccl;
  int in_group;
};

int tfm_nccl_train_open(tfm_nccl_train **out, int rank, int size) {
  tfm_nccl_train *t = *out = calloc(1, sizeof *t);
  if (!t) return tfm_fail("out of memory");
  if (tfm_nccl_load(&t->nccl)) {
    char why[512]; /* tfm_fail writes the buffer tfm_error returns */
    snprintf(why, sizeof why, "%s", tfm_error());
    return tfm_fail("a --target cuda binary trains data-parallel over NCCL: %s", why);
  }
  if (tfm_gpu_driver(&t->cuda) || tfm_cuda_stream_create(t->cuda, &t->stream)) return TFM_FAILED;
  unsigned char id[128] = {0};
  if (rank == 0 && tfm_nccl_unique_id(t->nccl, id)) return TFM_FAILED;
  if (tfm_dist_broadcast(id, sizeof id, 0, "NCCL's unique id")) return TFM_FAILED;
  return tfm_nccl_init_rank(t->nccl, id, size, rank);
}

int tfm_nccl_train_begin(tfm_nccl_train *t) {
  if (tfm_cuda_stream_wait_default(t->cuda, t->stream) || tfm_nccl_group_start(t->nccl))
    return TFM_FAILED;
  t->in_group = 1;
  return TFM_OK;
}

int tfm_nccl_train_average(tfm_nccl_train *t, tfm_gpu_place at, size_t count) {
  tfm_device_ptr p;
  if (tfm_gpu_device_address(at, &p)) return TFM_FAILED;
  return tfm_nccl_allreduce_mean_f32(t->nccl, p, p, count, t->stream);
}

/* A group begun is ended even after a failed call inside it. */
int tfm_nccl_train_end(tfm_nccl_train *t) {
  if (!t->in_group) return TFM_OK;
  t->in_group = 0;
  return tfm_nccl_group_end(t->nccl);
}

int tfm_nccl_train_wait(tfm_nccl_train *t) { return tfm_cuda_synchronize(t->cuda); }

void tfm_nccl_train_close(tfm_nccl_train *t) {
  if (!t) return;
  tfm_nccl_close(t->nccl);
  if (t->stream) tfm_cuda_stream_destroy(t->cuda, t->stream);
  free(t);
}
