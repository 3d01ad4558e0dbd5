/* Token shards (shard.h; the format: docs/data.md, "Token shards").
 *
 *   0   8  magic "TFMTOK1\0"
 *   8   4  version (1)                       all fields little-endian
 *  12   4  id width in bytes: 2 when vocab <= 65536, else 4
 *  16   8  vocabulary size: every id is below it
 *  24   8  token count
 *  32   8  document count (0: no boundaries recorded)
 *  40  20  reserved, zero
 *  60   4  CRC-32 of bytes [0, 60)
 *  64      token_count ids, then zero bytes up to a multiple of 8, then
 *          doc_count u64 document starts (token indices, the first 0,
 *          non-decreasing, each <= token_count); nothing after them. */
#define _DEFAULT_SOURCE /* madvise, strdup */
#include "shard.h"

#include "crc32.h"
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The block of the corpus's mapping dropped after each window: the largest
 * folio the page cache maps at once (a PMD, 2 MiB on x86-64). */
#define LET_GO ((uint64_t)2 << 20)
#define WRITE_BUFFER ((size_t)1 << 20)

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const unsigned char *p) {
  return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t id_width(uint64_t vocab_size) { return vocab_size <= TFM_SHARD_U16_MAX_VOCAB ? 2 : 4; }

uint64_t tfm_shard_docs_offset(const tfm_shard_header *h) {
  uint64_t ids = h->token_count * h->id_bytes;
  return TFM_SHARD_HEADER_BYTES + (ids + 7) / 8 * 8;
}

/* --- header ------------------------------------------------------------------- */

int tfm_shard_parse(const char *name, const void *bytes, size_t size, tfm_shard_header *out) {
  const unsigned char *p = bytes;
  if (memcmp(p, TFM_SHARD_MAGIC, size < 8 ? size : 8) != 0)
    return tfm_fail_file(name, "not a token shard (wrong magic: expected \"TFMTOK1\\0\")");
  if (size < TFM_SHARD_HEADER_BYTES)
    return tfm_fail_file(name, "truncated: %zu bytes, shorter than the %d-byte token shard header",
                      size, TFM_SHARD_HEADER_BYTES);
  tfm_shard_header h = {.version = get_u32(p + 8), .id_bytes = get_u32(p + 12),
                        .vocab_size = get_u64(p + 16), .token_count = get_u64(p + 24),
                        .doc_count = get_u64(p + 32)};
  if (h.version != TFM_SHARD_VERSION)
    return tfm_fail_file(name, "token shard version %u; this binary reads version %d", h.version,
                      TFM_SHARD_VERSION);
  uint32_t stored = get_u32(p + TFM_SHARD_CRC_OFFSET);
  uint32_t computed = crc32_update(0, p, TFM_SHARD_CRC_OFFSET);
  if (stored != computed)
    return tfm_fail_file(name, "header checksum mismatch (CRC-32 stored %08x, computed %08x): "
                      "the header is corrupted", stored, computed);
  for (int i = 40; i < TFM_SHARD_CRC_OFFSET; i++)
    if (p[i]) return tfm_fail_file(name, "reserved header byte %d is not zero", i);
  if (h.vocab_size == 0 || h.vocab_size > INT32_MAX)
    return tfm_fail_file(name, "vocabulary of %llu ids is not in 1..%d",
                      (unsigned long long)h.vocab_size, INT32_MAX);
  if (h.id_bytes != id_width(h.vocab_size))
    return tfm_fail_file(name, "ids of %u bytes for a vocabulary of %llu (expected %u: 2 bytes up "
                      "to %d ids, else 4)", h.id_bytes, (unsigned long long)h.vocab_size,
                      id_width(h.vocab_size), TFM_SHARD_U16_MAX_VOCAB);
  /* Sizes checked without overflow: each part against what the file has. */
  uint64_t room = size - TFM_SHARD_HEADER_BYTES;
  if (h.token_count > room / h.id_bytes)
    return tfm_fail_file(name, "truncated: the header counts %llu tokens of %u bytes, but the "
                      "file has %zu bytes", (unsigned long long)h.token_count, h.id_bytes, size);
  uint64_t docs_at = tfm_shard_docs_offset(&h);
  if (docs_at > size || h.doc_count > (size - docs_at) / 8)
    return tfm_fail_file(name, "truncated: the header counts %llu tokens and %llu documents, but "
                      "the file has %zu bytes", (unsigned long long)h.token_count,
                      (unsigned long long)h.doc_count, size);
  uint64_t expected = docs_at + 8 * h.doc_count;
  if (expected != size)
    return tfm_fail_file(name, "size mismatch: the header counts %llu tokens and %llu documents "
                      "(%llu bytes), but the file has %zu bytes",
                      (unsigned long long)h.token_count, (unsigned long long)h.doc_count,
                      (unsigned long long)expected, size);
  for (uint64_t i = TFM_SHARD_HEADER_BYTES + h.token_count * h.id_bytes; i < docs_at; i++)
    if (p[i]) return tfm_fail_file(name, "padding byte at %llu is not zero", (unsigned long long)i);
  uint64_t previous = 0;
  for (uint64_t d = 0; d < h.doc_count; d++) {
    uint64_t start = get_u64(p + docs_at + 8 * d);
    if ((d == 0 && start != 0) || start < previous || start > h.token_count)
      return tfm_fail_file(name, "document %llu starts at token %llu (documents start at 0, in "
                        "order, at most at the token count %llu)", (unsigned long long)d,
                        (unsigned long long)start, (unsigned long long)h.token_count);
    previous = start;
  }
  *out = h;
  return TFM_OK;
}

/* --- writer ------------------------------------------------------------------- */

static void writer_free(tfm_shard_writer *w) {
  free(w->path);
  free(w->tmp);
  free(w->buffer);
  free(w->docs);
  *w = (tfm_shard_writer){.fd = -1};
}

void tfm_shard_writer_abort(tfm_shard_writer *w) {
  if (w->fd >= 0) close(w->fd);
  if (w->tmp) unlink(w->tmp);
  writer_free(w);
}

int tfm_shard_writer_open(tfm_shard_writer *w, const char *path, uint64_t vocab_size) {
  *w = (tfm_shard_writer){.fd = -1, .vocab_size = vocab_size, .id_bytes = id_width(vocab_size)};
  if (vocab_size == 0 || vocab_size > INT32_MAX)
    return tfm_fail_file(path, "vocabulary of %llu ids is not in 1..%d",
                      (unsigned long long)vocab_size, INT32_MAX);
  size_t tmp_size = strlen(path) + 32;
  w->path = strdup(path);
  w->tmp = malloc(tmp_size);
  w->buffer = malloc(WRITE_BUFFER);
  if (!w->path || !w->tmp || !w->buffer) {
    writer_free(w);
    return tfm_fail_file(path, "out of memory");
  }
  snprintf(w->tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());
  w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (w->fd < 0) {
    int status = tfm_fail_file(path, "cannot create temporary file '%s': %s", w->tmp, strerror(errno));
    free(w->tmp);
    w->tmp = NULL; /* nothing to remove */
    writer_free(w);
    return status;
  }
  unsigned char placeholder[TFM_SHARD_HEADER_BYTES] = {0};
  int err = tfm_write_all(w->fd, placeholder, sizeof placeholder);
  if (err) {
    int status = tfm_fail_file(path, "writing '%s' failed: %s", w->tmp, strerror(err));
    tfm_shard_writer_abort(w);
    return status;
  }
  return TFM_OK;
}

static int writer_flush(tfm_shard_writer *w) {
  int err = w->buffered ? tfm_write_all(w->fd, w->buffer, w->buffered) : 0;
  w->buffered = 0;
  return err ? tfm_fail_file(w->path, "writing '%s' failed: %s", w->tmp, strerror(err)) : TFM_OK;
}

static int push_document(tfm_shard_writer *w, uint64_t start) {
  if (w->doc_count == w->doc_capacity) {
    size_t capacity = w->doc_capacity ? 2 * w->doc_capacity : 1024;
    uint64_t *grown = realloc(w->docs, capacity * sizeof *grown);
    if (!grown) return tfm_fail_file(w->path, "out of memory for %zu document starts", capacity);
    w->docs = grown;
    w->doc_capacity = capacity;
  }
  w->docs[w->doc_count++] = start;
  return TFM_OK;
}

int tfm_shard_writer_document(tfm_shard_writer *w) {
  /* The ids before the first document start form one of their own. */
  if (w->doc_count == 0 && w->tokens > 0 && push_document(w, 0)) return TFM_FAILED;
  return push_document(w, w->tokens);
}

int tfm_shard_writer_append(tfm_shard_writer *w, const int32_t *ids, size_t count) {
  for (size_t i = 0; i < count; i++)
    if (ids[i] < 0 || (uint64_t)ids[i] >= w->vocab_size)
      return tfm_fail_file(w->path, "id %d at token %llu is not in 0..%llu (the vocabulary)", ids[i],
                        (unsigned long long)(w->tokens + i), (unsigned long long)w->vocab_size - 1);
  for (size_t i = 0; i < count; i++) {
    if (w->buffered + 4 > WRITE_BUFFER && writer_flush(w)) return TFM_FAILED;
    unsigned char *p = w->buffer + w->buffered;
    uint32_t id = (uint32_t)ids[i];
    p[0] = (unsigned char)id;
    p[1] = (unsigned char)(id >> 8);
    if (w->id_bytes == 4) p[2] = (unsigned char)(id >> 16), p[3] = (unsigned char)(id >> 24);
    w->buffered += w->id_bytes;
  }
  w->tokens += count;
  return TFM_OK;
}

int tfm_shard_writer_finish(tfm_shard_writer *w) {
  /* Padding to 8 bytes, then the document table, through the buffer. */
  size_t pad = (size_t)((8 - w->tokens * w->id_bytes % 8) % 8);
  if (w->buffered + 8 > WRITE_BUFFER && writer_flush(w)) goto failed;
  memset(w->buffer + w->buffered, 0, pad);
  w->buffered += pad;
  for (size_t d = 0; d < w->doc_count; d++) {
    if (w->buffered + 8 > WRITE_BUFFER && writer_flush(w)) goto failed;
    put_u64(w->buffer + w->buffered, w->docs[d]);
    w->buffered += 8;
  }
  if (writer_flush(w)) goto failed;
  unsigned char header[TFM_SHARD_HEADER_BYTES] = {0};
  memcpy(header, TFM_SHARD_MAGIC, 8);
  put_u32(header + 8, TFM_SHARD_VERSION);
  put_u32(header + 12, w->id_bytes);
  put_u64(header + 16, w->vocab_size);
  put_u64(header + 24, w->tokens);
  put_u64(header + 32, w->doc_count);
  put_u32(header + TFM_SHARD_CRC_OFFSET, crc32_update(0, header, TFM_SHARD_CRC_OFFSET));
  const char *step = "writing";
  int err = 0;
  if (lseek(w->fd, 0, SEEK_SET) != 0) err = errno;
  if (!err) err = tfm_write_all(w->fd, header, sizeof header);
  if (!err && fsync(w->fd) != 0) err = errno, step = "syncing";
  if (close(w->fd) != 0 && !err) err = errno, step = "closing";
  w->fd = -1;
  if (!err && rename(w->tmp, w->path) != 0) err = errno, step = "renaming";
  if (err) {
    tfm_fail_file(w->path, "%s temporary file '%s' failed: %s", step, w->tmp, strerror(err));
    goto failed;
  }
  free(w->tmp);
  w->tmp = NULL;
  char *path = w->path;
  w->path = NULL;
  writer_free(w);
  int status = tfm_sync_directory_of(path);
  free(path);
  return status;
failed:
  tfm_shard_writer_abort(w);
  return TFM_FAILED;
}

/* --- reader ------------------------------------------------------------------- */

static void shard_unmap(tfm_shard *s) {
  if (s->map) munmap((void *)s->map, s->size);
  free(s->path);
  *s = (tfm_shard){0};
}

static int shard_map(tfm_shard *s, const char *path, size_t window, int64_t model_vocab) {
  *s = (tfm_shard){0};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return tfm_fail_file(path, "cannot open: %s", strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int status = tfm_fail_file(path, "cannot stat: %s", strerror(errno));
    close(fd);
    return status;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return tfm_fail_file(path, "not a regular file");
  }
  if (st.st_size == 0) { /* mmap maps no empty file */
    close(fd);
    return tfm_fail_file(path, "truncated: 0 bytes, shorter than the %d-byte token shard header",
                      TFM_SHARD_HEADER_BYTES);
  }
  s->size = (size_t)st.st_size;
  void *map = mmap(NULL, s->size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return tfm_fail_file(path, "cannot map: %s", strerror(errno));
  s->map = map;
  s->path = strdup(path);
  int status = s->path ? TFM_OK : tfm_fail_file(path, "out of memory");
  if (!status) status = tfm_shard_parse(path, s->map, s->size, &s->header);
  if (!status && (int64_t)s->header.vocab_size != model_vocab)
    status = tfm_fail_file(path, "vocabulary of %llu ids, but the model's is %lld; rebuild the "
                        "model with -D vocab=%llu or tokenize for this one",
                        (unsigned long long)s->header.vocab_size, (long long)model_vocab,
                        (unsigned long long)s->header.vocab_size);
  if (status) {
    shard_unmap(s);
    return status;
  }
  /* Windows land anywhere: no read-ahead beyond the pages they touch. */
  madvise((void *)s->map, s->size, MADV_RANDOM);
  s->starts = s->header.token_count > window ? s->header.token_count - window : 0;
  return TFM_OK;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

int tfm_shards_named(const char *spec) {
  struct stat st;
  if (strpbrk(spec, "*?[") || ends_with(spec, TFM_SHARD_SUFFIX)) return 1;
  if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) return 1;
  FILE *f = fopen(spec, "rb");
  char head[6] = {0};
  int named = f && fread(head, 1, sizeof head, f) == sizeof head && !memcmp(head, "TFMTOK", 6);
  if (f) fclose(f);
  return named;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shard files of spec, sorted by name, in *paths (each malloc'd). */
static int list_shards(const char *spec, char ***paths, size_t *count) {
  struct stat st;
  *paths = NULL;
  *count = 0;
  if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
    DIR *dir = opendir(spec);
    if (!dir) return tfm_fail_file(spec, "cannot open folder: %s", strerror(errno));
    size_t capacity = 0;
    int status = TFM_OK;
    for (struct dirent *e; !status && (e = readdir(dir));) {
      if (!ends_with(e->d_name, TFM_SHARD_SUFFIX) || e->d_name[0] == '.') continue;
      if (*count == capacity) {
        capacity = capacity ? 2 * capacity : 16;
        char **grown = realloc(*paths, capacity * sizeof *grown);
        if (!grown) status = tfm_fail_file(spec, "out of memory");
        else *paths = grown;
      }
      size_t size = strlen(spec) + strlen(e->d_name) + 2;
      char *path = status ? NULL : malloc(size);
      if (!status && !path) status = tfm_fail_file(spec, "out of memory");
      if (!status) {
        snprintf(path, size, "%s/%s", spec, e->d_name);
        (*paths)[(*count)++] = path;
      }
    }
    closedir(dir);
    if (!status && *count == 0)
      status = tfm_fail_file(spec, "no token shards (*%s) in this folder", TFM_SHARD_SUFFIX);
    if (!status) qsort(*paths, *count, sizeof **paths, by_name);
    return status;
  }
  if (!strpbrk(spec, "*?[")) {
    *paths = malloc(sizeof **paths);
    if (!*paths || !((*paths)[0] = strdup(spec))) return tfm_fail_file(spec, "out of memory");
    *count = 1;
    return TFM_OK;
  }
  glob_t g;
  int found = glob(spec, GLOB_ERR, NULL, &g);
  if (found == GLOB_NOMATCH) return tfm_fail_file(spec, "no file matches this pattern");
  if (found != 0) return tfm_fail_file(spec, "cannot expand the pattern");
  *paths = calloc(g.gl_pathc ? g.gl_pathc : 1, sizeof **paths);
  int status = *paths ? TFM_OK : tfm_fail_file(spec, "out of memory");
  for (size_t i = 0; !status && i < g.gl_pathc; i++, ++*count)
    if (!((*paths)[i] = strdup(g.gl_pathv[i]))) status = tfm_fail_file(spec, "out of memory");
  globfree(&g); /* glob sorts by name */
  return status;
}

void tfm_shards_close(tfm_shards *set) {
  for (size_t i = 0; i < set->count; i++) shard_unmap(&set->shards[i]);
  free(set->shards);
  free(set->first_start);
  *set = (tfm_shards){0};
}

int tfm_shards_open(tfm_shards *set, const char *spec, size_t window, int64_t model_vocab) {
  if (window == 0) return tfm_fail_file(spec, "a window of 0 tokens");
  char **paths;
  size_t count;
  int status = list_shards(spec, &paths, &count);
  tfm_shards opened = {.window = window, .vocab = model_vocab};
  if (!status) {
    opened.shards = calloc(count, sizeof *opened.shards);
    opened.first_start = calloc(count + 1, sizeof *opened.first_start);
    if (!opened.shards || !opened.first_start) status = tfm_fail_file(spec, "out of memory");
  }
  for (size_t i = 0; !status && i < count; i++) {
    status = shard_map(&opened.shards[i], paths[i], window, model_vocab);
    if (status) break;
    opened.count++;
    opened.tokens += opened.shards[i].header.token_count;
    opened.first_start[i + 1] = opened.first_start[i] + opened.shards[i].starts;
  }
  if (!status && opened.first_start[opened.count] == 0)
    status = tfm_fail_file(spec, "%llu tokens in %zu shard(s), but none has a window of %zu + 1",
                        (unsigned long long)opened.tokens, opened.count, window);
  for (size_t i = 0; paths && i < count; i++) free(paths[i]);
  free(paths);
  if (status) {
    tfm_shards_close(&opened);
    return status;
  }
  tfm_shards_close(set);
  *set = opened;
  return TFM_OK;
}

/* Unmaps (from this process; the page cache keeps them) the pages a window
 * at file offset [at, at + bytes) brought in. A fault maps more than its
 * page: Linux maps around it (fault-around) and a large folio of the page
 * cache whole, both inside the naturally aligned LET_GO block; dropping
 * those blocks keeps resident memory flat however long a run samples. */
static void let_go(const tfm_shard *s, uint64_t at, size_t bytes) {
  uint64_t from = at / LET_GO * LET_GO, to = (at + bytes + LET_GO - 1) / LET_GO * LET_GO;
  if (to > s->size) to = s->size;
  madvise((void *)(s->map + from), (size_t)(to - from), MADV_DONTNEED);
}

/* tokens/targets of row `row`: ids [start, start + window] of shard s. */
static int fill_window(tfm_shards *set, const tfm_shard *s, uint64_t start, size_t row,
                       int32_t *tokens, int32_t *targets) {
  size_t W = set->window;
  uint32_t width = s->header.id_bytes;
  const unsigned char *p = s->map + TFM_SHARD_HEADER_BYTES + start * width;
  for (size_t i = 0; i <= W; i++, p += width) {
    uint32_t id = width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : get_u32(p);
    if ((int64_t)id >= set->vocab)
      return tfm_fail_file(s->path, "token %llu is id %u, not below the vocabulary of %lld",
                        (unsigned long long)(start + i), id, (long long)set->vocab);
    if (i < W) tokens[row * W + i] = (int32_t)id;
    if (i > 0) targets[row * W + i - 1] = (int32_t)id;
  }
  let_go(s, (uint64_t)(p - s->map) - (W + 1) * width, (W + 1) * width);
  return TFM_OK;
}

/* The shard holding global index `at` of the prefix sums `first`. */
static size_t shard_of(const uint64_t *first, size_t count, uint64_t at) {
  size_t lo = 0, hi = count; /* first[lo] <= at < first[hi] */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (first[mid] <= at) lo = mid;
    else hi = mid;
  }
  return lo;
}

int tfm_shards_train_batch(tfm_shards *set, uint64_t seed, uint64_t step, size_t rows,
                           int32_t *tokens, int32_t *targets) {
  if (!set->count) return tfm_fail("shards: none open");
  uint64_t total = set->first_start[set->count];
  for (size_t row = 0; row < rows; row++) {
    uint64_t at = tfm_data_hash(seed, step, row) % total;
    size_t i = shard_of(set->first_start, set->count, at);
    if (fill_window(set, &set->shards[i], at - set->first_start[i], row, tokens, targets))
      return TFM_FAILED;
  }
  return TFM_OK;
}

static uint64_t eval_windows(const tfm_shard *s, size_t window) {
  uint64_t n = s->header.token_count;
  return n > window ? (n - 1) / window : 0;
}

size_t tfm_shards_eval_batch_count(const tfm_shards *set, size_t rows) {
  uint64_t windows = 0;
  for (size_t i = 0; i < set->count; i++) windows += eval_windows(&set->shards[i], set->window);
  return rows ? (size_t)((windows + rows - 1) / rows) : 0;
}

int tfm_shards_eval_batch(tfm_shards *set, size_t index, size_t rows, int32_t *tokens,
                          int32_t *targets, size_t *filled) {
  size_t batches = tfm_shards_eval_batch_count(set, rows);
  if (index >= batches)
    return tfm_fail("shards: batch %zu of %zu (%zu rows each)", index, batches, rows);
  /* Window number `first` overall, then the shard that holds it. */
  uint64_t first = (uint64_t)index * rows, before = 0;
  size_t i = 0;
  while (i < set->count && before + eval_windows(&set->shards[i], set->window) <= first)
    before += eval_windows(&set->shards[i++], set->window);
  *filled = 0;
  uint64_t w = first - before;
  for (size_t row = 0; row < rows; row++) {
    while (i < set->count && w >= eval_windows(&set->shards[i], set->window)) i++, w = 0;
    if (i < set->count) {
      if (fill_window(set, &set->shards[i], w * set->window, row, tokens, targets))
        return TFM_FAILED;
      w++;
      ++*filled;
    } else {
      memset(tokens + row * set->window, 0, set->window * sizeof *tokens);
      memset(targets + row * set->window, 0, set->window * sizeof *targets);
    }
  }
  return TFM_OK;
}
