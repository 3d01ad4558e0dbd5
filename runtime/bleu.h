/* Corpus BLEU as sacreBLEU computes it by default (see bleu.c). */
#ifndef TFM_BLEU_H
#define TFM_BLEU_H
#include <stddef.h>
#include <stdint.h>

#define TFM_BLEU_ORDER 4

/* Sufficient statistics, summed over the sentences of a corpus. */
typedef struct tfm_bleu_stats {
  uint64_t correct[TFM_BLEU_ORDER], total[TFM_BLEU_ORDER];
  uint64_t hyp_len, ref_len;
} tfm_bleu_stats;

typedef struct tfm_bleu_score {
  double bleu;                          /* 0..100 */
  double precisions[TFM_BLEU_ORDER];    /* percent, after smoothing */
  double bp, ratio;                     /* brevity penalty, hyp_len / ref_len */
  uint64_t hyp_len, ref_len;
} tfm_bleu_score;

/* The mteval-v13a tokenisation of one line: a malloc'd string of tokens
 * separated by single spaces (NULL when out of memory). */
char *tfm_bleu_tokenize_13a(const char *line);

/* Tokenises a hypothesis and its (single) reference and adds their counts. */
int tfm_bleu_add(tfm_bleu_stats *stats, const char *hypothesis, const char *reference);

tfm_bleu_score tfm_bleu_compute(const tfm_bleu_stats *stats);

/* "bleu 34.21 (61.0/40.2/28.3/20.1, bp 1.000, ratio 1.012, hyp_len 980, ref_len 968)" */
void tfm_bleu_format(const tfm_bleu_score *score, char *buf, size_t size);

#endif
