/* seq2seq_gen OUTDIR [--seed N] [--train N] [--test N]
 *
 * Writes OUTDIR/train.tsv and OUTDIR/test.tsv of a synthetic translation task
 * (README.md): a source is a mode word then 3..MAX_WORDS words; the target
 * is every word translated by a fixed dictionary, in an order the mode word
 * chooses: "keep" (as is), "rotate" (the first word moved to the end) or
 * "swap" (adjacent pairs exchanged). The mode word is read once at the start
 * and governs every later output position, and "rotate" carries the first
 * word to the last position (long-range dependencies); "swap" and "rotate"
 * reorder. The test set comes from a fixed stream,
 * so every seed is scored on the same pairs; no source is in both files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS 24     /* source and target dictionary size */
#define MIN_WORDS 3
#define MAX_WORDS 24 /* the longest target; sources have one more word */
#define TEST_STREAM_SEED 0x7365713273657131ull
#define HASH_SLOTS (1u << 20)

static const char *const modes[3] = {"keep", "rotate", "swap"};

static uint64_t next_random(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static unsigned uniform_below(uint64_t *state, unsigned n) {
  return (unsigned)(next_random(state) % n);
}

typedef struct Sentence {
  unsigned mode, length, words[MAX_WORDS];
} Sentence;

static void draw(uint64_t *state, Sentence *s) {
  s->mode = uniform_below(state, 3);
  s->length = MIN_WORDS + uniform_below(state, MAX_WORDS - MIN_WORDS + 1);
  for (unsigned i = 0; i < s->length; i++) s->words[i] = uniform_below(state, WORDS);
}

/* The target word order: position i of the target translates source word
 * order[i]. */
static void target_order(const Sentence *s, unsigned *order) {
  for (unsigned i = 0; i < s->length; i++) {
    if (s->mode == 0) order[i] = i;
    else if (s->mode == 1) order[i] = (i + 1) % s->length;
    else order[i] = (i % 2 == 0) ? (i + 1 < s->length ? i + 1 : i) : i - 1;
  }
}

static uint64_t sentence_hash(const Sentence *s) {
  uint64_t h = 1469598103934665603ull ^ s->mode;
  for (unsigned i = 0; i < s->length; i++) h = (h ^ (s->words[i] + 1)) * 1099511628211ull;
  return (h ^ s->length) * 1099511628211ull;
}

/* Open addressing over hashes: a source is drawn at most once overall (a
 * hash collision only drops a pair that would have been new). */
static int seen_before(uint64_t *slots, uint64_t h) {
  if (h == 0) h = 1;
  for (uint64_t i = h & (HASH_SLOTS - 1);; i = (i + 1) & (HASH_SLOTS - 1)) {
    if (slots[i] == h) return 1;
    if (slots[i] == 0) {
      slots[i] = h;
      return 0;
    }
  }
}

static int write_pairs(const char *path, size_t count, uint64_t seed, uint64_t *slots) {
  FILE *file = fopen(path, "w");
  if (!file) {
    perror(path);
    return 1;
  }
  uint64_t state = seed;
  for (size_t n = 0; n < count; n++) {
    Sentence s;
    do draw(&state, &s);
    while (seen_before(slots, sentence_hash(&s)));
    unsigned order[MAX_WORDS];
    target_order(&s, order);
    fputs(modes[s.mode], file);
    for (unsigned i = 0; i < s.length; i++) fprintf(file, " %c%c", 'a' + s.words[i] % 12, 'a' + s.words[i] / 12);
    fputc('\t', file);
    /* The dictionary: source word w becomes target word (7 w + 5) mod WORDS,
     * written in capitals so that the two sides share no token. */
    for (unsigned i = 0; i < s.length; i++) {
      unsigned w = (7 * s.words[order[i]] + 5) % WORDS;
      fprintf(file, i ? " %c%c" : "%c%c", 'A' + w % 12, 'A' + w / 12);
    }
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
  unsigned long long seed = 1, train = 20000, test = 500;
  const char *dir = NULL;
  for (int i = 1; i < argc; i++) {
    unsigned long long *option = strcmp(argv[i], "--seed") == 0    ? &seed
                                 : strcmp(argv[i], "--train") == 0 ? &train
                                 : strcmp(argv[i], "--test") == 0  ? &test
                                                                   : NULL;
    if (option) {
      if (i + 1 == argc || parse_count(argv[++i], option)) {
        fprintf(stderr, "seq2seq_gen: %s needs a number\n", argv[i - 1]);
        return 2;
      }
    } else if (!dir && argv[i][0] != '-') {
      dir = argv[i];
    } else {
      fprintf(stderr, "seq2seq_gen: unexpected argument %s\n", argv[i]);
      return 2;
    }
  }
  if (!dir) {
    fprintf(stderr, "usage: seq2seq_gen OUTDIR [--seed N] [--train N] [--test N]\n");
    return 2;
  }
  if (train + test > HASH_SLOTS / 2) {
    fprintf(stderr, "seq2seq_gen: at most %u pairs in train and test together\n", HASH_SLOTS / 2);
    return 2;
  }
  uint64_t *slots = calloc(HASH_SLOTS, sizeof *slots);
  if (!slots) {
    fprintf(stderr, "seq2seq_gen: out of memory\n");
    return 1;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/test.tsv", dir);
  int failed = write_pairs(path, (size_t)test, TEST_STREAM_SEED, slots);
  snprintf(path, sizeof path, "%s/train.tsv", dir);
  if (!failed) failed = write_pairs(path, (size_t)train, (uint64_t)seed, slots);
  free(slots);
  return failed;
}
