/* Shuffling depends only on (seed, epoch): a permutation each epoch, the same
 * one again for the same inputs (so a resumed run sees the same batches), and
 * pinned values so a change to the generator cannot go unnoticed. */
#include "check.h"
#include "tfmrt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { N = 1000, PAIRS = 10, ROWS = 3 };

static int is_permutation(const size_t *order, size_t n) {
  unsigned char *seen = calloc(n ? n : 1, 1);
  int ok = seen != NULL;
  for (size_t i = 0; i < n && ok; i++) {
    ok = order[i] < n && !seen[order[i]];
    if (ok) seen[order[i]] = 1;
  }
  free(seen);
  return ok;
}

static void orders(void) {
  static size_t a[N], b[N], c[N], d[N];
  tfm_data_shuffle(a, N, 7, 0);
  tfm_data_shuffle(b, N, 7, 0);
  tfm_data_shuffle(c, N, 7, 1);
  tfm_data_shuffle(d, N, 8, 0);
  CHECK(is_permutation(a, N) && is_permutation(c, N) && is_permutation(d, N));
  CHECK(memcmp(a, b, sizeof a) == 0);
  CHECK(memcmp(a, c, sizeof a) != 0 && memcmp(a, d, sizeof a) != 0);
  size_t fixed_points = 0;
  for (size_t i = 0; i < N; i++) fixed_points += a[i] == i;
  CHECK(fixed_points < 10); /* about 1 expected for a random permutation */

  size_t pinned[8];
  tfm_data_shuffle(pinned, 8, 1, 0);
  static const size_t expected[8] = {4, 2, 5, 1, 7, 3, 0, 6};
  CHECK(memcmp(pinned, expected, sizeof pinned) == 0);
  tfm_data_shuffle(pinned, 1, 1, 0);
  CHECK(pinned[0] == 0);
  tfm_data_shuffle(NULL, 0, 1, 0);
}

/* The source id of each row of training batch `step`. */
static void batch_sources(tfm_pairs *pairs, uint64_t seed, uint64_t step, int32_t *sources) {
  int32_t src[ROWS * 2], tgt_in[ROWS * 3], tgt_out[ROWS * 3];
  tfm_pair_batch batch = {ROWS, src, tgt_in, tgt_out};
  CHECK_OK(tfm_pairs_train_batch(pairs, seed, step, &batch));
  for (size_t row = 0; row < ROWS; row++) sources[row] = src[row * 2];
}

static void training_batches(void) {
  char path[512];
  scratch_path(path, sizeof path, "pairs.tsv");
  FILE *file = fopen(path, "w");
  CHECK(file != NULL);
  if (!file) return;
  for (int i = 0; i < PAIRS; i++) fprintf(file, "s%d\tt%d\n", i, i);
  fclose(file);
  tfm_vocab vocab = {0};
  tfm_pairs pairs = {0}, resumed = {0};
  CHECK_OK(tfm_vocab_build_pairs(&vocab, path, 0));
  CHECK_OK(tfm_pairs_load(&pairs, path, &vocab, 2, 3));
  CHECK_OK(tfm_pairs_load(&resumed, path, &vocab, 2, 3));
  CHECK(tfm_pairs_batch_count(&pairs, ROWS) == 4);

  /* Epoch 0 is steps 0-3: every pair once, then the first two again. */
  int32_t epoch0[4 * ROWS], epoch1[4 * ROWS];
  for (uint64_t step = 0; step < 4; step++) batch_sources(&pairs, 5, step, epoch0 + step * ROWS);
  for (uint64_t step = 0; step < 4; step++)
    batch_sources(&pairs, 5, 4 + step, epoch1 + step * ROWS);
  int distinct = 1;
  for (size_t i = 0; i < PAIRS; i++)
    for (size_t j = 0; j < i; j++) distinct &= epoch0[i] != epoch0[j];
  CHECK(distinct);
  CHECK(epoch0[10] == epoch0[0] && epoch0[11] == epoch0[1]);
  CHECK(memcmp(epoch0, epoch1, sizeof epoch0) != 0);

  /* A fresh loader asked for step 6, then 1, gives what the first one gave. */
  int32_t again[ROWS];
  batch_sources(&resumed, 5, 6, again);
  CHECK(memcmp(again, epoch1 + 2 * ROWS, sizeof again) == 0);
  batch_sources(&resumed, 5, 1, again);
  CHECK(memcmp(again, epoch0 + ROWS, sizeof again) == 0);
  int32_t other_seed[4 * ROWS];
  for (uint64_t step = 0; step < 4; step++)
    batch_sources(&resumed, 6, step, other_seed + step * ROWS);
  CHECK(memcmp(other_seed, epoch0, sizeof epoch0) != 0);

  tfm_pairs empty = {0};
  int32_t src[ROWS * 2];
  tfm_pair_batch batch = {ROWS, src, NULL, NULL};
  CHECK_REFUSED(tfm_pairs_train_batch(&empty, 1, 0, &batch), NULL, "none loaded");
  tfm_pairs_free(&pairs);
  tfm_pairs_free(&resumed);
  tfm_vocab_free(&vocab);
}

int main(void) {
  orders();
  training_batches();
  scratch_dir_remove();
  return check_result("data.shuffle");
}
