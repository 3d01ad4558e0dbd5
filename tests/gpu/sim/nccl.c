/* Test scaffolding, not part of tfm: a fake libnccl.so.2 beside the PTX
 * simulator's libcuda.so.1 (driver.c), so that the data-parallel path of a
 * --target cuda binary (runtime/train_nccl.c) runs without a GPU. It
 * implements the calls runtime/nccl.c makes, with nccl.h's types and
 * values, over the simulator's device memory (host memory: a device
 * pointer is its address); collectives run when called, as the
 * simulator's launches do, so groups and streams change nothing.
 *
 * One rank: the mean of one is a copy. Several ranks (under mpirun, once
 * the binary has started MPI): the ranks' values are gathered over MPI and
 * averaged as ncclAvg does, each multiplied by 1/size, then summed (here
 * in rank order). Built without MPI, it takes one rank only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SIM_NCCL_MPI
#include <mpi.h>
#endif

typedef int ncclResult_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct ncclComm {
  int size, rank;
} *ncclComm_t;

enum { NCCL_SUCCESS = 0, NCCL_SYSTEM_ERROR = 2, NCCL_INVALID_ARGUMENT = 4 };
enum { NCCL_SUM = 0, NCCL_AVG = 4, NCCL_FLOAT32 = 7 };

#define EXPORT __attribute__((visibility("default")))

static char last_error[256];

static ncclResult_t refuse(ncclResult_t code, const char *why) {
  snprintf(last_error, sizeof last_error, "sim nccl: %s", why);
  fprintf(stderr, "%s\n", last_error);
  return code;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "tfm sim nccl");
  return NCCL_SUCCESS;
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int size, ncclUniqueId id, int rank) {
  if (strcmp(id.internal, "tfm sim nccl"))
    return refuse(NCCL_INVALID_ARGUMENT, "a unique id this library did not make");
  if (size < 1 || rank < 0 || rank >= size) return refuse(NCCL_INVALID_ARGUMENT, "bad rank");
#ifdef SIM_NCCL_MPI
  int started = 0, world = 1;
  if (size > 1 && MPI_Initialized(&started) == MPI_SUCCESS && started)
    MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (size > 1 && (!started || world != size))
    return refuse(NCCL_INVALID_ARGUMENT, "several ranks need MPI started with as many");
#else
  if (size > 1) return refuse(NCCL_INVALID_ARGUMENT, "built without MPI: one rank only");
#endif
  if (!(*comm = malloc(sizeof **comm))) return refuse(NCCL_SYSTEM_ERROR, "out of memory");
  (*comm)->size = size;
  (*comm)->rank = rank;
  return NCCL_SUCCESS;
}

EXPORT ncclResult_t ncclAllReduce(const void *in, void *out, size_t count, int dtype, int op,
                                  ncclComm_t comm, void *stream) {
  (void)stream;
  if (dtype != NCCL_FLOAT32 || (op != NCCL_AVG && op != NCCL_SUM))
    return refuse(NCCL_INVALID_ARGUMENT, "only f32 sums and means are simulated");
  float *all = malloc(((size_t)comm->size * count + 1) * sizeof *all);
  if (!all) return refuse(NCCL_SYSTEM_ERROR, "out of memory");
  memcpy(all + (size_t)comm->rank * count, in, count * sizeof *all);
#ifdef SIM_NCCL_MPI
  if (comm->size > 1 && (count > INT32_MAX ||
                         MPI_Allgather(in, (int)count, MPI_FLOAT, all, (int)count, MPI_FLOAT,
                                       MPI_COMM_WORLD) != MPI_SUCCESS)) {
    free(all);
    return refuse(NCCL_SYSTEM_ERROR, "MPI_Allgather failed");
  }
#endif
  float scale = op == NCCL_AVG ? 1.0f / (float)comm->size : 1.0f;
  for (size_t i = 0; i < count; i++) {
    float s = 0;
    for (int r = 0; r < comm->size; r++) s += all[(size_t)r * count + i] * scale;
    ((float *)out)[i] = s;
  }
  free(all);
  return NCCL_SUCCESS;
}

EXPORT ncclResult_t ncclGroupStart(void) { return NCCL_SUCCESS; }
EXPORT ncclResult_t ncclGroupEnd(void) { return NCCL_SUCCESS; }

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  free(comm);
  return NCCL_SUCCESS;
}

EXPORT const char *ncclGetErrorString(ncclResult_t result) {
  return result == NCCL_SUCCESS ? "no error" : last_error;
}
