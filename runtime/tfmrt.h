/* tfmrt: the thin runtime that compiled tfm models link against.
 *
 * It moves bytes and schedules; no math lives here (see DESIGN.md).
 * Every function that can fail returns a status: TFM_OK (0) on success,
 * nonzero on failure, with the message in tfm_error() (thread-local, so
 * concurrent callers do not overwrite each other's messages). */
#ifndef TFMRT_H
#define TFMRT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- errors --------------------------------------------------------------- */

enum { TFM_OK = 0, TFM_FAILED = 1 };

/* The last error message set on this thread; "" when none was set. */
const char *tfm_error(void);

/* Sets this thread's error message (printf-style) and returns TFM_FAILED, so
 * a failing path can `return tfm_fail("...", ...);`. */
int tfm_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --- tensors and checkpoint metadata -------------------------------------- */

typedef enum { TFM_F32, TFM_F64, TFM_I32, TFM_BF16 } tfm_dtype;

#define TFM_MAX_RANK 8

/* A named host buffer: the source when saving, the destination when loading. */
typedef struct {
  const char *name;          /* dotted parameter name, e.g. "encoder.3.attn.wq" */
  tfm_dtype dtype;
  size_t rank;
  size_t shape[TFM_MAX_RANK];
  void *data;                /* element count * element size bytes, row-major */
} tfm_tensor;

size_t tfm_dtype_size(tfm_dtype dtype);      /* bytes per element */
const char *tfm_dtype_name(tfm_dtype dtype); /* safetensors spelling: "F32", ... */

/* String key/value pairs: the checkpoint's "__metadata__". */
typedef struct {
  char *key;
  char *value;
} tfm_meta_entry;

typedef struct {
  tfm_meta_entry *entries;   /* in insertion order */
  size_t count, capacity;
} tfm_meta;                  /* zero-initialise before first use */

/* Keys the training loop stores its state under. */
#define TFM_META_STEP "tfm.step"
#define TFM_META_SEED "tfm.seed"

int tfm_meta_set(tfm_meta *meta, const char *key, const char *value); /* replaces */
const char *tfm_meta_get(const tfm_meta *meta, const char *key);     /* NULL: absent */
int tfm_meta_set_u64(tfm_meta *meta, const char *key, uint64_t value);
int tfm_meta_get_u64(const tfm_meta *meta, const char *key, uint64_t *value);
void tfm_meta_clear(tfm_meta *meta); /* frees the entries; meta is empty again */

/* --- checkpoints (safetensors) -------------------------------------------- */

/* Writes the tensors and metadata as a safetensors file. The file is written to
 * a temporary file beside `path`, fsync'd, renamed over `path`, and the
 * directory fsync'd, so `path` always holds either the old or the new
 * checkpoint. A CRC32 of each tensor's bytes (and of the metadata) goes into
 * "__metadata__" as "tfm.crc32.<name>" / "tfm.crc32.__metadata__", and
 * "format": "pt" unless `meta` sets "format". `meta` may be NULL. */
int tfm_ckpt_save(const char *path, const tfm_tensor *tensors, size_t count,
                  const tfm_meta *meta);

/* Loads `path` into the given tensors, which say what the model expects: the
 * file must hold exactly these names with these dtypes and shapes. The file is
 * validated completely (layout, header JSON, offsets, checksums when present)
 * and refused with a message naming the file and the problem; on failure the
 * tensors' contents are unspecified and `meta` is left as it was. On success a
 * non-NULL `meta` is cleared and filled with the file's metadata, less the
 * checksum entries. Files without checksums (e.g. from PyTorch) load too. */
int tfm_ckpt_load(const char *path, const tfm_tensor *tensors, size_t count,
                  tfm_meta *meta);

/* --- thread pool ---------------------------------------------------------- */

typedef struct tfm_pool tfm_pool;

/* fn handles indices [begin, end) of the range. */
typedef void (*tfm_range_fn)(void *ctx, size_t begin, size_t end);

/* threads == 0: the TFM_THREADS environment variable, else the CPUs this
 * process may run on. The calling thread is one of the workers. */
int tfm_pool_create(tfm_pool **pool, size_t threads);
void tfm_pool_destroy(tfm_pool *pool);
size_t tfm_pool_threads(const tfm_pool *pool);

/* Calls fn over [0, n) split into k = min(n, threads) contiguous chunks in
 * index order, each n/k long plus one for the first n%k; chunk i always runs
 * on thread i (chunk 0 on the caller). Returns when every chunk is done. A call
 * from inside fn runs the whole range serially on the calling thread. */
int tfm_parallel_for(tfm_pool *pool, size_t n, tfm_range_fn fn, void *ctx);

/* --- arena ---------------------------------------------------------------- */

#define TFM_ARENA_ALIGN 64

/* One zeroed allocation: a persistent region (parameters, gradients, optimizer
 * state) then a scratch region (activations), each starting 64-byte aligned.
 * The compiler computes every buffer's offset into these regions. */
typedef struct {
  unsigned char *persistent;
  unsigned char *scratch;
  size_t persistent_bytes, scratch_bytes;
} tfm_arena;

int tfm_arena_create(tfm_arena *arena, size_t persistent_bytes, size_t scratch_bytes);
void tfm_arena_destroy(tfm_arena *arena);

/* --- CUDA driver (loaded with dlopen at run time) ------------------------- */

typedef struct tfm_cuda tfm_cuda;
typedef void *tfm_cuda_module;
typedef void *tfm_cuda_kernel;
typedef uint64_t tfm_device_ptr;

/* Loads libcuda.so.1, initialises the driver and creates a context on device
 * `ordinal`. Without a driver or a device it fails with a message saying so.
 * The context is current on the opening thread: make the calls from there. */
int tfm_cuda_open(tfm_cuda **cuda, int ordinal);
void tfm_cuda_close(tfm_cuda *cuda);

int tfm_cuda_module_load(tfm_cuda *cuda, const char *ptx, tfm_cuda_module *module);
int tfm_cuda_kernel_get(tfm_cuda *cuda, tfm_cuda_module module, const char *name,
                        tfm_cuda_kernel *kernel);
int tfm_cuda_launch(tfm_cuda *cuda, tfm_cuda_kernel kernel, const unsigned grid[3],
                    const unsigned block[3], unsigned shared_bytes, void **params);
int tfm_cuda_alloc(tfm_cuda *cuda, size_t bytes, tfm_device_ptr *ptr);
int tfm_cuda_free(tfm_cuda *cuda, tfm_device_ptr ptr);
int tfm_cuda_upload(tfm_cuda *cuda, tfm_device_ptr dst, const void *src, size_t bytes);
int tfm_cuda_download(tfm_cuda *cuda, void *dst, tfm_device_ptr src, size_t bytes);
int tfm_cuda_synchronize(tfm_cuda *cuda);

/* --- progress line -------------------------------------------------------- */

typedef struct {
  FILE *out;
  uint64_t first_step, total_steps;
  uint64_t tokens;           /* since first_step */
  double start_seconds;      /* monotonic clock */
} tfm_progress;

/* Starts timing a run that goes from first_step to total_steps. */
int tfm_progress_start(tfm_progress *progress, FILE *out, uint64_t first_step,
                       uint64_t total_steps);

/* Records that `step` finished after processing `tokens` more tokens and prints
 * a line: step, loss, learning rate, tokens/s and ETA. */
int tfm_progress_report(tfm_progress *progress, uint64_t step, double loss, double lr,
                        uint64_t tokens);

/* Formats one progress line (no newline) into buf; the printing above uses it. */
int tfm_progress_format(char *buf, size_t size, uint64_t step, uint64_t total_steps,
                        double loss, double lr, double tokens_per_second,
                        double eta_seconds);

#ifdef __cplusplus
}
#endif

#endif
