/* A checked model's graphs (lower_model.c). */
#ifndef TFM_LOWER_MODEL_H
#define TFM_LOWER_MODEL_H
#include <stdint.h>

#include "graph.h"
#include "sema.h"

/* Checks the program and lowers it: the forward graph (train 0) or the
 * training graph: its whole step (1: forward, backward and the optimizer
 * update), or one part of it for data-parallel training (1 + TrainPart:
 * 2 the gradients, 3 their application, 4 and 5 below; train.h). `training`
 * (dropout on) is opt->training, and always on for the training graph. Returns NULL when the
 * program has errors (reported through diag). *model receives the checked
 * model (parameter initialisers, config). */
Graph *lower_model(const FrontOptions *opt, int train, CheckedModel **model);
/* lower_model with `param`, the param number of TRAIN_APPLY_PARAM (4: the
 * norm of the gradients, 5: the update of param number `param` alone;
 * train.h), for optimizer-state sharding. */
Graph *lower_model_part(const FrontOptions *opt, int train, int param, CheckedModel **model);

/* Whether m has the shape of a causal language model whose decode-step
 * graph tfmc compiles: inputs tokens and targets, i32[B, T], and nothing
 * else, and an output logits. */
int lower_decodes(const CheckedModel *m);

/* The decode-step graph: the program checked again with `decoding` true,
 * tokens and targets [B, 1], the i32[B] input `pos` (decode_pos()), each
 * kv_cache() a state [B, ..., T, K] updated at pos, only the output
 * logits [B, 1, V]. NULL when the program has errors (reported) or uses no
 * kv_cache (nothing reported, *model set: such a model has no decode
 * graph). Call it only for a model for which lower_decodes holds. */
Graph *lower_decode_model(const FrontOptions *opt, CheckedModel **model);

/* A graph whose outputs, named like the parameters, are their initial
 * values (zeros, normal(mean, std), xavier_uniform, ...), drawn from Philox
 * keyed by `seed` with the i32 scalar input "seed" as the counter offset
 * (the run-time --seed): initialisation is computed like anything else,
 * not by the runtime. */
Graph *lower_init_graph(const CheckedModel *m, uint64_t seed);

/* The graph of pretrained block `name`: inputs named like the tensors of
 * the other tool's checkpoint it reads, outputs named like the parameters
 * it sets. NULL when the program has errors; *model as for lower_model. */
Graph *lower_pretrained_graph(const FrontOptions *opt, const char *name, CheckedModel **model);

#endif
