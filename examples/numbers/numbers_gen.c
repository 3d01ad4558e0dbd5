/* numbers_gen OUTDIR [--seed N] [--train N] [--test N]
 *
 * Writes OUTDIR/train.tsv and OUTDIR/test.tsv for the numbers task: lines
 * "<english words>\t<digits separated by spaces>". The test numbers come from
 * a fixed stream, uniform over 0..999999, so every seed is scored on the same
 * test set; the training numbers come from --seed, a digit count 1..6 first
 * and then a number with that many digits, so short numbers are well covered.
 * No number is in both files, nor twice in one. */
#include "number_words.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_STREAM_SEED 0x6e756d6265727331ull /* fixed: the test set never changes */
#define MAX_DRAWN (NUMBER_WORDS_LIMIT / 2)       /* keeps rejection sampling quick */

static uint64_t next_random(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static unsigned uniform_below(uint64_t *state, unsigned n) {
  return (unsigned)(next_random(state) % n);
}

static unsigned uniform_number(uint64_t *state) {
  return uniform_below(state, NUMBER_WORDS_LIMIT);
}

static unsigned number_of_uniform_length(uint64_t *state) {
  static const unsigned powers[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};
  unsigned digits = 1 + uniform_below(state, 6);
  unsigned low = digits == 1 ? 0 : powers[digits - 1];
  return low + uniform_below(state, powers[digits] - low);
}

/* Writes `count` numbers not yet drawn, drawing each with `draw`. */
static int write_numbers(const char *path, size_t count, uint64_t seed,
                         unsigned (*draw)(uint64_t *), unsigned char *drawn) {
  FILE *file = fopen(path, "w");
  if (!file) {
    perror(path);
    return 1;
  }
  uint64_t state = seed;
  for (size_t i = 0; i < count; i++) {
    unsigned number;
    do number = draw(&state);
    while (drawn[number]);
    drawn[number] = 1;
    char words[128], digits[16];
    number_words(number, words, sizeof words);
    snprintf(digits, sizeof digits, "%u", number);
    fputs(words, file);
    fputc('\t', file);
    for (size_t d = 0; digits[d]; d++) fprintf(file, d ? " %c" : "%c", digits[d]);
    fputc('\n', file);
  }
  if (fclose(file) != 0) {
    perror(path);
    return 1;
  }
  return 0;
}

static int parse_count(const char *text, unsigned long long *value) {
  char *end;
  *value = strtoull(text, &end, 10);
  return *text >= '0' && *text <= '9' && *end == '\0' ? 0 : -1;
}

int main(int argc, char **argv) {
  unsigned long long seed = 1, train = 20000, test = 1000;
  const char *dir = NULL;
  for (int i = 1; i < argc; i++) {
    unsigned long long *option = strcmp(argv[i], "--seed") == 0    ? &seed
                                 : strcmp(argv[i], "--train") == 0 ? &train
                                 : strcmp(argv[i], "--test") == 0  ? &test
                                                                   : NULL;
    if (option) {
      if (i + 1 == argc || parse_count(argv[++i], option)) {
        fprintf(stderr, "numbers_gen: %s needs a number\n", argv[i - 1]);
        return 2;
      }
    } else if (!dir && argv[i][0] != '-') {
      dir = argv[i];
    } else {
      fprintf(stderr, "numbers_gen: unexpected argument %s\n", argv[i]);
      return 2;
    }
  }
  if (!dir) {
    fprintf(stderr, "usage: numbers_gen OUTDIR [--seed N] [--train N] [--test N]\n");
    return 2;
  }
  if (train > MAX_DRAWN || test > MAX_DRAWN - train) {
    fprintf(stderr, "numbers_gen: at most %u numbers in train and test together\n", MAX_DRAWN);
    return 2;
  }
  unsigned char *drawn = calloc(NUMBER_WORDS_LIMIT, 1);
  if (!drawn) {
    fprintf(stderr, "numbers_gen: out of memory\n");
    return 1;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/test.tsv", dir);
  int failed = write_numbers(path, (size_t)test, TEST_STREAM_SEED, uniform_number, drawn);
  snprintf(path, sizeof path, "%s/train.tsv", dir);
  if (!failed)
    failed = write_numbers(path, (size_t)train, (uint64_t)seed, number_of_uniform_length, drawn);
  free(drawn);
  return failed;
}
