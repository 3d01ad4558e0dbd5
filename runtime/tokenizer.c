/* The one tokenizer interface (tokenizer.h): which kind a file is, added
 * tokens matched before the model, and dispatch to the kinds
 * (tokenizer_bpe.c, tokenizer_wordpiece.c, tokenizer_sentencepiece.cc). */
#define _POSIX_C_SOURCE 200809L /* stat */
#include "tokenizer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tfmrt.h"

const char *tfm_tokenizer_kind_name(tfm_tokenizer_kind kind) {
  switch (kind) {
  case TFM_TOKENIZER_BPE: return "bpe";
  case TFM_TOKENIZER_WORDPIECE: return "wordpiece";
  case TFM_TOKENIZER_SENTENCEPIECE: return "sentencepiece";
  }
  return "?";
}

tfm_tokenizer_kind tfm_tokenizer_kind_of(const tfm_tokenizer *tok) { return tok->kind; }
tfm_tokenizer_specials tfm_tokenizer_special_ids(const tfm_tokenizer *tok) {
  return tok->specials;
}

size_t tfm_tokenizer_vocab_size(const tfm_tokenizer *tok) {
  return tok->sp ? tfm_tokenizer_sp_size(tok->sp) : tok->vocab.count;
}

const char *tfm_tokenizer_token(const tfm_tokenizer *tok, int32_t id, size_t *length) {
  if (tok->sp) return tfm_tokenizer_sp_token(tok->sp, id, length);
  if (id < 0 || (size_t)id >= tok->vocab.count || !tok->vocab.tokens[id]) return NULL;
  if (length) *length = tok->vocab.lengths[id];
  return tok->vocab.tokens[id];
}

int32_t tfm_tokenizer_id(const tfm_tokenizer *tok, const char *token, size_t length) {
  if (tok->sp) return tfm_tokenizer_sp_id(tok->sp, token, length);
  return tfm_tokenizer_vocab_find(&tok->vocab, token, length);
}

void tfm_tokenizer_free(tfm_tokenizer *tok) {
  if (!tok) return;
  tfm_tokenizer_vocab_free(&tok->vocab);
  free(tok->added);
  free(tok->special);
  tfm_tokenizer_bpe_free(tok->bpe);
  tfm_tokenizer_wordpiece_free(tok->wordpiece);
  tfm_tokenizer_sp_free(tok->sp);
  free(tok);
}

/* --- added tokens ---------------------------------------------------------- */

int tfm_tokenizer_add_special(tfm_tokenizer *tok, int32_t id, bool special) {
  for (size_t i = 0; i < tok->added_count; i++)
    if (tok->added[i].id == id) {
      tok->added[i].special |= special;
      return TFM_OK;
    }
  tfm_tokenizer_added *grown = realloc(tok->added, (tok->added_count + 1) * sizeof *grown);
  if (!grown) return tfm_fail("out of memory");
  tok->added = grown;
  tok->added[tok->added_count++] = (tfm_tokenizer_added){id, special};
  return TFM_OK;
}

/* The first bytes of the added tokens, once the vocabulary is complete. */
static void mark_added_first(tfm_tokenizer *tok) {
  memset(tok->added_first, 0, sizeof tok->added_first);
  for (size_t i = 0; i < tok->added_count; i++) {
    unsigned char b = (unsigned char)tok->vocab.tokens[tok->added[i].id][0];
    tok->added_first[b >> 3] |= (unsigned char)(1u << (b & 7));
  }
}

int tfm_tokenizer_read_vocab(tfm_tokenizer *tok, const char *path, const json_value *vocab,
                             size_t extra) {
  if (!vocab || vocab->kind != JSON_OBJECT)
    return tfm_fail("%s: the vocabulary is not an object of token: id", path);
  for (const json_value *v = vocab->first_child; v; v = v->next) {
    if (v->kind != JSON_NUMBER || !v->is_uint)
      return tfm_fail("%s: the id of token \"%s\" is not a token id", path, v->key);
    if (v->uint >= vocab->child_count + extra) /* the ids are 0 to count - 1 */
      return tfm_fail("%s: token \"%s\" has id %llu, past the vocabulary's %zu tokens", path,
                      v->key, (unsigned long long)v->uint, vocab->child_count + extra);
    if (tfm_tokenizer_vocab_set(&tok->vocab, (int32_t)v->uint, v->key, strlen(v->key)) != TFM_OK)
      return tfm_tokenizer_fail_at(path);
  }
  return TFM_OK;
}

size_t tfm_tokenizer_added_count(const json_value *root) {
  const json_value *added = tfm_tokenizer_json_get(root, "added_tokens");
  return added && added->kind == JSON_ARRAY ? added->child_count : 0;
}

/* "added_tokens": [{"id": N, "content": "...", "special": bool, ...}]. The
 * content must be the vocabulary's token of that id, or a new id past it. */
int tfm_tokenizer_load_added(tfm_tokenizer *tok, const char *path, const json_value *root) {
  const json_value *added = tfm_tokenizer_json_get(root, "added_tokens");
  if (!added || added->kind == JSON_NULL) return TFM_OK;
  if (added->kind != JSON_ARRAY) return tfm_fail("%s: \"added_tokens\" is not an array", path);
  size_t index = 0;
  for (const json_value *a = added->first_child; a; a = a->next, index++) {
    const json_value *id = tfm_tokenizer_json_get(a, "id");
    const json_value *content = tfm_tokenizer_json_get(a, "content");
    const json_value *special = tfm_tokenizer_json_get(a, "special");
    if (!id || id->kind != JSON_NUMBER || !id->is_uint ||
        id->uint >= tok->vocab.count + added->child_count)
      return tfm_fail("%s: added_tokens[%zu]: \"id\" is not a token id (from 0 to %zu)", path,
                      index, tok->vocab.count + added->child_count - 1);
    if (!content || content->kind != JSON_STRING || !content->string[0])
      return tfm_fail("%s: added_tokens[%zu]: \"content\" is not a non-empty string", path, index);
    if (special && special->kind != JSON_TRUE && special->kind != JSON_FALSE)
      return tfm_fail("%s: added_tokens[%zu]: \"special\" is not true or false", path, index);
    int32_t want = (int32_t)id->uint;
    size_t length = strlen(content->string);
    int32_t have = tfm_tokenizer_vocab_find(&tok->vocab, content->string, length);
    if (have >= 0 && have != want)
      return tfm_fail("%s: added_tokens[%zu]: \"%s\" is id %ld in the vocabulary, not %ld", path,
                      index, content->string, (long)have, (long)want);
    if (have < 0 && tfm_tokenizer_vocab_set(&tok->vocab, want, content->string, length) != TFM_OK)
      {
      char where[4200];
      snprintf(where, sizeof where, "%s: added_tokens[%zu]", path, index);
      return tfm_tokenizer_fail_at(where);
    }
    if (tfm_tokenizer_add_special(tok, want, special && special->kind == JSON_TRUE) != TFM_OK)
      return tfm_tokenizer_fail_at(path);
  }
  return TFM_OK;
}

/* Marks the special ids for decode, once the vocabulary is complete. */
static int mark_specials(tfm_tokenizer *tok) {
  size_t n = tfm_tokenizer_vocab_size(tok);
  tok->special = calloc(n ? n : 1, 1);
  if (!tok->special) return tfm_fail("out of memory");
  for (size_t i = 0; i < tok->added_count; i++)
    if (tok->added[i].special && (size_t)tok->added[i].id < n) tok->special[tok->added[i].id] = 1;
  return TFM_OK;
}

/* --- which kind of file ------------------------------------------------------ */

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* folder + "/" + name into buffer (the folder of a file path: dir = 1). */
static int beside(char *buffer, size_t size, const char *path, bool dir, const char *name) {
  size_t keep = strlen(path);
  if (dir) {
    const char *slash = strrchr(path, '/');
    keep = slash ? (size_t)(slash - path) : 0;
    if (!slash)
      return snprintf(buffer, size, "%s", name) < (int)size ? TFM_OK
                                                            : tfm_fail("%s: path too long", path);
  }
  int n = snprintf(buffer, size, "%.*s/%s", (int)keep, path, name);
  return n >= 0 && (size_t)n < size ? TFM_OK : tfm_fail("%s: path too long", path);
}

static int parse_json(tfm_tokenizer *tok, const char *path, const char *text, size_t size) {
  json_value *root = NULL;
  char error[256];
  if (json_parse(text, size, &root, error, sizeof error) != 0)
    return tfm_fail("%s: not valid JSON: %s", path, error);
  int status = TFM_OK;
  const json_value *model = tfm_tokenizer_json_get(root, "model");
  const json_value *type = tfm_tokenizer_json_get(model, "type");
  if (root->kind != JSON_OBJECT)
    status = tfm_fail("%s: not a tokenizer.json (the top is not an object)", path);
  else if (!model)
    status = tfm_fail("%s: not a tokenizer.json (no \"model\"); GPT-2's vocab.json needs "
                      "merges.txt beside it", path);
  else if (model->kind != JSON_OBJECT || !type || type->kind != JSON_STRING)
    status = tfm_fail("%s: \"model\" is not an object with a string \"type\"", path);
  else if (strcmp(type->string, "BPE") == 0)
    status = tfm_tokenizer_bpe_from_json(tok, path, root);
  else if (strcmp(type->string, "WordPiece") == 0)
    status = tfm_tokenizer_wordpiece_from_json(tok, path, root);
  else
    status = tfm_fail("%s: model type \"%s\" is not supported (BPE or WordPiece)", path,
                      type->string);
  json_free(root);
  return status;
}

static int load_json(tfm_tokenizer *tok, const char *path) {
  char *text;
  size_t size;
  if (tfm_tokenizer_read_file(path, &text, &size) != TFM_OK) return TFM_FAILED;
  int status = parse_json(tok, path, text, size);
  free(text);
  return status;
}

static int load_sentencepiece(tfm_tokenizer *tok, const char *path) {
  char error[512];
  tok->kind = TFM_TOKENIZER_SENTENCEPIECE;
  if (tfm_tokenizer_sp_load(path, &tok->sp, error, sizeof error) != 0)
    return tfm_fail("%s: %s", path, error);
  tok->specials = tfm_tokenizer_sp_specials(tok->sp);
  return TFM_OK;
}

static int load_path(tfm_tokenizer *tok, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return tfm_fail("%s: %s", path, strerror(errno));
  char a[4096], b[4096];
  if (S_ISDIR(st.st_mode)) {
    if (beside(a, sizeof a, path, false, "tokenizer.json") != TFM_OK) return TFM_FAILED;
    if (is_file(a)) return load_json(tok, a);
    if (beside(a, sizeof a, path, false, "vocab.json") != TFM_OK ||
        beside(b, sizeof b, path, false, "merges.txt") != TFM_OK)
      return TFM_FAILED;
    if (is_file(a) && is_file(b)) return tfm_tokenizer_bpe_from_files(tok, a, b);
    if (beside(a, sizeof a, path, false, "vocab.txt") != TFM_OK) return TFM_FAILED;
    if (is_file(a)) return tfm_tokenizer_wordpiece_from_txt(tok, a);
    if (beside(a, sizeof a, path, false, "tokenizer.model") != TFM_OK) return TFM_FAILED;
    if (is_file(a)) return load_sentencepiece(tok, a);
    return tfm_fail("%s: no tokenizer.json, vocab.json + merges.txt, vocab.txt or "
                    "tokenizer.model in this folder", path);
  }
  if (!S_ISREG(st.st_mode)) return tfm_fail("%s: not a file or a folder", path);
  if (ends_with(path, ".model")) return load_sentencepiece(tok, path);
  if (ends_with(path, "merges.txt")) {
    if (beside(a, sizeof a, path, true, "vocab.json") != TFM_OK) return TFM_FAILED;
    if (!is_file(a)) return tfm_fail("%s: no vocab.json beside these merges", path);
    return tfm_tokenizer_bpe_from_files(tok, a, path);
  }
  if (ends_with(path, "vocab.json")) {
    if (beside(b, sizeof b, path, true, "merges.txt") != TFM_OK) return TFM_FAILED;
    if (is_file(b)) return tfm_tokenizer_bpe_from_files(tok, path, b);
    return load_json(tok, path);
  }
  if (ends_with(path, ".json")) return load_json(tok, path);
  if (ends_with(path, ".txt")) return tfm_tokenizer_wordpiece_from_txt(tok, path);
  return tfm_fail("%s: not a tokenizer file (tokenizer.json, vocab.json + merges.txt, "
                  "vocab.txt or a SentencePiece .model)", path);
}

/* A new tokenizer loaded by load(tok, path, text, size). */
static int load_with(const char *path, const char *text, size_t size, tfm_tokenizer **out,
                     int (*load)(tfm_tokenizer *, const char *, const char *, size_t)) {
  *out = NULL;
  tfm_tokenizer *tok = calloc(1, sizeof *tok);
  if (!tok) return tfm_fail("%s: out of memory", path);
  tok->specials = (tfm_tokenizer_specials){-1, -1, -1, -1};
  if (load(tok, path, text, size) != TFM_OK || mark_specials(tok) != TFM_OK) {
    tfm_tokenizer_free(tok);
    return TFM_FAILED;
  }
  mark_added_first(tok);
  *out = tok;
  return TFM_OK;
}

static int load_file(tfm_tokenizer *tok, const char *path, const char *text, size_t size) {
  (void)text, (void)size;
  return load_path(tok, path);
}

int tfm_tokenizer_load(const char *path, tfm_tokenizer **out) {
  return load_with(path, NULL, 0, out, load_file);
}

int tfm_tokenizer_load_json_text(const char *name, const char *text, size_t size,
                                 tfm_tokenizer **out) {
  return load_with(name, text, size, out, parse_json);
}

/* --- encode and decode ------------------------------------------------------- */

static int encode_model(tfm_tokenizer *tok, const char *text, size_t size,
                        tfm_tokenizer_ids *ids) {
  if (!size) return TFM_OK;
  switch (tok->kind) {
  case TFM_TOKENIZER_BPE: return tfm_tokenizer_bpe_encode(tok, text, size, ids);
  case TFM_TOKENIZER_WORDPIECE: return tfm_tokenizer_wordpiece_encode(tok, text, size, ids);
  case TFM_TOKENIZER_SENTENCEPIECE: break;
  }
  char error[512];
  if (tfm_tokenizer_sp_encode(tok->sp, text, size, ids, error, sizeof error) != 0)
    return tfm_fail("sentencepiece: %s", error);
  return TFM_OK;
}

int tfm_tokenizer_encode(tfm_tokenizer *tok, const char *text, size_t size,
                         tfm_tokenizer_ids *ids) {
  if (!tok->added_count) return encode_model(tok, text, size, ids);
  /* The leftmost, then longest, added token splits the text. */
  size_t start = 0;
  for (size_t i = 0; i < size;) {
    unsigned char first = (unsigned char)text[i];
    if (!(tok->added_first[first >> 3] & (1u << (first & 7)))) {
      i++;
      continue;
    }
    int32_t best = -1;
    size_t best_length = 0;
    for (size_t a = 0; a < tok->added_count; a++) {
      int32_t id = tok->added[a].id;
      size_t n = tok->vocab.lengths[id];
      if (n > best_length && n <= size - i && memcmp(text + i, tok->vocab.tokens[id], n) == 0)
        best = id, best_length = n;
    }
    if (best < 0) {
      i++;
      continue;
    }
    if (encode_model(tok, text + start, i - start, ids) != TFM_OK ||
        tfm_tokenizer_ids_push(ids, best) != TFM_OK)
      return TFM_FAILED;
    i += best_length;
    start = i;
  }
  return encode_model(tok, text + start, size - start, ids);
}

int tfm_tokenizer_decode(tfm_tokenizer *tok, const int32_t *ids, size_t count, char **text,
                         size_t *size) {
  *text = NULL;
  *size = 0;
  size_t n = tfm_tokenizer_vocab_size(tok);
  int32_t *kept = malloc((count ? count : 1) * sizeof *kept);
  if (!kept) return tfm_fail("out of memory");
  size_t k = 0;
  for (size_t i = 0; i < count; i++) {
    if (ids[i] < 0 || (size_t)ids[i] >= n) {
      free(kept);
      return tfm_fail("id %ld is out of the vocabulary (%zu tokens)", (long)ids[i], n);
    }
    if (!tok->special[ids[i]]) kept[k++] = ids[i];
  }
  tfm_tokenizer_text out = {0};
  int status = tfm_tokenizer_text_add(&out, "", 0);
  if (status == TFM_OK) switch (tok->kind) {
    case TFM_TOKENIZER_BPE: status = tfm_tokenizer_bpe_decode(tok, kept, k, &out); break;
    case TFM_TOKENIZER_WORDPIECE:
      status = tfm_tokenizer_wordpiece_decode(tok, kept, k, &out);
      break;
    case TFM_TOKENIZER_SENTENCEPIECE: {
      char error[512];
      if (tfm_tokenizer_sp_decode(tok->sp, kept, k, &out, error, sizeof error) != 0)
        status = tfm_fail("sentencepiece: %s", error);
      break;
    }
    }
  free(kept);
  if (status != TFM_OK) {
    free(out.bytes);
    return TFM_FAILED;
  }
  *text = out.bytes;
  *size = out.size;
  return TFM_OK;
}
