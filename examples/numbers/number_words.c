/* The grammar (README.md): below 20 one word; tens then a unit ("twenty one");
 * "<unit> hundred [<below 100>]"; "<below 1000> thousand" followed by
 * "and <below 100>" when the rest has no hundreds, else by "<below 1000>".
 * No hyphens, so every word is one token. */
#include "number_words.h"

#include <string.h>

static const char *const units[20] = {
    "zero",    "one",     "two",       "three",    "four",     "five",    "six",
    "seven",   "eight",   "nine",      "ten",      "eleven",   "twelve",  "thirteen",
    "fourteen", "fifteen", "sixteen",  "seventeen", "eighteen", "nineteen"};
static const char *const tens[10] = {"",      "",      "twenty",  "thirty", "forty",
                                     "fifty", "sixty", "seventy", "eighty", "ninety"};

typedef struct {
  char *text;
  size_t size, used;
  int overflow;
} word_buffer;

static void add_word(word_buffer *out, const char *word) {
  size_t space = out->used ? 1 : 0, length = strlen(word);
  if (out->used + space + length >= out->size) {
    out->overflow = 1;
    return;
  }
  memcpy(out->text + out->used, " ", space);
  memcpy(out->text + out->used + space, word, length + 1);
  out->used += space + length;
}

static void below_hundred(word_buffer *out, unsigned n) {
  if (n < 20) {
    add_word(out, units[n]);
    return;
  }
  add_word(out, tens[n / 10]);
  if (n % 10) add_word(out, units[n % 10]);
}

static void below_thousand(word_buffer *out, unsigned n) {
  if (n < 100) {
    below_hundred(out, n);
    return;
  }
  add_word(out, units[n / 100]);
  add_word(out, "hundred");
  if (n % 100) below_hundred(out, n % 100);
}

int number_words(unsigned number, char *text, size_t size) {
  if (number >= NUMBER_WORDS_LIMIT || size == 0) return -1;
  word_buffer out = {text, size, 0, 0};
  text[0] = '\0';
  if (number < 1000) {
    below_thousand(&out, number);
  } else {
    unsigned rest = number % 1000;
    below_thousand(&out, number / 1000);
    add_word(&out, "thousand");
    if (rest > 0 && rest < 100) add_word(&out, "and"); /* marks the zero hundreds */
    if (rest > 0) below_thousand(&out, rest);
  }
  return out.overflow ? -1 : 0;
}
