/* WordPiece as BERT and Hugging Face's tokenizers: the BERT normalizer
 * (clean text, CJK characters set apart, accents stripped through NFD
 * without Mn, lower case), the BERT pre-tokenizer (split on spaces,
 * punctuation alone), then greedy longest-match-first pieces with a "##"
 * continuation; loaded from a tokenizer.json or a vocab.txt. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

#include "tfmrt.h"

struct tfm_tokenizer_wordpiece {
  bool normalize; /* the BERT normalizer, with: */
  bool clean_text, chinese, strip_accents, lowercase;
  char prefix[32];        /* the continuation, "##" */
  size_t prefix_length;
  size_t max_chars;       /* a longer word is the unknown token */
  bool join_decode;       /* decode as the WordPiece decoder (else tokens joined by " ") */
  bool cleanup;           /* the decoder's clean-up of spaces */
  char decode_prefix[32];
  size_t decode_prefix_length;
  tfm_tokenizer_ids cps, nfd; /* scratch code points */
  tfm_tokenizer_text word;    /* scratch UTF-8 */
};

void tfm_tokenizer_wordpiece_free(tfm_tokenizer_wordpiece *wp) {
  if (!wp) return;
  free(wp->cps.ids);
  free(wp->nfd.ids);
  free(wp->word.bytes);
  free(wp);
}

static int new_wordpiece(tfm_tokenizer *tok) {
  tok->kind = TFM_TOKENIZER_WORDPIECE;
  tok->wordpiece = calloc(1, sizeof *tok->wordpiece);
  if (!tok->wordpiece) return tfm_fail("out of memory");
  tfm_tokenizer_wordpiece *wp = tok->wordpiece;
  wp->normalize = wp->clean_text = wp->chinese = wp->strip_accents = wp->lowercase = true;
  strcpy(wp->prefix, "##");
  strcpy(wp->decode_prefix, "##");
  wp->prefix_length = wp->decode_prefix_length = 2;
  wp->max_chars = 100;
  wp->join_decode = wp->cleanup = true;
  return TFM_OK;
}

/* The specials BERT names, where the vocabulary has them. */
static int bert_specials(tfm_tokenizer *tok, const char *unk, bool add) {
  const char *names[] = {"[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"};
  int32_t *slots[] = {&tok->specials.bos, &tok->specials.eos, &tok->specials.pad, NULL, NULL};
  for (int i = 0; i < 5; i++) {
    int32_t id = tfm_tokenizer_vocab_find(&tok->vocab, names[i], strlen(names[i]));
    if (id < 0) continue;
    if (slots[i]) *slots[i] = id;
    if (add && tfm_tokenizer_add_special(tok, id, true) != TFM_OK) return TFM_FAILED;
  }
  tok->specials.unk = tfm_tokenizer_vocab_find(&tok->vocab, unk, strlen(unk));
  return TFM_OK;
}

static int json_flag(const json_value *object, const char *key, bool *value, const char *path,
                     const char *where) {
  const json_value *f = tfm_tokenizer_json_get(object, key);
  if (!f) return TFM_OK;
  if (f->kind != JSON_TRUE && f->kind != JSON_FALSE)
    return tfm_fail("%s: %s.%s is not true or false", path, where, key);
  *value = f->kind == JSON_TRUE;
  return TFM_OK;
}

static int json_prefix(const json_value *object, const char *key, char *prefix, size_t *length,
                       const char *path, const char *where) {
  const json_value *p = tfm_tokenizer_json_get(object, key);
  if (!p) return TFM_OK;
  if (p->kind != JSON_STRING || strlen(p->string) >= 32)
    return tfm_fail("%s: %s.%s is not a string of under 32 bytes", path, where, key);
  strcpy(prefix, p->string);
  *length = strlen(prefix);
  return TFM_OK;
}

int tfm_tokenizer_wordpiece_from_json(tfm_tokenizer *tok, const char *path,
                                      const json_value *root) {
  if (new_wordpiece(tok) != TFM_OK) return TFM_FAILED;
  tfm_tokenizer_wordpiece *wp = tok->wordpiece;
  const json_value *model = tfm_tokenizer_json_get(root, "model");
  const json_value *norm = tfm_tokenizer_json_get(root, "normalizer");
  const json_value *norm_type = tfm_tokenizer_json_get(norm, "type");
  if (!norm || norm->kind == JSON_NULL) {
    wp->normalize = false;
  } else if (!norm_type || norm_type->kind != JSON_STRING ||
             strcmp(norm_type->string, "BertNormalizer") != 0) {
    return tfm_fail("%s: a WordPiece normalizer must be null or of type \"BertNormalizer\"", path);
  } else {
    const json_value *strip = tfm_tokenizer_json_get(norm, "strip_accents");
    if (json_flag(norm, "clean_text", &wp->clean_text, path, "normalizer") != TFM_OK ||
        json_flag(norm, "handle_chinese_chars", &wp->chinese, path, "normalizer") != TFM_OK ||
        json_flag(norm, "lowercase", &wp->lowercase, path, "normalizer") != TFM_OK)
      return TFM_FAILED;
    wp->strip_accents = wp->lowercase; /* null: as lowercase */
    if (strip && strip->kind != JSON_NULL &&
        json_flag(norm, "strip_accents", &wp->strip_accents, path, "normalizer") != TFM_OK)
      return TFM_FAILED;
  }
  const json_value *pre = tfm_tokenizer_json_get(root, "pre_tokenizer");
  const json_value *pre_type = tfm_tokenizer_json_get(pre, "type");
  if (!pre_type || pre_type->kind != JSON_STRING || strcmp(pre_type->string, "BertPreTokenizer") != 0)
    return tfm_fail("%s: a WordPiece pre_tokenizer must be of type \"BertPreTokenizer\"", path);
  const json_value *unk = tfm_tokenizer_json_get(model, "unk_token");
  if (!unk || unk->kind != JSON_STRING) return tfm_fail("%s: model.unk_token is not a string", path);
  if (json_prefix(model, "continuing_subword_prefix", wp->prefix, &wp->prefix_length, path,
                  "model") != TFM_OK)
    return TFM_FAILED;
  const json_value *max = tfm_tokenizer_json_get(model, "max_input_chars_per_word");
  if (max && (max->kind != JSON_NUMBER || !max->is_uint))
    return tfm_fail("%s: model.max_input_chars_per_word is not a count", path);
  if (max) wp->max_chars = (size_t)max->uint;
  if (tfm_tokenizer_read_vocab(tok, path, tfm_tokenizer_json_get(model, "vocab"),
                               tfm_tokenizer_added_count(root)) != TFM_OK)
    return TFM_FAILED;
  if (tfm_tokenizer_load_added(tok, path, root) != TFM_OK) return TFM_FAILED;
  if (tfm_tokenizer_vocab_check_dense(&tok->vocab) != TFM_OK)
    return tfm_tokenizer_fail_at(path);
  const json_value *decoder = tfm_tokenizer_json_get(root, "decoder");
  const json_value *decoder_type = tfm_tokenizer_json_get(decoder, "type");
  if (!decoder || decoder->kind == JSON_NULL) {
    wp->join_decode = false;
  } else if (!decoder_type || decoder_type->kind != JSON_STRING ||
             strcmp(decoder_type->string, "WordPiece") != 0) {
    return tfm_fail("%s: a WordPiece decoder must be null or of type \"WordPiece\"", path);
  } else if (json_prefix(decoder, "prefix", wp->decode_prefix, &wp->decode_prefix_length, path,
                         "decoder") != TFM_OK ||
             json_flag(decoder, "cleanup", &wp->cleanup, path, "decoder") != TFM_OK) {
    return TFM_FAILED;
  }
  if (bert_specials(tok, unk->string, false) != TFM_OK) return TFM_FAILED;
  if (tok->specials.unk < 0)
    return tfm_fail("%s: model.unk_token \"%s\" is not in the vocabulary", path, unk->string);
  return TFM_OK;
}

/* One token a line, the line number (from 1) less one its id. A vocabulary
 * with an upper-case letter in a token other than a [SPECIAL] one is cased
 * (no lower case, no accents stripped); otherwise uncased. */
int tfm_tokenizer_wordpiece_from_txt(tfm_tokenizer *tok, const char *path) {
  if (new_wordpiece(tok) != TFM_OK) return TFM_FAILED;
  char *text;
  size_t size;
  if (tfm_tokenizer_read_file(path, &text, &size) != TFM_OK) return TFM_FAILED;
  if (!json_is_utf8(text, size)) {
    free(text);
    return tfm_fail("%s: not UTF-8 text", path);
  }
  bool cased = false;
  size_t line = 0;
  int status = TFM_OK;
  for (size_t i = 0; i < size && status == TFM_OK;) {
    char *end = memchr(text + i, '\n', size - i);
    size_t n = end ? (size_t)(end - (text + i)) : size - i;
    const char *s = text + i;
    i += n + 1;
    line++;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\t')) n--;
    if (!n) {
      status = tfm_fail("%s:%zu: an empty token", path, line);
      break;
    }
    if (memchr(s, 0, n)) {
      status = tfm_fail("%s:%zu: a NUL byte in a token", path, line);
      break;
    }
    if (tfm_tokenizer_vocab_set(&tok->vocab, (int32_t)(line - 1), s, n) != TFM_OK) {
      char where[4200];
      snprintf(where, sizeof where, "%s:%zu", path, line);
      status = tfm_tokenizer_fail_at(where);
      break;
    }
    if (!(s[0] == '[' && s[n - 1] == ']'))
      for (size_t k = 0; k < n && !cased;) {
        size_t m;
        cased = tfm_tokenizer_is_upper(tfm_tokenizer_utf8_next(s + k, n - k, &m));
        k += m;
      }
  }
  free(text);
  if (status != TFM_OK) return TFM_FAILED;
  if (!line) return tfm_fail("%s: no tokens", path);
  tok->wordpiece->lowercase = tok->wordpiece->strip_accents = !cased;
  if (bert_specials(tok, "[UNK]", true) != TFM_OK) return TFM_FAILED;
  if (tok->specials.unk < 0) return tfm_fail("%s: no [UNK] token", path);
  return TFM_OK;
}

/* --- encoding ---------------------------------------------------------------------- */

static bool is_chinese(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool is_bert_space(int32_t c) {
  return c == '\t' || c == '\n' || c == '\r' || tfm_tokenizer_is_space(c);
}

static bool is_bert_punctuation(int32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126) || tfm_tokenizer_is_punctuation(c);
}

/* The BERT normalizer over text into wp->cps. */
static int normalize(tfm_tokenizer_wordpiece *wp, const char *text, size_t size) {
  tfm_tokenizer_ids *cps = &wp->cps;
  cps->count = 0;
  for (size_t i = 0; i < size;) {
    size_t n;
    int32_t c = tfm_tokenizer_utf8_next(text + i, size - i, &n);
    i += n;
    if (c < 0) c = 0xFFFD; /* as a lossy UTF-8 decode */
    if (wp->normalize && wp->clean_text) {
      if (c == 0 || c == 0xFFFD ||
          (c != '\t' && c != '\n' && c != '\r' && tfm_tokenizer_is_other(c)))
        continue;
      if (is_bert_space(c)) c = ' ';
    }
    if (wp->normalize && wp->chinese && is_chinese(c)) {
      if (tfm_tokenizer_ids_push(cps, ' ') != TFM_OK || tfm_tokenizer_ids_push(cps, c) != TFM_OK)
        return TFM_FAILED;
      c = ' ';
    }
    if (tfm_tokenizer_ids_push(cps, c) != TFM_OK) return TFM_FAILED;
  }
  if (!wp->normalize) return TFM_OK;
  if (wp->strip_accents) {
    wp->nfd.count = 0;
    for (size_t i = 0; i < cps->count; i++)
      if (tfm_tokenizer_decompose(cps->ids[i], &wp->nfd) != TFM_OK) return TFM_FAILED;
    tfm_tokenizer_canonical_order(wp->nfd.ids, wp->nfd.count);
    cps->count = 0;
    for (size_t i = 0; i < wp->nfd.count; i++)
      if (!tfm_tokenizer_is_nonspacing_mark(wp->nfd.ids[i]) &&
          tfm_tokenizer_ids_push(cps, wp->nfd.ids[i]) != TFM_OK)
        return TFM_FAILED;
  }
  if (wp->lowercase) {
    wp->nfd.count = 0; /* İ lower-cases to two characters */
    for (size_t i = 0; i < cps->count; i++) {
      int32_t c = cps->ids[i];
      if (c == 0x130) {
        if (tfm_tokenizer_ids_push(&wp->nfd, 'i') != TFM_OK ||
            tfm_tokenizer_ids_push(&wp->nfd, 0x307) != TFM_OK)
          return TFM_FAILED;
      } else if (tfm_tokenizer_ids_push(&wp->nfd, tfm_tokenizer_lower(c)) != TFM_OK) {
        return TFM_FAILED;
      }
    }
    tfm_tokenizer_ids swap = *cps;
    *cps = wp->nfd;
    wp->nfd = swap;
  }
  return TFM_OK;
}

/* Greedy longest-match-first pieces of one word (wp->word). */
static int encode_word(tfm_tokenizer *tok, size_t chars, tfm_tokenizer_ids *ids) {
  tfm_tokenizer_wordpiece *wp = tok->wordpiece;
  const char *w = wp->word.bytes;
  size_t n = wp->word.size;
  if (chars > wp->max_chars) return tfm_tokenizer_ids_push(ids, tok->specials.unk);
  size_t first = ids->count, start = 0;
  char buffer[1024];
  while (start < n) {
    size_t end = n;
    int32_t found = -1;
    while (start < end) {
      const char *piece = w + start;
      size_t length = end - start;
      if (start > 0) {
        if (wp->prefix_length + length > sizeof buffer) {
          found = -1;
        } else {
          memcpy(buffer, wp->prefix, wp->prefix_length);
          memcpy(buffer + wp->prefix_length, piece, length);
          found = tfm_tokenizer_vocab_find(&tok->vocab, buffer, wp->prefix_length + length);
        }
      } else {
        found = tfm_tokenizer_vocab_find(&tok->vocab, piece, length);
      }
      if (found >= 0) break;
      do end--; /* back one character */
      while (end > start && (w[end] & 0xC0) == 0x80);
    }
    if (found < 0) {
      ids->count = first;
      return tfm_tokenizer_ids_push(ids, tok->specials.unk);
    }
    if (tfm_tokenizer_ids_push(ids, found) != TFM_OK) return TFM_FAILED;
    start = end;
  }
  return TFM_OK;
}

static int flush_word(tfm_tokenizer *tok, size_t *chars, tfm_tokenizer_ids *ids) {
  tfm_tokenizer_wordpiece *wp = tok->wordpiece;
  int status = TFM_OK;
  if (*chars) status = encode_word(tok, *chars, ids);
  wp->word.size = 0;
  *chars = 0;
  return status;
}

int tfm_tokenizer_wordpiece_encode(tfm_tokenizer *tok, const char *text, size_t size,
                                   tfm_tokenizer_ids *ids) {
  tfm_tokenizer_wordpiece *wp = tok->wordpiece;
  if (normalize(wp, text, size) != TFM_OK) return TFM_FAILED;
  wp->word.size = 0;
  size_t chars = 0;
  for (size_t i = 0; i < wp->cps.count; i++) {
    int32_t c = wp->cps.ids[i];
    if (is_bert_space(c)) {
      if (flush_word(tok, &chars, ids) != TFM_OK) return TFM_FAILED;
      continue;
    }
    bool alone = is_bert_punctuation(c);
    if (alone && flush_word(tok, &chars, ids) != TFM_OK) return TFM_FAILED;
    char utf8[4];
    size_t n = tfm_tokenizer_utf8_put(c, utf8);
    if (tfm_tokenizer_text_add(&wp->word, utf8, n) != TFM_OK) return TFM_FAILED;
    chars++;
    if (alone && flush_word(tok, &chars, ids) != TFM_OK) return TFM_FAILED;
  }
  return flush_word(tok, &chars, ids);
}

/* --- decoding ---------------------------------------------------------------------- */

/* The decoder's clean-up, on each token with its leading space. */
static int cleanup_add(tfm_tokenizer_text *out, const char *s, size_t n) {
  static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not",
                                     " 's", " 've", " 're"};
  static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", " don't", "'s", "'ve",
                                   "'re"};
  tfm_tokenizer_text a = {0}, b = {0};
  if (tfm_tokenizer_text_add(&a, s, n) != TFM_OK) return TFM_FAILED;
  for (size_t r = 0; r < sizeof from / sizeof *from; r++) {
    size_t m = strlen(from[r]);
    b.size = 0;
    if (tfm_tokenizer_text_add(&b, "", 0) != TFM_OK) break;
    for (size_t i = 0; i < a.size;) {
      if (i + m <= a.size && memcmp(a.bytes + i, from[r], m) == 0) {
        if (tfm_tokenizer_text_add(&b, to[r], strlen(to[r])) != TFM_OK) break;
        i += m;
      } else {
        if (tfm_tokenizer_text_add(&b, a.bytes + i, 1) != TFM_OK) break;
        i++;
      }
    }
    tfm_tokenizer_text swap = a;
    a = b;
    b = swap;
  }
  int status = tfm_tokenizer_text_add(out, a.bytes, a.size);
  free(a.bytes);
  free(b.bytes);
  return status;
}

int tfm_tokenizer_wordpiece_decode(tfm_tokenizer *tok, const int32_t *ids, size_t count,
                                   tfm_tokenizer_text *out) {
  tfm_tokenizer_wordpiece *wp = tok->wordpiece;
  tfm_tokenizer_text piece = {0};
  int status = TFM_OK;
  for (size_t i = 0; i < count && status == TFM_OK; i++) {
    const char *t = tok->vocab.tokens[ids[i]];
    size_t n = tok->vocab.lengths[ids[i]];
    piece.size = 0;
    if (!wp->join_decode) {
      if (i) status = tfm_tokenizer_text_add(out, " ", 1);
      if (status == TFM_OK) status = tfm_tokenizer_text_add(out, t, n);
      continue;
    }
    if (i && n >= wp->decode_prefix_length &&
        memcmp(t, wp->decode_prefix, wp->decode_prefix_length) == 0) {
      t += wp->decode_prefix_length;
      n -= wp->decode_prefix_length;
    } else if (i) {
      status = tfm_tokenizer_text_add(&piece, " ", 1);
    }
    if (status == TFM_OK) status = tfm_tokenizer_text_add(&piece, t, n);
    if (status == TFM_OK)
      status = wp->cleanup ? cleanup_add(out, piece.bytes, piece.size)
                           : tfm_tokenizer_text_add(out, piece.bytes, piece.size);
  }
  free(piece.bytes);
  return status;
}
