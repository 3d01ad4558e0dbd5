/* libFuzzer target for the token shard reader: any bytes as a whole shard
 * file must be refused with a message or accepted with every id and
 * document start inside the bytes, never a crash or a read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32.h"
#include "shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse(const uint8_t *data, size_t size) {
  tfm_shard_header h;
  if (tfm_shard_parse("fuzz.tokshard", data, size, &h)) return;
  /* Accepted: the ids and the document table lie inside the file. */
  uint64_t sum = 0;
  const uint8_t *ids = data + TFM_SHARD_HEADER_BYTES;
  for (uint64_t i = 0; i < h.token_count * h.id_bytes; i++) sum += ids[i];
  const uint8_t *docs = data + tfm_shard_docs_offset(&h);
  for (uint64_t i = 0; i < 8 * h.doc_count; i++) sum += docs[i];
  volatile uint64_t keep = sum;
  (void)keep;
}

/* The bytes as they are, then with a correct header CRC, so that mutations
 * reach the checks behind the checksum (sizes, padding, documents). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  parse(data, size);
  if (size < TFM_SHARD_HEADER_BYTES) return 0;
  uint8_t *copy = malloc(size);
  if (!copy) return 0;
  memcpy(copy, data, size);
  uint32_t crc = crc32_update(0, copy, TFM_SHARD_CRC_OFFSET);
  for (int i = 0; i < 4; i++) copy[TFM_SHARD_CRC_OFFSET + i] = (uint8_t)(crc >> (8 * i));
  parse(copy, size);
  free(copy);
  return 0;
}
