/* What a target tells the shared LLVM emission (gen.h): which emitter
 * makes each kernel, what the module's entry points are, and the few
 * choices the shared emitters leave to it. This is the whole interface
 * between compiler/codegen/llvm/ and a target's folder (cpu/, ptx/): the
 * shared code never asks which target it is emitting for, it reads these
 * fields, and a new target is a new folder that fills one in.
 *
 * The targets today: cpu_target (cpu/target.c: the host CPU's kernels run
 * on the runtime's thread pool), and from ptx/ the NVPTX module's kernels
 * (ptx.c), the host side of a CUDA build that launches them (host.c), and
 * the GPU's thread plan compiled for the host CPU to test the GPU's
 * kernels there (serial.c). */
#ifndef TFM_TARGET_H
#define TFM_TARGET_H

#include <stdbool.h>
#include <stdint.h>

#include "kernel.h"

typedef struct Gen Gen;

typedef struct Target {
  const char *name;
  /* Emits plan function `function`, kernel `kernel`'s range function
   * (gen->functions[function]); NULL: the module has no kernels of its
   * own (a CUDA host module, whose kernels are PTX). */
  void (*emit_kernel)(Gen *gen, int function, const Kernel *kernel);
  /* Emits the module's entry points after its kernels; NULL: none (the
   * NVPTX module adds one entry a kernel itself). */
  void (*emit_entry)(Gen *gen);
  /* For emit_pool_entry: the range a kernel's function runs over. */
  int64_t (*range_items)(const Gen *gen, const Kernel *kernel);
  const void *data; /* the target's own (host.c: the PTX it launches) */
  /* f32 exp and tanh as inline arithmetic (math.c) instead of calls to
   * the math library, so that loops over them vectorize. */
  bool inline_f32_math;
  /* A reduction may keep partial sums in vector lanes or run as column
   * sums (loop.c); false: each in the plain serial order one GPU thread
   * follows, as the GPU's kernels do. */
  bool lane_reductions;
  /* A loop kernel's body is a separate function whose buffer arguments
   * are noalias when the plan's buffers are disjoint (for LLVM's
   * vectorizer on the CPU); false where the entry inlines it (NVPTX). */
  bool noalias_body;
} Target;

#endif
