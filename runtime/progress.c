/* The progress line a training loop prints after each step it reports. */
#define _POSIX_C_SOURCE 200809L
#include "tfmrt.h"

#include <time.h>
#include <unistd.h>

static double monotonic_seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

int tfm_progress_start(tfm_progress *progress, FILE *out, uint64_t first_step,
                       uint64_t total_steps) {
  *progress = (tfm_progress){out, first_step, total_steps, 0, monotonic_seconds()};
  return TFM_OK;
}

int tfm_progress_format(char *buf, size_t size, uint64_t step, uint64_t total_steps,
                        double loss, double lr, double tokens_per_second,
                        double eta_seconds) {
  char rate[32], eta[32];
  if (tokens_per_second >= 1e6) snprintf(rate, sizeof rate, "%.2fM", tokens_per_second / 1e6);
  else if (tokens_per_second >= 1e3) snprintf(rate, sizeof rate, "%.1fk", tokens_per_second / 1e3);
  else snprintf(rate, sizeof rate, "%.0f", tokens_per_second);
  /* Negative (or NaN) means not known yet, e.g. before any step finished. */
  if (eta_seconds >= 0 && eta_seconds < 1e9) {
    unsigned long long s = (unsigned long long)(eta_seconds + 0.5);
    snprintf(eta, sizeof eta, "%llu:%02llu:%02llu", s / 3600, s / 60 % 60, s % 60);
  } else {
    snprintf(eta, sizeof eta, "--");
  }
  int len = snprintf(buf, size, "step %llu/%llu  loss %.4f  lr %.3e  %s tok/s  ETA %s",
                     (unsigned long long)step, (unsigned long long)total_steps, loss, lr, rate,
                     eta);
  if (len < 0 || (size_t)len >= size)
    return tfm_fail("progress: line of %d characters does not fit in %zu", len, size);
  return TFM_OK;
}

int tfm_progress_report(tfm_progress *progress, uint64_t step, double loss, double lr,
                        uint64_t tokens) {
  progress->tokens += tokens;
  double elapsed = monotonic_seconds() - progress->start_seconds;
  double done = step > progress->first_step ? (double)(step - progress->first_step) : 0;
  double left = step < progress->total_steps ? (double)(progress->total_steps - step) : 0;
  double rate = elapsed > 0 ? (double)progress->tokens / elapsed : 0;
  double eta = done > 0 ? left * elapsed / done : -1;
  char line[256];
  if (tfm_progress_format(line, sizeof line, step, progress->total_steps, loss, lr, rate, eta))
    return TFM_FAILED;
  if (fprintf(progress->out, "%s\n", line) < 0 || fflush(progress->out) != 0)
    return tfm_fail("progress: cannot write the progress line");
  return TFM_OK;
}

/* --- the bar of a job measured in bytes ---------------------------------------- */

enum { BAR_WIDTH = 30 };

int tfm_progress_bar_format(char *buf, size_t size, const char *label, uint64_t done,
                            uint64_t total, double bytes_per_second) {
  double fraction = total ? (double)(done < total ? done : total) / (double)total : 1;
  char bar[BAR_WIDTH + 1], eta[32];
  int filled = (int)(fraction * BAR_WIDTH);
  for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
  bar[BAR_WIDTH] = '\0';
  double left = bytes_per_second > 0 ? (double)(total - (done < total ? done : total)) /
                                           bytes_per_second : -1;
  if (left >= 0 && left < 1e9) {
    unsigned long long s = (unsigned long long)(left + 0.5);
    snprintf(eta, sizeof eta, "%llu:%02llu:%02llu", s / 3600, s / 60 % 60, s % 60);
  } else {
    snprintf(eta, sizeof eta, "--");
  }
  int len = snprintf(buf, size, "%s [%s] %3d%%  %.1f MB/s  ETA %s", label, bar,
                     (int)(fraction * 100), bytes_per_second / 1e6, eta);
  if (len < 0 || (size_t)len >= size)
    return tfm_fail("progress: line of %d characters does not fit in %zu", len, size);
  return TFM_OK;
}

void tfm_progress_bar_start(tfm_progress_bar_state *bar, FILE *out, const char *label,
                            uint64_t total) {
  *bar = (tfm_progress_bar_state){out, label, total, monotonic_seconds(),
                                  isatty(fileno(out)), -1, 0};
}

void tfm_progress_bar(tfm_progress_bar_state *bar, uint64_t done) {
  double now = monotonic_seconds(), elapsed = now - bar->start_seconds;
  int finished = done >= bar->total;
  int tenth = bar->total ? (int)((double)(done < bar->total ? done : bar->total) * 10 /
                                 (double)bar->total) : 10;
  /* A terminal: at most 10 redraws a second; a file or pipe: each tenth. */
  if (bar->terminal ? !finished && now - bar->last_draw < 0.1 : tenth == bar->last_tenth) return;
  bar->last_draw = now;
  bar->last_tenth = tenth;
  char line[256];
  if (tfm_progress_bar_format(line, sizeof line, bar->label, done, bar->total,
                              elapsed > 0 ? (double)done / elapsed : 0))
    return;
  fprintf(bar->out, bar->terminal ? "\r%s%s" : "%s%s", line,
          bar->terminal && !finished ? "" : "\n");
  fflush(bar->out);
}
