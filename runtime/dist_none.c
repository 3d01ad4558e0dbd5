/* dist.h for a binary built without MPI: one process. Started by mpirun or
 * srun as one of several ranks, it refuses with what is missing rather
 * than train N copies of the same model. */
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "tfmrt.h"

int tfm_dist_available(void) { return 0; }
int tfm_dist_rank(void) { return 0; }
int tfm_dist_size(void) { return 1; }
void tfm_dist_finalize(void) {}
void tfm_dist_abort(int code) { exit(code); }

int tfm_dist_init(void) {
  int size, rank;
  if (tfm_dist_launched(&size, &rank))
    return tfm_fail("started as rank %d of %d (mpirun or srun), but this binary was built "
                    "without MPI: install it (apt-get install libopenmpi-dev openmpi-bin, or "
                    "tools/deps.sh), reconfigure tfm with CMake, and rebuild tfmc and the model",
                    rank, size);
  return TFM_OK;
}

int tfm_dist_average_f32(const float *in, float *out, size_t count, const char *what) {
  (void)what;
  if (out != in) memcpy(out, in, count * sizeof *out);
  return TFM_OK;
}

int tfm_dist_allgather(const void *mine, void *all, size_t bytes, const char *what) {
  (void)what;
  memcpy(all, mine, bytes);
  return TFM_OK;
}

int tfm_dist_broadcast(void *buf, size_t bytes, int root, const char *what) {
  (void)buf, (void)bytes, (void)root, (void)what;
  return TFM_OK;
}

int tfm_dist_barrier(const char *what) {
  (void)what;
  return TFM_OK;
}
