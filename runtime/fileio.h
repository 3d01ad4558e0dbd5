/* Writing files that must survive a crash whole: the checkpoints and the
 * token shards write a temporary file, fsync it, rename it over the path
 * and then sync the folder (fileio.c). */
#ifndef TFMRT_FILEIO_H
#define TFMRT_FILEIO_H

#include <stdint.h>

/* Writes all `size` bytes (retrying short writes and EINTR); 0 or errno. */
int tfm_write_all(int fd, const void *data, uint64_t size);

/* fsyncs the folder that holds path, so a rename into it is on disk;
 * refuses with "path: written, but syncing directory 'D' failed: ...". */
int tfm_sync_directory_of(const char *path);

#endif
