#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include "tfmrt.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int check_failures;

void check_refused(int status, const char *path, const char *reason, const char *call,
                   const char *file, int line) {
  const char *message = tfm_error();
  if (status == TFM_OK) {
    fprintf(stderr, "%s:%d: %s succeeded; expected a refusal with \"%s\"\n", file, line, call,
            reason);
    check_failures++;
  } else if ((path && !strstr(message, path)) || !strstr(message, reason)) {
    fprintf(stderr, "%s:%d: %s refused with \"%s\"; expected it to name %s%s and say \"%s\"\n",
            file, line, call, message, path ? "the file " : "", path ? path : "", reason);
    check_failures++;
  }
}

int check_result(const char *test) {
  if (check_failures) fprintf(stderr, "%s: %d check(s) failed\n", test, check_failures);
  else printf("%s: all checks passed\n", test);
  return check_failures ? 1 : 0;
}

static char dir[256];

const char *scratch_dir(void) {
  if (!dir[0]) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tfmrt-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
      perror("mkdtemp");
      exit(1);
    }
  }
  return dir;
}

void scratch_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", scratch_dir(), name);
}

void scratch_dir_remove(void) {
  if (!dir[0]) return;
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *entry;
    while ((entry = readdir(d))) {
      if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
      char path[512];
      snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
  dir[0] = '\0';
}

int write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) return 1;
  size_t written = size ? fwrite(data, 1, size, f) : 0;
  return fclose(f) != 0 || written != size;
}

unsigned char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t capacity = 4096, len = 0;
  unsigned char *data = malloc(capacity);
  size_t n;
  while (data && (n = fread(data + len, 1, capacity - len, f)) > 0) {
    len += n;
    if (len == capacity) {
      unsigned char *grown = realloc(data, capacity *= 2);
      if (!grown) free(data);
      data = grown;
    }
  }
  fclose(f);
  *size = len;
  return data;
}
