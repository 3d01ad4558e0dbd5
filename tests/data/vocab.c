/* Vocabularies built from data keep the documented order, survive a write and
 * a read unchanged (bytes like newline, tab, NUL and invalid UTF-8 included),
 * and decode ids back to text. */
#include "check.h"
#include "tfmrt.h"

#include <stdlib.h>
#include <string.h>

static char path[512], vocab_path[512];

static void check_file_text(const char *file, const void *expected, size_t size) {
  size_t got_size;
  unsigned char *got = read_file(file, &got_size);
  CHECK(got && got_size == size && memcmp(got, expected, size) == 0);
  free(got);
}

static void check_same_vocab(const tfm_vocab *a, const tfm_vocab *b) {
  CHECK(a->count == b->count);
  for (size_t id = 0; id < a->count && id < b->count; id++)
    CHECK(a->lengths[id] == b->lengths[id] &&
          memcmp(a->tokens[id], b->tokens[id], a->lengths[id]) == 0);
}

static void word_vocabulary(void) {
  /* a:3; b c x y: 2 each; Zed z: 1 each ('Z' sorts before 'z'). */
  static const char tsv[] = "b a c\tx y\na b\ty\na\tz x\nZed\tc\n";
  CHECK(write_file(path, tsv, sizeof tsv - 1) == 0);
  tfm_vocab vocab = {0}, read = {0}, small = {0};
  CHECK_OK(tfm_vocab_build_pairs(&vocab, path, 0));
  CHECK_OK(tfm_vocab_write(&vocab, vocab_path));
  static const char expected[] = "<pad>\n<bos>\n<eos>\n<unk>\na\nb\nc\nx\ny\nZed\nz\n";
  check_file_text(vocab_path, expected, sizeof expected - 1);
  CHECK_OK(tfm_vocab_read(&read, vocab_path));
  check_same_vocab(&vocab, &read);
  CHECK(tfm_vocab_find(&read, "Zed", 3) == 9);
  CHECK(tfm_vocab_find(&read, "<unk>", 5) == TFM_UNK);
  CHECK(tfm_vocab_find(&read, "Ze", 2) == -1);

  CHECK_OK(tfm_vocab_build_pairs(&small, path, 6));
  CHECK(small.count == 6 && tfm_vocab_find(&small, "b", 1) == 5 &&
        tfm_vocab_find(&small, "c", 1) == -1);
  CHECK_REFUSED(tfm_vocab_build_pairs(&small, path, 3), path, "no room for the 4 specials");
  CHECK(small.count == 6); /* a refusal leaves the vocabulary as it was */

  char text[64];
  size_t length;
  int32_t ids[] = {TFM_BOS, 4, TFM_PAD, 9, TFM_UNK, TFM_EOS, 5};
  CHECK_OK(tfm_vocab_decode(&read, ids, 7, " ", text, sizeof text, &length));
  CHECK(strcmp(text, "a Zed <unk>") == 0 && length == 11);
  CHECK_OK(tfm_vocab_decode(&read, ids + 6, 1, " ", text, sizeof text, NULL));
  CHECK(strcmp(text, "b") == 0);
  CHECK_OK(tfm_vocab_decode(&read, ids + 5, 2, " ", text, sizeof text, NULL));
  CHECK(strcmp(text, "") == 0);
  CHECK_REFUSED(tfm_vocab_decode(&read, ids, 7, " ", text, 11, NULL), NULL, "does not fit");
  int32_t outside[] = {4, 11};
  CHECK_REFUSED(tfm_vocab_decode(&read, outside, 2, " ", text, sizeof text, NULL), NULL,
                "id 11 is outside the vocabulary of 11 tokens");
  tfm_vocab_free(&vocab);
  tfm_vocab_free(&read);
  tfm_vocab_free(&small);
}

static void byte_vocabulary(void) {
  /* 'a' twice, every other byte once: they follow in byte order. */
  static const char text[] = "a\nb\tc\\ \0\xff\xc3\xa9" "a";
  CHECK(write_file(path, text, sizeof text - 1) == 0);
  tfm_vocab vocab = {0}, read = {0};
  CHECK_OK(tfm_vocab_build_bytes(&vocab, path));
  CHECK_OK(tfm_vocab_write(&vocab, vocab_path));
  static const char expected[] = "<pad>\n<bos>\n<eos>\n<unk>\na\n\\x00\n\\x09\n\\x0a\n\\x20\n"
                                 "\\\\\nb\nc\n\xa9\n\xc3\n\xff\n";
  check_file_text(vocab_path, expected, sizeof expected - 1);
  CHECK_OK(tfm_vocab_read(&read, vocab_path));
  check_same_vocab(&vocab, &read);
  CHECK(tfm_vocab_find(&read, "\0", 1) == 5 && tfm_vocab_find(&read, "\n", 1) == 7);

  int32_t ids[] = {7, 5, 4, 14};
  char decoded[8];
  size_t length;
  CHECK_OK(tfm_vocab_decode(&read, ids, 4, "", decoded, sizeof decoded, &length));
  CHECK(length == 4 && memcmp(decoded, "\n\0a\xff", 5) == 0);
  tfm_vocab_free(&vocab);
  tfm_vocab_free(&read);
}

/* Many distinct tokens exercise the hash table's growth. */
static void large_vocabulary(void) {
  FILE *file = fopen(path, "w");
  CHECK(file != NULL);
  if (!file) return;
  for (int i = 0; i < 5000; i++) fprintf(file, "s%d\tt%d t%d\n", i, i % 100, i);
  fclose(file);
  tfm_vocab vocab = {0}, read = {0};
  CHECK_OK(tfm_vocab_build_pairs(&vocab, path, 0));
  CHECK(vocab.count == 4 + 5000 + 5000);
  /* t0..t99 occur 51 times, so they come first, in byte order: t0 first, t99 last. */
  CHECK(tfm_vocab_find(&vocab, "t0", 2) == 4);
  CHECK(tfm_vocab_find(&vocab, "t99", 3) == 4 + 99);
  CHECK_OK(tfm_vocab_write(&vocab, vocab_path));
  CHECK_OK(tfm_vocab_read(&read, vocab_path));
  check_same_vocab(&vocab, &read);
  for (int i = 0; i < 5000; i += 499) {
    char token[16];
    int n = snprintf(token, sizeof token, "s%d", i);
    int32_t id = tfm_vocab_find(&read, token, (size_t)n);
    CHECK(id >= 0 && strcmp(read.tokens[id], token) == 0);
  }
  tfm_vocab_free(&vocab);
  tfm_vocab_free(&read);
}

int main(void) {
  scratch_path(path, sizeof path, "data.txt");
  scratch_path(vocab_path, sizeof vocab_path, "vocab.txt");
  word_vocabulary();
  byte_vocabulary();
  large_vocabulary();
  scratch_dir_remove();
  return check_result("data.vocab");
}
