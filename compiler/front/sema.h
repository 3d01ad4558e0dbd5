/* Semantic analysis: runs the program at compile time to resolve names,
 * evaluate the config, instantiate layers (with dotted parameter names) and
 * check the dtype and shape of every expression. The result describes the
 * model: its config, inputs, outputs, parameters and training set-up. */
#ifndef TFM_SEMA_H
#define TFM_SEMA_H
#include "observe.h"
#include "value.h"

typedef struct FrontOptions {
  const char *path;       /* the .tfm file */
  const char *text;       /* its contents when already in memory (fuzzing), or NULL */
  size_t text_len;
  PtrVec defines;         /* const char* "name=value" from -D */
  const char *variant;    /* --variant NAME or NULL */
  PtrVec include_dirs;    /* -I DIR, searched by import after the file's own folder */
  int training;           /* value of the built-in `training` (checks use 1) */
  int decoding;           /* value of the built-in `decoding`: lower the decode-step
                             graph (lower_decode_model) */
  int unfused_attention;  /* lower_model: keep attention as primitives (no pass_attention) */
  int bf16;               /* --dtype bf16: lower_model runs pass_autocast_bf16 */
  int probes;             /* lower a layer's `output NAME = ...` as a graph output
                             (the inspect graph); else it is checked and dropped */
  const FrontObserver *observer; /* or NULL */
  int library_ok;         /* a file without a model block is a library, not an error,
                             and -D and --variant leave it alone (the language
                             server checks std files as they are edited) */
} FrontOptions;

typedef struct ConfigEntry {
  const char *name;
  Span at;                /* the entry in the config block */
  const Node *expr;       /* the expression that gives its value */
  const char *override;   /* "-D d_model=256", "variant big", or NULL */
  const Node *original;   /* the expression before the override */
  Value *value;           /* after evaluation */
  int state;              /* 0 not evaluated, 1 evaluating (cycle check), 2 done */
} ConfigEntry;

typedef struct ModelIO {
  const char *name;
  TensorType type;
  Span at;
} ModelIO;

typedef struct TrainSpec {
  int present;
  Span at;
  Value *optimizer;       /* V_OPTIM */
  Value *lr;              /* V_FLOAT (constant) or a scalar f32 tensor of `step` */
  const Node *lr_expr;
  double clip;            /* 0: no clipping */
} TrainSpec;

/* A tensor of another tool's checkpoint that a pretrained block reads. */
typedef struct PretrainedSource {
  const char *name;       /* as the checkpoint names it: "transformer.h.0.attn.c_attn.weight" */
  TensorType type;
  Span at;                /* its first source() call */
} PretrainedSource;

/* `pretrained NAME { ... }`: which tensors of another tool's checkpoint
 * (sources) make which parameters, and how (any expression: transposes,
 * slices of fused q/k/v, reshapes). Lowered as a graph of its own whose
 * inputs are the sources and whose outputs are the parameters it sets. */
typedef struct Pretrained {
  const char *name;
  Span at;
  PtrVec sources;         /* PretrainedSource*, in the order first read */
  PtrVec assigned;        /* Param* given a value, in order */
  PtrVec ignored;         /* const char*: tensors of the checkpoint left out on purpose
                             (`_ = source("name")`) */
} Pretrained;

typedef struct CheckedModel {
  const char *name;
  Span at;
  const char *variant;
  PtrVec config;          /* ConfigEntry* in source order */
  PtrVec inputs;          /* ModelIO* */
  PtrVec outputs;         /* ModelIO* */
  PtrVec probes;          /* ModelIO*: a layer's outputs, named INSTANCE.NAME */
  PtrVec params;          /* Param* in creation order */
  Instance *root;
  TrainSpec train;
  PtrVec pretrained;      /* Pretrained*, in source order */
  PtrVec programs;        /* Node* N_PROGRAM: the file, then its imports */
} CheckedModel;

/* Loads, parses and checks. Returns NULL when any error was reported. */
CheckedModel *sema_check(const FrontOptions *opt);
int64_t model_param_count(const CheckedModel *m);
int64_t instance_param_count(const Instance *inst);
/* Frees everything the front end allocated and clears its state. */
void front_reset(void);

#endif
