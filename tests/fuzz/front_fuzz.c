/* libFuzzer target for the front end: any bytes as a .tfm file must end in
 * diagnostics or a checked model, never a crash, a hang or a leak. */
#include <stdint.h>
#include <stdio.h>

#include "diag.h"
#include "sema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  diag_set_stream(sink);
  FrontOptions opt = {.path = "fuzz.tfm", .text = (const char *)data, .text_len = size,
                      .training = 1};
  sema_check(&opt);
  front_reset();
  return 0;
}
