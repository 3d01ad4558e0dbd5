/* Minimal checking helpers shared by the runtime tests (no framework). */
#ifndef TFMRT_TEST_CHECK_H
#define TFMRT_TEST_CHECK_H

#include <stddef.h>
#include <stdio.h>

extern int check_failures;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
      check_failures++;                                                               \
    }                                                                                 \
  } while (0)

/* A runtime call that must succeed; prints tfm_error() when it does not. */
#define CHECK_OK(call)                                                                \
  do {                                                                                \
    if ((call) != TFM_OK) {                                                           \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,            \
              tfm_error());                                                           \
      check_failures++;                                                               \
    }                                                                                 \
  } while (0)

/* A runtime call that must fail with a message naming `path` (when not NULL)
 * and containing `reason`. */
#define CHECK_REFUSED(call, path, reason) \
  check_refused((call), (path), (reason), #call, __FILE__, __LINE__)

void check_refused(int status, const char *path, const char *reason, const char *call,
                   const char *file, int line);

/* 0 when every check passed, else 1 (after a summary line). */
int check_result(const char *test);

/* A fresh directory for this test's files, removed (with its files) by
 * scratch_dir_remove(); paths inside it go into caller-provided buffers. */
const char *scratch_dir(void);
void scratch_path(char *buf, size_t size, const char *name);
void scratch_dir_remove(void);

int write_file(const char *path, const void *data, size_t size);
unsigned char *read_file(const char *path, size_t *size); /* malloc'd; NULL on failure */

#endif
