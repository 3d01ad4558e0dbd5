/* The memory plan: leaves and outputs get their own places in the
 * persistent region; every other buffer lives from the kernel that writes
 * it to the last kernel that reads it, and buffers whose lives do not
 * overlap share scratch space, placed largest first by first or best fit. */
#include <stdlib.h>

#include "kernel_internal.h"

#define ALIGN 64

static int64_t aligned(int64_t bytes) { return (bytes + ALIGN - 1) / ALIGN * ALIGN; }

static void mark_lifetimes(KernelPlan *plan) {
  const Graph *g = plan->graph;
  for (int ki = 0; ki < plan->num_kernels; ki++) {
    const Kernel *k = &plan->kernels[ki];
    for (int i = 1; i < k->num_args; i++) {
      KernelBuffer *b = &plan->buffers[k->args[i]];
      if (b->last_kernel < ki)
        b->last_kernel = ki;
    }
  }
  for (int i = 0; i < graph_num_updates(g); i++)
    plan->buffers[plan->buffer_of[graph_update_at(g, i).value]].last_kernel = plan->num_kernels;
  for (int i = 0; i < plan->num_buffers; i++)
    plan->buffers[i].region =
        plan->buffers[i].first_kernel < 0 ? KERNEL_PERSISTENT : KERNEL_SCRATCH;
  for (int i = 0; i < graph_num_outputs(g); i++)
    plan->buffers[plan->buffer_of[graph_output_at(g, i).node]].region = KERNEL_PERSISTENT;
}

/* qsort has no context argument in C11; per thread, because tfmc build
 * plans its graphs on threads of their own. */
static _Thread_local const KernelPlan *sorting_plan;

static int larger_first(const void *a, const void *b) {
  const KernelBuffer *x = &sorting_plan->buffers[*(const int *)a];
  const KernelBuffer *y = &sorting_plan->buffers[*(const int *)b];
  if (x->bytes != y->bytes)
    return x->bytes > y->bytes ? -1 : 1;
  return *(const int *)a - *(const int *)b;
}

static int lower_offset_first(const void *a, const void *b) {
  const KernelBuffer *x = &sorting_plan->buffers[*(const int *)a];
  const KernelBuffer *y = &sorting_plan->buffers[*(const int *)b];
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Where a buffer of `bytes` goes among the placed buffers that live at the
 * same time (sorted by offset): the lowest gap that holds it (first fit) or
 * the smallest (best fit); else after the last of them. */
static int64_t fit(const KernelPlan *plan, const int *conflicts, int count, int64_t bytes,
                   bool best_fit) {
  int64_t end = 0, best = -1, best_size = 0;
  for (int j = 0; j < count; j++) {
    const KernelBuffer *c = &plan->buffers[conflicts[j]];
    int64_t gap = c->offset - end;
    if (gap >= bytes && (best < 0 || gap < best_size)) {
      best = end;
      best_size = gap;
      if (!best_fit)
        break;
    }
    if (c->offset + aligned(c->bytes) > end)
      end = c->offset + aligned(c->bytes);
  }
  return best >= 0 ? best : end;
}

static bool overlap_in_time(const KernelBuffer *a, const KernelBuffer *b) {
  return a->first_kernel <= b->last_kernel && b->first_kernel <= a->last_kernel;
}

/* Places the scratch buffers `order` (largest first); returns the peak. */
static int64_t place(KernelPlan *plan, const int *order, int num_scratch, int *conflicts,
                     bool best_fit) {
  int64_t peak = 0;
  for (int i = 0; i < num_scratch; i++) {
    KernelBuffer *b = &plan->buffers[order[i]];
    int count = 0;
    for (int j = 0; j < i; j++)
      if (overlap_in_time(b, &plan->buffers[order[j]]))
        conflicts[count++] = order[j];
    qsort(conflicts, (size_t)count, sizeof(int), lower_offset_first);
    b->offset = fit(plan, conflicts, count, aligned(b->bytes), best_fit);
    if (b->offset + aligned(b->bytes) > peak)
      peak = b->offset + aligned(b->bytes);
  }
  return peak;
}

bool kernel_memory_plan(KernelPlan *plan) {
  mark_lifetimes(plan);
  int n = plan->num_buffers, num_scratch = 0;
  int *order = malloc(sizeof(int) * (size_t)(n ? n : 1));
  int *conflicts = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!order || !conflicts) {
    free(order);
    free(conflicts);
    return false;
  }
  plan->persistent_bytes = 0;
  for (int i = 0; i < n; i++) {
    KernelBuffer *b = &plan->buffers[i];
    if (b->region == KERNEL_PERSISTENT) {
      b->offset = plan->persistent_bytes;
      plan->persistent_bytes += aligned(b->bytes);
    } else {
      order[num_scratch++] = i;
    }
  }
  sorting_plan = plan;
  qsort(order, (size_t)num_scratch, sizeof(int), larger_first);
  /* Neither heuristic wins everywhere (best fit keeps large gaps for large
   * buffers, first fit packs low): both are cheap, the lower peak is kept. */
  int64_t best_fit_peak = place(plan, order, num_scratch, conflicts, true);
  plan->scratch_bytes = place(plan, order, num_scratch, conflicts, false);
  if (best_fit_peak < plan->scratch_bytes)
    plan->scratch_bytes = place(plan, order, num_scratch, conflicts, true);
  free(order);
  free(conflicts);
  return true;
}
