/* NCCL for data-parallel training on GPUs, loaded with dlopen as cuBLAS is
 * (cublas.c): nothing links against it, and a binary without NCCL or a GPU
 * says so clearly. The few types and prototypes used are declared here,
 * with the values nccl.h documents (ncclUniqueId is 128 bytes, ncclFloat32
 * is 7, ncclAvg 4 (NCCL 2.10 and later), ncclSuccess 0), instead of
 * including the toolkit's headers. The reduction is ncclAllReduce on
 * device buffers: gradients never cross the host. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "dl.h"
#include "tfmrt.h"

#define NO_NCCL_MESSAGE "NCCL not found (libnccl.so.2): install NVIDIA's NCCL (apt-get install " \
                        "libnccl2, or pip install nvidia-nccl-cu12 and put its lib/ on " \
                        "LD_LIBRARY_PATH) to train on several GPUs, or train in one process"

typedef int ncclResult_t; /* ncclSuccess = 0 */
typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
enum { NCCL_FLOAT32 = 7, NCCL_AVG = 4 };

struct tfm_nccl {
  ncclComm_t comm;
  ncclResult_t (*get_unique_id)(ncclUniqueId *id);
  ncclResult_t (*comm_init_rank)(ncclComm_t *comm, int size, ncclUniqueId id, int rank);
  ncclResult_t (*all_reduce)(const void *in, void *out, size_t count, int dtype, int op,
                             ncclComm_t comm, void *stream);
  ncclResult_t (*group_start)(void);
  ncclResult_t (*group_end)(void);
  ncclResult_t (*comm_destroy)(ncclComm_t comm);
  const char *(*error_string)(ncclResult_t result);
};

static int resolve(void *library, const char *name, void *field) {
  if (tfm_dl_symbol(library, name, field))
    return tfm_fail("NCCL: the library has no %s (too old?)", name);
  return TFM_OK;
}

static int failed(tfm_nccl *n, const char *call, ncclResult_t r) {
  return tfm_fail("NCCL: %s failed: %s (%d)", call, n->error_string ? n->error_string(r) : "?", r);
}

int tfm_nccl_load(tfm_nccl **out) {
  *out = NULL;
  static const char *const names[] = {"libnccl.so.2", "libnccl.so"};
  void *library = NULL;
  const char *forced = getenv("TFM_NCCL_LIBRARY"); /* tests: a library that is not there */
  if (forced) library = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
  for (size_t i = 0; !forced && !library && i < sizeof names / sizeof names[0]; i++)
    library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!library) return tfm_fail(NO_NCCL_MESSAGE);
  tfm_nccl *n = calloc(1, sizeof *n);
  if (!n) return tfm_fail("NCCL: out of memory");
  if (resolve(library, "ncclGetUniqueId", &n->get_unique_id) ||
      resolve(library, "ncclCommInitRank", &n->comm_init_rank) ||
      resolve(library, "ncclAllReduce", &n->all_reduce) ||
      resolve(library, "ncclGroupStart", &n->group_start) ||
      resolve(library, "ncclGroupEnd", &n->group_end) ||
      resolve(library, "ncclCommDestroy", &n->comm_destroy) ||
      resolve(library, "ncclGetErrorString", &n->error_string)) {
    tfm_nccl_close(n);
    return TFM_FAILED;
  }
  *out = n;
  return TFM_OK;
}

int tfm_nccl_unique_id(tfm_nccl *n, unsigned char id[128]) {
  ncclUniqueId u;
  ncclResult_t r = n->get_unique_id(&u);
  if (r) return failed(n, "ncclGetUniqueId", r);
  memcpy(id, u.internal, sizeof u.internal);
  return TFM_OK;
}

int tfm_nccl_init_rank(tfm_nccl *n, const unsigned char id[128], int size, int rank) {
  ncclUniqueId u;
  memcpy(u.internal, id, sizeof u.internal);
  ncclResult_t r = n->comm_init_rank(&n->comm, size, u, rank);
  return r ? failed(n, "ncclCommInitRank", r) : TFM_OK;
}

int tfm_nccl_allreduce_mean_f32(tfm_nccl *n, uint64_t in, uint64_t out, size_t count,
                                void *stream) {
  if (!n->comm) return tfm_fail("NCCL: no communicator (tfm_nccl_init_rank first)");
  ncclResult_t r = n->all_reduce((const void *)(uintptr_t)in, (void *)(uintptr_t)out, count,
                                 NCCL_FLOAT32, NCCL_AVG, n->comm, stream);
  return r ? failed(n, "ncclAllReduce", r) : TFM_OK;
}

int tfm_nccl_group_start(tfm_nccl *n) {
  ncclResult_t r = n->group_start();
  return r ? failed(n, "ncclGroupStart", r) : TFM_OK;
}

int tfm_nccl_group_end(tfm_nccl *n) {
  ncclResult_t r = n->group_end();
  return r ? failed(n, "ncclGroupEnd", r) : TFM_OK;
}

/* The library stays loaded: NCCL's own threads may still run in it (a
 * failed ncclCommInitRank leaves them behind). */
void tfm_nccl_close(tfm_nccl *n) {
  if (!n) return;
  if (n->comm && n->comm_destroy) n->comm_destroy(n->comm);
  free(n);
}
