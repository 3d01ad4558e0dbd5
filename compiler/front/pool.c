#include "pool.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Chunk {
  struct Chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} Chunk;

static Chunk *chunks;

void *pool_alloc(size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (!chunks || chunks->cap - chunks->used < size) {
    size_t cap = size > (1u << 20) ? size : (1u << 20);
    Chunk *c = malloc(sizeof(Chunk) + cap);
    if (!c) {
      fprintf(stderr, "tfmc: out of memory\n");
      abort();
    }
    c->next = chunks;
    c->used = 0;
    c->cap = cap;
    chunks = c;
  }
  void *p = chunks->data + chunks->used;
  chunks->used += size;
  memset(p, 0, size);
  return p;
}

char *pool_strndup(const char *s, size_t n) {
  char *p = pool_alloc(n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *pool_strdup(const char *s) { return pool_strndup(s, strlen(s)); }

char *pool_vprintf(const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *p = pool_alloc((size_t)n + 1);
  vsnprintf(p, (size_t)n + 1, fmt, again);
  va_end(again);
  return p;
}

char *pool_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *p = pool_vprintf(fmt, ap);
  va_end(ap);
  return p;
}

void pool_reset(void) {
  while (chunks) {
    Chunk *next = chunks->next;
    free(chunks);
    chunks = next;
  }
}

void vec_push(PtrVec *v, void *item) {
  if (v->len == v->cap) {
    int cap = v->cap ? v->cap * 2 : 4;
    void **items = pool_alloc(sizeof(void *) * (size_t)cap);
    if (v->len) memcpy(items, v->items, sizeof(void *) * (size_t)v->len);
    v->items = items;
    v->cap = cap;
  }
  v->items[v->len++] = item;
}

static unsigned hash_str(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

void *map_get(const NameMap *m, const char *key) {
  if (!m->cap) return NULL;
  for (unsigned i = hash_str(key) & (unsigned)(m->cap - 1);; i = (i + 1) & (unsigned)(m->cap - 1)) {
    if (!m->keys[i]) return NULL;
    if (strcmp(m->keys[i], key) == 0) return m->vals[i];
  }
}

void map_put(NameMap *m, const char *key, void *val) {
  if ((m->len + 1) * 2 > m->cap) {
    NameMap bigger = {0};
    bigger.cap = m->cap ? m->cap * 2 : 8;
    bigger.keys = pool_alloc(sizeof(char *) * (size_t)bigger.cap);
    bigger.vals = pool_alloc(sizeof(void *) * (size_t)bigger.cap);
    for (int i = 0; i < m->cap; i++)
      if (m->keys[i]) map_put(&bigger, m->keys[i], m->vals[i]);
    *m = bigger;
  }
  unsigned i = hash_str(key) & (unsigned)(m->cap - 1);
  while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (unsigned)(m->cap - 1);
  if (!m->keys[i]) m->len++;
  m->keys[i] = key;
  m->vals[i] = val;
}
