/* The number grammar: spot checks of each rule, and every number 0..999999
 * read back from its words by an independent reader, so no two numbers share
 * words and every source fits in 9 tokens. */
#include "number_words.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void check_words(unsigned number, const char *expected) {
  char words[128];
  if (number_words(number, words, sizeof words) != 0 || strcmp(words, expected) != 0) {
    fprintf(stderr, "%u: \"%s\", expected \"%s\"\n", number, words, expected);
    failures++;
  }
}

/* Every word with its value; "hundred" and "thousand" multiply, "and" is 0. */
static const struct {
  const char *word;
  long value;
} vocabulary[] = {
    {"zero", 0},      {"one", 1},        {"two", 2},        {"three", 3},      {"four", 4},
    {"five", 5},      {"six", 6},        {"seven", 7},      {"eight", 8},      {"nine", 9},
    {"ten", 10},      {"eleven", 11},    {"twelve", 12},    {"thirteen", 13},  {"fourteen", 14},
    {"fifteen", 15},  {"sixteen", 16},   {"seventeen", 17}, {"eighteen", 18},  {"nineteen", 19},
    {"twenty", 20},   {"thirty", 30},    {"forty", 40},     {"fifty", 50},     {"sixty", 60},
    {"seventy", 70},  {"eighty", 80},    {"ninety", 90},    {"hundred", 100},  {"thousand", 1000},
    {"and", 0}};

static long word_value(const char *word, size_t length) {
  for (size_t i = 0; i < sizeof vocabulary / sizeof *vocabulary; i++)
    if (vocabulary[i].word[0] == word[0] && strlen(vocabulary[i].word) == length &&
        memcmp(vocabulary[i].word, word, length) == 0)
      return vocabulary[i].value;
  return -1;
}

/* Reads words back: units and tens add, "hundred" multiplies the group,
 * "thousand" closes the first group, "and" only right after "thousand".
 * Returns -1 for anything else. Sets *tokens to the word count. */
static long read_words(const char *words, int *tokens) {
  long total = 0, group = 0, previous = -1;
  *tokens = 0;
  for (const char *word = words; *word;) {
    size_t length = strcspn(word, " ");
    long value = word_value(word, length);
    bool is_and = length == 3 && memcmp(word, "and", 3) == 0;
    if (value < 0 || (is_and && previous != 1000)) return -1;
    if (value == 100) group *= 100;
    else if (value == 1000) total = group * 1000, group = 0;
    else group += value;
    previous = value;
    ++*tokens;
    word += length + (word[length] == ' ');
  }
  return total + group;
}

int main(void) {
  check_words(0, "zero");
  check_words(7, "seven");
  check_words(13, "thirteen");
  check_words(20, "twenty");
  check_words(21, "twenty one");
  check_words(99, "ninety nine");
  check_words(100, "one hundred");
  check_words(101, "one hundred one");
  check_words(115, "one hundred fifteen");
  check_words(312, "three hundred twelve");
  check_words(1000, "one thousand");
  check_words(1001, "one thousand and one");
  check_words(1100, "one thousand one hundred");
  check_words(2050, "two thousand and fifty");
  check_words(12345, "twelve thousand three hundred forty five");
  check_words(40007, "forty thousand and seven");
  check_words(100000, "one hundred thousand");
  check_words(100099, "one hundred thousand and ninety nine");
  check_words(700100, "seven hundred thousand one hundred");
  check_words(999999, "nine hundred ninety nine thousand nine hundred ninety nine");

  char words[128];
  if (number_words(1000000, words, sizeof words) != -1 || number_words(312, words, 10) != -1) {
    fprintf(stderr, "out of range or too small a buffer was not refused\n");
    failures++;
  }
  int most_tokens = 0;
  for (unsigned number = 0; number < NUMBER_WORDS_LIMIT; number++) {
    int tokens;
    number_words(number, words, sizeof words);
    if (read_words(words, &tokens) != (long)number) {
      fprintf(stderr, "%u: \"%s\" reads back as %ld\n", number, words, read_words(words, &tokens));
      if (++failures > 10) break;
    }
    if (tokens > most_tokens) most_tokens = tokens;
  }
  if (most_tokens != 9) {
    fprintf(stderr, "the longest source has %d words, expected 9\n", most_tokens);
    failures++;
  }
  if (failures) fprintf(stderr, "examples.numbers_grammar: %d check(s) failed\n", failures);
  else printf("examples.numbers_grammar: all checks passed\n");
  return failures != 0;
}
