/* --profile's accounting: nothing is counted before tfm_profile_start;
 * after it, each kernel's time is added by the index tfm_kernel_for gets,
 * rows come slowest first, an index outside the table is dropped, and the
 * total line has the runs of the graph. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "profile.h"

#include <stdlib.h>
#include <string.h>

/* Busy for ctx's microseconds, so the kernels' order by time is certain. */
static void spin(void *ctx, size_t begin, size_t end) {
  (void)begin, (void)end;
  int64_t until = tfm_profile_now_ns() + *(const int64_t *)ctx * 1000;
  while (tfm_profile_now_ns() < until) continue;
}

static int64_t short_us = 1000, long_us = 4000;

static void run(uint8_t *persistent, uint8_t *scratch, tfm_pool *pool) {
  (void)persistent, (void)scratch;
  tfm_kernel_for(pool, 1, spin, &short_us, 0);
  tfm_kernel_for(pool, 1, spin, &long_us, 1);
  tfm_kernel_for(pool, 1, spin, &short_us, 7); /* not in the table: dropped */
}

static const tfm_kernel_desc kernels[] = {{"loop add f32[4] (1 op)", 4, 48},
                                          {"dot dot f32[2,2] (1 op)", 16, 48}};
static const tfm_graph_desc desc = {"t", 0, 64, 0, NULL, run, NULL, 2, kernels};

static char *report(void) {
  FILE *f = tmpfile();
  if (!f) return NULL;
  tfm_profile_report(f);
  long size = ftell(f);
  char *text = calloc((size_t)size + 1, 1);
  rewind(f);
  if (text && fread(text, 1, (size_t)size, f) != (size_t)size) text[0] = '\0';
  fclose(f);
  return text;
}

int main(void) {
  tfm_graph g;
  CHECK_OK(tfm_graph_open(&g, &desc));
  tfm_graph_run(&g, NULL);
  char *before = report();
  CHECK(before && before[0] == '\0');
  free(before);
  tfm_profile_start();
  tfm_graph_run(&g, NULL);
  tfm_graph_run(&g, NULL);
  char *text = report();
  CHECK(text != NULL);
  if (text) {
    fputs(text, stderr);
    CHECK(strstr(text, "profile: t graph, 2 runs, 2 kernels\n") != NULL);
    char *slow = strstr(text, "\n     1      2 "), *fast = strstr(text, "\n     0      2 ");
    CHECK(slow && fast && slow < fast);
    CHECK(strstr(text, "dot dot f32[2,2] (1 op)\n") != NULL);
    CHECK(strstr(text, "\n total      2 ") != NULL);
    CHECK(strstr(text, "\n     7 ") == NULL);
  }
  free(text);
  tfm_graph_close(&g);
  return check_result("profile");
}
