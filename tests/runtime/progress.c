/* The progress line's format, and its printing. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "tfmrt.h"

#include <string.h>

static void check_line(uint64_t step, uint64_t total, double loss, double lr, double rate,
                       double eta, const char *expected) {
  char line[256];
  CHECK_OK(tfm_progress_format(line, sizeof line, step, total, loss, lr, rate, eta));
  if (strcmp(line, expected) != 0) {
    fprintf(stderr, "progress line \"%s\", expected \"%s\"\n", line, expected);
    check_failures++;
  }
}

int main(void) {
  check_line(120, 1000, 3.45214, 1.234e-4, 12345, 3723.4,
             "step 120/1000  loss 3.4521  lr 1.234e-04  12.3k tok/s  ETA 1:02:03");
  check_line(1, 10, 0.5, 1, 999, 59.6,
             "step 1/10  loss 0.5000  lr 1.000e+00  999 tok/s  ETA 0:01:00");
  check_line(5, 5, 0, 0, 2.5e6, 0, "step 5/5  loss 0.0000  lr 0.000e+00  2.50M tok/s  ETA 0:00:00");
  check_line(0, 5, 7, 1e-3, 0, -1, "step 0/5  loss 7.0000  lr 1.000e-03  0 tok/s  ETA --");
  char tiny[8];
  CHECK_REFUSED(tfm_progress_format(tiny, sizeof tiny, 1, 2, 0, 0, 0, 0), NULL, "does not fit");

  FILE *out = tmpfile();
  CHECK(out != NULL);
  if (!out) return check_result("progress");
  tfm_progress progress;
  CHECK_OK(tfm_progress_start(&progress, out, 0, 10));
  CHECK_OK(tfm_progress_report(&progress, 1, 2.25, 5e-4, 4096));
  CHECK_OK(tfm_progress_report(&progress, 2, 2.0, 5e-4, 4096));
  CHECK(progress.tokens == 8192);
  rewind(out);
  char first[256] = "", second[256] = "";
  CHECK(fgets(first, sizeof first, out) && fgets(second, sizeof second, out));
  CHECK(strncmp(first, "step 1/10  loss 2.2500  lr 5.000e-04  ", 38) == 0);
  CHECK(strncmp(second, "step 2/10  loss 2.0000  lr 5.000e-04  ", 38) == 0);
  CHECK(strstr(second, " tok/s  ETA ") && second[strlen(second) - 1] == '\n');
  fclose(out);

  /* The bar of a job in bytes (tokenize): a line per tenth when not a terminal. */
  char bar[256];
  CHECK_OK(tfm_progress_bar_format(bar, sizeof bar, "tokenize", 45, 100, 12.3e6));
  CHECK(!strcmp(bar, "tokenize [#############.................]  45%  12.3 MB/s  ETA 0:00:00"));
  CHECK_OK(tfm_progress_bar_format(bar, sizeof bar, "t", 0, 7200, 1));
  CHECK(!strcmp(bar, "t [..............................]   0%  0.0 MB/s  ETA 2:00:00"));
  out = tmpfile();
  if (!out) return check_result("progress");
  tfm_progress_bar_state state;
  tfm_progress_bar_start(&state, out, "tokenize", 1000);
  for (uint64_t done = 0; done <= 1000; done += 25) tfm_progress_bar(&state, done);
  rewind(out);
  int lines = 0;
  for (char line[256]; fgets(line, sizeof line, out);) lines++;
  CHECK(lines == 11); /* 0%, 10%, ..., 100% */
  fclose(out);
  return check_result("progress");
}
