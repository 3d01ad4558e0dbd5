/* tfmc's side of the library header: a file and diagnostics around
 * header_write. */
#include "build_header.h"

#include <stdio.h>

#include "diag.h"

int build_write_header(const char *path, const HeaderModel *model) {
  FILE *f = fopen(path, "w");
  if (!f) {
    diag_error_noloc("cannot write %s", path);
    return 1;
  }
  char err[512];
  bool ok = header_write(f, model, err, sizeof err);
  if (fclose(f) != 0 && ok) {
    snprintf(err, sizeof err, "closing the file failed");
    ok = false;
  }
  if (!ok) {
    diag_error_noloc("%s: %s", path, err);
    remove(path);
  }
  return ok ? 0 : 1;
}
