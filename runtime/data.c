/* Data loaders: vocabularies, parallel text for translation and byte streams
 * for character language models. They move bytes (no math) and refuse bad
 * input with "file:line: reason", never guessing what a malformed line meant. */
#include "tfmrt.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const special_tokens[TFM_SPECIALS] = {"<pad>", "<bos>", "<eos>", "<unk>"};

/* --- counter-based randomness --------------------------------------------- */

/* splitmix64: orders and windows are pure functions of their inputs, so
 * resuming at a step needs no saved generator state. */
static uint64_t splitmix_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t tfm_data_hash(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t state = a;
  state = splitmix_next(&state) ^ b;
  state = splitmix_next(&state) ^ c;
  return splitmix_next(&state);
}

void tfm_data_shuffle(size_t *order, size_t count, uint64_t seed, uint64_t epoch) {
  uint64_t state = tfm_data_hash(seed, epoch, 0);
  for (size_t i = 0; i < count; i++) order[i] = i;
  for (size_t i = count; i > 1; i--) { /* Fisher-Yates */
    size_t j = (size_t)(splitmix_next(&state) % i);
    size_t swap = order[i - 1];
    order[i - 1] = order[j];
    order[j] = swap;
  }
}

/* --- growable arrays ------------------------------------------------------ */

/* Makes room for `needed` elements of `size` bytes in *items. */
static int grow(void **items, size_t *capacity, size_t needed, size_t size) {
  if (needed <= *capacity) return TFM_OK;
  size_t wanted = *capacity ? *capacity : 16;
  while (wanted < needed) {
    if (wanted > SIZE_MAX / 2 / size) return tfm_fail("data: out of memory");
    wanted *= 2;
  }
  void *grown = realloc(*items, wanted * size);
  if (!grown) return tfm_fail("data: out of memory");
  *items = grown;
  *capacity = wanted;
  return TFM_OK;
}

/* --- line reader ---------------------------------------------------------- */

/* Room for one longest line and its newline, twice, so a refill always reads
 * at least a line's worth after the unread part moves to the front. */
#define READER_CAPACITY (2 * (TFM_DATA_MAX_LINE + 1))

typedef struct {
  FILE *file;
  const char *path;
  char *buffer;
  size_t start, end;         /* unread bytes: buffer[start, end) */
  size_t line_number;        /* of the line last returned, from 1 */
  bool at_eof;
} line_reader;

static int reader_open(line_reader *reader, const char *path) {
  *reader = (line_reader){.path = path};
  reader->file = fopen(path, "rb");
  if (!reader->file) return tfm_fail("%s: cannot open: %s", path, strerror(errno));
  reader->buffer = malloc(READER_CAPACITY);
  if (!reader->buffer) {
    fclose(reader->file);
    return tfm_fail("%s: out of memory", path);
  }
  return TFM_OK;
}

static void reader_close(line_reader *reader) {
  fclose(reader->file);
  free(reader->buffer);
}

/* The next line, without its newline, in *line and *length; *line is NULL at
 * the end of the file. A last line without a newline counts as a line. */
static int reader_next(line_reader *reader, const char **line, size_t *length) {
  for (;;) {
    char *unread = reader->buffer + reader->start;
    size_t available = reader->end - reader->start;
    char *newline = available ? memchr(unread, '\n', available) : NULL;
    size_t line_length = newline ? (size_t)(newline - unread) : available;
    if (line_length > TFM_DATA_MAX_LINE)
      return tfm_fail("%s:%zu: line longer than %d bytes", reader->path,
                      reader->line_number + 1, TFM_DATA_MAX_LINE);
    if (newline || (reader->at_eof && available)) {
      reader->line_number++;
      reader->start += line_length + (newline != NULL);
      *line = unread;
      *length = line_length;
      return TFM_OK;
    }
    if (reader->at_eof) {
      *line = NULL;
      *length = 0;
      return TFM_OK;
    }
    memmove(reader->buffer, unread, available);
    reader->start = 0;
    size_t got = fread(reader->buffer + available, 1, READER_CAPACITY - available, reader->file);
    if (got == 0 && ferror(reader->file))
      return tfm_fail("%s: read error: %s", reader->path, strerror(errno));
    reader->at_eof = got == 0;
    reader->end = available + got;
  }
}

/* A whole file, for the byte streams that need all of it. */
static int read_whole_file(const char *path, unsigned char **data, size_t *size) {
  FILE *file = fopen(path, "rb");
  if (!file) return tfm_fail("%s: cannot open: %s", path, strerror(errno));
  unsigned char *bytes = NULL;
  size_t capacity = 0, used = 0;
  int status = TFM_OK;
  for (;;) {
    if (grow((void **)&bytes, &capacity, used + 65536, 1)) {
      status = tfm_fail("%s: out of memory", path);
      break;
    }
    size_t got = fread(bytes + used, 1, capacity - used, file);
    used += got;
    if (got == 0) {
      if (ferror(file)) status = tfm_fail("%s: read error: %s", path, strerror(errno));
      break;
    }
  }
  fclose(file);
  if (status) {
    free(bytes);
    return status;
  }
  *data = bytes;
  *size = used;
  return TFM_OK;
}

/* --- vocabulary ----------------------------------------------------------- */

static uint64_t token_hash(const void *token, size_t length) { /* FNV-1a */
  const unsigned char *bytes = token;
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < length; i++) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}

static void slot_insert(size_t *slots, size_t slot_count, uint64_t hash, size_t id) {
  size_t i = (size_t)hash & (slot_count - 1);
  while (slots[i]) i = (i + 1) & (slot_count - 1);
  slots[i] = id + 1;
}

static int vocab_rehash(tfm_vocab *vocab, size_t slot_count) {
  size_t *slots = calloc(slot_count, sizeof *slots);
  if (!slots) return tfm_fail("vocabulary: out of memory");
  for (size_t id = 0; id < vocab->count; id++)
    slot_insert(slots, slot_count, token_hash(vocab->tokens[id], vocab->lengths[id]), id);
  free(vocab->slots);
  vocab->slots = slots;
  vocab->slot_count = slot_count;
  return TFM_OK;
}

int32_t tfm_vocab_find(const tfm_vocab *vocab, const void *token, size_t length) {
  if (!vocab->slot_count) return -1;
  size_t mask = vocab->slot_count - 1;
  for (size_t i = (size_t)token_hash(token, length) & mask; vocab->slots[i]; i = (i + 1) & mask) {
    size_t id = vocab->slots[i] - 1;
    if (vocab->lengths[id] == length && memcmp(vocab->tokens[id], token, length) == 0)
      return (int32_t)id;
  }
  return -1;
}

/* Adds a token the vocabulary does not hold yet; its id is the old count. */
static int vocab_append(tfm_vocab *vocab, const void *token, size_t length) {
  if (vocab->count >= INT32_MAX) return tfm_fail("vocabulary: more than %d tokens", INT32_MAX);
  size_t token_capacity = vocab->capacity;
  if (grow((void **)&vocab->tokens, &token_capacity, vocab->count + 1, sizeof *vocab->tokens) ||
      grow((void **)&vocab->lengths, &vocab->capacity, vocab->count + 1, sizeof *vocab->lengths))
    return TFM_FAILED;
  char *copy = malloc(length + 1);
  if (!copy) return tfm_fail("vocabulary: out of memory");
  memcpy(copy, token, length);
  copy[length] = '\0';
  vocab->tokens[vocab->count] = copy;
  vocab->lengths[vocab->count] = length;
  vocab->count++;
  if (2 * vocab->count > vocab->slot_count) /* at most half full: short probes */
    return vocab_rehash(vocab, vocab->slot_count ? 2 * vocab->slot_count : 64);
  slot_insert(vocab->slots, vocab->slot_count, token_hash(token, length), vocab->count - 1);
  return TFM_OK;
}

void tfm_vocab_free(tfm_vocab *vocab) {
  for (size_t id = 0; id < vocab->count; id++) free(vocab->tokens[id]);
  free(vocab->tokens);
  free(vocab->lengths);
  free(vocab->slots);
  *vocab = (tfm_vocab){0};
}

static int vocab_start(tfm_vocab *vocab) {
  *vocab = (tfm_vocab){0};
  for (size_t id = 0; id < TFM_SPECIALS; id++)
    if (vocab_append(vocab, special_tokens[id], strlen(special_tokens[id]))) {
      tfm_vocab_free(vocab);
      return TFM_FAILED;
    }
  return TFM_OK;
}

/* Tokens seen in training data with how often each occurred. */
typedef struct {
  tfm_vocab seen;            /* the specials, then tokens in order of appearance */
  size_t *counts;            /* by id in `seen` */
  size_t capacity;
} token_counts;

static int counts_start(token_counts *counts) {
  *counts = (token_counts){0};
  if (vocab_start(&counts->seen) ||
      grow((void **)&counts->counts, &counts->capacity, TFM_SPECIALS, sizeof *counts->counts))
    return TFM_FAILED;
  for (size_t id = 0; id < TFM_SPECIALS; id++) counts->counts[id] = 0;
  return TFM_OK;
}

static void counts_free(token_counts *counts) {
  tfm_vocab_free(&counts->seen);
  free(counts->counts);
}

static int count_token(token_counts *counts, const void *token, size_t length) {
  int32_t id = tfm_vocab_find(&counts->seen, token, length);
  if (id < 0) {
    if (vocab_append(&counts->seen, token, length) ||
        grow((void **)&counts->counts, &counts->capacity, counts->seen.count,
             sizeof *counts->counts))
      return TFM_FAILED;
    id = (int32_t)counts->seen.count - 1;
    counts->counts[id] = 0;
  }
  counts->counts[id]++;
  return TFM_OK;
}

typedef struct {
  size_t count;
  const char *token;
  size_t length;
} counted_token;

static int by_frequency_then_bytes(const void *a, const void *b) {
  const counted_token *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  size_t common = x->length < y->length ? x->length : y->length;
  int order = memcmp(x->token, y->token, common);
  if (order) return order;
  return (x->length > y->length) - (x->length < y->length);
}

/* Replaces *vocab with the specials and the counted tokens, most frequent
 * first, at most max_count in all (0: no limit). */
static int vocab_from_counts(tfm_vocab *vocab, const token_counts *counts, size_t max_count) {
  size_t n = counts->seen.count - TFM_SPECIALS;
  counted_token *sorted = malloc((n ? n : 1) * sizeof *sorted);
  if (!sorted) return tfm_fail("vocabulary: out of memory");
  for (size_t i = 0; i < n; i++) {
    size_t id = TFM_SPECIALS + i;
    sorted[i] = (counted_token){counts->counts[id], counts->seen.tokens[id],
                                counts->seen.lengths[id]};
  }
  qsort(sorted, n, sizeof *sorted, by_frequency_then_bytes);
  if (max_count && n > max_count - TFM_SPECIALS) n = max_count - TFM_SPECIALS;
  tfm_vocab built;
  int status = vocab_start(&built);
  for (size_t i = 0; i < n && !status; i++)
    status = vocab_append(&built, sorted[i].token, sorted[i].length);
  free(sorted);
  if (status) {
    tfm_vocab_free(&built);
    return status;
  }
  tfm_vocab_free(vocab);
  *vocab = built;
  return TFM_OK;
}

/* --- parallel text lines -------------------------------------------------- */

typedef struct {
  const char *start;
  size_t length;
} token_span;

/* The tokens of one "source<TAB>target" line: source_count source tokens,
 * then the target's. */
typedef struct {
  token_span *spans;
  size_t count, capacity, source_count;
} pair_tokens;

static bool is_reserved(const char *token, size_t length) {
  for (size_t id = 0; id < TFM_SPECIALS; id++)
    if (id != TFM_UNK && strlen(special_tokens[id]) == length &&
        memcmp(special_tokens[id], token, length) == 0)
      return true;
  return false;
}

static int split_side(const char *text, size_t length, const char *side, const char *path,
                      size_t line_number, pair_tokens *tokens) {
  if (length == 0) return tfm_fail("%s:%zu: empty %s", path, line_number, side);
  if (text[0] == ' ') return tfm_fail("%s:%zu: %s starts with a space", path, line_number, side);
  if (text[length - 1] == ' ')
    return tfm_fail("%s:%zu: %s ends with a space", path, line_number, side);
  const char *end = text + length;
  for (const char *token = text; token < end;) {
    const char *space = memchr(token, ' ', (size_t)(end - token));
    size_t token_length = space ? (size_t)(space - token) : (size_t)(end - token);
    if (token_length == 0)
      return tfm_fail("%s:%zu: two spaces in a row in the %s", path, line_number, side);
    if (is_reserved(token, token_length))
      return tfm_fail("%s:%zu: the %s uses the reserved token %.*s", path, line_number, side,
                      (int)token_length, token);
    if (grow((void **)&tokens->spans, &tokens->capacity, tokens->count + 1,
             sizeof *tokens->spans))
      return TFM_FAILED;
    tokens->spans[tokens->count++] = (token_span){token, token_length};
    token += token_length + 1;
  }
  return TFM_OK;
}

static int parse_pair_line(const char *line, size_t length, const char *path,
                           size_t line_number, pair_tokens *tokens) {
  tokens->count = tokens->source_count = 0;
  if (length == 0) return tfm_fail("%s:%zu: empty line", path, line_number);
  if (memchr(line, '\0', length))
    return tfm_fail("%s:%zu: contains a NUL byte (not a text file?)", path, line_number);
  if (line[length - 1] == '\r')
    return tfm_fail("%s:%zu: line ends with a carriage return (CRLF line endings)", path,
                    line_number);
  const char *tab = memchr(line, '\t', length);
  if (!tab) return tfm_fail("%s:%zu: no tab between source and target", path, line_number);
  size_t source_length = (size_t)(tab - line), target_length = length - source_length - 1;
  if (memchr(tab + 1, '\t', target_length))
    return tfm_fail("%s:%zu: more than one tab", path, line_number);
  if (split_side(line, source_length, "source", path, line_number, tokens)) return TFM_FAILED;
  tokens->source_count = tokens->count;
  return split_side(tab + 1, target_length, "target", path, line_number, tokens);
}

int tfm_vocab_build_pairs(tfm_vocab *vocab, const char *tsv_path, size_t max_count) {
  if (max_count && max_count < TFM_SPECIALS)
    return tfm_fail("%s: a vocabulary of %zu tokens has no room for the %d specials", tsv_path,
                    max_count, TFM_SPECIALS);
  line_reader reader;
  if (reader_open(&reader, tsv_path)) return TFM_FAILED;
  token_counts counts;
  pair_tokens tokens = {0};
  int status = counts_start(&counts);
  const char *line;
  size_t length;
  while (!status && !(status = reader_next(&reader, &line, &length)) && line) {
    status = parse_pair_line(line, length, tsv_path, reader.line_number, &tokens);
    for (size_t i = 0; i < tokens.count && !status; i++)
      status = count_token(&counts, tokens.spans[i].start, tokens.spans[i].length);
  }
  if (!status && reader.line_number == 0) status = tfm_fail("%s: empty file", tsv_path);
  if (!status) status = vocab_from_counts(vocab, &counts, max_count);
  reader_close(&reader);
  counts_free(&counts);
  free(tokens.spans);
  return status;
}

/* Streams the file (it may be larger than memory) into 256 counts. */
int tfm_vocab_build_bytes(tfm_vocab *vocab, const char *text_path) {
  FILE *file = fopen(text_path, "rb");
  if (!file) return tfm_fail("%s: cannot open: %s", text_path, strerror(errno));
  size_t byte_counts[256] = {0}, size = 0, got;
  unsigned char chunk[65536];
  while ((got = fread(chunk, 1, sizeof chunk, file)) > 0) {
    for (size_t i = 0; i < got; i++) byte_counts[chunk[i]]++;
    size += got;
  }
  int status = ferror(file) ? tfm_fail("%s: read error: %s", text_path, strerror(errno)) : TFM_OK;
  fclose(file);
  if (status) return status;
  if (size == 0) return tfm_fail("%s: empty file", text_path);
  token_counts counts;
  status = counts_start(&counts);
  for (int byte = 0; byte < 256 && !status; byte++) {
    if (!byte_counts[byte]) continue;
    unsigned char token = (unsigned char)byte;
    status = count_token(&counts, &token, 1);
    if (!status) counts.counts[counts.seen.count - 1] = byte_counts[byte];
  }
  if (!status) status = vocab_from_counts(vocab, &counts, 0);
  counts_free(&counts);
  return status;
}

/* --- vocabulary files ----------------------------------------------------- */

static bool needs_escape(unsigned char byte) { return byte <= 0x20 || byte == 0x7f; }

int tfm_vocab_write(const tfm_vocab *vocab, const char *path) {
  FILE *file = fopen(path, "wb");
  if (!file) return tfm_fail("%s: cannot create: %s", path, strerror(errno));
  for (size_t id = 0; id < vocab->count; id++) {
    const unsigned char *token = (const unsigned char *)vocab->tokens[id];
    for (size_t i = 0; i < vocab->lengths[id]; i++) {
      if (token[i] == '\\') fputs("\\\\", file);
      else if (needs_escape(token[i])) fprintf(file, "\\x%02x", token[i]);
      else fputc(token[i], file);
    }
    fputc('\n', file);
  }
  bool failed = ferror(file) != 0;
  if (fclose(file) != 0 || failed) return tfm_fail("%s: write error: %s", path, strerror(errno));
  return TFM_OK;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Undoes tfm_vocab_write's escapes into token (at least length bytes). */
static int unescape_token(const char *line, size_t length, const char *path, size_t line_number,
                          char *token, size_t *token_length) {
  size_t used = 0;
  for (size_t i = 0; i < length; i++) {
    unsigned char byte = (unsigned char)line[i];
    if (needs_escape(byte))
      return tfm_fail("%s:%zu: raw control byte 0x%02x (written as \\x%02x in vocabularies)", path,
                      line_number, byte, byte);
    if (byte != '\\') {
      token[used++] = (char)byte;
    } else if (i + 1 < length && line[i + 1] == '\\') {
      token[used++] = '\\';
      i++;
    } else if (i + 1 < length && line[i + 1] == 'x') {
      int high = i + 2 < length ? hex_digit(line[i + 2]) : -1;
      int low = i + 3 < length ? hex_digit(line[i + 3]) : -1;
      if (high < 0 || low < 0)
        return tfm_fail("%s:%zu: \\x must be followed by two hex digits", path, line_number);
      token[used++] = (char)(high * 16 + low);
      i += 3;
    } else {
      return tfm_fail("%s:%zu: unknown escape (only \\\\ and \\xHH are defined)", path,
                      line_number);
    }
  }
  *token_length = used;
  return TFM_OK;
}

static int check_vocab_line(const tfm_vocab *vocab, const char *token, size_t length,
                            const char *line, size_t line_length, const char *path,
                            size_t line_number) {
  if (length == 0) return tfm_fail("%s:%zu: empty line (tokens are not empty)", path, line_number);
  size_t id = line_number - 1;
  if (id < TFM_SPECIALS) {
    if (length != strlen(special_tokens[id]) || memcmp(token, special_tokens[id], length) != 0)
      return tfm_fail("%s:%zu: expected %s (a vocabulary starts with <pad> <bos> <eos> <unk>)",
                      path, line_number, special_tokens[id]);
    return TFM_OK;
  }
  int32_t first = tfm_vocab_find(vocab, token, length);
  if (first >= 0)
    return tfm_fail("%s:%zu: duplicate token %.*s (first on line %d)", path, line_number,
                    (int)(line_length < 64 ? line_length : 64), line, (int)first + 1);
  return TFM_OK;
}

int tfm_vocab_read(tfm_vocab *vocab, const char *path) {
  line_reader reader;
  if (reader_open(&reader, path)) return TFM_FAILED;
  char *token = malloc(TFM_DATA_MAX_LINE + 1);
  tfm_vocab read = {0};
  int status = token ? TFM_OK : tfm_fail("%s: out of memory", path);
  const char *line;
  size_t length, token_length = 0;
  while (!status && !(status = reader_next(&reader, &line, &length)) && line) {
    status = unescape_token(line, length, path, reader.line_number, token, &token_length);
    if (!status)
      status = check_vocab_line(&read, token, token_length, line, length, path,
                                reader.line_number);
    if (!status) status = vocab_append(&read, token, token_length);
  }
  if (!status && reader.line_number == 0) status = tfm_fail("%s: empty file", path);
  if (!status && read.count < TFM_SPECIALS)
    status = tfm_fail("%s: ends after line %zu; a vocabulary starts with <pad> <bos> <eos> <unk>",
                      path, read.count);
  reader_close(&reader);
  free(token);
  if (status) {
    tfm_vocab_free(&read);
    return status;
  }
  tfm_vocab_free(vocab);
  *vocab = read;
  return TFM_OK;
}

int tfm_vocab_decode(const tfm_vocab *vocab, const int32_t *ids, size_t count,
                     const char *separator, char *text, size_t size, size_t *length) {
  size_t used = 0, separator_length = strlen(separator);
  bool first = true;
  if (size == 0) return tfm_fail("decode: no room for the text");
  for (size_t i = 0; i < count && ids[i] != TFM_EOS; i++) {
    if (ids[i] < 0 || (size_t)ids[i] >= vocab->count)
      return tfm_fail("decode: id %d is outside the vocabulary of %zu tokens", (int)ids[i],
                      vocab->count);
    if (ids[i] == TFM_PAD || ids[i] == TFM_BOS) continue;
    size_t token_length = vocab->lengths[ids[i]], extra = first ? 0 : separator_length;
    if (size - used <= extra + token_length)
      return tfm_fail("decode: the text does not fit in %zu bytes", size);
    memcpy(text + used, separator, extra);
    memcpy(text + used + extra, vocab->tokens[ids[i]], token_length);
    used += extra + token_length;
    first = false;
  }
  text[used] = '\0';
  if (length) *length = used;
  return TFM_OK;
}

/* --- parallel text -------------------------------------------------------- */

/* Allocated lengths of the arrays of a tfm_pairs being loaded. */
typedef struct {
  size_t ids, starts, src_counts;
} pairs_capacity;

/* Appends one pair's ids; unknown tokens become <unk>. */
static int pairs_append(tfm_pairs *pairs, const pair_tokens *tokens, const tfm_vocab *vocab,
                        pairs_capacity *capacity) {
  size_t first = pairs->starts[pairs->count];
  if (grow((void **)&pairs->ids, &capacity->ids, first + tokens->count, sizeof *pairs->ids) ||
      grow((void **)&pairs->src_counts, &capacity->src_counts, pairs->count + 1,
           sizeof *pairs->src_counts) ||
      grow((void **)&pairs->starts, &capacity->starts, pairs->count + 2, sizeof *pairs->starts))
    return TFM_FAILED;
  for (size_t i = 0; i < tokens->count; i++) {
    int32_t id = tfm_vocab_find(vocab, tokens->spans[i].start, tokens->spans[i].length);
    if (id < 0) {
      id = TFM_UNK;
      pairs->unknown_tokens++;
    }
    pairs->ids[first + i] = id;
  }
  pairs->src_counts[pairs->count] = tokens->source_count;
  pairs->count++;
  pairs->starts[pairs->count] = first + tokens->count;
  return TFM_OK;
}

void tfm_pairs_free(tfm_pairs *pairs) {
  free(pairs->ids);
  free(pairs->starts);
  free(pairs->src_counts);
  free(pairs->order);
  *pairs = (tfm_pairs){0};
}

int tfm_pairs_load(tfm_pairs *pairs, const char *path, const tfm_vocab *vocab,
                   size_t src_len, size_t tgt_len) {
  if (src_len == 0 || tgt_len < 2)
    return tfm_fail("%s: src_len %zu and tgt_len %zu leave no room for a pair", path, src_len,
                    tgt_len);
  if (vocab->count < TFM_SPECIALS)
    return tfm_fail("%s: the vocabulary lacks the special tokens", path);
  line_reader reader;
  if (reader_open(&reader, path)) return TFM_FAILED;
  tfm_pairs loaded = {.src_len = src_len, .tgt_len = tgt_len};
  pair_tokens tokens = {0};
  pairs_capacity capacity = {0};
  int status = grow((void **)&loaded.starts, &capacity.starts, 1, sizeof *loaded.starts);
  if (!status) loaded.starts[0] = 0;
  const char *line;
  size_t length;
  while (!status && !(status = reader_next(&reader, &line, &length)) && line) {
    status = parse_pair_line(line, length, path, reader.line_number, &tokens);
    if (status) break;
    if (tokens.source_count > src_len || tokens.count - tokens.source_count + 1 > tgt_len)
      loaded.skipped_too_long++; /* +1: <bos> in tgt_in, <eos> in tgt_out */
    else
      status = pairs_append(&loaded, &tokens, vocab, &capacity);
  }
  if (!status && reader.line_number == 0) status = tfm_fail("%s: empty file", path);
  if (!status && loaded.count == 0)
    status = tfm_fail("%s: none of the %zu pairs fits src_len %zu and tgt_len %zu", path,
                      reader.line_number, src_len, tgt_len);
  if (!status && !(loaded.order = malloc(loaded.count * sizeof *loaded.order)))
    status = tfm_fail("%s: out of memory", path);
  reader_close(&reader);
  free(tokens.spans);
  if (status) {
    tfm_pairs_free(&loaded);
    return status;
  }
  tfm_pairs_free(pairs);
  *pairs = loaded;
  return TFM_OK;
}

size_t tfm_pairs_batch_count(const tfm_pairs *pairs, size_t rows) {
  return rows ? (pairs->count + rows - 1) / rows : 0;
}

static void clear_row(const tfm_pairs *pairs, size_t row, const tfm_pair_batch *batch) {
  if (batch->src) memset(batch->src + row * pairs->src_len, 0, pairs->src_len * sizeof(int32_t));
  if (batch->tgt_in)
    memset(batch->tgt_in + row * pairs->tgt_len, 0, pairs->tgt_len * sizeof(int32_t));
  if (batch->tgt_out)
    memset(batch->tgt_out + row * pairs->tgt_len, 0, pairs->tgt_len * sizeof(int32_t));
}

static void fill_row(const tfm_pairs *pairs, size_t pair, size_t row,
                     const tfm_pair_batch *batch) {
  clear_row(pairs, row, batch);
  const int32_t *source = pairs->ids + pairs->starts[pair];
  size_t source_count = pairs->src_counts[pair];
  const int32_t *target = source + source_count;
  size_t target_count = pairs->starts[pair + 1] - pairs->starts[pair] - source_count;
  if (batch->src) memcpy(batch->src + row * pairs->src_len, source, source_count * sizeof *source);
  if (batch->tgt_in) {
    int32_t *tgt_in = batch->tgt_in + row * pairs->tgt_len;
    tgt_in[0] = TFM_BOS;
    memcpy(tgt_in + 1, target, target_count * sizeof *target);
  }
  if (batch->tgt_out) {
    int32_t *tgt_out = batch->tgt_out + row * pairs->tgt_len;
    memcpy(tgt_out, target, target_count * sizeof *target);
    tgt_out[target_count] = TFM_EOS;
  }
}

int tfm_pairs_train_batch(tfm_pairs *pairs, uint64_t seed, uint64_t step,
                          const tfm_pair_batch *batch) {
  if (pairs->count == 0) return tfm_fail("pairs: none loaded");
  if (batch->rows == 0) return tfm_fail("pairs: a batch needs at least one row");
  uint64_t per_epoch = tfm_pairs_batch_count(pairs, batch->rows);
  uint64_t epoch = step / per_epoch;
  if (!pairs->order_valid || pairs->order_seed != seed || pairs->order_epoch != epoch) {
    tfm_data_shuffle(pairs->order, pairs->count, seed, epoch);
    pairs->order_seed = seed;
    pairs->order_epoch = epoch;
    pairs->order_valid = 1;
  }
  size_t first = (size_t)(step % per_epoch) * batch->rows;
  for (size_t row = 0; row < batch->rows; row++)
    fill_row(pairs, pairs->order[(first + row) % pairs->count], row, batch);
  return TFM_OK;
}

int tfm_pairs_eval_batch(const tfm_pairs *pairs, size_t index, const tfm_pair_batch *batch,
                         size_t *filled) {
  size_t batches = tfm_pairs_batch_count(pairs, batch->rows);
  if (index >= batches)
    return tfm_fail("pairs: batch %zu of %zu (%zu pairs, %zu rows each)", index, batches,
                    pairs->count, batch->rows);
  size_t first = index * batch->rows;
  *filled = 0;
  for (size_t row = 0; row < batch->rows; row++) {
    if (first + row < pairs->count) {
      fill_row(pairs, first + row, row, batch);
      ++*filled;
    } else {
      clear_row(pairs, row, batch);
    }
  }
  return TFM_OK;
}

/* --- character streams ---------------------------------------------------- */

void tfm_chars_free(tfm_chars *chars) {
  free(chars->ids);
  *chars = (tfm_chars){0};
}

int tfm_chars_load(tfm_chars *chars, const char *path, const tfm_vocab *vocab, size_t window,
                   double heldout_fraction) {
  if (window == 0) return tfm_fail("%s: a window of 0 bytes", path);
  if (!(heldout_fraction >= 0 && heldout_fraction < 1))
    return tfm_fail("%s: held-out fraction %g is not in [0, 1)", path, heldout_fraction);
  unsigned char *bytes = NULL;
  size_t size = 0;
  if (read_whole_file(path, &bytes, &size)) return TFM_FAILED;
  tfm_chars loaded = {.window = window, .count = size};
  size_t heldout = (size_t)((double)size * heldout_fraction);
  loaded.train_count = size - heldout;
  int status = TFM_OK;
  if (size == 0) status = tfm_fail("%s: empty file", path);
  else if (loaded.train_count < window + 1)
    status = tfm_fail("%s: %zu bytes to train on, fewer than one window of %zu + 1", path,
                      loaded.train_count, window);
  else if (heldout && heldout < window + 1)
    status = tfm_fail("%s: held-out tail of %zu bytes, fewer than one window of %zu + 1", path,
                      heldout, window);
  else if (!(loaded.ids = malloc(size * sizeof *loaded.ids)))
    status = tfm_fail("%s: out of memory", path);
  if (!status) {
    int32_t byte_ids[256];
    for (int byte = 0; byte < 256; byte++) {
      unsigned char token = (unsigned char)byte;
      byte_ids[byte] = tfm_vocab_find(vocab, &token, 1);
    }
    for (size_t i = 0; i < size; i++) {
      loaded.ids[i] = byte_ids[bytes[i]] >= 0 ? byte_ids[bytes[i]] : TFM_UNK;
      loaded.unknown_bytes += byte_ids[bytes[i]] < 0;
    }
  }
  free(bytes);
  if (status) {
    tfm_chars_free(&loaded);
    return status;
  }
  tfm_chars_free(chars);
  *chars = loaded;
  return TFM_OK;
}

/* tokens and targets of one row: the window + 1 ids from `start`. */
static void fill_window(const tfm_chars *chars, size_t start, size_t row, int32_t *tokens,
                        int32_t *targets) {
  memcpy(tokens + row * chars->window, chars->ids + start, chars->window * sizeof *tokens);
  memcpy(targets + row * chars->window, chars->ids + start + 1, chars->window * sizeof *targets);
}

int tfm_chars_train_batch(const tfm_chars *chars, uint64_t seed, uint64_t step, size_t rows,
                          int32_t *tokens, int32_t *targets) {
  if (!chars->ids) return tfm_fail("chars: none loaded");
  size_t starts = chars->train_count - chars->window; /* windows that end inside training */
  for (size_t row = 0; row < rows; row++)
    fill_window(chars, (size_t)(tfm_data_hash(seed, step, row) % starts), row, tokens, targets);
  return TFM_OK;
}

static size_t eval_windows(const tfm_chars *chars) {
  size_t heldout = chars->count - chars->train_count;
  return heldout ? (heldout - 1) / chars->window : 0;
}

size_t tfm_chars_eval_batch_count(const tfm_chars *chars, size_t rows) {
  return rows ? (eval_windows(chars) + rows - 1) / rows : 0;
}

int tfm_chars_eval_batch(const tfm_chars *chars, size_t index, size_t rows, int32_t *tokens,
                         int32_t *targets, size_t *filled) {
  size_t batches = tfm_chars_eval_batch_count(chars, rows), windows = eval_windows(chars);
  if (index >= batches)
    return tfm_fail("chars: batch %zu of %zu (%zu held-out windows, %zu rows each)", index,
                    batches, windows, rows);
  *filled = 0;
  for (size_t row = 0; row < rows; row++) {
    size_t window = index * rows + row;
    if (window < windows) {
      fill_window(chars, chars->train_count + window * chars->window, row, tokens, targets);
      ++*filled;
    } else {
      memset(tokens + row * chars->window, 0, chars->window * sizeof *tokens);
      memset(targets + row * chars->window, 0, chars->window * sizeof *targets);
    }
  }
  return TFM_OK;
}
