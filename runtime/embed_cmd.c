/* embed (--load CKPT | --init FILE) --tokenizer FILE --data LINES [--output NAME] [--out F]:
 * one vector per line of text from an encoder (models/bert.tfm's
 * `embedding`, the hidden states averaged over the tokens that are not
 * padding). Lines of different lengths share a batch: each is padded to
 * the window with the model's `pad` id, which the model masks. */
#define _POSIX_C_SOURCE 200809L /* getline */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tokenizer.h"

/* A config value of the model as an integer, or `otherwise`. */
static int64_t config_int(const char *key, int64_t otherwise) {
  for (int32_t i = 0; i < tfm_model.num_config; i++)
    if (!strcmp(tfm_model.config_keys[i], key)) return strtoll(tfm_model.config_values[i], NULL, 10);
  return otherwise;
}

/* The model's `pad` config value, else the tokenizer's, else 0. */
static int32_t pad_id(const tfm_tokenizer *tok) {
  int32_t pad = tfm_tokenizer_special_ids(tok).pad;
  return (int32_t)config_int("pad", pad >= 0 ? pad : 0);
}

/* The tokenizer's ids must be rows of the model's embedding (`vocab`). */
static int check_vocabulary(const tfm_tokenizer *tok, const char *path) {
  int64_t vocab = config_int("vocab", -1);
  size_t size = tfm_tokenizer_vocab_size(tok);
  if (vocab >= 0 && (int64_t)size > vocab)
    return tfm_fail("%s: the tokenizer has %zu tokens but model %s's vocabulary is %" PRId64
                    "; rebuild with -D vocab=%zu", path, size, tfm_model.name, vocab, size);
  return TFM_OK;
}

typedef struct {
  tfm_graph *g;
  tfm_pool *pool;
  int32_t *tokens;
  size_t rows, window;
  const tfm_buffer_desc *out;
  const float *values;
  float *vectors; /* the result: lines x width */
  size_t lines, capacity, filled;
} Embedder;

/* Runs the filled rows of the batch and keeps their vectors. */
static int flush(Embedder *e) {
  if (!e->filled) return TFM_OK;
  size_t width = (size_t)e->out->shape[1];
  if (e->lines + e->filled > e->capacity) {
    size_t capacity = e->capacity ? 2 * e->capacity : 64;
    while (capacity < e->lines + e->filled) capacity *= 2;
    float *grown = realloc(e->vectors, capacity * width * sizeof(float));
    if (!grown) return tfm_fail("embed: out of memory");
    e->vectors = grown;
    e->capacity = capacity;
  }
  tfm_graph_run(e->g, e->pool);
  memcpy(e->vectors + e->lines * width, e->values, e->filled * width * sizeof(float));
  e->lines += e->filled;
  e->filled = 0;
  return TFM_OK;
}

/* Every input zero, then the batch's tokens all padding. */
static void clear_batch(Embedder *e, int32_t pad) {
  for (int32_t i = 0; i < e->g->desc->num_buffers; i++) {
    const tfm_buffer_desc *b = &e->g->desc->buffers[i];
    if (b->role == TFM_ROLE_INPUT)
      memset(tfm_graph_buffer(e->g, b->name, TFM_ROLE_INPUT, NULL), 0, (size_t)tfm_buffer_bytes(b));
  }
  for (size_t k = 0; k < e->rows * e->window; k++) e->tokens[k] = pad;
}

static int embed_lines(Embedder *e, tfm_tokenizer *tok, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return tfm_fail("%s: cannot open: %s", path, strerror(errno));
  int wordpiece = tfm_tokenizer_kind_of(tok) == TFM_TOKENIZER_WORDPIECE;
  tfm_tokenizer_specials sp = tfm_tokenizer_special_ids(tok);
  int32_t pad = pad_id(tok);
  tfm_tokenizer_ids ids = {0};
  char *line = NULL;
  size_t size = 0, number = 0;
  ssize_t n;
  int status = TFM_OK;
  clear_batch(e, pad);
  while (!status && (n = getline(&line, &size, f)) >= 0) {
    number++;
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    ids.count = 0;
    /* BERT's convention: [CLS] text [SEP]. */
    if (wordpiece && sp.bos >= 0) status = tfm_tokenizer_ids_push(&ids, sp.bos);
    if (!status) status = tfm_tokenizer_encode(tok, line, (size_t)n, &ids);
    if (!status && wordpiece && sp.eos >= 0) status = tfm_tokenizer_ids_push(&ids, sp.eos);
    if (!status && ids.count > e->window)
      status = tfm_fail("%s:%zu: %zu tokens, more than model %s's window of %zu", path, number,
                        ids.count, tfm_model.name, e->window);
    if (status) break;
    memcpy(e->tokens + e->filled * e->window, ids.ids, ids.count * sizeof(int32_t));
    if (++e->filled == e->rows) {
      status = flush(e);
      clear_batch(e, pad);
    }
  }
  if (!status && ferror(f)) status = tfm_fail("%s: read error: %s", path, strerror(errno));
  if (!status) status = flush(e);
  free(line);
  tfm_tokenizer_ids_free(&ids);
  fclose(f);
  return status;
}

static int write_vectors(const Embedder *e, const Cli *c, const char *name) {
  size_t width = (size_t)e->out->shape[1];
  if (c->out) {
    tfm_tensor t = {.name = name, .dtype = TFM_F32, .rank = 2, .shape = {e->lines, width},
                    .data = e->vectors};
    return tfm_ckpt_save(c->out, &t, 1, NULL);
  }
  for (size_t i = 0; i < e->lines; i++)
    for (size_t k = 0; k < width; k++)
      printf("%.9g%c", e->vectors[i * width + k], k + 1 == width ? '\n' : '\t');
  return TFM_OK;
}

int cli_embed(const char *prog, const Cli *c, tfm_pool *pool) {
  if (!c->tokenizer || !c->data)
    return cli_usage_error(prog, "%s", "embed needs --tokenizer FILE and --data LINES (one text a line)");
  const char *name = c->outputs ? c->outputs : "embedding";
  Task t = {.cli = c, .pool = pool, .sharded = 1}; /* the tokenizer's ids: no vocabulary */
  tfm_graph g;
  int status = cli_open_trained(prog, c, &t, tfm_model.forward, &g);
  if (status) return status;
  Embedder e = {.g = &g, .pool = pool, .rows = t.rows, .window = t.window};
  e.tokens = tfm_graph_buffer(&g, "tokens", TFM_ROLE_INPUT, NULL);
  e.values = tfm_graph_buffer(&g, name, TFM_ROLE_OUTPUT, &e.out);
  tfm_tokenizer *tok = NULL;
  if (!e.values)
    status = tfm_fail("model %s has no output '%s' (embed --output NAME names one)", tfm_model.name,
                      name);
  else if (e.out->rank != 2 || e.out->dtype != TFM_F32 || (size_t)e.out->shape[0] != t.rows)
    status = tfm_fail("output '%s' of model %s is not one f32 vector per row of the batch "
                      "([%zu, width])", name, tfm_model.name, t.rows);
  if (!status) status = tfm_tokenizer_load(c->tokenizer, &tok);
  if (!status) status = check_vocabulary(tok, c->tokenizer);
  if (!status) status = embed_lines(&e, tok, c->data);
  if (!status) status = write_vectors(&e, c, name);
  if (!status && c->out)
    printf("embedded %zu lines of %s: %s [%zu, %lld] in %s\n", e.lines, c->data, name, e.lines,
           (long long)e.out->shape[1], c->out);
  tfm_tokenizer_free(tok);
  free(e.vectors);
  tfm_graph_close(&g);
  return status ? cli_fail(prog) : 0;
}
