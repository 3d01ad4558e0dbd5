/* The bytes tfm writes for a small checkpoint, worked out by hand from the
 * safetensors format, and foreign files in that layout load. Independent of
 * Python: the CRC32 values below are zlib.crc32 of the bytes shown. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "tfmrt.h"

#include <stdlib.h>
#include <string.h>

/* proj.w: F64 [1, 2] = {0.5, -3.0}; emb.scale: BF16 [3] = {1.0, 2.0, -1.0}. */
static const unsigned char proj_w[16] = {0, 0, 0, 0, 0, 0, 0xE0, 0x3F,
                                         0, 0, 0, 0, 0, 0, 0x08, 0xC0};
static const unsigned char emb_scale[6] = {0x80, 0x3F, 0x00, 0x40, 0x80, 0xBF};

/* Metadata first ("format", the caller's entries, a CRC32 per tensor, then one
 * of "format\0pt\0tfm.step\0" "7\0"), then the tensors, the 8-byte-wide F64
 * first so it stays aligned; 271 bytes padded with one space to 272. */
static const char expected_header[] =
    "{\"__metadata__\":{\"format\":\"pt\",\"tfm.step\":\"7\","
    "\"tfm.crc32.proj.w\":\"796c019f\",\"tfm.crc32.emb.scale\":\"9cc421ba\","
    "\"tfm.crc32.__metadata__\":\"c4ac7085\"},"
    "\"proj.w\":{\"dtype\":\"F64\",\"shape\":[1,2],\"data_offsets\":[0,16]},"
    "\"emb.scale\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[16,22]}} ";

static const unsigned char expected_length[8] = {0x10, 0x01, 0, 0, 0, 0, 0, 0}; /* 272 */

static void write_foreign(const char *path, const char *header) {
  size_t n = strlen(header);
  unsigned char *file = malloc(8 + n + 22);
  for (int i = 0; i < 8; i++) file[i] = (unsigned char)((unsigned long long)n >> (8 * i));
  memcpy(file + 8, header, n);
  memcpy(file + 8 + n, proj_w, 16);
  memcpy(file + 8 + n + 16, emb_scale, 6);
  CHECK(write_file(path, file, 8 + n + 22) == 0);
  free(file);
}

int main(void) {
  char path[512];
  scratch_path(path, sizeof path, "layout.safetensors");
  CHECK(sizeof expected_header - 1 == 272);

  /* Given in the other order: the writer puts the F64 tensor first. */
  tfm_tensor tensors[2] = {
      {"emb.scale", TFM_BF16, 1, {3}, (void *)emb_scale},
      {"proj.w", TFM_F64, 2, {1, 2}, (void *)proj_w},
  };
  tfm_meta meta = {0};
  CHECK_OK(tfm_meta_set_u64(&meta, TFM_META_STEP, 7));
  CHECK_OK(tfm_ckpt_save(path, tensors, 2, &meta));

  size_t size = 0;
  unsigned char *file = read_file(path, &size);
  CHECK(file != NULL);
  CHECK(size == 8 + 272 + 22);
  if (file && size == 8 + 272 + 22) {
    CHECK(memcmp(file, expected_length, 8) == 0);
    CHECK(memcmp(file + 8, expected_header, 272) == 0);
    CHECK(memcmp(file + 280, proj_w, 16) == 0);
    CHECK(memcmp(file + 296, emb_scale, 6) == 0);
    if (memcmp(file + 8, expected_header, 272) != 0)
      fprintf(stderr, "header written:  %.272s\nheader expected: %s\n", (char *)file + 8,
              expected_header);
  }
  free(file);

  /* Files as PyTorch's safetensors writes them: no checksums, metadata optional,
   * whitespace, any key order; their tensors load the same. */
  static const char *const foreign[] = {
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"emb.scale\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[16,22]},"
      "\"proj.w\":{\"dtype\":\"F64\",\"shape\":[1,2],\"data_offsets\":[0,16]}}",
      "{ \"proj.w\": {\"shape\": [1, 2], \"dtype\": \"F64\", \"data_offsets\": [0, 16]},\n"
      "  \"emb.scale\": {\"data_offsets\": [16, 22], \"dtype\": \"BF16\", \"shape\": [3]} }\n",
  };
  for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
    unsigned char w[16] = {0}, s[6] = {0};
    tfm_tensor into[2] = {{"proj.w", TFM_F64, 2, {1, 2}, w}, {"emb.scale", TFM_BF16, 1, {3}, s}};
    tfm_meta back = {0};
    CHECK_OK((write_foreign(path, foreign[i]), tfm_ckpt_load(path, into, 2, &back)));
    CHECK(memcmp(w, proj_w, 16) == 0 && memcmp(s, emb_scale, 6) == 0);
    CHECK(back.count == (i == 0 ? 1u : 0u));
    tfm_meta_clear(&back);

    /* Read without saying what to expect: the file's own names, sorted. */
    tfm_tensor *all = NULL;
    size_t count = 0;
    CHECK_OK(tfm_ckpt_read(path, &all, &count, &back));
    CHECK(count == 2);
    if (all && count == 2) {
      CHECK(!strcmp(all[0].name, "emb.scale") && all[0].dtype == TFM_BF16 && all[0].rank == 1 &&
            all[0].shape[0] == 3 && memcmp(all[0].data, emb_scale, 6) == 0);
      CHECK(!strcmp(all[1].name, "proj.w") && all[1].dtype == TFM_F64 && all[1].rank == 2 &&
            all[1].shape[0] == 1 && all[1].shape[1] == 2 && memcmp(all[1].data, proj_w, 16) == 0);
    }
    CHECK(back.count == (i == 0 ? 1u : 0u));
    tfm_ckpt_free_tensors(all, count);
    tfm_meta_clear(&back);
  }

  tfm_meta_clear(&meta);
  scratch_dir_remove();
  return check_result("ckpt_layout");
}
