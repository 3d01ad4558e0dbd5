/* Corpus BLEU the way sacreBLEU computes it by default (BLEU(), i.e.
 * corpus_bleu with tokenize='13a', smooth_method='exp', one reference,
 * case-sensitive, effective_order off):
 *  - each line is right-stripped and tokenised by the mteval-v13a rules;
 *  - for n = 1..4, a hypothesis n-gram is correct up to the number of times
 *    it occurs in the reference (clipped counts); correct and total counts and
 *    the hypothesis and reference lengths (in tokens) are summed over the
 *    corpus before anything is divided;
 *  - precision p_n = 100 correct_n / total_n; 'exp' smoothing (NIST, method 3
 *    of Chen & Cherry 2014) replaces a zero correct_n by 100 / (2^k total_n)
 *    for the k-th such order; when nothing at all is correct BLEU is 0, and an
 *    order with no hypothesis n-grams (total_n = 0) makes BLEU 0;
 *  - BP = exp(1 - r / c) when c < r (0 when c = 0), else 1;
 *    BLEU = BP exp(mean of log p_n).
 * 'exp' is chosen because it is sacreBLEU's default, so the numbers printed
 * here are the ones `sacrebleu` prints for the same text. */
#include "bleu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfmrt.h"

/* --- mteval-v13a tokenisation --------------------------------------------- */

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* The characters of v13a's first rule, [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII
 * punctuation and symbols except ' , - . (handled below or kept in words). */
static int is_separated_symbol(unsigned char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

/* Replaces every non-overlapping occurrence of `from`, left to right, as
 * Python's str.replace does; `to` is never longer, so this works in place. */
static void replace_all(char *s, const char *from, const char *to) {
  size_t nf = strlen(from), nt = strlen(to);
  char *r = s, *w = s;
  while (*r) {
    if (!strncmp(r, from, nf)) {
      memcpy(w, to, nt);
      w += nt, r += nf;
    } else {
      *w++ = *r++;
    }
  }
  *w = 0;
}

typedef enum { RULE_SYMBOL, RULE_BEFORE_PERIOD, RULE_AFTER_PERIOD, RULE_DIGIT_DASH } Rule;

/* One of v13a's regular-expression substitutions, scanning left to right
 * without overlaps like re.sub:
 *   RULE_SYMBOL        ([symbol])         -> ' \1 '
 *   RULE_BEFORE_PERIOD ([^0-9])([.,])     -> '\1 \2 '
 *   RULE_AFTER_PERIOD  ([.,])([^0-9])     -> ' \1 \2'
 *   RULE_DIGIT_DASH    ([0-9])(-)         -> '\1 \2 '
 * Working on bytes gives the same result as on characters: every pattern
 * byte is ASCII, and a UTF-8 continuation byte never starts a match.
 * dst holds at least 3 strlen(src) + 1 bytes. */
static void apply_rule(Rule rule, const char *src, char *dst) {
  size_t w = 0;
  for (size_t i = 0; src[i];) {
    unsigned char a = (unsigned char)src[i], b = (unsigned char)src[i + 1];
    int comma_or_period_a = a == '.' || a == ',', comma_or_period_b = b == '.' || b == ',';
    int two = 0;
    switch (rule) {
      case RULE_SYMBOL:
        if (is_separated_symbol(a)) {
          dst[w++] = ' ', dst[w++] = (char)a, dst[w++] = ' ', i++;
          continue;
        }
        break;
      case RULE_BEFORE_PERIOD:
        if (b && !is_digit(a) && comma_or_period_b)
          dst[w++] = (char)a, dst[w++] = ' ', dst[w++] = (char)b, dst[w++] = ' ', two = 1;
        break;
      case RULE_AFTER_PERIOD:
        if (b && comma_or_period_a && !is_digit(b))
          dst[w++] = ' ', dst[w++] = (char)a, dst[w++] = ' ', dst[w++] = (char)b, two = 1;
        break;
      case RULE_DIGIT_DASH:
        if (is_digit(a) && b == '-')
          dst[w++] = (char)a, dst[w++] = ' ', dst[w++] = '-', dst[w++] = ' ', two = 1;
        break;
    }
    if (two) {
      i += 2;
    } else {
      dst[w++] = (char)a;
      i++;
    }
  }
  dst[w] = 0;
}

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

char *tfm_bleu_tokenize_13a(const char *line) {
  size_t n = strlen(line);
  /* Each rule at most triples the length (' \1 ' for one byte). */
  size_t cap = 3 * (n + 2) + 1;
  char *a = malloc(cap), *b = malloc(cap);
  if (!a || !b) {
    free(a), free(b);
    return NULL;
  }
  while (n && is_space((unsigned char)line[n - 1])) n--; /* sacreBLEU's rstrip() */
  a[0] = ' ';
  memcpy(a + 1, line, n);
  a[n + 1] = 0;
  replace_all(a + 1, "<skipped>", "");
  replace_all(a + 1, "-\n", "");
  replace_all(a + 1, "\n", " ");
  if (strchr(a, '&')) {
    replace_all(a + 1, "&quot;", "\"");
    replace_all(a + 1, "&amp;", "&");
    replace_all(a + 1, "&lt;", "<");
    replace_all(a + 1, "&gt;", ">");
  }
  strcat(a, " ");
  apply_rule(RULE_SYMBOL, a, b);
  apply_rule(RULE_BEFORE_PERIOD, b, a);
  apply_rule(RULE_AFTER_PERIOD, a, b);
  apply_rule(RULE_DIGIT_DASH, b, a);
  /* Single spaces between tokens, none at the ends (Python's split/join on
   * ASCII whitespace). */
  size_t w = 0;
  for (size_t i = 0; a[i];) {
    while (a[i] && is_space((unsigned char)a[i])) i++;
    if (!a[i]) break;
    if (w) b[w++] = ' ';
    while (a[i] && !is_space((unsigned char)a[i])) b[w++] = a[i++];
  }
  b[w] = 0;
  free(a);
  return b;
}

/* --- counting -------------------------------------------------------------- */

typedef struct Tokens {
  char *text;
  size_t count;
  const char **start;
  size_t *length;
} Tokens;

static int split(const char *line, Tokens *t) {
  memset(t, 0, sizeof *t);
  if (!(t->text = tfm_bleu_tokenize_13a(line))) return TFM_FAILED;
  size_t n = strlen(t->text);
  t->start = malloc(sizeof *t->start * (n / 2 + 1));
  t->length = malloc(sizeof *t->length * (n / 2 + 1));
  if (!t->start || !t->length) return TFM_FAILED;
  for (char *p = t->text; *p;) {
    char *end = strchr(p, ' ');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    t->start[t->count] = p, t->length[t->count++] = len;
    p += len + (end ? 1 : 0);
  }
  return TFM_OK;
}

static void tokens_free(Tokens *t) {
  free(t->text), free(t->start), free(t->length);
}

static int same_ngram(const Tokens *x, size_t i, const Tokens *y, size_t j, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (x->length[i + k] != y->length[j + k] ||
        memcmp(x->start[i + k], y->start[j + k], x->length[i + k]))
      return 0;
  return 1;
}

static uint64_t occurrences(const Tokens *in, const Tokens *of, size_t at, size_t n) {
  uint64_t c = 0;
  for (size_t j = 0; j + n <= in->count; j++) c += same_ngram(in, j, of, at, n);
  return c;
}

int tfm_bleu_add(tfm_bleu_stats *stats, const char *hypothesis, const char *reference) {
  Tokens h, r;
  int ok = split(hypothesis, &h) == TFM_OK;
  ok = split(reference, &r) == TFM_OK && ok;
  if (ok) {
    stats->hyp_len += h.count;
    stats->ref_len += r.count;
    for (size_t n = 1; n <= TFM_BLEU_ORDER; n++) {
      for (size_t i = 0; i + n <= h.count; i++) {
        stats->total[n - 1]++;
        /* Clip once per distinct n-gram, at its first occurrence. */
        int first = 1;
        for (size_t j = 0; j < i && first; j++) first = !same_ngram(&h, j, &h, i, n);
        if (!first) continue;
        uint64_t in_hyp = occurrences(&h, &h, i, n), in_ref = occurrences(&r, &h, i, n);
        stats->correct[n - 1] += in_hyp < in_ref ? in_hyp : in_ref;
      }
    }
  }
  tokens_free(&h);
  tokens_free(&r);
  return ok ? TFM_OK : tfm_fail("BLEU: out of memory");
}

tfm_bleu_score tfm_bleu_compute(const tfm_bleu_stats *s) {
  tfm_bleu_score out = {.hyp_len = s->hyp_len, .ref_len = s->ref_len, .bp = 1.0};
  double c = (double)s->hyp_len, r = (double)s->ref_len;
  if (c < r) out.bp = c > 0 ? exp(1.0 - r / c) : 0.0;
  out.ratio = r > 0 ? c / r : 0.0;
  uint64_t any = 0;
  for (int n = 0; n < TFM_BLEU_ORDER; n++) any |= s->correct[n];
  if (!any) return out; /* sacreBLEU's early exit: no matches, BLEU 0 */
  double smooth = 1.0, log_sum = 0.0;
  for (int n = 0; n < TFM_BLEU_ORDER; n++) {
    if (!s->total[n]) return out; /* a zero precision: BLEU 0 */
    if (!s->correct[n]) {
      smooth *= 2;
      out.precisions[n] = 100.0 / (smooth * (double)s->total[n]);
    } else {
      out.precisions[n] = 100.0 * (double)s->correct[n] / (double)s->total[n];
    }
    log_sum += log(out.precisions[n]);
  }
  out.bleu = out.bp * exp(log_sum / TFM_BLEU_ORDER);
  return out;
}

void tfm_bleu_format(const tfm_bleu_score *s, char *buf, size_t size) {
  snprintf(buf, size,
           "bleu %.2f (%.1f/%.1f/%.1f/%.1f, bp %.3f, ratio %.3f, hyp_len %llu, ref_len %llu)",
           s->bleu, s->precisions[0], s->precisions[1], s->precisions[2], s->precisions[3], s->bp,
           s->ratio, (unsigned long long)s->hyp_len, (unsigned long long)s->ref_len);
}
