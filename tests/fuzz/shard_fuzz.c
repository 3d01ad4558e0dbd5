/* libFuzzer target for the token shard reader: any bytes as a whole shard
 * file must be refused with a message or accepted with every id and
 * document start inside the bytes, never a crash or a read out of bounds. */
#include <stdint.h>
#include <string.h>

#include "shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tfm_shard_header h;
  if (tfm_shard_parse("fuzz.tokshard", data, size, &h)) return 0;
  /* Accepted: the ids and the document table lie inside the file. */
  uint64_t sum = 0;
  const uint8_t *ids = data + TFM_SHARD_HEADER_BYTES;
  for (uint64_t i = 0; i < h.token_count * h.id_bytes; i++) sum += ids[i];
  const uint8_t *docs = data + tfm_shard_docs_offset(&h);
  for (uint64_t i = 0; i < 8 * h.doc_count; i++) sum += docs[i];
  volatile uint64_t keep = sum;
  (void)keep;
  return 0;
}
