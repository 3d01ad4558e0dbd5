/* The data-parallel training loop's engine (train_dist.c, dist.h). */
#ifndef TFM_TRAIN_DIST_H
#define TFM_TRAIN_DIST_H
#include <stdio.h>

#include "train.h"

typedef struct tfm_dist_train tfm_dist_train;

/* After tfm_dist_init: checks that every rank runs the same model and
 * options, opens the gradients graph and plans the buckets. *d is set
 * even on failure (close it). zero: optimizer-state sharding (ZeRO-1,
 * train --zero 1): each param is owned by one rank, which alone holds its
 * optimizer moments and runs its update (the model's per-param update
 * graphs); the updated params are then broadcast by their owners, and
 * checkpoints gather the moments to rank 0 (the single-process file). The
 * loop's graph is then the gradients graph; the memory saved goes to
 * o->log on rank 0. */
int tfm_dist_train_open(tfm_dist_train **d, const tfm_train_options *o, int zero);
/* What tfm_train_options.engine takes. */
const tfm_train_engine *tfm_dist_train_engine(const tfm_dist_train *d);
/* One line: ranks, buckets, step time, averaging time and the share of it
 * hidden behind the backward. */
void tfm_dist_train_report(const tfm_dist_train *d, FILE *out);
void tfm_dist_train_close(tfm_dist_train *d);

#endif
