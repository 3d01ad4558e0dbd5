/* Philox 4x32-10, the constants of Random123. */
#include "philox.h"

static void philox_round(uint32_t c[4], const uint32_t k[2]) {
  uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
  uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
  uint32_t next[4] = {
      (uint32_t)(p1 >> 32) ^ c[1] ^ k[0],
      (uint32_t)p1,
      (uint32_t)(p0 >> 32) ^ c[3] ^ k[1],
      (uint32_t)p0,
  };
  for (int i = 0; i < 4; i++) c[i] = next[i];
}

void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c[4] = {counter[0], counter[1], counter[2], counter[3]};
  uint32_t k[2] = {key[0], key[1]};
  for (int round = 0; round < 10; round++) {
    if (round > 0) {
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    philox_round(c, k);
  }
  for (int i = 0; i < 4; i++) out[i] = c[i];
}

double philox_uniform(uint64_t seed, uint32_t stream, uint32_t offset, uint64_t index) {
  uint64_t block = index / 4;
  uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), stream, offset};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t words[4];
  philox4x32_10(counter, key, words);
  return (double)(words[index % 4] >> 8) * (1.0 / 16777216.0);
}
