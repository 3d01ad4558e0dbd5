/* Writes the checkpoint check_with_python.py reads back: every dtype, values
 * given by simple formulas the script recomputes. */
#include "tfmrt.h"

#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
  float w[6];
  double b[3];
  for (int i = 0; i < 6; i++) w[i] = (float)i * 0.5f - 1.0f;
  for (int i = 0; i < 3; i++) b[i] = (double)i / 3.0;
  int tokens[4] = {-2, -1, 0, 2147483647};
  unsigned short emb[4] = {0x3F80, 0x4000, 0xBF80, 0x0000}; /* bf16: 1, 2, -1, 0 */
  tfm_tensor tensors[] = {
      {"layer.0.w", TFM_F32, 2, {2, 3}, w},
      {"layer.0.b", TFM_F64, 1, {3}, b},
      {"tokens", TFM_I32, 1, {4}, tokens},
      {"emb", TFM_BF16, 2, {2, 2}, emb},
  };
  tfm_meta meta = {0};
  int status = tfm_meta_set_u64(&meta, TFM_META_STEP, 42) ||
               tfm_meta_set_u64(&meta, TFM_META_SEED, 1234) ||
               tfm_ckpt_save(argv[1], tensors, 4, &meta);
  tfm_meta_clear(&meta);
  if (status) fprintf(stderr, "%s\n", tfm_error());
  return status;
}
