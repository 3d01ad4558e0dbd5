/* The tokenizer tests' driver (tests/tokenizer/CMakeLists.txt):
 *   tokenize_ids TOKENIZER FILE          the ids of each line of FILE, one line each
 *   tokenize_ids --json TOKENIZER FILE   {"ids": [...], "text": decode(ids)} a line
 *   tokenize_ids --time N TOKENIZER FILE encodes every line N times; prints seconds
 *   tokenize_ids --info TOKENIZER        kind, vocabulary size, special ids
 *   tokenize_ids --train SIZE OUT FILE...  tfm_tokenizer_train_bpe
 * Lines end at '\n' (which is not part of them). Exit 1 with the error on
 * stderr when the tokenizer or a line cannot be used. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "tfmrt.h"
#include "tokenizer.h"

static int fail(void) {
  fprintf(stderr, "tokenize_ids: %s\n", tfm_error());
  return 1;
}

static char *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t capacity = 1 << 16, n = 0, got;
  char *bytes = malloc(capacity);
  while (bytes && (got = fread(bytes + n, 1, capacity - n, f)) > 0) {
    n += got;
    if (n == capacity) {
      char *grown = realloc(bytes, capacity *= 2);
      if (!grown) free(bytes);
      bytes = grown;
    }
  }
  fclose(f);
  *size = n;
  return bytes;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[1], "--train") == 0) {
    if (tfm_tokenizer_train_bpe((const char *const *)argv + 4, (size_t)argc - 4,
                                (size_t)strtoull(argv[2], NULL, 10), argv[3]) != TFM_OK)
      return fail();
    return 0;
  }
  int json = argc == 4 && strcmp(argv[1], "--json") == 0;
  int timed = argc == 5 && strcmp(argv[1], "--time") == 0;
  int info = argc == 3 && strcmp(argv[1], "--info") == 0;
  if (!(argc == 3 && !info) && !json && !timed && !info) {
    fprintf(stderr, "usage: tokenize_ids [--json | --time N | --info] TOKENIZER [FILE]\n"
                    "       tokenize_ids --train SIZE OUT FILE...\n");
    return 2;
  }
  const char *tok_path = argv[argc - (info ? 1 : 2)], *text_path = argv[argc - 1];
  tfm_tokenizer *tok;
  if (tfm_tokenizer_load(tok_path, &tok) != TFM_OK) return fail();
  if (info) {
    tfm_tokenizer_specials s = tfm_tokenizer_special_ids(tok);
    printf("%s %zu bos=%d eos=%d pad=%d unk=%d\n", tfm_tokenizer_kind_name(tfm_tokenizer_kind_of(tok)),
           tfm_tokenizer_vocab_size(tok), (int)s.bos, (int)s.eos, (int)s.pad, (int)s.unk);
    tfm_tokenizer_free(tok);
    return 0;
  }
  size_t size;
  char *text = read_all(text_path, &size);
  if (!text) {
    fprintf(stderr, "tokenize_ids: %s: cannot read\n", text_path);
    tfm_tokenizer_free(tok);
    return 1;
  }
  tfm_tokenizer_ids ids = {0};
  int status = 0;
  long repeats = timed ? strtol(argv[2], NULL, 10) : 1;
  double start = now();
  size_t total = 0;
  for (long r = 0; r < repeats && !status; r++) {
    for (size_t i = 0; i < size && !status;) {
      char *end = memchr(text + i, '\n', size - i);
      size_t n = end ? (size_t)(end - (text + i)) : size - i;
      ids.count = 0;
      if (tfm_tokenizer_encode(tok, text + i, n, &ids) != TFM_OK) {
        status = fail();
        break;
      }
      i += n + 1;
      total += ids.count;
      if (timed) continue;
      if (json) fputs("{\"ids\":[", stdout);
      for (size_t k = 0; k < ids.count; k++) printf(k ? (json ? ",%d" : " %d") : "%d", (int)ids.ids[k]);
      if (json) {
        char *decoded;
        size_t length;
        if (tfm_tokenizer_decode(tok, ids.ids, ids.count, &decoded, &length) != TFM_OK) {
          status = fail();
          break;
        }
        fputs("],\"text\":", stdout);
        json_write_string(stdout, decoded, length);
        fputc('}', stdout);
        free(decoded);
      }
      fputc('\n', stdout);
    }
  }
  if (timed && !status)
    printf("seconds %.6f tokens %zu\n", now() - start, total);
  tfm_tokenizer_ids_free(&ids);
  tfm_tokenizer_free(tok);
  free(text);
  return status;
}
