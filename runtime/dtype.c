/* Element types and their safetensors spellings. */
#include "tfmrt.h"

size_t tfm_dtype_size(tfm_dtype dtype) {
  switch (dtype) {
    case TFM_F32: return 4;
    case TFM_F64: return 8;
    case TFM_I32: return 4;
    case TFM_BF16: return 2;
  }
  return 0;
}

const char *tfm_dtype_name(tfm_dtype dtype) {
  switch (dtype) {
    case TFM_F32: return "F32";
    case TFM_F64: return "F64";
    case TFM_I32: return "I32";
    case TFM_BF16: return "BF16";
  }
  return "invalid";
}
