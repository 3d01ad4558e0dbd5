/* Checkpoints in the safetensors format (https://github.com/huggingface/safetensors):
 *   8 bytes  N, the header length, unsigned little-endian
 *   N bytes  JSON header, padded with spaces so the data starts 8-byte aligned
 *   rest     tensor bytes; each tensor's data_offsets are relative to here
 * Tensor bytes are stored little-endian, the host order of every target tfm
 * supports, so they are copied as they are. */
#define _POSIX_C_SOURCE 200809L
#include "tfmrt.h"

#include "crc32.h"
#include "fileio.h"
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HEADER_BYTES 100000000u /* the limit the safetensors library enforces */
#define METADATA_KEY "__metadata__"
#define CRC_PREFIX "tfm.crc32."     /* + tensor name, or + METADATA_KEY */


/* Bytes of a dtype[shape] tensor; false when that overflows. */
static bool tensor_bytes(tfm_dtype dtype, size_t rank, const size_t *shape, uint64_t *bytes) {
  uint64_t total = tfm_dtype_size(dtype);
  for (size_t i = 0; i < rank; i++) {
    if (shape[i] != 0 && total > UINT64_MAX / shape[i]) return false;
    total *= shape[i];
  }
  *bytes = total;
  return true;
}

static void format_shape(char *buf, size_t size, size_t rank, const size_t *shape) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (size_t i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%zu", i ? ", " : "", shape[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
}

static bool is_crc_key(const char *key) {
  return strncmp(key, CRC_PREFIX, strlen(CRC_PREFIX)) == 0;
}

static int compare_entries_by_key(const void *a, const void *b) {
  return strcmp((*(const tfm_meta_entry *const *)a)->key,
                (*(const tfm_meta_entry *const *)b)->key);
}

/* CRC over the metadata entries (never the checksum entries themselves) in key
 * order as key NUL value NUL, so it does not depend on the JSON order. */
static int metadata_crc(const char *path, const tfm_meta *meta, uint32_t *crc) {
  const tfm_meta_entry **sorted = malloc((meta->count + 1) * sizeof *sorted);
  if (!sorted) return tfm_fail_file(path, "out of memory");
  for (size_t i = 0; i < meta->count; i++) sorted[i] = &meta->entries[i];
  qsort(sorted, meta->count, sizeof *sorted, compare_entries_by_key);
  uint32_t c = 0;
  for (size_t i = 0; i < meta->count; i++) {
    c = crc32_update(c, sorted[i]->key, strlen(sorted[i]->key) + 1);
    c = crc32_update(c, sorted[i]->value, strlen(sorted[i]->value) + 1);
  }
  free(sorted);
  *crc = c;
  return TFM_OK;
}

/* --- writing -------------------------------------------------------------- */

typedef struct {
  char *data;
  size_t len, capacity;
  bool out_of_memory;
} text;

static void text_append(text *t, const char *s, size_t n) {
  if (t->out_of_memory) return;
  if (t->len + n + 1 > t->capacity) {
    size_t capacity = t->capacity ? t->capacity : 256;
    while (capacity < t->len + n + 1) capacity *= 2;
    char *grown = realloc(t->data, capacity);
    if (!grown) {
      t->out_of_memory = true;
      return;
    }
    t->data = grown;
    t->capacity = capacity;
  }
  memcpy(t->data + t->len, s, n);
  t->len += n;
  t->data[t->len] = '\0';
}

static void text_puts(text *t, const char *s) { text_append(t, s, strlen(s)); }

static void text_json_string(text *t, const char *s) {
  text_puts(t, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char escaped[8];
    if (c == '"' || c == '\\') {
      snprintf(escaped, sizeof escaped, "\\%c", c);
      text_puts(t, escaped);
    } else if (c < 0x20) {
      snprintf(escaped, sizeof escaped, "\\u%04x", c);
      text_puts(t, escaped);
    } else {
      text_append(t, s, 1);
    }
  }
  text_puts(t, "\"");
}

static void text_json_member(text *t, bool first, const char *key, const char *value) {
  if (!first) text_puts(t, ",");
  text_json_string(t, key);
  text_puts(t, ":");
  text_json_string(t, value);
}

static int compare_tensors_by_name(const void *a, const void *b) {
  return strcmp((*(const tfm_tensor *const *)a)->name, (*(const tfm_tensor *const *)b)->name);
}

/* Bytes of a tensor that check_tensors_to_save accepted. */
static uint64_t checked_bytes(const tfm_tensor *t) {
  uint64_t bytes = 0;
  tensor_bytes(t->dtype, t->rank, t->shape, &bytes);
  return bytes;
}

static int check_tensors_to_save(const char *path, const tfm_tensor *tensors, size_t count) {
  for (size_t i = 0; i < count; i++) {
    const tfm_tensor *t = &tensors[i];
    uint64_t bytes;
    if (!t->name || !t->name[0]) return tfm_fail_file(path, "tensor %zu has no name", i);
    if (strcmp(t->name, METADATA_KEY) == 0)
      return tfm_fail_file(path, "tensor name '%s' is reserved by safetensors", t->name);
    if (!json_is_utf8(t->name, strlen(t->name)))
      return tfm_fail_file(path, "tensor %zu: name is not valid UTF-8", i);
    if (tfm_dtype_size(t->dtype) == 0)
      return tfm_fail_file(path, "tensor '%s': invalid dtype %d", t->name, (int)t->dtype);
    if (t->rank > TFM_MAX_RANK)
      return tfm_fail_file(path, "tensor '%s': rank %zu exceeds %d", t->name, t->rank, TFM_MAX_RANK);
    if (!tensor_bytes(t->dtype, t->rank, t->shape, &bytes))
      return tfm_fail_file(path, "tensor '%s': size overflows", t->name);
    if (bytes > 0 && !t->data) return tfm_fail_file(path, "tensor '%s' has no data", t->name);
  }
  const tfm_tensor **by_name = malloc((count + 1) * sizeof *by_name);
  if (!by_name) return tfm_fail_file(path, "out of memory");
  for (size_t i = 0; i < count; i++) by_name[i] = &tensors[i];
  qsort(by_name, count, sizeof *by_name, compare_tensors_by_name);
  for (size_t i = 1; i < count; i++) {
    if (strcmp(by_name[i - 1]->name, by_name[i]->name) == 0) {
      int status = tfm_fail_file(path, "two tensors are named '%s'", by_name[i]->name);
      free(by_name);
      return status;
    }
  }
  free(by_name);
  return TFM_OK;
}

/* The metadata as written: "format": "pt" (what PyTorch's safetensors writes)
 * unless the caller chose a format, then the caller's entries. */
static int metadata_to_save(const char *path, const tfm_meta *meta, tfm_meta *out) {
  if ((!meta || !tfm_meta_get(meta, "format")) && tfm_meta_set(out, "format", "pt"))
    return tfm_fail_file(path, "%s", tfm_error());
  for (size_t i = 0; meta && i < meta->count; i++) {
    const tfm_meta_entry *e = &meta->entries[i];
    if (is_crc_key(e->key))
      return tfm_fail_file(path, "metadata key '%s' is reserved for checksums", e->key);
    if (!json_is_utf8(e->key, strlen(e->key)) || !json_is_utf8(e->value, strlen(e->value)))
      return tfm_fail_file(path, "metadata '%s' is not valid UTF-8", e->key);
    if (tfm_meta_set(out, e->key, e->value)) return tfm_fail_file(path, "%s", tfm_error());
  }
  return TFM_OK;
}

/* Data order: widest elements first, otherwise as given, so every tensor starts
 * aligned to its element size when the file is memory-mapped. */
static size_t *data_order(const tfm_tensor *tensors, size_t count) {
  size_t *order = malloc((count + 1) * sizeof *order);
  if (!order) return NULL;
  size_t n = 0;
  for (size_t width = 8; width >= 1; width /= 2)
    for (size_t i = 0; i < count; i++)
      if (tfm_dtype_size(tensors[i].dtype) == width) order[n++] = i;
  return order;
}

static char *crc_key(const char *name) {
  char *key = malloc(strlen(CRC_PREFIX) + strlen(name) + 1);
  if (key) {
    strcpy(key, CRC_PREFIX);
    strcat(key, name);
  }
  return key;
}

/* The JSON header: metadata (with the checksums) first, then the tensors in
 * data order; padded with spaces to a multiple of 8 bytes. */
static int build_header(const char *path, const tfm_tensor *tensors, const size_t *order,
                        size_t count, const tfm_meta *meta, text *header) {
  text_puts(header, "{\"" METADATA_KEY "\":{");
  for (size_t i = 0; i < meta->count; i++)
    text_json_member(header, i == 0, meta->entries[i].key, meta->entries[i].value);
  for (size_t i = 0; i < count; i++) {
    const tfm_tensor *t = &tensors[order[i]];
    uint64_t bytes = checked_bytes(t);
    char crc[9];
    snprintf(crc, sizeof crc, "%08x", (unsigned)crc32_update(0, t->data, bytes));
    char *key = crc_key(t->name);
    if (!key) return tfm_fail_file(path, "out of memory");
    text_json_member(header, false, key, crc);
    free(key);
  }
  uint32_t meta_crc;
  if (metadata_crc(path, meta, &meta_crc)) return TFM_FAILED;
  char crc[9];
  snprintf(crc, sizeof crc, "%08x", (unsigned)meta_crc);
  text_json_member(header, false, CRC_PREFIX METADATA_KEY, crc);
  text_puts(header, "}");

  uint64_t offset = 0;
  for (size_t i = 0; i < count; i++) {
    const tfm_tensor *t = &tensors[order[i]];
    uint64_t bytes = checked_bytes(t);
    char buf[64];
    text_puts(header, ",");
    text_json_string(header, t->name);
    text_puts(header, ":{\"dtype\":");
    text_json_string(header, tfm_dtype_name(t->dtype));
    text_puts(header, ",\"shape\":[");
    for (size_t d = 0; d < t->rank; d++) {
      snprintf(buf, sizeof buf, "%s%zu", d ? "," : "", t->shape[d]);
      text_puts(header, buf);
    }
    snprintf(buf, sizeof buf, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
             (unsigned long long)(offset + bytes));
    text_puts(header, buf);
    offset += bytes;
  }
  text_puts(header, "}");
  while ((8 + header->len) % 8 != 0) text_puts(header, " ");
  if (header->out_of_memory) return tfm_fail_file(path, "out of memory");
  if (header->len > MAX_HEADER_BYTES)
    return tfm_fail_file(path, "header of %zu bytes exceeds the safetensors limit of %u",
                     header->len, MAX_HEADER_BYTES);
  return TFM_OK;
}

/* Writes to "<path>.tmp.<pid>" and renames it over path only once it is
 * complete and on disk, so a crash at any point leaves the old file intact. */
static int write_atomically(const char *path, const text *header, const tfm_tensor *tensors,
                            const size_t *order, size_t count) {
  size_t tmp_size = strlen(path) + 32;
  char *tmp = malloc(tmp_size);
  if (!tmp) return tfm_fail_file(path, "out of memory");
  snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    int status = tfm_fail_file(path, "cannot create temporary file '%s': %s", tmp, strerror(errno));
    free(tmp);
    return status;
  }
  unsigned char length[8];
  for (int i = 0; i < 8; i++) length[i] = (unsigned char)((uint64_t)header->len >> (8 * i));
  int err = tfm_write_all(fd, length, sizeof length);
  if (!err) err = tfm_write_all(fd, header->data, header->len);
  for (size_t i = 0; i < count && !err; i++) {
    const tfm_tensor *t = &tensors[order[i]];
    uint64_t bytes = checked_bytes(t);
    err = tfm_write_all(fd, t->data, bytes);
  }
  const char *step = "writing";
  if (!err && fsync(fd) != 0) err = errno, step = "syncing";
  if (close(fd) != 0 && !err) err = errno, step = "closing";
  if (!err && rename(tmp, path) != 0) err = errno, step = "renaming";
  if (err) {
    unlink(tmp);
    int status = tfm_fail_file(path, "%s temporary file '%s' failed: %s", step, tmp, strerror(err));
    free(tmp);
    return status;
  }
  free(tmp);
  return tfm_sync_directory_of(path);
}

int tfm_ckpt_save(const char *path, const tfm_tensor *tensors, size_t count,
                  const tfm_meta *meta) {
  if (check_tensors_to_save(path, tensors, count)) return TFM_FAILED;
  tfm_meta written = {0};
  text header = {0};
  size_t *order = data_order(tensors, count);
  int status = order ? TFM_OK : tfm_fail_file(path, "out of memory");
  if (!status) status = metadata_to_save(path, meta, &written);
  if (!status) status = build_header(path, tensors, order, count, &written, &header);
  if (!status) status = write_atomically(path, &header, tensors, order, count);
  free(header.data);
  free(order);
  tfm_meta_clear(&written);
  return status;
}

/* --- reading -------------------------------------------------------------- */

typedef struct {
  const char *name;          /* the header's key, owned by the JSON tree */
  tfm_dtype dtype;
  size_t rank;
  size_t shape[TFM_MAX_RANK];
  uint64_t begin, end;       /* data_offsets */
  const tfm_tensor *target;  /* the model's tensor this one loads into */
  bool has_crc;
  uint32_t crc;
} stored_tensor;

typedef struct {
  const char *path;
  int fd;
  uint64_t data_start, data_size;
  char *header;
  json_value *root;
  stored_tensor *tensors;    /* sorted by name once parsed */
  size_t count;
  tfm_meta meta;             /* without the checksum entries */
  bool has_meta_crc;
  uint32_t meta_crc;
} checkpoint;

static int read_exactly(const checkpoint *ck, void *buf, uint64_t size, uint64_t offset) {
  unsigned char *p = buf;
  while (size > 0) {
    size_t chunk = size < (1u << 30) ? (size_t)size : (1u << 30);
    ssize_t n = pread(ck->fd, p, chunk, (off_t)offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return tfm_fail_file(ck->path, "read failed: %s", strerror(errno));
    if (n == 0) return tfm_fail_file(ck->path, "file shrank while being read (truncated)");
    p += n;
    size -= (uint64_t)n;
    offset += (uint64_t)n;
  }
  return TFM_OK;
}

static int read_header(checkpoint *ck) {
  struct stat st;
  if (fstat(ck->fd, &st) != 0) return tfm_fail_file(ck->path, "cannot stat: %s", strerror(errno));
  if (!S_ISREG(st.st_mode)) return tfm_fail_file(ck->path, "not a regular file");
  uint64_t file_size = (uint64_t)st.st_size;
  if (file_size < 8)
    return tfm_fail_file(ck->path, "file is %llu bytes, too short to hold the 8-byte header "
                     "length: truncated, or not a safetensors file",
                     (unsigned long long)file_size);
  unsigned char length[8];
  if (read_exactly(ck, length, 8, 0)) return TFM_FAILED;
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; i--) header_size = header_size << 8 | length[i];
  if (header_size > file_size - 8)
    return tfm_fail_file(ck->path, "header length %llu is beyond the end of the file (%llu bytes): "
                     "truncated, or not a safetensors file",
                     (unsigned long long)header_size, (unsigned long long)file_size);
  if (header_size > MAX_HEADER_BYTES)
    return tfm_fail_file(ck->path, "header length %llu exceeds the safetensors limit of %u bytes",
                     (unsigned long long)header_size, MAX_HEADER_BYTES);
  ck->header = malloc(header_size + 1);
  if (!ck->header) return tfm_fail_file(ck->path, "out of memory");
  if (read_exactly(ck, ck->header, header_size, 8)) return TFM_FAILED;
  if (header_size == 0 || ck->header[0] != '{')
    return tfm_fail_file(ck->path, "header does not start with '{': not a safetensors file");
  char error[256];
  if (json_parse(ck->header, header_size, &ck->root, error, sizeof error))
    return tfm_fail_file(ck->path, "malformed JSON header: %s", error);
  ck->data_start = 8 + header_size;
  ck->data_size = file_size - ck->data_start;
  return TFM_OK;
}

static int parse_dtype(const checkpoint *ck, const char *name, const json_value *v,
                       tfm_dtype *dtype) {
  if (v->kind != JSON_STRING)
    return tfm_fail_file(ck->path, "tensor '%s': dtype is %s, not a string", name,
                     json_kind_name(v->kind));
  static const tfm_dtype known[] = {TFM_F32, TFM_F64, TFM_I32, TFM_BF16};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    if (strcmp(v->string, tfm_dtype_name(known[i])) == 0) {
      *dtype = known[i];
      return TFM_OK;
    }
  }
  return tfm_fail_file(ck->path, "tensor '%s': unknown dtype \"%s\" (tfm reads F32, F64, I32, BF16)",
                   name, v->string);
}

static int parse_shape(const checkpoint *ck, stored_tensor *t, const json_value *v) {
  if (v->kind != JSON_ARRAY)
    return tfm_fail_file(ck->path, "tensor '%s': shape is %s, not an array", t->name,
                     json_kind_name(v->kind));
  if (v->child_count > TFM_MAX_RANK)
    return tfm_fail_file(ck->path, "tensor '%s': rank %zu exceeds the supported %d", t->name,
                     v->child_count, TFM_MAX_RANK);
  t->rank = 0;
  for (const json_value *d = v->first_child; d; d = d->next) {
    if (d->kind != JSON_NUMBER || !d->is_uint)
      return tfm_fail_file(ck->path, "tensor '%s': shape entries must be non-negative integers",
                       t->name);
    t->shape[t->rank++] = (size_t)d->uint;
  }
  return TFM_OK;
}

static int parse_offsets(const checkpoint *ck, stored_tensor *t, const json_value *v) {
  const json_value *begin = v->first_child, *end = begin ? begin->next : NULL;
  if (v->kind != JSON_ARRAY || v->child_count != 2 || begin->kind != JSON_NUMBER ||
      !begin->is_uint || end->kind != JSON_NUMBER || !end->is_uint)
    return tfm_fail_file(ck->path, "tensor '%s': data_offsets must be [begin, end], two "
                     "non-negative integers", t->name);
  t->begin = begin->uint;
  t->end = end->uint;
  return TFM_OK;
}

/* One "name": {"dtype": ..., "shape": [...], "data_offsets": [b, e]} entry. */
static int parse_tensor(const checkpoint *ck, const json_value *entry, stored_tensor *t) {
  t->name = entry->key;
  if (entry->kind != JSON_OBJECT)
    return tfm_fail_file(ck->path, "tensor '%s' is %s, not an object", t->name,
                     json_kind_name(entry->kind));
  bool seen_dtype = false, seen_shape = false, seen_offsets = false;
  for (const json_value *field = entry->first_child; field; field = field->next) {
    int status;
    if (strcmp(field->key, "dtype") == 0) {
      seen_dtype = true;
      status = parse_dtype(ck, t->name, field, &t->dtype);
    } else if (strcmp(field->key, "shape") == 0) {
      seen_shape = true;
      status = parse_shape(ck, t, field);
    } else if (strcmp(field->key, "data_offsets") == 0) {
      seen_offsets = true;
      status = parse_offsets(ck, t, field);
    } else {
      status = tfm_fail_file(ck->path, "tensor '%s': unknown field \"%s\"", t->name, field->key);
    }
    if (status) return status;
  }
  const char *missing = !seen_dtype ? "dtype" : !seen_shape ? "shape"
                      : !seen_offsets ? "data_offsets" : NULL;
  if (missing) return tfm_fail_file(ck->path, "tensor '%s' has no \"%s\"", t->name, missing);
  uint64_t bytes;
  char shape[128];
  format_shape(shape, sizeof shape, t->rank, t->shape);
  if (!tensor_bytes(t->dtype, t->rank, t->shape, &bytes))
    return tfm_fail_file(ck->path, "tensor '%s': shape %s overflows", t->name, shape);
  if (t->end < t->begin)
    return tfm_fail_file(ck->path, "tensor '%s': data_offsets [%llu, %llu] end before they begin",
                     t->name, (unsigned long long)t->begin, (unsigned long long)t->end);
  if (t->end > ck->data_size)
    return tfm_fail_file(ck->path, "tensor '%s': data_offsets [%llu, %llu] are out of range: the "
                     "data holds %llu bytes (truncated?)", t->name,
                     (unsigned long long)t->begin, (unsigned long long)t->end,
                     (unsigned long long)ck->data_size);
  if (t->end - t->begin != bytes)
    return tfm_fail_file(ck->path, "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but "
                     "%s %s needs %llu", t->name, (unsigned long long)t->begin,
                     (unsigned long long)t->end, (unsigned long long)(t->end - t->begin),
                     tfm_dtype_name(t->dtype), shape, (unsigned long long)bytes);
  return TFM_OK;
}

static int compare_by_offsets(const void *a, const void *b) {
  const stored_tensor *x = *(const stored_tensor *const *)a, *y = *(const stored_tensor *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

/* The tensors must tile the data region exactly, as safetensors requires:
 * no overlap, no gap, nothing after the last one. */
static int check_layout(const checkpoint *ck, stored_tensor **by_offset) {
  uint64_t covered = 0;
  for (size_t i = 0; i < ck->count; i++) {
    const stored_tensor *t = by_offset[i];
    if (t->begin < covered)
      return tfm_fail_file(ck->path, "tensors '%s' and '%s' overlap in the data region",
                       by_offset[i - 1]->name, t->name);
    if (t->begin > covered)
      return tfm_fail_file(ck->path, "data bytes [%llu, %llu) before tensor '%s' belong to no "
                       "tensor", (unsigned long long)covered, (unsigned long long)t->begin,
                       t->name);
    covered = t->end;
  }
  if (covered != ck->data_size)
    return tfm_fail_file(ck->path, "%llu bytes after the last tensor belong to no tensor",
                     (unsigned long long)(ck->data_size - covered));
  return TFM_OK;
}

static int compare_stored_by_name(const void *a, const void *b) {
  return strcmp(((const stored_tensor *)a)->name, ((const stored_tensor *)b)->name);
}

static stored_tensor *find_stored(const checkpoint *ck, const char *name) {
  stored_tensor key = {.name = name};
  return bsearch(&key, ck->tensors, ck->count, sizeof *ck->tensors, compare_stored_by_name);
}

/* Exactly 8 lowercase hex digits: also refuses a case-flipped digit. */
static bool parse_crc(const char *text, uint32_t *crc) {
  uint32_t value = 0;
  for (int i = 0; i < 8; i++) {
    char c = text[i];
    if (c >= '0' && c <= '9') value = value << 4 | (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') value = value << 4 | (uint32_t)(c - 'a' + 10);
    else return false;
  }
  *crc = value;
  return text[8] == '\0';
}

static int parse_metadata(checkpoint *ck, const json_value *object) {
  if (object->kind != JSON_OBJECT)
    return tfm_fail_file(ck->path, "\"" METADATA_KEY "\" is %s, not an object",
                     json_kind_name(object->kind));
  for (const json_value *e = object->first_child; e; e = e->next) {
    if (e->kind != JSON_STRING)
      return tfm_fail_file(ck->path, "metadata '%s' is %s, not a string", e->key,
                       json_kind_name(e->kind));
    if (!is_crc_key(e->key)) {
      if (tfm_meta_set(&ck->meta, e->key, e->string))
        return tfm_fail_file(ck->path, "%s", tfm_error());
      continue;
    }
    uint32_t crc;
    if (!parse_crc(e->string, &crc))
      return tfm_fail_file(ck->path, "metadata '%s' is \"%s\", not a CRC32 of 8 lowercase hex digits",
                       e->key, e->string);
    const char *target = e->key + strlen(CRC_PREFIX);
    if (strcmp(target, METADATA_KEY) == 0) {
      ck->has_meta_crc = true;
      ck->meta_crc = crc;
      continue;
    }
    stored_tensor *t = find_stored(ck, target);
    if (!t) return tfm_fail_file(ck->path, "metadata '%s' is a checksum of a tensor not in the file",
                             e->key);
    t->has_crc = true;
    t->crc = crc;
  }
  return TFM_OK;
}

/* Checksums come all or none: tfm writes one per tensor and one of the
 * metadata, so a partial set means a checksum key itself was damaged. */
static int check_checksums_complete(const checkpoint *ck) {
  bool any = ck->has_meta_crc;
  for (size_t i = 0; i < ck->count && !any; i++) any = ck->tensors[i].has_crc;
  if (!any) return TFM_OK;
  if (!ck->has_meta_crc)
    return tfm_fail_file(ck->path, "checksums incomplete: no \"" CRC_PREFIX METADATA_KEY "\" (the "
                     "file is corrupted)");
  for (size_t i = 0; i < ck->count; i++)
    if (!ck->tensors[i].has_crc)
      return tfm_fail_file(ck->path, "checksums incomplete: tensor '%s' has none (the file is "
                       "corrupted)", ck->tensors[i].name);
  return TFM_OK;
}

static int parse_entries(checkpoint *ck) {
  if (ck->root->kind != JSON_OBJECT) return tfm_fail_file(ck->path, "header is not a JSON object");
  ck->tensors = calloc(ck->root->child_count + 1, sizeof *ck->tensors);
  if (!ck->tensors) return tfm_fail_file(ck->path, "out of memory");
  const json_value *metadata = NULL;
  for (const json_value *e = ck->root->first_child; e; e = e->next) {
    if (strcmp(e->key, METADATA_KEY) == 0) metadata = e;
    else if (parse_tensor(ck, e, &ck->tensors[ck->count++])) return TFM_FAILED;
  }
  qsort(ck->tensors, ck->count, sizeof *ck->tensors, compare_stored_by_name);
  if (metadata && parse_metadata(ck, metadata)) return TFM_FAILED;
  if (check_checksums_complete(ck)) return TFM_FAILED;
  if (ck->has_meta_crc) {
    uint32_t crc;
    if (metadata_crc(ck->path, &ck->meta, &crc)) return TFM_FAILED;
    if (crc != ck->meta_crc)
      return tfm_fail_file(ck->path, "metadata checksum mismatch (stored %08x, computed %08x): the "
                       "file is corrupted", (unsigned)ck->meta_crc, (unsigned)crc);
  }
  return TFM_OK;
}

static int match_expected(checkpoint *ck, const tfm_tensor *tensors, size_t count) {
  for (size_t i = 0; i < count; i++)
    if (!tensors[i].name || tensors[i].rank > TFM_MAX_RANK)
      return tfm_fail_file(ck->path, "the model's tensor %zu has no name or a rank above %d", i,
                       TFM_MAX_RANK);
  for (size_t i = 0; i < count; i++) {
    const tfm_tensor *want = &tensors[i];
    stored_tensor *t = find_stored(ck, want->name);
    if (!t) {
      const stored_tensor *extra = NULL;
      for (size_t j = 0; j < ck->count && !extra; j++) {
        bool expected = false;
        for (size_t k = 0; k < count && !expected; k++)
          expected = strcmp(ck->tensors[j].name, tensors[k].name) == 0;
        if (!expected) extra = &ck->tensors[j];
      }
      if (extra)
        return tfm_fail_file(ck->path, "missing tensor '%s' that the model expects (the file has "
                         "unexpected tensor '%s' instead)", want->name, extra->name);
      return tfm_fail_file(ck->path, "missing tensor '%s' that the model expects", want->name);
    }
    if (t->dtype != want->dtype)
      return tfm_fail_file(ck->path, "tensor '%s' is %s in the file but the model expects %s",
                       want->name, tfm_dtype_name(t->dtype), tfm_dtype_name(want->dtype));
    bool same_shape = t->rank == want->rank;
    for (size_t d = 0; d < t->rank && same_shape; d++) same_shape = t->shape[d] == want->shape[d];
    if (!same_shape) {
      char have[256], need[256];
      format_shape(have, sizeof have, t->rank, t->shape);
      format_shape(need, sizeof need, want->rank, want->shape);
      return tfm_fail_file(ck->path, "tensor '%s' has shape %s in the file but the model expects %s",
                       want->name, have, need);
    }
    if (t->end > t->begin && !want->data)
      return tfm_fail_file(ck->path, "tensor '%s': the model gave no buffer to load it into",
                       want->name);
    t->target = want;
  }
  for (size_t j = 0; j < ck->count; j++)
    if (!ck->tensors[j].target)
      return tfm_fail_file(ck->path, "unexpected tensor '%s': the model has no such parameter",
                       ck->tensors[j].name);
  return TFM_OK;
}

static int read_tensors(const checkpoint *ck, stored_tensor **by_offset) {
  for (size_t i = 0; i < ck->count; i++) {
    const stored_tensor *t = by_offset[i];
    uint64_t bytes = t->end - t->begin;
    if (read_exactly(ck, t->target->data, bytes, ck->data_start + t->begin)) return TFM_FAILED;
    uint32_t crc = crc32_update(0, t->target->data, bytes);
    if (t->has_crc && crc != t->crc)
      return tfm_fail_file(ck->path, "tensor '%s': checksum mismatch (stored %08x, computed %08x): "
                       "the file is corrupted", t->name, (unsigned)t->crc, (unsigned)crc);
  }
  return TFM_OK;
}

/* Says which buffer each stored tensor loads into (sets every `target`). */
typedef int (*attach_targets)(checkpoint *ck, void *context);

static int load(checkpoint *ck, attach_targets attach, void *context) {
  if (read_header(ck) || parse_entries(ck)) return TFM_FAILED;
  stored_tensor **by_offset = malloc((ck->count + 1) * sizeof *by_offset);
  if (!by_offset) return tfm_fail_file(ck->path, "out of memory");
  for (size_t i = 0; i < ck->count; i++) by_offset[i] = &ck->tensors[i];
  qsort(by_offset, ck->count, sizeof *by_offset, compare_by_offsets);
  int status = check_layout(ck, by_offset);
  if (!status && (status = attach(ck, context)) && tfm_meta_get(&ck->meta, TFM_META_MODEL)) {
    /* Tensors that do not match are most often another model's file. */
    char why[1024];
    snprintf(why, sizeof why, "%s", tfm_error());
    tfm_fail("%s; the file is a checkpoint of model %s", why,
             tfm_meta_get(&ck->meta, TFM_META_MODEL));
  }
  if (!status) status = read_tensors(ck, by_offset);
  free(by_offset);
  return status;
}

static int open_and_load(const char *path, attach_targets attach, void *context,
                         tfm_meta *meta) {
  checkpoint ck = {.path = path};
  ck.fd = open(path, O_RDONLY | O_CLOEXEC);
  if (ck.fd < 0) return tfm_fail_file(path, "cannot open: %s", strerror(errno));
  int status = load(&ck, attach, context);
  close(ck.fd);
  free(ck.header);
  json_free(ck.root);
  free(ck.tensors);
  if (!status && meta) {
    tfm_meta_clear(meta);
    *meta = ck.meta;
  } else {
    tfm_meta_clear(&ck.meta);
  }
  return status;
}

typedef struct {
  const tfm_tensor *tensors;
  size_t count;
} expected_tensors;

static int attach_expected(checkpoint *ck, void *context) {
  const expected_tensors *want = context;
  return match_expected(ck, want->tensors, want->count);
}

int tfm_ckpt_load(const char *path, const tfm_tensor *tensors, size_t count, tfm_meta *meta) {
  expected_tensors want = {tensors, count};
  return open_and_load(path, attach_expected, &want, meta);
}

/* tfm_ckpt_read's tensors, made to the file's measure as it is parsed. */
typedef struct {
  tfm_tensor *tensors;
  size_t count;
} read_tensors_out;

static int attach_allocated(checkpoint *ck, void *context) {
  read_tensors_out *out = context;
  out->tensors = calloc(ck->count + 1, sizeof *out->tensors);
  if (!out->tensors) return tfm_fail_file(ck->path, "out of memory");
  for (size_t i = 0; i < ck->count; i++) {
    stored_tensor *t = &ck->tensors[i];
    tfm_tensor *mine = &out->tensors[out->count++];
    mine->name = strdup(t->name);
    mine->dtype = t->dtype;
    mine->rank = t->rank;
    memcpy(mine->shape, t->shape, sizeof t->shape);
    /* One byte at least, so an empty tensor has a buffer that frees. */
    mine->data = malloc(t->end - t->begin + 1);
    if (!mine->name || !mine->data) return tfm_fail_file(ck->path, "out of memory");
    t->target = mine;
  }
  return TFM_OK;
}

int tfm_ckpt_read(const char *path, tfm_tensor **tensors, size_t *count, tfm_meta *meta) {
  read_tensors_out out = {0};
  int status = open_and_load(path, attach_allocated, &out, meta);
  if (status) {
    tfm_ckpt_free_tensors(out.tensors, out.count);
    out = (read_tensors_out){0};
  }
  *tensors = out.tensors;
  *count = out.count;
  return status;
}

void tfm_ckpt_free_tensors(tfm_tensor *tensors, size_t count) {
  for (size_t i = 0; tensors && i < count; i++) {
    free((char *)tensors[i].name);
    free(tensors[i].data);
  }
  free(tensors);
}
