/* Beam search on toy next-token models (callbacks, no compiled model):
 * width 1 is greedy, a wide beam finds what greedy misses, a beam wider than
 * the whole search space finds the exhaustive optimum (so early termination
 * and the length penalty never cost the answer), and the reported scores are
 * the sums of the model's log-probabilities. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "beam.h"
#include "check.h"
#include "tfmrt.h"

enum { EOS = 0, V = 4, MAXLEN = 5 };

/* A deterministic "random" model: logits hashed from (input, prefix). */
static float hashed_logit(size_t input, const int32_t *prefix, size_t length, size_t k) {
  uint64_t h = 1469598103934665603ull ^ (input * 0x9e3779b97f4a7c15ull);
  for (size_t i = 0; i < length; i++) h = (h ^ (uint64_t)prefix[i]) * 1099511628211ull;
  h = (h ^ k) * 1099511628211ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return (float)((double)(h % 10000) / 1000.0 - 5.0);
}

static size_t calls;

static int hashed_model(void *ctx, size_t count, const size_t *inputs, const int32_t *prefixes,
                        size_t length, double *logprobs) {
  (void)ctx;
  calls++;
  for (size_t i = 0; i < count; i++) {
    float logits[V];
    for (size_t k = 0; k < V; k++) logits[k] = hashed_logit(inputs[i], prefixes + i * length, length, k);
    tfm_log_softmax(logits, V, logprobs + i * V);
  }
  return 0;
}

static double sequence_logprob(size_t input, const int32_t *y, size_t n) {
  double lp[V], sum = 0;
  for (size_t t = 0; t < n; t++) {
    hashed_model(NULL, 1, &input, y, t, lp);
    sum += lp[y[t]];
  }
  return sum;
}

/* Greedy written out independently: argmax (first on ties) until <eos>. */
static size_t greedy(size_t input, size_t max_length, int32_t *y) {
  size_t n = 0;
  while (n < max_length) {
    double lp[V];
    hashed_model(NULL, 1, &input, y, n, lp);
    int32_t best = 0;
    for (int32_t k = 1; k < V; k++)
      if (lp[k] > lp[best]) best = k;
    y[n++] = best;
    if (best == EOS) break;
  }
  return n;
}

/* The best score over every sequence up to max_length (ending in <eos>, or
 * cut at max_length). */
static double exhaustive(size_t input, size_t max_length, double alpha, int32_t *y, size_t n) {
  if (n > MAXLEN) return -INFINITY;
  double here = -INFINITY;
  if (n == max_length || (n > 0 && y[n - 1] == EOS))
    return sequence_logprob(input, y, n) / tfm_length_penalty(n, alpha);
  for (int32_t k = 0; k < V; k++) {
    y[n] = k;
    double s = exhaustive(input, max_length, alpha, y, n + 1);
    if (s > here) here = s;
  }
  return here;
}

/* Greedy's trap: 'a' (0.5) beats 'b' (0.4) first, but after 'a' the best
 * continuation is <eos> at 0.34 (0.17 in all), while 'b' <eos> is 0.36. */
static int trap_model(void *ctx, size_t count, const size_t *inputs, const int32_t *prefixes,
                      size_t length, double *logprobs) {
  (void)ctx, (void)inputs;
  for (size_t i = 0; i < count; i++) {
    double p[V] = {0.1, 0.5, 0.4, 0.0}; /* eos, a, b, c */
    if (length >= 1 && prefixes[i * length] == 1) p[0] = 0.34, p[1] = 0.33, p[2] = 0.33, p[3] = 0;
    if (length >= 1 && prefixes[i * length] == 2) p[0] = 0.9, p[1] = 0.05, p[2] = 0.05, p[3] = 0;
    if (length >= 2) p[0] = 1, p[1] = 0, p[2] = 0, p[3] = 0;
    for (size_t k = 0; k < V; k++) logprobs[i * V + k] = log(p[k]);
  }
  return 0;
}

/* <eos> at 0.9 everywhere. */
static int eager_model(void *ctx, size_t count, const size_t *inputs, const int32_t *prefixes,
                       size_t length, double *logprobs) {
  (void)ctx, (void)inputs, (void)prefixes, (void)length;
  calls++;
  for (size_t i = 0; i < count; i++) {
    const double p[V] = {0.9, 0.05, 0.03, 0.02};
    for (size_t k = 0; k < V; k++) logprobs[i * V + k] = log(p[k]);
  }
  return 0;
}

int main(void) {
  CHECK(fabs(tfm_length_penalty(5, 1.0) - 10.0 / 6.0) < 1e-12);
  CHECK(tfm_length_penalty(7, 0.0) == 1.0);
  float logits[3] = {1, 2, 3};
  double ls[3];
  tfm_log_softmax(logits, 3, ls);
  CHECK(fabs(exp(ls[0]) + exp(ls[1]) + exp(ls[2]) - 1) < 1e-12 && ls[2] > ls[1]);

  /* Width 1 is greedy, for any alpha; 40 inputs searched together. */
  enum { N = 40 };
  size_t max_len[N];
  int32_t out[N * MAXLEN], want[MAXLEN];
  tfm_beam_result r[N];
  for (size_t i = 0; i < N; i++) max_len[i] = 1 + i % MAXLEN;
  for (int a = 0; a < 2; a++) {
    tfm_beam_options o = {.beam = 1, .vocab = V, .alpha = a ? 0.6 : 0.0, .eos = EOS};
    CHECK_OK(tfm_beam_search(&o, N, max_len, hashed_model, NULL, out, MAXLEN, r));
    for (size_t i = 0; i < N; i++) {
      memset(want, 0, sizeof want);
      size_t n = greedy(i, max_len[i], want);
      CHECK(r[i].length == n && !memcmp(out + i * MAXLEN, want, sizeof want));
      CHECK(fabs(r[i].logprob - sequence_logprob(i, want, n)) < 1e-9);
    }
  }

  /* A beam wider than the search space (3^4 live prefixes at most) finds the
   * exhaustive optimum with and without a length penalty; width 4 is never
   * worse than greedy on these inputs and scores what it returns correctly. */
  for (int a = 0; a < 2; a++) {
    double alpha = a ? 1.0 : 0.0;
    tfm_beam_options wide = {.beam = 128, .vocab = V, .alpha = alpha, .eos = EOS};
    CHECK_OK(tfm_beam_search(&wide, N, max_len, hashed_model, NULL, out, MAXLEN, r));
    for (size_t i = 0; i < N; i++) {
      int32_t y[MAXLEN + 1];
      double best = exhaustive(i, max_len[i], alpha, y, 0);
      CHECK(fabs(r[i].score - best) < 1e-9);
      CHECK(fabs(r[i].logprob - sequence_logprob(i, out + i * MAXLEN, r[i].length)) < 1e-9);
    }
  }
  tfm_beam_options four = {.beam = 4, .vocab = V, .alpha = 0.0, .eos = EOS};
  CHECK_OK(tfm_beam_search(&four, N, max_len, hashed_model, NULL, out, MAXLEN, r));
  for (size_t i = 0; i < N; i++) {
    memset(want, 0, sizeof want);
    size_t n = greedy(i, max_len[i], want);
    CHECK(r[i].logprob >= sequence_logprob(i, want, n) - 1e-9);
  }

  /* Early termination: <eos> at 0.9 first, every other token at most 0.05:
   * with alpha = 0 no live hypothesis can catch up, so one call ends it
   * although the limit allows 50 steps and three hypotheses are live. */
  size_t long_limit = 50;
  int32_t long_out[50];
  calls = 0;
  CHECK_OK(tfm_beam_search(&four, 1, &long_limit, eager_model, NULL, long_out, 50, r));
  CHECK(calls == 1 && r[0].length == 1 && long_out[0] == EOS);

  /* The trap: greedy ends at 'a <eos>' (0.17); width 2 or 4 finds 'b <eos>'. */
  size_t three = 3;
  int32_t y[3];
  tfm_beam_options g = {.beam = 1, .vocab = V, .alpha = 0.0, .eos = EOS};
  CHECK_OK(tfm_beam_search(&g, 1, &three, trap_model, NULL, y, 3, r));
  CHECK(r[0].length == 2 && y[0] == 1 && y[1] == EOS && fabs(r[0].logprob - log(0.17)) < 1e-9);
  tfm_beam_options b4 = {.beam = 4, .vocab = V, .alpha = 0.0, .eos = EOS};
  CHECK_OK(tfm_beam_search(&b4, 1, &three, trap_model, NULL, y, 3, r));
  CHECK(r[0].length == 2 && y[0] == 2 && y[1] == EOS && fabs(r[0].logprob - log(0.36)) < 1e-9);

  /* Refusals: no width, a negative alpha. */
  tfm_beam_options bad = {.beam = 0, .vocab = V, .eos = EOS};
  CHECK_REFUSED(tfm_beam_search(&bad, 1, &three, trap_model, NULL, y, 3, r), NULL, "beam");
  bad.beam = 2, bad.alpha = -1;
  CHECK_REFUSED(tfm_beam_search(&bad, 1, &three, trap_model, NULL, y, 3, r), NULL, "alpha");
  return check_result("beam");
}
