/* Tokenizers the field uses, behind one interface: GPT-2 byte-level BPE,
 * BERT WordPiece and SentencePiece (through libsentencepiece), loaded from
 * the files those projects write (docs/data.md, "Tokenizers").
 *
 * Every function that can fail returns TFM_OK or TFM_FAILED with the reason
 * in tfm_error(), "FILE: reason" for a file that cannot be used; nothing
 * guesses what a malformed file meant. Encode and decode keep a cache and
 * scratch space in the tokenizer: one thread at a time per tokenizer (load
 * one per thread to encode in parallel). */
#ifndef TFMRT_TOKENIZER_H
#define TFMRT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  TFM_TOKENIZER_BPE,           /* byte-level BPE as GPT-2 and Hugging Face */
  TFM_TOKENIZER_WORDPIECE,     /* BERT: basic tokenizer, then WordPiece */
  TFM_TOKENIZER_SENTENCEPIECE, /* a SentencePiece .model (bpe or unigram) */
} tfm_tokenizer_kind;

typedef struct tfm_tokenizer tfm_tokenizer;

/* Ids the format defines; -1 where it defines none. */
typedef struct {
  int32_t bos, eos, pad, unk;
} tfm_tokenizer_specials;

/* A growable list of ids; zero-initialise, tfm_tokenizer_ids_free at the end. */
typedef struct {
  int32_t *ids;
  size_t count, capacity;
} tfm_tokenizer_ids;

/* Loads a tokenizer, its kind told by the file:
 *   - a Hugging Face tokenizer.json: model "BPE" with a ByteLevel
 *     pre-tokenizer, or model "WordPiece" with the BERT normalizer;
 *   - GPT-2's vocab.json + merges.txt (the path of either, or of a folder);
 *   - a BERT vocab.txt (uncased unless a token has an upper-case letter);
 *   - a SentencePiece .model;
 *   - a folder holding one of these (tokenizer.json first).
 * On failure *tok is NULL. */
int tfm_tokenizer_load(const char *path, tfm_tokenizer **tok);
void tfm_tokenizer_free(tfm_tokenizer *tok);

tfm_tokenizer_kind tfm_tokenizer_kind_of(const tfm_tokenizer *tok);
const char *tfm_tokenizer_kind_name(tfm_tokenizer_kind kind); /* "bpe", ... */
size_t tfm_tokenizer_vocab_size(const tfm_tokenizer *tok);
tfm_tokenizer_specials tfm_tokenizer_special_ids(const tfm_tokenizer *tok);

/* Appends the ids of text (any bytes; size bytes, no NUL needed) to ids.
 * No special tokens are added around it (no [CLS]/[SEP], no <s>): what
 * Hugging Face's encode(text, add_special_tokens=False) gives. */
int tfm_tokenizer_encode(tfm_tokenizer *tok, const char *text, size_t size,
                         tfm_tokenizer_ids *ids);

/* The text of ids, malloc'd and NUL-terminated in *text, its length in
 * *size. Special tokens are left out (as Hugging Face's default decode);
 * WordPiece joins "##" pieces and cleans up spaces before punctuation. */
int tfm_tokenizer_decode(tfm_tokenizer *tok, const int32_t *ids, size_t count,
                         char **text, size_t *size);

/* The token of id as the vocabulary spells it ("Ġthe", "##ing", "▁the"),
 * NUL-terminated, its byte count in *length (optional); NULL when id is
 * out of range. */
const char *tfm_tokenizer_token(const tfm_tokenizer *tok, int32_t id, size_t *length);
/* The id of a token in the vocabulary's spelling; -1 when absent. */
int32_t tfm_tokenizer_id(const tfm_tokenizer *tok, const char *token, size_t length);

int tfm_tokenizer_ids_push(tfm_tokenizer_ids *ids, int32_t id);
void tfm_tokenizer_ids_free(tfm_tokenizer_ids *ids);

/* Trains a GPT-2 style byte-level BPE tokenizer on the text of the files
 * (their lines, pre-tokenised as GPT-2) until it has vocab_size tokens (the
 * 256 bytes, then one per merge; fewer when no pair occurs twice) and writes it
 * as a Hugging Face tokenizer.json to out_path, with "<|endoftext|>" as its
 * one special token (the last id). */
int tfm_tokenizer_train_bpe(const char *const *files, size_t file_count, size_t vocab_size,
                            const char *out_path);

#ifdef __cplusplus
}
#endif

#endif
