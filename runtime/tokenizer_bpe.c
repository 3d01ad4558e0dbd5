/* Byte-level BPE as GPT-2 and Hugging Face's tokenizers: GPT-2's
 * pre-tokenisation regex (by hand, over Unicode categories), each byte as
 * its printable character, merges applied by rank through a priority queue
 * (as tokenizers' Word::merge_all), a cache of words; loaded from a
 * tokenizer.json or from vocab.json + merges.txt. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

#include "tfmrt.h"

typedef struct {
  uint64_t pair; /* left << 32 | right; 0 with rank -1 is empty */
  int32_t rank, id;
} merge_slot;

#define CACHE_SLOTS 65536
#define CACHE_MAX_WORD 64

typedef struct {
  uint64_t hash;
  uint32_t key, key_length; /* into cache_bytes */
  uint32_t ids, id_count;   /* into cache_ids */
} cache_slot;

struct tfm_tokenizer_bpe {
  int32_t byte_id[256];     /* the token of each byte alone; -1: dropped */
  merge_slot *merges;
  size_t merge_slots;       /* a power of two */
  bool add_prefix_space, use_regex, ignore_merges;
  char **decoded;           /* id -> the bytes it stands for */
  uint32_t *decoded_lengths;
  size_t decoded_count;
  cache_slot *cache;        /* CACHE_SLOTS slots, hash 0 empty */
  size_t cache_used;
  tfm_tokenizer_text cache_bytes;
  tfm_tokenizer_ids cache_ids;
};

/* --- GPT-2's byte <-> character map ------------------------------------------- */

int32_t tfm_tokenizer_byte_char(unsigned char byte) {
  /* Printable Latin-1 bytes stand for themselves; the rest, in byte order,
   * for 256, 257, ... */
  if ((byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE) return byte;
  int32_t n = 0;
  for (int b = 0; b < byte; b++)
    if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) n++;
  return 256 + n;
}

/* The byte of a character of the map; -1 for any other. */
static int char_byte(int32_t cp) {
  if ((cp >= '!' && cp <= '~') || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
    return cp;
  if (cp < 256 || cp >= 256 + 68) return -1;
  int32_t n = 0;
  for (int b = 0; b < 256; b++)
    if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
      if (256 + n == cp) return b;
      n++;
    }
  return -1;
}

/* --- GPT-2's pre-tokenisation -------------------------------------------------
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * tried in that order at each start, as the regex engine does. */

enum { C_LETTER, C_NUMBER, C_SPACE, C_OTHER };

static int class_at(const char *text, size_t size, size_t *length) {
  int32_t cp = tfm_tokenizer_utf8_next(text, size, length);
  if (cp >= 0 && cp < 0x80) { /* the common case without a table look-up */
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return C_LETTER;
    if (cp >= '0' && cp <= '9') return C_NUMBER;
    if (cp == ' ' || (cp >= 9 && cp <= 13)) return C_SPACE;
    return C_OTHER;
  }
  if (tfm_tokenizer_is_letter(cp)) return C_LETTER;
  if (tfm_tokenizer_is_number(cp)) return C_NUMBER;
  if (tfm_tokenizer_is_space(cp)) return C_SPACE;
  return C_OTHER;
}

/* The end of the run of characters of class c (C_OTHER: neither space,
 * letter nor number) from i. */
static size_t run_of(const char *text, size_t size, size_t i, int c) {
  while (i < size) {
    size_t n;
    if (class_at(text + i, size - i, &n) != c) break;
    i += n;
  }
  return i;
}

size_t tfm_tokenizer_gpt2_split(const char *text, size_t size) {
  if (text[0] == '\'' && size >= 2) {
    char a = text[1], b = size >= 3 ? text[2] : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  size_t n;
  int c = class_at(text, size, &n);
  if (text[0] == ' ' && size > 1) { /* " ?" before a letter, number or other */
    size_t m;
    int next = class_at(text + 1, size - 1, &m);
    if (next != C_SPACE) return run_of(text, size, 1 + m, next);
  }
  if (c != C_SPACE) return run_of(text, size, n, c);
  /* \s+(?!\S): the spaces but the last when a non-space follows; \s+ for one. */
  size_t end = n, last = 0;
  while (end < size) {
    size_t m;
    if (class_at(text + end, size - end, &m) != C_SPACE) break;
    last = end;
    end += m;
  }
  if (end == size || last == 0) return end;
  return last;
}

/* --- merges ------------------------------------------------------------------- */

static const merge_slot *merge_find(const tfm_tokenizer_bpe *bpe, int32_t left, int32_t right) {
  uint64_t pair = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
  size_t mask = bpe->merge_slots - 1;
  for (size_t i = tfm_tokenizer_hash(&pair, 8, 1) & mask; bpe->merges[i].rank >= 0;
       i = (i + 1) & mask)
    if (bpe->merges[i].pair == pair) return &bpe->merges[i];
  return NULL;
}

/* Later merges of the same pair replace earlier ones (as tokenizers' map). */
static void merge_put(tfm_tokenizer_bpe *bpe, int32_t left, int32_t right, int32_t rank,
                      int32_t id) {
  uint64_t pair = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
  size_t mask = bpe->merge_slots - 1;
  size_t i = tfm_tokenizer_hash(&pair, 8, 1) & mask;
  while (bpe->merges[i].rank >= 0 && bpe->merges[i].pair != pair) i = (i + 1) & mask;
  bpe->merges[i] = (merge_slot){pair, rank, id};
}

static int merges_reserve(tfm_tokenizer_bpe *bpe, size_t count) {
  size_t slots = 1024;
  while (slots < count * 2 + 2) slots *= 2;
  bpe->merges = malloc(slots * sizeof *bpe->merges);
  if (!bpe->merges) return tfm_fail("out of memory");
  for (size_t i = 0; i < slots; i++) bpe->merges[i] = (merge_slot){0, -1, -1};
  bpe->merge_slots = slots;
  return TFM_OK;
}

/* One merge "left right" as tokens: checks both and their join are tokens. */
static int add_merge(tfm_tokenizer *tok, const char *path, size_t rank, const char *left,
                     size_t left_length, const char *right, size_t right_length) {
  int32_t a = tfm_tokenizer_vocab_find(&tok->vocab, left, left_length);
  int32_t b = tfm_tokenizer_vocab_find(&tok->vocab, right, right_length);
  if (a < 0 || b < 0)
    return tfm_fail("%s: merge %zu names \"%.*s\", which is not in the vocabulary", path, rank,
                    (int)(a < 0 ? left_length : right_length), a < 0 ? left : right);
  char joined[1024];
  if (left_length + right_length > sizeof joined)
    return tfm_fail("%s: merge %zu makes a token over %zu bytes", path, rank, sizeof joined);
  memcpy(joined, left, left_length);
  memcpy(joined + left_length, right, right_length);
  int32_t id = tfm_tokenizer_vocab_find(&tok->vocab, joined, left_length + right_length);
  if (id < 0)
    return tfm_fail("%s: merge %zu makes \"%.*s\", which is not in the vocabulary", path, rank,
                    (int)(left_length + right_length), joined);
  if (rank >= (1u << 30)) return tfm_fail("%s: too many merges", path);
  merge_put(tok->bpe, a, b, (int32_t)rank, id);
  return TFM_OK;
}

/* --- the model once the vocabulary and merges are in -------------------------- */

static int finish(tfm_tokenizer *tok, const char *path) {
  tfm_tokenizer_bpe *bpe = tok->bpe;
  if (tfm_tokenizer_vocab_check_dense(&tok->vocab) != TFM_OK)
    return tfm_tokenizer_fail_at(path);
  for (int b = 0; b < 256; b++) {
    char utf8[4];
    size_t n = tfm_tokenizer_utf8_put(tfm_tokenizer_byte_char((unsigned char)b), utf8);
    bpe->byte_id[b] = tfm_tokenizer_vocab_find(&tok->vocab, utf8, n);
    if (bpe->byte_id[b] < 0) bpe->byte_id[b] = tok->specials.unk;
  }
  /* What each token decodes to: its characters as bytes, or the token as it
   * is when a character is outside the map (an added token). */
  size_t count = tok->vocab.count;
  bpe->decoded = calloc(count ? count : 1, sizeof *bpe->decoded);
  bpe->decoded_lengths = calloc(count ? count : 1, sizeof *bpe->decoded_lengths);
  if (!bpe->decoded || !bpe->decoded_lengths) return tfm_fail("%s: out of memory", path);
  bpe->decoded_count = count;
  for (size_t id = 0; id < count; id++) {
    const char *t = tok->vocab.tokens[id];
    size_t length = tok->vocab.lengths[id], out = 0;
    char *bytes = malloc(length + 1);
    if (!bytes) return tfm_fail("%s: out of memory", path);
    for (size_t i = 0; i < length;) {
      size_t n;
      int byte = char_byte(tfm_tokenizer_utf8_next(t + i, length - i, &n));
      if (byte < 0) {
        memcpy(bytes, t, length);
        out = length;
        break;
      }
      bytes[out++] = (char)byte;
      i += n;
    }
    bytes[out] = 0;
    bpe->decoded[id] = bytes;
    bpe->decoded_lengths[id] = (uint32_t)out;
  }
  bpe->cache = calloc(CACHE_SLOTS, sizeof *bpe->cache);
  if (!bpe->cache) return tfm_fail("%s: out of memory", path);
  /* GPT-2's one special token, where the vocabulary has it. */
  int32_t end = tfm_tokenizer_vocab_find(&tok->vocab, "<|endoftext|>", 13);
  if (end >= 0) {
    tok->specials.bos = tok->specials.eos = end;
    if (tfm_tokenizer_add_special(tok, end, true) != TFM_OK) return TFM_FAILED;
  }
  return TFM_OK;
}

static int new_bpe(tfm_tokenizer *tok) {
  tok->kind = TFM_TOKENIZER_BPE;
  tok->bpe = calloc(1, sizeof *tok->bpe);
  if (!tok->bpe) return tfm_fail("out of memory");
  tok->bpe->use_regex = true;
  return TFM_OK;
}

static bool is_null_or(const json_value *v, json_kind kind) {
  return !v || v->kind == JSON_NULL || v->kind == kind;
}

int tfm_tokenizer_bpe_from_json(tfm_tokenizer *tok, const char *path, const json_value *root) {
  if (new_bpe(tok) != TFM_OK) return TFM_FAILED;
  tfm_tokenizer_bpe *bpe = tok->bpe;
  const json_value *model = tfm_tokenizer_json_get(root, "model");
  const json_value *normalizer = tfm_tokenizer_json_get(root, "normalizer");
  if (normalizer && normalizer->kind != JSON_NULL)
    return tfm_fail("%s: a BPE tokenizer with a normalizer is not supported (byte-level BPE "
                    "has none)", path);
  const json_value *pre = tfm_tokenizer_json_get(root, "pre_tokenizer");
  const json_value *pre_type = tfm_tokenizer_json_get(pre, "type");
  if (!pre_type || pre_type->kind != JSON_STRING || strcmp(pre_type->string, "ByteLevel") != 0)
    return tfm_fail("%s: only byte-level BPE is supported: \"pre_tokenizer\" must be of type "
                    "\"ByteLevel\"", path);
  const char *flags[] = {"add_prefix_space", "use_regex"};
  bool *values[] = {&bpe->add_prefix_space, &bpe->use_regex};
  for (int i = 0; i < 2; i++) {
    const json_value *f = tfm_tokenizer_json_get(pre, flags[i]);
    if (f && f->kind != JSON_TRUE && f->kind != JSON_FALSE)
      return tfm_fail("%s: pre_tokenizer.%s is not true or false", path, flags[i]);
    if (f) *values[i] = f->kind == JSON_TRUE;
  }
  const json_value *ignore = tfm_tokenizer_json_get(model, "ignore_merges");
  if (ignore && ignore->kind != JSON_TRUE && ignore->kind != JSON_FALSE)
    return tfm_fail("%s: model.ignore_merges is not true or false", path);
  bpe->ignore_merges = ignore && ignore->kind == JSON_TRUE;
  const char *must_be_empty[] = {"dropout", "continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 3; i++) {
    const json_value *v = tfm_tokenizer_json_get(model, must_be_empty[i]);
    if (v && v->kind != JSON_NULL && !(v->kind == JSON_STRING && !v->string[0]))
      return tfm_fail("%s: model.%s is not supported in byte-level BPE (must be null)", path,
                      must_be_empty[i]);
  }
  const json_value *fallback = tfm_tokenizer_json_get(model, "byte_fallback");
  if (fallback && fallback->kind == JSON_TRUE)
    return tfm_fail("%s: model.byte_fallback is not supported in byte-level BPE", path);
  if (tfm_tokenizer_read_vocab(tok, path, tfm_tokenizer_json_get(model, "vocab"),
                               tfm_tokenizer_added_count(root)) != TFM_OK ||
      tfm_tokenizer_load_added(tok, path, root) != TFM_OK)
    return TFM_FAILED;
  const json_value *unk = tfm_tokenizer_json_get(model, "unk_token");
  if (!is_null_or(unk, JSON_STRING)) return tfm_fail("%s: model.unk_token is not a string", path);
  if (unk && unk->kind == JSON_STRING) {
    tok->specials.unk = tfm_tokenizer_vocab_find(&tok->vocab, unk->string, strlen(unk->string));
    if (tok->specials.unk < 0)
      return tfm_fail("%s: model.unk_token \"%s\" is not in the vocabulary", path, unk->string);
  }
  const json_value *merges = tfm_tokenizer_json_get(model, "merges");
  if (!merges || merges->kind != JSON_ARRAY) return tfm_fail("%s: model.merges is not an array", path);
  if (merges_reserve(bpe, merges->child_count) != TFM_OK) return TFM_FAILED;
  size_t rank = 0;
  for (const json_value *m = merges->first_child; m; m = m->next, rank++) {
    if (m->kind == JSON_STRING) { /* "left right" */
      const char *space = strchr(m->string, ' ');
      if (!space || space == m->string || !space[1] || strchr(space + 1, ' '))
        return tfm_fail("%s: merge %zu \"%s\" is not two tokens", path, rank, m->string);
      if (add_merge(tok, path, rank, m->string, (size_t)(space - m->string), space + 1,
                    strlen(space + 1)) != TFM_OK)
        return TFM_FAILED;
    } else if (m->kind == JSON_ARRAY && m->child_count == 2 &&
               m->first_child->kind == JSON_STRING && m->first_child->next->kind == JSON_STRING) {
      const char *a = m->first_child->string, *b = m->first_child->next->string;
      if (add_merge(tok, path, rank, a, strlen(a), b, strlen(b)) != TFM_OK) return TFM_FAILED;
    } else {
      return tfm_fail("%s: merge %zu is neither \"left right\" nor [\"left\", \"right\"]", path,
                      rank);
    }
  }
  return finish(tok, path);
}

int tfm_tokenizer_bpe_from_files(tfm_tokenizer *tok, const char *vocab_path,
                                 const char *merges_path) {
  if (new_bpe(tok) != TFM_OK) return TFM_FAILED;
  char *text;
  size_t size;
  if (tfm_tokenizer_read_file(vocab_path, &text, &size) != TFM_OK) return TFM_FAILED;
  json_value *root = NULL;
  char error[256];
  int status = json_parse(text, size, &root, error, sizeof error) != 0
                   ? tfm_fail("%s: not valid JSON: %s", vocab_path, error)
                   : tfm_tokenizer_read_vocab(tok, vocab_path, root, 0);
  free(text);
  json_free(root);
  if (status != TFM_OK) return TFM_FAILED;
  if (tfm_tokenizer_read_file(merges_path, &text, &size) != TFM_OK) return TFM_FAILED;
  size_t lines = 1;
  for (size_t i = 0; i < size; i++) lines += text[i] == '\n';
  if (merges_reserve(tok->bpe, lines) != TFM_OK) {
    free(text);
    return TFM_FAILED;
  }
  size_t rank = 0, line = 0;
  for (size_t i = 0; i < size && status == TFM_OK;) {
    char *end = memchr(text + i, '\n', size - i);
    size_t n = end ? (size_t)(end - (text + i)) : size - i;
    line++;
    const char *s = text + i;
    i += n + 1;
    if (n >= 8 && memcmp(s, "#version", 8) == 0) continue;
    const char *space = memchr(s, ' ', n);
    if (!space || space == s || space == s + n - 1 || memchr(space + 1, ' ', n - (size_t)(space + 1 - s)))
      status = tfm_fail("%s:%zu: not two tokens separated by one space", merges_path, line);
    else
      status = add_merge(tok, merges_path, rank++, s, (size_t)(space - s), space + 1,
                         n - (size_t)(space + 1 - s));
  }
  free(text);
  return status == TFM_OK ? finish(tok, merges_path) : TFM_FAILED;
}

void tfm_tokenizer_bpe_free(tfm_tokenizer_bpe *bpe) {
  if (!bpe) return;
  for (size_t i = 0; i < bpe->decoded_count; i++) free(bpe->decoded[i]);
  free(bpe->decoded);
  free(bpe->decoded_lengths);
  free(bpe->merges);
  free(bpe->cache);
  free(bpe->cache_bytes.bytes);
  free(bpe->cache_ids.ids);
  free(bpe);
}

/* --- encoding one word ---------------------------------------------------------- */

typedef struct {
  int32_t id, prev, next, length; /* length 0: merged into its left neighbour */
} symbol;

typedef struct {
  int32_t rank, pos, id;
} candidate;

static bool before(candidate a, candidate b) {
  return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
}

static void heap_push(candidate *heap, size_t *count, candidate c) {
  size_t i = (*count)++;
  while (i > 0 && before(c, heap[(i - 1) / 2])) {
    heap[i] = heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  heap[i] = c;
}

static candidate heap_pop(candidate *heap, size_t *count) {
  candidate top = heap[0], last = heap[--*count];
  size_t i = 0;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= *count) break;
    if (child + 1 < *count && before(heap[child + 1], heap[child])) child++;
    if (!before(heap[child], last)) break;
    heap[i] = heap[child];
    i = child;
  }
  heap[i] = last;
  return top;
}

static void push_pair(const tfm_tokenizer_bpe *bpe, const symbol *s, int32_t pos,
                      candidate *heap, size_t *count) {
  if (pos < 0 || s[pos].next < 0) return;
  const merge_slot *m = merge_find(bpe, s[pos].id, s[s[pos].next].id);
  if (m) heap_push(heap, count, (candidate){m->rank, pos, m->id});
}

/* The ids of one pre-token (its bytes) appended to ids. */
static int encode_word(tfm_tokenizer *tok, const unsigned char *word, size_t n,
                       tfm_tokenizer_ids *ids) {
  tfm_tokenizer_bpe *bpe = tok->bpe;
  if (bpe->ignore_merges) {
    char mapped[4 * 256];
    size_t m = 0;
    if (n <= 256) {
      for (size_t i = 0; i < n; i++)
        m += tfm_tokenizer_utf8_put(tfm_tokenizer_byte_char(word[i]), mapped + m);
      int32_t id = tfm_tokenizer_vocab_find(&tok->vocab, mapped, m);
      if (id >= 0) return tfm_tokenizer_ids_push(ids, id);
    }
  }
  /* n - 1 first candidates, then at most two per merge: 3n in all. */
  symbol small[64];
  candidate small_heap[3 * 64];
  symbol *s = n <= 64 ? small : malloc(n * sizeof *s);
  candidate *heap = n <= 64 ? small_heap : malloc(n * 3 * sizeof *heap);
  if (!s || !heap) {
    if (s != small) free(s);
    if (heap != small_heap) free(heap);
    return tfm_fail("out of memory");
  }
  size_t count = 0, used = 0;
  int32_t prev = -1;
  for (size_t i = 0; i < n; i++) { /* bytes without a token are dropped */
    int32_t id = bpe->byte_id[word[i]];
    if (id < 0) continue;
    s[used] = (symbol){id, prev, -1, 1};
    if (prev >= 0) s[prev].next = (int32_t)used;
    prev = (int32_t)used++;
  }
  for (size_t i = 0; i + 1 < used; i++) push_pair(bpe, s, (int32_t)i, heap, &count);
  while (count) {
    candidate c = heap_pop(heap, &count);
    symbol *left = &s[c.pos];
    if (!left->length || left->next < 0) continue;
    const merge_slot *m = merge_find(bpe, left->id, s[left->next].id);
    if (!m || m->id != c.id) continue;
    symbol *right = &s[left->next];
    left->id = c.id;
    left->length += right->length;
    right->length = 0;
    left->next = right->next;
    if (right->next >= 0) s[right->next].prev = c.pos;
    push_pair(bpe, s, left->prev, heap, &count);
    push_pair(bpe, s, c.pos, heap, &count);
  }
  int status = TFM_OK;
  for (int32_t i = used ? 0 : -1; i >= 0 && status == TFM_OK; i = s[i].next)
    status = tfm_tokenizer_ids_push(ids, s[i].id);
  if (s != small) free(s);
  if (heap != small_heap) free(heap);
  return status;
}

/* Words up to CACHE_MAX_WORD bytes are looked up in (and added to) the
 * cache, which starts over when full. */
static int encode_cached(tfm_tokenizer *tok, const unsigned char *word, size_t n,
                         tfm_tokenizer_ids *ids) {
  tfm_tokenizer_bpe *bpe = tok->bpe;
  if (n > CACHE_MAX_WORD) return encode_word(tok, word, n, ids);
  uint64_t hash = tfm_tokenizer_hash(word, n, 7) | 1;
  size_t i = hash & (CACHE_SLOTS - 1);
  for (; bpe->cache[i].hash; i = (i + 1) & (CACHE_SLOTS - 1)) {
    cache_slot *c = &bpe->cache[i];
    if (c->hash == hash && c->key_length == n &&
        memcmp(bpe->cache_bytes.bytes + c->key, word, n) == 0) {
      for (uint32_t k = 0; k < c->id_count; k++)
        if (tfm_tokenizer_ids_push(ids, bpe->cache_ids.ids[c->ids + k]) != TFM_OK)
          return TFM_FAILED;
      return TFM_OK;
    }
  }
  size_t first = ids->count;
  if (encode_word(tok, word, n, ids) != TFM_OK) return TFM_FAILED;
  if (bpe->cache_used * 2 >= CACHE_SLOTS) { /* start over */
    memset(bpe->cache, 0, CACHE_SLOTS * sizeof *bpe->cache);
    bpe->cache_used = bpe->cache_bytes.size = bpe->cache_ids.count = 0;
    i = hash & (CACHE_SLOTS - 1);
  }
  cache_slot slot = {hash, (uint32_t)bpe->cache_bytes.size, (uint32_t)n,
                     (uint32_t)bpe->cache_ids.count, (uint32_t)(ids->count - first)};
  if (tfm_tokenizer_text_add(&bpe->cache_bytes, word, n) != TFM_OK) return TFM_FAILED;
  for (size_t k = first; k < ids->count; k++)
    if (tfm_tokenizer_ids_push(&bpe->cache_ids, ids->ids[k]) != TFM_OK) return TFM_FAILED;
  bpe->cache[i] = slot;
  bpe->cache_used++;
  return TFM_OK;
}

int tfm_tokenizer_bpe_encode(tfm_tokenizer *tok, const char *text, size_t size,
                             tfm_tokenizer_ids *ids) {
  tfm_tokenizer_bpe *bpe = tok->bpe;
  char *prefixed = NULL;
  if (bpe->add_prefix_space && text[0] != ' ') {
    prefixed = malloc(size + 1);
    if (!prefixed) return tfm_fail("out of memory");
    prefixed[0] = ' ';
    memcpy(prefixed + 1, text, size);
    text = prefixed;
    size++;
  }
  int status = TFM_OK;
  for (size_t i = 0; i < size && status == TFM_OK;) {
    size_t n = bpe->use_regex ? tfm_tokenizer_gpt2_split(text + i, size - i) : size - i;
    status = encode_cached(tok, (const unsigned char *)text + i, n, ids);
    i += n;
  }
  free(prefixed);
  return status;
}

int tfm_tokenizer_bpe_decode(tfm_tokenizer *tok, const int32_t *ids, size_t count,
                             tfm_tokenizer_text *out) {
  tfm_tokenizer_bpe *bpe = tok->bpe;
  for (size_t i = 0; i < count; i++)
    if (tfm_tokenizer_text_add(out, bpe->decoded[ids[i]], bpe->decoded_lengths[ids[i]]) != TFM_OK)
      return TFM_FAILED;
  return TFM_OK;
}
