/* Unicode for the tokenizers: UTF-8 in and out, and the character
 * categories, lower-casing and canonical decomposition that GPT-2's
 * pre-tokeniser and BERT's basic tokenizer ask about, all from utf8proc. */
#include "tokenizer_internal.h"

#include <utf8proc.h>

#include "tfmrt.h"

int32_t tfm_tokenizer_utf8_next(const char *text, size_t size, size_t *length) {
  const unsigned char *s = (const unsigned char *)text;
  unsigned char c = s[0];
  *length = 1;
  if (c < 0x80) return c;
  size_t n;
  int32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07, min = 0x10000;
  else return -1;
  if (size < n) return -1;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  *length = n;
  return cp;
}

size_t tfm_tokenizer_utf8_put(int32_t cp, char out[4]) {
  utf8proc_ssize_t n = utf8proc_encode_char(cp, (utf8proc_uint8_t *)out);
  return n > 0 ? (size_t)n : 0;
}

static utf8proc_category_t category(int32_t cp) {
  return cp < 0 ? UTF8PROC_CATEGORY_CN : utf8proc_category(cp);
}

bool tfm_tokenizer_is_letter(int32_t cp) {
  utf8proc_category_t c = category(cp);
  return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
}

bool tfm_tokenizer_is_number(int32_t cp) {
  utf8proc_category_t c = category(cp);
  return c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
}

/* The White_Space property: Zs, Zl, Zp, tab to carriage return, NEL. */
bool tfm_tokenizer_is_space(int32_t cp) {
  if (cp == ' ' || (cp >= 9 && cp <= 13) || cp == 0x85) return true;
  if (cp < 0x80) return false;
  utf8proc_category_t c = category(cp);
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

bool tfm_tokenizer_is_other(int32_t cp) {
  utf8proc_category_t c = category(cp);
  return c == UTF8PROC_CATEGORY_CN || c >= UTF8PROC_CATEGORY_CC;
}

bool tfm_tokenizer_is_punctuation(int32_t cp) {
  utf8proc_category_t c = category(cp);
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool tfm_tokenizer_is_nonspacing_mark(int32_t cp) {
  return category(cp) == UTF8PROC_CATEGORY_MN;
}

bool tfm_tokenizer_is_upper(int32_t cp) { return cp >= 0 && utf8proc_isupper(cp); }

int32_t tfm_tokenizer_lower(int32_t cp) { return cp < 0 ? cp : utf8proc_tolower(cp); }

int tfm_tokenizer_decompose(int32_t cp, tfm_tokenizer_ids *out) {
  utf8proc_int32_t buffer[32];
  int boundclass = UTF8PROC_BOUNDCLASS_START;
  utf8proc_ssize_t n = cp < 0 ? -1
                              : utf8proc_decompose_char(cp, buffer, 32, UTF8PROC_DECOMPOSE,
                                                        &boundclass);
  if (n < 0 || n > 32) return tfm_tokenizer_ids_push(out, cp);
  for (utf8proc_ssize_t i = 0; i < n; i++)
    if (tfm_tokenizer_ids_push(out, buffer[i]) != TFM_OK) return TFM_FAILED;
  return TFM_OK;
}

static int combining_class(int32_t cp) {
  return cp < 0 ? 0 : utf8proc_get_property(cp)->combining_class;
}

void tfm_tokenizer_canonical_order(int32_t *cps, size_t count) {
  /* A stable insertion sort of each run of non-zero combining classes. */
  for (size_t i = 1; i < count; i++) {
    int c = combining_class(cps[i]);
    if (!c) continue;
    size_t j = i;
    int32_t cp = cps[i];
    while (j > 0) {
      int before = combining_class(cps[j - 1]);
      if (!before || before <= c) break;
      cps[j] = cps[j - 1];
      j--;
    }
    cps[j] = cp;
  }
}
