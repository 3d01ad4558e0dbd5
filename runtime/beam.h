/* Beam search over a next-token model given as a callback, so it can be
 * tested without a compiled model (see beam.c for the exact rules). */
#ifndef TFM_BEAM_H
#define TFM_BEAM_H
#include <stddef.h>
#include <stdint.h>

/* Fills logprobs [count, vocab] with log P(next token | input, prefix) for
 * `count` hypotheses: hypothesis i continues input inputs[i] with the tokens
 * prefixes[i * length .. (i + 1) * length) (the generated tokens so far, no
 * <bos>). Returns 0, or nonzero to abort the search with that status. */
typedef int (*tfm_logprob_fn)(void *ctx, size_t count, const size_t *inputs,
                              const int32_t *prefixes, size_t length, double *logprobs);

typedef struct tfm_beam_options {
  size_t beam;    /* width, >= 1 */
  size_t vocab;   /* classes of the distribution */
  double alpha;   /* GNMT length penalty exponent; 0: plain log-probability */
  int32_t eos;    /* the token that ends a hypothesis */
} tfm_beam_options;

/* The best hypothesis of one input. */
typedef struct tfm_beam_result {
  size_t length;  /* tokens in out, <eos> included when it was produced */
  double logprob; /* log P(Y | X), the sum over its tokens */
  double score;   /* logprob / lp(length) */
} tfm_beam_result;

/* lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016). */
double tfm_length_penalty(size_t length, double alpha);

/* Log-softmax of n float logits into doubles (max-shifted, in double). */
void tfm_log_softmax(const float *logits, size_t n, double *out);

/* Searches `inputs` inputs together (one callback call per step covers the
 * live hypotheses of all of them). max_length[i] bounds input i's output;
 * out [inputs, out_stride] receives the best hypothesis of each (out_stride
 * >= every max_length), padded with 0; results[i] its length and scores. */
int tfm_beam_search(const tfm_beam_options *options, size_t inputs, const size_t *max_length,
                    tfm_logprob_fn next, void *ctx, int32_t *out, size_t out_stride,
                    tfm_beam_result *results);

#endif
