/* tfm_parallel_for covers every index exactly once, with the documented,
 * deterministic chunks, for many range sizes and thread counts; a chunk whose
 * thread is late is run by one that is free. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "tfmrt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_CHUNKS = 64 };

typedef struct {
  atomic_int *hits;
  atomic_size_t chunk_count;
  size_t begins[MAX_CHUNKS], ends[MAX_CHUNKS];
  pthread_t threads[MAX_CHUNKS];
  tfm_pool *pool; /* for the nested call */
} coverage;

static void count_hits(void *ctx, size_t begin, size_t end) {
  coverage *c = ctx;
  for (size_t i = begin; i < end; i++) atomic_fetch_add(&c->hits[i], 1);
  size_t slot = atomic_fetch_add(&c->chunk_count, 1);
  if (slot < MAX_CHUNKS) {
    c->begins[slot] = begin;
    c->ends[slot] = end;
    c->threads[slot] = pthread_self();
  }
}

static void nested(void *ctx, size_t begin, size_t end) {
  coverage *c = ctx;
  for (size_t i = begin; i < end; i++) {
    coverage inner = {c->hits + i * 10, 0, {0}, {0}, {0}, NULL};
    tfm_parallel_for(c->pool, 10, count_hits, &inner);
  }
}

static void check_coverage(tfm_pool *pool, size_t n) {
  size_t threads = tfm_pool_threads(pool);
  coverage c = {calloc(n + 1, sizeof(atomic_int)), 0, {0}, {0}, {0}, NULL};
  CHECK_OK(tfm_parallel_for(pool, n, count_hits, &c));
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += atomic_load(&c.hits[i]) != 1;
  if (wrong) {
    fprintf(stderr, "n=%zu threads=%zu: %zu indices not covered exactly once\n", n, threads,
            wrong);
    check_failures++;
  }
  /* Chunk i is [i*(n/k) + min(i, n%k), ...) with n/k (+1 for i < n%k) indices. */
  size_t k = n < threads ? n : threads, chunks = atomic_load(&c.chunk_count);
  CHECK(chunks == k);
  for (size_t i = 0; i < k && chunks == k && k <= MAX_CHUNKS; i++) {
    size_t begin = i * (n / k) + (i < n % k ? i : n % k);
    size_t end = begin + n / k + (i < n % k);
    size_t found = 0;
    for (size_t s = 0; s < chunks; s++) found += c.begins[s] == begin && c.ends[s] == end;
    if (found != 1) {
      fprintf(stderr, "n=%zu threads=%zu: chunk %zu [%zu, %zu) ran %zu times\n", n, threads, i,
              begin, end, found);
      check_failures++;
    }
  }
  free(c.hits);
}

static void sleep_on_caller(void *ctx, size_t begin, size_t end) {
  (void)end;
  if (begin == 0 && pthread_equal(pthread_self(), *(pthread_t *)ctx))
    nanosleep(&(struct timespec){0, 2000000}, NULL);
}

/* A worker that found no work for longer than the pool's spin sleeps, and
 * waking it takes microseconds at least, while the caller finishes an empty
 * chunk in far less: the caller then runs the worker's chunk itself. Tried
 * 50 times; once is enough to show it happens (on an idle machine nearly
 * every try does). */
static void check_late_chunk_taken(void) {
  tfm_pool *pool = NULL;
  CHECK_OK(tfm_pool_create(&pool, 2));
  if (!pool) return;
  pthread_t self = pthread_self();
  int taken = 0;
  for (int attempt = 0; attempt < 50; attempt++) {
    CHECK_OK(tfm_parallel_for(pool, 2, sleep_on_caller, &self)); /* the worker goes idle */
    coverage c = {calloc(2, sizeof(atomic_int)), 0, {0}, {0}, {0}, NULL};
    CHECK_OK(tfm_parallel_for(pool, 2, count_hits, &c));
    CHECK(atomic_load(&c.hits[0]) == 1 && atomic_load(&c.hits[1]) == 1);
    taken += atomic_load(&c.chunk_count) == 2 && pthread_equal(c.threads[0], self) &&
             pthread_equal(c.threads[1], self);
    free(c.hits);
  }
  printf("the caller ran the late worker's chunk in %d of 50 tries\n", taken);
  CHECK(taken > 0);
  tfm_pool_destroy(pool);
}

int main(void) {
  static const size_t sizes[] = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4097,
                                 100003};
  static const size_t thread_counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 16};
  for (size_t t = 0; t < sizeof thread_counts / sizeof *thread_counts; t++) {
    tfm_pool *pool = NULL;
    CHECK_OK(tfm_pool_create(&pool, thread_counts[t]));
    if (!pool) continue;
    CHECK(tfm_pool_threads(pool) == thread_counts[t]);
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) check_coverage(pool, sizes[s]);
    for (int repeat = 0; repeat < 500; repeat++) check_coverage(pool, 1 + (size_t)repeat % 37);

    /* A parallel_for inside a chunk runs serially instead of deadlocking. */
    coverage outer = {calloc(100 * 10, sizeof(atomic_int)), 0, {0}, {0}, {0}, pool};
    CHECK_OK(tfm_parallel_for(pool, 100, nested, &outer));
    size_t wrong = 0;
    for (size_t i = 0; i < 1000; i++) wrong += atomic_load(&outer.hits[i]) != 1;
    CHECK(wrong == 0);
    free(outer.hits);
    tfm_pool_destroy(pool);
  }

  check_late_chunk_taken();

  /* The worker count comes from TFM_THREADS, else from the CPUs. */
  tfm_pool *pool = NULL;
  setenv("TFM_THREADS", "3", 1);
  CHECK_OK(tfm_pool_create(&pool, 0));
  CHECK(pool && tfm_pool_threads(pool) == 3);
  tfm_pool_destroy(pool);
  static const char *const bad[] = {"0", "abc", "-2", "4x", "100000"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    setenv("TFM_THREADS", bad[i], 1);
    CHECK_REFUSED(tfm_pool_create(&pool, 0), NULL, "TFM_THREADS is");
  }
  unsetenv("TFM_THREADS");
  pool = NULL;
  CHECK_OK(tfm_pool_create(&pool, 0));
  CHECK(pool && tfm_pool_threads(pool) >= 1);
  if (pool) printf("threads from the CPU count: %zu\n", tfm_pool_threads(pool));
  tfm_pool_destroy(pool);
  /* Without a pool the caller runs the whole range in one chunk. */
  coverage serial = {calloc(5, sizeof(atomic_int)), 0, {0}, {0}, {0}, NULL};
  CHECK_OK(tfm_parallel_for(NULL, 4, count_hits, &serial));
  for (size_t i = 0; i < 4; i++) CHECK(atomic_load(&serial.hits[i]) == 1);
  CHECK(atomic_load(&serial.chunk_count) == 1 && serial.begins[0] == 0 && serial.ends[0] == 4);
  free(serial.hits);
  CHECK_REFUSED(tfm_parallel_for(NULL, 4, NULL, NULL), NULL, "no function");
  return check_result("threads");
}
