/* See fileio.h. */
#define _POSIX_C_SOURCE 200809L
#include "fileio.h"

#include "tfmrt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tfm_write_all(int fd, const void *data, uint64_t size) {
  const unsigned char *p = data;
  while (size > 0) {
    size_t chunk = size < (1u << 30) ? (size_t)size : (1u << 30);
    ssize_t n = write(fd, p, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    p += n;
    size -= (uint64_t)n;
  }
  return 0;
}

int tfm_sync_directory_of(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir;
  if (!slash) dir = strdup(".");
  else if (slash == path) dir = strdup("/");
  else dir = strndup(path, (size_t)(slash - path));
  if (!dir) return tfm_fail("%s: out of memory", path);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int status = TFM_OK;
  if (fd < 0 || fsync(fd) != 0)
    status = tfm_fail("%s: written, but syncing directory '%s' failed: %s", path, dir,
                      strerror(errno));
  if (fd >= 0) close(fd);
  free(dir);
  return status;
}
