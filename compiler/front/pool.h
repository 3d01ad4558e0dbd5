/* A bump allocator for everything the front end builds (AST, values, scopes).
 * The front end never frees individual objects: one pool_reset() releases a
 * whole compilation, which keeps error paths simple and leak-free. */
#ifndef TFM_POOL_H
#define TFM_POOL_H
#include <stdarg.h>
#include <stddef.h>

void *pool_alloc(size_t size);            /* zeroed, 16-byte aligned; aborts on OOM */
char *pool_strdup(const char *s);
char *pool_strndup(const char *s, size_t n);
char *pool_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *pool_vprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
void pool_reset(void);                    /* frees everything allocated so far */

/* A growable array of pointers living in the pool. */
typedef struct PtrVec {
  void **items;
  int len, cap;
} PtrVec;
void vec_push(PtrVec *v, void *item);



/* A string-keyed hash map (open addressing) living in the pool. Keys are not
 * copied: they must live in the pool or longer. */
typedef struct NameMap {
  const char **keys;
  void **vals;
  int len, cap;
} NameMap;
void *map_get(const NameMap *m, const char *key);
void map_put(NameMap *m, const char *key, void *val);
#endif
