/* tfmc stats: what the model's graphs will cost before any run. */
#ifndef TFM_STATS_H
#define TFM_STATS_H
#include "sema.h"

/* Lowers, optimises and plans the forward and (when the model trains) the
 * training graph and prints for each its kernels, FLOPs per step and the
 * planned memory: the persistent region (parameters, optimizer state,
 * inputs, outputs) and the scratch region's peak. 0 on success; errors go
 * through diag. */
int stats_print_graphs(const FrontOptions *opt);

#endif
