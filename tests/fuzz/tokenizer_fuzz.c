/* libFuzzer target for the tokenizer.json loader (runtime/tokenizer.c,
 * tokenizer_bpe.c, tokenizer_wordpiece.c): any bytes as a tokenizer.json
 * must end in a refusal or a tokenizer, never a crash, a hang or a leak;
 * a tokenizer that loads encodes and decodes a text of many scripts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfmrt.h"
#include "tokenizer_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char sample[] = "Hello, world! It's 2026 \t\t  naïve café Ελλάδα Привет 中文 😀👍🏽 "
                             "[UNK] <|endoftext|> aaaaaaaaaaaaaaaa 'll 're\xff\xfe end";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tfm_tokenizer *tok;
  if (tfm_tokenizer_load_json_text("fuzz.json", (const char *)data, size, &tok) != TFM_OK)
    return 0;
  tfm_tokenizer_ids ids = {0};
  if (tfm_tokenizer_encode(tok, sample, sizeof sample - 1, &ids) == TFM_OK) {
    char *text;
    size_t length;
    if (tfm_tokenizer_decode(tok, ids.ids, ids.count, &text, &length) == TFM_OK) free(text);
  }
  for (int32_t id = -1; id < 4; id++) {
    size_t length;
    const char *token = tfm_tokenizer_token(tok, id, &length);
    if (token) (void)tfm_tokenizer_id(tok, token, length);
  }
  tfm_tokenizer_ids_free(&ids);
  tfm_tokenizer_free(tok);
  return 0;
}
