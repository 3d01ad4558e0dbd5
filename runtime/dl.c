#include "dl.h"

#include <dlfcn.h>
#include <string.h>

int tfm_dl_symbol(void *library, const char *name, void *field) {
  void *symbol = dlsym(library, name);
  if (!symbol) return 1;
  memcpy(field, &symbol, sizeof symbol); /* ISO C: no void * to function pointer cast */
  return 0;
}
