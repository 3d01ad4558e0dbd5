/* The descriptions of runtime/model.h, emitted into compiled modules. */
#ifndef TFM_DESCRIBE_H
#define TFM_DESCRIBE_H
#include <stdbool.h>
#include <stddef.h>

#include "cpu.h"

/* The roles of runtime/model.h (tfm_role). */
typedef enum DescribeRole {
  DESCRIBE_INPUT,
  DESCRIBE_PARAM,
  DESCRIBE_STATE,
  DESCRIBE_OUTPUT
} DescribeRole;

typedef struct DescribedBuffer {
  const char *name; /* the leaf's or the output's name */
  DescribeRole role;
  GraphId node;
} DescribedBuffer;

/* The buffers PREFIX_desc lists, in its order: inputs, params, states,
 * then outputs, each only when it has a buffer. Malloc'd (*count entries),
 * NULL when out of memory. */
DescribedBuffer *describe_buffers(const KernelPlan *plan, int *count);

/* Adds PREFIX_desc (a tfm_graph_desc) for the graph compiled in `module`
 * from `plan` with that symbol prefix. */
bool describe_graph(CpuModule *module, const KernelPlan *plan, const char *prefix,
                    const char *graph_name, char *err, size_t err_size);

typedef struct ModelDescription {
  const char *name, *source;
  int num_config;
  const char *const *config_keys, *const *config_values;
  const char *init_prefix, *train_prefix, *forward_prefix, *inspect_prefix; /* NULL: no such graph */
  const char *train_grad_prefix, *train_apply_prefix; /* --data-parallel, else NULL */
  int cuda; /* --target cuda */
  int num_pretrained;             /* the model's pretrained blocks: */
  const char *const *pretrained_names, *const *pretrained_prefixes;
  const int *num_ignored;         /* per block: the checkpoint tensors it leaves out */
  const char *const *const *ignored;
  /* --data-parallel, for train --zero 1: the gradients' norm (NULL without
   * clipping) and each param's update in its own graph */
  const char *train_norm_prefix;
  int num_train_apply_param;
  const char *const *train_apply_param_prefixes;
  const char *decode_prefix; /* NULL: no such graph */
  int cpu_dispatch;          /* --cpu generic-dispatch (dispatch.c) */
} ModelDescription;

/* Adds `tfm_model` (a tfm_model_info) referring to each graph's PREFIX_desc,
 * which may live in other objects of the same binary. */
bool describe_model(CpuModule *module, const ModelDescription *description);

#endif
