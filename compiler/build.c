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
#include "kernel.h"
#include "link.h"
#include "lower.h"
#include "lower_model.h"
#include "pass.h"
#include "ptx.h"

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
  graph_free(c->lowered);
  cpu_module_free(c->module);
  kernel_plan_free(c->plan);
  graph_free(c->graph);
}

/* Optimises, plans, compiles and writes the object of one graph (owns
 * c->lowered). Runs on its own thread: errors go to c->error, not diag. */
static void compile_graph(Compiled *c) {
  char err[512];
  double start = now();
  const char *stage = "internal error: optimising";
  KernelPlanOptions plan_options =
      c->options->cuda ? (KernelPlanOptions){0} : cpu_plan_options();
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
    if (ptx || !c->options->cuda) {
      PtxHost host = {.ptx = ptx, .cublas = c->options->cublas};
      Target cuda_host = ptx_host_target(&host);
      CpuOptions o = {.cpu = c->options->cpu, .prefix = c->prefix,
                      .target = c->options->cuda ? &cuda_host : NULL};
      c->module = cpu_compile(c->plan, &o, err, sizeof err);
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

/* The executable: the objects, the runtime's main, its tokenizers, the
 * runtime, and the libraries they use (TFM_TOKENIZER_SYSTEM_LIBS is a
 * space-separated list). */
static int link_executable(const char **objects, int n, const char *output) {
  char err[512];
  const char *libs[16] = {TFM_RUNTIME_MAIN_LIB, TFM_RUNTIME_TOKENIZER_LIB, TFM_RUNTIME_LIB};
  int nlibs = 3;
  char *system_libs = pool_strdup(TFM_TOKENIZER_SYSTEM_LIBS), *rest;
  for (char *lib = strtok_r(system_libs, " ", &rest); lib && nlibs < 10;
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

int build_binary(const FrontOptions *front, const BuildOptions *b) {
  double start = now();
  FrontOptions fo = *front;
  fo.training = 0;
  CheckedModel *m;
  Graph *forward = lower_model(&fo, 0, &m);
  if (!forward) return 1;
  Graph *train = NULL;
  if (m->train.present) {
    CheckedModel *tm;
    train = lower_model(front, 1, &tm);
    if (!train) {
      graph_free(forward);
      return 1;
    }
  }
  Graph *init = m->params.len ? lower_init_graph(m, INIT_SEED) : NULL;
  /* The inspect graph: the forward graph that also outputs the probes
   * (`output` in a layer's body, e.g. std mha's attention weights), for the
   * binary's `attention` command; the forward graph stays as fast as
   * without them. */
  Graph *inspect = NULL;
  if (m->probes.len) {
    CheckedModel *im;
    fo.probes = 1;
    inspect = lower_model(&fo, 0, &im);
    if (!inspect) {
      graph_free(forward);
      graph_free(train);
      graph_free(init);
      return 1;
    }
  }
  /* The decode-step graph of a language model (tokens/targets) whose
   * program keeps key/value caches when `decoding` (std mha does): the
   * binary's generate runs it once per token. */
  Graph *decode = NULL;
  if (lower_decodes(m)) {
    CheckedModel *dm;
    decode = lower_decode_model(&fo, &dm);
    if (!decode && diag_error_count()) {
      graph_free(forward);
      graph_free(train);
      graph_free(init);
      graph_free(inspect);
      return 1;
    }
  }

  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/tfmc-build-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    diag_error_noloc("cannot make a temporary folder for the objects in %s", tmp && *tmp ? tmp : "/tmp");
    return 1;
  }
  enum { NUM_GRAPHS = 5 };
  Compiled graphs[NUM_GRAPHS] = {{.prefix = "tfm_init", .name = "init", .lowered = init},
                                 {.prefix = "tfm_train", .name = "train", .lowered = train},
                                 {.prefix = "tfm_forward", .name = "forward", .lowered = forward},
                                 {.prefix = "tfm_inspect", .name = "inspect", .lowered = inspect},
                                 {.prefix = "tfm_decode", .name = "decode", .lowered = decode}};
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
                        inspect ? "tfm_inspect" : NULL, decode ? "tfm_decode" : NULL};
  graphs[2].model = &d;
  for (int i = 0; i < NUM_GRAPHS; i++) {
    graphs[i].options = b;
    snprintf(graphs[i].object, sizeof graphs[i].object, "%s/%s.o", dir, graphs[i].prefix);
  }
  /* The train graph is the big one: it compiles on this thread while a
   * second one does init and forward (each module has its own LLVM
   * context). */
  Compiled *side[NUM_GRAPHS] = {NULL}, *main_work[2] = {NULL};
  int ns = 0;
  if (init) side[ns++] = &graphs[0];
  side[ns++] = &graphs[2];
  if (inspect) side[ns++] = &graphs[3];
  if (decode) side[ns++] = &graphs[4];
  if (train) main_work[0] = &graphs[1];
  pthread_t thread;
  int threaded = cpu_initialize() && pthread_create(&thread, NULL, compile_graphs, side) == 0;
  if (!threaded) compile_graphs(side);
  compile_graphs(main_work);
  if (threaded) pthread_join(thread, NULL);

  int ok = 1, count = 0;
  const char *objects[NUM_GRAPHS];
  for (int i = 0; i < NUM_GRAPHS; i++) {
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
  for (int i = 0; i < NUM_GRAPHS; i++) compiled_free(&graphs[i]);
  rmdir(dir);
  if (ok && b->verbose)
    fprintf(stderr, "tfmc: built %s (%d graphs) in %.2f s\n", b->output, count, now() - start);
  return ok ? 0 : 1;
}
