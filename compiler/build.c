/* tfmc build: a .tfm file to a binary. The model's graphs (init, train,
 * forward, and inspect and decode when it has them) are lowered, optimised, planned, compiled through LLVM
 * into objects with their descriptions, and linked with the runtime. */
#define _POSIX_C_SOURCE 200809L
#include "build.h"

#include <libgen.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "build_header.h"
#include "cpu.h"
#include "describe.h"
#include "diag.h"
#include "errbuf.h"
#include "kernel.h"
#include "link.h"
#include "lower.h"
#include "lower_model.h"
#include "pass.h"
#include "ptx.h"
#include "train.h"

#ifndef TFM_RUNTIME_LIB
#define TFM_RUNTIME_LIB "libtfmrt.a"
#endif
#ifndef TFM_RUNTIME_MAIN_LIB
#define TFM_RUNTIME_MAIN_LIB "libtfmrt_main.a"
#endif
#ifndef TFM_RUNTIME_TOKENIZER_LIB
#define TFM_RUNTIME_TOKENIZER_LIB "libtfmrt_tokenizer.a"
#endif
#ifndef TFM_TOKENIZER_SYSTEM_LIBS
#define TFM_TOKENIZER_SYSTEM_LIBS "-lutf8proc"
#endif
#ifndef TFM_RUNTIME_DIST_LIB
#define TFM_RUNTIME_DIST_LIB "libtfmrt_dist.a"
#endif
#ifndef TFM_DIST_SYSTEM_LIBS
#define TFM_DIST_SYSTEM_LIBS ""
#endif
#ifndef TFM_RUNTIME_LINK_FLAGS
#define TFM_RUNTIME_LINK_FLAGS ""
#endif

/* The seed of the parameters' Philox key; the binary's --seed varies the draw. */
static const uint64_t INIT_SEED = 0x74666d696e6974ull;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct Compiled {
  const char *prefix, *name;
  Graph *graph;
  KernelPlan *plan;
  CpuModule *module;
  char object[4200];
  /* --cpu generic-dispatch: the objects of variants 1.. (dispatch.c); the
   * module above is variant 0's, with the dispatching entry points */
  char variant_object[CPU_VARIANTS][4200];
  /* Inputs of compile_graph, which runs on a thread of its own: */
  Graph *lowered;
  const BuildOptions *options;
  const ModelDescription *model; /* set for the graph that describes the model */
  /* Its result: */
  int ok;
  char error[600];
  double seconds, emit_seconds;
} Compiled;

static void compiled_free(Compiled *c) {
  if (c->object[0]) unlink(c->object);
  for (int v = 1; v < CPU_VARIANTS; v++)
    if (c->variant_object[v][0]) unlink(c->variant_object[v]);
  graph_free(c->lowered);
  cpu_module_free(c->module);
  kernel_plan_free(c->plan);
  graph_free(c->graph);
}

static bool cpu_dispatching(const BuildOptions *b) {
  return !strcmp(b->cpu, "generic-dispatch");
}

/* --cpu generic-dispatch: the graph's code for variants 1.. of dispatch.c,
 * each an object of its own beside variant 0's (the Compiled's module). */
static bool compile_variants(Compiled *c, char *err, size_t err_size) {
  for (int v = 1; v < CPU_VARIANTS; v++) {
    char prefix[240];
    CpuOptions o = {.cpu = cpu_variants[v].cpu, .features = cpu_variants[v].features,
                    .prefix = cpu_variant_prefix(c->prefix, v, prefix, sizeof prefix)};
    if (snprintf(c->variant_object[v], sizeof c->variant_object[v], "%s.%s.o", c->object,
                 cpu_variants[v].name) >= (int)sizeof c->variant_object[v])
      return errbuf_set(err, err_size, "the temporary folder's name is too long");
    CpuModule *m = cpu_compile(c->plan, &o, err, err_size);
    bool ok = m && cpu_emit_object(m, c->variant_object[v], err, err_size);
    cpu_module_free(m);
    if (!ok) return false;
  }
  return true;
}

/* Optimises, plans, compiles and writes the object of one graph (owns
 * c->lowered). Runs on its own thread: errors go to c->error, not diag. */
static void compile_graph(Compiled *c) {
  char err[512];
  double start = now();
  const char *stage = "internal error: optimising";
  KernelPlanOptions plan_options =
      c->options->cuda ? ptx_plan_options() : cpu_plan_options();
  c->graph = pass_standard(c->lowered, err, sizeof err);
  graph_free(c->lowered);
  c->lowered = NULL;
  if (c->graph) {
    stage = "internal error: planning";
    Graph *prepared = kernel_prepare(c->graph, &plan_options, NULL, err, sizeof err);
    graph_free(c->graph);
    c->graph = prepared;
  }
  if (c->graph)
    c->plan = kernel_plan_build(c->graph, &plan_options, err, sizeof err);
  if (c->plan) {
    stage = "code generation for";
    char *ptx = NULL;
    /* --target cuda: the kernels become PTX, the host module launches them. */
    if (c->options->cuda) {
      stage = "PTX generation for";
      PtxOptions po = {.arch = c->options->gpu_arch, .prefix = c->prefix,
                       .cublas = c->options->cublas};
      ptx = ptx_compile(c->plan, &po, err, sizeof err);
    }
    bool dispatch = cpu_dispatching(c->options);
    if ((ptx || !c->options->cuda) && (!dispatch || compile_variants(c, err, sizeof err))) {
      PtxHost host = {.ptx = ptx, .cublas = c->options->cublas};
      Target cuda_host = ptx_host_target(&host);
      CpuOptions o = {.cpu = dispatch ? cpu_variants[0].cpu : c->options->cpu,
                      .prefix = c->prefix, .target = c->options->cuda ? &cuda_host : NULL};
      c->module = cpu_compile(c->plan, &o, err, sizeof err);
      if (c->module && dispatch && !cpu_add_dispatch(c->module, c->prefix, err, sizeof err)) {
        cpu_module_free(c->module);
        c->module = NULL;
      }
    }
    free(ptx);
  }
  if (c->module) {
    stage = "internal error: describing";
    if (describe_graph(c->module, c->plan, c->prefix, c->name, err, sizeof err)) {
      if (c->model) describe_model(c->module, c->model);
      c->seconds = now() - start;
      stage = "writing the object of";
      double emit_start = now();
      c->ok = cpu_emit_object(c->module, c->object, err, sizeof err);
      c->emit_seconds = now() - emit_start;
    }
  }
  if (!c->ok) snprintf(c->error, sizeof c->error, "%s the %s graph: %s", stage, c->name, err);
}

static void *compile_graphs(void *arg) {
  for (Compiled **c = arg; *c; c++) compile_graph(*c);
  return NULL;
}

static const char *value_text(const Value *v) {
  switch (v->kind) {
    case V_INT: return pool_printf("%" PRId64, v->i);
    case V_FLOAT: return pool_printf("%.15g", v->f);
    case V_BOOL: return v->i ? "true" : "false";
    case V_STR: return v->s;
    default: return "?";
  }
}

/* The executable: the objects, the runtime's main, its data-parallel
 * training (dist.h: MPI's or the single-process stand-in), its tokenizers,
 * the runtime, and the libraries they use (TFM_TOKENIZER_SYSTEM_LIBS and
 * TFM_DIST_SYSTEM_LIBS, MPI's when CMake found it, are space-separated
 * lists). */
static int link_executable(const char **objects, int n, const char *output) {
  char err[512];
  const char *libs[32] = {TFM_RUNTIME_MAIN_LIB, TFM_RUNTIME_DIST_LIB, TFM_RUNTIME_TOKENIZER_LIB,
                          TFM_RUNTIME_LIB};
  int nlibs = 4;
  char *system_libs = pool_printf("%s %s", TFM_TOKENIZER_SYSTEM_LIBS, TFM_DIST_SYSTEM_LIBS), *rest;
  for (char *lib = strtok_r(system_libs, " ", &rest); lib && nlibs < 26;
       lib = strtok_r(NULL, " ", &rest))
    libs[nlibs++] = lib;
  libs[nlibs++] = "-lm";
  libs[nlibs++] = "-lpthread";
  libs[nlibs++] = "-ldl";
  if (TFM_RUNTIME_LINK_FLAGS[0]) libs[nlibs++] = TFM_RUNTIME_LINK_FLAGS;
  if (link_program(objects, n, libs, nlibs, output, false, err, sizeof err)) return 1;
  diag_error_noloc("%s", err);
  return 0;
}

/* The shared library carries the whole runtime (--whole-archive), so an
 * embedding program links the library alone. */
static int link_library(const char **objects, int n, const char *output) {
  char err[512], *copy = pool_strdup(output);
  const char *soname = pool_printf("-Wl,-soname,%s", basename(copy));
  const char *libs[] = {"-Wl,--whole-archive", TFM_RUNTIME_LIB, "-Wl,--no-whole-archive", soname,
                        "-lm", "-lpthread", "-ldl", TFM_RUNTIME_LINK_FLAGS};
  int nlibs = TFM_RUNTIME_LINK_FLAGS[0] ? 8 : 7;
  if (link_program(objects, n, libs, nlibs, output, true, err, sizeof err)) return 1;
  diag_error_noloc("%s", err);
  return 0;
}

/* g less the params and states it does not use (NULL stays NULL). */
static Graph *only_used_params(Graph *g) {
  if (!g) return NULL;
  char err[256];
  Graph *out = pass_dce_unused_params(g, err, sizeof err);
  if (!out) diag_error_noloc("internal error: dropping unused params: %s", err);
  graph_free(g);
  return out;
}

int build_binary(const FrontOptions *front, const BuildOptions *b) {
  double start = now();
  FrontOptions fo = *front;
  fo.training = 0;
  CheckedModel *m;
  Graph *forward = lower_model(&fo, 0, &m);
  if (!forward) return 1;
  /* Every graph lowered so far; on a failure, `failed` frees them all. */
  Graph *train = NULL, *grad = NULL, *apply = NULL, *norm = NULL, **apply_param = NULL;
  Graph *init = NULL, *inspect = NULL, *decode = NULL, **pretrained = NULL;
  int num_apply_param = 0, num_pretrained = 0;
  if (m->train.present) {
    CheckedModel *tm;
    train = lower_model(front, 1, &tm);
    if (train && b->data_parallel) {
      grad = lower_model(front, 1 + TRAIN_GRADIENTS, &tm);
      apply = grad ? lower_model(front, 1 + TRAIN_APPLY, &tm) : NULL;
    }
    /* Optimizer-state sharding (train --zero 1): the norm of the gradients
     * (when clipping) and each param's update in a graph of its own. */
    if (apply) {
      num_apply_param = graph_num_params(apply);
      apply_param = pool_alloc(sizeof(Graph *) * (size_t)(num_apply_param + 1));
      if (m->train.clip > 0.0) norm = lower_model(front, 1 + TRAIN_NORM, &tm);
      for (int i = 0; i < num_apply_param; i++)
        if (!(m->train.clip > 0.0 && !norm))
          apply_param[i] = only_used_params(lower_model_part(front, 1 + TRAIN_APPLY_PARAM, i, &tm));
    }
    int split_ok = apply && !(m->train.clip > 0.0 && !norm);
    for (int i = 0; i < num_apply_param; i++) split_ok &= apply_param[i] != NULL;
    if (!train || (b->data_parallel && !split_ok)) goto failed;
  } else if (b->data_parallel) {
    diag_error(m->at, "model %s has no train block, so --data-parallel has nothing to split",
               m->name);
    goto failed;
  }
  init = m->params.len ? lower_init_graph(m, INIT_SEED) : NULL;
  /* The inspect graph: the forward graph that also outputs the probes
   * (`output` in a layer's body, e.g. std mha's attention weights), for the
   * binary's `attention` command; the forward graph stays as fast as
   * without them. */
  if (m->probes.len) {
    CheckedModel *im;
    fo.probes = 1;
    inspect = lower_model(&fo, 0, &im);
    if (!inspect) goto failed;
  }
  /* The decode-step graph of a language model (tokens/targets) whose
   * program keeps key/value caches when `decoding` (std mha does): the
   * binary's generate runs it once per token. */
  if (lower_decodes(m)) {
    CheckedModel *dm;
    decode = lower_decode_model(&fo, &dm);
    if (!decode && diag_error_count()) goto failed;
  }

  /* One graph for each pretrained block: another tool's checkpoint in, the
   * params it sets out (the binary's --init). */
  num_pretrained = m->pretrained.len;
  pretrained = pool_alloc(sizeof(Graph *) * (size_t)(num_pretrained + 1));
  for (int i = 0; i < num_pretrained; i++) {
    CheckedModel *pm;
    const Pretrained *p = m->pretrained.items[i];
    pretrained[i] = lower_pretrained_graph(&fo, p->name, &pm);
    if (!pretrained[i]) goto failed;
  }

  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/tfmc-build-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    diag_error_noloc("cannot make a temporary folder for the objects in %s", tmp && *tmp ? tmp : "/tmp");
    goto failed;
  }
  int num_graphs = 8 + num_pretrained + num_apply_param, first_apply_param = 8 + num_pretrained;
  Compiled *graphs = pool_alloc(sizeof(Compiled) * (size_t)num_graphs); /* zeroed */
  graphs[0] = (Compiled){.prefix = "tfm_init", .name = "init", .lowered = init};
  graphs[1] = (Compiled){.prefix = "tfm_train", .name = "train", .lowered = train};
  graphs[2] = (Compiled){.prefix = "tfm_forward", .name = "forward", .lowered = forward};
  graphs[3] = (Compiled){.prefix = "tfm_inspect", .name = "inspect", .lowered = inspect};
  graphs[4] = (Compiled){.prefix = "tfm_train_grad", .name = "train_grad", .lowered = grad};
  graphs[5] = (Compiled){.prefix = "tfm_train_apply", .name = "train_apply", .lowered = apply};
  graphs[6] = (Compiled){.prefix = "tfm_train_norm", .name = "train_norm", .lowered = norm};
  graphs[7] = (Compiled){.prefix = "tfm_decode", .name = "decode", .lowered = decode};
  const char **apply_param_prefixes = pool_alloc(sizeof(char *) * (size_t)(num_apply_param + 1));
  for (int i = 0; i < num_apply_param; i++) {
    apply_param_prefixes[i] = pool_printf("tfm_train_apply_%d", i);
    graphs[first_apply_param + i] =
        (Compiled){.prefix = apply_param_prefixes[i],
                   .name = pool_printf("train_apply %d", i), .lowered = apply_param[i]};
  }
  const char **pretrained_names = pool_alloc(sizeof(char *) * (size_t)(num_pretrained + 1));
  const char **pretrained_prefixes = pool_alloc(sizeof(char *) * (size_t)(num_pretrained + 1));
  int *num_ignored = pool_alloc(sizeof(int) * (size_t)(num_pretrained + 1));
  const char *const **ignored = pool_alloc(sizeof(char **) * (size_t)(num_pretrained + 1));
  for (int i = 0; i < num_pretrained; i++) {
    const Pretrained *p = m->pretrained.items[i];
    pretrained_names[i] = p->name;
    pretrained_prefixes[i] = pool_printf("tfm_pretrained_%d", i);
    num_ignored[i] = p->ignored.len;
    ignored[i] = (const char *const *)p->ignored.items;
    graphs[8 + i] = (Compiled){.prefix = pretrained_prefixes[i],
                               .name = pool_printf("pretrained %s", p->name),
                               .lowered = pretrained[i]};
  }
  /* The config as text, for the binary's `info` and checkpoints. */
  const char **keys = pool_alloc(sizeof(char *) * (size_t)(m->config.len + 1));
  const char **values = pool_alloc(sizeof(char *) * (size_t)(m->config.len + 1));
  for (int i = 0; i < m->config.len; i++) {
    const ConfigEntry *e = m->config.items[i];
    keys[i] = e->name;
    values[i] = value_text(e->value);
  }
  const SourceFile *src = source_get(m->at.file);
  ModelDescription d = {m->name, src ? src->path : "?", m->config.len, keys, values,
                        init ? "tfm_init" : NULL, train ? "tfm_train" : NULL, "tfm_forward",
                        inspect ? "tfm_inspect" : NULL, grad ? "tfm_train_grad" : NULL,
                        apply ? "tfm_train_apply" : NULL, b->cuda, num_pretrained,
                        pretrained_names, pretrained_prefixes, num_ignored, ignored,
                        norm ? "tfm_train_norm" : NULL, num_apply_param, apply_param_prefixes,
                        decode ? "tfm_decode" : NULL, cpu_dispatching(b)};
  graphs[2].model = &d;
  for (int i = 0; i < num_graphs; i++) {
    graphs[i].options = b;
    snprintf(graphs[i].object, sizeof graphs[i].object, "%s/%s.o", dir, graphs[i].prefix);
  }
  /* The train graph is the big one: it compiles on this thread while a
   * second one does init and forward (each module has its own LLVM
   * context). */
  Compiled **side = pool_alloc(sizeof(Compiled *) * (size_t)(num_graphs + 1));
  int ns = 0;
  if (init) side[ns++] = &graphs[0];
  side[ns++] = &graphs[2];
  if (inspect) side[ns++] = &graphs[3];
  if (grad) side[ns++] = &graphs[4];
  for (int i = 0; i < num_pretrained; i++) side[ns++] = &graphs[8 + i];
  if (decode) side[ns++] = &graphs[7];
  if (norm) side[ns++] = &graphs[6];
  /* the per-param updates, small, on the side thread until it has as many
   * graphs as this one's share */
  Compiled **main_list = pool_alloc(sizeof(Compiled *) * (size_t)(num_graphs + 1));
  int nm = 0;
  if (train) main_list[nm++] = &graphs[1];
  if (apply) main_list[nm++] = &graphs[5];
  for (int i = 0; i < num_apply_param; i++)
    if (i % 2) main_list[nm++] = &graphs[first_apply_param + i];
    else side[ns++] = &graphs[first_apply_param + i];
  side[ns] = NULL;
  main_list[nm] = NULL;
  pthread_t thread;
  int threaded = cpu_initialize() && pthread_create(&thread, NULL, compile_graphs, side) == 0;
  if (!threaded) compile_graphs(side);
  compile_graphs(main_list);
  if (threaded) pthread_join(thread, NULL);

  int ok = 1, count = 0, built = 0;
  const char **objects = pool_alloc(sizeof(char *) * (size_t)num_graphs * CPU_VARIANTS);
  for (int i = 0; i < num_graphs; i++) {
    if (!graphs[i].module && !graphs[i].error[0]) continue; /* no such graph */
    if (!graphs[i].ok) {
      diag_error_noloc("%s", graphs[i].error);
      ok = 0;
      continue;
    }
    if (b->verbose)
      fprintf(stderr, "tfmc: %s graph: %d nodes, %d kernels, %d functions, %.2f s + machine "
              "code %.2f s\n", graphs[i].name, graph_count(graphs[i].graph),
              graphs[i].plan->num_kernels, graphs[i].plan->num_functions, graphs[i].seconds,
              graphs[i].emit_seconds);
    objects[count++] = graphs[i].object;
    built++;
    for (int v = 1; v < CPU_VARIANTS; v++)
      if (graphs[i].variant_object[v][0]) objects[count++] = graphs[i].variant_object[v];
  }
  if (ok) ok = b->shared ? link_library(objects, count, b->output) : link_executable(objects, count, b->output);
  if (ok && b->shared) {
    HeaderGraph hg[2];
    int nh = 0;
    for (int i = 1; i < 3; i++)
      if (graphs[i].module) hg[nh++] = (HeaderGraph){graphs[i].name, graphs[i].prefix, graphs[i].plan};
    HeaderModel hm = {m->name, d.source, nh, hg};
    ok = build_write_header(b->header, &hm) == 0;
  }
  for (int i = 0; i < num_graphs; i++) compiled_free(&graphs[i]);
  rmdir(dir);
  if (ok && b->verbose)
    fprintf(stderr, "tfmc: built %s (%d graphs) in %.2f s\n", b->output, built, now() - start);
  return ok ? 0 : 1;

failed: /* the graphs lowered before the failure; the Compiled own them after */
  Graph *lowered[] = {forward, train, grad, apply, norm, init, inspect, decode};
  for (size_t i = 0; i < sizeof lowered / sizeof *lowered; i++) graph_free(lowered[i]);
  for (int i = 0; apply_param && i < num_apply_param; i++) graph_free(apply_param[i]);
  for (int i = 0; pretrained && i < num_pretrained; i++) graph_free(pretrained[i]);
  return 1;
}
