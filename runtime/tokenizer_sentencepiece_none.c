/* SentencePiece where the runtime was built without libsentencepiece: a
 * .model is refused at load time, saying so. */
#include "tokenizer_internal.h"

#include <stdio.h>

int tfm_tokenizer_sp_load(const char *path, tfm_tokenizer_sp **sp, char *error,
                          size_t error_size) {
  (void)path;
  *sp = NULL;
  snprintf(error, error_size,
           "a SentencePiece model, but this runtime was built without libsentencepiece "
           "(install libsentencepiece-dev and rebuild)");
  return 1;
}

/* Never reached: no tfm_tokenizer_sp exists without the library. */
int tfm_tokenizer_sp_encode(tfm_tokenizer_sp *sp, const char *text, size_t size,
                            tfm_tokenizer_ids *ids, char *error, size_t error_size) {
  (void)sp, (void)text, (void)size, (void)ids;
  snprintf(error, error_size, "built without libsentencepiece");
  return 1;
}

int tfm_tokenizer_sp_decode(tfm_tokenizer_sp *sp, const int32_t *ids, size_t count,
                            tfm_tokenizer_text *out, char *error, size_t error_size) {
  (void)sp, (void)ids, (void)count, (void)out;
  snprintf(error, error_size, "built without libsentencepiece");
  return 1;
}

size_t tfm_tokenizer_sp_size(const tfm_tokenizer_sp *sp) { return (void)sp, 0; }

const char *tfm_tokenizer_sp_token(const tfm_tokenizer_sp *sp, int32_t id, size_t *length) {
  (void)sp, (void)id, (void)length;
  return NULL;
}

int32_t tfm_tokenizer_sp_id(const tfm_tokenizer_sp *sp, const char *token, size_t length) {
  (void)sp, (void)token, (void)length;
  return -1;
}

tfm_tokenizer_specials tfm_tokenizer_sp_specials(const tfm_tokenizer_sp *sp) {
  (void)sp;
  return (tfm_tokenizer_specials){-1, -1, -1, -1};
}

void tfm_tokenizer_sp_free(tfm_tokenizer_sp *sp) { (void)sp; }
