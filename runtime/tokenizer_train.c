/* Training a GPT-2 style byte-level BPE vocabulary: the text's lines are
 * pre-tokenised as GPT-2 and each distinct word counted once; then the most
 * frequent adjacent pair is merged, again and again, the pair counts kept
 * up to date incrementally from the words that hold the merged pair (a
 * lazy max-heap picks the next pair). Written as a Hugging Face
 * tokenizer.json that tokenizer_bpe.c and tokenizers both load. */
#include "tokenizer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfmrt.h"

/* --- distinct words and their counts ------------------------------------------- */

typedef struct {
  int32_t *symbols;
  size_t length;
  uint64_t count;
  uint64_t hash;
  size_t stamp; /* the last merge that visited this word */
} word;

typedef struct {
  word *words;
  size_t count, capacity;
  size_t *slots; /* index + 1 */
  size_t slot_count;
  tfm_tokenizer_text bytes; /* the words' bytes, for equality while counting */
  size_t *offsets;
} word_table;

static int word_table_add(word_table *t, const unsigned char *w, size_t n) {
  if (t->count * 2 >= t->slot_count) {
    size_t slots = t->slot_count ? t->slot_count * 2 : 65536;
    size_t *grown = calloc(slots, sizeof *grown);
    if (!grown) return tfm_fail("out of memory");
    for (size_t i = 0; i < t->count; i++) {
      size_t k = t->words[i].hash & (slots - 1);
      while (grown[k]) k = (k + 1) & (slots - 1);
      grown[k] = i + 1;
    }
    free(t->slots);
    t->slots = grown;
    t->slot_count = slots;
  }
  uint64_t hash = tfm_tokenizer_hash(w, n, 3);
  size_t k = hash & (t->slot_count - 1);
  for (; t->slots[k]; k = (k + 1) & (t->slot_count - 1)) {
    word *x = &t->words[t->slots[k] - 1];
    if (x->hash == hash && x->length == n &&
        memcmp(t->bytes.bytes + t->offsets[t->slots[k] - 1], w, n) == 0) {
      x->count++;
      return TFM_OK;
    }
  }
  size_t words_capacity = t->capacity;
  if (tfm_tokenizer_grow((void **)&t->words, &words_capacity, t->count + 1, sizeof *t->words,
                         4096) != TFM_OK ||
      tfm_tokenizer_grow((void **)&t->offsets, &t->capacity, t->count + 1, sizeof *t->offsets,
                         4096) != TFM_OK)
    return TFM_FAILED;
  int32_t *symbols = malloc(n * sizeof *symbols);
  if (!symbols) return tfm_fail("out of memory");
  for (size_t i = 0; i < n; i++) symbols[i] = w[i]; /* byte b is token b */
  t->offsets[t->count] = t->bytes.size;
  if (tfm_tokenizer_text_add(&t->bytes, w, n) != TFM_OK) {
    free(symbols);
    return TFM_FAILED;
  }
  t->words[t->count] = (word){symbols, n, 1, hash, (size_t)-1};
  t->slots[k] = ++t->count;
  return TFM_OK;
}

static int count_file(word_table *t, const char *path) {
  char *text;
  size_t size;
  if (tfm_tokenizer_read_file(path, &text, &size) != TFM_OK) return TFM_FAILED;
  int status = TFM_OK;
  for (size_t i = 0; i < size && status == TFM_OK;) {
    char *end = memchr(text + i, '\n', size - i);
    size_t line_end = end ? (size_t)(end - text) : size;
    while (i < line_end && status == TFM_OK) {
      size_t n = tfm_tokenizer_gpt2_split(text + i, line_end - i);
      status = word_table_add(t, (const unsigned char *)text + i, n);
      i += n;
    }
    i = line_end + 1;
  }
  free(text);
  return status == TFM_OK ? TFM_OK : tfm_tokenizer_fail_at(path);
}

/* --- pair counts ------------------------------------------------------------------ */

typedef struct {
  uint64_t key;   /* left << 32 | right */
  int64_t count;
  size_t *where;  /* words that held the pair (may repeat, may be stale) */
  size_t where_count, where_capacity;
} pair;

typedef struct {
  pair *pairs;
  size_t count, capacity;
  size_t *slots; /* index + 1 */
  size_t slot_count;
} pair_table;

static uint64_t key_of(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

/* The pair's index, made (count 0) when absent; SIZE_MAX when out of memory. */
static size_t pair_index(pair_table *t, uint64_t key) {
  if (t->count * 2 >= t->slot_count) {
    size_t slots = t->slot_count ? t->slot_count * 2 : 65536;
    size_t *grown = calloc(slots, sizeof *grown);
    if (!grown) return SIZE_MAX;
    for (size_t i = 0; i < t->count; i++) {
      size_t k = tfm_tokenizer_hash(&t->pairs[i].key, 8, 5) & (slots - 1);
      while (grown[k]) k = (k + 1) & (slots - 1);
      grown[k] = i + 1;
    }
    free(t->slots);
    t->slots = grown;
    t->slot_count = slots;
  }
  size_t k = tfm_tokenizer_hash(&key, 8, 5) & (t->slot_count - 1);
  for (; t->slots[k]; k = (k + 1) & (t->slot_count - 1))
    if (t->pairs[t->slots[k] - 1].key == key) return t->slots[k] - 1;
  if (tfm_tokenizer_grow((void **)&t->pairs, &t->capacity, t->count + 1, sizeof *t->pairs, 4096) !=
      TFM_OK)
    return SIZE_MAX;
  t->pairs[t->count] = (pair){key, 0, NULL, 0, 0};
  t->slots[k] = ++t->count;
  return t->count - 1;
}

typedef struct {
  int64_t count;
  uint64_t key;
} entry;

typedef struct {
  entry *entries;
  size_t count, capacity;
} heap;

/* Larger counts first; among equal counts the smaller pair of ids. */
static bool above(entry a, entry b) { return a.count != b.count ? a.count > b.count : a.key < b.key; }

static int heap_push(heap *h, entry e) {
  if (tfm_tokenizer_grow((void **)&h->entries, &h->capacity, h->count + 1, sizeof *h->entries,
                         4096) != TFM_OK)
    return TFM_FAILED;
  size_t i = h->count++;
  while (i > 0 && above(e, h->entries[(i - 1) / 2])) {
    h->entries[i] = h->entries[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->entries[i] = e;
  return TFM_OK;
}

static entry heap_pop(heap *h) {
  entry top = h->entries[0], last = h->entries[--h->count];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->count) break;
    if (c + 1 < h->count && above(h->entries[c + 1], h->entries[c])) c++;
    if (!above(h->entries[c], last)) break;
    h->entries[i] = h->entries[c];
    i = c;
  }
  h->entries[i] = last;
  return top;
}

typedef struct {
  word_table words;
  pair_table pairs;
  heap queue;
  tfm_tokenizer_vocab vocab; /* the tokens as GPT-2 characters */
  int32_t (*merges)[2];
  size_t merge_count;
} trainer;

/* Adds delta to the count of pair (a, b), noting the word when it grows. */
static int bump(trainer *t, int32_t a, int32_t b, int64_t delta, size_t w) {
  size_t i = pair_index(&t->pairs, key_of(a, b));
  if (i == SIZE_MAX) return tfm_fail("out of memory");
  pair *p = &t->pairs.pairs[i];
  p->count += delta;
  if (delta <= 0) return TFM_OK;
  if (tfm_tokenizer_grow((void **)&p->where, &p->where_capacity, p->where_count + 1,
                         sizeof *p->where, 4) != TFM_OK)
    return TFM_FAILED;
  if (!p->where_count || p->where[p->where_count - 1] != w) p->where[p->where_count++] = w;
  return heap_push(&t->queue, (entry){p->count, p->key});
}

/* Replaces each (a, b) in word w by id, keeping the pair counts. */
static int merge_word(trainer *t, size_t w, int32_t a, int32_t b, int32_t id) {
  word *x = &t->words.words[w];
  int64_t c = (int64_t)x->count;
  size_t out = 0;
  for (size_t i = 0; i < x->length; i++) {
    if (i + 1 < x->length && x->symbols[i] == a && x->symbols[i + 1] == b) {
      int status = bump(t, a, b, -c, w);
      if (status == TFM_OK && out > 0) {
        status = bump(t, x->symbols[out - 1], a, -c, w);
        if (status == TFM_OK) status = bump(t, x->symbols[out - 1], id, c, w);
      }
      if (status == TFM_OK && i + 2 < x->length) {
        status = bump(t, b, x->symbols[i + 2], -c, w);
        if (status == TFM_OK) status = bump(t, id, x->symbols[i + 2], c, w);
      }
      if (status != TFM_OK) return TFM_FAILED;
      x->symbols[out++] = id;
      i++;
    } else {
      x->symbols[out++] = x->symbols[i];
    }
  }
  x->length = out;
  return TFM_OK;
}

static int train(trainer *t, size_t vocab_size) {
  for (int b = 0; b < 256; b++) {
    char utf8[4];
    size_t n = tfm_tokenizer_utf8_put(tfm_tokenizer_byte_char((unsigned char)b), utf8);
    if (tfm_tokenizer_vocab_set(&t->vocab, b, utf8, n) != TFM_OK) return TFM_FAILED;
  }
  for (size_t w = 0; w < t->words.count; w++) {
    word *x = &t->words.words[w];
    for (size_t i = 0; i + 1 < x->length; i++)
      if (bump(t, x->symbols[i], x->symbols[i + 1], (int64_t)x->count, w) != TFM_OK)
        return TFM_FAILED;
  }
  t->merges = malloc((vocab_size > 256 ? vocab_size - 256 : 1) * sizeof *t->merges);
  if (!t->merges) return tfm_fail("out of memory");
  int32_t next = 256;
  while ((size_t)next + 1 < vocab_size && t->queue.count) {
    entry e = heap_pop(&t->queue);
    size_t i = pair_index(&t->pairs, e.key);
    if (i == SIZE_MAX) return tfm_fail("out of memory");
    pair *p = &t->pairs.pairs[i];
    if (p->count != e.count) { /* stale: counted again since */
      if (p->count > 0 && p->count < e.count && heap_push(&t->queue, (entry){p->count, p->key}) != TFM_OK)
        return TFM_FAILED;
      continue;
    }
    if (p->count < 2) break; /* no pair occurs twice */
    int32_t a = (int32_t)(e.key >> 32), b = (int32_t)(uint32_t)e.key;
    char joined[2048];
    size_t la = t->vocab.lengths[a], lb = t->vocab.lengths[b];
    if (la + lb > sizeof joined) { /* too long a token: leave the pair */
      p->count = 0;
      continue;
    }
    memcpy(joined, t->vocab.tokens[a], la);
    memcpy(joined + la, t->vocab.tokens[b], lb);
    int32_t id = tfm_tokenizer_vocab_find(&t->vocab, joined, la + lb);
    if (id < 0) {
      id = next++;
      if (tfm_tokenizer_vocab_set(&t->vocab, id, joined, la + lb) != TFM_OK) return TFM_FAILED;
    }
    size_t stamp = t->merge_count;
    t->merges[t->merge_count][0] = a;
    t->merges[t->merge_count++][1] = b;
    /* where may grow while we walk it: index, and take the count first. */
    size_t where_count = p->where_count;
    for (size_t k = 0; k < where_count; k++) {
      size_t w = t->pairs.pairs[i].where[k];
      if (t->words.words[w].stamp == stamp) continue;
      t->words.words[w].stamp = stamp;
      if (merge_word(t, w, a, b, id) != TFM_OK) return TFM_FAILED;
    }
    p = &t->pairs.pairs[i];
    free(p->where);
    p->where = NULL;
    p->where_count = p->where_capacity = 0;
  }
  return TFM_OK;
}

/* --- writing tokenizer.json ----------------------------------------------------- */

static int write_json(const trainer *t, const char *path) {
  char temp[4096];
  if (snprintf(temp, sizeof temp, "%s.tmp", path) >= (int)sizeof temp)
    return tfm_fail("%s: path too long", path);
  FILE *f = fopen(temp, "wb");
  if (!f) return tfm_fail("%s: %s", temp, strerror(errno));
  size_t end = t->vocab.count; /* <|endoftext|> */
  fprintf(f, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":"
             "[{\"id\":%zu,\"content\":\"<|endoftext|>\",\"single_word\":false,\"lstrip\":false,"
             "\"rstrip\":false,\"normalized\":false,\"special\":true}],\"normalizer\":null,\n"
             "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
             "\"trim_offsets\":true,\"use_regex\":true},\n"
             "\"post_processor\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
             "\"trim_offsets\":false,\"use_regex\":true},\n"
             "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
             "\"trim_offsets\":true,\"use_regex\":true},\n"
             "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
             "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":false,"
             "\"byte_fallback\":false,\"ignore_merges\":false,\n\"vocab\":{",
          end);
  for (size_t id = 0; id < t->vocab.count; id++) {
    if (id) fputc(',', f);
    fputc('\n', f);
    json_write_string(f, t->vocab.tokens[id], t->vocab.lengths[id]);
    fprintf(f, ":%zu", id);
  }
  fprintf(f, ",\n\"<|endoftext|>\":%zu},\n\"merges\":[", end);
  for (size_t m = 0; m < t->merge_count; m++) {
    int32_t a = t->merges[m][0], b = t->merges[m][1];
    fputs(m ? ",\n[" : "\n[", f);
    json_write_string(f, t->vocab.tokens[a], t->vocab.lengths[a]);
    fputc(',', f);
    json_write_string(f, t->vocab.tokens[b], t->vocab.lengths[b]);
    fputc(']', f);
  }
  fputs("]}}\n", f);
  int failed = ferror(f);
  if (fclose(f) != 0 || failed) {
    remove(temp);
    return tfm_fail("%s: write error", temp);
  }
  if (rename(temp, path) != 0) {
    int e = errno;
    remove(temp);
    return tfm_fail("%s: %s", path, strerror(e));
  }
  return TFM_OK;
}

int tfm_tokenizer_train_bpe(const char *const *files, size_t file_count, size_t vocab_size,
                            const char *out_path) {
  if (vocab_size < 257 || vocab_size > (1u << 30))
    return tfm_fail("%s: a vocabulary of %zu tokens: it needs the 256 bytes and "
                    "<|endoftext|>, and at most 2^30", out_path, vocab_size);
  trainer t = {0};
  int status = TFM_OK;
  for (size_t i = 0; i < file_count && status == TFM_OK; i++) status = count_file(&t.words, files[i]);
  if (status == TFM_OK && train(&t, vocab_size) != TFM_OK)
    status = tfm_tokenizer_fail_at(out_path);
  if (status == TFM_OK) status = write_json(&t, out_path);
  for (size_t i = 0; i < t.words.count; i++) free(t.words.words[i].symbols);
  free(t.words.words);
  free(t.words.slots);
  free(t.words.offsets);
  free(t.words.bytes.bytes);
  for (size_t i = 0; i < t.pairs.count; i++) free(t.pairs.pairs[i].where);
  free(t.pairs.pairs);
  free(t.pairs.slots);
  free(t.queue.entries);
  free(t.merges);
  tfm_tokenizer_vocab_free(&t.vocab);
  return status;
}
