/* The attention page: one self-contained HTML file (attention_page.html,
 * embedded at build time) showing attention weights as heat-maps with the
 * tokens on both axes, a selector of map and head (or their average), and
 * a query token's row of weights as numbers when it is clicked. */
#ifndef TFMRT_ATTENTION_PAGE_H
#define TFMRT_ATTENTION_PAGE_H
#include <stddef.h>

enum { TFM_PAGE_MAX_SEQUENCES = 4 };

/* A named token sequence shown on an axis ("text", "source", "target"). */
typedef struct tfm_page_sequence {
  const char *name;
  size_t count;
  const char *const *tokens;  /* count strings (bytes; see json_write_string) */
  const size_t *lengths;      /* their byte lengths */
} tfm_page_sequence;

/* weights[h * head_stride + q * row_stride + k] for h < heads, q < the
 * query sequence's count, k < the key sequence's: a model output or probe
 * read in place, its padding positions left out. */
typedef struct tfm_attention_map {
  const char *name;           /* e.g. "block.0.attn.weights" */
  const char *queries, *keys; /* names of sequences of the page */
  size_t heads;
  const float *weights;
  size_t head_stride, row_stride;
} tfm_attention_map;

typedef struct tfm_attention_page {
  const char *title, *subtitle;
  size_t num_sequences;
  tfm_page_sequence sequences[TFM_PAGE_MAX_SEQUENCES];
  size_t num_maps;
  const tfm_attention_map *maps;
  const double *values;       /* or NULL: a value per key, shown as the row's weighted sum */
  size_t num_values;
  size_t select_map;          /* what the page opens on */
  long select_head;           /* -1: the average over heads */
  size_t select_query;
} tfm_attention_page;

/* Writes the page to path (atomically: a temporary file renamed). */
int tfm_attention_page_write(const tfm_attention_page *page, const char *path);

#endif
