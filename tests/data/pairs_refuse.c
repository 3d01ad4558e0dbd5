/* Malformed parallel text is refused with file:line and the reason (the
 * loader and the vocabulary builder alike), never crashes, and leaves loaded
 * pairs as they were; bytes that are not UTF-8 are just bytes. */
#include "check.h"
#include "tfmrt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char path[512], located[600];
static tfm_vocab vocab;
static tfm_pairs pairs;

static void write_text(const char *text, size_t size) {
  CHECK(write_file(path, text, size) == 0);
}

static int load(const char *text) {
  write_text(text, strlen(text));
  return tfm_pairs_load(&pairs, path, &vocab, 4, 5);
}

static const char *at_line(int line) {
  snprintf(located, sizeof located, "%s:%d: ", path, line);
  return located;
}

static void refuse_malformed_lines(void) {
  CHECK_REFUSED(load(""), path, "empty file");
  CHECK_REFUSED(load("\n"), at_line(1), "empty line");
  CHECK_REFUSED(load("a\tb\n\nc\td\n"), at_line(2), "empty line");
  CHECK_REFUSED(load("a\tb\n\n"), at_line(2), "empty line");
  CHECK_REFUSED(load("a\tb\nab\n"), at_line(2), "no tab between source and target");
  CHECK_REFUSED(load("a\tb\tc\n"), at_line(1), "more than one tab");
  CHECK_REFUSED(load("\tb\n"), at_line(1), "empty source");
  CHECK_REFUSED(load("a\t\n"), at_line(1), "empty target");
  CHECK_REFUSED(load(" a\tb\n"), at_line(1), "source starts with a space");
  CHECK_REFUSED(load("a \tb\n"), at_line(1), "source ends with a space");
  CHECK_REFUSED(load("a\tb \n"), at_line(1), "target ends with a space");
  CHECK_REFUSED(load("a  b\tc\n"), at_line(1), "two spaces in a row in the source");
  CHECK_REFUSED(load("a\tb\nc\tb  c\n"), at_line(2), "two spaces in a row in the target");
  CHECK_REFUSED(load("a\tb\r\n"), at_line(1), "carriage return");
  CHECK_REFUSED(load("a <bos>\tb\n"), at_line(1), "the source uses the reserved token <bos>");
  CHECK_REFUSED(load("a\t<pad>\n"), at_line(1), "the target uses the reserved token <pad>");
  write_text("a\tb\na\0b\tc\n", 10);
  CHECK_REFUSED(tfm_pairs_load(&pairs, path, &vocab, 4, 5), at_line(2), "NUL byte");
}

static void refuse_overlong(void) {
  /* A line of exactly TFM_DATA_MAX_LINE bytes is read; one byte more is refused. */
  size_t size = 4 + TFM_DATA_MAX_LINE + 1;
  char *text = malloc(size + 2);
  memcpy(text, "a\tb\n", 4);
  memset(text + 4, 'x', TFM_DATA_MAX_LINE);
  memcpy(text + 4 + TFM_DATA_MAX_LINE - 2, "\tb\n", 4);
  write_text(text, size);
  CHECK_OK(tfm_pairs_load(&pairs, path, &vocab, 4, 5));
  CHECK(pairs.count == 2 && pairs.unknown_tokens == 1);
  memcpy(text + 4 + TFM_DATA_MAX_LINE - 2, "x\tb\n", 5);
  write_text(text, size + 1);
  CHECK_REFUSED(tfm_pairs_load(&pairs, path, &vocab, 4, 5), at_line(2),
                "line longer than 65536 bytes");
  CHECK_REFUSED(tfm_vocab_build_pairs(&vocab, path, 0), at_line(2), "line longer than");
  free(text);

  /* Pairs that do not fit are skipped and counted; a file of nothing else is refused. */
  CHECK_OK(load("a b c d e\tb\na\tb\na\ta b c d e\n"));
  CHECK(pairs.count == 1 && pairs.skipped_too_long == 2);
  CHECK_REFUSED(load("a b c d e\tb\na\ta b c d e\n"), path,
                "none of the 2 pairs fits src_len 4 and tgt_len 5");
}

static void refuse_garbage(void) {
  unsigned char noise[8192];
  uint32_t x = 88172645u;
  for (size_t i = 0; i < sizeof noise; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    noise[i] = (unsigned char)x;
  }
  write_text((const char *)noise, sizeof noise);
  CHECK_REFUSED(tfm_pairs_load(&pairs, path, &vocab, 4, 5), path, "");
  CHECK_REFUSED(tfm_vocab_build_pairs(&vocab, path, 0), path, "");
  /* Random bytes without NUL, newline, tab or space: one long line. */
  for (size_t i = 0; i < sizeof noise; i++)
    if (noise[i] <= ' ') noise[i] = '#';
  write_text((const char *)noise, sizeof noise);
  CHECK_REFUSED(tfm_pairs_load(&pairs, path, &vocab, 4, 5), at_line(1), "no tab");
  char missing[600];
  scratch_path(missing, sizeof missing, "no-such.tsv");
  CHECK_REFUSED(tfm_pairs_load(&pairs, missing, &vocab, 4, 5), missing, "cannot open");
  CHECK_REFUSED(tfm_vocab_build_pairs(&vocab, missing, 0), missing, "cannot open");
  CHECK_REFUSED(tfm_pairs_load(&pairs, path, &vocab, 0, 5), path, "leave no room for a pair");
  CHECK_REFUSED(tfm_pairs_load(&pairs, path, &vocab, 4, 1), path, "leave no room for a pair");
}

int main(void) {
  scratch_path(path, sizeof path, "pairs.tsv");
  /* Invalid UTF-8 is bytes: here it builds the vocabulary and loads. */
  static const char bytes[] = "\xff\xfe a\t\xc3\x28\nb\ta\n";
  write_text(bytes, sizeof bytes - 1);
  CHECK_OK(tfm_vocab_build_pairs(&vocab, path, 0));
  CHECK(vocab.count == 4 + 4 && tfm_vocab_find(&vocab, "\xff\xfe", 2) >= 0);
  CHECK_OK(tfm_pairs_load(&pairs, path, &vocab, 4, 5));
  CHECK(pairs.count == 2 && pairs.unknown_tokens == 0);

  refuse_malformed_lines();
  CHECK(pairs.count == 2); /* every refusal left the loaded pairs alone */
  write_text("a\tb\nab\n", 7);
  CHECK_REFUSED(tfm_vocab_build_pairs(&vocab, path, 0), at_line(2),
                "no tab between source and target");
  write_text("a\tb\n\n", 5);
  CHECK_REFUSED(tfm_vocab_build_pairs(&vocab, path, 0), at_line(2), "empty line");
  CHECK(vocab.count == 8);
  refuse_overlong();
  refuse_garbage();

  tfm_pairs_free(&pairs);
  tfm_vocab_free(&vocab);
  scratch_dir_remove();
  return check_result("data.pairs_refuse");
}
