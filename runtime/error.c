/* The thread-local last error behind tfm_error(). */
#include "tfmrt.h"

#include <stdarg.h>

static _Thread_local char last_error[1024];

const char *tfm_error(void) { return last_error; }

int tfm_fail(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, args);
  va_end(args);
  return TFM_FAILED;
}

int tfm_fail_file(const char *path, const char *fmt, ...) {
  char reason[896];
  va_list args;
  va_start(args, fmt);
  vsnprintf(reason, sizeof reason, fmt, args);
  va_end(args);
  return tfm_fail("%s: %s", path, reason);
}
