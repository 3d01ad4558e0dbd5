/* The command line of a compiled model: `main` of every binary tfmc builds.
 * The generated object defines `tfm_model`; everything here is generic and
 * finds the model's buffers by name. The task follows from the inputs: a
 * model with src/tgt_in/tgt_out translates (tab-separated pairs), one with
 * tokens/targets models characters (a text file). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist.h"
#include "gpu.h"
#include "pretrained.h"
#include "train_dist.h"
#include "tokenizer.h"

#include "beam.h"
#include "bleu.h"
#include "profile.h"

/* Character models train on the head of the text and evaluate on its tail. */
static const double HELD_OUT = 0.1;

/* A translation may be this many tokens longer than its source (<eos>
 * included), and never longer than the model's tgt_len. */
enum { MAX_EXTRA_TOKENS = 50 };

static const char usage[] =
    "usage: %s COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  train     train the model (--data, --steps; --save to keep checkpoints)\n"
    "  eval      held-out loss (--test: pairs, or a text whose last 10%% is used) and,\n"
    "            for translation, exact match and corpus BLEU of the translations\n"
    "  translate translate the sources of the pairs in --test (or --data)\n"
    "  generate  continue --prompt by --length characters, or tokens of --tokenizer\n"
    "            FILE (language models; greedy, or sampled with --temperature, --top-k,\n"
    "            --top-p, --seed), one step of the decode graph per token\n"
    "  average   --out FILE CKPT...: the element-wise mean of the parameters of the\n"
    "            checkpoints (same model), written as a checkpoint (state, metadata and\n"
    "            vocabulary of the last one, or the vocabulary of --vocab)\n"
    "  attention --load CKPT --text T --html FILE: the attention maps of every layer\n"
    "            and head for one text (a translation model: a source, translated\n"
    "            greedily, or 'source<TAB>target') as a self-contained HTML page\n"
    "  tokenize  --data TEXT --out FILE_OR_FOLDER [--shard-size N]: the text as token\n"
    "            shards for train/eval --data (language models; each line a document):\n"
    "            the ids of --tokenizer FILE, or of the bytes (the vocabulary: --vocab\n"
    "            FILE, else the text's bytes, as train builds it, written beside them\n"
    "            as FILE.vocab or FOLDER/vocab)\n"
    "  tokenizer train --vocab-size N --out tokenizer.json FILE...: a byte-level BPE\n"
    "            tokenizer (GPT-2's kind) trained on the files, as Hugging Face's\n"
    "            tokenizer.json\n"
    "  tokenizer encode --tokenizer FILE --text T: the ids and tokens of T\n"
    "  forward   (--load CKPT | --init FILE) --inputs IN.safetensors --out OUT.safetensors:\n"
    "            the forward graph once on the inputs of the file (named as 'info'\n"
    "            lists them, same dtype and shape), every output written to OUT\n"
    "  embed     (--load CKPT | --init FILE) --tokenizer FILE --data LINES: one vector\n"
    "            per line of text (the output --output NAME, default 'embedding', of\n"
    "            shape [batch, width]; lines padded with the config's pad id, WordPiece\n"
    "            ones wrapped in [CLS] ... [SEP]) as tab-separated numbers, or with\n"
    "            --out FILE.safetensors as one tensor [lines, width]\n"
    "  info      the model's config and buffers\n"
    "\n"
    "options:\n"
    "  --data FILE        training data: pairs 'source<TAB>target' (translation), text,\n"
    "                     or token shards (language models): a FILE.tokshard, a folder\n"
    "                     of *.tokshard, or a quoted glob pattern; eval --test likewise\n"
    "  --test FILE        held-out pairs for eval and the end of training (translation);\n"
    "                     shards: eval's data, and the held-out loss of train --metrics\n"
    "  --steps N          train until step N (default 1000)\n"
    "  --save FILE        checkpoint file (safetensors), written atomically\n"
    "  --every N          also checkpoint every N steps (default: only at the end)\n"
    "  --keep K           with --every: also keep the last K periodic checkpoints as\n"
    "                     SAVE.stepNNNNNNNN.safetensors (for average; default 0)\n"
    "  --resume           continue from --save when it exists\n"
    "  --zero 1           train under mpirun (a --data-parallel binary): shard the\n"
    "                     optimizer state (ZeRO-1): each rank keeps the moments of,\n"
    "                     and updates, its share of the params, then every rank gets\n"
    "                     the new params; prints the memory saved. Checkpoints are the\n"
    "                     same file (rank 0 gathers the state); --resume takes any\n"
    "                     checkpoint with or without --zero, any number of ranks.\n"
    "                     --zero 0 (default): every rank updates every param\n"
    "  --data-parallel    train through the data-parallel loop even in one process\n"
    "                     (a --data-parallel binary; a --target cuda one then averages\n"
    "                     over a one-GPU NCCL communicator): the check that the loop,\n"
    "                     or NCCL, changes no loss. Under mpirun it is always on\n"
    "  --load FILE        checkpoint to evaluate, translate or generate with (train\n"
    "                     refuses it: continue a run with --save FILE --resume)\n"
    "  --init FILE        another tool's checkpoint (a Hugging Face safetensors file,\n"
    "                     f32, bf16 or f64) read through the model's 'pretrained' block:\n"
    "                     train starts from it (fine-tuning; ignored when --resume finds\n"
    "                     --save), eval/generate/translate/attention run it in place of\n"
    "                     --load; params the block does not set keep their initial values\n"
    "  --pretrained NAME  with --init: which pretrained block (default: the only one)\n"
    "  --vocab FILE       vocabulary (default: CHECKPOINT.vocab, written when training)\n"
    "  --seed N           initialisation and data order; generate: the sampling draws\n"
    "                     (default 1)\n"
    "  --threads N        worker threads (default: TFM_THREADS or every CPU)\n"
    "  --log-every N      progress line every N steps (default 50)\n"
    "  --metrics FILE     train: also write FILE.jsonl, one JSON line per progress line\n"
    "                     (step, loss, lr, tokens/s, grad norm, wall time, and the\n"
    "                     held-out loss on the first 16 batches of --test, or of the\n"
    "                     text's held-out tail); tools/report.py draws it\n"
    "  --profile          at the end, print to stderr the time of each kernel (calls,\n"
    "                     total ms, %% of its graph's run time, GFLOP/s, GB/s), per\n"
    "                     graph, slowest first, then the graph's total; on the GPU\n"
    "                     also the launches per step ('1 graph launch (N kernels,\n"
    "                     C copies)': a CUDA graph's kernels are not timed one by one)\n"
    "  --no-cuda-graph    train on the GPU: launch each kernel of the step instead of\n"
    "                     replaying the step as one CUDA graph (for comparison)\n"
    "  --show N           translations to print after eval (default 5)\n"
    "  --beam N           eval/translate: beam search of width N (default: greedy;\n"
    "                     --beam 1 gives the greedy translations); a translation has\n"
    "                     at most source length + 50 tokens, and at most tgt_len\n"
    "  --alpha A          beam search: length penalty ((5 + |Y|) / 6)^A dividing\n"
    "                     log P(Y|X) (default 0: plain log-probability)\n"
    "  --scores           translate: print each translation's log P(Y|X) and score\n"
    "  --dump NAME        eval/translate: after decoding, run the forward graph on\n"
    "                     each translation and save the model output NAME per pair\n"
    "  --dump-file FILE   where --dump writes: safetensors, tensor NAME.I per pair I\n"
    "                     (output shape less the batch axis), metadata src.I/tgt.I\n"
    "  --inputs FILE      forward: a safetensors file holding the model's inputs\n"
    "  --out FILE         average: the checkpoint to write; forward: the outputs' file;\n"
    "                     tokenize: the shard file, or\n"
    "                     the folder of shards (with --shard-size, or when it exists)\n"
    "  --shard-size N     tokenize: at most N tokens per shard, written as\n"
    "                     FOLDER/00000.tokshard, 00001.tokshard, ... (default: one file)\n"
    "  --tokenizer FILE   tokenize, generate, tokenizer encode: a Hugging Face tokenizer.json\n"
    "                     (byte-level BPE or WordPiece), GPT-2's vocab.json + merges.txt,\n"
    "                     BERT's vocab.txt or a SentencePiece .model (docs/data.md)\n"
    "  --vocab-size N     tokenizer train: tokens of the trained vocabulary\n"
    "  --text T           attention: the text (character models: at most the model's\n"
    "                     window; translation: a source, or 'source<TAB>target')\n"
    "  --html FILE        attention: the page to write\n"
    "  --output A,B       embed: the output that is the vector (default 'embedding');\n"
    "                     attention: the outputs to show (model outputs or probes, as\n"
    "                     'info' lists them; default: every one shaped like attention\n"
    "                     weights, [batch, (heads,) queries, keys] with rows summing to 1)\n"
    "  --layer L          attention: the map the page opens on: its name, or a number L\n"
    "                     for the first map with '.L.' in its name (default: the first)\n"
    "  --head H           attention: the head it opens on, from 0, or 'mean' (default)\n"
    "  --prompt TEXT      generate: the text to continue\n"
    "  --length N         generate: characters, or tokens with --tokenizer, to add\n"
    "                     (default 200)\n"    "  --temperature T    generate: sample from softmax(logits / T); 0 is greedy (the\n"
    "                     default, or 1 when --top-k or --top-p is given)\n"
    "  --top-k K          generate: sample among the K most likely tokens (1: greedy)\n"
    "  --top-p P          generate: then among the fewest most likely tokens whose\n"
    "                     probability reaches P, in (0, 1] (nucleus sampling)\n"
    "                     (--seed N: the draws; the same seed, the same text)\n"
    "  --recompute        generate: run the forward graph on the whole window for\n"
    "                     every token instead of the decode graph's key/value cache\n"
    "  --timing           generate: print to stderr the time per new token\n"
    "  -h, --help         this help\n"
    "environment: TFM_THREADS (as --threads); TFM_CPU_KERNELS=amx|avx512bf16|avx2 forces\n"
    "  the kernels of bf16 products (default: AMX tiles where the CPU has them, else\n"
    "  f32 arithmetic on widened values; one the CPU lacks is an error);\n"
    "  TFM_CPU_VARIANT=avx2|avx512|amx forces the code a binary built with tfmc build\n"
    "  --cpu generic-dispatch runs (default: the best this machine runs; 'info' names it)\n";

int cli_usage_error(const char *prog, const char *fmt, const char *arg) {
  fprintf(stderr, "%s: ", prog);
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nrun '%s --help' for usage\n", prog);
  return 2;
}

int cli_fail(const char *prog) {
  fprintf(stderr, "%s: error: %s\n", prog, tfm_error());
  return 1;
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || !*s || s[0] == '-') return 0;
  *out = v;
  return 1;
}

/* --- the task ----------------------------------------------------------------- */

static const tfm_buffer_desc *find_desc(const tfm_graph_desc *g, const char *name, tfm_role role) {
  for (int32_t i = 0; g && i < g->num_buffers; i++)
    if (g->buffers[i].role == (int32_t)role && !strcmp(g->buffers[i].name, name)) return &g->buffers[i];
  return NULL;
}

/* Shapes from the compiled forward graph: batch rows, lengths, classes. */
int cli_task_shapes(Task *t) {
  const tfm_graph_desc *f = tfm_model.forward;
  const tfm_buffer_desc *src = find_desc(f, "src", TFM_ROLE_INPUT);
  const tfm_buffer_desc *tgt = find_desc(f, "tgt_in", TFM_ROLE_INPUT);
  const tfm_buffer_desc *tok = find_desc(f, "tokens", TFM_ROLE_INPUT);
  const tfm_buffer_desc *logits = find_desc(f, "logits", TFM_ROLE_OUTPUT);
  if (!(src && tgt && src->rank == 2 && tgt->rank == 2) && !(tok && tok->rank == 2))
    return tfm_fail("model %s has neither src/tgt_in/tgt_out inputs (translation) nor "
                    "tokens/targets (language model), the two tasks this binary runs",
                    tfm_model.name);
  if (!logits || logits->rank < 1)
    return tfm_fail("model %s has no output 'logits' to decode from", tfm_model.name);
  t->model_vocab = logits->shape[logits->rank - 1];
  if (src && tgt && src->rank == 2 && tgt->rank == 2) {
    t->translation = 1;
    t->rows = (size_t)src->shape[0];
    t->src_len = (size_t)src->shape[1];
    t->tgt_len = (size_t)tgt->shape[1];
    return TFM_OK;
  }
  t->rows = (size_t)tok->shape[0]; /* tokens [B, T], checked above */
  t->window = (size_t)tok->shape[1];
  return TFM_OK;
}

static const char *vocab_file(const Cli *c, const char *checkpoint, char *buf, size_t size) {
  if (c->vocab_path) return c->vocab_path;
  if (!checkpoint) return NULL;
  snprintf(buf, size, "%s.vocab", checkpoint);
  return buf;
}

static int check_vocab_fits(const Task *t) {
  if ((int64_t)t->vocab.count > t->model_vocab)
    return tfm_fail("the data has %zu tokens (specials included) but the model's vocabulary is "
                    "%" PRId64 "; rebuild with -D vocab=%zu", t->vocab.count, t->model_vocab,
                    t->vocab.count);
  return TFM_OK;
}

/* Training: build (or read, when resuming) the vocabulary and load the data. */
static int task_open_shards_train(Task *t, const Cli *c);

static int task_open_train(Task *t, const Cli *c) {
  char buf[4096];
  if (cli_shards_named(c->data))
    return t->translation ? tfm_fail("%s: token shards are data for language models "
                                     "(tokens/targets)", c->data)
                          : task_open_shards_train(t, c);
  const char *vpath = vocab_file(c, c->save, buf, sizeof buf);
  FILE *existing = vpath && c->resume ? fopen(vpath, "r") : NULL;
  int status;
  if (existing) {
    fclose(existing);
    status = tfm_vocab_read(&t->vocab, vpath);
  } else {
    status = t->translation ? tfm_vocab_build_pairs(&t->vocab, c->data, (size_t)t->model_vocab)
                            : tfm_vocab_build_bytes(&t->vocab, c->data);
    if (!status && vpath) status = tfm_vocab_write(&t->vocab, vpath);
  }
  if (status || check_vocab_fits(t)) return TFM_FAILED;
  if (t->translation) {
    if (tfm_pairs_load(&t->train_pairs, c->data, &t->vocab, t->src_len, t->tgt_len)) return TFM_FAILED;
    if (t->train_pairs.skipped_too_long)
      fprintf(stderr, "warning: %zu pairs of %s are longer than the model's lengths and were "
              "skipped\n", t->train_pairs.skipped_too_long, c->data);
    if (c->test && tfm_pairs_load(&t->test_pairs, c->test, &t->vocab, t->src_len, t->tgt_len))
      return TFM_FAILED;
    return TFM_OK;
  }
  return tfm_chars_load(&t->chars, c->data, &t->vocab, t->window, HELD_OUT);
}

/* Token shards (language models): the vocabulary, when the shards have
 * one, goes beside the checkpoint as a text's does; --test shards are the
 * held-out data of --metrics. */
static int task_open_shards_train(Task *t, const Cli *c) {
  char saved[4096];
  int found = 0;
  t->sharded = 1;
  if (cli_shards_vocab(t, c, c->data, &found)) return TFM_FAILED;
  snprintf(saved, sizeof saved, "%s.vocab", c->save ? c->save : "");
  if (found && c->save && !(c->vocab_path && !strcmp(c->vocab_path, saved)) &&
      tfm_vocab_write(&t->vocab, saved))
    return TFM_FAILED;
  if (tfm_shards_open(&t->shards, c->data, t->window, t->model_vocab)) return TFM_FAILED;
  return c->test && tfm_shards_open(&t->test_shards, c->test, t->window, t->model_vocab);
}

static int batch_into(void *ctx, tfm_graph *g, uint64_t step, uint64_t *tokens) {
  Task *t = ctx;
  size_t rows = t->train_rows ? t->train_rows : t->rows;
  if (t->translation) {
    tfm_pair_batch b = {rows, tfm_graph_buffer(g, "src", TFM_ROLE_INPUT, NULL),
                        tfm_graph_buffer(g, "tgt_in", TFM_ROLE_INPUT, NULL),
                        tfm_graph_buffer(g, "tgt_out", TFM_ROLE_INPUT, NULL)};
    *tokens = rows * (t->src_len + t->tgt_len);
    return tfm_pairs_train_batch(&t->train_pairs, t->seed, step - 1, &b);
  }
  *tokens = rows * t->window;
  if (t->sharded)
    return tfm_shards_train_batch(&t->shards, t->seed, step - 1, rows,
                                  tfm_graph_buffer(g, "tokens", TFM_ROLE_INPUT, NULL),
                                  tfm_graph_buffer(g, "targets", TFM_ROLE_INPUT, NULL));
  return tfm_chars_train_batch(&t->chars, t->seed, step - 1, rows,
                               tfm_graph_buffer(g, "tokens", TFM_ROLE_INPUT, NULL),
                               tfm_graph_buffer(g, "targets", TFM_ROLE_INPUT, NULL));
}

/* --- decoding ------------------------------------------------------------------ */

static int32_t argmax_row(const float *logits, int64_t classes) {
  int32_t best = 0;
  for (int64_t k = 1; k < classes; k++)
    if (logits[k] > logits[best]) best = (int32_t)k;
  return best;
}

/* The longest translation of a source (see MAX_EXTRA_TOKENS). */
static size_t max_output_length(const Task *t, const int32_t *src_row) {
  size_t n = 0;
  while (n < t->src_len && src_row[n] != TFM_PAD) n++;
  return n + MAX_EXTRA_TOKENS < t->tgt_len ? n + MAX_EXTRA_TOKENS : t->tgt_len;
}

/* Greedy decoding of one batch (cli.h): tgt_in starts as <bos>, and each run
 * of the graph fixes one more position. */
void cli_greedy_translate(Task *t, tfm_graph *fwd, tfm_pool *pool, int32_t *out,
                          double *logprob, size_t *length, double *row_lp) {
  int32_t *src = tfm_graph_buffer(fwd, "src", TFM_ROLE_INPUT, NULL);
  int32_t *tgt_in = tfm_graph_buffer(fwd, "tgt_in", TFM_ROLE_INPUT, NULL);
  int32_t *tgt_out = tfm_graph_buffer(fwd, "tgt_out", TFM_ROLE_INPUT, NULL);
  const float *logits = tfm_graph_buffer(fwd, "logits", TFM_ROLE_OUTPUT, NULL);
  size_t T = t->tgt_len, V = (size_t)t->model_vocab;
  memset(tgt_in, 0, sizeof(int32_t) * t->rows * T);
  if (tgt_out) memset(tgt_out, 0, sizeof(int32_t) * t->rows * T);
  memset(out, 0, sizeof(int32_t) * t->rows * T);
  for (size_t r = 0; r < t->rows; r++) {
    tgt_in[r * T] = TFM_BOS;
    logprob[r] = 0;
    length[r] = 0;
  }
  for (size_t pos = 0; pos < T; pos++) {
    tfm_graph_run(fwd, pool);
    int all_done = 1;
    for (size_t r = 0; r < t->rows; r++) {
      if (length[r] < pos || (pos > 0 && out[r * T + pos - 1] == TFM_EOS) ||
          pos >= max_output_length(t, src + r * t->src_len))
        continue;
      const float *row = logits + (r * T + pos) * V;
      int32_t id = argmax_row(row, t->model_vocab);
      tfm_log_softmax(row, V, row_lp);
      logprob[r] += row_lp[id];
      out[r * T + pos] = id;
      length[r] = pos + 1;
      if (pos + 1 < T) tgt_in[r * T + pos + 1] = id;
      if (id != TFM_EOS) all_done = 0;
    }
    if (all_done) break;
  }
}

/* Beam search's model: the forward graph, up to `rows` hypotheses per run. */
typedef struct BeamModel {
  Task *t;
  tfm_graph *fwd;
  tfm_pool *pool;
  const int32_t *sources;   /* [rows, S]: the batch being translated */
} BeamModel;

static int beam_next(void *ctx, size_t count, const size_t *inputs, const int32_t *prefixes,
                     size_t length, double *logprobs) {
  BeamModel *m = ctx;
  Task *t = m->t;
  size_t S = t->src_len, T = t->tgt_len, V = (size_t)t->model_vocab;
  int32_t *src = tfm_graph_buffer(m->fwd, "src", TFM_ROLE_INPUT, NULL);
  int32_t *tgt_in = tfm_graph_buffer(m->fwd, "tgt_in", TFM_ROLE_INPUT, NULL);
  int32_t *tgt_out = tfm_graph_buffer(m->fwd, "tgt_out", TFM_ROLE_INPUT, NULL);
  const float *logits = tfm_graph_buffer(m->fwd, "logits", TFM_ROLE_OUTPUT, NULL);
  for (size_t first = 0; first < count; first += t->rows) {
    size_t n = count - first < t->rows ? count - first : t->rows;
    memset(src, 0, sizeof(int32_t) * t->rows * S);
    memset(tgt_in, 0, sizeof(int32_t) * t->rows * T);
    if (tgt_out) memset(tgt_out, 0, sizeof(int32_t) * t->rows * T);
    for (size_t r = 0; r < n; r++) {
      memcpy(src + r * S, m->sources + inputs[first + r] * S, sizeof(int32_t) * S);
      tgt_in[r * T] = TFM_BOS;
      memcpy(tgt_in + r * T + 1, prefixes + (first + r) * length, sizeof(int32_t) * length);
    }
    tfm_graph_run(m->fwd, m->pool);
    for (size_t r = 0; r < n; r++)
      tfm_log_softmax(logits + (r * T + length) * V, V, logprobs + (first + r) * V);
  }
  return TFM_OK;
}

/* Beam search over the pairs of one batch (sources in the graph's src). */
static int beam_translate(Task *t, tfm_graph *fwd, tfm_pool *pool, size_t filled, int32_t *out,
                          double *logprob, double *score, size_t *length) {
  size_t S = t->src_len, T = t->tgt_len;
  int32_t *src = tfm_graph_buffer(fwd, "src", TFM_ROLE_INPUT, NULL);
  int32_t *sources = malloc(sizeof(int32_t) * t->rows * S);
  size_t *max_length = malloc(sizeof(size_t) * t->rows);
  tfm_beam_result *results = malloc(sizeof(tfm_beam_result) * t->rows);
  int status = TFM_OK;
  if (!sources || !max_length || !results) status = tfm_fail("out of memory");
  if (!status) {
    memcpy(sources, src, sizeof(int32_t) * t->rows * S);
    for (size_t r = 0; r < filled; r++) max_length[r] = max_output_length(t, sources + r * S);
    tfm_beam_options o = {.beam = (size_t)t->cli->beam, .vocab = (size_t)t->model_vocab,
                          .alpha = t->cli->alpha, .eos = TFM_EOS};
    BeamModel m = {t, fwd, pool, sources};
    memset(out, 0, sizeof(int32_t) * t->rows * T);
    status = tfm_beam_search(&o, filled, max_length, beam_next, &m, out, T, results);
    for (size_t r = 0; !status && r < filled; r++) {
      logprob[r] = results[r].logprob;
      score[r] = results[r].score;
      length[r] = results[r].length;
    }
    memcpy(src, sources, sizeof(int32_t) * t->rows * S); /* as the caller left it */
  }
  free(sources);
  free(max_length);
  free(results);
  return status;
}

static int ids_equal_until_eos(const int32_t *a, const int32_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (a[i] != b[i]) return 0;
    if (a[i] == TFM_EOS) return 1;
  }
  return 1;
}

/* --dump: the named output of the forward graph run on each translation. */
typedef struct Dump {
  const char *name;
  const tfm_buffer_desc *desc;
  tfm_tensor *tensors;
  size_t count, capacity;
  tfm_meta meta;
} Dump;

static int dump_open(Dump *d, const Task *t, const Cli *c) {
  memset(d, 0, sizeof *d);
  if (!c->dump) return c->dump_file ? tfm_fail("--dump-file needs --dump NAME") : TFM_OK;
  if (!c->dump_file) return tfm_fail("--dump %s needs --dump-file FILE", c->dump);
  d->name = c->dump;
  d->desc = find_desc(tfm_model.forward, c->dump, TFM_ROLE_OUTPUT);
  if (!d->desc) {
    char names[1024] = "";
    for (int32_t i = 0; i < tfm_model.forward->num_buffers; i++)
      if (tfm_model.forward->buffers[i].role == TFM_ROLE_OUTPUT)
        snprintf(names + strlen(names), sizeof names - strlen(names), " %s",
                 tfm_model.forward->buffers[i].name);
    return tfm_fail("model %s has no output '%s' to dump (its outputs:%s; a model shows a "
                    "tensor by declaring 'output NAME = ...')", tfm_model.name, c->dump, names);
  }
  if (d->desc->rank < 1 || (size_t)d->desc->shape[0] != t->rows)
    return tfm_fail("output '%s' has no batch axis of %zu rows to dump per pair", c->dump, t->rows);
  return tfm_meta_set(&d->meta, "tfm.dump", c->dump);
}

/* Runs the forward graph with tgt_in = <bos> translation and keeps row r's
 * slice of the output for each of the `filled` pairs (numbered from first). */
static int dump_batch(Dump *d, Task *t, tfm_graph *fwd, tfm_pool *pool, const int32_t *hyp,
                      size_t filled, size_t first) {
  if (!d->name) return TFM_OK;
  size_t T = t->tgt_len;
  int32_t *src = tfm_graph_buffer(fwd, "src", TFM_ROLE_INPUT, NULL);
  int32_t *tgt_in = tfm_graph_buffer(fwd, "tgt_in", TFM_ROLE_INPUT, NULL);
  int32_t *tgt_out = tfm_graph_buffer(fwd, "tgt_out", TFM_ROLE_INPUT, NULL);
  memset(tgt_in, 0, sizeof(int32_t) * t->rows * T);
  for (size_t r = 0; r < t->rows; r++) {
    tgt_in[r * T] = TFM_BOS;
    memcpy(tgt_in + r * T + 1, hyp + r * T, sizeof(int32_t) * (T - 1));
  }
  if (tgt_out) memcpy(tgt_out, hyp, sizeof(int32_t) * t->rows * T);
  tfm_graph_run(fwd, pool);
  const uint8_t *data = tfm_graph_buffer(fwd, d->name, TFM_ROLE_OUTPUT, NULL);
  size_t row_bytes = (size_t)tfm_buffer_bytes(d->desc) / t->rows;
  if (d->count + filled > d->capacity) {
    size_t cap = (d->count + filled) * 2;
    tfm_tensor *grown = realloc(d->tensors, sizeof *grown * cap);
    if (!grown) return tfm_fail("out of memory");
    d->tensors = grown, d->capacity = cap;
  }
  for (size_t r = 0; r < filled; r++) {
    char name[512], key[64], text[4096];
    tfm_tensor *x = &d->tensors[d->count];
    memset(x, 0, sizeof *x);
    snprintf(name, sizeof name, "%s.%zu", d->name, first + r);
    char *copy = malloc(strlen(name) + 1);
    if (copy) strcpy(copy, name);
    x->name = copy;
    x->data = malloc(row_bytes ? row_bytes : 1);
    d->count++;
    if (!x->name || !x->data) return tfm_fail("out of memory");
    x->dtype = (tfm_dtype)d->desc->dtype;
    x->rank = (size_t)d->desc->rank - 1;
    for (size_t k = 0; k < x->rank; k++) x->shape[k] = (size_t)d->desc->shape[k + 1];
    memcpy(x->data, data + r * row_bytes, row_bytes);
    snprintf(key, sizeof key, "src.%zu", first + r);
    tfm_vocab_decode(&t->vocab, src + r * t->src_len, t->src_len, " ", text, sizeof text, NULL);
    if (tfm_meta_set(&d->meta, key, text)) return TFM_FAILED;
    snprintf(key, sizeof key, "tgt.%zu", first + r);
    tfm_vocab_decode(&t->vocab, hyp + r * T, T, " ", text, sizeof text, NULL);
    if (tfm_meta_set(&d->meta, key, text)) return TFM_FAILED;
  }
  return TFM_OK;
}

static int dump_close(Dump *d, const char *path, int status) {
  if (d->name && !status) {
    status = tfm_ckpt_save(path, d->tensors, d->count, &d->meta);
    if (!status) printf("dumped '%s' of %zu pairs to %s\n", d->name, d->count, path);
  }
  for (size_t i = 0; i < d->count; i++) {
    free((char *)d->tensors[i].name);
    free(d->tensors[i].data);
  }
  free(d->tensors);
  tfm_meta_clear(&d->meta);
  return status;
}

/* Translates the test pairs with the decoder --beam selects; prints `show`
 * of them (with log-probabilities under --scores), exact match and BLEU. */
static int evaluate_translation(Task *t, tfm_graph *fwd, tfm_pool *pool, size_t show) {
  const tfm_pairs *p = &t->test_pairs;
  const Cli *c = t->cli;
  if (!p->count) return tfm_fail("no test pairs to evaluate (give --test FILE)");
  size_t rows = t->rows, T = t->tgt_len, V = (size_t)t->model_vocab;
  size_t correct = 0, total = 0, shown = 0;
  int32_t *src = tfm_graph_buffer(fwd, "src", TFM_ROLE_INPUT, NULL);
  int32_t *ref = malloc(sizeof(int32_t) * rows * T), *hyp = malloc(sizeof(int32_t) * rows * T);
  int32_t *ref_in = malloc(sizeof(int32_t) * rows * T);
  double *logprob = malloc(sizeof(double) * rows), *score = malloc(sizeof(double) * rows);
  double *row_lp = malloc(sizeof(double) * V);
  size_t *length = malloc(sizeof(size_t) * rows);
  tfm_bleu_stats bleu = {0};
  Dump dump;
  int status = dump_open(&dump, t, c);
  if (!status && (!ref || !hyp || !ref_in || !logprob || !score || !row_lp || !length))
    status = tfm_fail("out of memory");
  size_t batches = tfm_pairs_batch_count(p, rows);
  for (size_t b = 0; !status && b < batches; b++) {
    size_t filled;
    tfm_pair_batch batch = {rows, src, ref_in, ref};
    if ((status = tfm_pairs_eval_batch(p, b, &batch, &filled))) break;
    if (c->beam) {
      status = beam_translate(t, fwd, pool, filled, hyp, logprob, score, length);
    } else {
      cli_greedy_translate(t, fwd, pool, hyp, logprob, length, row_lp);
      for (size_t r = 0; r < filled; r++) score[r] = logprob[r] / tfm_length_penalty(length[r], c->alpha);
    }
    for (size_t r = 0; !status && r < filled; r++) {
      char s[4096], h[4096], w[4096];
      int ok = ids_equal_until_eos(hyp + r * T, ref + r * T, T);
      correct += ok;
      total++;
      tfm_vocab_decode(&t->vocab, hyp + r * T, T, " ", h, sizeof h, NULL);
      tfm_vocab_decode(&t->vocab, ref + r * T, T, " ", w, sizeof w, NULL);
      status = tfm_bleu_add(&bleu, h, w);
      if (shown < show) {
        tfm_vocab_decode(&t->vocab, src + r * t->src_len, t->src_len, " ", s, sizeof s, NULL);
        printf("  %s  ->  %s", s, h);
        if (!ok) printf("   (expected: %s)", w);
        if (c->scores) printf("   [logp %.6f, score %.6f]", logprob[r], score[r]);
        printf("\n");
        shown++;
      }
    }
    if (!status) status = dump_batch(&dump, t, fwd, pool, hyp, filled, b * rows);
  }
  status = dump_close(&dump, c->dump_file, status);
  if (!status) {
    char line[256];
    tfm_bleu_score s = tfm_bleu_compute(&bleu);
    tfm_bleu_format(&s, line, sizeof line);
    printf("exact match: %zu / %zu = %.2f%%\n", correct, total, 100.0 * (double)correct / (double)total);
    printf("%s\n", line);
  }
  free(ref);
  free(hyp);
  free(ref_in);
  free(logprob);
  free(score);
  free(row_lp);
  free(length);
  return status;
}

/* --- commands ------------------------------------------------------------------ */

/* The forward graph's mean loss over the held-out batches, at most
 * max_batches of them (0: all; teacher forcing; padding rows and positions
 * are ignored by the loss itself). */
static int held_out_loss(Task *t, tfm_graph *fwd, tfm_pool *pool, size_t max_batches, double *mean) {
  float *loss = tfm_graph_buffer(fwd, "loss", TFM_ROLE_OUTPUT, NULL);
  if (!loss) return tfm_fail("model %s has no output 'loss'", tfm_model.name);
  size_t batches = t->translation ? tfm_pairs_batch_count(&t->test_pairs, t->rows)
                   : t->sharded   ? tfm_shards_eval_batch_count(&t->test_shards, t->rows)
                                  : tfm_chars_eval_batch_count(&t->chars, t->rows);
  if (!batches) return tfm_fail("no held-out data to evaluate");
  if (max_batches && batches > max_batches) batches = max_batches;
  double sum = 0;
  for (size_t b = 0; b < batches; b++) {
    size_t filled;
    int status;
    if (t->translation) {
      tfm_pair_batch batch = {t->rows, tfm_graph_buffer(fwd, "src", TFM_ROLE_INPUT, NULL),
                              tfm_graph_buffer(fwd, "tgt_in", TFM_ROLE_INPUT, NULL),
                              tfm_graph_buffer(fwd, "tgt_out", TFM_ROLE_INPUT, NULL)};
      status = tfm_pairs_eval_batch(&t->test_pairs, b, &batch, &filled);
    } else if (t->sharded) {
      status = tfm_shards_eval_batch(&t->test_shards, b, t->rows,
                                     tfm_graph_buffer(fwd, "tokens", TFM_ROLE_INPUT, NULL),
                                     tfm_graph_buffer(fwd, "targets", TFM_ROLE_INPUT, NULL), &filled);
    } else {
      status = tfm_chars_eval_batch(&t->chars, b, t->rows,
                                    tfm_graph_buffer(fwd, "tokens", TFM_ROLE_INPUT, NULL),
                                    tfm_graph_buffer(fwd, "targets", TFM_ROLE_INPUT, NULL), &filled);
    }
    if (status) return TFM_FAILED;
    tfm_graph_run(fwd, pool);
    sum += *loss;
  }
  *mean = sum / (double)batches;
  return TFM_OK;
}

/* The held-out batches train --metrics evaluates at each progress line. */
enum { METRICS_HELD_OUT_BATCHES = 16 };

/* train --metrics: test_loss of the params being trained, on the --test
 * pairs or the text's held-out tail. */
static int held_out_during_training(void *ctx, tfm_graph *trained, double *loss) {
  Task *t = ctx;
  *loss = NAN;
  if (t->translation ? !t->test_pairs.count
      : t->sharded  ? !tfm_shards_eval_batch_count(&t->test_shards, t->rows)
                    : !tfm_chars_eval_batch_count(&t->chars, t->rows))
    return TFM_OK;
  if (!t->held_out_open) {
    if (tfm_graph_open(&t->held_out, tfm_model.forward)) return TFM_FAILED;
    t->held_out_open = 1;
  }
  return tfm_graph_copy_params(&t->held_out, trained) ||
         held_out_loss(t, &t->held_out, t->pool, METRICS_HELD_OUT_BATCHES, loss);
}

static int evaluate_after_training(void *ctx, tfm_graph *trained) {
  Task *t = ctx;
  if (!t->translation || !t->test_pairs.count || !tfm_model.forward) return TFM_OK;
  tfm_graph fwd;
  if (tfm_graph_open(&fwd, tfm_model.forward)) return TFM_FAILED;
  int status = tfm_graph_copy_params(&fwd, trained);
  if (!status) {
    printf("held-out translations (greedy):\n");
    status = evaluate_translation(t, &fwd, NULL, (size_t)t->cli->show);
  }
  tfm_graph_close(&fwd);
  return status;
}

static int cmd_train(const char *prog, const Cli *c, tfm_pool *pool) {
  if (!c->data) return cli_usage_error(prog, "%s", "train needs --data FILE");
  if (!tfm_model.train)
    return tfm_fail("model %s has no train block; it cannot be trained", tfm_model.name), cli_fail(prog);
  Task t = {.seed = c->seed, .cli = c, .pool = pool};
  const tfm_pretrained_desc *block = NULL;
  if (c->init && tfm_pretrained_find(&tfm_model, c->pretrained, &block)) return cli_fail(prog);
  /* Under mpirun (dist.h) the other ranks read what rank 0 wrote, and write nothing. */
  int ranks = tfm_dist_size(), rank = tfm_dist_rank();
  Cli reader = *c;
  if (rank) reader.save = reader.vocab_path = NULL;
  if (ranks > 1 && rank && tfm_dist_barrier("the data's opening")) return cli_fail(prog);
  if (cli_task_shapes(&t) || task_open_train(&t, &reader)) return cli_fail(prog);
  if (ranks > 1 && !rank && tfm_dist_barrier("the data's opening")) return cli_fail(prog);
  tfm_train_options o = {.model = &tfm_model, .steps = c->steps, .seed = c->seed,
                         .init_path = c->init, .init_block = block,
                         .save_path = c->save, .save_every = c->every, .keep = c->keep,
                         .resume = c->resume,
                         .log_every = c->log_every, .log = stdout, .pool = pool,
                         .next_batch = batch_into, .on_done = evaluate_after_training,
                         .metrics_path = c->metrics, .threads = c->threads,
                         .held_out = held_out_during_training, .batch_ctx = &t};
  tfm_train_result r;
  tfm_dist_train *dist = NULL;
  t.train_rows = ranks > 1 ? t.rows * (size_t)ranks : 0;
  if (c->zero && ranks == 1)
    fprintf(stderr, "%s: --zero 1: a single process has no optimizer state to shard; ignored\n",
            prog);
  int status = (ranks > 1 || c->data_parallel) && tfm_dist_train_open(&dist, &o, ranks > 1 && c->zero);
  o.engine = dist ? tfm_dist_train_engine(dist) : NULL;
  if (!status) status = tfm_train(&o, &r);
  if (!status && !rank) tfm_dist_train_report(dist, stdout);
  tfm_dist_train_close(dist);
  if (t.held_out_open) tfm_graph_close(&t.held_out);
  tfm_pairs_free(&t.train_pairs);
  tfm_pairs_free(&t.test_pairs);
  tfm_chars_free(&t.chars);
  tfm_shards_close(&t.shards);
  tfm_shards_close(&t.test_shards);
  tfm_vocab_free(&t.vocab);
  return status ? cli_fail(prog) : 0;
}

/* eval / translate / generate / attention: graph `desc` (forward or inspect)
 * with a checkpoint's params. */
/* --init FILE: the init graph's params, then those the pretrained block
 * reads from FILE; the vocabulary only with --vocab. */
static int open_pretrained(const char *prog, const Cli *c, Task *t, const tfm_graph_desc *desc,
                           tfm_graph *g) {
  const tfm_pretrained_desc *block;
  if (tfm_pretrained_find(&tfm_model, c->pretrained, &block) || cli_task_shapes(t) ||
      (c->vocab_path && (tfm_vocab_read(&t->vocab, c->vocab_path) || check_vocab_fits(t))) ||
      tfm_graph_open(g, desc))
    return cli_fail(prog);
  if (tfm_initialise(g, &tfm_model, c->seed, t->pool) ||
      tfm_init_pretrained(g, block, c->init, t->pool, stderr)) {
    tfm_graph_close(g);
    return cli_fail(prog);
  }
  return 0;
}

int cli_open_trained(const char *prog, const Cli *c, Task *t, const tfm_graph_desc *desc,
                     tfm_graph *g) {
  char buf[4096];
  if (c->load && c->init)
    return cli_usage_error(prog, "%s", "give --load CHECKPOINT (tfm's) or --init FILE (another "
                                       "tool's), not both");
  if (!desc) return tfm_fail("model %s has no forward graph", tfm_model.name), cli_fail(prog);
  if (c->init) return open_pretrained(prog, c, t, desc, g);
  if (!c->load)
    return cli_usage_error(prog, "%s", "this command needs --load CHECKPOINT (or --init FILE)");
  /* Token shards need no vocabulary: theirs, if any, is checked at open. */
  const char *vpath = vocab_file(c, c->load, buf, sizeof buf);
  FILE *vocab = t->sharded && !c->vocab_path ? fopen(vpath, "r") : NULL;
  if (vocab) fclose(vocab);
  int need_vocab = !t->sharded || c->vocab_path || vocab;
  if (cli_task_shapes(t) || (need_vocab && (tfm_vocab_read(&t->vocab, vpath) || check_vocab_fits(t))) ||
      tfm_graph_open(g, desc))
    return cli_fail(prog);
  /* The checkpoint holds the train graph's params and optimizer state. */
  tfm_graph train;
  int status = !tfm_model.train ? tfm_fail("model %s has no train graph", tfm_model.name)
                                : tfm_graph_open(&train, tfm_model.train);
  if (!status) {
    status = tfm_graph_load(&train, c->load, NULL) || tfm_graph_copy_params(g, &train);
    tfm_graph_close(&train);
  }
  if (status) tfm_graph_close(g);
  return status ? cli_fail(prog) : 0;
}

/* eval: held-out loss, and for translation exact match (showing --show
 * examples); translate: every translation of the pairs. */
static int cmd_eval_or_translate(const char *prog, const Cli *c, tfm_pool *pool) {
  Task t = {.cli = c, .pool = pool,
            .sharded = !strcmp(c->command, "eval") && cli_shards_named(c->test ? c->test : c->data)};
  tfm_graph fwd;
  int status = cli_open_trained(prog, c, &t, tfm_model.forward, &fwd);
  if (status) return status;
  int translate = !strcmp(c->command, "translate");
  const char *file = c->test ? c->test : c->data;
  if (!file) return cli_usage_error(prog, "%s", "give the held-out data with --test FILE");
  if (translate && !t.translation)
    return tfm_fail("translate is for translation models; use generate"), cli_fail(prog);
  if (!t.translation && (c->beam || c->scores || c->dump))
    return tfm_fail("--beam, --scores and --dump are for translation models"), cli_fail(prog);
  if (t.sharded && t.translation)
    return tfm_fail("%s: token shards are data for language models (tokens/targets)", file),
           cli_fail(prog);
  status = t.translation ? tfm_pairs_load(&t.test_pairs, file, &t.vocab, t.src_len, t.tgt_len)
           : t.sharded   ? tfm_shards_open(&t.test_shards, file, t.window, t.model_vocab)
                         : tfm_chars_load(&t.chars, file, &t.vocab, t.window, HELD_OUT);
  double loss = 0;
  if (!status && !translate && !(status = held_out_loss(&t, &fwd, pool, 0, &loss)))
    printf("held-out loss: %.4f (mean over batches)\n", loss);
  if (!status && t.translation)
    status = evaluate_translation(&t, &fwd, pool, translate ? (uint64_t)-1 : c->show);
  tfm_pairs_free(&t.test_pairs);
  tfm_chars_free(&t.chars);
  tfm_shards_close(&t.test_shards);
  tfm_vocab_free(&t.vocab);
  tfm_graph_close(&fwd);
  return status ? cli_fail(prog) : 0;
}

/* average: the mean of the checkpoints' parameters as a new checkpoint. */
static int cmd_average(const char *prog, const Cli *c) {
  if (!c->out) return cli_usage_error(prog, "%s", "average needs --out FILE");
  if (!c->num_paths) return cli_usage_error(prog, "%s", "average needs the checkpoints to average");
  if (!tfm_model.train) return tfm_fail("model %s has no train graph", tfm_model.name), cli_fail(prog);
  tfm_graph g;
  if (tfm_graph_open(&g, tfm_model.train)) return cli_fail(prog);
  tfm_meta meta = {0};
  char count[32], vocab_in[4096], vocab_out[4096];
  snprintf(count, sizeof count, "%zu", c->num_paths);
  int status = tfm_graph_average(&g, c->paths, c->num_paths, &meta) ||
               tfm_meta_set(&meta, "tfm.averaged", count) || tfm_graph_save(&g, c->out, &meta);
  /* The vocabulary (--vocab, else the one beside the last checkpoint) goes
   * beside the average. */
  if (c->vocab_path) snprintf(vocab_in, sizeof vocab_in, "%s", c->vocab_path);
  else snprintf(vocab_in, sizeof vocab_in, "%s.vocab", c->paths[c->num_paths - 1]);
  snprintf(vocab_out, sizeof vocab_out, "%s.vocab", c->out);
  tfm_vocab vocab = {0};
  FILE *exists = status ? NULL : fopen(vocab_in, "r");
  if (exists) {
    fclose(exists);
    status = tfm_vocab_read(&vocab, vocab_in) || tfm_vocab_write(&vocab, vocab_out);
    tfm_vocab_free(&vocab);
  }
  if (!status) printf("averaged %zu checkpoints into %s\n", c->num_paths, c->out);
  tfm_meta_clear(&meta);
  tfm_graph_close(&g);
  return status ? cli_fail(prog) : 0;
}

static void print_graph(const tfm_graph_desc *g) {
  static const char *const roles[] = {"input", "param", "state", "output"};
  if (!g) return;
  printf("graph %s: %" PRId64 " persistent + %" PRId64 " scratch bytes\n", g->name,
         g->persistent_bytes, g->scratch_bytes);
  for (int32_t i = 0; i < g->num_buffers; i++) {
    const tfm_buffer_desc *b = &g->buffers[i];
    if (b->role == TFM_ROLE_STATE) continue;
    printf("  %-6s %-40s %s[", roles[b->role], b->name, tfm_dtype_name((tfm_dtype)b->dtype));
    for (int k = 0; k < b->rank; k++) printf("%s%" PRId64, k ? ", " : "", b->shape[k]);
    printf("]\n");
  }
}

static int cmd_info(void) {
  printf("model %s (compiled from %s)\nconfig:\n", tfm_model.name, tfm_model.source);
  for (int32_t i = 0; i < tfm_model.num_config; i++)
    printf("  %-16s = %s\n", tfm_model.config_keys[i], tfm_model.config_values[i]);
  if (tfm_model.cpu_dispatch)
    printf("cpu variant: %s (of avx2, avx512, amx; TFM_CPU_VARIANT forces one)\n",
           tfm_cpu_variant_name(tfm_cpu_variant()));
  print_graph(tfm_model.train);
  print_graph(tfm_model.forward);
  print_graph(tfm_model.inspect);
  return 0;
}

int main(int argc, char **argv) {
  const char *prog = argc > 0 ? argv[0] : "model";
  Cli c = {.steps = 1000, .seed = 1, .log_every = 50, .length = 200, .show = 5};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    const char **text = !strcmp(a, "--data") ? &c.data : !strcmp(a, "--test") ? &c.test
                      : !strcmp(a, "--save") ? &c.save : !strcmp(a, "--load") ? &c.load
                      : !strcmp(a, "--vocab") ? &c.vocab_path : !strcmp(a, "--prompt") ? &c.prompt
                      : !strcmp(a, "--alpha") ? &c.alpha_text : !strcmp(a, "--dump") ? &c.dump
                      : !strcmp(a, "--dump-file") ? &c.dump_file : !strcmp(a, "--out") ? &c.out
                      : !strcmp(a, "--metrics") ? &c.metrics : !strcmp(a, "--text") ? &c.text
                      : !strcmp(a, "--html") ? &c.html : !strcmp(a, "--layer") ? &c.layer
                      : !strcmp(a, "--head") ? &c.head : !strcmp(a, "--output") ? &c.outputs
                      : !strcmp(a, "--tokenizer") ? &c.tokenizer
                      : !strcmp(a, "--init") ? &c.init : !strcmp(a, "--pretrained") ? &c.pretrained
                      : !strcmp(a, "--inputs") ? &c.inputs
                      : !strcmp(a, "--temperature") ? &c.temperature_text
                      : !strcmp(a, "--top-p") ? &c.top_p_text
                      : NULL;
    uint64_t *num = !strcmp(a, "--steps") ? &c.steps : !strcmp(a, "--every") ? &c.every
                  : !strcmp(a, "--seed") ? &c.seed : !strcmp(a, "--log-every") ? &c.log_every
                  : !strcmp(a, "--threads") ? &c.threads : !strcmp(a, "--length") ? &c.length
                  : !strcmp(a, "--show") ? &c.show : !strcmp(a, "--beam") ? &c.beam
                  : !strcmp(a, "--keep") ? &c.keep : !strcmp(a, "--shard-size") ? &c.shard_size
                  : !strcmp(a, "--vocab-size") ? &c.vocab_size : !strcmp(a, "--zero") ? &c.zero
                  : !strcmp(a, "--top-k") ? &c.top_k
                  : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      printf(usage, prog);
      return 0;
    } else if (!strcmp(a, "--resume")) {
      c.resume = 1;
    } else if (!strcmp(a, "--data-parallel")) {
      c.data_parallel = 1;
    } else if (!strcmp(a, "--profile")) {
      c.profile = 1;
    } else if (!strcmp(a, "--no-cuda-graph")) {
      tfm_gpu_graphs = 0;
    } else if (!strcmp(a, "--scores")) {
      c.scores = 1;
    } else if (!strcmp(a, "--recompute")) {
      c.recompute = 1;
    } else if (!strcmp(a, "--timing")) {
      c.timing = 1;
    } else if (text || num) {
      if (!next) return cli_usage_error(prog, "%s needs a value", a);
      if (text) *text = next;
      else if (!parse_u64(next, num)) return cli_usage_error(prog, "%s needs a non-negative integer", a);
      i++;
    } else if (a[0] == '-') {
      return cli_usage_error(prog, "unknown option '%s'", a);
    } else if (!c.command) {
      c.command = a;
    } else if ((!strcmp(c.command, "average") || !strcmp(c.command, "tokenizer")) &&
               c.num_paths < MAX_CHECKPOINTS) {
      c.paths[c.num_paths++] = a;
    } else {
      return cli_usage_error(prog, "unexpected argument '%s'", a);
    }
  }
  if (!c.command) return cli_usage_error(prog, "%s", "no command given");
  if (c.log_every == 0) c.log_every = 1;
  if (c.alpha_text) {
    char *end;
    errno = 0;
    c.alpha = strtod(c.alpha_text, &end);
    if (errno || *end || !*c.alpha_text || !(c.alpha >= 0) || c.alpha > 1e6)
      return cli_usage_error(prog, "--alpha needs a number >= 0, not '%s'", c.alpha_text);
  }
  if (c.beam > 1000) return cli_usage_error(prog, "%s", "--beam is at most 1000");
  if (c.zero > 1)
    return cli_usage_error(prog, "%s", "--zero takes 0 or 1 (optimizer-state sharding; stages 2 "
                                       "and 3 are not implemented)");
  /* Sampling: a temperature in [0, 1000]; top-k from 1; top-p in (0, 1].
   * --top-k or --top-p alone sample at temperature 1; nothing: greedy. */
  c.top_p = 1;
  if (c.temperature_text) {
    char *end;
    errno = 0;
    c.temperature = strtod(c.temperature_text, &end);
    if (errno || *end || !*c.temperature_text || !(c.temperature >= 0 && c.temperature <= 1000))
      return cli_usage_error(prog, "--temperature needs a number from 0 (greedy) to 1000, not '%s'",
                             c.temperature_text);
  } else if (c.top_k || c.top_p_text) {
    c.temperature = 1;
  }
  if (c.top_p_text) {
    char *end;
    errno = 0;
    c.top_p = strtod(c.top_p_text, &end);
    if (errno || *end || !*c.top_p_text || !(c.top_p > 0 && c.top_p <= 1))
      return cli_usage_error(prog, "--top-p needs a probability in (0, 1], not '%s'", c.top_p_text);
  }
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--top-k") && c.top_k == 0)
      return cli_usage_error(prog, "%s", "--top-k needs a positive integer (1: greedy)");
  if ((c.temperature_text || c.top_k || c.top_p_text || c.recompute || c.timing) &&
      strcmp(c.command ? c.command : "", "generate"))
    return cli_usage_error(prog, "%s", "--temperature, --top-k, --top-p, --recompute and --timing "
                                       "are for generate");
  if (c.keep && !c.every) return cli_usage_error(prog, "%s", "--keep needs --every N");
  /* train starts from its own --save with --resume; a --load it ignored
   * would train from scratch without a word. */
  if (c.pretrained && !c.init) return cli_usage_error(prog, "%s", "--pretrained goes with --init");
  if (!strcmp(c.command, "train") && c.load)
    return cli_usage_error(prog, "%s", "train does not read --load: to continue a run, give its "
                                   "checkpoint as --save and add --resume");
  /* A dispatching binary says now, not from inside a graph, that it cannot run here. */
  int32_t variant;
  if (tfm_model.cpu_dispatch && tfm_cpu_variant_select(&variant)) return cli_fail(prog);
  if (!strcmp(c.command, "average")) return cmd_average(prog, &c);
  if (!strcmp(c.command, "info")) return cmd_info();
  if (!strcmp(c.command, "tokenize")) return cli_tokenize(prog, &c);
  if (!strcmp(c.command, "tokenizer")) return cli_tokenizer(prog, &c);
  /* bf16 products' kernel family (TFM_CPU_KERNELS), before any kernel runs. */
  if (tfm_cpu_kernels_choose()) return cli_fail(prog);
  tfm_pool *pool = NULL;
  if (tfm_pool_create(&pool, (size_t)c.threads)) return cli_fail(prog);
  if (c.profile) tfm_profile_start();
  int status;
  if (tfm_dist_launched(NULL, NULL) && strcmp(c.command, "train"))
    status = tfm_fail("only train runs as several ranks (mpirun, srun); run %s as one process",
                      c.command), cli_fail(prog);
  else if (!strcmp(c.command, "train"))
    /* MPI only under a launcher: one process never starts it (nor leaks its state). */
    status = tfm_dist_launched(NULL, NULL) && tfm_dist_init() ? cli_fail(prog)
                                                               : cmd_train(prog, &c, pool);
  else if (!strcmp(c.command, "eval") || !strcmp(c.command, "translate"))
    status = cmd_eval_or_translate(prog, &c, pool);
  else if (!strcmp(c.command, "generate")) status = cli_generate(prog, &c, pool);
  else if (!strcmp(c.command, "attention")) status = cli_attention(prog, &c, pool);
  else if (!strcmp(c.command, "forward")) status = cli_forward(prog, &c, pool);
  else if (!strcmp(c.command, "embed")) status = cli_embed(prog, &c, pool);
  else status = cli_usage_error(prog, "unknown command '%s' (train, eval, translate, generate, "
                                      "attention, forward, embed, average, tokenize, tokenizer, info)",
                                      c.command);
  /* Also after a failure: the steps that ran are still worth seeing. */
  if (c.profile) tfm_profile_report(stderr);
  tfm_pool_destroy(pool);
  /* a rank that failed takes the others with it rather than leave them waiting */
  if (status && tfm_dist_size() > 1) tfm_dist_abort(status);
  tfm_dist_finalize();
  return status;
}
