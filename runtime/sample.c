/* Greedy and sampled decoding of one row of logits (sample.h). */
#include "sample.h"

#include <math.h>
#include <stdlib.h>

double tfm_sample_uniform(uint64_t *rng) {
  uint64_t z = (*rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-53;
}

static const float *sort_logits; /* qsort has no context argument */

static int by_logit(const void *a, const void *b) {
  int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
  float x = sort_logits[i], y = sort_logits[j];
  if (x != y) return x > y ? -1 : 1;
  return i < j ? -1 : i > j;
}

size_t tfm_sample_candidates(const float *logits, size_t n, const tfm_sampling *s, int32_t *ids,
                             double *probs) {
  if (n == 0) return 0;
  if (s->temperature <= 0 || s->top_k == 1) {
    size_t best = 0;
    for (size_t k = 1; k < n; k++)
      if (logits[k] > logits[best]) best = k;
    ids[0] = (int32_t)best;
    probs[0] = 1;
    return 1;
  }
  for (size_t k = 0; k < n; k++) ids[k] = (int32_t)k;
  sort_logits = logits;
  qsort(ids, n, sizeof *ids, by_logit);
  size_t kept = s->top_k && s->top_k < n ? s->top_k : n;
  /* softmax(logits / T) over the kept ids, max-shifted, in double. */
  double top = (double)logits[ids[0]] / s->temperature, sum = 0;
  for (size_t k = 0; k < kept; k++) sum += probs[k] = exp((double)logits[ids[k]] / s->temperature - top);
  for (size_t k = 0; k < kept; k++) probs[k] /= sum;
  if (s->top_p < 1) {
    double mass = 0;
    size_t k = 0;
    while (k < kept && mass < s->top_p) mass += probs[k++];
    kept = k ? k : 1;
    sum = 0;
    for (k = 0; k < kept; k++) sum += probs[k];
    for (k = 0; k < kept; k++) probs[k] /= sum;
  }
  return kept;
}

int32_t tfm_sample(const float *logits, size_t n, const tfm_sampling *s, uint64_t *rng) {
  int32_t *ids = malloc(sizeof(int32_t) * (n ? n : 1));
  double *probs = malloc(sizeof(double) * (n ? n : 1));
  int32_t id = -1;
  size_t kept = ids && probs ? tfm_sample_candidates(logits, n, s, ids, probs) : 0;
  if (kept == 1) id = ids[0];
  else if (kept > 1) {
    double u = tfm_sample_uniform(rng), c = 0;
    id = ids[kept - 1]; /* rounding: u beyond the last cumulative sum */
    for (size_t k = 0; k < kept; k++)
      if (u < (c += probs[k])) {
        id = ids[k];
        break;
      }
  }
  free(ids);
  free(probs);
  return id;
}
