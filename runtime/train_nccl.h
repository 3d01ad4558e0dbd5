/* The GPU side of data-parallel training (train_dist.c) for a --target
 * cuda binary: one process per GPU, the gradients averaged on the devices
 * by NCCL (nccl.c) on a stream of their own, each bucket queued behind the
 * kernel that finishes it so that it overlaps the rest of the backward. */
#ifndef TFM_TRAIN_NCCL_H
#define TFM_TRAIN_NCCL_H
#include <stddef.h>

#include "gpu.h"

typedef struct tfm_nccl_train tfm_nccl_train;

/* Loads NCCL, opens this rank's GPU and the communicator of `size` ranks
 * (rank 0's unique id broadcast over dist.h). *t is set even on failure
 * (close it). */
int tfm_nccl_train_open(tfm_nccl_train **t, int rank, int size);
/* A bucket: tfm_nccl_train_average for each of its gradients between
 * begin, which orders it after every kernel queued so far, and end, which
 * launches it (one NCCL group). Called from inside the gradients graph's
 * run (its kernel hook), whose device arena then exists. */
int tfm_nccl_train_begin(tfm_nccl_train *t);
/* The mean over the ranks of the `count` floats at `at`, in place. */
int tfm_nccl_train_average(tfm_nccl_train *t, tfm_gpu_place at, size_t count);
int tfm_nccl_train_end(tfm_nccl_train *t);
/* Returns when everything queued is done. */
int tfm_nccl_train_wait(tfm_nccl_train *t);
void tfm_nccl_train_close(tfm_nccl_train *t);

#endif
