/* The next token from a row of logits: greedy, or sampled with a
 * temperature, top-k and top-p (nucleus) restriction, from a seeded
 * generator, so that a run is reproducible (generate, cli.c). */
#ifndef TFM_SAMPLE_H
#define TFM_SAMPLE_H
#include <stddef.h>
#include <stdint.h>

typedef struct tfm_sampling {
  double temperature; /* 0: greedy, the first largest logit */
  size_t top_k;       /* keep the k largest logits; 0: all */
  double top_p;       /* then the smallest set of the most likely whose
                         probability reaches top_p, in (0, 1]; 1: all */
} tfm_sampling;

/* The candidates of one draw: ids [n] (n = the logits' count) receive the
 * kept ids, most likely first (ties: the smaller id first), probs [n] their
 * probabilities softmax(logits / temperature) renormalised over the kept
 * set; returns how many are kept (>= 1). Greedy (temperature 0 or top_k 1)
 * keeps the argmax alone. Returns 0 when out of memory. */
size_t tfm_sample_candidates(const float *logits, size_t n, const tfm_sampling *s, int32_t *ids,
                             double *probs);

/* One id drawn by s from logits [n], advancing *rng (a splitmix64 state,
 * seeded with the run's --seed); -1 when out of memory. */
int32_t tfm_sample(const float *logits, size_t n, const tfm_sampling *s, uint64_t *rng);

/* The next uniform double in [0, 1) of splitmix64 state *rng. */
double tfm_sample_uniform(uint64_t *rng);

#endif
