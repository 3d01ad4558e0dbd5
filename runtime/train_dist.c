/* Data-parallel training (dist.h): the step of a tfmc build --data-parallel
 * binary in two graphs, the gradients (train_grad: forward and backward,
 * an output "grad.<param>" per param) and their application (train_apply:
 * the same names as inputs, clipping and the optimizer), with the
 * gradients averaged over the ranks in between.
 *
 * Buckets come from the graph: each gradient output's descriptor says
 * after which kernel its value is final (tfm_buffer_desc.ready), so the
 * gradients are grouped in the order the backward finishes them, about
 * TFM_DIST_BUCKET_MB (default 4) MiB a bucket. A kernel hook
 * (tfm_set_kernel_hook) hands a bucket to the communication thread as soon
 * as its last kernel has run; that thread averages it (a sum in rank
 * order, dist.h) into the apply graph's inputs while the backward goes on.
 * The step then waits for the last bucket, averages the loss, runs the
 * apply graph on every rank (same inputs, same bits) and copies the new
 * params into the gradients graph.
 *
 * A --target cuda binary does the same on its GPU (train_nccl.h): the hook
 * runs as each kernel's launch is queued and queues the bucket's NCCL
 * all-reduce, in place on the gradients graph's device outputs, on a
 * stream that waits for that kernel only; the apply graph takes the
 * averages and the gradients graph the new params device to device
 * (gpu.h's links). Nothing but the loss crosses the host. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crc32.h"
#include "dist.h"
#include "train.h"
#include "train_dist.h"
#include "train_nccl.h"

typedef struct Grad {
  const char *name;
  int has_src;     /* the gradients graph has this output (else: a zero gradient) */
  float *src;      /* the gradients graph's output; NULL: it has none (a zero gradient) */
  tfm_gpu_place place; /* src's, for the GPU */
  float *dst;      /* the apply graph's input (ZeRO-1: the norm graph's, or the
                    * owned param's update graph's; NULL: neither) */
  float *dst2;     /* ZeRO-1 with a norm graph: the owned param's update graph's input */
  size_t count;
  int32_t ready;
} Grad;

typedef struct Bucket {
  size_t first, end; /* grads[first, end) */
  size_t count;      /* floats */
  int32_t ready;     /* the kernel after which all of them are final */
} Bucket;

/* ZeRO-1: a param's update graph (tfm_model_info.train_apply_param), open
 * on the rank that owns it. */
typedef struct Shard {
  const tfm_graph_desc *desc;
  const char *param; /* the name of its param */
  size_t bytes;      /* the param's */
  size_t state_bytes;
  int owner;
  tfm_graph graph;   /* the owner's */
} Shard;

typedef struct Copy {
  void *dst;
  const void *src;
  size_t bytes;
} Copy;

struct tfm_dist_train {
  const tfm_model_info *model;
  int rank, size;
  tfm_graph grad;     /* without ZeRO-1; with it the loop's graph is the gradients graph */
  tfm_graph *gg;      /* the gradients graph */
  tfm_graph *apply;
  /* ZeRO-1 (train --zero 1) */
  int zero;
  Shard *shards;
  size_t num_shards;
  tfm_graph norm;     /* the gradients' norm for clipping, when the model clips */
  int has_norm;
  unsigned char *gather; /* the largest rank's params, for their all-gather */
  size_t gather_bytes;
  float *scratch;     /* the largest state tensor: others' moments passing through */
  size_t scratch_bytes;
  Grad *grads;
  size_t num_grads;
  Bucket *buckets;
  size_t num_buckets;
  float *pack; /* the largest bucket */
  Copy *copies;
  size_t num_copies;
  tfm_train_engine engine;
  tfm_nccl_train *nccl; /* a --target cuda binary's */
  /* the global batch (rows x ranks) the batch function fills; this rank's
   * rows of each input are then copied into the gradients graph */
  tfm_graph_desc batch_desc;
  tfm_buffer_desc *batch_buffers;
  tfm_graph batch;
  /* the communication thread */
  pthread_t thread;
  int thread_started;
  pthread_mutex_t lock;
  pthread_cond_t changed;
  size_t posted, reduced; /* buckets handed over / averaged this step */
  size_t next_post;       /* the hook's next bucket */
  uint64_t step;
  int quit, failed;
  char error[512];
  /* timing, seconds, summed over steps */
  double comm_seconds, wait_seconds, step_seconds;
  uint64_t steps;
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Averages bucket b into the apply graph's inputs. */
static int reduce_bucket(tfm_dist_train *d, const Bucket *b, uint64_t step) {
  size_t at = 0;
  for (size_t i = b->first; i < b->end; i++) {
    const Grad *g = &d->grads[i];
    memcpy(d->pack + at, g->src, g->count * sizeof(float));
    at += g->count;
  }
  char what[96];
  snprintf(what, sizeof what, "the gradients of step %" PRIu64 " (bucket %zu of %zu)", step,
           (size_t)(b - d->buckets) + 1, d->num_buckets);
  if (tfm_dist_average_f32(d->pack, d->pack, b->count, what)) return TFM_FAILED;
  at = 0;
  for (size_t i = b->first; i < b->end; i++) {
    const Grad *g = &d->grads[i];
    if (g->dst) memcpy(g->dst, d->pack + at, g->count * sizeof(float));
    if (g->dst2) memcpy(g->dst2, d->pack + at, g->count * sizeof(float));
    at += g->count;
  }
  return TFM_OK;
}

static void *comm_thread(void *arg) {
  tfm_dist_train *d = arg;
  pthread_mutex_lock(&d->lock);
  for (;;) {
    while (!d->quit && d->reduced == d->posted) pthread_cond_wait(&d->changed, &d->lock);
    if (d->quit) break;
    size_t b = d->reduced;
    uint64_t step = d->step;
    int failed = d->failed;
    pthread_mutex_unlock(&d->lock);
    double start = now();
    int status = failed ? TFM_FAILED : reduce_bucket(d, &d->buckets[b], step);
    double spent = now() - start;
    pthread_mutex_lock(&d->lock);
    d->comm_seconds += spent;
    if (status && !d->failed) {
      d->failed = 1;
      snprintf(d->error, sizeof d->error, "%s", tfm_error());
    }
    d->reduced++;
    pthread_cond_broadcast(&d->changed);
  }
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

/* The GPU: buckets [first, end) queued on NCCL's stream; the first
 * failure is kept for the step to report. */
static void queue_on_device(tfm_dist_train *d, size_t first, size_t end) {
  for (size_t b = first; b < end && !d->failed; b++) {
    int status = tfm_nccl_train_begin(d->nccl);
    for (size_t i = d->buckets[b].first; !status && i < d->buckets[b].end; i++)
      status = tfm_nccl_train_average(d->nccl, d->grads[i].place, d->grads[i].count);
    if (tfm_nccl_train_end(d->nccl)) status = TFM_FAILED;
    if (status) {
      d->failed = 1;
      snprintf(d->error, sizeof d->error, "%s", tfm_error());
    }
  }
}

/* tfm_kernel_for's hook (the GPU's: as each launch is queued): every
 * bucket whose gradients are final goes. */
static void kernel_done(void *ctx, int32_t kernel) {
  tfm_dist_train *d = ctx;
  size_t next = d->next_post;
  while (next < d->num_buckets && d->buckets[next].ready <= kernel) next++;
  if (next == d->next_post) return;
  if (d->nccl) {
    queue_on_device(d, d->next_post, next);
    d->next_post = next;
    return;
  }
  d->next_post = next;
  pthread_mutex_lock(&d->lock);
  d->posted = next;
  pthread_cond_broadcast(&d->changed);
  pthread_mutex_unlock(&d->lock);
}

static int set_input(tfm_graph *g, const char *name, int32_t value) {
  int32_t *p = tfm_graph_buffer(g, name, TFM_ROLE_INPUT, NULL);
  if (p) *p = value;
  return p != NULL;
}

static void copy_params(tfm_dist_train *d) {
  for (size_t i = 0; i < d->num_copies; i++)
    memcpy(d->copies[i].dst, d->copies[i].src, d->copies[i].bytes);
}

/* Fails with "rank R <differs>" for the first rank whose crc is not rank 0's. */
static int same_on_every_rank(tfm_dist_train *d, uint32_t crc, const char *what,
                              const char *differs) {
  uint32_t *all = calloc((size_t)d->size, sizeof *all);
  if (!all) return tfm_fail("out of memory");
  int status = tfm_dist_allgather(&crc, all, sizeof crc, what);
  for (int r = 1; !status && r < d->size; r++)
    if (all[r] != all[0]) status = tfm_fail("rank %d %s", r, differs);
  free(all);
  return status;
}

/* Every rank must hold the same params and state: a CRC of them, compared. */
static int check_same_params(tfm_dist_train *d, tfm_graph *g) {
  uint32_t crc = 0;
  for (int32_t i = 0; i < g->desc->num_buffers; i++) {
    const tfm_buffer_desc *b = &g->desc->buffers[i];
    if (b->role != TFM_ROLE_PARAM && b->role != TFM_ROLE_STATE) continue;
    const void *p = tfm_graph_buffer(g, b->name, (tfm_role)b->role, NULL);
    crc = crc32_update(crc, p, (size_t)tfm_buffer_bytes(b));
  }
  return same_on_every_rank(d, crc, "the parameters' checksums",
                            "starts from other parameters than rank 0: every rank must run the "
                            "same binary with the same --seed and checkpoint");
}

static tfm_gpu_place place_of(tfm_graph *g, const tfm_buffer_desc *b) {
  return (tfm_gpu_place){g->arena.persistent, b->region, b->offset};
}

/* The gradients graph's outputs, now that its arena exists. */
static int resolve_sources(tfm_dist_train *d) {
  for (size_t i = 0; i < d->num_grads; i++) {
    Grad *g = &d->grads[i];
    const tfm_buffer_desc *b = NULL;
    g->src = g->has_src ? tfm_graph_buffer(d->gg, g->name, TFM_ROLE_OUTPUT, &b) : NULL;
    if (g->has_src && !g->src) return tfm_fail("train_grad has no output %s", g->name);
    if (b) g->place = place_of(d->gg, b);
  }
  return TFM_OK;
}

/* The GPU: the averaged gradients into the apply graph g's inputs, and
 * its new params back into the gradients graph, device to device. */
static int link_on_device(tfm_dist_train *d, tfm_graph *g) {
  for (size_t i = 0; i < d->num_grads; i++) {
    const tfm_buffer_desc *in;
    if (!d->grads[i].src) continue; /* a zero gradient: the host's zeros go up */
    if (!tfm_graph_buffer(g, d->grads[i].name, TFM_ROLE_INPUT, &in) ||
        tfm_gpu_link(place_of(g, in), d->grads[i].place, tfm_buffer_bytes(in)))
      return TFM_FAILED;
  }
  for (int32_t i = 0; i < d->gg->desc->num_buffers; i++) {
    const tfm_buffer_desc *b = &d->gg->desc->buffers[i], *a;
    if (b->role != TFM_ROLE_PARAM) continue;
    if (!tfm_graph_buffer(g, b->name, TFM_ROLE_PARAM, &a) ||
        tfm_gpu_link(place_of(d->gg, b), place_of(g, a), tfm_buffer_bytes(b)))
      return TFM_FAILED;
  }
  return TFM_OK;
}

static const tfm_buffer_desc *find_desc(const tfm_graph_desc *gd, const char *name, tfm_role role) {
  for (int32_t i = 0; i < gd->num_buffers; i++)
    if (gd->buffers[i].role == (int32_t)role && !strcmp(gd->buffers[i].name, name))
      return &gd->buffers[i];
  return NULL;
}

static int prepare_zero(tfm_dist_train *d, tfm_graph *g) {
  d->gg = g;
  if (resolve_sources(d)) return TFM_FAILED;
  for (size_t i = 0; i < d->num_shards; i++) {
    Shard *sh = &d->shards[i];
    if (sh->owner != d->rank) continue;
    void *to = tfm_graph_buffer(&sh->graph, sh->param, TFM_ROLE_PARAM, NULL);
    const void *from = tfm_graph_buffer(g, sh->param, TFM_ROLE_PARAM, NULL);
    if (!to || !from) return tfm_fail("param %s: not in train_grad (a bad build?)", sh->param);
    memcpy(to, from, sh->bytes);
  }
  return check_same_params(d, g);
}

static int prepare(void *ctx, tfm_graph *g) {
  tfm_dist_train *d = ctx;
  if (d->zero) return prepare_zero(d, g);
  d->apply = g;
  if (resolve_sources(d)) return TFM_FAILED;
  /* param pairs and gradient inputs, now that g's arena exists */
  d->num_copies = 0;
  for (int32_t i = 0; i < d->gg->desc->num_buffers; i++) {
    const tfm_buffer_desc *b = &d->gg->desc->buffers[i];
    if (b->role != TFM_ROLE_PARAM) continue;
    const tfm_buffer_desc *a;
    void *src = tfm_graph_buffer(g, b->name, TFM_ROLE_PARAM, &a);
    if (!src || tfm_buffer_bytes(a) != tfm_buffer_bytes(b) || a->dtype != b->dtype)
      return tfm_fail("the train_apply graph lacks the param '%s' of train_grad (a bad build?)",
                      b->name);
    d->copies[d->num_copies++] = (Copy){tfm_graph_buffer(d->gg, b->name, TFM_ROLE_PARAM, NULL),
                                        src, (size_t)tfm_buffer_bytes(b)};
  }
  for (size_t i = 0; i < d->num_grads; i++) {
    const tfm_buffer_desc *in;
    d->grads[i].dst = tfm_graph_buffer(g, d->grads[i].name, TFM_ROLE_INPUT, &in);
    if (!d->grads[i].dst || (size_t)tfm_buffer_numel(in) != d->grads[i].count)
      return tfm_fail("the train_apply graph has no input '%s' of %zu floats (a bad build?)",
                      d->grads[i].name, d->grads[i].count);
  }
  copy_params(d);
  if (d->nccl && link_on_device(d, g)) return TFM_FAILED;
  return check_same_params(d, g);
}

/* ZeRO-1: the norm of the averaged gradients (every rank has them all),
 * this rank's params' updates, then every rank's new params, broadcast by
 * their owner in rank order, into the gradients graph. */
static int apply_zero(tfm_dist_train *d, const tfm_train_options *o, uint64_t s) {
  float norm = 0;
  if (d->has_norm) {
    set_input(&d->norm, "step", (int32_t)s);
    tfm_graph_run(&d->norm, o->pool);
    const tfm_buffer_desc *nb;
    float *n = tfm_graph_buffer(&d->norm, "grad_norm", TFM_ROLE_OUTPUT, &nb);
    if (!n || nb->dtype != TFM_F32) return tfm_fail("train_norm has no f32 output grad_norm");
    norm = *n;
  }
  for (size_t i = 0; i < d->num_shards; i++) {
    Shard *sh = &d->shards[i];
    if (sh->owner != d->rank) continue;
    set_input(&sh->graph, "step", (int32_t)s);
    float *in = tfm_graph_buffer(&sh->graph, "grad_norm", TFM_ROLE_INPUT, NULL);
    if (in) *in = norm;
    tfm_graph_run(&sh->graph, o->pool);
    tfm_graph_update(&sh->graph);
  }
  for (int r = 0; r < d->size; r++) {
    size_t at = 0;
    for (size_t i = 0; i < d->num_shards; i++)
      if (d->shards[i].owner == r) {
        if (r == d->rank)
          memcpy(d->gather + at, tfm_graph_buffer(&d->shards[i].graph, d->shards[i].param,
                                                  TFM_ROLE_PARAM, NULL), d->shards[i].bytes);
        at += d->shards[i].bytes;
      }
    char what[96];
    snprintf(what, sizeof what, "the params rank %d updated in step %" PRIu64, r, s);
    if (at && tfm_dist_broadcast(d->gather, at, r, what)) return TFM_FAILED;
    at = 0;
    for (size_t i = 0; i < d->num_shards; i++)
      if (d->shards[i].owner == r) {
        memcpy(tfm_graph_buffer(d->gg, d->shards[i].param, TFM_ROLE_PARAM, NULL),
               d->gather + at, d->shards[i].bytes);
        at += d->shards[i].bytes;
      }
  }
  return TFM_OK;
}

static int step(void *ctx, tfm_graph *g, const tfm_train_options *o, uint64_t s,
                uint64_t *tokens, float *loss) {
  tfm_dist_train *d = ctx;
  double start = now();
  if (o->next_batch(o->batch_ctx, &d->batch, s, tokens)) return TFM_FAILED;
  for (int32_t i = 0; i < d->batch_desc.num_buffers; i++) {
    const tfm_buffer_desc *b = &d->batch_desc.buffers[i];
    const tfm_buffer_desc *mine;
    unsigned char *to = tfm_graph_buffer(d->gg, b->name, TFM_ROLE_INPUT, &mine);
    const unsigned char *from = tfm_graph_buffer(&d->batch, b->name, TFM_ROLE_INPUT, NULL);
    size_t bytes = (size_t)tfm_buffer_bytes(mine);
    memcpy(to, from + (size_t)d->rank * bytes, bytes);
  }
  set_input(d->gg, "step", (int32_t)s);
  if (!d->zero) set_input(g, "step", (int32_t)s);
  pthread_mutex_lock(&d->lock);
  d->posted = d->reduced = 0;
  d->step = s;
  pthread_mutex_unlock(&d->lock);
  d->next_post = 0;
  /* buckets final before any kernel (none, usually); on the GPU the first
   * launch's hook takes them, once the device arena exists */
  if (!d->nccl) kernel_done(d, -1);
  tfm_set_kernel_hook(kernel_done, d);
  tfm_graph_run(d->gg, o->pool);
  tfm_set_kernel_hook(NULL, NULL);
  kernel_done(d, INT32_MAX); /* whatever is left */
  double wait_start = now();
  int failed;
  if (d->nccl) { /* the run waited for NCCL's stream; this, for what went after it */
    failed = d->failed || tfm_nccl_train_wait(d->nccl);
    if (failed && !d->failed) snprintf(d->error, sizeof d->error, "%s", tfm_error());
  } else {
    pthread_mutex_lock(&d->lock);
    while (d->reduced < d->num_buckets) pthread_cond_wait(&d->changed, &d->lock);
    failed = d->failed;
    pthread_mutex_unlock(&d->lock);
  }
  d->wait_seconds += now() - wait_start;
  if (failed) return tfm_fail("%s", d->error);
  for (size_t i = 0; i < d->num_grads; i++)
    if (!d->grads[i].src) {
      if (d->grads[i].dst) memset(d->grads[i].dst, 0, d->grads[i].count * sizeof(float));
      if (d->grads[i].dst2) memset(d->grads[i].dst2, 0, d->grads[i].count * sizeof(float));
    }
  const tfm_buffer_desc *lb;
  float *l = tfm_graph_buffer(d->gg, "loss", TFM_ROLE_OUTPUT, &lb);
  if (!l || lb->dtype != TFM_F32 || tfm_buffer_numel(lb) != 1)
    return tfm_fail("the train_grad graph has no f32 scalar output 'loss'");
  char what[64];
  snprintf(what, sizeof what, "the loss of step %" PRIu64, s);
  if (tfm_dist_average_f32(l, loss, 1, what)) return TFM_FAILED;
  if (d->zero) {
    if (apply_zero(d, o, s)) return TFM_FAILED;
    d->step_seconds += now() - start;
    d->steps++;
    return TFM_OK;
  }
  tfm_graph_run(g, o->pool);
  tfm_graph_update(g);
  if (!d->nccl) copy_params(d); /* the GPU's: a link, at the next run */
  d->step_seconds += now() - start;
  d->steps++;
  return TFM_OK;
}

/* ZeRO-1: the shard whose update graph holds state `name`, or NULL. */
static Shard *state_shard(tfm_dist_train *d, const char *name) {
  for (size_t i = 0; i < d->num_shards; i++)
    if (find_desc(d->shards[i].desc, name, TFM_ROLE_STATE)) return &d->shards[i];
  return NULL;
}

/* ZeRO-1 checkpoints hold what one process's do: the params and states of
 * train_apply, in its order. Each tensor's bytes: a param in g, an owned
 * state in its update graph, another rank's state in `elsewhere`
 * (NULL: d->scratch). */
static tfm_tensor *zero_tensors(tfm_dist_train *d, const tfm_graph *g, unsigned char *elsewhere,
                                size_t *count) {
  const tfm_graph_desc *ad = d->model->train_apply;
  tfm_tensor *t = calloc((size_t)ad->num_buffers + 1, sizeof *t);
  if (!t) return NULL;
  size_t n = 0, at = 0;
  for (int32_t i = 0; i < ad->num_buffers; i++) {
    const tfm_buffer_desc *b = &ad->buffers[i];
    if (b->role != TFM_ROLE_PARAM && b->role != TFM_ROLE_STATE) continue;
    t[n].name = b->name;
    t[n].dtype = (tfm_dtype)b->dtype;
    t[n].rank = (size_t)b->rank;
    for (int k = 0; k < b->rank; k++) t[n].shape[k] = (size_t)b->shape[k];
    if (b->role == TFM_ROLE_PARAM) {
      t[n].data = tfm_graph_buffer((tfm_graph *)g, b->name, TFM_ROLE_PARAM, NULL);
    } else {
      Shard *sh = state_shard(d, b->name);
      if (sh && sh->owner == d->rank) {
        t[n].data = tfm_graph_buffer(&sh->graph, b->name, TFM_ROLE_STATE, NULL);
      } else if (elsewhere) {
        t[n].data = elsewhere + at;
        at += (size_t)tfm_buffer_bytes(b);
      } else {
        t[n].data = d->scratch;
      }
    }
    if (!t[n].data) {
      free(t);
      tfm_fail("%s: no buffer for it (a bad build?)", b->name);
      return NULL;
    }
    n++;
  }
  *count = n;
  return t;
}

/* Every rank: rank 0 gathers the other ranks' moments (each broadcast by
 * its owner) into one buffer for the write, freed after. */
static int save_zero(void *ctx, const tfm_graph *g, const char *path, const tfm_meta *meta) {
  tfm_dist_train *d = ctx;
  size_t others = 0;
  for (size_t i = 0; i < d->num_shards; i++)
    if (d->shards[i].owner != 0) others += d->shards[i].state_bytes;
  unsigned char *gathered = d->rank == 0 ? malloc(others + 1) : NULL;
  if (d->rank == 0 && !gathered) return tfm_fail("out of memory for the checkpoint's moments");
  size_t n;
  tfm_tensor *t = zero_tensors(d, g, gathered, &n);
  int status = t ? TFM_OK : TFM_FAILED;
  const tfm_graph_desc *ad = d->model->train_apply;
  for (int32_t i = 0, k = 0; !status && i < ad->num_buffers; i++) {
    const tfm_buffer_desc *b = &ad->buffers[i];
    if (b->role != TFM_ROLE_PARAM && b->role != TFM_ROLE_STATE) continue;
    Shard *sh = b->role == TFM_ROLE_STATE ? state_shard(d, b->name) : NULL;
    if (sh && sh->owner != 0) {
      char what[600];
      snprintf(what, sizeof what, "the optimizer state %s for the checkpoint", b->name);
      status = tfm_dist_broadcast(t[k].data, (size_t)tfm_buffer_bytes(b), sh->owner, what);
    }
    k++;
  }
  if (!status && d->rank == 0) status = tfm_ckpt_save(path, t, n, meta);
  free(t);
  free(gathered);
  return status;
}

/* Every rank reads the file: the params, and the moments of its own
 * params (the others' pass through a scratch buffer). */
static int load_zero(void *ctx, tfm_graph *g, const char *path, tfm_meta *meta) {
  tfm_dist_train *d = ctx;
  size_t n;
  tfm_tensor *t = zero_tensors(d, g, NULL, &n);
  int status = t ? tfm_ckpt_load(path, t, n, meta) : TFM_FAILED;
  free(t);
  return status;
}

/* ZeRO-1: opens the update graphs of this rank's params, the norm graph,
 * and says what the moments take. Owners: the params by size, largest
 * first (ties by name), each to the rank that owns the fewest bytes so
 * far (ties: the lowest rank), so every rank computes the same plan. */
static int open_zero(tfm_dist_train *d, const tfm_train_options *o) {
  const tfm_model_info *m = d->model;
  if (!m->num_train_apply_param || !m->train_apply_param)
    return tfm_fail("this binary of model %s has no per-param update graphs for --zero 1: "
                    "rebuild it with this tfmc's build --data-parallel", m->name);
  d->num_shards = (size_t)m->num_train_apply_param;
  d->shards = calloc(d->num_shards, sizeof *d->shards);
  size_t *order = calloc(d->num_shards, sizeof *order);
  uint64_t *load = calloc((size_t)d->size, sizeof *load);
  if (!d->shards || !order || !load) {
    free(order);
    free(load);
    return tfm_fail("out of memory");
  }
  for (size_t i = 0; i < d->num_shards; i++) {
    Shard *sh = &d->shards[i];
    sh->desc = m->train_apply_param[i];
    for (int32_t k = 0; k < sh->desc->num_buffers; k++) {
      const tfm_buffer_desc *b = &sh->desc->buffers[k];
      if (b->role == TFM_ROLE_PARAM) {
        if (sh->param) {
          free(order);
          free(load);
          return tfm_fail("update graph %zu holds params %s and %s (a bad build?)", i, sh->param,
                          b->name);
        }
        sh->param = b->name;
        sh->bytes = (size_t)tfm_buffer_bytes(b);
      } else if (b->role == TFM_ROLE_STATE) {
        sh->state_bytes += (size_t)tfm_buffer_bytes(b);
        if ((size_t)tfm_buffer_bytes(b) > d->scratch_bytes)
          d->scratch_bytes = (size_t)tfm_buffer_bytes(b);
      }
    }
    if (!sh->param) {
      free(order);
      free(load);
      return tfm_fail("update graph %zu has no param (a bad build?)", i);
    }
    order[i] = i;
  }
  /* a stable sort by size, largest first, then name */
  for (size_t i = 1; i < d->num_shards; i++)
    for (size_t j = i; j > 0; j--) {
      const Shard *a = &d->shards[order[j - 1]], *b = &d->shards[order[j]];
      if (a->bytes > b->bytes || (a->bytes == b->bytes && strcmp(a->param, b->param) <= 0)) break;
      size_t x = order[j];
      order[j] = order[j - 1];
      order[j - 1] = x;
    }
  for (size_t i = 0; i < d->num_shards; i++) {
    int best = 0;
    for (int r = 1; r < d->size; r++)
      if (load[r] < load[best]) best = r;
    d->shards[order[i]].owner = best;
    load[best] += d->shards[order[i]].bytes;
  }
  for (int r = 0; r < d->size; r++)
    if (load[r] > d->gather_bytes) d->gather_bytes = (size_t)load[r];
  free(order);
  free(load);
  d->gather = malloc(d->gather_bytes + 1);
  d->scratch = malloc(d->scratch_bytes + 1);
  if (!d->gather || !d->scratch) return tfm_fail("out of memory");
  uint64_t mine[2] = {0, 0}; /* this rank's moments and update graphs' arenas, bytes */
  for (size_t i = 0; i < d->num_shards; i++) {
    Shard *sh = &d->shards[i];
    if (sh->owner != d->rank) continue;
    if (tfm_graph_open(&sh->graph, sh->desc)) return TFM_FAILED;
    mine[0] += sh->state_bytes;
    mine[1] += (uint64_t)(sh->desc->persistent_bytes + sh->desc->scratch_bytes);
  }
  if (m->train_norm) {
    if (tfm_graph_open(&d->norm, m->train_norm)) return TFM_FAILED;
    d->has_norm = 1;
    mine[1] += (uint64_t)(m->train_norm->persistent_bytes + m->train_norm->scratch_bytes);
  }
  uint64_t *all = calloc((size_t)d->size * 2, sizeof *all);
  if (!all) return tfm_fail("out of memory");
  if (tfm_dist_allgather(mine, all, sizeof mine, "the ranks' optimizer state sizes")) {
    free(all);
    return TFM_FAILED;
  }
  uint64_t largest = 0, arena = 0, full = 0;
  for (int r = 0; r < d->size; r++) {
    if (all[2 * r] > largest) largest = all[2 * r];
    if (all[2 * r + 1] > arena) arena = all[2 * r + 1];
  }
  const tfm_graph_desc *ad = m->train_apply;
  for (int32_t i = 0; i < ad->num_buffers; i++)
    if (ad->buffers[i].role == TFM_ROLE_STATE) full += (uint64_t)tfm_buffer_bytes(&ad->buffers[i]);
  if (o->log && d->rank == 0)
    fprintf(o->log, "ZeRO-1: %zu params over %d ranks; optimizer state: %.3f MB per rank "
            "(the largest rank's; rank 0: %.3f MB) instead of %.3f MB, %.3f MB saved per rank; "
            "update graphs' arenas %.3f MB instead of train_apply's %.3f MB\n",
            d->num_shards, d->size, largest / 1e6, all[0] / 1e6, full / 1e6,
            (full - largest) / 1e6, arena / 1e6,
            (double)(ad->persistent_bytes + ad->scratch_bytes) / 1e6);
  free(all);
  return TFM_OK;
}

/* ZeRO-1: where gradient g lands: the norm graph's input (every rank) and
 * the owner's update graph's. */
static int zero_destinations(tfm_dist_train *d, Grad *g) {
  float *norm_in = NULL, *own = NULL;
  if (d->has_norm && !(norm_in = tfm_graph_buffer(&d->norm, g->name, TFM_ROLE_INPUT, NULL)))
    return tfm_fail("train_norm has no input %s (a bad build?)", g->name);
  for (size_t i = 0; i < d->num_shards; i++) {
    Shard *sh = &d->shards[i];
    if (!find_desc(sh->desc, g->name, TFM_ROLE_INPUT)) continue;
    if (sh->owner == d->rank) own = tfm_graph_buffer(&sh->graph, g->name, TFM_ROLE_INPUT, NULL);
    break;
  }
  g->dst = norm_in ? norm_in : own;
  g->dst2 = norm_in ? own : NULL;
  return TFM_OK;
}

static int by_ready(const void *a, const void *b) {
  const Grad *x = a, *y = b;
  if (x->ready != y->ready) return x->ready < y->ready ? -1 : 1;
  return strcmp(x->name, y->name); /* a fixed order whatever qsort does */
}

static size_t bucket_floats(void) {
  const char *s = getenv("TFM_DIST_BUCKET_MB");
  double mb = s ? strtod(s, NULL) : 4.0;
  if (!(mb > 0)) mb = 4.0;
  return (size_t)(mb * 1024 * 1024 / sizeof(float)) + 1;
}

/* Every rank must run the same program: the model, its config and its
 * graphs' sizes, compared. */
static int check_same_binary(tfm_dist_train *d, const tfm_train_options *o) {
  const tfm_model_info *m = d->model;
  uint32_t crc = crc32_update(0, m->name, strlen(m->name));
  for (int32_t i = 0; i < m->num_config; i++) {
    crc = crc32_update(crc, m->config_keys[i], strlen(m->config_keys[i]) + 1);
    crc = crc32_update(crc, m->config_values[i], strlen(m->config_values[i]) + 1);
  }
  int64_t sizes[7] = {m->train_grad->persistent_bytes, m->train_grad->scratch_bytes,
                      m->train_apply->persistent_bytes, m->train_grad->num_kernels,
                      (int64_t)o->steps, (int64_t)o->seed, d->zero};
  crc = crc32_update(crc, sizes, sizeof sizes);
  return same_on_every_rank(d, crc, "the ranks' model fingerprints",
                            "runs another model, config or command line (--steps, --seed, --zero) than "
                            "rank 0: start every rank with the same binary and options");
}

/* The batch graph: the gradients graph's inputs with a batch axis (the
 * first) ranks times longer; scalars ("step") are left out. */
static int open_batch(tfm_dist_train *d, const tfm_graph_desc *gd) {
  d->batch_buffers = calloc((size_t)gd->num_buffers + 1, sizeof *d->batch_buffers);
  if (!d->batch_buffers) return tfm_fail("out of memory");
  int32_t n = 0;
  int64_t offset = 0;
  for (int32_t i = 0; i < gd->num_buffers; i++) {
    const tfm_buffer_desc *b = &gd->buffers[i];
    if (b->role != TFM_ROLE_INPUT || b->rank == 0) continue;
    tfm_buffer_desc *c = &d->batch_buffers[n++];
    *c = *b;
    c->region = TFM_REGION_SCRATCH;
    c->shape[0] *= d->size;
    c->offset = offset;
    offset += (tfm_buffer_bytes(c) + TFM_ARENA_ALIGN - 1) / TFM_ARENA_ALIGN * TFM_ARENA_ALIGN;
  }
  d->batch_desc = (tfm_graph_desc){.name = "batch", .scratch_bytes = offset,
                                   .num_buffers = n, .buffers = d->batch_buffers};
  return tfm_graph_open(&d->batch, &d->batch_desc);
}

int tfm_dist_train_open(tfm_dist_train **out, const tfm_train_options *o, int zero) {
  *out = NULL;
  const tfm_model_info *m = o->model;
  if (!m->train_grad || !m->train_apply)
    return tfm_fail("this binary of model %s cannot train data-parallel: rebuild it with "
                    "tfmc build --data-parallel", m->name);
  if (m->cuda && zero)
    return tfm_fail("--zero 1 is not implemented for a --target cuda binary: train without it "
                    "(NCCL averages every gradient on the GPUs) or build for the CPU");
  tfm_dist_train *d = calloc(1, sizeof *d);
  if (!d) return tfm_fail("out of memory");
  d->model = m;
  d->rank = tfm_dist_rank();
  d->size = tfm_dist_size();
  d->zero = zero;
  d->gg = &d->grad;
  pthread_mutex_init(&d->lock, NULL);
  pthread_cond_init(&d->changed, NULL);
  *out = d;
  if ((m->cuda && tfm_nccl_train_open(&d->nccl, d->rank, d->size)) || check_same_binary(d, o) ||
      (!zero && tfm_graph_open(&d->grad, m->train_grad)) || (zero && open_zero(d, o)))
    return TFM_FAILED;
  const tfm_graph_desc *gd = m->train_grad;
  if (open_batch(d, gd)) return TFM_FAILED;
  d->grads = calloc((size_t)gd->num_buffers + 1, sizeof *d->grads);
  d->copies = calloc((size_t)gd->num_buffers + 1, sizeof *d->copies);
  if (!d->grads || !d->copies) return tfm_fail("out of memory");
  /* a gradient per apply input "grad.*", found among the grad graph's outputs */
  const tfm_graph_desc *ad = m->train_apply;
  for (int32_t i = 0; i < ad->num_buffers; i++) {
    const tfm_buffer_desc *in = &ad->buffers[i];
    if (in->role != TFM_ROLE_INPUT || strncmp(in->name, "grad.", 5)) continue;
    if (in->dtype != TFM_F32)
      return tfm_fail("gradient %s is %s: data-parallel training reduces f32 gradients", in->name,
                      tfm_dtype_name((tfm_dtype)in->dtype));
    Grad *g = &d->grads[d->num_grads++];
    g->name = in->name;
    g->count = (size_t)tfm_buffer_numel(in);
    const tfm_buffer_desc *out_desc = find_desc(gd, in->name, TFM_ROLE_OUTPUT);
    g->has_src = out_desc != NULL;
    g->ready = g->has_src ? out_desc->ready : INT32_MAX; /* zeros last, in no bucket */
    if (zero && zero_destinations(d, g)) return TFM_FAILED;
    if (g->has_src && (size_t)tfm_buffer_numel(out_desc) != g->count)
      return tfm_fail("%s differs between train_grad and train_apply (a bad build?)", in->name);
  }
  if (d->num_grads > (size_t)ad->num_buffers) return tfm_fail("too many gradients");
  qsort(d->grads, d->num_grads, sizeof *d->grads, by_ready);
  /* buckets: consecutive in readiness, about bucket_floats() each; the zero
   * gradients, last, in none */
  d->buckets = calloc(d->num_grads + 1, sizeof *d->buckets);
  if (!d->buckets) return tfm_fail("out of memory");
  size_t limit = bucket_floats(), largest = 1;
  for (size_t i = 0; i < d->num_grads; i++) {
    if (!d->grads[i].has_src) continue;
    Bucket *b = d->num_buckets ? &d->buckets[d->num_buckets - 1] : NULL;
    if (!b || b->count >= limit) {
      b = &d->buckets[d->num_buckets++];
      b->first = i;
      b->count = 0;
    }
    b->end = i + 1;
    b->count += d->grads[i].count;
    b->ready = d->grads[i].ready;
    if (b->count > largest) largest = b->count;
  }
  d->pack = malloc(largest * sizeof *d->pack);
  if (!d->pack) return tfm_fail("out of memory");
  if (!d->nccl) { /* the GPU's buckets go from the hook straight to NCCL's stream */
    if (pthread_create(&d->thread, NULL, comm_thread, d)) return tfm_fail("cannot start a thread");
    d->thread_started = 1;
  }
  d->engine = (tfm_train_engine){.graph = zero ? m->train_grad : m->train_apply, .ctx = d,
                                 .prepare = prepare, .step = step,
                                 .save = zero ? save_zero : NULL, .load = zero ? load_zero : NULL,
                                 .writes = d->rank == 0,
                                 .world_size = (uint64_t)d->size, .rank = (uint64_t)d->rank};
  return TFM_OK;
}

const tfm_train_engine *tfm_dist_train_engine(const tfm_dist_train *d) { return &d->engine; }

void tfm_dist_train_report(const tfm_dist_train *d, FILE *out) {
  if (!d || !d->steps || !out) return;
  if (d->nccl) { /* the device's timing would need events: the step's only */
    fprintf(out, "data-parallel: %d ranks, NCCL on the GPUs, %zu gradients in %zu buckets; per "
            "step %.1f ms\n", d->size, d->num_grads, d->num_buckets,
            1e3 * d->step_seconds / (double)d->steps);
    return;
  }
  double comm = d->comm_seconds / (double)d->steps, exposed = d->wait_seconds / (double)d->steps;
  double step_s = d->step_seconds / (double)d->steps;
  fprintf(out, "data-parallel: %d ranks, %zu gradients in %zu buckets; per step %.1f ms, "
          "averaging %.1f ms of which %.1f ms after the backward (%.0f%% hidden behind it)\n",
          d->size, d->num_grads, d->num_buckets, 1e3 * step_s, 1e3 * comm, 1e3 * exposed,
          comm > 0 ? 100.0 * (1.0 - (exposed < comm ? exposed / comm : 1.0)) : 0.0);
}

void tfm_dist_train_close(tfm_dist_train *d) {
  if (!d) return;
  if (d->thread_started) {
    pthread_mutex_lock(&d->lock);
    d->quit = 1;
    pthread_cond_broadcast(&d->changed);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
  }
  tfm_set_kernel_hook(NULL, NULL);
  if (d->grad.desc) tfm_graph_close(&d->grad);
  tfm_nccl_train_close(d->nccl);
  for (size_t i = 0; i < d->num_shards; i++)
    if (d->shards[i].graph.desc) tfm_graph_close(&d->shards[i].graph);
  free(d->shards);
  if (d->norm.desc) tfm_graph_close(&d->norm);
  free(d->gather);
  free(d->scratch);
  if (d->batch.desc) tfm_graph_close(&d->batch);
  free(d->batch_buffers);
  pthread_mutex_destroy(&d->lock);
  pthread_cond_destroy(&d->changed);
  free(d->grads);
  free(d->buckets);
  free(d->copies);
  free(d->pack);
  free(d);
}
