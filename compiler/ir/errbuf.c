#include "errbuf.h"

#include <stdarg.h>
#include <stdio.h>

bool errbuf_set(char *err, size_t size, const char *fmt, ...) {
  if (size > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
  }
  return false;
}
