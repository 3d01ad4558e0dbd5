/* Bad checkpoint files are refused with a message that names the file and
 * says what is wrong, and never crash the loader. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "tfmrt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char path[512];
static float w[6] = {1, 2, 3, 4, 5, 6}, b[3] = {-1, -2, -3};
static float w_in[6], b_in[3], extra_in[1];

/* What the model expects: a.w: F32 [2, 3], a.b: F32 [3]. */
static tfm_tensor model[3] = {
    {"a.w", TFM_F32, 2, {2, 3}, w_in},
    {"a.b", TFM_F32, 1, {3}, b_in},
    {"a.extra", TFM_F32, 1, {1}, extra_in},
};

static int load(void) { return tfm_ckpt_load(path, model, 2, NULL); }

/* Writes header (as is, no padding) and `data_size` bytes of data. */
static void write_raw(const char *header, size_t data_size) {
  size_t n = strlen(header);
  unsigned char *file = calloc(8 + n + data_size, 1);
  for (int i = 0; i < 8; i++) file[i] = (unsigned char)((unsigned long long)n >> (8 * i));
  memcpy(file + 8, header, n);
  CHECK(write_file(path, file, 8 + n + data_size) == 0);
  free(file);
}

static unsigned char *valid_file(size_t *size) {
  tfm_tensor tensors[2] = {{"a.w", TFM_F32, 2, {2, 3}, w}, {"a.b", TFM_F32, 1, {3}, b}};
  tfm_meta meta = {0};
  CHECK_OK(tfm_meta_set_u64(&meta, TFM_META_STEP, 7));
  CHECK_OK(tfm_ckpt_save(path, tensors, 2, &meta));
  tfm_meta_clear(&meta);
  return read_file(path, size);
}

static void refuse_malformed_files(const unsigned char *good, size_t size) {
  char missing[600];
  scratch_path(missing, sizeof missing, "no-such.safetensors");
  CHECK_REFUSED(tfm_ckpt_load(missing, model, 2, NULL), missing, "cannot open");

  write_file(path, "", 0);
  CHECK_REFUSED(load(), path, "too short");
  write_file(path, good, 5);
  CHECK_REFUSED(load(), path, "truncated");
  write_file(path, good, size - 4);
  CHECK_REFUSED(load(), path, "truncated");
  write_file(path, good, 8 + 40);
  CHECK_REFUSED(load(), path, "header length 256 is beyond the end of the file (48 bytes)");

  static const char text[] = "this is a text file, not a checkpoint at all\n";
  write_file(path, text, sizeof text - 1);
  CHECK_REFUSED(load(), path, "not a safetensors file");
  unsigned char noise[4096];
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < sizeof noise; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    noise[i] = (unsigned char)x;
  }
  write_file(path, noise, sizeof noise);
  CHECK_REFUSED(load(), path, "not a safetensors file");

  unsigned char *longer = malloc(size);
  memcpy(longer, good, size);
  longer[0] += 100;
  write_file(path, longer, size);
  CHECK_REFUSED(load(), path, "is beyond the end of the file");
  free(longer);

  write_raw("[1, 2]  ", 0);
  CHECK_REFUSED(load(), path, "does not start with '{'");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",}}", 0);
  CHECK_REFUSED(load(), path, "malformed JSON header: at byte 22: expected a string key");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}", 24);
  CHECK_REFUSED(load(), path, "malformed JSON header: at byte 58: expected ',' or '}'");
  write_raw("{\"a.w\":{\"dtype\":\"F32\" \"shape\":[2,3]}}", 0);
  CHECK_REFUSED(load(), path, "malformed JSON header");
  char deep[400] = "{\"a\":";
  for (int i = 0; i < 100; i++) strcat(deep, "[");
  for (int i = 0; i < 100; i++) strcat(deep, "]");
  strcat(deep, "}");
  write_raw(deep, 0);
  CHECK_REFUSED(load(), path, "nesting deeper than 32 levels");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
            "\"a.w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,36]}}", 36);
  CHECK_REFUSED(load(), path, "duplicate key \"a.w\"");
}

static void refuse_bad_entries(void) {
  write_raw("{\"a.w\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
            "\"a.b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[12,24]}}", 24);
  CHECK_REFUSED(load(), path, "tensor 'a.w': unknown dtype \"F16\"");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
            "\"a.b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,40]}}", 36);
  CHECK_REFUSED(load(), path, "tensor 'a.b': data_offsets [24, 40] are out of range");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
            "\"a.b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[20,32]}}", 36);
  CHECK_REFUSED(load(), path, "tensors 'a.w' and 'a.b' overlap");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]},"
            "\"a.b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[20,32]}}", 32);
  CHECK_REFUSED(load(), path, "tensor 'a.w': data_offsets [0, 20] hold 20 bytes but F32 [2, 3] "
                              "needs 24");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
            "\"a.b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[28,40]}}", 40);
  CHECK_REFUSED(load(), path, "data bytes [24, 28) before tensor 'a.b' belong to no tensor");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
            "\"a.b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,36]}}", 40);
  CHECK_REFUSED(load(), path, "4 bytes after the last tensor belong to no tensor");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[24,0]}}", 24);
  CHECK_REFUSED(load(), path, "end before they begin");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,24]}}", 24);
  CHECK_REFUSED(load(), path, "shape entries must be non-negative integers");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24],\"x\":1}}", 24);
  CHECK_REFUSED(load(), path, "tensor 'a.w': unknown field \"x\"");
  write_raw("{\"a.w\":{\"dtype\":\"F32\",\"data_offsets\":[0,24]}}", 24);
  CHECK_REFUSED(load(), path, "tensor 'a.w' has no \"shape\"");
  write_raw("{\"__metadata__\":{\"step\":7}}", 0);
  CHECK_REFUSED(load(), path, "metadata 'step' is a number, not a string");
  write_raw("{\"__metadata__\":{\"tfm.crc32.a.q\":\"00000000\"}}", 0);
  CHECK_REFUSED(load(), path, "checksum of a tensor not in the file");
  write_raw("{\"__metadata__\":{\"tfm.crc32.__metadata__\":\"0000000G\"}}", 0);
  CHECK_REFUSED(load(), path, "not a CRC32 of 8 lowercase hex digits");
}

static void refuse_model_mismatch(const unsigned char *good, size_t size) {
  write_file(path, good, size);
  CHECK_OK(load());
  CHECK(memcmp(w_in, w, sizeof w) == 0 && memcmp(b_in, b, sizeof b) == 0);

  CHECK_REFUSED(tfm_ckpt_load(path, model, 3, NULL), path,
                "missing tensor 'a.extra' that the model expects");
  CHECK_REFUSED(tfm_ckpt_load(path, model, 1, NULL), path,
                "unexpected tensor 'a.b': the model has no such parameter");
  tfm_tensor renamed[2] = {model[0], model[1]};
  renamed[0].name = "a.weight";
  CHECK_REFUSED(tfm_ckpt_load(path, renamed, 2, NULL), path,
                "missing tensor 'a.weight' that the model expects (the file has unexpected "
                "tensor 'a.w' instead)");
  tfm_tensor reshaped[2] = {model[0], model[1]};
  reshaped[0].shape[0] = 3, reshaped[0].shape[1] = 2;
  CHECK_REFUSED(tfm_ckpt_load(path, reshaped, 2, NULL), path,
                "tensor 'a.w' has shape [2, 3] in the file but the model expects [3, 2]");
  tfm_tensor retyped[2] = {model[0], model[1]};
  retyped[1].dtype = TFM_I32;
  CHECK_REFUSED(tfm_ckpt_load(path, retyped, 2, NULL), path,
                "tensor 'a.b' is F32 in the file but the model expects I32");
}

static void refuse_bit_flips(const unsigned char *good, size_t size) {
  unsigned char *copy = malloc(size);
  memcpy(copy, good, size);
  copy[size - 5] ^= 0x10; /* in a.b's bytes */
  write_file(path, copy, size);
  CHECK_REFUSED(load(), path, "tensor 'a.b': checksum mismatch");
  /* Reading without a model refuses it too, after its buffers were made. */
  tfm_tensor *all = (tfm_tensor *)1;
  size_t count = 1;
  CHECK_REFUSED(tfm_ckpt_read(path, &all, &count, NULL), path, "tensor 'a.b': checksum mismatch");
  CHECK(all == NULL && count == 0);
  memcpy(copy, good, size);
  char *step = strstr((char *)copy + 8, "\"tfm.step\":\"7\"");
  CHECK(step != NULL);
  if (step) step[12] ^= 0x01; /* "7" -> "6" */
  write_file(path, copy, size);
  CHECK_REFUSED(load(), path, "metadata checksum mismatch");

  /* Every single-bit flip anywhere in the file is refused. */
  size_t accepted = 0;
  for (size_t byte = 0; byte < size; byte++) {
    for (int bit = 0; bit < 8; bit++) {
      memcpy(copy, good, size);
      copy[byte] ^= (unsigned char)(1u << bit);
      write_file(path, copy, size);
      if (load() == TFM_OK) {
        fprintf(stderr, "flipping bit %d of byte %zu ('%c') is not detected\n", bit, byte,
                good[byte] >= 0x20 && good[byte] < 0x7F ? good[byte] : '?');
        accepted++;
      } else if (!strstr(tfm_error(), path)) {
        fprintf(stderr, "refusal without the file's name: %s\n", tfm_error());
        check_failures++;
      }
    }
  }
  CHECK(accepted == 0);
  free(copy);
}

int main(void) {
  scratch_path(path, sizeof path, "bad.safetensors");
  size_t size = 0;
  unsigned char *good = valid_file(&size);
  CHECK(good != NULL && size > 8);
  if (good) {
    refuse_malformed_files(good, size);
    refuse_bad_entries();
    refuse_model_mismatch(good, size);
    refuse_bit_flips(good, size);
  }
  free(good);
  scratch_dir_remove();
  return check_result("ckpt_refuse");
}
