/* The contract between a compiled model and the runtime.
 *
 * tfmc compiles up to five graphs of a model (init, train, forward, inspect,
 * decode), and one for each of its pretrained blocks (and, with
 * --data-parallel, the training step in parts); for
 * each, the generated object defines its kernels, its entry points and a
 * tfm_graph_desc that names every buffer the runtime touches. The object
 * also defines `tfm_model`, the tfm_model_info tying them together. The
 * runtime only moves bytes by these descriptions: no math. */
#ifndef TFM_MODEL_H
#define TFM_MODEL_H
#include <stdint.h>

#include "tfmrt.h"

typedef enum {
  TFM_ROLE_INPUT = 0,  /* written by the runtime before each run */
  TFM_ROLE_PARAM = 1,  /* persistent; saved in checkpoints */
  TFM_ROLE_STATE = 2,  /* persistent optimizer state; saved in checkpoints */
  TFM_ROLE_OUTPUT = 3  /* read by the runtime after each run */
} tfm_role;

typedef enum { TFM_REGION_PERSISTENT = 0, TFM_REGION_SCRATCH = 1 } tfm_region;

typedef struct tfm_buffer_desc {
  const char *name;    /* dotted parameter name, input or output name */
  int32_t role;        /* tfm_role */
  int32_t dtype;       /* tfm_dtype */
  int32_t region;      /* tfm_region */
  int32_t rank;
  int64_t offset;      /* bytes into its region */
  int64_t shape[TFM_MAX_RANK];
  int32_t ready;       /* an output: the index of the kernel that writes its final value
                        * (-1: none does, e.g. a leaf passed through); else -1. The
                        * data-parallel loop sends a gradient as soon as it is ready. */
} tfm_buffer_desc;

/* One kernel of a graph, for --profile: its index in the graph's run is its
 * position in tfm_graph_desc.kernels. */
typedef struct tfm_kernel_desc {
  const char *label;    /* kind, root op and its type, e.g. "dot matmul f32[16,128,1024] (2 ops)" */
  int64_t flops, bytes; /* nominal, as `tfmc emit kernels` counts them */
} tfm_kernel_desc;

typedef void (*tfm_run_fn)(uint8_t *persistent, uint8_t *scratch, tfm_pool *pool);
typedef void (*tfm_update_fn)(uint8_t *persistent, uint8_t *scratch);

typedef struct tfm_graph_desc {
  const char *name;    /* "init", "train", "forward", "inspect" or "decode" */
  int64_t persistent_bytes, scratch_bytes;
  int32_t num_buffers;
  const tfm_buffer_desc *buffers;
  tfm_run_fn run;      /* every kernel, in order */
  tfm_update_fn update; /* writes each update's value into its param or state */
  int32_t num_kernels;
  const tfm_kernel_desc *kernels;
} tfm_graph_desc;

/* A `pretrained NAME { ... }` block of the model: its graph reads another
 * tool's checkpoint (inputs named like that file's tensors) and outputs
 * the params it sets (named like them); `ignored` are the file's tensors
 * it leaves out on purpose. See pretrained.h. */
typedef struct tfm_pretrained_desc {
  const char *name;
  const tfm_graph_desc *graph;
  int32_t num_ignored;
  const char *const *ignored;
} tfm_pretrained_desc;

typedef struct tfm_model_info {
  const char *name;               /* the model's name in the .tfm file */
  const char *source;             /* the .tfm file it was compiled from */
  int32_t num_config;
  const char *const *config_keys; /* the config after overrides, as text */
  const char *const *config_values;
  const tfm_graph_desc *init;     /* may be NULL (a model without params) */
  const tfm_graph_desc *train;    /* NULL when the model has no train block */
  const tfm_graph_desc *forward;
  const tfm_graph_desc *inspect;  /* forward plus the probes (a layer's `output`s);
                                     NULL when the model has none */
  /* tfmc build --data-parallel: the train graph's step in two parts, the
   * gradients ("grad.<param>" outputs) and their application (the same
   * names as inputs; clipping and the optimizer), for train under mpirun
   * (dist.h); NULL otherwise. */
  const tfm_graph_desc *train_grad;
  const tfm_graph_desc *train_apply;
  int32_t cuda;                   /* built with --target cuda: the graphs run on a GPU */
  int32_t num_pretrained;
  const tfm_pretrained_desc *pretrained;
  /* --data-parallel too, for optimizer-state sharding (train --zero 1):
   * the norm of the gradients for clipping ("grad.<param>" inputs, output
   * "grad_norm"; NULL without clipping) and the update of each param in a
   * graph of its own (input "grad.<param>", and "grad_norm" when clipping),
   * so that a rank opens, and holds the moments of, the params it owns. */
  const tfm_graph_desc *train_norm;
  int32_t num_train_apply_param;
  const tfm_graph_desc *const *train_apply_param;
  const tfm_graph_desc *decode;   /* one token per batch row: inputs tokens [B, 1] and
                                     pos [B], the key/value caches as states, output
                                     logits [B, 1, V]; NULL when the model has none */
  int32_t cpu_dispatch;           /* built with --cpu generic-dispatch: each graph's code
                                     for several x86-64 levels, one chosen at start-up
                                     (tfmrt.h, tfm_cpu_variant) */
} tfm_model_info;

/* --- a graph instance: its arena and buffers ------------------------------- */
typedef struct tfm_graph {
  const tfm_graph_desc *desc;
  tfm_arena arena;
} tfm_graph;

int tfm_graph_open(tfm_graph *g, const tfm_graph_desc *desc);
void tfm_graph_close(tfm_graph *g);
/* The buffer with this name and role, or NULL (desc_out may be NULL).
 * An input is read and an output written at every run. A GPU graph keeps
 * its params and states on the device (gpu.h): a param or state buffer
 * holds their values as of this call and what the caller writes there
 * goes to the device at the next run, so ask again after a run. */
void *tfm_graph_buffer(tfm_graph *g, const char *name, tfm_role role,
                       const tfm_buffer_desc **desc_out);
int64_t tfm_buffer_numel(const tfm_buffer_desc *b);
int64_t tfm_buffer_bytes(const tfm_buffer_desc *b);
void tfm_graph_run(tfm_graph *g, tfm_pool *pool);
void tfm_graph_update(tfm_graph *g);
/* tfm_graph_run then tfm_graph_update, with nothing between: a training
 * step. On the GPU the two are one CUDA graph launch (gpu.h). */
void tfm_graph_step(tfm_graph *g, tfm_pool *pool);
/* Copies every param (and state) of src into the same-named one of dst;
 * refuses a shape or dtype mismatch. Buffers dst lacks are skipped. */
int tfm_graph_copy_params(tfm_graph *dst, const tfm_graph *src);
/* Copies the outputs of an init graph into the same-named params of dst. */
int tfm_graph_take_init(tfm_graph *dst, const tfm_graph *init);
/* Checkpoints: every param and state, by name, in safetensors. */
int tfm_graph_save(const tfm_graph *g, const char *path, const tfm_meta *meta);
int tfm_graph_load(tfm_graph *g, const char *path, tfm_meta *meta_out);
/* Loads each checkpoint into g (validated as tfm_graph_load does) and leaves
 * in g's params their element-wise mean (accumulated in double); the state
 * and `meta` (may be NULL) are the last file's. See average.c. */
int tfm_graph_average(tfm_graph *g, const char *const *paths, size_t count, tfm_meta *meta);

#endif
