/* Writes a token shard of synthetic ids straight from C (no text): a
 * learnable sequence, each id a function of the one before plus a little
 * noise, so a model's loss falls. For the corpora larger than memory of
 * tests/e2e/shards_big.sh.
 * usage: shard_gen OUT.tokshard VOCAB TOKENS SEED */
#include "shard.h"
#include "tfmrt.h"

#include <stdio.h>
#include <stdlib.h>

enum { CHUNK = 1 << 20 };

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s OUT.tokshard VOCAB TOKENS SEED\n", argv[0]);
    return 2;
  }
  uint64_t vocab = strtoull(argv[2], NULL, 10), tokens = strtoull(argv[3], NULL, 10);
  uint64_t seed = strtoull(argv[4], NULL, 10);
  int32_t *ids = malloc(CHUNK * sizeof *ids);
  tfm_shard_writer w;
  if (!ids || tfm_shard_writer_open(&w, argv[1], vocab)) {
    fprintf(stderr, "%s: %s\n", argv[0], ids ? tfm_error() : "out of memory");
    return 1;
  }
  uint64_t previous = 0;
  for (uint64_t done = 0; done < tokens;) {
    size_t n = tokens - done < CHUNK ? (size_t)(tokens - done) : CHUNK;
    for (size_t i = 0; i < n; i++) {
      uint64_t r = tfm_data_hash(seed, done + i, 0);
      previous = (previous * 5 + 1 + (r % 4 == 0 ? r / 4 % 8 : 0)) % vocab;
      ids[i] = (int32_t)previous;
    }
    if (done % (1u << 24) == 0 && tfm_shard_writer_document(&w)) break; /* a document per 16M */
    if (tfm_shard_writer_append(&w, ids, n)) break;
    done += n;
  }
  free(ids);
  if (w.tokens != tokens || tfm_shard_writer_finish(&w)) {
    fprintf(stderr, "%s: %s\n", argv[0], tfm_error());
    if (w.fd >= 0) tfm_shard_writer_abort(&w);
    return 1;
  }
  printf("wrote %s: %llu tokens, vocabulary %llu\n", argv[1], (unsigned long long)tokens,
         (unsigned long long)vocab);
  return 0;
}
