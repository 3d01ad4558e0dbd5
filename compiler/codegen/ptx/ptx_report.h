/* Register use and spills of each GPU kernel, as ptxas reports them. */
#ifndef TFM_PTX_REPORT_H
#define TFM_PTX_REPORT_H

#include <stdio.h>

#include "kernel.h"

typedef struct PtxResources {
  int registers;
  long spill_stores, spill_loads; /* bytes */
  long stack;                     /* bytes of stack frame */
} PtxResources;

/* The ptxas to run: $TFM_PTXAS, else the one found at configure time, else
 * "ptxas" from PATH. */
const char *ptx_ptxas_path(void);

/* Runs `ptxas -v -arch=ARCH` on `ptx` and fills per[f] for every entry
 * P_kF of the text (num_functions of them). 0 on success; else a message. */
int ptx_assemble_resources(const char *ptx, const char *arch, int num_functions,
                           PtxResources *per, char *err, size_t err_size);

/* Compiles the plan to PTX, assembles it and prints a table: one line per
 * kernel function with its registers and spill bytes, then a total line.
 * 0 on success; else a message in err. */
int ptx_report_resources(const KernelPlan *plan, const char *arch, FILE *out, char *err,
                         size_t err_size);

#endif
