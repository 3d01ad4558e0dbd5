/* The tokenizers' vocabulary (id <-> token bytes, a hash table), growable
 * byte strings and whole-file reads. */
#include "tokenizer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfmrt.h"

uint64_t tfm_tokenizer_hash(const void *bytes, size_t length, uint64_t seed) {
  /* FNV-1a over 8-byte words, then a splitmix finish. */
  const unsigned char *p = bytes;
  uint64_t h = 0xcbf29ce484222325ull ^ seed ^ (length * 0x9e3779b97f4a7c15ull);
  while (length >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
    p += 8;
    length -= 8;
  }
  while (length--) h = (h ^ *p++) * 0x100000001b3ull;
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

static int vocab_rehash(tfm_tokenizer_vocab *vocab, size_t slot_count) {
  int32_t *slots = calloc(slot_count, sizeof *slots);
  if (!slots) return tfm_fail("out of memory");
  for (size_t id = 0; id < vocab->count; id++) {
    if (!vocab->tokens[id]) continue;
    size_t i = tfm_tokenizer_hash(vocab->tokens[id], vocab->lengths[id], 0) & (slot_count - 1);
    while (slots[i]) i = (i + 1) & (slot_count - 1);
    slots[i] = (int32_t)id + 1;
  }
  free(vocab->slots);
  vocab->slots = slots;
  vocab->slot_count = slot_count;
  return TFM_OK;
}

int32_t tfm_tokenizer_vocab_find(const tfm_tokenizer_vocab *vocab, const char *token,
                                 size_t length) {
  if (!vocab->slot_count) return -1;
  size_t mask = vocab->slot_count - 1;
  size_t i = tfm_tokenizer_hash(token, length, 0) & mask;
  for (; vocab->slots[i]; i = (i + 1) & mask) {
    int32_t id = vocab->slots[i] - 1;
    if (vocab->lengths[id] == length && memcmp(vocab->tokens[id], token, length) == 0)
      return id;
  }
  return -1;
}

int tfm_tokenizer_vocab_set(tfm_tokenizer_vocab *vocab, int32_t id, const char *token,
                            size_t length) {
  if (id < 0 || id >= (1 << 30)) return tfm_fail("token id %ld out of range", (long)id);
  if (length > UINT32_MAX / 2) return tfm_fail("token of %zu bytes", length);
  if ((size_t)id >= vocab->capacity) {
    size_t capacity = vocab->capacity ? vocab->capacity : 256;
    while (capacity <= (size_t)id) capacity *= 2;
    char **tokens = realloc(vocab->tokens, capacity * sizeof *tokens);
    if (!tokens) return tfm_fail("out of memory");
    vocab->tokens = tokens;
    uint32_t *lengths = realloc(vocab->lengths, capacity * sizeof *lengths);
    if (!lengths) return tfm_fail("out of memory");
    vocab->lengths = lengths;
    for (size_t i = vocab->capacity; i < capacity; i++) tokens[i] = NULL, lengths[i] = 0;
    vocab->capacity = capacity;
  }
  if (vocab->tokens[id]) return tfm_fail("id %ld is given twice", (long)id);
  int32_t other = tfm_tokenizer_vocab_find(vocab, token, length);
  if (other >= 0)
    return tfm_fail("token \"%.*s\" is given twice (ids %ld and %ld)", (int)(length > 60 ? 60 : length),
                    token, (long)other, (long)id);
  char *copy = malloc(length + 1);
  if (!copy) return tfm_fail("out of memory");
  memcpy(copy, token, length);
  copy[length] = 0;
  vocab->tokens[id] = copy;
  vocab->lengths[id] = (uint32_t)length;
  if ((size_t)id >= vocab->count) vocab->count = (size_t)id + 1;
  size_t used = 0;
  if (vocab->slot_count) {
    /* Insert, growing at half full. */
    if (vocab->count * 2 < vocab->slot_count) {
      size_t mask = vocab->slot_count - 1;
      size_t i = tfm_tokenizer_hash(token, length, 0) & mask;
      while (vocab->slots[i]) i = (i + 1) & mask;
      vocab->slots[i] = id + 1;
      return TFM_OK;
    }
    used = vocab->slot_count * 2;
  }
  if (!used) used = 1024;
  while (used < vocab->count * 2 + 2) used *= 2;
  return vocab_rehash(vocab, used);
}

int tfm_tokenizer_vocab_check_dense(const tfm_tokenizer_vocab *vocab) {
  for (size_t id = 0; id < vocab->count; id++)
    if (!vocab->tokens[id])
      return tfm_fail("no token has id %zu (the ids go up to %zu)", id, vocab->count - 1);
  return TFM_OK;
}

void tfm_tokenizer_vocab_free(tfm_tokenizer_vocab *vocab) {
  for (size_t id = 0; id < vocab->count; id++) free(vocab->tokens[id]);
  free(vocab->tokens);
  free(vocab->lengths);
  free(vocab->slots);
  memset(vocab, 0, sizeof *vocab);
}

int tfm_tokenizer_grow(void **items, size_t *capacity, size_t needed, size_t size, size_t first) {
  if (needed <= *capacity) return TFM_OK;
  size_t wanted = *capacity ? *capacity : first;
  while (wanted < needed) {
    if (wanted > SIZE_MAX / 4 / size) return tfm_fail("out of memory");
    wanted *= 2;
  }
  void *grown = realloc(*items, wanted * size);
  if (!grown) return tfm_fail("out of memory");
  *items = grown;
  *capacity = wanted;
  return TFM_OK;
}

int tfm_tokenizer_text_add(tfm_tokenizer_text *text, const void *bytes, size_t size) {
  if (tfm_tokenizer_grow((void **)&text->bytes, &text->capacity, text->size + size + 1, 1, 256) !=
      TFM_OK)
    return TFM_FAILED;
  if (size) memcpy(text->bytes + text->size, bytes, size);
  text->size += size;
  text->bytes[text->size] = 0;
  return TFM_OK;
}

int tfm_tokenizer_ids_push(tfm_tokenizer_ids *ids, int32_t id) {
  if (tfm_tokenizer_grow((void **)&ids->ids, &ids->capacity, ids->count + 1, sizeof *ids->ids,
                         64) != TFM_OK)
    return TFM_FAILED;
  ids->ids[ids->count++] = id;
  return TFM_OK;
}

void tfm_tokenizer_ids_free(tfm_tokenizer_ids *ids) {
  free(ids->ids);
  memset(ids, 0, sizeof *ids);
}

int tfm_tokenizer_fail_at(const char *where) {
  char reason[1024];
  snprintf(reason, sizeof reason, "%s", tfm_error());
  return tfm_fail("%s: %s", where, reason);
}

int tfm_tokenizer_read_file(const char *path, char **bytes, size_t *size) {
  *bytes = NULL;
  *size = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return tfm_fail("%s: %s", path, strerror(errno));
  tfm_tokenizer_text text = {0};
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (tfm_tokenizer_text_add(&text, chunk, n) != TFM_OK) {
      fclose(f);
      free(text.bytes);
      return tfm_fail("%s: out of memory", path);
    }
  }
  int failed = ferror(f);
  fclose(f);
  if (failed) {
    free(text.bytes);
    return tfm_fail("%s: read error", path);
  }
  if (!text.bytes && tfm_tokenizer_text_add(&text, "", 0) != TFM_OK)
    return tfm_fail("%s: out of memory", path);
  *bytes = text.bytes;
  *size = text.size;
  return TFM_OK;
}

const json_value *tfm_tokenizer_json_get(const json_value *object, const char *key) {
  if (!object || object->kind != JSON_OBJECT) return NULL;
  for (const json_value *m = object->first_child; m; m = m->next)
    if (strcmp(m->key, key) == 0) return m;
  return NULL;
}
