#include "frame.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One header line without its line break ("\r\n" or "\n"); -1 at the end of
 * the stream before any byte, -2 when the line is too long (the rest of it
 * is skipped). */
static int read_line(FILE *in, char *line, size_t size) {
  size_t n = 0;
  int c, too_long = 0;
  while ((c = getc(in)) != EOF && c != '\n') {
    if (n + 1 < size) line[n++] = (char)c;
    else too_long = 1;
  }
  if (c == EOF && n == 0 && !too_long) return -1;
  if (n && line[n - 1] == '\r') n--;
  line[n] = 0;
  return too_long ? -2 : (int)n;
}

FrameStatus frame_read(FILE *in, char **body, size_t *len, char *error, size_t error_size) {
  char line[FRAME_MAX_HEADER];
  long long length = -1;
  int lines = 0, bad = 0;
  *body = NULL;
  *len = 0;
  for (;;) {
    int n = read_line(in, line, sizeof line);
    if (n == -1) {
      if (lines == 0) return FRAME_EOF;
      snprintf(error, error_size, "the stream ended inside a message header");
      return FRAME_EOF;
    }
    if (n == 0 && lines == 0) continue; /* blank lines between messages */
    if (n == 0) break;
    lines++;
    if (n == -2) {
      if (!bad) snprintf(error, error_size, "a header line longer than %d bytes", FRAME_MAX_HEADER);
      bad = 1;
      continue;
    }
    if (strncasecmp(line, "Content-Length:", 15)) continue; /* Content-Type and others */
    const char *v = line + 15;
    while (*v == ' ' || *v == '\t') v++;
    char *end;
    errno = 0;
    long long parsed = strtoll(v, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (!isdigit((unsigned char)*v) || *end || errno || parsed > FRAME_MAX_BODY) {
      if (!bad) snprintf(error, error_size, "bad Content-Length '%.64s' (a byte count up to %d)", v,
                         FRAME_MAX_BODY);
      bad = 1;
    } else {
      length = parsed;
    }
  }
  if (!bad && length < 0) {
    snprintf(error, error_size, "a message header without Content-Length");
    bad = 1;
  }
  if (bad) return FRAME_BAD;
  char *text = malloc((size_t)length + 1);
  if (!text) {
    snprintf(error, error_size, "out of memory for a %lld-byte message", length);
    return FRAME_BAD;
  }
  size_t got = fread(text, 1, (size_t)length, in);
  if (got != (size_t)length) {
    free(text);
    snprintf(error, error_size, "the stream ended inside a message (%zu of %lld bytes)", got, length);
    return FRAME_EOF;
  }
  text[length] = 0;
  *body = text;
  *len = (size_t)length;
  return FRAME_OK;
}

int frame_write(FILE *out, const char *body, size_t len) {
  fprintf(out, "Content-Length: %zu\r\n\r\n", len);
  fwrite(body, 1, len, out);
  return fflush(out) || ferror(out);
}
