/* Token shards: pre-tokenised corpora as flat little-endian ids behind a
 * 64-byte header (docs/data.md, "Token shards"). The writer appends ids and
 * finishes the file atomically; the reader memory-maps shards and cuts
 * windows for language models as pure functions of (seed, step, row), so a
 * corpus need not fit in memory and --resume sees the batches an
 * uninterrupted run would. */
#ifndef TFMRT_SHARD_H
#define TFMRT_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "tfmrt.h"

#define TFM_SHARD_MAGIC "TFMTOK1" /* and a NUL: 8 bytes */
enum {
  TFM_SHARD_VERSION = 1,
  TFM_SHARD_HEADER_BYTES = 64,
  TFM_SHARD_CRC_OFFSET = 60,        /* CRC-32 of bytes [0, 60) */
  TFM_SHARD_U16_MAX_VOCAB = 65536,  /* ids take 2 bytes up to this vocabulary, else 4 */
};
#define TFM_SHARD_SUFFIX ".tokshard"

/* The header's fields (docs/data.md). */
typedef struct {
  uint32_t version, id_bytes;
  uint64_t vocab_size, token_count, doc_count;
} tfm_shard_header;

/* Checks a shard's header and layout against the `size` bytes at `bytes`
 * (the whole file): magic, version, CRC, id width, vocabulary, sizes and the
 * document starts; refuses with "name: reason". Ids are not read. */
int tfm_shard_parse(const char *name, const void *bytes, size_t size, tfm_shard_header *header);

/* The byte offset of the document table of a shard with this header. */
uint64_t tfm_shard_docs_offset(const tfm_shard_header *header);

/* --- writer ------------------------------------------------------------------ */

typedef struct {
  char *path, *tmp;
  int fd;
  uint64_t vocab_size, tokens;
  uint32_t id_bytes;
  unsigned char *buffer;     /* ids not yet written */
  size_t buffered;
  uint64_t *docs;            /* document starts, in tokens */
  size_t doc_count, doc_capacity;
} tfm_shard_writer;

/* Starts PATH.tmp.PID for ids below vocab_size (1 .. INT32_MAX). */
int tfm_shard_writer_open(tfm_shard_writer *w, const char *path, uint64_t vocab_size);
/* Records that a document starts at the next token appended (the first
 * document always starts at 0: ids appended before the first call form one). */
int tfm_shard_writer_document(tfm_shard_writer *w);
/* Refuses (and appends nothing) when an id is negative or not below vocab_size. */
int tfm_shard_writer_append(tfm_shard_writer *w, const int32_t *ids, size_t count);
/* Header, document table, fsync, rename over the path, fsync of its folder;
 * frees w whatever the outcome (a failure removes the temporary file). */
int tfm_shard_writer_finish(tfm_shard_writer *w);
/* Removes the temporary file and frees w. */
void tfm_shard_writer_abort(tfm_shard_writer *w);

/* --- reader ------------------------------------------------------------------ */

typedef struct {
  char *path;
  const unsigned char *map;  /* the whole file, read-only */
  size_t size;
  tfm_shard_header header;
  uint64_t starts;           /* windows that fit: token_count - window, or 0 */
} tfm_shard;

/* A corpus: shards in name order, windows of window + 1 ids that never
 * cross a shard's end. */
typedef struct {
  size_t count;
  tfm_shard *shards;
  uint64_t *first_start;     /* count + 1 prefix sums of the shards' starts */
  size_t window;
  int64_t vocab;             /* the model's classes: every id must be below it */
  uint64_t tokens;
} tfm_shards;

/* Whether --data names shards: a folder, a glob pattern, a name ending in
 * .tokshard, or a file that starts with "TFMTOK". */
int tfm_shards_named(const char *spec);

/* Opens every shard of spec (a file, a folder's *.tokshard, or a glob
 * pattern), each validated (tfm_shard_parse) and its vocabulary required to
 * equal model_vocab; windows of window + 1 tokens. Replaces *set only on
 * success. */
int tfm_shards_open(tfm_shards *set, const char *spec, size_t window, int64_t model_vocab);
void tfm_shards_close(tfm_shards *set);

/* Training rows: window start chosen by tfm_data_hash(seed, step, row) over
 * every start of every shard. tokens/targets [rows, window]. An id not below
 * the model's vocabulary is refused here, with the shard and position. */
int tfm_shards_train_batch(tfm_shards *set, uint64_t seed, uint64_t step, size_t rows,
                           int32_t *tokens, int32_t *targets);

/* Evaluation: consecutive windows (stride window) through each shard in
 * order; rows past the last are padding, *filled counts the windows. */
size_t tfm_shards_eval_batch_count(const tfm_shards *set, size_t rows);
int tfm_shards_eval_batch(tfm_shards *set, size_t index, size_t rows, int32_t *tokens,
                          int32_t *targets, size_t *filled);

#endif
