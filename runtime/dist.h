/* Data-parallel training across processes: the collectives the training
 * loop needs, behind one small interface. dist_mpi.c implements it over
 * MPI (when CMake found MPI), dist_none.c for a single process; the loop
 * is train_dist.c. Nothing here is in tfmrt: a model's shared library and
 * the runtime's tests link no MPI.
 *
 * Every collective is deterministic: a sum is taken in rank order
 * (rank 0 + rank 1 + ...) on every rank from the very bytes each rank
 * sent, so all ranks get the same bits and a run repeats bit for bit
 * whatever the timing. Every wait is bounded: when a peer does not answer
 * within the timeout (TFM_DIST_TIMEOUT seconds, default 30) or its
 * connection fails, the call fails naming the rank(s) it waited for. */
#ifndef TFM_DIST_H
#define TFM_DIST_H
#include <stddef.h>
#include <stdint.h>

/* Whether this process was started by a launcher (mpirun/mpiexec of Open
 * MPI, MPICH or Intel MPI, or Slurm's srun) as one of several ranks; *size
 * and *rank (may be NULL) receive what the launcher's variables say. Reads
 * the environment only: works in a binary built without MPI. */
int tfm_dist_launched(int *size, int *rank);

/* Starts the collectives when launched as several ranks (MPI_Init_thread);
 * a single process needs no call. Fails with what is missing when the
 * binary has no MPI and a launcher started it. */
int tfm_dist_init(void);
int tfm_dist_rank(void); /* 0 before tfm_dist_init or in one process */
int tfm_dist_size(void); /* 1 likewise */
/* Whether this build has MPI (dist_mpi.c). */
int tfm_dist_available(void);
/* Ends the collectives (MPI_Finalize); a no-op in one process. */
void tfm_dist_finalize(void);
/* Ends every rank of the job now (MPI_Abort), after a failure this rank
 * has reported; in one process, exit(code). */
void tfm_dist_abort(int code);

/* The sum over ranks, in rank order, of `count` floats at `in`, divided by
 * the number of ranks, into `out` (may equal in). `what` names the data in
 * messages ("the gradients of step 12"). */
int tfm_dist_average_f32(const float *in, float *out, size_t count, const char *what);
/* Every rank's `bytes` bytes at `mine`, in rank order, into `all`
 * (size * bytes). */
int tfm_dist_allgather(const void *mine, void *all, size_t bytes, const char *what);
/* Root's `bytes` bytes at buf into every rank's buf. */
int tfm_dist_broadcast(void *buf, size_t bytes, int root, const char *what);
/* Returns when every rank has called it, or fails after the timeout. */
int tfm_dist_barrier(const char *what);
/* The timeout of every collective, in seconds: TFM_DIST_TIMEOUT, else 30. */
double tfm_dist_timeout(void);

/* --- NCCL (GPU collectives, loaded with dlopen like cuBLAS; nccl.c) ------ */

typedef struct tfm_nccl tfm_nccl;
/* Loads libnccl.so.2 and makes a communicator of `size` ranks from the
 * 128-byte unique id rank 0 made (tfm_nccl_unique_id) and broadcast. Fails
 * with a clear message without NCCL or a GPU. */
int tfm_nccl_load(tfm_nccl **nccl); /* the library only */
int tfm_nccl_unique_id(tfm_nccl *nccl, unsigned char id[128]);
int tfm_nccl_init_rank(tfm_nccl *nccl, const unsigned char id[128], int size, int rank);
/* The mean over the ranks of `count` floats on the device (in place
 * allowed), queued on `stream` (NULL: the default): ncclAvg, which
 * multiplies each rank's values by 1/size and sums them. For two ranks
 * that is exactly the CPU path's (x0 + x1) / 2; with more, NCCL's order
 * (a ring or a tree, not rank order) and the scaling first may differ
 * from it in the last bits. NCCL reduces in a
 * fixed order for a fixed topology, rank count, message size and NCCL
 * version (NCCL_ALGO and NCCL_PROTO pin its choices), so a run repeats
 * bit for bit on the same machines. */
int tfm_nccl_allreduce_mean_f32(tfm_nccl *nccl, uint64_t in, uint64_t out, size_t count,
                                void *stream);
/* Collectives between these two are launched together (ncclGroupStart/End). */
int tfm_nccl_group_start(tfm_nccl *nccl);
int tfm_nccl_group_end(tfm_nccl *nccl);
void tfm_nccl_close(tfm_nccl *nccl);

#endif
