/* tfmc emit kernels --target cuda: what ptxas says each kernel costs. */
#define _POSIX_C_SOURCE 200809L /* popen, mkstemp, fdopen */
#include "ptx_report.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errbuf.h"
#include "ptx.h"
#include "ptx_internal.h"
#include "ptx_row.h"

#ifndef TFM_PTXAS
#define TFM_PTXAS "ptxas"
#endif

const char *ptx_ptxas_path(void) {
  const char *path = getenv("TFM_PTXAS");
  return path && *path ? path : TFM_PTXAS;
}

/* The function number F of an entry name "..._kF", or -1. */
static int function_of(const char *name, size_t len) {
  size_t i = len;
  while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
    i--;
  if (i == len || i < 2 || name[i - 1] != 'k' || name[i - 2] != '_')
    return -1;
  return atoi(name + i);
}

int ptx_assemble_resources(const char *ptx, const char *arch, int num_functions,
                           PtxResources *per, char *err, size_t err_size) {
  const char *tmp = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tfmc-ptx-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    errbuf_set(err, err_size, "cannot write a temporary PTX file in %s", tmp && *tmp ? tmp : "/tmp");
    return 1;
  }
  fputs(ptx, f);
  fclose(f);
  char command[8400];
  snprintf(command, sizeof command, "'%s' -v -arch=%s -o /dev/null '%s' 2>&1", ptx_ptxas_path(),
           arch ? arch : "sm_80", path);
  FILE *p = popen(command, "r");
  if (!p) {
    unlink(path);
    errbuf_set(err, err_size, "cannot run %s", ptx_ptxas_path());
    return 1;
  }
  for (int i = 0; i < num_functions; i++)
    per[i] = (PtxResources){-1, 0, 0, 0};
  char line[1024], first_error[512] = "";
  int current = -1;
  while (fgets(line, sizeof line, p)) {
    const char *s;
    if ((s = strstr(line, "Compiling entry function '"))) {
      s += strlen("Compiling entry function '");
      const char *end = strchr(s, '\'');
      current = end ? function_of(s, (size_t)(end - s)) : -1;
      if (current >= num_functions)
        current = -1;
    } else if (current >= 0 && (s = strstr(line, "bytes stack frame"))) {
      sscanf(line, " %ld bytes stack frame, %ld bytes spill stores, %ld bytes spill loads",
             &per[current].stack, &per[current].spill_stores, &per[current].spill_loads);
    } else if (current >= 0 && (s = strstr(line, "Used "))) {
      per[current].registers = atoi(s + 5);
    } else if (!first_error[0] && strstr(line, "error")) {
      snprintf(first_error, sizeof first_error, "%.500s", line);
      first_error[strcspn(first_error, "\n")] = '\0';
    }
  }
  int status = pclose(p);
  unlink(path);
  if (status != 0) {
    errbuf_set(err, err_size, "%s rejected the PTX: %s", ptx_ptxas_path(),
               first_error[0] ? first_error : "(no message; is ptxas installed?)");
    return 1;
  }
  for (int i = 0; i < num_functions; i++)
    if (per[i].registers < 0) {
      errbuf_set(err, err_size, "ptxas -v reported nothing for kernel function %d", i);
      return 1;
    }
  return 0;
}

int ptx_report_resources(const KernelPlan *plan, const char *arch, FILE *out, char *err,
                         size_t err_size) {
  char *ptx = ptx_compile(plan, &(PtxOptions){.arch = arch}, err, err_size);
  if (!ptx)
    return 1;
  PtxResources *per = calloc((size_t)plan->num_functions + 1, sizeof *per);
  int status = per ? ptx_assemble_resources(ptx, arch, plan->num_functions, per, err, err_size) : 1;
  free(ptx);
  if (status) {
    free(per);
    return 1;
  }
  fprintf(out, "\ncuda %s (ptxas -v), %d threads per block:\n", arch ? arch : "sm_80",
          PTX_BLOCK_THREADS);
  fprintf(out, "%-10s %-12s %10s %12s %11s %6s %6s\n", "function", "root", "registers",
          "spill stores", "spill loads", "stack", "row");
  int most = 0;
  long spilled = 0;
  for (int f = 0; f < plan->num_functions; f++) {
    const Kernel *k = &plan->kernels[plan->function_kernel[f]];
    const PtxResources *r = &per[f];
    /* Row reductions and attention: the threads sharing a row (ptx_row.h),
     * a warp or a block; "mma" for attention on tensor cores (16 rows a
     * warp). */
    int64_t threads = ptx_row_sharing(plan, plan->function_kernel[f]);
    const char *rows = ptx_attention_mma(plan->graph, k) ? "mma"
                       : threads == 0                     ? "-"
                       : threads == PTX_WARP              ? "warp"
                                                          : "block";
    fprintf(out, "k%-9d %-12s %10d %12ld %11ld %6ld %6s\n", f,
            graph_op_name(graph_node(plan->graph, k->root)->op), r->registers, r->spill_stores,
            r->spill_loads, r->stack, rows);
    if (r->registers > most)
      most = r->registers;
    spilled += r->spill_stores + r->spill_loads;
  }
  fprintf(out, "%d functions, at most %d registers, %ld bytes spilled\n", plan->num_functions,
          most, spilled);
  free(per);
  return 0;
}
