/* The C header of a model built as a library, for programs that embed it:
 * the runtime's C API (declared in the header itself, so that it stands
 * alone), `tfm_model`, each graph's descriptor, and for each graph a
 * listing of its buffers (name, role, dtype, shape) with a typed accessor
 * and an element count for every input and output:
 *   static inline float *gpt_train_loss(tfm_graph *g);
 *   #define GPT_TRAIN_TOKENS_NUMEL 12
 * It is text for the user, not generated code, so it is written as such. */
#ifndef TFM_HEADER_H
#define TFM_HEADER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kernel.h"

typedef struct HeaderGraph {
  const char *name;   /* "train", "forward": the accessors' middle part */
  const char *prefix; /* the symbol prefix it was compiled and described with */
  const KernelPlan *plan;
} HeaderGraph;

typedef struct HeaderModel {
  const char *name;   /* the model's name: the accessors' first part */
  const char *source; /* the .tfm file, for the opening comment */
  int num_graphs;
  const HeaderGraph *graphs;
} HeaderModel;

/* Writes the header; false with a message in err when two accessors of a
 * graph would have the same C name, or when out of memory or writing fails. */
bool header_write(FILE *out, const HeaderModel *model, char *err, size_t err_size);

#endif
