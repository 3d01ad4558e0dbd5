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

/* tfm_fail with the message "path: reason", for refusals of a file. */
int tfm_fail_file(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

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
#define TFM_META_MODEL "tfm.model" /* the name of the model that wrote it */
#define TFM_META_WORLD_SIZE "tfm.world_size" /* processes that trained it (dist.h) */

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

/* Reads every tensor `path` holds, whatever they are: for tools that inspect
 * a file rather than load a model. Validated as tfm_ckpt_load validates; on
 * success *tensors holds *count tensors sorted by name, each owning its name
 * and data (free them with tfm_ckpt_free_tensors), and a non-NULL `meta` is
 * filled as tfm_ckpt_load fills it. On failure *tensors is NULL, *count 0. */
int tfm_ckpt_read(const char *path, tfm_tensor **tensors, size_t *count, tfm_meta *meta);
void tfm_ckpt_free_tensors(tfm_tensor *tensors, size_t count);

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
 * index order, each n/k long plus one for the first n%k. Chunk i runs on
 * thread i (chunk 0 on the caller) unless a thread that has finished its own
 * finds it not yet started, and runs it instead: what fn computes must not
 * depend on the thread. Returns when every chunk is done. A call from inside
 * fn, or with pool == NULL, runs the whole range serially on the calling
 * thread. */
int tfm_parallel_for(tfm_pool *pool, size_t n, tfm_range_fn fn, void *ctx);

/* What generated code calls for the kernel at index `kernel` of the running
 * graph: tfm_parallel_for, timed when profiling is on (profile.h). */
int tfm_kernel_for(tfm_pool *pool, size_t n, tfm_range_fn fn, void *ctx, int32_t kernel);

/* A function tfm_kernel_for calls after each kernel with its index, while
 * set (NULL: none): the data-parallel loop sends a bucket of gradients as
 * soon as the kernel that finishes it has run (train_dist.c). A GPU graph
 * calls it once each kernel's launch is queued (tfm_kernel_hook_call):
 * what the hook queues behind the default stream runs after that kernel. */
typedef void (*tfm_kernel_hook_fn)(void *ctx, int32_t kernel);
void tfm_set_kernel_hook(tfm_kernel_hook_fn hook, void *ctx);
void tfm_kernel_hook_call(int32_t kernel); /* the hook, if one is set */

/* A 64-byte-aligned block of at least `bytes` that belongs to the calling
 * thread and lives as long as it (generated GEMMs pack operands into it);
 * reused by later calls on the same thread. Out of memory ends the process
 * with a message: generated code has no way to report it. */
void *tfm_thread_scratch(size_t bytes);

/* --- CPU kernel families -------------------------------------------------- */

/* The families of generated bf16 products (runtime/cpu_kernels.c): f32
 * arithmetic on widened values (AVX2 or AVX-512F), AVX512-BF16 pair dot
 * products (vdpbf16ps), AMX tiles (tdpbf16ps). */
enum { TFM_CPU_KERNELS_AVX2 = 0, TFM_CPU_KERNELS_AVX512BF16 = 1, TFM_CPU_KERNELS_AMX = 2 };

/* Chooses the family once per process: TFM_CPU_KERNELS=amx|avx512bf16|avx2
 * when set (TFM_FAILED for another name, or a family this CPU or its
 * operating system lacks), else AMX where the CPU has it, otherwise the
 * widening path (AVX512-BF16 measured slower than it). AMX needs Linux's
 * consent (arch_prctl ARCH_REQ_XCOMP_PERM); refused, a line on stderr says
 * so. Later calls return the first call's status. */
int tfm_cpu_kernels_choose(void);
/* The chosen family, for generated code; choosing on first use, and
 * ending the process with the message when that fails. */
int32_t tfm_cpu_kernels(void);
/* Whether CPUID (and XCR0) say this CPU runs a family; its name; the
 * family of a name (-1: none). */
int tfm_cpu_kernels_supported(int family);
const char *tfm_cpu_kernels_name(int family);
int tfm_cpu_kernels_from_name(const char *name);

/* The variant a binary built with `tfmc build --cpu generic-dispatch`
 * runs: such a binary holds every graph compiled once per x86-64 level
 * below, and each graph's entry points call the variant chosen here, once
 * per process. TFM_CPU_VARIANT=avx2|avx512|amx forces one. The numbers are
 * the generated dispatchers' (compiler/codegen/cpu/dispatch.c lists the
 * same variants in the same order). */
enum {
  TFM_CPU_AVX2,   /* x86-64-v3: AVX2, FMA (Haswell and later, Zen) */
  TFM_CPU_AVX512, /* x86-64-v4: AVX-512 F, BW, DQ, CD, VL */
  TFM_CPU_AMX,    /* x86-64-v4 with AVX512-BF16, AMX-TILE and AMX-BF16 (Sapphire Rapids) */
  TFM_CPU_VARIANTS
};

/* "avx2", "avx512" or "amx". */
const char *tfm_cpu_variant_name(int32_t variant);

/* Chooses the variant (TFM_CPU_VARIANT's if set, else the best this
 * machine runs) and keeps it for tfm_cpu_variant. TFM_FAILED, with the
 * reason in tfm_error(), when the variable names an unknown variant or one
 * this machine cannot run, or when the machine lacks even AVX2. */
int tfm_cpu_variant_select(int32_t *variant);

/* The chosen variant, choosing on the first call; what the generated
 * dispatchers call. Where choosing fails (a binary's main reports that
 * before any graph runs; a program embedding a model library may not), it
 * says why on stderr once and runs the best variant this machine has. */
int32_t tfm_cpu_variant(void);


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
/* The same for the local_rank-th process of a job on this machine (one
 * process per GPU): device local_rank, or device 0 where the driver shows
 * one (each rank given its own GPU, e.g. by CUDA_VISIBLE_DEVICES). */
int tfm_cuda_open_for_rank(tfm_cuda **cuda, int local_rank);
void tfm_cuda_close(tfm_cuda *cuda);

int tfm_cuda_module_load(tfm_cuda *cuda, const char *ptx, tfm_cuda_module *module);
int tfm_cuda_module_unload(tfm_cuda *cuda, tfm_cuda_module module);
int tfm_cuda_kernel_get(tfm_cuda *cuda, tfm_cuda_module module, const char *name,
                        tfm_cuda_kernel *kernel);
int tfm_cuda_launch(tfm_cuda *cuda, tfm_cuda_kernel kernel, const unsigned grid[3],
                    const unsigned block[3], unsigned shared_bytes, void **params);
int tfm_cuda_alloc(tfm_cuda *cuda, size_t bytes, tfm_device_ptr *ptr);
int tfm_cuda_free(tfm_cuda *cuda, tfm_device_ptr ptr);
int tfm_cuda_upload(tfm_cuda *cuda, tfm_device_ptr dst, const void *src, size_t bytes);
int tfm_cuda_download(tfm_cuda *cuda, void *dst, tfm_device_ptr src, size_t bytes);
/* Device to device, queued after the launches before it (asynchronous). */
int tfm_cuda_copy(tfm_cuda *cuda, tfm_device_ptr dst, tfm_device_ptr src, size_t bytes);
/* Waits for every stream of the context. */
int tfm_cuda_synchronize(tfm_cuda *cuda);
/* A stream beside the default one the kernels go to (non-blocking: it
 * neither waits for them nor they for it, unless told), for NCCL's
 * collectives to overlap the backward. */
int tfm_cuda_stream_create(tfm_cuda *cuda, void **stream);
int tfm_cuda_stream_destroy(tfm_cuda *cuda, void *stream);
/* What is queued on `stream` from now on runs after everything queued on
 * the default stream so far. */
int tfm_cuda_stream_wait_default(tfm_cuda *cuda, void *stream);

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

/* A bar for work measured in bytes (tokenize): "LABEL [#####.....]  45%
 * 12.3 MB/s  ETA 0:00:07". tfm_progress_bar_format writes it (no newline);
 * tfm_progress_bar redraws it in place on a terminal and, elsewhere, prints
 * a line at each tenth of the work; done == total ends the line. */
typedef struct {
  FILE *out;
  const char *label;
  uint64_t total;
  double start_seconds;
  int terminal, last_tenth;
  double last_draw;
} tfm_progress_bar_state;

int tfm_progress_bar_format(char *buf, size_t size, const char *label, uint64_t done,
                            uint64_t total, double bytes_per_second);
void tfm_progress_bar_start(tfm_progress_bar_state *bar, FILE *out, const char *label,
                            uint64_t total);
void tfm_progress_bar(tfm_progress_bar_state *bar, uint64_t done);

/* --- data: vocabularies, parallel text, character streams (data.c) -------- */

/* Loaders refuse bad input with "file:line: reason" (or "file: reason" for
 * the file as a whole) and replace what they fill only on success, so a
 * refusal leaves it as it was. Every vocabulary starts with these four tokens, so
 * padding is id 0 everywhere and a loss that ignores 0 ignores padding. */
enum { TFM_PAD = 0, TFM_BOS = 1, TFM_EOS = 2, TFM_UNK = 3, TFM_SPECIALS = 4 };

/* The longest line the text readers accept, in bytes without the newline. */
#define TFM_DATA_MAX_LINE 65536

/* Token ids to byte strings and back. A token is any non-empty byte string:
 * a word, or one byte for character models. On disk: one token per line, the
 * line number (from 0) is the id, "<pad>" "<bos>" "<eos>" "<unk>" first;
 * bytes 0x00-0x20 and 0x7f are written as \xHH and the backslash as \\, so
 * every token fits on one line; other bytes (UTF-8 or not) are written as
 * they are. */
typedef struct {
  size_t count, capacity;
  char **tokens;             /* id -> NUL-terminated copy (lengths[] is exact) */
  size_t *lengths;
  size_t *slots;             /* open-addressing table of id + 1; 0 is empty */
  size_t slot_count;         /* a power of two, or 0 */
} tfm_vocab;                 /* zero-initialise before first use */

/* From a training TSV (see tfm_pairs_load), source and target sides together:
 * the specials, then tokens by descending frequency, ties in byte order.
 * max_count (0: no limit) caps the size, specials included; rarer tokens
 * become <unk> when loading. */
int tfm_vocab_build_pairs(tfm_vocab *vocab, const char *tsv_path, size_t max_count);

/* The specials, then every byte present in the file by descending frequency,
 * ties by byte value. */
int tfm_vocab_build_bytes(tfm_vocab *vocab, const char *text_path);

int tfm_vocab_write(const tfm_vocab *vocab, const char *path);

/* Refuses missing or misplaced specials, empty lines, duplicates, malformed
 * escapes and raw control bytes (a CRLF file among them). */
int tfm_vocab_read(tfm_vocab *vocab, const char *path);

/* The id of a token; -1 when absent. */
int32_t tfm_vocab_find(const tfm_vocab *vocab, const void *token, size_t length);

/* The tokens of ids up to the first <eos>, joined by separator (" " for words,
 * "" for characters), <pad> and <bos> left out; NUL-terminated. *length
 * (optional) receives the byte count, which tells apart NUL bytes decoded
 * from a character vocabulary. */
int tfm_vocab_decode(const tfm_vocab *vocab, const int32_t *ids, size_t count,
                     const char *separator, char *text, size_t size, size_t *length);

void tfm_vocab_free(tfm_vocab *vocab);

/* splitmix64 of three values: the windows and orders of the loaders, pure
 * functions of (seed, step, row), so resuming needs no generator state. */
uint64_t tfm_data_hash(uint64_t a, uint64_t b, uint64_t c);

/* A permutation of 0..count-1 that depends only on (seed, epoch). */
void tfm_data_shuffle(size_t *order, size_t count, uint64_t seed, uint64_t epoch);

/* Parallel text for translation: a file of lines "source words<TAB>target
 * words", tokens separated by single spaces. Malformed lines (empty, no tab or
 * two, empty sides, stray spaces, CR, NUL, <pad>/<bos>/<eos> as words, longer
 * than TFM_DATA_MAX_LINE) refuse the file; pairs whose source is longer than
 * src_len or whose target is longer than tgt_len - 1 (room for <bos>/<eos>)
 * are skipped and counted; tokens not in the vocabulary become <unk>, counted. */
typedef struct {
  size_t src_len, tgt_len;   /* S and T of every batch */
  size_t count;              /* pairs kept */
  int32_t *ids;              /* pair i: source then target ids, ids[starts[i]..starts[i+1]) */
  size_t *starts;            /* count + 1 entries */
  size_t *src_counts;        /* source tokens of pair i */
  size_t skipped_too_long;
  size_t unknown_tokens;
  size_t *order;             /* the shuffled order of (order_seed, order_epoch) */
  uint64_t order_seed, order_epoch;
  int order_valid;
} tfm_pairs;

/* A batch of `rows` pairs, caller-allocated, row-major: src [rows, S] is the
 * source; tgt_in [rows, T] is <bos> target; tgt_out [rows, T] is target <eos>;
 * all padded with 0. A NULL array is not filled. */
typedef struct {
  size_t rows;
  int32_t *src, *tgt_in, *tgt_out;
} tfm_pair_batch;

int tfm_pairs_load(tfm_pairs *pairs, const char *path, const tfm_vocab *vocab,
                   size_t src_len, size_t tgt_len);
void tfm_pairs_free(tfm_pairs *pairs);

/* Batches in one pass over the pairs: ceil(count / rows). */
size_t tfm_pairs_batch_count(const tfm_pairs *pairs, size_t rows);

/* Training batch `step` (from 0): epoch step / batch_count visits the pairs in
 * tfm_data_shuffle(seed, epoch) order; an epoch's last batch is completed with
 * that epoch's first pairs. Depends only on (seed, step), so a resumed run
 * sees the batches an uninterrupted one would. */
int tfm_pairs_train_batch(tfm_pairs *pairs, uint64_t seed, uint64_t step,
                          const tfm_pair_batch *batch);

/* Batch `index` of the pairs in file order (for evaluation); rows past the
 * last pair are all padding, and *filled says how many rows are pairs. */
int tfm_pairs_eval_batch(const tfm_pairs *pairs, size_t index, const tfm_pair_batch *batch,
                         size_t *filled);

/* Character-level language modelling: a file's bytes as ids of a byte
 * vocabulary (bytes it lacks become <unk>, counted). The last
 * heldout_fraction of the bytes is held out for evaluation. Windows of
 * window + 1 bytes give tokens [rows, window] and targets [rows, window], the
 * same bytes shifted by one. */
typedef struct {
  size_t window;
  size_t count, train_count; /* ids[0, train_count) train; the rest is held out */
  int32_t *ids;
  size_t unknown_bytes;
} tfm_chars;

int tfm_chars_load(tfm_chars *chars, const char *path, const tfm_vocab *vocab, size_t window,
                   double heldout_fraction);
void tfm_chars_free(tfm_chars *chars);

/* Windows starting anywhere in the training part, chosen by (seed, step, row). */
int tfm_chars_train_batch(const tfm_chars *chars, uint64_t seed, uint64_t step, size_t rows,
                          int32_t *tokens, int32_t *targets);

/* The held-out tail cut into consecutive windows, in order: batch_count
 * batches; rows past the last window are padding, *filled says how many are
 * windows. */
size_t tfm_chars_eval_batch_count(const tfm_chars *chars, size_t rows);
int tfm_chars_eval_batch(const tfm_chars *chars, size_t index, size_t rows, int32_t *tokens,
                         int32_t *targets, size_t *filled);

#ifdef __cplusplus
}
#endif

#endif
