/* The binary's side of token shards: `tokenize` (text -> shards through a
 * tokenizer behind a function pointer) and the shard data of train and
 * eval (--data/--test naming shards). */
#define _DEFAULT_SOURCE /* mkdir */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "shard.h"
#include "tokenizer.h"

/* --- the tokenizer interface ------------------------------------------------- */

/* Text to ids: appends the ids of text[0, length) to ids and counts the
 * unknown ones. A line reaches encode whole (with its newline) unless it is
 * longer than TOKENIZE_CHUNK bytes. Two kinds: the byte tokenizer of
 * character models, and the tokenizers of tokenizer.h (--tokenizer). */
typedef int (*cli_encode_fn)(void *ctx, const unsigned char *text, size_t length,
                             tfm_tokenizer_ids *ids, uint64_t *unknown);

typedef struct {
  int32_t ids[256];          /* byte -> id; <unk> for bytes the vocabulary lacks */
} byte_tokenizer;

static int encode_bytes(void *ctx, const unsigned char *text, size_t length,
                        tfm_tokenizer_ids *ids, uint64_t *unknown) {
  byte_tokenizer *b = ctx;
  for (size_t i = 0; i < length; i++) {
    if (tfm_tokenizer_ids_push(ids, b->ids[text[i]])) return TFM_FAILED;
    *unknown += b->ids[text[i]] == TFM_UNK;
  }
  return TFM_OK;
}

static int encode_with_tokenizer(void *ctx, const unsigned char *text, size_t length,
                                 tfm_tokenizer_ids *ids, uint64_t *unknown) {
  tfm_tokenizer *tok = ctx;
  size_t before = ids->count;
  if (tfm_tokenizer_encode(tok, (const char *)text, length, ids)) return TFM_FAILED;
  int32_t unk = tfm_tokenizer_special_ids(tok).unk;
  for (size_t i = before; unk >= 0 && i < ids->count; i++) *unknown += ids->ids[i] == unk;
  return TFM_OK;
}

static void byte_tokenizer_init(byte_tokenizer *b, const tfm_vocab *vocab) {
  *b = (byte_tokenizer){0};
  for (int byte = 0; byte < 256; byte++) {
    unsigned char token = (unsigned char)byte;
    int32_t id = tfm_vocab_find(vocab, &token, 1);
    b->ids[byte] = id >= 0 ? id : TFM_UNK;
  }
}

/* --- tokenize ----------------------------------------------------------------- */

enum { TOKENIZE_CHUNK = 1 << 20 };

typedef struct {
  const char *out;
  int folder;                /* shards OUT/NNNNN.tokshard, else the file OUT */
  uint64_t shard_size;       /* tokens per shard (0: no limit) */
  uint64_t vocab_size;
  tfm_shard_writer writer;
  int open;
  size_t shards;
  uint64_t tokens, documents;
} shard_output;

static int output_next_shard(shard_output *o) {
  char path[4096];
  if (o->folder) snprintf(path, sizeof path, "%s/%05zu%s", o->out, o->shards, TFM_SHARD_SUFFIX);
  else snprintf(path, sizeof path, "%s", o->out);
  if (tfm_shard_writer_open(&o->writer, path, o->vocab_size)) return TFM_FAILED;
  o->open = 1;
  o->shards++;
  return TFM_OK;
}

static int output_finish(shard_output *o) {
  if (!o->open) return TFM_OK;
  o->open = 0;
  return tfm_shard_writer_finish(&o->writer);
}

/* Appends one piece of text's ids; starts a document first when asked (and
 * in a new shard, whose first ids always start one). */
static int output_append(shard_output *o, const int32_t *ids, size_t count, int document) {
  if (document) o->documents++;
  if (!o->open && output_next_shard(o)) return TFM_FAILED;
  if (document && tfm_shard_writer_document(&o->writer)) return TFM_FAILED;
  while (count) {
    uint64_t room = o->shard_size ? o->shard_size - o->writer.tokens : count;
    if (room == 0) {
      if (output_finish(o) || output_next_shard(o) || tfm_shard_writer_document(&o->writer))
        return TFM_FAILED;
      continue;
    }
    size_t n = room < count ? (size_t)room : count;
    if (tfm_shard_writer_append(&o->writer, ids, n)) return TFM_FAILED;
    ids += n, count -= n, o->tokens += n;
  }
  return TFM_OK;
}

/* Streams the text through encode into the shards: each line (newline
 * included) is a document. */
static int tokenize_file(const char *path, cli_encode_fn encode, void *ctx, shard_output *o,
                         uint64_t *unknown) {
  FILE *file = fopen(path, "rb");
  if (!file) return tfm_fail("%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  uint64_t total = fstat(fileno(file), &st) == 0 ? (uint64_t)st.st_size : 0, done = 0;
  unsigned char *text = malloc(TOKENIZE_CHUNK);
  tfm_tokenizer_ids ids = {0};
  int status = text ? TFM_OK : tfm_fail("tokenize: out of memory");
  tfm_progress_bar_state bar;
  tfm_progress_bar_start(&bar, stderr, "tokenize", total);
  size_t have = 0;
  int at_line_start = 1, eof = 0;
  while (!status && !(eof && have == 0)) {
    size_t got = eof ? 0 : fread(text + have, 1, TOKENIZE_CHUNK - have, file);
    if (got == 0 && ferror(file)) status = tfm_fail("%s: read error: %s", path, strerror(errno));
    eof = eof || got == 0;
    size_t end = have + got, pos = 0;
    while (!status && pos < end) {
      unsigned char *nl = memchr(text + pos, '\n', end - pos);
      /* An unfinished line waits for more text unless it fills the buffer. */
      if (!nl && !eof && !(pos == 0 && end == TOKENIZE_CHUNK)) break;
      size_t length = nl ? (size_t)(nl + 1 - (text + pos)) : end - pos;
      ids.count = 0;
      status = encode(ctx, text + pos, length, &ids, unknown) ||
               output_append(o, ids.ids, ids.count, at_line_start);
      at_line_start = nl != NULL;
      pos += length;
      done += length;
    }
    memmove(text, text + pos, end - pos);
    have = end - pos;
    tfm_progress_bar(&bar, done);
  }
  if (!status) tfm_progress_bar(&bar, total > done ? total : done);
  fclose(file);
  free(text);
  tfm_tokenizer_ids_free(&ids);
  return status;
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static int is_folder(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Where the vocabulary of shards lives: FOLDER/vocab, else SHARD.vocab. */
static const char *shard_vocab_path(const char *spec, char *buf, size_t size) {
  snprintf(buf, size, is_folder(spec) ? "%s/vocab" : "%s.vocab", spec);
  return buf;
}

/* The byte tokenizer of a character model: --vocab (a trained model's),
 * else the bytes of the text, as train builds it; written beside the
 * shards. */
static int tokenize_bytes(Task *t, const Cli *c, shard_output *o, uint64_t *unknown) {
  char vocab_out[4096];
  shard_vocab_path(c->out, vocab_out, sizeof vocab_out);
  int status = c->vocab_path ? tfm_vocab_read(&t->vocab, c->vocab_path)
                             : tfm_vocab_build_bytes(&t->vocab, c->data);
  if (!status && (int64_t)t->vocab.count > t->model_vocab)
    status = tfm_fail("the text has %zu tokens (specials included) but the model's vocabulary "
                      "is %" PRId64 "; rebuild with -D vocab=%zu", t->vocab.count,
                      t->model_vocab, t->vocab.count);
  byte_tokenizer bytes;
  if (!status) byte_tokenizer_init(&bytes, &t->vocab);
  if (!status) status = tokenize_file(c->data, encode_bytes, &bytes, o, unknown);
  if (!status && !o->open) status = output_next_shard(o); /* an empty text: an empty shard */
  if (!status) status = output_finish(o);
  if (!status) status = tfm_vocab_write(&t->vocab, vocab_out);
  if (!status) printf("vocabulary (the text's bytes) in %s\n", vocab_out);
  return status;
}

/* --tokenizer FILE: its ids, which must fit the model's vocabulary. */
static int tokenize_with(const char *path, Task *t, const Cli *c, shard_output *o,
                         uint64_t *unknown) {
  tfm_tokenizer *tok;
  if (tfm_tokenizer_load(path, &tok)) return TFM_FAILED;
  size_t size = tfm_tokenizer_vocab_size(tok);
  int status = (int64_t)size > t->model_vocab
                   ? tfm_fail("%s: the tokenizer has %zu tokens but model %s's vocabulary is %"
                              PRId64 "; rebuild with -D vocab=%zu", path, size, tfm_model.name,
                              t->model_vocab, size)
                   : TFM_OK;
  if (!status) status = tokenize_file(c->data, encode_with_tokenizer, tok, o, unknown);
  if (!status && !o->open) status = output_next_shard(o);
  if (!status) status = output_finish(o);
  if (!status)
    printf("tokenizer %s (%s, %zu tokens): ids below %zu of the model's %" PRId64 "\n", path,
           tfm_tokenizer_kind_name(tfm_tokenizer_kind_of(tok)), size, size, t->model_vocab);
  tfm_tokenizer_free(tok);
  return status;
}

int cli_tokenize(const char *prog, const Cli *c) {
  if (!c->data) return cli_usage_error(prog, "%s", "tokenize needs --data TEXT");
  if (!c->out) return cli_usage_error(prog, "%s", "tokenize needs --out FILE_OR_FOLDER");
  if (c->tokenizer && c->vocab_path)
    return cli_usage_error(prog, "%s", "tokenize takes --tokenizer FILE or --vocab FILE, not both");
  Task t = {.cli = c};
  if (cli_task_shapes(&t)) return cli_fail(prog);
  if (t.translation)
    return tfm_fail("tokenize makes token shards for language models (inputs tokens/targets); "
                    "model %s translates pairs", tfm_model.name), cli_fail(prog);
  shard_output o = {.out = c->out, .shard_size = c->shard_size,
                    .folder = c->shard_size > 0 || is_folder(c->out),
                    .vocab_size = (uint64_t)t.model_vocab};
  if (o.folder && mkdir(c->out, 0777) != 0 && errno != EEXIST)
    return tfm_fail("%s: cannot create the folder: %s", c->out, strerror(errno)), cli_fail(prog);
  uint64_t unknown = 0;
  int status = c->tokenizer ? tokenize_with(c->tokenizer, &t, c, &o, &unknown)
                            : tokenize_bytes(&t, c, &o, &unknown);
  if (o.open) tfm_shard_writer_abort(&o.writer);
  tfm_vocab_free(&t.vocab);
  if (status) return cli_fail(prog);
  printf("tokenized %s: %" PRIu64 " tokens in %" PRIu64 " documents (lines), %zu shard%s in %s, "
         "vocabulary %" PRId64 " (%d-byte ids), %" PRIu64 " unknown\n",
         c->data, o.tokens, o.documents, o.shards, o.shards == 1 ? "" : "s", c->out,
         t.model_vocab, t.model_vocab <= TFM_SHARD_U16_MAX_VOCAB ? 2 : 4, unknown);
  return 0;
}

/* --- shards as train and eval data ------------------------------------------- */

int cli_shards_named(const char *spec) { return spec && tfm_shards_named(spec); }

/* The vocabulary of shard data, when there is one (--vocab, else the file
 * tokenize wrote beside them): read into t, checked against the model. */
int cli_shards_vocab(Task *t, const Cli *c, const char *spec, int *found) {
  char buf[4096];
  const char *path = c->vocab_path ? c->vocab_path : shard_vocab_path(spec, buf, sizeof buf);
  *found = c->vocab_path || file_exists(path);
  if (!*found) return TFM_OK;
  if (tfm_vocab_read(&t->vocab, path)) return TFM_FAILED;
  if ((int64_t)t->vocab.count > t->model_vocab)
    return tfm_fail("%s: %zu tokens, more than the model's vocabulary of %" PRId64, path,
                    t->vocab.count, t->model_vocab);
  return TFM_OK;
}
