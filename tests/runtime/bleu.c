/* Corpus BLEU against values computed by hand from sacreBLEU's definition
 * (runtime/bleu.c), and the mteval-v13a tokenisation rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bleu.h"
#include "check.h"
#include "tfmrt.h"

static double corpus(size_t n, const char *const *hyps, const char *const *refs) {
  tfm_bleu_stats s = {0};
  for (size_t i = 0; i < n; i++) CHECK_OK(tfm_bleu_add(&s, hyps[i], refs[i]));
  return tfm_bleu_compute(&s).bleu;
}

static double sentence(const char *hyp, const char *ref) { return corpus(1, &hyp, &ref); }

#define CHECK_NEAR(x, want)                                                     \
  do {                                                                          \
    double got_ = (x);                                                          \
    if (!(fabs(got_ - (want)) <= 0.01)) {                                       \
      fprintf(stderr, "%s:%d: %s = %.4f, want %.4f\n", __FILE__, __LINE__, #x,  \
              got_, (double)(want));                                            \
      check_failures++;                                                         \
    }                                                                           \
  } while (0)

static void check_tokens(const char *line, const char *want) {
  char *got = tfm_bleu_tokenize_13a(line);
  CHECK(got != NULL);
  if (got && strcmp(got, want)) {
    fprintf(stderr, "tokenize '%s': got '%s', want '%s'\n", line, got, want);
    check_failures++;
  }
  free(got);
}

int main(void) {
  /* Tokenisation: punctuation split off, periods and commas kept inside
   * numbers, dashes split after digits, apostrophes kept, entities decoded. */
  check_tokens("Hello, world!", "Hello , world !");
  check_tokens("It costs $3.50.", "It costs $ 3.50 .");
  check_tokens("1,000 people in 1999-2000", "1,000 people in 1999 - 2000");
  check_tokens("don't a well-known (test)", "don't a well-known ( test )");
  check_tokens("&quot;quoted&quot; &amp; more", "\" quoted \" & more");
  check_tokens("a.b  c,d", "a . b c , d");
  check_tokens("  spaced   out \n", "spaced out");
  check_tokens("<skipped>x", "x");
  check_tokens("", "");
  /* Overlapping rules, as sacreBLEU 2.6.0's Tokenizer13a gives them. */
  check_tokens("x.. y,.z 3.,4 a-1 1-a", "x . . y , . z 3 . , 4 a-1 1 - a");

  /* A perfect match is 100. */
  CHECK_NEAR(sentence("the cat sat on the mat", "the cat sat on the mat"), 100.0);
  /* No n-gram in common: 0 (sacreBLEU exits early). */
  CHECK_NEAR(sentence("a b c d", "e f g h"), 0.0);
  /* Too short for 4-grams: total_4 = 0 makes BLEU 0 without effective order. */
  CHECK_NEAR(sentence("a b c", "a b c"), 0.0);
  /* Brevity: every precision 100, c = 4 < r = 6, BP = exp(1 - 6/4). */
  CHECK_NEAR(sentence("the cat sat on", "the cat sat on the mat"), 100.0 * exp(-0.5));
  tfm_bleu_stats s = {0};
  CHECK_OK(tfm_bleu_add(&s, "the cat sat on", "the cat sat on the mat"));
  tfm_bleu_score bp = tfm_bleu_compute(&s);
  CHECK_NEAR(bp.bp, exp(-0.5));
  CHECK_NEAR(bp.ratio, 4.0 / 6.0);
  /* exp smoothing: p = 2/4, then 100/(2*3), 100/(4*2), 100/(8*1) percent. */
  CHECK_NEAR(sentence("a b c d", "a x c y"), pow(50.0 * (100.0 / 6) * 12.5 * 12.5, 0.25));
  CHECK_NEAR(sentence("a b c d", "a x c y"), 19.00);
  /* Clipping: 'the' counts once against a reference with one 'the'. */
  CHECK_NEAR(sentence("the the the the", "the cat"), pow(25.0 * (100.0 / 6) * 12.5 * 12.5, 0.25));
  /* Corpus level: counts are summed first; correct [8,5,4,3] of [10,8,6,4]
   * gives 70.71, not the mean (100 + 19.00) / 2 of the sentence scores. */
  const char *hyps[] = {"the cat sat on the mat", "a b c d"};
  const char *refs[] = {"the cat sat on the mat", "a x c y"};
  CHECK_NEAR(corpus(2, hyps, refs), pow(80.0 * 62.5 * (400.0 / 6) * 75.0, 0.25));
  CHECK_NEAR(corpus(2, hyps, refs), 70.71);
  /* Tokenisation matters: "mat." against "mat ." is a match after 13a. */
  CHECK_NEAR(sentence("the cat sat on the mat.", "the cat sat on the mat ."), 100.0);

  char line[256];
  tfm_bleu_format(&bp, line, sizeof line);
  CHECK(!strncmp(line, "bleu 60.65 (100.0/100.0/100.0/100.0, bp 0.607, ratio 0.667", 58));
  return check_result("bleu");
}
