/* The arena: one zeroed allocation, both regions 64-byte aligned and disjoint. */
#include "check.h"
#include "tfmrt.h"

#include <stdint.h>
#include <string.h>

static void check_arena(size_t persistent, size_t scratch) {
  tfm_arena arena;
  CHECK_OK(tfm_arena_create(&arena, persistent, scratch));
  CHECK((uintptr_t)arena.persistent % 64 == 0);
  CHECK((uintptr_t)arena.scratch % 64 == 0);
  CHECK(arena.scratch >= arena.persistent + persistent);
  CHECK((size_t)(arena.scratch - arena.persistent) < persistent + 64);
  CHECK(arena.persistent_bytes == persistent && arena.scratch_bytes == scratch);
  size_t nonzero = 0;
  for (size_t i = 0; i < persistent; i++) nonzero += arena.persistent[i] != 0;
  for (size_t i = 0; i < scratch; i++) nonzero += arena.scratch[i] != 0;
  CHECK(nonzero == 0);
  /* Writing every byte of both regions stays inside the allocation (ASan). */
  memset(arena.persistent, 1, persistent);
  memset(arena.scratch, 2, scratch);
  CHECK(persistent == 0 || arena.persistent[persistent - 1] == 1);
  tfm_arena_destroy(&arena);
  CHECK(arena.persistent == NULL);
}

int main(void) {
  check_arena(0, 0);
  check_arena(1, 0);
  check_arena(0, 1);
  check_arena(100, 1000);
  check_arena(64, 64);
  check_arena(1 << 20, 3 << 20);
  tfm_arena arena;
  CHECK_REFUSED(tfm_arena_create(&arena, SIZE_MAX, 1), NULL, "overflow");
  CHECK_REFUSED(tfm_arena_create(&arena, SIZE_MAX / 2, SIZE_MAX / 2), NULL, "overflow");
  CHECK_REFUSED(tfm_arena_create(&arena, (size_t)1 << 62, 0), NULL, "cannot allocate");
  return check_result("arena");
}
