/* Character windows: targets are the tokens shifted by one, training windows
 * stay inside the training part and cover it, the held-out tail is cut into
 * consecutive windows, all deterministic by seed; bad files are refused. */
#include "check.h"
#include "tfmrt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { W = 4, ROWS = 8 };

/* 40 distinct bytes: a byte's position in the text identifies it. */
static const char text[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCD";
static char path[512], vocab_path[512];
static tfm_vocab vocab;

/* The position in `text` of the byte behind id, or -1. */
static int position_of(int32_t id) {
  if (id < TFM_SPECIALS || (size_t)id >= vocab.count || vocab.lengths[id] != 1) return -1;
  const char *at = memchr(text, vocab.tokens[id][0], sizeof text - 1);
  return at ? (int)(at - text) : -1;
}

/* Row `row` holds text[start .. start + W] as tokens then targets; returns start. */
static int window_start(const int32_t *tokens, const int32_t *targets, size_t row) {
  int start = position_of(tokens[row * W]);
  for (size_t i = 0; i < W; i++) {
    if (start < 0 || position_of(tokens[row * W + i]) != start + (int)i ||
        position_of(targets[row * W + i]) != start + (int)i + 1)
      return -1;
  }
  return start;
}

static void training_windows(const tfm_chars *chars) {
  int32_t tokens[ROWS * W], targets[ROWS * W], again[ROWS * W], other[ROWS * W];
  int seen[40] = {0};
  for (uint64_t step = 0; step < 50; step++) {
    CHECK_OK(tfm_chars_train_batch(chars, 3, step, ROWS, tokens, targets));
    for (size_t row = 0; row < ROWS; row++) {
      int start = window_start(tokens, targets, row);
      CHECK(start >= 0 && start + W < 30); /* the last target is inside the training part */
      if (start >= 0) seen[start]++;
    }
  }
  for (int start = 0; start + W < 30; start++) CHECK(seen[start] > 0); /* 400 draws of 26 */
  CHECK_OK(tfm_chars_train_batch(chars, 3, 7, ROWS, tokens, targets));
  CHECK_OK(tfm_chars_train_batch(chars, 3, 7, ROWS, again, other));
  CHECK(memcmp(tokens, again, sizeof tokens) == 0 && memcmp(targets, other, sizeof other) == 0);
  CHECK_OK(tfm_chars_train_batch(chars, 4, 7, ROWS, again, other));
  CHECK(memcmp(tokens, again, sizeof tokens) != 0);
}

static void heldout_windows(const tfm_chars *chars) {
  /* The held-out "456789ABCD" (30..39): windows at 30 and 34; a third would need 42. */
  CHECK(tfm_chars_eval_batch_count(chars, 3) == 1 && tfm_chars_eval_batch_count(chars, 1) == 2);
  int32_t tokens[3 * W], targets[3 * W];
  size_t filled;
  for (size_t i = 0; i < 3 * W; i++) tokens[i] = targets[i] = -7;
  CHECK_OK(tfm_chars_eval_batch(chars, 0, 3, tokens, targets, &filled));
  CHECK(filled == 2);
  CHECK(window_start(tokens, targets, 0) == 30 && window_start(tokens, targets, 1) == 34);
  for (size_t i = 2 * W; i < 3 * W; i++) CHECK(tokens[i] == TFM_PAD && targets[i] == TFM_PAD);
  CHECK_REFUSED(tfm_chars_eval_batch(chars, 1, 3, tokens, targets, &filled), NULL,
                "batch 1 of 1");
}

static void byte_round_trip(void) {
  unsigned char every_byte[256];
  for (int i = 0; i < 256; i++) every_byte[i] = (unsigned char)(255 - i);
  CHECK(write_file(path, every_byte, sizeof every_byte) == 0);
  tfm_vocab bytes = {0}, read = {0};
  tfm_chars chars = {0};
  CHECK_OK(tfm_vocab_build_bytes(&bytes, path));
  CHECK(bytes.count == 4 + 256);
  CHECK_OK(tfm_vocab_write(&bytes, vocab_path));
  CHECK_OK(tfm_vocab_read(&read, vocab_path));
  CHECK(read.count == bytes.count);
  CHECK_OK(tfm_chars_load(&chars, path, &read, 255, 0));
  CHECK(chars.count == 256 && chars.train_count == 256 && chars.unknown_bytes == 0);
  CHECK(tfm_chars_eval_batch_count(&chars, 4) == 0);
  char decoded[300];
  size_t length;
  CHECK_OK(tfm_vocab_decode(&read, chars.ids, chars.count, "", decoded, sizeof decoded, &length));
  CHECK(length == 256 && memcmp(decoded, every_byte, 256) == 0);
  tfm_chars_free(&chars);
  tfm_vocab_free(&bytes);
  tfm_vocab_free(&read);
}

static void refusals(tfm_chars *chars) {
  CHECK(write_file(path, "", 0) == 0);
  CHECK_REFUSED(tfm_vocab_build_bytes(&vocab, path), path, "empty file");
  CHECK_REFUSED(tfm_chars_load(chars, path, &vocab, W, 0.25), path, "empty file");
  CHECK(write_file(path, "abcd", 4) == 0);
  CHECK_REFUSED(tfm_chars_load(chars, path, &vocab, W, 0), path,
                "4 bytes to train on, fewer than one window of 4 + 1");
  CHECK(write_file(path, text, 20) == 0);
  CHECK_REFUSED(tfm_chars_load(chars, path, &vocab, W, 0.2), path,
                "held-out tail of 4 bytes, fewer than one window of 4 + 1");
  CHECK_REFUSED(tfm_chars_load(chars, path, &vocab, W, 1), path, "not in [0, 1)");
  CHECK_REFUSED(tfm_chars_load(chars, path, &vocab, 0, 0.1), path, "a window of 0 bytes");
  char missing[600];
  scratch_path(missing, sizeof missing, "no-such.txt");
  CHECK_REFUSED(tfm_chars_load(chars, missing, &vocab, W, 0.1), missing, "cannot open");
  CHECK_REFUSED(tfm_vocab_build_bytes(&vocab, missing), missing, "cannot open");
  CHECK(chars->count == 40 && vocab.count == 44); /* refusals changed nothing */
  tfm_chars empty = {0};
  int32_t tokens[W], targets[W];
  CHECK_REFUSED(tfm_chars_train_batch(&empty, 1, 0, 1, tokens, targets), NULL, "none loaded");

  /* Bytes the vocabulary lacks become <unk>, counted. */
  CHECK(write_file(path, "ab\n\n?cd", 7) == 0);
  CHECK_OK(tfm_chars_load(chars, path, &vocab, 2, 0));
  CHECK(chars->unknown_bytes == 3 && chars->ids[2] == TFM_UNK && chars->ids[4] == TFM_UNK);
}

int main(void) {
  scratch_path(path, sizeof path, "text.txt");
  scratch_path(vocab_path, sizeof vocab_path, "vocab.txt");
  CHECK(write_file(path, text, sizeof text - 1) == 0);
  tfm_chars chars = {0};
  CHECK_OK(tfm_vocab_build_bytes(&vocab, path));
  CHECK(vocab.count == 44);
  CHECK_OK(tfm_chars_load(&chars, path, &vocab, W, 0.25));
  CHECK(chars.count == 40 && chars.train_count == 30 && chars.unknown_bytes == 0);
  training_windows(&chars);
  heldout_windows(&chars);
  refusals(&chars);
  byte_round_trip();
  tfm_chars_free(&chars);
  tfm_vocab_free(&vocab);
  scratch_dir_remove();
  return check_result("data.chars");
}
