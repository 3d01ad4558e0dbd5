/* A fixed pool of pthreads behind tfm_parallel_for. A call's range is cut
 * into one chunk per thread, the same way for the same n and pool size. The
 * caller runs chunk 0 and worker i chunk i, unless a thread that has
 * finished its own finds another chunk not yet started: then it runs that
 * one too. Which thread runs a chunk never changes what it computes (no
 * generated kernel depends on it), and the chunks' boundaries stay fixed.
 *
 * A training step is hundreds of kernels back to back, each one call. Waking
 * a thread blocked on a condition variable took long enough on the VMs here
 * to halve a 512 x 512 GEMM (bench/RESULTS.md), so both sides first spin for
 * a bounded time (SPIN_NS) on the atomic they wait for, and only then
 * block: between consecutive kernels nobody sleeps, while an idle pool, or
 * one on an oversubscribed machine, costs at most SPIN_NS of CPU per wait.
 * A worker that did sleep can take longer to wake (0.2 to 1 ms on these
 * VMs) than its chunk takes to run: the caller then runs it instead of
 * waiting, which also keeps the next call from waking a sleeper again. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "tfmrt.h"
#include "profile.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 1024
#define SPIN_NS 100000 /* 100 us: longer than the gap between two kernels */

typedef struct {
  tfm_pool *pool;
  size_t index;
} worker;

struct tfm_pool {
  size_t threads;            /* the caller plus threads - 1 workers */
  pthread_t *handles;
  worker *workers;
  pthread_mutex_t call_lock; /* one tfm_parallel_for at a time */
  pthread_mutex_t lock;      /* for the condition variables' waits and wake-ups */
  pthread_cond_t work_ready, work_done;
  _Atomic uint64_t generation; /* job g's number, bumped under lock */
  _Atomic bool shutting_down;
  /* Job g: written before generation becomes g, unchanged until it ends. */
  tfm_range_fn fn;
  void *ctx;
  size_t n, chunks;
  /* Per chunk slot (threads of them): 2g while job g's chunk is not
   * started, 2g + 1 once a thread took it (and for slots past chunks), so
   * a thread still looking at an older job can never take one. */
  _Atomic uint64_t *claims;
  _Atomic size_t finished; /* chunks of the job done */
};

/* Set while a thread runs a chunk, so a nested call runs serially instead of
 * waiting for workers that are busy with the outer call. */
static _Thread_local bool inside_parallel_for;

static void run_chunk(const tfm_pool *pool, size_t i) {
  size_t base = pool->n / pool->chunks, extra = pool->n % pool->chunks;
  size_t begin = i * base + (i < extra ? i : extra);
  size_t end = begin + base + (i < extra ? 1 : 0);
  inside_parallel_for = true;
  pool->fn(pool->ctx, begin, end);
  inside_parallel_for = false;
}

/* Runs every chunk of job g that no thread has started, `first` first (a
 * thread's own chunk, so the rows a thread works on stay the same from one
 * kernel to the next while nobody is late). */
static void run_free_chunks(tfm_pool *pool, uint64_t g, size_t first) {
  for (size_t j = 0; j < pool->threads; j++) {
    size_t i = (first + j) % pool->threads;
    uint64_t free_mark = 2 * g;
    if (atomic_load_explicit(&pool->claims[i], memory_order_relaxed) != free_mark ||
        !atomic_compare_exchange_strong(&pool->claims[i], &free_mark, free_mark + 1))
      continue;
    size_t chunks = pool->chunks; /* job g's until its last chunk is counted */
    run_chunk(pool, i);
    if (atomic_fetch_add_explicit(&pool->finished, 1, memory_order_acq_rel) + 1 == chunks) {
      pthread_mutex_lock(&pool->lock);
      pthread_cond_signal(&pool->work_done);
      pthread_mutex_unlock(&pool->lock);
    }
  }
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins until *value != unchanged or SPIN_NS pass; the caller then takes the
 * lock and re-checks, blocking if need be, so this only saves a wake-up. */
static void spin_while_equal(const _Atomic uint64_t *value, uint64_t unchanged) {
  int64_t until = now_ns() + SPIN_NS;
  for (unsigned i = 1; atomic_load_explicit(value, memory_order_acquire) == unchanged; i++)
    if (i % 256 == 0 && now_ns() > until) return;
}

/* The caller's wait for the chunks that workers have started. */
static void spin_while_unfinished(const tfm_pool *pool) {
  int64_t until = now_ns() + SPIN_NS;
  for (unsigned i = 1;
       atomic_load_explicit(&pool->finished, memory_order_acquire) != pool->chunks; i++)
    if (i % 256 == 0 && now_ns() > until) return;
}

static void *worker_main(void *arg) {
  const worker *self = arg;
  tfm_pool *pool = self->pool;
  uint64_t seen = 0;
  for (;;) {
    spin_while_equal(&pool->generation, seen);
    pthread_mutex_lock(&pool->lock);
    while (pool->generation == seen && !pool->shutting_down)
      pthread_cond_wait(&pool->work_ready, &pool->lock);
    if (pool->shutting_down) {
      pthread_mutex_unlock(&pool->lock);
      return NULL;
    }
    seen = pool->generation;
    pthread_mutex_unlock(&pool->lock);
    run_free_chunks(pool, seen, self->index);
  }
}

static int threads_from_environment(size_t *threads) {
  const char *env = getenv("TFM_THREADS");
  if (env && *env) {
    char *end;
    errno = 0;
    long value = strtol(env, &end, 10);
    if (*end != '\0' || errno != 0 || value < 1 || value > MAX_THREADS)
      return tfm_fail("TFM_THREADS is \"%s\": expected a thread count from 1 to %d", env,
                      MAX_THREADS);
    *threads = (size_t)value;
    return TFM_OK;
  }
  cpu_set_t cpus;
  long count = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
  *threads = count < 1 ? 1 : count > MAX_THREADS ? MAX_THREADS : (size_t)count;
  return TFM_OK;
}

static void stop_workers(tfm_pool *pool, size_t started) {
  pthread_mutex_lock(&pool->lock);
  pool->shutting_down = true;
  pthread_cond_broadcast(&pool->work_ready);
  pthread_mutex_unlock(&pool->lock);
  for (size_t i = 0; i < started; i++) pthread_join(pool->handles[i], NULL);
  pthread_cond_destroy(&pool->work_done);
  pthread_cond_destroy(&pool->work_ready);
  pthread_mutex_destroy(&pool->lock);
  pthread_mutex_destroy(&pool->call_lock);
  free(pool->handles);
  free(pool->workers);
  free(pool->claims);
  free(pool);
}

int tfm_pool_create(tfm_pool **out, size_t threads) {
  if (threads == 0 && threads_from_environment(&threads)) return TFM_FAILED;
  if (threads > MAX_THREADS)
    return tfm_fail("thread pool: %zu threads requested, at most %d", threads, MAX_THREADS);
  tfm_pool *pool = calloc(1, sizeof *pool);
  if (!pool) return tfm_fail("thread pool: out of memory");
  pool->threads = threads;
  pool->handles = calloc(threads, sizeof *pool->handles);
  pool->workers = calloc(threads, sizeof *pool->workers);
  pool->claims = calloc(threads, sizeof *pool->claims);
  pthread_mutex_init(&pool->call_lock, NULL);
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->work_ready, NULL);
  pthread_cond_init(&pool->work_done, NULL);
  if (!pool->handles || !pool->workers || !pool->claims) {
    stop_workers(pool, 0);
    return tfm_fail("thread pool: out of memory");
  }
  for (size_t i = 1; i < threads; i++) {
    pool->workers[i] = (worker){pool, i};
    int err = pthread_create(&pool->handles[i - 1], NULL, worker_main, &pool->workers[i]);
    if (err) {
      stop_workers(pool, i - 1);
      return tfm_fail("thread pool: cannot start thread %zu of %zu: %s", i + 1, threads,
                      strerror(err));
    }
  }
  *out = pool;
  return TFM_OK;
}

void tfm_pool_destroy(tfm_pool *pool) {
  if (pool) stop_workers(pool, pool->threads - 1);
}

size_t tfm_pool_threads(const tfm_pool *pool) { return pool->threads; }

int tfm_parallel_for(tfm_pool *pool, size_t n, tfm_range_fn fn, void *ctx) {
  if (!fn) return tfm_fail("parallel_for: no function");
  if (n == 0) return TFM_OK;
  /* No pool: the caller runs the whole range (generated code passes NULL
   * when asked to run serially, so it needs no branch per kernel). */
  size_t chunks = !pool ? 1 : n < pool->threads ? n : pool->threads;
  if (inside_parallel_for || chunks == 1) {
    fn(ctx, 0, n);
    return TFM_OK;
  }
  pthread_mutex_lock(&pool->call_lock);
  pool->fn = fn;
  pool->ctx = ctx;
  pool->n = n;
  pool->chunks = chunks;
  uint64_t g = pool->generation + 1;
  for (size_t i = 0; i < pool->threads; i++)
    atomic_store_explicit(&pool->claims[i], i < chunks ? 2 * g : 2 * g + 1, memory_order_relaxed);
  atomic_store_explicit(&pool->finished, 0, memory_order_relaxed);
  pthread_mutex_lock(&pool->lock);
  atomic_store_explicit(&pool->generation, g, memory_order_release);
  pthread_cond_broadcast(&pool->work_ready);
  pthread_mutex_unlock(&pool->lock);
  run_free_chunks(pool, g, 0);
  /* Only chunks that a worker has started can be left: wait for them. */
  spin_while_unfinished(pool);
  pthread_mutex_lock(&pool->lock);
  while (atomic_load(&pool->finished) != chunks) pthread_cond_wait(&pool->work_done, &pool->lock);
  pthread_mutex_unlock(&pool->lock);
  pthread_mutex_unlock(&pool->call_lock);
  return TFM_OK;
}

/* Here rather than in profile.c: models loaded with dlopen resolve it in
 * any program that links tfm_parallel_for, profiling or not. One well
 * predicted branch when profiling is off. */
static tfm_kernel_hook_fn kernel_hook;
static void *kernel_hook_ctx;

void tfm_set_kernel_hook(tfm_kernel_hook_fn hook, void *ctx) {
  kernel_hook_ctx = ctx;
  kernel_hook = hook;
}

void tfm_kernel_hook_call(int32_t kernel) {
  if (kernel_hook) kernel_hook(kernel_hook_ctx, kernel);
}

int tfm_kernel_for(tfm_pool *pool, size_t n, tfm_range_fn fn, void *ctx, int32_t kernel) {
  if (!tfm_profiling && !kernel_hook) return tfm_parallel_for(pool, n, fn, ctx);
  int64_t start = tfm_profiling ? tfm_profile_now_ns() : 0;
  int status = tfm_parallel_for(pool, n, fn, ctx);
  if (tfm_profiling) tfm_profile_kernel(kernel, tfm_profile_now_ns() - start);
  if (kernel_hook) kernel_hook(kernel_hook_ctx, kernel);
  return status;
}

/* The scratch block of each thread: a thread-local pointer for the fast
 * path, and a key whose destructor frees it when the thread ends. */
static _Thread_local void *scratch;
static _Thread_local size_t scratch_bytes;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void make_scratch_key(void) { pthread_key_create(&scratch_key, free); }

void *tfm_thread_scratch(size_t bytes) {
  if (bytes <= scratch_bytes) return scratch;
  pthread_once(&scratch_once, make_scratch_key);
  free(scratch);
  size_t rounded = (bytes + TFM_ARENA_ALIGN - 1) / TFM_ARENA_ALIGN * TFM_ARENA_ALIGN;
  scratch = aligned_alloc(TFM_ARENA_ALIGN, rounded);
  if (!scratch) {
    fprintf(stderr, "tfm: out of memory: %zu bytes of thread scratch\n", rounded);
    abort();
  }
  scratch_bytes = rounded;
  pthread_setspecific(scratch_key, scratch);
  return scratch;
}
