/* tfmc build: compile a model into an executable that trains and runs it. */
#ifndef TFM_BUILD_H
#define TFM_BUILD_H
#include "sema.h"

typedef struct BuildOptions {
  const char *output;   /* the executable */
  const char *cpu;      /* "native" or an LLVM CPU name such as "x86-64-v3" */
  int verbose;          /* report the time taken */
  int shared;           /* a shared library with the runtime inside, and a C header */
  const char *header;   /* with shared: where the header goes */
  int cuda;             /* --target cuda: kernels as PTX, launched through the CUDA driver */
  const char *gpu_arch; /* with cuda: "sm_80" (NULL) or "sm_90" */
  int cublas;           /* with cuda, --gemm=cublas: f32 dots call cuBLAS instead of PTX */
  int data_parallel;    /* --data-parallel: also the train step's two parts (gradients,
                         * their application) that train under mpirun runs */
} BuildOptions;

/* 0 on success; errors are reported through diag. */
int build_binary(const FrontOptions *front, const BuildOptions *options);

#endif
