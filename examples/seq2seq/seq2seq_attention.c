/* seq2seq_attention DUMP.safetensors [--heads]
 *
 * Shows the attention weights a compiled model's `translate --dump NAME
 * --dump-file DUMP.safetensors` saved: tensors NAME.I of shape [heads, T, S]
 * or [T, S] (pair I), with the pair's source and translation in the metadata
 * as src.I and tgt.I. For each pair it prints, for every target word, the
 * source word it attends to most (weights averaged over heads) and a row of
 * shades, one column per source word ('@' for >= 0.8 down to ' ' below 0.05);
 * with --heads, one such block per head as well.
 *
 * The file is read and validated by the runtime's checkpoint reader. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfmrt.h"

#define MAX_WORDS 128

typedef struct Words {
  int count;
  char *at[MAX_WORDS];
} Words;

/* Splits a copy of text at spaces; <pad> and words after <eos> are dropped. */
static void split_words(char *text, Words *w) {
  w->count = 0;
  for (char *save = NULL, *t = strtok_r(text, " ", &save); t && w->count < MAX_WORDS;
       t = strtok_r(NULL, " ", &save)) {
    if (!strcmp(t, "<eos>")) break;
    if (strcmp(t, "<pad>")) w->at[w->count++] = t;
  }
}

static char shade(float weight) {
  static const char shades[] = " .:-=+*#%@";
  int level = weight < 0.05f ? 0 : 1 + (int)(weight * 10.0f);
  return shades[level > 9 ? 9 : level];
}

/* Prints one [T, S] matrix of weights (row t at w + t * S) for the words. */
static void show_matrix(const float *w, long S, const Words *src, const Words *tgt) {
  printf("    %-6s %-6s |", "target", "looks");
  for (int s = 0; s < src->count && s < S; s++) printf("%c", "0123456789"[s % 10]);
  printf("|\n");
  for (int t = 0; t < tgt->count; t++) {
    const float *row = w + t * S;
    int best = 0;
    for (int s = 1; s < src->count && s < S; s++)
      if (row[s] > row[best]) best = s;
    printf("    %-6s %-6s |", tgt->at[t], best < src->count ? src->at[best] : "?");
    for (int s = 0; s < src->count && s < S; s++) putchar(shade(row[s]));
    printf("|\n");
  }
}

static const tfm_tensor *find_tensor(const tfm_tensor *t, size_t count, const char *name) {
  for (size_t i = 0; i < count; i++)
    if (!strcmp(t[i].name, name)) return &t[i];
  return NULL;
}

static int show_pair(const tfm_tensor *weights, const tfm_meta *meta, const char *index,
                     int heads_too) {
  if (weights->dtype != TFM_F32 || weights->rank < 2 || weights->rank > 3) {
    fprintf(stderr, "seq2seq_attention: tensor %s is not F32 [heads,] T, S\n", weights->name);
    return 1;
  }
  long dims[3] = {1, 1, 1};
  for (size_t d = 0; d < weights->rank; d++) dims[3 - weights->rank + d] = (long)weights->shape[d];
  long H = dims[0], T = dims[1], S = dims[2];
  const float *w = weights->data;
  float *mean = calloc((size_t)(T * S) + 1, sizeof(float));
  if (!mean) {
    fprintf(stderr, "seq2seq_attention: out of memory\n");
    return 1;
  }
  for (long h = 0; h < H; h++)
    for (long i = 0; i < T * S; i++) mean[i] += w[h * T * S + i] / (float)H;

  char key[64];
  snprintf(key, sizeof key, "src.%s", index);
  const char *src_text = tfm_meta_get(meta, key);
  snprintf(key, sizeof key, "tgt.%s", index);
  const char *tgt_text = tfm_meta_get(meta, key);
  char *src_copy = strdup(src_text ? src_text : "");
  char *tgt_copy = strdup(tgt_text ? tgt_text : "");
  Words src, tgt;
  split_words(src_copy, &src);
  split_words(tgt_copy, &tgt);
  if (tgt.count > T) tgt.count = (int)T;
  printf("pair %s: %s  ->", index, src_text ? src_text : "?");
  for (int t = 0; t < tgt.count; t++) printf(" %s", tgt.at[t]);
  printf("\n  source columns:");
  for (int s = 0; s < src.count; s++) printf(" %d=%s", s, src.at[s]);
  printf("\n  mean over %ld heads:\n", H);
  show_matrix(mean, S, &src, &tgt);
  for (long h = 0; heads_too && H > 1 && h < H; h++) {
    printf("  head %ld:\n", h);
    show_matrix(w + h * T * S, S, &src, &tgt);
  }
  printf("\n");
  free(src_copy), free(tgt_copy), free(mean);
  return 0;
}

int main(int argc, char **argv) {
  int heads_too = argc == 3 && !strcmp(argv[2], "--heads");
  if (argc < 2 || (argc == 3 && !heads_too) || argc > 3) {
    fprintf(stderr, "usage: seq2seq_attention DUMP.safetensors [--heads]\n");
    return 2;
  }
  tfm_tensor *tensors;
  size_t count;
  tfm_meta meta = {0};
  if (tfm_ckpt_read(argv[1], &tensors, &count, &meta)) {
    fprintf(stderr, "seq2seq_attention: %s\n", tfm_error());
    return 1;
  }
  int status = 1;
  const char *dumped = tfm_meta_get(&meta, "tfm.dump");
  if (!dumped) {
    fprintf(stderr, "seq2seq_attention: %s was not written by translate --dump\n", argv[1]);
  } else {
    status = 0;
    /* Pairs in index order: NAME.0, NAME.1, ... */
    for (int i = 0; !status; i++) {
      char name[256], index[32];
      snprintf(index, sizeof index, "%d", i);
      snprintf(name, sizeof name, "%s.%s", dumped, index);
      const tfm_tensor *weights = find_tensor(tensors, count, name);
      if (!weights) {
        if (i == 0) fprintf(stderr, "seq2seq_attention: %s holds no tensor %s\n", argv[1], name);
        status = i == 0;
        break;
      }
      status = show_pair(weights, &meta, index, heads_too);
    }
  }
  tfm_ckpt_free_tensors(tensors, count);
  tfm_meta_clear(&meta);
  return status;
}
