/* libFuzzer target for the language server's message layer: any bytes on
 * its input (frames, headers, JSON, requests, edits) must end in answers and
 * errors, never a crash, a hang or a leak. The server is initialized first
 * so that the input reaches the document and request handlers; documents
 * are checked under the fuzz folder's path, where no import resolves. */
#define _POSIX_C_SOURCE 200809L /* fmemopen */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char initialize[] =
    "Content-Length: 58\r\n\r\n"
    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  size_t n = sizeof initialize - 1;
  char *input = malloc(n + size + 1);
  memcpy(input, initialize, n);
  memcpy(input + n, data, size);
  FILE *in = fmemopen(input, n + size, "r");
  if (in) {
    CheckSettings settings = {0};
    lsp_serve(in, sink, &settings);
    fclose(in);
  }
  free(input);
  return 0;
}
