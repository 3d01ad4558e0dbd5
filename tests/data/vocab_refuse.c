/* Malformed vocabulary files are refused with file:line and the reason, and
 * leave the vocabulary that was there untouched. */
#include "check.h"
#include "tfmrt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SPECIALS "<pad>\n<bos>\n<eos>\n<unk>\n"

static char path[512], located[600];
static tfm_vocab vocab;

static int read_text(const char *text) {
  CHECK(write_file(path, text, strlen(text)) == 0);
  return tfm_vocab_read(&vocab, path);
}

static const char *at_line(int line) {
  snprintf(located, sizeof located, "%s:%d: ", path, line);
  return located;
}

int main(void) {
  scratch_path(path, sizeof path, "vocab.txt");
  CHECK_OK(read_text(SPECIALS "kept\n"));
  CHECK(vocab.count == 5);

  CHECK_REFUSED(read_text(""), path, "empty file");
  CHECK_REFUSED(read_text("<pad>\n<bos>\n"), path, "ends after line 2");
  CHECK_REFUSED(read_text("<pad>\n<bos>\n<unk>\n<eos>\n"), at_line(3), "expected <eos>");
  CHECK_REFUSED(read_text("a\n" SPECIALS), at_line(1), "expected <pad>");
  CHECK_REFUSED(read_text(SPECIALS "a\nb\na\n"), at_line(7),
                "duplicate token a (first on line 5)");
  CHECK_REFUSED(read_text(SPECIALS "a\n\\x61\n"), at_line(6),
                "duplicate token \\x61 (first on line 5)");
  CHECK_REFUSED(read_text(SPECIALS "<unk>\n"), at_line(5),
                "duplicate token <unk> (first on line 4)");
  CHECK_REFUSED(read_text(SPECIALS "a\n\nb\n"), at_line(6), "empty line");
  CHECK_REFUSED(read_text(SPECIALS "a\r\nb\r\n"), at_line(5), "raw control byte 0x0d");
  CHECK_REFUSED(read_text(SPECIALS "a b\n"), at_line(5), "raw control byte 0x20");
  CHECK_REFUSED(read_text(SPECIALS "a\tb\n"), at_line(5), "raw control byte 0x09");
  CHECK_REFUSED(read_text(SPECIALS "\\q\n"), at_line(5), "unknown escape");
  CHECK_REFUSED(read_text(SPECIALS "ok\nend\\\n"), at_line(6), "unknown escape");
  CHECK_REFUSED(read_text(SPECIALS "\\x4\n"), at_line(5), "\\x must be followed by two hex");
  CHECK_REFUSED(read_text(SPECIALS "\\xg0\n"), at_line(5), "\\x must be followed by two hex");

  size_t long_size = strlen(SPECIALS) + TFM_DATA_MAX_LINE + 2;
  char *long_line = malloc(long_size + 1);
  memcpy(long_line, SPECIALS, strlen(SPECIALS));
  memset(long_line + strlen(SPECIALS), 'x', TFM_DATA_MAX_LINE + 1);
  strcpy(long_line + long_size - 1, "\n");
  CHECK_REFUSED(read_text(long_line), at_line(5), "line longer than 65536 bytes");
  long_line[long_size - 2] = '\n'; /* exactly the longest line */
  long_line[long_size - 1] = '\0';
  CHECK_OK(read_text(long_line));
  CHECK(vocab.count == 5 && vocab.lengths[4] == TFM_DATA_MAX_LINE);
  free(long_line);
  CHECK_OK(read_text(SPECIALS "kept\n"));

  unsigned char noise[4096];
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < sizeof noise; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    noise[i] = (unsigned char)x;
  }
  CHECK(write_file(path, noise, sizeof noise) == 0);
  CHECK_REFUSED(tfm_vocab_read(&vocab, path), path, "");
  char missing[600];
  scratch_path(missing, sizeof missing, "no-such-vocab.txt");
  CHECK_REFUSED(tfm_vocab_read(&vocab, missing), missing, "cannot open");
  CHECK(vocab.count == 5 && strcmp(vocab.tokens[4], "kept") == 0);

  tfm_vocab_free(&vocab);
  scratch_dir_remove();
  return check_result("data.vocab_refuse");
}
