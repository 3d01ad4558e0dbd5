/* tfmc emit dot (see emit_dot.h). */
#define _POSIX_C_SOURCE 200809L
#include "emit_dot.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu.h"
#include "graph_text.h"
#include "kernel.h"
#include "ptx.h"

extern char **environ;

/* Graphviz's `dot -Tsvg -o svg` over the DOT text, through a temporary file. */
static int render_svg(const char *dot_text, const char *svg) {
  char source[] = "/tmp/tfmc-dot-XXXXXX";
  int fd = mkstemp(source);
  FILE *file = fd >= 0 ? fdopen(fd, "w") : NULL;
  bool written = file && fputs(dot_text, file) >= 0;
  if (file) written = fclose(file) == 0 && written;
  else if (fd >= 0) close(fd);
  if (!written) {
    fprintf(stderr, "tfmc: --svg: cannot write a temporary file in /tmp: %s\n", strerror(errno));
    if (fd >= 0) unlink(source);
    return 1;
  }
  char *argv[] = {"dot", "-Tsvg", "-o", (char *)svg, source, NULL};
  pid_t child;
  int status = 0, rc = posix_spawnp(&child, "dot", NULL, NULL, argv, environ);
  if (rc == 0) {
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }
  unlink(source);
  if (rc != 0) {
    fprintf(stderr, "tfmc: --svg needs Graphviz's 'dot' program, which could not be run (%s; "
                    "Debian: apt-get install graphviz); without --svg, emit dot writes the DOT "
                    "text to standard output\n", strerror(rc));
    return 1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "tfmc: --svg: Graphviz's dot did not write %s (exit status %d)\n", svg,
            WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 1;
  }
  return 0;
}

static int write_dot(const Graph *g, const GraphDotStyle *style, const char *svg) {
  char *text = graph_to_dot(g, style);
  if (!text) {
    fprintf(stderr, "tfmc: emit dot: out of memory\n");
    return 1;
  }
  int status = 0;
  if (svg) status = render_svg(text, svg);
  else if (fputs(text, stdout) < 0) status = 1;
  free(text);
  return status;
}

int emit_dot(const Graph *g, const EmitDotOptions *options) {
  GraphDotStyle style = {.layers = options->layers, .group_name = "kernel"};
  if (!options->fused) return write_dot(g, &style, options->svg);
  /* The kernels are formed from the prepared graph (recomputed copies
   * included), so that is the graph drawn: each node in one kernel. */
  char err[512];
  KernelPlanOptions plan_options = options->cuda ? ptx_plan_options() : cpu_plan_options();
  Graph *planned = kernel_prepare(g, &plan_options, NULL, err, sizeof err);
  KernelPlan *plan = planned ? kernel_plan_build(planned, &plan_options, err, sizeof err) : NULL;
  int count = planned ? graph_count(planned) : 0;
  int *group = malloc((count ? (size_t)count : 1) * sizeof(int));
  bool *root = malloc(count ? (size_t)count : 1);
  int status = 1;
  if (!plan) {
    fprintf(stderr, "tfmc: internal error: planning: %s\n", err);
  } else if (!group || !root) {
    fprintf(stderr, "tfmc: emit dot: out of memory\n");
  } else {
    for (GraphId id = 0; id < count; id++) {
      KernelPlacement place = plan->placement[id];
      group[id] = place == KERNEL_INLINED || place == KERNEL_ROOT ? plan->kernel_of[id] : -1;
      root[id] = false;
    }
    for (int k = 0; k < plan->num_kernels; k++) { /* what each kernel stores */
      GraphId stored[3];
      for (int i = 0, n = kernel_outputs(&plan->kernels[k], stored); i < n; i++) root[stored[i]] = true;
    }
    style.group = group;
    style.group_root = root;
    status = write_dot(planned, &style, options->svg);
  }
  free(group);
  free(root);
  kernel_plan_free(plan);
  graph_free(planned);
  return status;
}
