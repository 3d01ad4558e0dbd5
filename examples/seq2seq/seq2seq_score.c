/* seq2seq_score < TRANSLATIONS
 *
 * Scores what a compiled model's `translate` prints, one line per pair:
 *   "  SOURCE  ->  HYPOTHESIS"                         (exact match)
 *   "  SOURCE  ->  HYPOTHESIS   (expected: REFERENCE)" (a miss)
 * and prints "exact_match 0.8100 bleu 0.9512 pairs 300": exact match and
 * corpus BLEU-4 (Papineni et al. 2002: clipped n-gram precisions for n = 1..4,
 * geometric mean, brevity penalty; no smoothing) on the token sequences.
 * Lines without "  ->  " are ignored; no scored line exits with status 2. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 256

typedef struct Tokens {
  int count;
  const char *at[MAX_TOKENS];
  int length[MAX_TOKENS];
} Tokens;

/* Splits text[0..size) at spaces. */
static void split(const char *text, size_t size, Tokens *t) {
  t->count = 0;
  size_t i = 0;
  while (i < size && t->count < MAX_TOKENS) {
    while (i < size && text[i] == ' ') i++;
    size_t start = i;
    while (i < size && text[i] != ' ' && text[i] != '\n') i++;
    if (i > start) {
      t->at[t->count] = text + start;
      t->length[t->count++] = (int)(i - start);
    }
    if (i < size && text[i] == '\n') break;
  }
}

static int same_gram(const Tokens *a, int i, const Tokens *b, int j, int n) {
  for (int k = 0; k < n; k++)
    if (a->length[i + k] != b->length[j + k] || memcmp(a->at[i + k], b->at[j + k], (size_t)a->length[i + k]))
      return 0;
  return 1;
}

/* Clipped matches of the n-grams of hyp in ref. */
static long clipped_matches(const Tokens *hyp, const Tokens *ref, int n) {
  long matches = 0;
  for (int i = 0; i + n <= hyp->count; i++) {
    int earlier = 0, in_hyp = 0, in_ref = 0;
    for (int k = 0; k < i; k++) earlier |= same_gram(hyp, k, hyp, i, n);
    if (earlier) continue; /* each distinct n-gram is counted once */
    for (int k = i; k + n <= hyp->count; k++) in_hyp += same_gram(hyp, k, hyp, i, n);
    for (int k = 0; k + n <= ref->count; k++) in_ref += same_gram(ref, k, hyp, i, n);
    matches += in_hyp < in_ref ? in_hyp : in_ref;
  }
  return matches;
}

int main(void) {
  char *line = NULL;
  size_t size = 0;
  long pairs = 0, exact = 0, hyp_length = 0, ref_length = 0, matched[5] = {0}, total[5] = {0};
  while (getline(&line, &size, stdin) >= 0) {
    char *arrow = strstr(line, "  ->  ");
    if (!arrow) continue;
    char *hyp_text = arrow + 6, *expected = strstr(hyp_text, "   (expected: ");
    size_t hyp_size = expected ? (size_t)(expected - hyp_text) : strlen(hyp_text);
    Tokens hyp, ref;
    split(hyp_text, hyp_size, &hyp);
    if (expected) {
      char *ref_text = expected + 14, *close = strrchr(ref_text, ')');
      split(ref_text, close ? (size_t)(close - ref_text) : strlen(ref_text), &ref);
    } else {
      ref = hyp;
      exact++;
    }
    pairs++;
    hyp_length += hyp.count;
    ref_length += ref.count;
    for (int n = 1; n <= 4; n++) {
      matched[n] += clipped_matches(&hyp, &ref, n);
      total[n] += hyp.count >= n ? hyp.count - n + 1 : 0;
    }
  }
  free(line);
  if (!pairs) {
    fprintf(stderr, "seq2seq_score: no translations on standard input\n");
    return 2;
  }
  double log_precision = 0;
  int zero = 0;
  for (int n = 1; n <= 4; n++) {
    if (matched[n] == 0 || total[n] == 0) zero = 1;
    else log_precision += log((double)matched[n] / (double)total[n]) / 4;
  }
  double brevity = hyp_length >= ref_length || hyp_length == 0
                       ? 1.0 : exp(1.0 - (double)ref_length / (double)hyp_length);
  double bleu = zero || hyp_length == 0 ? 0.0 : brevity * exp(log_precision);
  printf("exact_match %.4f bleu %.4f pairs %ld\n", (double)exact / (double)pairs, bleu, pairs);
  return 0;
}
