/* CRC-32 (IEEE 802.3, as zlib.crc32 computes it): checkpoint checksums. */
#ifndef TFMRT_CRC32_H
#define TFMRT_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC: start with crc = 0, feed the bytes in any number of calls. */
uint32_t crc32_update(uint32_t crc, const void *data, size_t size);

#endif
