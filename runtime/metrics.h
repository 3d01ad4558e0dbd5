/* `train --metrics FILE.jsonl`: one JSON object per line, flushed as it is
 * written, so a crash loses nothing that was logged.
 *   {"kind":"run","model":..,"source":..,"config":{KEY:"VALUE",..},"seed":N,
 *    "threads":N,"steps":N,"resumed_at":N,"started":"2026-12-06T15:00:00Z"}
 *   {"kind":"step","step":N,"loss":X,"lr":X,"tokens_per_s":X,"grad_norm":X,
 *    "test_loss":X,"wall_s":X}
 * lr and grad_norm are null when the train graph has no such output (no
 * clipping: no gradient norm); test_loss is there when held-out data was
 * given. A resumed run keeps the lines up to the step it resumes from,
 * adds a "run" line and goes on; wall_s goes on from the last kept line.
 * tools/report.py draws the curves of one or more such files. */
#ifndef TFMRT_METRICS_H
#define TFMRT_METRICS_H
#include <stdint.h>
#include <stdio.h>

#include "model.h"

typedef struct tfm_metrics {
  FILE *file;               /* NULL: no --metrics */
  const char *path;
  double start, wall_offset;
  double last_time;         /* when the last line was written */
  double step_end;          /* when the last step ended */
  uint64_t tokens;          /* since the last line */
} tfm_metrics;

/* Starts the file at path (resumed_at = 0: a new run, the file replaced;
 * else the run resumed after that step, the file's later lines dropped). */
int tfm_metrics_open(tfm_metrics *m, const char *path, const tfm_model_info *model, uint64_t seed,
                     uint64_t threads, uint64_t steps, uint64_t resumed_at);
/* After each step: counts its tokens towards the next line's rate. */
void tfm_metrics_tokens(tfm_metrics *m, uint64_t tokens);
/* One step's line; NaN values are written as null, test_loss left out. */
int tfm_metrics_step(tfm_metrics *m, uint64_t step, double loss, double lr, double grad_norm,
                     double test_loss);
void tfm_metrics_close(tfm_metrics *m);

#endif
