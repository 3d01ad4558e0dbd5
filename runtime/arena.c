/* The one allocation a compiled model makes; the compiler lays out every
 * buffer at a fixed offset inside its two regions. */
#include "tfmrt.h"

#include "gpu.h"

#include <stdlib.h>
#include <string.h>

static size_t round_up(size_t bytes) {
  return (bytes + TFM_ARENA_ALIGN - 1) / TFM_ARENA_ALIGN * TFM_ARENA_ALIGN;
}

int tfm_arena_create(tfm_arena *arena, size_t persistent_bytes, size_t scratch_bytes) {
  *arena = (tfm_arena){0};
  size_t limit = SIZE_MAX - 2 * TFM_ARENA_ALIGN;
  if (persistent_bytes > limit || scratch_bytes > limit - round_up(persistent_bytes))
    return tfm_fail("arena: %zu persistent + %zu scratch bytes overflow the address space",
                    persistent_bytes, scratch_bytes);
  size_t scratch_offset = round_up(persistent_bytes);
  /* aligned_alloc wants a nonzero multiple of the alignment. */
  size_t total = round_up(scratch_offset + scratch_bytes);
  if (total == 0) total = TFM_ARENA_ALIGN;
  unsigned char *base = aligned_alloc(TFM_ARENA_ALIGN, total);
  if (!base)
    return tfm_fail("arena: cannot allocate %zu bytes (%zu persistent + %zu scratch)", total,
                    persistent_bytes, scratch_bytes);
  memset(base, 0, total);
  *arena = (tfm_arena){base, base + scratch_offset, persistent_bytes, scratch_bytes};
  return TFM_OK;
}

void tfm_arena_destroy(tfm_arena *arena) {
  tfm_gpu_arena_forget(arena->persistent);
  free(arena->persistent);
  *arena = (tfm_arena){0};
}
