/* What the command line's files share (cli.c: options, the task, decoding,
 * train/eval/translate/generate/average/info; cli_attention.c: the
 * attention command). */
#ifndef TFMRT_CLI_H
#define TFMRT_CLI_H
#include <stdint.h>

#include "tfmrt.h"
#include "model.h"

extern const tfm_model_info tfm_model;

enum { MAX_CHECKPOINTS = 256 };

typedef struct Cli {
  const char *command, *data, *test, *save, *load, *vocab_path, *prompt;
  const char *alpha_text, *dump, *dump_file, *out;
  const char *metrics;      /* train --metrics FILE */
  uint64_t steps, every, keep, seed, log_every, threads, length, show;
  uint64_t beam;            /* 0: greedy decoding (no --beam) */
  double alpha;
  int resume, scores, profile;
  size_t num_paths;         /* average: the checkpoints */
  const char *paths[MAX_CHECKPOINTS];
} Cli;

/* The task the model's inputs imply, and its data. */
typedef struct Task {
  int translation;          /* else characters */
  tfm_vocab vocab;
  tfm_pairs train_pairs, test_pairs;
  tfm_chars chars;
  size_t rows, src_len, tgt_len, window;
  int64_t model_vocab;      /* classes of the logits */
  uint64_t seed;
  const Cli *cli;
  tfm_pool *pool;
  tfm_graph held_out;       /* train --metrics: the forward graph for test_loss */
  int held_out_open;
} Task;

/* An error of the command line: "PROG: message", usage hint, exit 2. */
int cli_usage_error(const char *prog, const char *fmt, const char *arg);
/* "PROG: error: " and the runtime's last error; exit status 1. */
int cli_fail(const char *prog);
const tfm_buffer_desc *cli_find_desc(const tfm_graph_desc *g, const char *name, tfm_role role);
/* The forward graph with the params of --load, the task's shapes and vocabulary. */
int cli_open_trained(const char *prog, const Cli *c, Task *t, tfm_graph *fwd);
/* Greedy decoding of the batch of sources in fwd's src (see cli.c). */
void cli_greedy_translate(Task *t, tfm_graph *fwd, tfm_pool *pool, int32_t *out, double *logprob,
                          size_t *length, double *row_lp);

#endif
