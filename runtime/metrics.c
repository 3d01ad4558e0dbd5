/* The metrics file of a training run (metrics.h). */
#define _POSIX_C_SOURCE 200809L
#include "metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The number after "key": in a line, or NAN. */
static double line_number(const char *line, const char *key) {
  const char *at = strstr(line, key);
  return at ? strtod(at + strlen(key), NULL) : NAN;
}

/* Resuming after step `resumed_at`: keeps the lines of the earlier runs up
 * to that step (a crash may have logged steps the checkpoint lacks; the
 * resumed run logs them again) and returns the last kept wall time. */
static int keep_until(const char *path, uint64_t resumed_at, double *wall) {
  *wall = 0;
  FILE *in = fopen(path, "r");
  if (!in) return TFM_OK; /* nothing logged yet */
  char *kept = NULL, *line = NULL;
  size_t kept_size = 0, cap = 0;
  FILE *out = open_memstream(&kept, &kept_size);
  if (!out) {
    fclose(in);
    return tfm_fail("out of memory");
  }
  ssize_t n;
  while ((n = getline(&line, &cap, in)) > 0) {
    if (line[n - 1] != '\n') break; /* a line cut short by the crash */
    double step = line_number(line, "\"step\":");
    if (strstr(line, "\"kind\":\"step\"") && !(step <= (double)resumed_at)) break;
    double w = line_number(line, "\"wall_s\":");
    if (isfinite(w)) *wall = w;
    fwrite(line, 1, (size_t)n, out);
  }
  free(line);
  fclose(in);
  fclose(out);
  FILE *f = fopen(path, "w");
  int status = f && fwrite(kept, 1, kept_size, f) == kept_size ? TFM_OK
                                                               : tfm_fail("%s: cannot rewrite it", path);
  if (f && fclose(f) && !status) status = tfm_fail("%s: cannot rewrite it", path);
  free(kept);
  return status;
}

static void write_number(FILE *f, const char *key, double v) {
  if (isfinite(v)) fprintf(f, ",\"%s\":%.9g", key, v);
  else fprintf(f, ",\"%s\":null", key);
}

int tfm_metrics_open(tfm_metrics *m, const char *path, const tfm_model_info *model, uint64_t seed,
                     uint64_t threads, uint64_t steps, uint64_t resumed_at) {
  memset(m, 0, sizeof *m);
  if (!path) return TFM_OK;
  if (resumed_at && keep_until(path, resumed_at, &m->wall_offset)) return TFM_FAILED;
  m->file = fopen(path, resumed_at ? "a" : "w");
  if (!m->file) return tfm_fail("%s: cannot write the metrics file", path);
  m->path = path;
  m->start = m->last_time = now_seconds();
  FILE *f = m->file;
  char started[32];
  time_t t = time(NULL);
  struct tm utc;
  strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &utc));
  fputs("{\"kind\":\"run\",\"model\":", f);
  json_write_string(f, model->name, strlen(model->name));
  fputs(",\"source\":", f);
  json_write_string(f, model->source, strlen(model->source));
  fputs(",\"config\":{", f);
  for (int32_t i = 0; i < model->num_config; i++) {
    if (i) fputc(',', f);
    json_write_string(f, model->config_keys[i], strlen(model->config_keys[i]));
    fputc(':', f);
    json_write_string(f, model->config_values[i], strlen(model->config_values[i]));
  }
  fprintf(f, "},\"seed\":%llu,\"threads\":%llu,\"steps\":%llu,\"resumed_at\":%llu,\"started\":\"%s\"}\n",
          (unsigned long long)seed, (unsigned long long)threads, (unsigned long long)steps,
          (unsigned long long)resumed_at, started);
  if (fflush(f)) return tfm_fail("%s: cannot write the metrics file", path);
  return TFM_OK;
}

void tfm_metrics_tokens(tfm_metrics *m, uint64_t tokens) {
  m->tokens += tokens;
  m->step_end = now_seconds();
}

int tfm_metrics_step(tfm_metrics *m, uint64_t step, double loss, double lr, double grad_norm,
                     double test_loss) {
  if (!m->file) return TFM_OK;
  /* The rate leaves out the held-out evaluation between the last step
   * and this line; wall_s does not. */
  double t = now_seconds(), span = m->step_end - m->last_time;
  FILE *f = m->file;
  fprintf(f, "{\"kind\":\"step\",\"step\":%llu", (unsigned long long)step);
  write_number(f, "loss", loss);
  write_number(f, "lr", lr);
  write_number(f, "tokens_per_s", span > 0 ? (double)m->tokens / span : NAN);
  write_number(f, "grad_norm", grad_norm);
  if (!isnan(test_loss)) write_number(f, "test_loss", test_loss);
  write_number(f, "wall_s", m->wall_offset + (t - m->start));
  fputs("}\n", f);
  m->tokens = 0;
  m->last_time = now_seconds();
  if (fflush(f) || ferror(f)) return tfm_fail("%s: cannot write the metrics file", m->path);
  return TFM_OK;
}

void tfm_metrics_close(tfm_metrics *m) {
  if (m->file) fclose(m->file);
  m->file = NULL;
}
