/* The command line of a compiled model (cli.c), shared with the commands
 * that live in files of their own (attention_cmd.c). */
#ifndef TFMRT_CLI_H
#define TFMRT_CLI_H
#include <stdint.h>

#include "shard.h"
#include "train.h"

extern const tfm_model_info tfm_model;

enum { MAX_CHECKPOINTS = 256 };

typedef struct Cli {
  const char *command, *data, *test, *save, *load, *vocab_path, *prompt;
  const char *alpha_text, *dump, *dump_file, *out;
  const char *metrics;      /* train --metrics FILE */
  const char *text, *html;  /* attention --text T --html FILE */
  const char *layer, *head, *outputs; /* attention --layer L --head H --output A,B */
  const char *tokenizer;    /* --tokenizer FILE (tokenizer.h) */
  const char *init;         /* --init FILE: another tool's checkpoint (pretrained.h) */
  const char *pretrained;   /* --pretrained NAME: the block that reads it */
  const char *inputs;       /* forward --inputs IN.safetensors */
  const char *temperature_text, *top_p_text; /* generate --temperature T --top-p P */
  double temperature, top_p; /* generate: 0 and 1 (greedy) unless given; see main */
  uint64_t top_k;           /* generate --top-k K; 0: all */
  int recompute, timing;    /* generate --recompute, --timing */
  uint64_t steps, every, keep, seed, log_every, threads, length, show;
  uint64_t beam;            /* 0: greedy decoding (no --beam) */
  uint64_t zero;            /* train --zero 1 under mpirun: optimizer-state sharding (ZeRO-1) */
  uint64_t shard_size;      /* tokenize --shard-size N: tokens per shard (0: one file) */
  uint64_t vocab_size;      /* tokenizer train --vocab-size N */
  double alpha;
  int resume, scores, profile;
  int data_parallel;        /* train --data-parallel: the data-parallel loop in one process too */
  size_t num_paths;         /* average: the checkpoints; tokenizer: train|encode, files */
  const char *paths[MAX_CHECKPOINTS];
} Cli;

typedef struct Task {
  int translation;          /* else characters */
  tfm_vocab vocab;
  tfm_pairs train_pairs, test_pairs;
  tfm_chars chars;
  int sharded;              /* --data (train) or the held-out data (eval) are token shards */
  tfm_shards shards, test_shards;
  size_t rows, src_len, tgt_len, window;
  int64_t model_vocab;      /* classes of the logits */
  uint64_t seed;
  const Cli *cli;
  tfm_pool *pool;
  tfm_graph held_out;       /* train --metrics: the forward graph for test_loss */
  int held_out_open;
  size_t train_rows;        /* training batches' rows when not `rows`: under mpirun the
                             * global batch, rows x ranks (train_dist.c slices it) */
} Task;

/* The task's shapes from the compiled forward graph: translation or a
 * language model, batch rows, lengths, the logits' classes. */
int cli_task_shapes(Task *t);

/* "PROG: MESSAGE" (fmt with one %s) and the hint to run --help; returns 2. */
int cli_usage_error(const char *prog, const char *fmt, const char *arg);
/* "PROG: error: " and tfm_error(); returns 1. */
int cli_fail(const char *prog);

/* Opens graph desc (the forward or the inspect graph) with the params of
 * --load and reads its vocabulary into t; on failure reports it (returning
 * cli_fail's or cli_usage_error's code) and leaves nothing open. */
int cli_open_trained(const char *prog, const Cli *c, Task *t, const tfm_graph_desc *desc,
                     tfm_graph *g);

/* Greedy decoding of the sources in g's src: out [rows, tgt_len] receives
 * the ids (up to <eos>), logprob[r] and length[r] their log-probability and
 * count; row_lp is scratch of model_vocab doubles. */
void cli_greedy_translate(Task *t, tfm_graph *g, tfm_pool *pool, int32_t *out, double *logprob,
                          size_t *length, double *row_lp);

/* attention: the page of the model's attention maps for one text. */
int cli_attention(const char *prog, const Cli *c, tfm_pool *pool);

/* generate: continue --prompt, greedily or sampled (generate_cmd.c). */
int cli_generate(const char *prog, const Cli *c, tfm_pool *pool);
/* tokenize: text to token shards (shard_cmd.c). */
int cli_tokenize(const char *prog, const Cli *c);
/* forward: the forward graph on inputs from a file, its outputs to a file
 * (forward_cmd.c). */
int cli_forward(const char *prog, const Cli *c, tfm_pool *pool);
/* embed: one vector per line of text from an encoder (embed_cmd.c). */
int cli_embed(const char *prog, const Cli *c, tfm_pool *pool);
/* tokenizer train|encode (tokenizer_cmd.c). */
int cli_tokenizer(const char *prog, const Cli *c);
/* Whether spec names token shards (tfm_shards_named); 0 for NULL. */
int cli_shards_named(const char *spec);
/* The vocabulary of shard data spec when it has one (--vocab, else
 * FOLDER/vocab or SHARD.vocab, which tokenize writes): read into t->vocab
 * and checked against the model; *found says whether there was one. */
int cli_shards_vocab(Task *t, const Cli *c, const char *spec, int *found);

#endif
