/* Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC 2011): a counter-based generator, so any element of a random
 * tensor can be recomputed from its counter alone. */
#ifndef TFM_PHILOX_H
#define TFM_PHILOX_H

#include <stdint.h>

void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

/* Element `index` of a random node: key = seed, counter = (index / 4 low,
 * index / 4 high, stream, offset), word index % 4, top 24 bits scaled to
 * [0, 1) so that f32 and f64 see the same values. */
double philox_uniform(uint64_t seed, uint32_t stream, uint32_t offset, uint64_t index);

#endif
