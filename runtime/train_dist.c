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
 * params into the gradients graph. */
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

typedef struct Grad {
  const char *name;
  float *src;      /* the gradients graph's output; NULL: it has none (a zero gradient) */
  float *dst;      /* the apply graph's input */
  size_t count;
  int32_t ready;
} Grad;

typedef struct Bucket {
  size_t first, end; /* grads[first, end) */
  size_t count;      /* floats */
  int32_t ready;     /* the kernel after which all of them are final */
} Bucket;

typedef struct Copy {
  void *dst;
  const void *src;
  size_t bytes;
} Copy;

struct tfm_dist_train {
  const tfm_model_info *model;
  int rank, size;
  tfm_graph grad;
  tfm_graph *apply;
  Grad *grads;
  size_t num_grads;
  Bucket *buckets;
  size_t num_buckets;
  float *pack; /* the largest bucket */
  Copy *copies;
  size_t num_copies;
  tfm_train_engine engine;
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
    memcpy(g->dst, d->pack + at, g->count * sizeof(float));
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

/* tfm_kernel_for's hook: every bucket whose gradients are final goes. */
static void kernel_done(void *ctx, int32_t kernel) {
  tfm_dist_train *d = ctx;
  size_t next = d->next_post;
  while (next < d->num_buckets && d->buckets[next].ready <= kernel) next++;
  if (next == d->next_post) return;
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

static int prepare(void *ctx, tfm_graph *g) {
  tfm_dist_train *d = ctx;
  d->apply = g;
  /* param pairs and gradient inputs, now that g's arena exists */
  d->num_copies = 0;
  for (int32_t i = 0; i < d->grad.desc->num_buffers; i++) {
    const tfm_buffer_desc *b = &d->grad.desc->buffers[i];
    if (b->role != TFM_ROLE_PARAM) continue;
    const tfm_buffer_desc *a;
    void *src = tfm_graph_buffer(g, b->name, TFM_ROLE_PARAM, &a);
    if (!src || tfm_buffer_bytes(a) != tfm_buffer_bytes(b) || a->dtype != b->dtype)
      return tfm_fail("the train_apply graph lacks the param '%s' of train_grad (a bad build?)",
                      b->name);
    d->copies[d->num_copies++] = (Copy){tfm_graph_buffer(&d->grad, b->name, TFM_ROLE_PARAM, NULL),
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
  return check_same_params(d, g);
}

static int step(void *ctx, tfm_graph *g, const tfm_train_options *o, uint64_t s,
                uint64_t *tokens, float *loss) {
  tfm_dist_train *d = ctx;
  double start = now();
  if (o->next_batch(o->batch_ctx, &d->batch, s, tokens)) return TFM_FAILED;
  for (int32_t i = 0; i < d->batch_desc.num_buffers; i++) {
    const tfm_buffer_desc *b = &d->batch_desc.buffers[i];
    const tfm_buffer_desc *mine;
    unsigned char *to = tfm_graph_buffer(&d->grad, b->name, TFM_ROLE_INPUT, &mine);
    const unsigned char *from = tfm_graph_buffer(&d->batch, b->name, TFM_ROLE_INPUT, NULL);
    size_t bytes = (size_t)tfm_buffer_bytes(mine);
    memcpy(to, from + (size_t)d->rank * bytes, bytes);
  }
  set_input(&d->grad, "step", (int32_t)s);
  set_input(g, "step", (int32_t)s);
  pthread_mutex_lock(&d->lock);
  d->posted = d->reduced = 0;
  d->step = s;
  pthread_mutex_unlock(&d->lock);
  d->next_post = 0;
  kernel_done(d, -1); /* buckets final before any kernel (none, usually) */
  tfm_set_kernel_hook(kernel_done, d);
  tfm_graph_run(&d->grad, o->pool);
  tfm_set_kernel_hook(NULL, NULL);
  kernel_done(d, INT32_MAX); /* whatever is left */
  double wait_start = now();
  pthread_mutex_lock(&d->lock);
  while (d->reduced < d->num_buckets) pthread_cond_wait(&d->changed, &d->lock);
  int failed = d->failed;
  pthread_mutex_unlock(&d->lock);
  d->wait_seconds += now() - wait_start;
  if (failed) return tfm_fail("%s", d->error);
  for (size_t i = 0; i < d->num_grads; i++)
    if (!d->grads[i].src) memset(d->grads[i].dst, 0, d->grads[i].count * sizeof(float));
  const tfm_buffer_desc *lb;
  float *l = tfm_graph_buffer(&d->grad, "loss", TFM_ROLE_OUTPUT, &lb);
  if (!l || lb->dtype != TFM_F32 || tfm_buffer_numel(lb) != 1)
    return tfm_fail("the train_grad graph has no f32 scalar output 'loss'");
  char what[64];
  snprintf(what, sizeof what, "the loss of step %" PRIu64, s);
  if (tfm_dist_average_f32(l, loss, 1, what)) return TFM_FAILED;
  tfm_graph_run(g, o->pool);
  tfm_graph_update(g);
  copy_params(d);
  d->step_seconds += now() - start;
  d->steps++;
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
  int64_t sizes[6] = {m->train_grad->persistent_bytes, m->train_grad->scratch_bytes,
                      m->train_apply->persistent_bytes, m->train_grad->num_kernels,
                      (int64_t)o->steps, (int64_t)o->seed};
  crc = crc32_update(crc, sizes, sizeof sizes);
  return same_on_every_rank(d, crc, "the ranks' model fingerprints",
                            "runs another model, config or command line (--steps, --seed) than "
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

int tfm_dist_train_open(tfm_dist_train **out, const tfm_train_options *o) {
  *out = NULL;
  const tfm_model_info *m = o->model;
  if (!m->train_grad || !m->train_apply)
    return tfm_fail("this binary of model %s cannot train data-parallel: rebuild it with "
                    "tfmc build --data-parallel", m->name);
  /* --target cuda: the gradients are to be summed on the devices by NCCL
   * (nccl.c), never through the host; the CUDA step has no hook for it yet,
   * so such a binary refuses rather than move gradients through the host. */
  if (m->cuda) {
    tfm_nccl *nccl;
    if (tfm_nccl_load(&nccl))
      return tfm_fail("a --target cuda binary trains data-parallel over NCCL: %s", tfm_error());
    tfm_nccl_close(nccl);
    return tfm_fail("data-parallel training of a --target cuda binary is not implemented yet "
                    "(NCCL was found); train on one GPU, or build for the CPU");
  }
  tfm_dist_train *d = calloc(1, sizeof *d);
  if (!d) return tfm_fail("out of memory");
  d->model = m;
  d->rank = tfm_dist_rank();
  d->size = tfm_dist_size();
  pthread_mutex_init(&d->lock, NULL);
  pthread_cond_init(&d->changed, NULL);
  *out = d;
  if (check_same_binary(d, o) || tfm_graph_open(&d->grad, m->train_grad)) return TFM_FAILED;
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
    const tfm_buffer_desc *out_desc;
    g->src = tfm_graph_buffer(&d->grad, in->name, TFM_ROLE_OUTPUT, &out_desc);
    g->ready = g->src ? out_desc->ready : INT32_MAX; /* zeros last, in no bucket */
    if (g->src && (size_t)tfm_buffer_numel(out_desc) != g->count)
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
    if (!d->grads[i].src) continue;
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
  if (pthread_create(&d->thread, NULL, comm_thread, d)) return tfm_fail("cannot start a thread");
  d->thread_started = 1;
  d->engine = (tfm_train_engine){.graph = m->train_apply, .ctx = d, .prepare = prepare,
                                 .step = step, .writes = d->rank == 0,
                                 .world_size = (uint64_t)d->size, .rank = (uint64_t)d->rank};
  return TFM_OK;
}

const tfm_train_engine *tfm_dist_train_engine(const tfm_dist_train *d) { return &d->engine; }

void tfm_dist_train_report(const tfm_dist_train *d, FILE *out) {
  if (!d || !d->steps || !out) return;
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
