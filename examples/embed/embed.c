/* A program that embeds a compiled model: a tiny GPT built as a shared
 * library (libgpt.so) with its generated C header (gpt.h). It opens the
 * training graph, initialises the parameters, and runs two training steps
 * on one fixed batch (a counting sequence), printing each loss. It fails
 * unless the first loss is finite and the second differs from it, i.e. the
 * optimizer step moved the parameters. */
#include <math.h>
#include <stdio.h>

#include "gpt.h"

static float train_step(tfm_graph *g, int32_t step, tfm_pool *pool) {
  int32_t *tokens = gpt_train_tokens(g), *targets = gpt_train_targets(g);
  for (int i = 0; i < GPT_TRAIN_TOKENS_NUMEL; i++) {
    tokens[i] = i % EMBED_VOCAB;
    targets[i] = (i + 1) % EMBED_VOCAB; /* the next token */
  }
  *gpt_train_step(g) = step; /* 1-based: Adam's bias correction reads it */
  tfm_graph_run(g, pool);
  float loss = *gpt_train_loss(g);
  tfm_graph_update(g);
  return loss;
}

int main(void) {
  tfm_pool *pool;
  tfm_graph g;
  if (tfm_pool_create(&pool, 2) != TFM_OK) {
    fprintf(stderr, "embed: %s\n", tfm_error());
    return 1;
  }
  int status = 1;
  if (tfm_graph_open(&g, &tfm_train_desc) != TFM_OK ||
      tfm_initialise(&g, &tfm_model, 1, pool) != TFM_OK) {
    fprintf(stderr, "embed: %s\n", tfm_error());
  } else {
    float first = train_step(&g, 1, pool), second = train_step(&g, 2, pool);
    printf("step 1 loss %.6f\nstep 2 loss %.6f\n", first, second);
    status = isfinite(first) && isfinite(second) && second != first ? 0 : 1;
    if (status) fprintf(stderr, "embed: expected a finite loss that changes after a step\n");
  }
  tfm_graph_close(&g);
  tfm_pool_destroy(pool);
  return status;
}
