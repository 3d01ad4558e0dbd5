/* The training loop: initialise or resume, then step, report, checkpoint.
 * Batches come from a callback that must be a pure function of the step
 * (and the seed), so a resumed run sees the very batches the uninterrupted
 * run would have seen and ends with bit-identical parameters. */
#define _POSIX_C_SOURCE 200809L /* kill */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metrics.h"
#include "pretrained.h"
#include "train.h"

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static int set_scalar_input(tfm_graph *g, const char *name, int32_t value) {
  const tfm_buffer_desc *b;
  int32_t *p = tfm_graph_buffer(g, name, TFM_ROLE_INPUT, &b);
  if (!p) return 0;
  *p = value;
  return 1;
}

static float scalar_output(tfm_graph *g, const char *name, int *found) {
  const tfm_buffer_desc *b;
  float *p = tfm_graph_buffer(g, name, TFM_ROLE_OUTPUT, &b);
  *found = p != NULL && b->dtype == TFM_F32 && tfm_buffer_numel(b) == 1;
  return *found ? *p : NAN;
}

int tfm_initialise(tfm_graph *train, const tfm_model_info *model, uint64_t seed, tfm_pool *pool) {
  if (!model->init) return TFM_OK;
  tfm_graph init;
  if (tfm_graph_open(&init, model->init)) return TFM_FAILED;
  set_scalar_input(&init, "seed", (int32_t)(seed & 0x7fffffff));
  tfm_graph_run(&init, pool);
  int status = tfm_graph_take_init(train, &init);
  tfm_graph_close(&init);
  return status;
}

int tfm_init_pretrained(tfm_graph *g, const tfm_pretrained_desc *block, const char *path,
                        tfm_pool *pool, FILE *log) {
  tfm_pretrained_report r;
  if (tfm_pretrained_load(g, block, path, pool, &r)) return TFM_FAILED;
  if (log) {
    fprintf(log, "initialised from %s (pretrained %s): %zu tensors into %zu parameters", path,
            block->name, r.tensors_read, r.params_set);
    if (r.params_kept) fprintf(log, "; %zu kept their initial values: %s", r.params_kept, r.kept);
    fprintf(log, "\n");
  }
  return TFM_OK;
}

static int save(const tfm_graph *g, const tfm_train_options *o, uint64_t step) {
  tfm_meta meta = {0};
  int status = tfm_meta_set_u64(&meta, TFM_META_STEP, step) ||
               tfm_meta_set_u64(&meta, TFM_META_SEED, o->seed) ||
               tfm_meta_set(&meta, TFM_META_MODEL, o->model->name) ||
               tfm_meta_set_u64(&meta, TFM_META_WORLD_SIZE,
                                o->engine ? o->engine->world_size : 1) ||
               (o->engine && o->engine->save
                    ? o->engine->save(o->engine->ctx, g, o->save_path, &meta)
                    : tfm_graph_save(g, o->save_path, &meta));
  tfm_meta_clear(&meta);
  return status;
}

void tfm_step_path(char *buf, size_t size, const char *save_path, uint64_t step) {
  static const char suffix[] = ".safetensors";
  size_t n = strlen(save_path), ns = sizeof suffix - 1;
  int has_suffix = n >= ns && !strcmp(save_path + n - ns, suffix);
  snprintf(buf, size, "%.*s.step%08llu%s", (int)(has_suffix ? n - ns : n), save_path,
           (unsigned long long)step, has_suffix ? suffix : "");
}

/* --keep: the periodic checkpoint of `step` in its own file, and the one
 * `keep` periods older removed. */
static int keep_periodic(const tfm_graph *g, const tfm_train_options *o, uint64_t step) {
  char path[4096];
  tfm_step_path(path, sizeof path, o->save_path, step);
  tfm_train_options at_step = *o;
  at_step.save_path = path;
  if (save(g, &at_step, step)) return TFM_FAILED;
  if (o->engine && !o->engine->writes) return TFM_OK; /* took part in the engine's save */
  uint64_t span = o->keep * o->save_every;
  if (step > span) {
    tfm_step_path(path, sizeof path, o->save_path, step - span);
    if (remove(path) && file_exists(path)) return tfm_fail("%s: cannot remove it", path);
  }
  return TFM_OK;
}

/* TFM_TEST_KILL_AT_STEP=N makes the process SIGKILL itself right after step
 * N: the crash that --resume must recover from, at a step a test can name.
 * Under mpirun, TFM_TEST_KILL_RANK=R limits it to rank R (dist.h), and
 * TFM_TEST_KILL_STOP=1 stops the rank instead (SIGSTOP): a rank that
 * hangs, which the others' collectives time out on. */
static uint64_t kill_step(uint64_t rank) {
  const char *s = getenv("TFM_TEST_KILL_AT_STEP"), *r = getenv("TFM_TEST_KILL_RANK");
  if (r && strtoull(r, NULL, 10) != rank) return 0;
  return s ? strtoull(s, NULL, 10) : 0;
}

/* The train graph's own run: batch, forward, backward and update in one
 * (a loss that is not finite stops the run before any checkpoint). */
static int local_step(tfm_graph *g, const tfm_train_options *o, uint64_t step, uint64_t *tokens,
                      float *loss) {
  if (o->next_batch(o->batch_ctx, g, step, tokens)) return TFM_FAILED;
  set_scalar_input(g, "step", (int32_t)step);
  tfm_graph_step(g, o->pool);
  int found;
  *loss = scalar_output(g, "loss", &found);
  if (!found) return tfm_fail("the train graph has no f32 scalar output 'loss'");
  return TFM_OK;
}

int tfm_train(const tfm_train_options *o, tfm_train_result *result) {
  const tfm_model_info *model = o->model;
  const tfm_train_engine *engine = o->engine;
  uint64_t kill_at = kill_step(engine ? engine->rank : 0);
  memset(result, 0, sizeof *result);
  if (!model->train) return tfm_fail("model %s has no train block; it cannot be trained", model->name);
  tfm_graph g;
  if (tfm_graph_open(&g, engine ? engine->graph : model->train)) return TFM_FAILED;
  FILE *log = !engine || engine->writes ? o->log : NULL;
  const char *metrics_path = !engine || engine->writes ? o->metrics_path : NULL;
  int status = TFM_FAILED;
  uint64_t first = 0;
  tfm_metrics metrics = {0};
  if (o->resume && o->save_path && file_exists(o->save_path)) {
    tfm_meta meta = {0};
    uint64_t seed = o->seed;
    if ((engine && engine->load ? engine->load(engine->ctx, &g, o->save_path, &meta)
                                : tfm_graph_load(&g, o->save_path, &meta)) ||
        tfm_meta_get_u64(&meta, TFM_META_STEP, &first)) {
      tfm_meta_clear(&meta);
      goto done;
    }
    tfm_meta_get_u64(&meta, TFM_META_SEED, &seed);
    tfm_meta_clear(&meta);
    if (seed != o->seed) {
      tfm_fail("%s was written with --seed %llu, not %llu; resume with the same seed",
               o->save_path, (unsigned long long)seed, (unsigned long long)o->seed);
      goto done;
    }
    if (log) fprintf(log, "resuming from %s at step %llu\n", o->save_path, (unsigned long long)first);
  } else if (tfm_initialise(&g, model, o->seed, o->pool) ||
             (o->init_path && tfm_init_pretrained(&g, o->init_block, o->init_path, o->pool, log))) {
    goto done;
  }
  if (engine && engine->prepare(engine->ctx, &g)) goto done;
  tfm_progress progress;
  if (log) tfm_progress_start(&progress, log, first, o->steps);
  if (tfm_metrics_open(&metrics, metrics_path, model, o->seed, o->threads, o->steps, first))
    goto done;
  uint64_t pending_tokens = 0; /* since the last progress line */
  for (uint64_t step = first + 1; step <= o->steps; step++) {
    uint64_t tokens = 0;
    float loss;
    if (engine ? engine->step(engine->ctx, &g, o, step, &tokens, &loss)
               : local_step(&g, o, step, &tokens, &loss))
      goto done;
    pending_tokens += tokens;
    int found;
    if (!isfinite(loss)) {
      tfm_fail("the loss is %s at step %llu; stopping (the last checkpoint is unchanged)",
               isnan(loss) ? "NaN" : "infinite", (unsigned long long)step);
      goto done;
    }
    result->last_loss = loss;
    result->steps_done = step;
    float lr = scalar_output(&g, "lr", &found);
    int logged = step % o->log_every == 0 || step == o->steps || step == first + 1;
    if (log && logged) {
      tfm_progress_report(&progress, step, loss, found ? lr : NAN, pending_tokens);
      pending_tokens = 0;
    }
    tfm_metrics_tokens(&metrics, tokens);
    if (metrics.file && logged) {
      int has_norm;
      double grad_norm = scalar_output(&g, "grad_norm", &has_norm), test_loss = NAN;
      if ((o->held_out && o->held_out(o->batch_ctx, &g, &test_loss)) ||
          tfm_metrics_step(&metrics, step, loss, lr, grad_norm, test_loss))
        goto done;
    }
    int checkpoint = o->save_path && (!engine || engine->writes || engine->save) && ((o->save_every && step % o->save_every == 0) || step == o->steps);
    if (checkpoint && save(&g, o, step)) goto done;
    if (checkpoint && o->keep && o->save_every && step % o->save_every == 0 &&
        keep_periodic(&g, o, step))
      goto done;
    if (kill_at && step == kill_at) /* see kill_step(); STOP: a rank that hangs */
      kill(getpid(), getenv("TFM_TEST_KILL_STOP") ? SIGSTOP : SIGKILL);
  }
  if (o->on_done && (!engine || engine->writes) && o->on_done(o->batch_ctx, &g)) goto done;
  status = TFM_OK;
done:
  tfm_metrics_close(&metrics);
  tfm_graph_close(&g);
  return status;
}
