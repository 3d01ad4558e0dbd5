/* The training loop against a hand-written "compiled" model: least squares
 * w <- w - lr * 2 (w - x), with an Adam-like state s counting steps. Checks
 * initialisation from the init graph, resume from a checkpoint to the same
 * bits as an uninterrupted run, and NaN detection with the step number. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "train.h"

/* Layouts: train persistent = w f32[2] @0, s f32[1] @8;
 *          train scratch = x f32[2] @0, step i32 @8, loss f32 @12, w_new @16, s_new @24;
 *          init persistent unused; scratch = seed i32 @0, w_init f32[2] @4. */
static void train_run(uint8_t *p, uint8_t *s, tfm_pool *pool) {
  (void)pool;
  float *w = (float *)p, *st = (float *)(p + 8), *x = (float *)s;
  float *loss = (float *)(s + 12), *w_new = (float *)(s + 16), *s_new = (float *)(s + 24);
  int32_t step = *(int32_t *)(s + 8);
  *loss = 0;
  for (int i = 0; i < 2; i++) {
    float d = w[i] - x[i];
    *loss += d * d;
    /* The state enters the step, so a resume that lost it would drift. */
    w_new[i] = w[i] - 0.1f / (1 + *st + 0.001f * (float)step) * 2 * d;
  }
  *s_new = *st + 1;
}

static void train_update(uint8_t *p, uint8_t *s) {
  memcpy(p, s + 16, 8);
  memcpy(p + 8, s + 24, 4);
}

static void init_run(uint8_t *p, uint8_t *s, tfm_pool *pool) {
  (void)p;
  (void)pool;
  int32_t seed = *(int32_t *)s;
  float *w = (float *)(s + 4);
  w[0] = (float)seed;
  w[1] = -(float)seed;
}

static const tfm_buffer_desc train_buffers[] = {
    {"w", TFM_ROLE_PARAM, TFM_F32, TFM_REGION_PERSISTENT, 1, 0, {2}, -1},
    {"adam.s", TFM_ROLE_STATE, TFM_F32, TFM_REGION_PERSISTENT, 0, 8, {0}, -1},
    {"x", TFM_ROLE_INPUT, TFM_F32, TFM_REGION_SCRATCH, 1, 0, {2}, -1},
    {"step", TFM_ROLE_INPUT, TFM_I32, TFM_REGION_SCRATCH, 0, 8, {0}, -1},
    {"loss", TFM_ROLE_OUTPUT, TFM_F32, TFM_REGION_SCRATCH, 0, 12, {0}, -1},
};
static const tfm_buffer_desc init_buffers[] = {
    {"seed", TFM_ROLE_INPUT, TFM_I32, TFM_REGION_SCRATCH, 0, 0, {0}, -1},
    {"w", TFM_ROLE_OUTPUT, TFM_F32, TFM_REGION_SCRATCH, 1, 4, {2}, -1},
};
static const tfm_graph_desc train_graph = {"train", 12, 28, 5, train_buffers, train_run, train_update, 0, NULL};
static const tfm_graph_desc init_graph = {"init", 0, 12, 2, init_buffers, init_run, NULL, 0, NULL};
static const tfm_model_info model = {"toy", "toy.tfm", 0, NULL, NULL, &init_graph, &train_graph, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, 0, NULL, NULL, 0};

/* x depends only on the step: x = (step % 3, 1); step 5 is NaN when asked. */
static int poison_step;

static int batch(void *ctx, tfm_graph *g, uint64_t step, uint64_t *tokens) {
  (void)ctx;
  float *x = tfm_graph_buffer(g, "x", TFM_ROLE_INPUT, NULL);
  x[0] = (float)(step % 3);
  x[1] = (int)step == poison_step ? NAN : 1.0f;
  *tokens = 2;
  return TFM_OK;
}

static float final_w[2];

static int remember(void *ctx, tfm_graph *g) {
  (void)ctx;
  memcpy(final_w, tfm_graph_buffer(g, "w", TFM_ROLE_PARAM, NULL), sizeof final_w);
  return TFM_OK;
}

static tfm_train_options options(const char *path, uint64_t steps, int resume) {
  tfm_train_options o = {0};
  o.model = &model;
  o.steps = steps;
  o.seed = 3;
  o.save_path = path;
  o.save_every = 4;
  o.resume = resume;
  o.log_every = 1;
  o.next_batch = batch;
  o.on_done = remember;
  return o;
}

int main(void) {
  char path[512], other[512];
  snprintf(path, sizeof path, "%s/ckpt.safetensors", scratch_dir());
  snprintf(other, sizeof other, "%s/other.safetensors", scratch_dir());
  tfm_train_result r;

  /* Uninterrupted: 10 steps from w = (3, -3). */
  tfm_train_options o = options(other, 10, 0);
  CHECK_OK(tfm_train(&o, &r));
  CHECK(r.steps_done == 10);
  float straight[2];
  memcpy(straight, final_w, sizeof straight);
  CHECK(straight[0] != 3.0f); /* it did train */

  /* A killed run leaves the step-4 checkpoint (the end-of-run one at step 6
   * is never written): stopping at step 4 leaves exactly that file. */
  o = options(path, 4, 0);
  CHECK_OK(tfm_train(&o, &r));
  o = options(path, 10, 1);
  CHECK_OK(tfm_train(&o, &r));
  CHECK(memcmp(final_w, straight, sizeof straight) == 0);

  /* A resume with another seed is refused. */
  o = options(path, 12, 1);
  o.seed = 4;
  CHECK_REFUSED(tfm_train(&o, &r), path, "--seed");

  /* NaN at step 5 stops with the step number. */
  poison_step = 5;
  o = options(other, 10, 0);
  CHECK_REFUSED(tfm_train(&o, &r), NULL, "NaN at step 5");
  CHECK(r.steps_done == 4);

  scratch_dir_remove();
  return check_result("train_loop");
}
