/* Saving then loading a checkpoint gives back every tensor bit for bit, and the
 * metadata (training state included) as it was. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "tfmrt.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { COUNT = 7 };

static const tfm_tensor shapes[COUNT] = {
    {"encoder.0.attn.wq", TFM_F32, 2, {4, 3}, NULL},
    {"encoder.0.attn.bq", TFM_F32, 1, {3}, NULL},
    {"emb", TFM_BF16, 2, {5, 3}, NULL},
    {"counts", TFM_I32, 3, {2, 2, 2}, NULL},
    {"scale", TFM_F64, 0, {0}, NULL}, /* a scalar */
    {"empty", TFM_F32, 2, {0, 4}, NULL},
    {"big.w", TFM_F32, 2, {1024, 768}, NULL}, /* 3 MiB: more than one write */
};

static size_t bytes_of(const tfm_tensor *t) {
  size_t n = tfm_dtype_size(t->dtype);
  for (size_t d = 0; d < t->rank; d++) n *= t->shape[d];
  return n;
}

/* Tensors with fresh buffers: random bit patterns (NaN payloads, -0, denormals
 * included) when seed is nonzero, zeros otherwise. */
static void make_tensors(tfm_tensor *out, uint64_t seed) {
  for (size_t i = 0; i < COUNT; i++) {
    out[i] = shapes[i];
    size_t n = bytes_of(&out[i]);
    unsigned char *data = calloc(n ? n : 1, 1);
    for (size_t b = 0; seed && b < n; b++) {
      seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
      data[b] = (unsigned char)seed;
    }
    out[i].data = data;
  }
}

static void free_tensors(tfm_tensor *t) {
  for (size_t i = 0; i < COUNT; i++) free(t[i].data);
}

static void check_same(const tfm_tensor *a, const tfm_tensor *b) {
  for (size_t i = 0; i < COUNT; i++) {
    if (memcmp(a[i].data, b[i].data, bytes_of(&a[i])) != 0) {
      fprintf(stderr, "tensor '%s' differs after the round trip\n", a[i].name);
      check_failures++;
    }
  }
}

static size_t files_in_scratch_dir(void) {
  DIR *d = opendir(scratch_dir());
  size_t n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

int main(void) {
  char path[512];
  scratch_path(path, sizeof path, "model.safetensors");
  const char *note = "a \"quoted\" \\ note\nwith a tab\t and \xc3\xbc";

  tfm_tensor saved[COUNT], loaded[COUNT];
  make_tensors(saved, 0x9E3779B97F4A7C15u);
  make_tensors(loaded, 0);
  tfm_meta meta = {0}, back = {0};
  CHECK_OK(tfm_meta_set_u64(&meta, TFM_META_STEP, 1234567890123u));
  CHECK_OK(tfm_meta_set_u64(&meta, TFM_META_SEED, UINT64_MAX));
  CHECK_OK(tfm_meta_set(&meta, "note", note));

  CHECK_OK(tfm_ckpt_save(path, saved, COUNT, &meta));
  CHECK_OK(tfm_ckpt_load(path, loaded, COUNT, &back));
  check_same(saved, loaded);
  uint64_t step = 0, seed = 0;
  CHECK_OK(tfm_meta_get_u64(&back, TFM_META_STEP, &step));
  CHECK_OK(tfm_meta_get_u64(&back, TFM_META_SEED, &seed));
  CHECK(step == 1234567890123u);
  CHECK(seed == UINT64_MAX);
  CHECK(tfm_meta_get(&back, "note") && strcmp(tfm_meta_get(&back, "note"), note) == 0);
  CHECK(tfm_meta_get(&back, "format") && strcmp(tfm_meta_get(&back, "format"), "pt") == 0);
  CHECK(back.count == 4); /* format, step, seed, note: the checksums are not returned */

  /* Saving over an existing checkpoint replaces it and leaves no temporary file. */
  free_tensors(saved);
  make_tensors(saved, 12345);
  CHECK_OK(tfm_meta_set_u64(&meta, TFM_META_STEP, 7));
  CHECK_OK(tfm_ckpt_save(path, saved, COUNT, &meta));
  CHECK_OK(tfm_ckpt_load(path, loaded, COUNT, NULL));
  check_same(saved, loaded);
  CHECK(files_in_scratch_dir() == 1);
  CHECK_OK(tfm_meta_get_u64(&meta, TFM_META_STEP, &step));
  CHECK(step == 7);

  /* Metadata saved without "format" round-trips a caller's own format. */
  CHECK_OK(tfm_meta_set(&meta, "format", "tfm"));
  CHECK_OK(tfm_ckpt_save(path, saved, COUNT, &meta));
  CHECK_OK(tfm_ckpt_load(path, loaded, COUNT, &back));
  CHECK(tfm_meta_get(&back, "format") && strcmp(tfm_meta_get(&back, "format"), "tfm") == 0);

  /* No metadata and no tensors at all is still a valid checkpoint. */
  CHECK_OK(tfm_ckpt_save(path, NULL, 0, NULL));
  CHECK_OK(tfm_ckpt_load(path, NULL, 0, &back));
  CHECK(back.count == 1);

  /* What save refuses. */
  tfm_tensor twice[2] = {saved[0], saved[0]};
  CHECK_REFUSED(tfm_ckpt_save(path, twice, 2, NULL), path, "two tensors are named");
  tfm_tensor reserved = saved[1];
  reserved.name = "__metadata__";
  CHECK_REFUSED(tfm_ckpt_save(path, &reserved, 1, NULL), path, "reserved");
  tfm_meta bad_meta = {0};
  CHECK_OK(tfm_meta_set(&bad_meta, "tfm.crc32.emb", "00000000"));
  CHECK_REFUSED(tfm_ckpt_save(path, saved, COUNT, &bad_meta), path, "reserved for checksums");
  CHECK_OK(tfm_meta_set(&bad_meta, "tfm.step", "12x"));
  CHECK_REFUSED(tfm_meta_get_u64(&bad_meta, "tfm.step", &step), NULL, "not an unsigned");
  CHECK_REFUSED(tfm_meta_get_u64(&bad_meta, "tfm.seed", &step), NULL, "no 'tfm.seed'");

  tfm_meta_clear(&bad_meta);
  tfm_meta_clear(&meta);
  tfm_meta_clear(&back);
  free_tensors(saved);
  free_tensors(loaded);
  scratch_dir_remove();
  return check_result("ckpt_roundtrip");
}
