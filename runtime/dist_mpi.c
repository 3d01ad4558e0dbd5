/* dist.h over MPI. Every collective is point to point (MPI_Isend and
 * MPI_Irecv to and from every other rank) and polled with MPI_Testall
 * against a deadline, so that a lost rank is a message naming it rather
 * than a hang, and so that a sum is taken in rank order from the bytes
 * each rank sent: no MPI_Allreduce, whose summation order is the
 * library's. With N ranks each sends (N - 1) times its data, as a ring
 * allreduce does for N = 2. Calls are made by one thread at a time
 * (MPI_THREAD_SERIALIZED): the training loop's or its communication
 * thread's. */
#define _POSIX_C_SOURCE 200809L /* nanosleep, clock_gettime */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist.h"
#include "tfmrt.h"

static int rank, size = 1, started;

int tfm_dist_available(void) { return 1; }
int tfm_dist_rank(void) { return rank; }
int tfm_dist_size(void) { return size; }

int tfm_dist_init(void) {
  if (started) return TFM_OK;
  int provided = 0;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return tfm_fail("MPI_Init_thread failed");
  started = 1;
  if (provided < MPI_THREAD_SERIALIZED)
    return tfm_fail("this MPI gives thread level %d, below MPI_THREAD_SERIALIZED", provided);
  /* Failures come back to us, to be reported with the rank they concern. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return TFM_OK;
}

void tfm_dist_finalize(void) {
  if (started) MPI_Finalize();
  started = 0;
}

void tfm_dist_abort(int code) {
  if (started) MPI_Abort(MPI_COMM_WORLD, code);
  exit(code);
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Waits for the n requests; peer[i] is the rank request i talks to. */
static int wait_all(MPI_Request *req, const int *peer, int n, const char *what) {
  double deadline = seconds() + tfm_dist_timeout();
  struct timespec nap = {0, 20000}; /* 20 us, doubling to 1 ms while nothing arrives */
  for (;;) {
    int done = 0;
    MPI_Status *st = calloc((size_t)n + 1, sizeof *st);
    int rc = st ? MPI_Testall(n, req, &done, st) : MPI_ERR_NO_MEM;
    if (rc != MPI_SUCCESS) {
      char lost[256] = "";
      size_t used = 0;
      for (int i = 0; st && rc == MPI_ERR_IN_STATUS && i < n; i++)
        if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING &&
            used < sizeof lost - 16)
          used += (size_t)snprintf(lost + used, sizeof lost - used, "%s%d", used ? ", " : "", peer[i]);
      free(st);
      char msg[MPI_MAX_ERROR_STRING] = "";
      int len = 0;
      MPI_Error_string(rc, msg, &len);
      return tfm_fail("rank %d: %s failed%s%s: %s; a rank was lost (killed or its host is gone)",
                      rank, what, used ? " talking to rank " : "", lost, msg);
    }
    free(st);
    if (done) return TFM_OK;
    if (seconds() > deadline) {
      char lost[256] = "";
      size_t used = 0;
      for (int i = 0, last = -1; i < n; i++) {
        int flag = 1;
        if (req[i] != MPI_REQUEST_NULL) MPI_Request_get_status(req[i], &flag, MPI_STATUS_IGNORE);
        if (!flag && peer[i] != last && used < sizeof lost - 16) {
          used += (size_t)snprintf(lost + used, sizeof lost - used, "%s%d", used ? ", " : "", peer[i]);
          last = peer[i];
        }
      }
      return tfm_fail("rank %d: no answer from rank %s for %.0f s in %s; that rank was lost "
                      "(killed, crashed or its host is gone): ending the job (TFM_DIST_TIMEOUT "
                      "sets the wait)", rank, used ? lost : "?", tfm_dist_timeout(), what);
    }
    nanosleep(&nap, NULL);
    if (nap.tv_nsec < 1000000) nap.tv_nsec *= 2;
  }
}

/* Sends `bytes` at mine to every other rank and receives theirs into
 * all + r * bytes (all may hold mine at its own place already). Messages
 * above 1 GiB go in pieces. */
static int exchange(const void *mine, unsigned char *all, size_t bytes, const char *what) {
  enum { PIECE = 1 << 30 };
  size_t pieces = bytes ? (bytes + PIECE - 1) / PIECE : 1;
  size_t n = 2 * (size_t)(size - 1) * pieces;
  MPI_Request *req = malloc(n * sizeof *req);
  int *peer = malloc(n * sizeof *peer);
  if (!req || !peer) {
    free(req);
    free(peer);
    return tfm_fail("rank %d: out of memory for %s", rank, what);
  }
  int k = 0, status = TFM_OK;
  for (int r = 0; r < size && !status; r++) {
    if (r == rank) continue;
    for (size_t p = 0; p < pieces; p++) {
      size_t at = p * PIECE, len = bytes - at < PIECE ? bytes - at : PIECE;
      peer[k] = r;
      if (MPI_Irecv(all + (size_t)r * bytes + at, (int)len, MPI_BYTE, r, (int)p, MPI_COMM_WORLD,
                    &req[k++]) != MPI_SUCCESS)
        status = tfm_fail("rank %d: cannot receive %s from rank %d", rank, what, r);
      peer[k] = r;
      if (!status && MPI_Isend((const unsigned char *)mine + at, (int)len, MPI_BYTE, r, (int)p,
                               MPI_COMM_WORLD, &req[k++]) != MPI_SUCCESS)
        status = tfm_fail("rank %d: cannot send %s to rank %d", rank, what, r);
    }
  }
  if (!status) status = wait_all(req, peer, k, what);
  free(req);
  free(peer);
  return status;
}

int tfm_dist_allgather(const void *mine, void *all, size_t bytes, const char *what) {
  memcpy((unsigned char *)all + (size_t)rank * bytes, mine, bytes);
  return size == 1 ? TFM_OK : exchange(mine, all, bytes, what);
}

int tfm_dist_average_f32(const float *in, float *out, size_t count, const char *what) {
  if (size == 1) {
    if (out != in) memcpy(out, in, count * sizeof *out);
    return TFM_OK;
  }
  float *all = malloc((size_t)size * count * sizeof *all);
  if (!all) return tfm_fail("rank %d: out of memory for %s", rank, what);
  int status = tfm_dist_allgather(in, all, count * sizeof *all, what);
  if (!status) {
    /* rank order on every rank: ((x0 + x1) + x2) + ..., then / N */
    float n = (float)size;
    for (size_t i = 0; i < count; i++) {
      float s = all[i];
      for (int r = 1; r < size; r++) s += all[(size_t)r * count + i];
      out[i] = s / n;
    }
  }
  free(all);
  return status;
}

int tfm_dist_broadcast(void *buf, size_t bytes, int root, const char *what) {
  if (size == 1) return TFM_OK;
  int n = rank == root ? size - 1 : 1, k = 0;
  MPI_Request *req = malloc((size_t)n * sizeof *req);
  int *peer = malloc((size_t)n * sizeof *peer);
  if (!req || !peer) {
    free(req);
    free(peer);
    return tfm_fail("rank %d: out of memory for %s", rank, what);
  }
  if (bytes > (size_t)1 << 30) {
    free(req);
    free(peer);
    return tfm_fail("rank %d: %s: broadcasts above 1 GiB are not supported", rank, what);
  }
  for (int r = 0; r < size; r++) {
    if (rank == root && r != root) {
      peer[k] = r;
      MPI_Isend(buf, (int)bytes, MPI_BYTE, r, 7, MPI_COMM_WORLD, &req[k++]);
    } else if (rank != root && r == root) {
      peer[k] = r;
      MPI_Irecv(buf, (int)bytes, MPI_BYTE, r, 7, MPI_COMM_WORLD, &req[k++]);
    }
  }
  int status = wait_all(req, peer, k, what);
  free(req);
  free(peer);
  return status;
}

int tfm_dist_barrier(const char *what) {
  unsigned char one = 1, *all = calloc((size_t)size, 1);
  if (!all) return tfm_fail("rank %d: out of memory for %s", rank, what);
  int status = tfm_dist_allgather(&one, all, 1, what);
  free(all);
  return status;
}
