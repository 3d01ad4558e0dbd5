/* Batches of a small hand-written TSV against hand-computed arrays: <bos> in
 * tgt_in, <eos> in tgt_out, padding 0, pairs too long skipped and counted,
 * unknown words as <unk>, the last evaluation batch padded. */
#include "check.h"
#include "tfmrt.h"

#include <stdint.h>
#include <string.h>

enum { S = 4, T = 5 };

/* ids: the 4, cat 5, sat 6, le 7, chat 8, s'est 9, assis 10, dog 11 */
static const char vocab_text[] = "<pad>\n<bos>\n<eos>\n<unk>\nthe\ncat\nsat\nle\nchat\ns'est\n"
                                 "assis\ndog\n";
static const char tsv[] = "the cat sat\tle chat s'est assis\n" /* pair 0: the longest that fits */
                          "the dog\tle chien\n"                /* pair 1: chien is unknown */
                          "the cat sat the cat\tle chat\n"     /* source of 5 > S: skipped */
                          "cat\tle chat s'est assis assis\n"   /* target of 5 + 1 > T: skipped */
                          "sat\tassis\n"                       /* pair 2 */
                          "<unk> cat\tle chat";                /* pair 3, no final newline */

static void check_ints(const int32_t *got, const int32_t *expected, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (got[i] != expected[i]) {
      fprintf(stderr, "%s[%zu] is %d, expected %d\n", what, i, (int)got[i], (int)expected[i]);
      check_failures++;
      return;
    }
}

static void fill_garbage(int32_t *a, size_t n) {
  for (size_t i = 0; i < n; i++) a[i] = -7; /* every element must be written */
}

int main(void) {
  char vocab_path[512], path[512];
  scratch_path(vocab_path, sizeof vocab_path, "vocab.txt");
  scratch_path(path, sizeof path, "pairs.tsv");
  CHECK(write_file(vocab_path, vocab_text, sizeof vocab_text - 1) == 0);
  CHECK(write_file(path, tsv, sizeof tsv - 1) == 0);
  tfm_vocab vocab = {0};
  tfm_pairs pairs = {0};
  CHECK_OK(tfm_vocab_read(&vocab, vocab_path));
  CHECK_OK(tfm_pairs_load(&pairs, path, &vocab, S, T));
  CHECK(pairs.count == 4 && pairs.skipped_too_long == 2 && pairs.unknown_tokens == 1);
  CHECK(tfm_pairs_batch_count(&pairs, 2) == 2 && tfm_pairs_batch_count(&pairs, 3) == 2);

  int32_t src[3 * S], tgt_in[3 * T], tgt_out[3 * T];
  tfm_pair_batch batch = {2, src, tgt_in, tgt_out};
  size_t filled;
  fill_garbage(src, 3 * S), fill_garbage(tgt_in, 3 * T), fill_garbage(tgt_out, 3 * T);
  CHECK_OK(tfm_pairs_eval_batch(&pairs, 0, &batch, &filled));
  CHECK(filled == 2);
  check_ints(src, (const int32_t[]){4, 5, 6, 0, /**/ 4, 11, 0, 0}, 2 * S, "batch 0 src");
  check_ints(tgt_in, (const int32_t[]){1, 7, 8, 9, 10, /**/ 1, 7, 3, 0, 0}, 2 * T,
             "batch 0 tgt_in");
  check_ints(tgt_out, (const int32_t[]){7, 8, 9, 10, 2, /**/ 7, 3, 2, 0, 0}, 2 * T,
             "batch 0 tgt_out");
  CHECK_OK(tfm_pairs_eval_batch(&pairs, 1, &batch, &filled));
  CHECK(filled == 2);
  check_ints(src, (const int32_t[]){6, 0, 0, 0, /**/ 3, 5, 0, 0}, 2 * S, "batch 1 src");
  check_ints(tgt_in, (const int32_t[]){1, 10, 0, 0, 0, /**/ 1, 7, 8, 0, 0}, 2 * T,
             "batch 1 tgt_in");
  check_ints(tgt_out, (const int32_t[]){10, 2, 0, 0, 0, /**/ 7, 8, 2, 0, 0}, 2 * T,
             "batch 1 tgt_out");
  CHECK_REFUSED(tfm_pairs_eval_batch(&pairs, 2, &batch, &filled), NULL, "batch 2 of 2");

  /* Three rows: the second batch holds the last pair and two rows of padding. */
  batch.rows = 3;
  fill_garbage(src, 3 * S), fill_garbage(tgt_in, 3 * T), fill_garbage(tgt_out, 3 * T);
  CHECK_OK(tfm_pairs_eval_batch(&pairs, 1, &batch, &filled));
  CHECK(filled == 1);
  check_ints(src, (const int32_t[]){3, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 3 * S, "padded src");
  check_ints(tgt_out, (const int32_t[]){7, 8, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 3 * T,
             "padded tgt_out");

  /* Only the source, as translation needs it; a NULL array stays unwritten. */
  tfm_pair_batch source_only = {1, src, NULL, NULL};
  fill_garbage(tgt_in, 3 * T);
  CHECK_OK(tfm_pairs_eval_batch(&pairs, 2, &source_only, &filled));
  check_ints(src, (const int32_t[]){6, 0, 0, 0}, S, "source-only src");
  CHECK(tgt_in[0] == -7);

  /* A training batch holds rows of the pairs above. */
  batch.rows = 3;
  CHECK_OK(tfm_pairs_train_batch(&pairs, 1, 0, &batch));
  static const int32_t first_source[4] = {4, 4, 6, 3};
  for (size_t row = 0; row < 3; row++) {
    int known = 0;
    for (size_t pair = 0; pair < 4; pair++) known |= src[row * S] == first_source[pair];
    CHECK(known && tgt_in[row * T] == TFM_BOS);
  }

  char text[64];
  CHECK_OK(tfm_vocab_decode(&vocab, (const int32_t[]){7, 8, 9, 10, 2}, T, " ", text,
                            sizeof text, NULL));
  CHECK(strcmp(text, "le chat s'est assis") == 0);
  CHECK_OK(tfm_vocab_decode(&vocab, (const int32_t[]){7, 3, 2, 0, 0}, T, " ", text, sizeof text,
                            NULL));
  CHECK(strcmp(text, "le <unk>") == 0);

  tfm_pairs_free(&pairs);
  tfm_vocab_free(&vocab);
  scratch_dir_remove();
  return check_result("data.pairs_batch");
}
