/* The binary's generate command: a language model continues a prompt,
 * one step of the decode graph per token (cli.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "sample.h"
#include "tokenizer.h"

/* generate: the window of the last W ids (W: the model's context, its
 * tokens' time axis) and the graphs that give the next id's logits. With
 * the decode-step graph (tfmc compiles it for a causal language model, see
 * docs/language.md "Decoding") each id runs once, at its position, its keys
 * and values kept in the graph's caches; the forward graph recomputes the
 * whole window for every id (--recompute, a model without a decode graph,
 * and once the text outgrows the context: then the window slides). */
typedef struct Generator {
  Task *t;
  tfm_pool *pool;
  tfm_graph fwd, dec;
  int fwd_open, dec_open;
  int32_t *ids;             /* the window */
  size_t have, window;
  size_t cached;            /* ids[0, cached) are in the decode graph's caches */
  int slid;                 /* the window has slid: the caches no longer match it */
  int64_t classes;          /* ids the generator may choose (the vocabulary) */
  tfm_sampling sampling;
  uint64_t rng;
  /* --timing: the runs before the first new id (the prompt), then those
   * of the later ids, and their times. */
  size_t prompt_steps, steps, calls;
  double prompt_seconds, seconds;
} Generator;

static double seconds_now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An id pushed to a full window drops the oldest (the caches stop matching). */
static void generator_push(Generator *g, int32_t id) {
  if (g->have == g->window) {
    memmove(g->ids, g->ids + 1, sizeof(int32_t) * (g->window - 1));
    g->have--;
    g->slid = 1;
  }
  g->ids[g->have++] = id;
}

/* One run of the decode-step graph: id at position pos in every batch row. */
static const float *decode_step(Generator *g, int32_t id, size_t pos) {
  int32_t *tokens = tfm_graph_buffer(&g->dec, "tokens", TFM_ROLE_INPUT, NULL);
  int32_t *position = tfm_graph_buffer(&g->dec, "pos", TFM_ROLE_INPUT, NULL);
  for (size_t r = 0; r < g->t->rows; r++) tokens[r] = id, position[r] = (int32_t)pos;
  tfm_graph_run(&g->dec, g->pool);
  tfm_graph_update(&g->dec); /* the caches now hold row pos */
  return tfm_graph_buffer(&g->dec, "logits", TFM_ROLE_OUTPUT, NULL);
}

/* The logits after the window's last id (with an empty window: after id 0
 * at position 0, which the first new id then replaces). */
static const float *generator_logits(Generator *g) {
  double start = seconds_now();
  size_t steps = 0;
  const float *row;
  if (g->dec_open && !g->slid) {
    row = NULL;
    if (!g->have) row = decode_step(g, 0, 0), steps++;
    for (; g->cached < g->have; g->cached++, steps++)
      row = decode_step(g, g->ids[g->cached], g->cached);
    if (!row) row = tfm_graph_buffer(&g->dec, "logits", TFM_ROLE_OUTPUT, NULL);
  } else {
    int32_t *tokens = tfm_graph_buffer(&g->fwd, "tokens", TFM_ROLE_INPUT, NULL);
    memset(tokens, 0, sizeof(int32_t) * g->t->rows * g->window);
    memcpy(tokens, g->ids, sizeof(int32_t) * g->have);
    tfm_graph_run(&g->fwd, g->pool);
    steps++;
    const float *logits = tfm_graph_buffer(&g->fwd, "logits", TFM_ROLE_OUTPUT, NULL);
    row = logits + (g->have ? g->have - 1 : 0) * (size_t)g->t->model_vocab;
  }
  double took = seconds_now() - start;
  if (g->calls++) g->steps += steps, g->seconds += took;
  else g->prompt_steps = steps, g->prompt_seconds = took;
  return row;
}

/* The next id (greedy or sampled among the first `classes`), pushed. */
static int generator_next(Generator *g, int32_t *out) {
  if (g->slid && !g->fwd_open) { /* the text outgrew the cache */
    if (tfm_graph_open(&g->fwd, tfm_model.forward) || tfm_graph_copy_params(&g->fwd, &g->dec))
      return TFM_FAILED;
    g->fwd_open = 1;
  }
  int32_t id = tfm_sample(generator_logits(g), (size_t)g->classes, &g->sampling, &g->rng);
  if (id < 0) return tfm_fail("out of memory");
  generator_push(g, id);
  *out = id;
  return TFM_OK;
}

/* The prompt's ids fill the window; a prompt longer than the context is
 * refused (what, e.g. "characters", names its unit). */
static int generator_prompt(Generator *g, const int32_t *ids, size_t n, const char *what) {
  if (n > g->window)
    return tfm_fail("the prompt is %zu %s but model %s's context is %zu (its window, seq_len); "
                    "shorten the prompt or rebuild the model with a longer seq_len",
                    n, what, tfm_model.name, g->window);
  for (size_t i = 0; i < n; i++) generator_push(g, ids[i]);
  return TFM_OK;
}

/* Characters: each id's bytes as it comes. */
static int generate_characters(Generator *g) {
  Task *t = g->t;
  const char *prompt = t->cli->prompt ? t->cli->prompt : "";
  size_t n = strlen(prompt);
  int32_t *ids = malloc(sizeof(int32_t) * (n ? n : 1));
  if (!ids) return tfm_fail("out of memory");
  for (size_t i = 0; i < n; i++) {
    int32_t id = tfm_vocab_find(&t->vocab, prompt + i, 1);
    ids[i] = id < 0 ? TFM_UNK : id;
  }
  int status = generator_prompt(g, ids, n, "characters");
  free(ids);
  if (status) return status;
  fputs(prompt, stdout);
  for (uint64_t k = 0; k < t->cli->length; k++) {
    int32_t id;
    if (generator_next(g, &id)) return TFM_FAILED;
    if (id >= (int32_t)t->vocab.count) id = TFM_UNK;
    fwrite(t->vocab.tokens[id], 1, t->vocab.lengths[id], stdout);
  }
  fputc('\n', stdout);
  return TFM_OK;
}

/* --tokenizer FILE: the prompt's ids, then --length new ones, printed as
 * the tokenizer decodes the whole sequence (a piece can be half a
 * character, or join its neighbour). */
static int generate_tokens(Generator *g) {
  Task *t = g->t;
  const Cli *c = t->cli;
  tfm_tokenizer *tok;
  if (tfm_tokenizer_load(c->tokenizer, &tok)) return TFM_FAILED;
  tfm_tokenizer_ids ids = {0};
  const char *prompt = c->prompt ? c->prompt : "";
  int status = tfm_tokenizer_encode(tok, prompt, strlen(prompt), &ids);
  size_t size = tfm_tokenizer_vocab_size(tok);
  if (!status && (int64_t)size > t->model_vocab)
    status = tfm_fail("%s: the tokenizer has %zu tokens but model %s's vocabulary is %" PRId64,
                      c->tokenizer, size, tfm_model.name, t->model_vocab);
  g->classes = (int64_t)size; /* the tokenizer's ids only */
  if (!status) status = generator_prompt(g, ids.ids, ids.count, "tokens");
  for (uint64_t n = 0; !status && n < c->length; n++) {
    int32_t id;
    status = generator_next(g, &id) || tfm_tokenizer_ids_push(&ids, id);
  }
  char *text = NULL;
  size_t length = 0;
  if (!status) status = tfm_tokenizer_decode(tok, ids.ids, ids.count, &text, &length);
  if (!status) fwrite(text, 1, length, stdout), fputc('\n', stdout);
  free(text);
  tfm_tokenizer_ids_free(&ids);
  tfm_tokenizer_free(tok);
  return status;
}

int cli_generate(const char *prog, const Cli *c, tfm_pool *pool) {
  Task t = {.cli = c, .pool = pool, .sharded = c->tokenizer != NULL}; /* a tokenizer's ids need no vocabulary */
  Generator g = {.t = &t, .pool = pool, .rng = c->seed,
                 .sampling = {c->temperature, (size_t)c->top_k, c->top_p}};
  /* The decode-step graph unless --recompute or the model has none. */
  int cached = tfm_model.decode && !c->recompute;
  int status = cli_open_trained(prog, c, &t, cached ? tfm_model.decode : tfm_model.forward,
                                cached ? &g.dec : &g.fwd);
  if (status) return status;
  g.dec_open = cached;
  g.fwd_open = !cached;
  if (t.translation) status = tfm_fail("generate is for language models; use translate");
  /* A fixed number of tokens and no <eos>: no beam search. */
  else if (c->beam || c->dump)
    status = tfm_fail("generate decodes greedily or samples; --beam and --dump are for translate "
                      "and eval");
  g.window = t.window;
  g.classes = t.model_vocab;
  g.ids = calloc(t.window ? t.window : 1, sizeof(int32_t));
  if (!status && !g.ids) status = tfm_fail("out of memory");
  if (!status) status = c->tokenizer ? generate_tokens(&g) : generate_characters(&g);
  if (!status && c->timing)
    fprintf(stderr, "generate: %s; prompt: %zu steps in %.1f ms; then %zu steps in %.1f ms, "
            "%.3f ms per new token\n",
            !g.dec_open ? "forward graph (the whole window per token)"
            : g.slid    ? "decode graph (key/value cache), then the forward graph past the context"
                        : "decode graph (key/value cache)",
            g.prompt_steps, 1e3 * g.prompt_seconds, g.steps, 1e3 * g.seconds,
            g.steps ? 1e3 * g.seconds / (double)g.steps : 0.0);
  free(g.ids);
  tfm_vocab_free(&t.vocab);
  if (g.dec_open) tfm_graph_close(&g.dec);
  if (g.fwd_open) tfm_graph_close(&g.fwd);
  return status ? cli_fail(prog) : 0;
}

