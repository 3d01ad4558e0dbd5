/* numbers_gen: the default 20000 / 1000 split, every line "words<TAB>digits"
 * of one number, no number twice or in both files, the same files for the
 * same seed, the same test set for every seed, and data the loaders accept. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "number_words.h"
#include "tfmrt.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *generator;

static int run_generator(const char *dir, const char *options) {
  char command[2048];
  snprintf(command, sizeof command, "'%s' '%s' %s", generator, dir, options);
  int status = system(command);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void make_dir(char *dir, size_t size, const char *name) {
  scratch_path(dir, size, name);
  CHECK(mkdir(dir, 0700) == 0);
}

/* scratch_dir_remove() removes files only: the generator's folders go first. */
static void remove_run(const char *dir) {
  char path[700];
  snprintf(path, sizeof path, "%s/train.tsv", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/test.tsv", dir);
  remove(path);
  rmdir(dir);
}

static int same_file(const char *a, const char *b) {
  size_t size_a, size_b;
  unsigned char *data_a = read_file(a, &size_a), *data_b = read_file(b, &size_b);
  int same = data_a && data_b && size_a == size_b && memcmp(data_a, data_b, size_a) == 0;
  free(data_a);
  free(data_b);
  return same;
}

/* Checks every line of dir/name and marks its number in `seen` (1 for test, 2 for train). */
static size_t check_lines(const char *dir, const char *name, unsigned char mark,
                          unsigned char *seen) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *file = fopen(path, "r");
  CHECK(file != NULL);
  if (!file) return 0;
  char line[256], words[128], digits[16], expected[160];
  size_t lines = 0;
  while (fgets(line, sizeof line, file)) {
    lines++;
    char *tab = strchr(line, '\t');
    CHECK(tab != NULL);
    if (!tab) break;
    size_t n = 0;
    for (const char *c = tab + 1; *c && *c != '\n'; c++)
      if (*c != ' ' && n + 1 < sizeof digits) digits[n++] = *c;
    digits[n] = '\0';
    unsigned number = (unsigned)strtoul(digits, NULL, 10);
    CHECK(number < NUMBER_WORDS_LIMIT && number_words(number, words, sizeof words) == 0);
    snprintf(expected, sizeof expected, "%s\t", words);
    for (size_t i = 0; digits[i]; i++)
      snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%c",
               i ? " " : "", digits[i]);
    strcat(expected, "\n");
    if (strcmp(line, expected) != 0) {
      fprintf(stderr, "%s:%zu: \"%s\", expected \"%s\"\n", path, lines, line, expected);
      check_failures++;
    }
    CHECK(seen[number] == 0); /* not in the other file, nor earlier in this one */
    seen[number] = mark;
  }
  fclose(file);
  return lines;
}

static void check_loadable(const char *dir) {
  char train[700], test[700];
  snprintf(train, sizeof train, "%s/train.tsv", dir);
  snprintf(test, sizeof test, "%s/test.tsv", dir);
  tfm_vocab vocab = {0};
  tfm_pairs pairs = {0};
  CHECK_OK(tfm_vocab_build_pairs(&vocab, train, 0));
  /* 31 words (20 units, 8 tens, hundred, thousand, and) and 10 digits */
  CHECK(vocab.count == 4 + 31 + 10);
  CHECK_OK(tfm_pairs_load(&pairs, train, &vocab, 9, 7)); /* the longest: 9 words, 6 digits */
  CHECK(pairs.count == 20000 && pairs.skipped_too_long == 0);
  CHECK_OK(tfm_pairs_load(&pairs, test, &vocab, 9, 7));
  CHECK(pairs.count == 1000 && pairs.skipped_too_long == 0 && pairs.unknown_tokens == 0);
  tfm_pairs_free(&pairs);
  tfm_vocab_free(&vocab);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s NUMBERS_GEN\n", argv[0]);
    return 2;
  }
  generator = argv[1];
  char first[600], second[600], other_seed[600], a[700], b[700];
  make_dir(first, sizeof first, "first");
  make_dir(second, sizeof second, "second");
  make_dir(other_seed, sizeof other_seed, "seed2");
  CHECK(run_generator(first, "") == 0);
  CHECK(run_generator(second, "--seed 1") == 0);
  CHECK(run_generator(other_seed, "--seed 2") == 0);

  unsigned char *seen = calloc(NUMBER_WORDS_LIMIT, 1);
  CHECK(check_lines(first, "test.tsv", 1, seen) == 1000);
  CHECK(check_lines(first, "train.tsv", 2, seen) == 20000);
  size_t short_numbers = 0;
  for (unsigned number = 0; number < 1000; number++) short_numbers += seen[number] == 2;
  CHECK(short_numbers > 950); /* digit counts are drawn uniformly for training */
  free(seen);
  check_loadable(first);

  snprintf(a, sizeof a, "%s/train.tsv", first);
  snprintf(b, sizeof b, "%s/train.tsv", second);
  CHECK(same_file(a, b));
  snprintf(b, sizeof b, "%s/train.tsv", other_seed);
  CHECK(!same_file(a, b));
  snprintf(a, sizeof a, "%s/test.tsv", first);
  snprintf(b, sizeof b, "%s/test.tsv", second);
  CHECK(same_file(a, b));
  snprintf(b, sizeof b, "%s/test.tsv", other_seed);
  CHECK(same_file(a, b));

  CHECK(run_generator(first, "--train 12 --test 3") == 0);
  seen = calloc(NUMBER_WORDS_LIMIT, 1);
  CHECK(check_lines(first, "test.tsv", 1, seen) == 3);
  CHECK(check_lines(first, "train.tsv", 2, seen) == 12);
  free(seen);
  CHECK(run_generator(first, "--train x") == 2);
  CHECK(run_generator(first, "--train 400000 --test 200000") == 2);
  CHECK(run_generator(first, "--bogus") == 2);

  remove_run(first);
  remove_run(second);
  remove_run(other_seed);
  scratch_dir_remove();
  return check_result("examples.numbers_files");
}
