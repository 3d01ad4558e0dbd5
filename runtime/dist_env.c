/* What every dist.h implementation shares: the launcher's variables and
 * the timeout, read from the environment alone. */
#include <stdlib.h>

#include "dist.h"

static int env_int(const char *name, int *value) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || v < 0 || v > 1 << 24) return 0;
  *value = (int)v;
  return 1;
}

int tfm_dist_launched(int *size, int *rank) {
  /* Open MPI; MPICH and Intel MPI (Hydra's PMI); Slurm's srun. */
  static const char *const vars[][2] = {{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                        {"PMI_SIZE", "PMI_RANK"},
                                        {"SLURM_STEP_NUM_TASKS", "SLURM_PROCID"}};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    int n, r = 0;
    if (!env_int(vars[i][0], &n)) continue;
    env_int(vars[i][1], &r);
    if (size) *size = n;
    if (rank) *rank = r;
    return n > 1;
  }
  if (size) *size = 1;
  if (rank) *rank = 0;
  return 0;
}

double tfm_dist_timeout(void) {
  const char *s = getenv("TFM_DIST_TIMEOUT");
  double t = s ? strtod(s, NULL) : 0;
  return t > 0 ? t : 30.0;
}
