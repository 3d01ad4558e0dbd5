/* The base protocol of the Language Server Protocol: each message is a
 * header ("Content-Length: N", other fields ignored, then an empty line)
 * and N bytes of JSON. */
#ifndef TFM_LSP_FRAME_H
#define TFM_LSP_FRAME_H
#include <stddef.h>
#include <stdio.h>

enum { FRAME_MAX_HEADER = 8192, FRAME_MAX_BODY = 64 << 20 };

typedef enum FrameStatus {
  FRAME_OK,     /* *body (malloc'd, NUL-terminated) holds *len bytes */
  FRAME_EOF,    /* the stream ended between messages */
  FRAME_BAD     /* a header without a usable Content-Length (error says why);
                   the header was consumed and reading can go on */
} FrameStatus;

FrameStatus frame_read(FILE *in, char **body, size_t *len, char *error, size_t error_size);
/* Writes one message and flushes; nonzero when the stream failed. */
int frame_write(FILE *out, const char *body, size_t len);

#endif
