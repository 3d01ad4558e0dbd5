/* Beam search with a shrinking beam and GNMT length normalisation.
 *
 * Each input keeps up to `beam` live hypotheses, all of the same length t.
 * At each step every live hypothesis is extended by every token; of these
 * candidates the best w = beam - (hypotheses finished so far) by log P(Y|X)
 * are kept (ties: the earlier hypothesis, then the lower token id). A kept
 * candidate ending in <eos> is finished with score log P / lp(|Y|), |Y|
 * counting the <eos>; the others stay live. So the beam shrinks by one per
 * finished hypothesis and width 1 is exactly greedy decoding, whatever alpha.
 * An input stops when no hypothesis is live, at its maximum length (the live
 * ones then finish as they are), or early: when the best finished score is at
 * least the best any live hypothesis could still reach, log P_live /
 * lp(max_length) (log-probabilities only fall as tokens are added and lp grows
 * with the length for alpha >= 0), so stopping never changes the answer. */
#include "beam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tfmrt.h"

double tfm_length_penalty(size_t length, double alpha) {
  return alpha == 0 ? 1.0 : pow((5.0 + (double)length) / 6.0, alpha);
}

void tfm_log_softmax(const float *logits, size_t n, double *out) {
  double max = -INFINITY, sum = 0;
  for (size_t k = 0; k < n; k++)
    if ((double)logits[k] > max) max = logits[k];
  for (size_t k = 0; k < n; k++) sum += exp((double)logits[k] - max);
  double log_sum = log(sum);
  for (size_t k = 0; k < n; k++) out[k] = ((double)logits[k] - max) - log_sum;
}

typedef struct Candidate {
  double logprob;
  size_t hyp;
  int32_t token;
} Candidate;

/* One input's search state; hypothesis h's tokens are tokens[h * stride ..]. */
typedef struct Search {
  size_t live, finished;
  int done;
  int32_t *tokens, *next_tokens;
  double *logprob, *next_logprob;
  size_t first;          /* index of its first live hypothesis in this step's call */
  tfm_beam_result best;
  int32_t *best_tokens;
  int have_best;
} Search;

/* Keeps `kept` (<= w) candidates in descending order; a candidate enters only
 * when strictly better than the last kept, so ties keep the earlier one. */
static void offer(Candidate *kept, size_t *count, size_t w, Candidate c) {
  if (*count == w && !(c.logprob > kept[w - 1].logprob)) return;
  size_t pos = *count < w ? (*count)++ : w - 1;
  while (pos > 0 && c.logprob > kept[pos - 1].logprob) {
    kept[pos] = kept[pos - 1];
    pos--;
  }
  kept[pos] = c;
}

static void finish(Search *s, const int32_t *tokens, size_t length, double logprob, double alpha,
                   size_t stride) {
  double score = logprob / tfm_length_penalty(length, alpha);
  s->finished++;
  if (s->have_best && !(score > s->best.score)) return;
  s->have_best = 1;
  s->best = (tfm_beam_result){length, logprob, score};
  memset(s->best_tokens, 0, sizeof(int32_t) * stride);
  memcpy(s->best_tokens, tokens, sizeof(int32_t) * length);
}

/* The early-termination test described at the top. */
static int cannot_improve(const Search *s, double alpha, size_t max_length) {
  if (!s->have_best) return 0;
  double bound = -INFINITY;
  for (size_t h = 0; h < s->live; h++) {
    double b = s->logprob[h] / tfm_length_penalty(max_length, alpha);
    if (b > bound) bound = b;
  }
  return s->best.score >= bound;
}

int tfm_beam_search(const tfm_beam_options *o, size_t inputs, const size_t *max_length,
                    tfm_logprob_fn next, void *ctx, int32_t *out, size_t out_stride,
                    tfm_beam_result *results) {
  if (o->beam < 1 || o->vocab < 1) return tfm_fail("beam search needs a beam and a vocabulary");
  if (!(o->alpha >= 0) || !isfinite(o->alpha))
    return tfm_fail("the length penalty alpha must be a number >= 0, not %g", o->alpha);
  size_t stride = out_stride ? out_stride : 1, B = o->beam, V = o->vocab;
  for (size_t i = 0; i < inputs; i++)
    if (max_length[i] > out_stride) return tfm_fail("beam search: max length above out_stride");
  Search *s = calloc(inputs ? inputs : 1, sizeof *s);
  Candidate *kept = malloc(sizeof *kept * B);
  size_t *hyp_inputs = malloc(sizeof *hyp_inputs * (inputs * B + 1));
  int32_t *prefixes = malloc(sizeof *prefixes * (inputs * B * stride + 1));
  double *logprobs = malloc(sizeof *logprobs * (inputs * B * V + 1));
  int status = TFM_OK;
  if (!s || !kept || !hyp_inputs || !prefixes || !logprobs) {
    status = tfm_fail("beam search: out of memory");
    goto done;
  }
  for (size_t i = 0; i < inputs; i++) {
    s[i].tokens = calloc(B * stride, sizeof(int32_t));
    s[i].next_tokens = calloc(B * stride, sizeof(int32_t));
    s[i].logprob = calloc(B, sizeof(double));
    s[i].next_logprob = calloc(B, sizeof(double));
    s[i].best_tokens = calloc(stride, sizeof(int32_t));
    if (!s[i].tokens || !s[i].next_tokens || !s[i].logprob || !s[i].next_logprob ||
        !s[i].best_tokens) {
      status = tfm_fail("beam search: out of memory");
      goto done;
    }
    s[i].live = 1; /* the empty hypothesis, log P = 0 */
  }
  for (size_t t = 0;; t++) {
    /* Finish inputs at their maximum length; gather the live hypotheses. */
    size_t count = 0;
    for (size_t i = 0; i < inputs; i++) {
      Search *si = &s[i];
      if (si->done) continue;
      if (t == max_length[i]) {
        for (size_t h = 0; h < si->live; h++)
          finish(si, si->tokens + h * stride, t, si->logprob[h], o->alpha, stride);
        si->done = 1;
        continue;
      }
      si->first = count;
      for (size_t h = 0; h < si->live; h++, count++) {
        hyp_inputs[count] = i;
        memcpy(prefixes + count * t, si->tokens + h * stride, sizeof(int32_t) * t);
      }
    }
    if (!count) break;
    if ((status = next(ctx, count, hyp_inputs, prefixes, t, logprobs))) goto done;
    for (size_t i = 0; i < inputs; i++) {
      Search *si = &s[i];
      if (si->done) continue;
      size_t w = B - si->finished, n = 0;
      for (size_t h = 0; h < si->live; h++) {
        const double *lp = logprobs + (si->first + h) * V;
        for (size_t k = 0; k < V; k++)
          offer(kept, &n, w, (Candidate){si->logprob[h] + lp[k], h, (int32_t)k});
      }
      size_t live = 0;
      for (size_t c = 0; c < n; c++) {
        int32_t *dst = si->next_tokens + live * stride;
        memcpy(dst, si->tokens + kept[c].hyp * stride, sizeof(int32_t) * t);
        dst[t] = kept[c].token;
        if (kept[c].token == o->eos) {
          finish(si, dst, t + 1, kept[c].logprob, o->alpha, stride);
        } else {
          si->next_logprob[live++] = kept[c].logprob;
        }
      }
      int32_t *swap_tokens = si->tokens;
      si->tokens = si->next_tokens, si->next_tokens = swap_tokens;
      double *swap_logprob = si->logprob;
      si->logprob = si->next_logprob, si->next_logprob = swap_logprob;
      si->live = live;
      if (!live || cannot_improve(si, o->alpha, max_length[i])) si->done = 1;
    }
  }
  for (size_t i = 0; i < inputs; i++) {
    memset(out + i * out_stride, 0, sizeof(int32_t) * out_stride);
    if (s[i].have_best) memcpy(out + i * out_stride, s[i].best_tokens, sizeof(int32_t) * s[i].best.length);
    results[i] = s[i].have_best ? s[i].best : (tfm_beam_result){0, 0, 0};
  }
done:
  for (size_t i = 0; s && i < inputs; i++) {
    free(s[i].tokens);
    free(s[i].next_tokens);
    free(s[i].logprob);
    free(s[i].next_logprob);
    free(s[i].best_tokens);
  }
  free(s);
  free(kept);
  free(hyp_inputs);
  free(prefixes);
  free(logprobs);
  return status;
}
