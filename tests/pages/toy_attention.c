/* toy_attention OUT.html: the attention page of the self-attention
 * explainer's worked example (SPEC.md): one head over 5 tokens, query rows
 * (0.18, 0.12, 0.40, 0.10, 0.20) and (0.10, 0.08, 0.55, 0.10, 0.17), values
 * 10..50, so that the page must show 30.2 and 31.6 as the rows' outputs. */
#include <stdio.h>

#include "attention_page.h"
#include "tfmrt.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: toy_attention OUT.html\n");
    return 2;
  }
  static const char *const words[] = {"the", "cat", "sat", "on", "mats"};
  static const size_t lengths[] = {3, 3, 3, 2, 4};
  static const float weights[] = {0.18f, 0.12f, 0.40f, 0.10f, 0.20f,
                                  0.10f, 0.08f, 0.55f, 0.10f, 0.17f};
  static const double values[] = {10, 20, 30, 40, 50};
  tfm_attention_map map = {.name = "toy.weights", .queries = "queries", .keys = "text",
                           .heads = 1, .weights = weights, .head_stride = 10, .row_stride = 5};
  tfm_attention_page page = {.title = "toy attention", .subtitle = "the explainer's worked example",
                             .num_sequences = 2, .num_maps = 1, .maps = &map, .values = values,
                             .num_values = 5, .select_head = -1};
  page.sequences[0] = (tfm_page_sequence){"queries", 2, words, lengths};
  page.sequences[1] = (tfm_page_sequence){"text", 5, words, lengths};
  if (tfm_attention_page_write(&page, argv[1])) {
    fprintf(stderr, "toy_attention: %s\n", tfm_error());
    return 1;
  }
  return 0;
}
