/* The server's allocations: running out of memory ends it with a message,
 * as the front end's pool does (an editor restarts a server that exits). */
#ifndef TFM_LSP_CHECKED_H
#define TFM_LSP_CHECKED_H
#include <stdio.h>
#include <stdlib.h>

static inline void *checked(void *p) {
  if (!p) {
    fprintf(stderr, "tfmc lsp: out of memory\n");
    abort();
  }
  return p;
}

#endif
