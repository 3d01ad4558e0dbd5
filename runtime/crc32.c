/* Table-driven CRC-32, reflected polynomial 0xEDB88320. */
#include "crc32.h"

#include <pthread.h>

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
  for (uint32_t n = 0; n < 256; n++) {
    uint32_t c = n;
    for (int bit = 0; bit < 8; bit++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
}

uint32_t crc32_update(uint32_t crc, const void *data, size_t size) {
  pthread_once(&table_once, build_table);
  const unsigned char *bytes = data;
  crc = ~crc;
  for (size_t i = 0; i < size; i++) crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}
