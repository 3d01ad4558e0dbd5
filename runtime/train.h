/* The training loop of a compiled model (see train.c). */
#ifndef TFM_TRAIN_LOOP_H
#define TFM_TRAIN_LOOP_H
#include <stdio.h>

#include "model.h"

/* Writes the train graph's inputs for `step` (1-based); must depend only on
 * the step and the data's seed. *tokens receives the batch's token count
 * (for the progress line). */
typedef int (*tfm_batch_fn)(void *ctx, tfm_graph *train, uint64_t step, uint64_t *tokens);
/* Called once after the last step with the trained graph (e.g. to evaluate). */
typedef int (*tfm_done_fn)(void *ctx, tfm_graph *train);
/* The held-out loss of the params in train, for the metrics file; NAN when
 * there is no held-out data. */
typedef int (*tfm_held_out_fn)(void *ctx, tfm_graph *train, double *loss);

struct tfm_train_options;

/* How a step is run when it is not the train graph's own run: the
 * data-parallel loop's (train_dist.c). */
typedef struct tfm_train_engine {
  const tfm_graph_desc *graph; /* opened instead of the model's train graph: it holds the
                                * params and optimizer state that are initialised, loaded,
                                * saved, and its outputs lr and grad_norm are reported */
  void *ctx;
  /* After the params of g were initialised or loaded. */
  int (*prepare)(void *ctx, tfm_graph *g);
  /* One step: its batch, the gradients, their exchange and g's update;
   * *loss receives the step's loss (the mean over ranks). */
  int (*step)(void *ctx, tfm_graph *g, const struct tfm_train_options *o, uint64_t step,
              uint64_t *tokens, float *loss);
  /* NULL, or checkpoints of g not as tfm_graph_save/load (ZeRO-1: the
   * optimizer state is not in g): save is then called on every rank, a
   * collective, and only the writer writes; load on every rank. */
  int (*save)(void *ctx, const tfm_graph *g, const char *path, const tfm_meta *meta);
  int (*load)(void *ctx, tfm_graph *g, const char *path, tfm_meta *meta);
  int writes;          /* this process writes checkpoints, metrics and the log */
  uint64_t world_size; /* recorded in checkpoints (TFM_META_WORLD_SIZE) */
  uint64_t rank;       /* this process's */
} tfm_train_engine;

typedef struct tfm_train_options {
  const tfm_model_info *model;
  uint64_t steps;         /* train until this step */
  uint64_t seed;          /* parameter initialisation (and recorded in checkpoints) */
  const char *save_path;  /* checkpoint file, or NULL */
  uint64_t save_every;    /* also checkpoint every this many steps (0: only at the end) */
  uint64_t keep;          /* also keep the last `keep` periodic checkpoints, each in its
                           * own file (tfm_step_path); 0: only save_path */
  int resume;             /* continue from save_path when it exists */
  uint64_t log_every;     /* progress line every this many steps */
  FILE *log;              /* NULL: quiet */
  tfm_pool *pool;
  tfm_batch_fn next_batch;
  tfm_done_fn on_done;    /* may be NULL */
  const char *metrics_path; /* --metrics: a JSON line per logged step (metrics.h), or NULL */
  uint64_t threads;       /* recorded in the metrics file */
  tfm_held_out_fn held_out; /* may be NULL: no test_loss in the metrics */
  const char *init_path;  /* --init: another tool's checkpoint, read through */
  const tfm_pretrained_desc *init_block; /* this pretrained block after initialising */
  void *batch_ctx;
  const tfm_train_engine *engine; /* NULL: the train graph's run, in this process */
} tfm_train_options;

typedef struct tfm_train_result {
  uint64_t steps_done;
  double last_loss;
} tfm_train_result;

/* Runs the init graph with `seed` and copies its outputs into g's params. */
int tfm_initialise(tfm_graph *g, const tfm_model_info *model, uint64_t seed, tfm_pool *pool);
/* Then (--init) the params pretrained `block` sets, from the checkpoint at
 * path (pretrained.h); says what it did on `log` (may be NULL). */
int tfm_init_pretrained(tfm_graph *g, const tfm_pretrained_desc *block, const char *path,
                        tfm_pool *pool, FILE *log);
int tfm_train(const tfm_train_options *options, tfm_train_result *result);
/* Where the periodic checkpoint of `step` is kept: save_path with
 * ".step" and the step in 8 digits before a ".safetensors" suffix (else at
 * the end), e.g. ck.step00000500.safetensors, so names sort by step. */
void tfm_step_path(char *buf, size_t size, const char *save_path, uint64_t step);

#endif
