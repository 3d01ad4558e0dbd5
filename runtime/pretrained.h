/* Another tool's checkpoint into a model's params (`--init FILE`): the
 * model's `pretrained NAME { ... }` block is a compiled graph whose inputs
 * are named like the file's tensors and whose outputs are the params it
 * sets, so renames, transposes and splits of fused q/k/v are computed like
 * anything else. The runtime only matches names, checks shapes, converts
 * bf16 and f64 tensors to the f32 the block reads, and copies. */
#ifndef TFMRT_PRETRAINED_H
#define TFMRT_PRETRAINED_H
#include <stddef.h>

#include "model.h"

/* The model's block `name`, or its only one when name is NULL; a clear
 * error when there is none or the name is ambiguous or unknown. */
int tfm_pretrained_find(const tfm_model_info *model, const char *name,
                        const tfm_pretrained_desc **out);

typedef struct {
  size_t tensors_read;   /* of the file, used by the block */
  size_t params_set;     /* of dst, given a value */
  size_t params_kept;    /* of dst, left as they were (the block does not set them) */
  char kept[512];        /* their names, comma-separated, cut short with "..." */
} tfm_pretrained_report;

/* Reads the safetensors file at path, runs the block's graph on its
 * tensors and copies the params it sets into dst. Every tensor the block
 * reads must be in the file with its shape, and every tensor of the file
 * must be read or left out by the block (`_ = source("name")`): otherwise
 * one error names each missing, extra and mis-shaped tensor. */
int tfm_pretrained_load(tfm_graph *dst, const tfm_pretrained_desc *pre, const char *path,
                        tfm_pool *pool, tfm_pretrained_report *report);

#endif
