/* Token shards: the writer's files read back (2- and 4-byte ids, document
 * starts, the exact header bytes), every refusal of a malformed file,
 * windows that stay inside one shard and depend only on (seed, step, row),
 * the evaluation windows in order, and ids beyond the model's vocabulary
 * refused when read. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "shard.h"
#include "tfmrt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { W = 5, ROWS = 6 };

/* A shard of n ids base, base + 1, ... (mod vocab), documents every 10. */
static void write_counting(const char *path, uint64_t vocab, int32_t base, size_t n) {
  tfm_shard_writer w;
  CHECK_OK(tfm_shard_writer_open(&w, path, vocab));
  for (size_t i = 0; i < n; i++) {
    int32_t id = (int32_t)((uint64_t)(base + (int32_t)i) % vocab);
    if (i % 10 == 0) CHECK_OK(tfm_shard_writer_document(&w));
    CHECK_OK(tfm_shard_writer_append(&w, &id, 1));
  }
  CHECK_OK(tfm_shard_writer_finish(&w));
}

static void round_trip(void) {
  char path[512];
  scratch_path(path, sizeof path, "small.tokshard");
  write_counting(path, 100, 0, 25);
  size_t size;
  unsigned char *bytes = read_file(path, &size);
  CHECK(bytes && size == 64 + 56 + 3 * 8); /* 50 id bytes padded to 56, 3 documents */
  tfm_shard_header h;
  CHECK_OK(tfm_shard_parse(path, bytes, size, &h));
  CHECK(h.version == 1 && h.id_bytes == 2 && h.vocab_size == 100 && h.token_count == 25 &&
        h.doc_count == 3);
  CHECK(bytes && !memcmp(bytes, "TFMTOK1\0", 8) && bytes[64] == 0 && bytes[66] == 1);
  CHECK(bytes && bytes[64 + 56 + 8] == 10 && bytes[64 + 56 + 16] == 20);
  free(bytes);

  /* Above 65536 ids: 4 bytes each. */
  scratch_path(path, sizeof path, "wide.tokshard");
  write_counting(path, 70000, 69990, 20);
  bytes = read_file(path, &size);
  CHECK(bytes && size == 64 + 80 + 2 * 8);
  CHECK_OK(tfm_shard_parse(path, bytes, size, &h));
  CHECK(h.id_bytes == 4 && h.vocab_size == 70000);
  CHECK(bytes && bytes[64 + 40] == 0 && bytes[64 + 41] == 0); /* id 0 after 69999 */
  free(bytes);
  tfm_shards set = {0};
  CHECK_OK(tfm_shards_open(&set, path, W, 70000));
  int32_t tokens[ROWS * W], targets[ROWS * W];
  CHECK_OK(tfm_shards_train_batch(&set, 1, 0, ROWS, tokens, targets));
  for (size_t i = 0; i < ROWS * W; i++)
    CHECK(targets[i] == (tokens[i] + 1) % 70000 && tokens[i] >= 0 && tokens[i] < 70000);
  tfm_shards_close(&set);

  /* Ids appended before the first document start form a document at 0. */
  scratch_path(path, sizeof path, "late.tokshard");
  tfm_shard_writer late;
  int32_t some[3] = {1, 2, 3};
  CHECK_OK(tfm_shard_writer_open(&late, path, 10));
  CHECK_OK(tfm_shard_writer_append(&late, some, 3));
  CHECK_OK(tfm_shard_writer_document(&late));
  CHECK_OK(tfm_shard_writer_append(&late, some, 2));
  CHECK_OK(tfm_shard_writer_finish(&late));
  bytes = read_file(path, &size);
  CHECK(bytes && size == 64 + 16 + 16);
  CHECK_OK(tfm_shard_parse(path, bytes, size, &h));
  CHECK(h.doc_count == 2 && h.token_count == 5 && bytes && bytes[64 + 16] == 0 && bytes[64 + 24] == 3);
  free(bytes);

  /* The writer refuses ids outside the vocabulary. */
  tfm_shard_writer w;
  scratch_path(path, sizeof path, "refused.tokshard");
  CHECK_OK(tfm_shard_writer_open(&w, path, 10));
  int32_t bad[2] = {3, 10};
  CHECK_REFUSED(tfm_shard_writer_append(&w, bad, 2), path, "not in 0..9");
  tfm_shard_writer_abort(&w);
  struct stat st;
  CHECK(stat(path, &st) != 0); /* nothing left behind */
}

/* Rewrites the header's CRC after a change to bytes [0, 60). */
static void reseal(unsigned char *bytes) {
  uint32_t crc = 0xffffffffu;
  for (int i = 0; i < 60; i++) { /* CRC-32 (IEEE), bit by bit */
    crc ^= bytes[i];
    for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ 0xedb88320u : crc >> 1;
  }
  crc ^= 0xffffffffu;
  for (int i = 0; i < 4; i++) bytes[60 + i] = (unsigned char)(crc >> (8 * i));
}

static void refusals(void) {
  char path[512];
  scratch_path(path, sizeof path, "good.tokshard");
  write_counting(path, 100, 0, 25);
  size_t size;
  unsigned char *good = read_file(path, &size), *b = malloc(size + 16);
  tfm_shard_header h;
  if (!good || !b) return;
#define REFUSED_WITH(bytes, n, reason) CHECK_REFUSED(tfm_shard_parse("f", bytes, n, &h), "f", reason)
  REFUSED_WITH(good, 63, "truncated: 63 bytes");
  REFUSED_WITH((const unsigned char *)"TFMTOX", 6, "wrong magic");
  REFUSED_WITH(good, 0, "truncated: 0 bytes");
  memcpy(b, good, size), b[3] = 'X';
  REFUSED_WITH(b, size, "wrong magic");
  memcpy(b, good, size), b[8] = 2, reseal(b);
  REFUSED_WITH(b, size, "version 2");
  memcpy(b, good, size), b[24] = 26;
  REFUSED_WITH(b, size, "checksum");
  REFUSED_WITH(good, size - 8, "truncated");
  REFUSED_WITH(good, 64 + 40, "truncated: the header counts 25 tokens");
  memcpy(b, good, size), memset(b + size, 0, 8);
  REFUSED_WITH(b, size + 8, "size mismatch");
  memcpy(b, good, size), b[64 + 52] = 1; /* 50 id bytes, then 6 of padding */
  REFUSED_WITH(b, size, "padding byte at 116");
  memcpy(b, good, size), b[12] = 4, reseal(b);
  REFUSED_WITH(b, size, "ids of 4 bytes");
  memcpy(b, good, size), memset(b + 16, 0, 8), reseal(b);
  REFUSED_WITH(b, size, "vocabulary of 0 ids");
  memcpy(b, good, size), b[50] = 1, reseal(b);
  REFUSED_WITH(b, size, "reserved header byte 50");
  memcpy(b, good, size), b[64 + 56 + 8] = 30; /* document 1 past the tokens */
  REFUSED_WITH(b, size, "document 1 starts at token 30");
  memcpy(b, good, size), b[64 + 56] = 1;
  REFUSED_WITH(b, size, "document 0 starts at token 1");
  CHECK_OK(tfm_shard_parse("f", good, size, &h));

  /* Through the corpus: a vocabulary other than the model's, no file, a
   * folder without shards, a pattern matching nothing. */
  tfm_shards set = {0};
  CHECK_REFUSED(tfm_shards_open(&set, path, W, 99), path, "vocabulary of 100 ids, but the model's is 99");
  char missing[512];
  scratch_path(missing, sizeof missing, "missing.tokshard");
  CHECK_REFUSED(tfm_shards_open(&set, missing, W, 100), missing, "cannot open");
  CHECK_REFUSED(tfm_shards_open(&set, path, 25, 100), path, "none has a window of 25 + 1");
  char empty[512];
  scratch_path(empty, sizeof empty, "empty");
  mkdir(empty, 0777);
  CHECK_REFUSED(tfm_shards_open(&set, empty, W, 100), empty, "no token shards");
  char pattern[600];
  snprintf(pattern, sizeof pattern, "%s/*.nothing", empty);
  CHECK_REFUSED(tfm_shards_open(&set, pattern, W, 100), pattern, "no file matches");
  CHECK(set.count == 0);

  /* An id beyond the vocabulary is refused when a window reads it. */
  memcpy(b, good, size);
  for (size_t i = 0; i < 25; i++) b[64 + 2 * i] = 100 + (unsigned char)i;
  char beyond[512];
  scratch_path(beyond, sizeof beyond, "beyond.tokshard");
  write_file(beyond, b, size);
  CHECK_OK(tfm_shards_open(&set, beyond, W, 100));
  int32_t tokens[ROWS * W], targets[ROWS * W];
  CHECK_REFUSED(tfm_shards_train_batch(&set, 1, 0, ROWS, tokens, targets), beyond,
                "not below the vocabulary of 100");
  tfm_shards_close(&set);
  free(good);
  free(b);
}

/* Three shards in a folder: windows never cross a shard's end, cover every
 * start, and are a pure function of (seed, step, row). */
static void windows(void) {
  char dir[512], path[600];
  scratch_path(dir, sizeof dir, "corpus");
  mkdir(dir, 0777);
  const size_t lengths[3] = {12, 5, 30}; /* the middle shard has no window of 6 */
  const int32_t bases[3] = {0, 200, 400};
  for (int s = 0; s < 3; s++) {
    snprintf(path, sizeof path, "%s/%05d.tokshard", dir, s);
    write_counting(path, 1000, bases[s], lengths[s]);
  }
  snprintf(path, sizeof path, "%s/vocab", dir); /* not a shard: left out */
  write_file(path, "x", 1);
  tfm_shards set = {0};
  CHECK_OK(tfm_shards_open(&set, dir, W, 1000));
  CHECK(set.count == 3 && set.tokens == 47 && set.first_start[3] == 7 + 0 + 25);
  int32_t tokens[ROWS * W], targets[ROWS * W], again[ROWS * W], other[ROWS * W];
  int seen[1000] = {0};
  for (uint64_t step = 0; step < 200; step++) {
    CHECK_OK(tfm_shards_train_batch(&set, 3, step, ROWS, tokens, targets));
    CHECK_OK(tfm_shards_train_batch(&set, 3, step, ROWS, again, other));
    CHECK(!memcmp(tokens, again, sizeof tokens) && !memcmp(targets, other, sizeof targets));
    for (size_t r = 0; r < ROWS; r++) {
      int32_t first = tokens[r * W];
      int inside = (first >= 0 && first + W < 12) || (first >= 400 && first + W < 430);
      CHECK(inside);
      for (size_t i = 0; i < W; i++)
        CHECK(tokens[r * W + i] == first + (int32_t)i && targets[r * W + i] == first + (int32_t)i + 1);
      if (first >= 0 && first < 1000) seen[first] = 1;
    }
  }
  int covered = 1;
  for (int32_t s = 0; s < 7; s++) covered &= seen[s];
  for (int32_t s = 400; s < 425; s++) covered &= seen[s];
  CHECK(covered);
  CHECK_OK(tfm_shards_train_batch(&set, 4, 0, ROWS, again, other));
  CHECK_OK(tfm_shards_train_batch(&set, 3, 0, ROWS, tokens, targets));
  CHECK(memcmp(tokens, again, sizeof tokens) != 0); /* another seed, other windows */

  /* Evaluation: (12-1)/5 = 2 windows, then none, then (30-1)/5 = 5. */
  CHECK(tfm_shards_eval_batch_count(&set, ROWS) == 2);
  size_t filled;
  CHECK_OK(tfm_shards_eval_batch(&set, 0, ROWS, tokens, targets, &filled));
  CHECK(filled == ROWS && tokens[0] == 0 && tokens[W] == 5 && tokens[2 * W] == 400 &&
        tokens[5 * W] == 415 && targets[5 * W + W - 1] == 420);
  CHECK_OK(tfm_shards_eval_batch(&set, 1, ROWS, tokens, targets, &filled));
  CHECK(filled == 1 && tokens[0] == 420 && tokens[W] == 0 && targets[ROWS * W - 1] == 0);
  CHECK_REFUSED(tfm_shards_eval_batch(&set, 2, ROWS, tokens, targets, &filled), NULL, "batch 2 of 2");
  tfm_shards_close(&set);

  /* The same shards through a glob pattern. */
  snprintf(path, sizeof path, "%s/0000[02].tokshard", dir);
  CHECK_OK(tfm_shards_open(&set, path, W, 1000));
  CHECK(set.count == 2 && set.tokens == 42);
  CHECK(tfm_shards_named(path) && tfm_shards_named(dir) && !tfm_shards_named("/etc/hostname"));
  tfm_shards_close(&set);
}

int main(void) {
  round_trip();
  refusals();
  windows();
  scratch_dir_remove();
  return check_result("shards");
}
