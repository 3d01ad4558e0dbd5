/* --profile (profile.c): wall time per kernel, per graph. Internal to the
 * runtime: generated code only calls tfm_kernel_for (tfmrt.h), which times
 * through the hooks below when profiling is on. */
#ifndef TFM_PROFILE_H
#define TFM_PROFILE_H
#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* From tfm_profile_start on, each tfm_graph_run and each kernel in it is
 * timed; tfm_profile_report prints, per graph that ran, its kernels by
 * total time, then the graph's own time. */
void tfm_profile_start(void);
void tfm_profile_report(FILE *out);
void tfm_profile_run(tfm_graph *g, tfm_pool *pool); /* tfm_graph_run while profiling */

/* tfm_kernel_for's side (threads.c): whether it times, and where it adds. */
extern int tfm_profiling;
void tfm_profile_kernel(int32_t kernel, int64_t ns);
int64_t tfm_profile_now_ns(void);
/* The GPU runtime's account of the running graph's launches (one line,
 * kept from its last run), printed under the graph's total. */
void tfm_profile_launches(const char *line);

#endif
