/* The textlm corpus (the system's GPL-3 text or the committed fallback) and
 * the fallback itself load as character streams with a 10% held-out tail. */
#include "check.h"
#include "tfmrt.h"

#include <string.h>

enum { WINDOW = 64, ROWS = 4 };

static void check_corpus(const char *corpus) {
  char vocab_path[512];
  scratch_path(vocab_path, sizeof vocab_path, "vocab.txt");
  tfm_vocab vocab = {0}, read = {0};
  tfm_chars chars = {0};
  CHECK_OK(tfm_vocab_build_bytes(&vocab, corpus));
  CHECK_OK(tfm_vocab_write(&vocab, vocab_path));
  CHECK_OK(tfm_vocab_read(&read, vocab_path));
  CHECK(read.count == vocab.count && vocab.count > TFM_SPECIALS + 26);
  CHECK(vocab.lengths[TFM_SPECIALS] == 1 && vocab.tokens[TFM_SPECIALS][0] == ' ');
  CHECK_OK(tfm_chars_load(&chars, corpus, &read, WINDOW, 0.1));
  CHECK(chars.count >= 3000 && chars.unknown_bytes == 0);
  CHECK(chars.train_count == chars.count - (size_t)((double)chars.count * 0.1));
  CHECK(tfm_chars_eval_batch_count(&chars, ROWS) > 0);

  int32_t tokens[ROWS * WINDOW], targets[ROWS * WINDOW];
  CHECK_OK(tfm_chars_train_batch(&chars, 1, 0, ROWS, tokens, targets));
  for (size_t row = 0; row < ROWS; row++)
    CHECK(memcmp(tokens + row * WINDOW + 1, targets + row * WINDOW,
                 (WINDOW - 1) * sizeof *tokens) == 0);
  char text[WINDOW + 1];
  CHECK_OK(tfm_vocab_decode(&read, tokens, WINDOW, "", text, sizeof text, NULL));
  printf("%s: %zu bytes, %zu tokens; a window: \"%.*s\"\n", corpus, chars.count, read.count,
         (int)strcspn(text, "\n"), text);
  tfm_chars_free(&chars);
  tfm_vocab_free(&vocab);
  tfm_vocab_free(&read);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TEXT...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; i++) check_corpus(argv[i]);
  scratch_dir_remove();
  return check_result("examples.textlm");
}
