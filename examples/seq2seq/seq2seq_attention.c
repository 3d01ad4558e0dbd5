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
 * The file is the runtime's safetensors: an 8-byte little-endian header size,
 * the JSON header, the tensor bytes (F32 only here). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

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

static const json_value *member(const json_value *object, const char *key) {
  for (const json_value *v = object ? object->first_child : NULL; v; v = v->next)
    if (!strcmp(v->key, key)) return v;
  return NULL;
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

static int show_pair(const json_value *info, const unsigned char *data, size_t data_size,
                     const char *name, const json_value *meta, const char *index, int heads_too) {
  const json_value *shape = member(info, "shape"), *offsets = member(info, "data_offsets");
  const json_value *dtype = member(info, "dtype");
  if (!shape || !offsets || !dtype || dtype->kind != JSON_STRING || strcmp(dtype->string, "F32") ||
      offsets->kind != JSON_ARRAY || offsets->child_count != 2 || !offsets->first_child->is_uint ||
      !offsets->first_child->next->is_uint) {
    fprintf(stderr, "seq2seq_attention: tensor %s: not an F32 tensor with a shape and two data_offsets\n", name);
    return 1;
  }
  long dims[3] = {1, 1, 1};
  size_t rank = shape->kind == JSON_ARRAY ? shape->child_count : 0;
  if (rank < 2 || rank > 3) {
    fprintf(stderr, "seq2seq_attention: tensor %s has rank %zu, not [heads,] T, S\n", name, rank);
    return 1;
  }
  size_t k = 3 - rank;
  for (const json_value *d = shape->first_child; d; d = d->next) {
    if (!d->is_uint || d->uint > 1u << 20) {
      fprintf(stderr, "seq2seq_attention: tensor %s has a bad shape\n", name);
      return 1;
    }
    dims[k++] = (long)d->uint;
  }
  long H = dims[0], T = dims[1], S = dims[2];
  size_t begin = (size_t)offsets->first_child->uint, end = (size_t)offsets->first_child->next->uint;
  if (end > data_size || end - begin != sizeof(float) * (size_t)(H * T * S)) {
    fprintf(stderr, "seq2seq_attention: tensor %s: its bytes do not match its shape\n", name);
    return 1;
  }
  float *w = malloc(sizeof(float) * (size_t)(H * T * S)), *mean = calloc((size_t)(T * S), sizeof(float));
  if (!w || !mean) {
    free(w), free(mean);
    fprintf(stderr, "seq2seq_attention: out of memory\n");
    return 1;
  }
  memcpy(w, data + begin, end - begin); /* the file is little-endian, as is x86-64 */
  for (long h = 0; h < H; h++)
    for (long i = 0; i < T * S; i++) mean[i] += w[h * T * S + i] / (float)H;

  char key[64];
  snprintf(key, sizeof key, "src.%s", index);
  const json_value *src_text = member(meta, key);
  snprintf(key, sizeof key, "tgt.%s", index);
  const json_value *tgt_text = member(meta, key);
  char *src_copy = strdup(src_text && src_text->kind == JSON_STRING ? src_text->string : "");
  char *tgt_copy = strdup(tgt_text && tgt_text->kind == JSON_STRING ? tgt_text->string : "");
  Words src, tgt;
  split_words(src_copy, &src);
  split_words(tgt_copy, &tgt);
  if (tgt.count > T) tgt.count = (int)T;
  printf("pair %s: %s  ->", index, src_text ? src_text->string : "?");
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
  free(src_copy), free(tgt_copy), free(w), free(mean);
  return 0;
}

int main(int argc, char **argv) {
  int heads_too = argc == 3 && !strcmp(argv[2], "--heads");
  if (argc < 2 || (argc == 3 && !heads_too) || argc > 3) {
    fprintf(stderr, "usage: seq2seq_attention DUMP.safetensors [--heads]\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  unsigned char size_bytes[8];
  unsigned long long header_size = 0;
  int status = 1;
  char *header = NULL;
  unsigned char *data = NULL;
  json_value *root = NULL;
  if (fread(size_bytes, 1, 8, f) != 8) goto bad_file;
  for (int i = 7; i >= 0; i--) header_size = header_size << 8 | size_bytes[i];
  if (header_size == 0 || header_size > (1u << 24)) goto bad_file;
  header = malloc(header_size);
  if (!header || fread(header, 1, header_size, f) != header_size) goto bad_file;
  long data_start = ftell(f);
  fseek(f, 0, SEEK_END);
  size_t data_size = (size_t)(ftell(f) - data_start);
  fseek(f, data_start, SEEK_SET);
  data = malloc(data_size ? data_size : 1);
  if (!data || fread(data, 1, data_size, f) != data_size) goto bad_file;
  char error[256];
  if (json_parse(header, header_size, &root, error, sizeof error) || root->kind != JSON_OBJECT) {
    fprintf(stderr, "seq2seq_attention: %s: header: %s\n", argv[1], root ? "not an object" : error);
    goto done;
  }
  const json_value *meta = member(root, "__metadata__");
  const json_value *dumped = member(meta, "tfm.dump");
  if (!dumped || dumped->kind != JSON_STRING) {
    fprintf(stderr, "seq2seq_attention: %s was not written by translate --dump\n", argv[1]);
    goto done;
  }
  size_t prefix = strlen(dumped->string);
  status = 0;
  /* Pairs in index order: NAME.0, NAME.1, ... */
  for (int i = 0; !status; i++) {
    char name[256], index[32];
    snprintf(index, sizeof index, "%d", i);
    snprintf(name, sizeof name, "%.*s.%s", (int)prefix, dumped->string, index);
    const json_value *info = member(root, name);
    if (!info) {
      if (i == 0) fprintf(stderr, "seq2seq_attention: %s holds no tensor %s\n", argv[1], name);
      status = i == 0;
      break;
    }
    status = show_pair(info, data, data_size, name, meta, index, heads_too);
  }
  goto done;
bad_file:
  fprintf(stderr, "seq2seq_attention: %s is not a safetensors file\n", argv[1]);
done:
  json_free(root);
  free(header);
  free(data);
  fclose(f);
  return status;
}
