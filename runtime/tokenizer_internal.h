/* What the tokenizer files share (tokenizer.c, tokenizer_vocab.c,
 * tokenizer_unicode.c, tokenizer_bpe.c, tokenizer_wordpiece.c,
 * tokenizer_train.c, tokenizer_sentencepiece.cc). Not a public header. */
#ifndef TFMRT_TOKENIZER_INTERNAL_H
#define TFMRT_TOKENIZER_INTERNAL_H

#include "tokenizer.h"

#include <stdbool.h>
#include <stdint.h>

#include "json.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- the vocabulary: id <-> token bytes (tokenizer_vocab.c) --------------- */
typedef struct {
  size_t count, capacity;
  char **tokens;      /* id -> NUL-terminated bytes; NULL for an id not given */
  uint32_t *lengths;
  int32_t *slots;     /* open addressing: id + 1, 0 empty */
  size_t slot_count;  /* a power of two */
} tfm_tokenizer_vocab;

/* Sets token `id` (growing the table); refuses an id given twice and a
 * token given twice (the message names them; the caller adds the file). */
int tfm_tokenizer_vocab_set(tfm_tokenizer_vocab *vocab, int32_t id, const char *token,
                            size_t length);
int32_t tfm_tokenizer_vocab_find(const tfm_tokenizer_vocab *vocab, const char *token,
                                 size_t length);
/* Refuses ids left out below the largest one. */
int tfm_tokenizer_vocab_check_dense(const tfm_tokenizer_vocab *vocab);
void tfm_tokenizer_vocab_free(tfm_tokenizer_vocab *vocab);
uint64_t tfm_tokenizer_hash(const void *bytes, size_t length, uint64_t seed);

/* Makes room for needed items of size bytes in *items (of *capacity),
 * doubling from first. */
int tfm_tokenizer_grow(void **items, size_t *capacity, size_t needed, size_t size, size_t first);

/* A growable byte string. */
typedef struct {
  char *bytes;
  size_t size, capacity;
} tfm_tokenizer_text;
int tfm_tokenizer_text_add(tfm_tokenizer_text *text, const void *bytes, size_t size);

/* --- Unicode (tokenizer_unicode.c, through utf8proc) ---------------------- */
/* Decodes one character at text[0..size) (size > 0): its code point and
 * byte count; a byte that does not start well-formed UTF-8 is one
 * "character" of code point -1. */
int32_t tfm_tokenizer_utf8_next(const char *text, size_t size, size_t *length);
size_t tfm_tokenizer_utf8_put(int32_t cp, char out[4]);
bool tfm_tokenizer_is_letter(int32_t cp);      /* \p{L} */
bool tfm_tokenizer_is_number(int32_t cp);      /* \p{N} */
bool tfm_tokenizer_is_space(int32_t cp);       /* \s: White_Space */
bool tfm_tokenizer_is_other(int32_t cp);       /* \p{C} */
bool tfm_tokenizer_is_punctuation(int32_t cp); /* \p{P} */
bool tfm_tokenizer_is_nonspacing_mark(int32_t cp); /* Mn */
bool tfm_tokenizer_is_upper(int32_t cp);
int32_t tfm_tokenizer_lower(int32_t cp);
/* Appends the full canonical decomposition of cp to out (code points). */
int tfm_tokenizer_decompose(int32_t cp, tfm_tokenizer_ids *out);
/* Puts runs of combining marks in canonical order (the last step of NFD). */
void tfm_tokenizer_canonical_order(int32_t *cps, size_t count);

/* --- the kinds ------------------------------------------------------------ */
typedef struct tfm_tokenizer_bpe tfm_tokenizer_bpe;
typedef struct tfm_tokenizer_wordpiece tfm_tokenizer_wordpiece;
typedef struct tfm_tokenizer_sp tfm_tokenizer_sp;

typedef struct {
  int32_t id;
  bool special;
} tfm_tokenizer_added;

struct tfm_tokenizer {
  tfm_tokenizer_kind kind;
  tfm_tokenizer_vocab vocab;      /* BPE and WordPiece (SentencePiece keeps its own) */
  tfm_tokenizer_specials specials;
  tfm_tokenizer_added *added;     /* matched in the text before the model */
  size_t added_count;
  unsigned char added_first[32];  /* bit set: the first bytes of added tokens */
  unsigned char *special;         /* id -> whether decode leaves it out */
  tfm_tokenizer_bpe *bpe;
  tfm_tokenizer_wordpiece *wordpiece;
  tfm_tokenizer_sp *sp;
};

/* Fails with "WHERE: " before the last error (tfm_error()), copied first
 * (tfm_fail writes the buffer tfm_error reads). */
int tfm_tokenizer_fail_at(const char *where);
/* tfm_tokenizer_load of a tokenizer.json's text (name: for messages); the
 * fuzz target's way in. */
int tfm_tokenizer_load_json_text(const char *name, const char *text, size_t size,
                                 tfm_tokenizer **tok);
/* Reads a whole file; "PATH: reason" on failure. */
int tfm_tokenizer_read_file(const char *path, char **bytes, size_t *size);
/* A member of a JSON object; NULL when absent. */
const json_value *tfm_tokenizer_json_get(const json_value *object, const char *key);
/* {"token": id, ...} (vocab.json, model.vocab) into tok's vocabulary; ids
 * up to extra past the member count are allowed (added tokens fill them). */
int tfm_tokenizer_read_vocab(tfm_tokenizer *tok, const char *path, const json_value *vocab,
                             size_t extra);
/* How many "added_tokens" a tokenizer.json has (their ids may fill gaps in
 * the model's vocabulary). */
size_t tfm_tokenizer_added_count(const json_value *root);
/* Reads tokenizer.json's "added_tokens" (may be absent) into tok. */
int tfm_tokenizer_load_added(tfm_tokenizer *tok, const char *path, const json_value *root);
int tfm_tokenizer_add_special(tfm_tokenizer *tok, int32_t id, bool special);

/* tokenizer_bpe.c */
int tfm_tokenizer_bpe_from_json(tfm_tokenizer *tok, const char *path, const json_value *root);
int tfm_tokenizer_bpe_from_files(tfm_tokenizer *tok, const char *vocab_path,
                                 const char *merges_path);
int tfm_tokenizer_bpe_encode(tfm_tokenizer *tok, const char *text, size_t size,
                             tfm_tokenizer_ids *ids);
int tfm_tokenizer_bpe_decode(tfm_tokenizer *tok, const int32_t *ids, size_t count,
                             tfm_tokenizer_text *out);
void tfm_tokenizer_bpe_free(tfm_tokenizer_bpe *bpe);
/* GPT-2's byte <-> printable character map. */
int32_t tfm_tokenizer_byte_char(unsigned char byte);
/* The next GPT-2 pre-token of text[0..size) (size > 0): its byte count. */
size_t tfm_tokenizer_gpt2_split(const char *text, size_t size);

/* tokenizer_wordpiece.c */
int tfm_tokenizer_wordpiece_from_json(tfm_tokenizer *tok, const char *path,
                                      const json_value *root);
int tfm_tokenizer_wordpiece_from_txt(tfm_tokenizer *tok, const char *path);
int tfm_tokenizer_wordpiece_encode(tfm_tokenizer *tok, const char *text, size_t size,
                                   tfm_tokenizer_ids *ids);
int tfm_tokenizer_wordpiece_decode(tfm_tokenizer *tok, const int32_t *ids, size_t count,
                                   tfm_tokenizer_text *out);
void tfm_tokenizer_wordpiece_free(tfm_tokenizer_wordpiece *wordpiece);

/* tokenizer_sentencepiece.cc (or tokenizer_sentencepiece_none.c). The
 * shim reports failures as a message in error; the caller calls tfm_fail. */
int tfm_tokenizer_sp_load(const char *path, tfm_tokenizer_sp **sp, char *error,
                          size_t error_size);
int tfm_tokenizer_sp_encode(tfm_tokenizer_sp *sp, const char *text, size_t size,
                            tfm_tokenizer_ids *ids, char *error, size_t error_size);
int tfm_tokenizer_sp_decode(tfm_tokenizer_sp *sp, const int32_t *ids, size_t count,
                            tfm_tokenizer_text *out, char *error, size_t error_size);
size_t tfm_tokenizer_sp_size(const tfm_tokenizer_sp *sp);
const char *tfm_tokenizer_sp_token(const tfm_tokenizer_sp *sp, int32_t id, size_t *length);
int32_t tfm_tokenizer_sp_id(const tfm_tokenizer_sp *sp, const char *token, size_t length);
tfm_tokenizer_specials tfm_tokenizer_sp_specials(const tfm_tokenizer_sp *sp);
void tfm_tokenizer_sp_free(tfm_tokenizer_sp *sp);

#ifdef __cplusplus
}
#endif

#endif
