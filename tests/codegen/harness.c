/* The codegen tests' harness. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"
#include "gpu.h"
#include "link.h"
#include "ptx.h"
#include "ptx_report.h"
#include "tfmrt.h"

int cg_failures;

bool cg_check_true(bool ok, const char *what, const char *file, int line) {
  if (!ok) {
    cg_failures++;
    fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
  }
  return ok;
}

static double uniform(uint64_t *state, double lo, double hi) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (double)(*state >> 11) * (1.0 / 9007199254740992.0);
}

void cg_fill(EvalValues *v, GraphId id, double lo, double hi, uint64_t *state) {
  EvalTensor *t = eval_tensor(v, id);
  for (int64_t i = 0; i < t->numel; i++) {
    double x = uniform(state, lo, hi);
    eval_tensor_set(t, i, t->dtype == GRAPH_I32 ? floor(x) : x);
  }
}

EvalValues *cg_reference(const Graph *g, GraphDtype precision, uint64_t seed) {
  EvalValues *v = eval_new(g, precision);
  uint64_t state = seed;
  for (GraphId id = 0; v && id < graph_count(g); id++) {
    const GraphNode *n = graph_node(g, id);
    if (n->op == GRAPH_OP_INPUT || n->op == GRAPH_OP_PARAM || n->op == GRAPH_OP_STATE)
      cg_fill(v, id, n->dtype == GRAPH_I32 ? 0 : -1, n->dtype == GRAPH_I32 ? 4 : 1, &state);
  }
  return v;
}

typedef void (*RunFn)(uint8_t *persistent, uint8_t *scratch, tfm_pool *pool);
typedef void (*UpdateFn)(uint8_t *persistent, uint8_t *scratch);

typedef struct Loaded {
  void *handle;
  RunFn run;
  UpdateFn update;
  char object[256], library[256];
} Loaded;

static char work_dir[128];

/* TFM_CG_TARGET picks what cg_run does with a compiled graph: "cpu" (the
 * default) runs it natively; "cuda" builds the host module of a CUDA build
 * and runs its kernels on the GPU (tests/gpu/run.sh); "ptxas" assembles
 * its PTX for sm_80 and sm_90 with ptxas -v, requires no spills, and runs
 * only the evaluator (no device needed). */
/* "gpu-plan" runs the GPU's kernels on the CPU: the plan as GPU threads
 * split it (ptx_thread_plan) and the GPU's one-thread-an-element dot
 * kernels, compiled natively, compared with the evaluator (no device
 * needed); the tiled f32 dot is simulated by tests/gpu/dot_tile_model.c. */
typedef enum { TARGET_CPU, TARGET_CUDA, TARGET_PTXAS, TARGET_GPU_PLAN } HarnessTarget;

static HarnessTarget target(void) {
  const char *t = getenv("TFM_CG_TARGET");
  return !t || !strcmp(t, "cpu") ? TARGET_CPU
         : !strcmp(t, "cuda")    ? TARGET_CUDA
         : !strcmp(t, "gpu-plan") ? TARGET_GPU_PLAN
                                  : TARGET_PTXAS;
}

bool cg_on_gpu(void) { return target() == TARGET_CUDA; }

bool cg_ptxas_available(void) {
  char command[4200];
  snprintf(command, sizeof command, "'%s' --version >/dev/null 2>&1", ptx_ptxas_path());
  return system(command) == 0;
}

/* Both architectures' PTX accepted by ptxas, with no kernel spilling. */
static bool assemble(const char *name, const KernelPlan *plan) {
  static const char *const archs[] = {"sm_80", "sm_90"};
  char err[512];
  bool ok = true;
  PtxResources *per = calloc((size_t)plan->num_functions + 1, sizeof *per);
  for (int a = 0; ok && per && a < 2; a++) {
    char *ptx = ptx_compile(plan, &(PtxOptions){.arch = archs[a]}, err, sizeof err);
    ok = ptx && ptx_assemble_resources(ptx, archs[a], plan->num_functions, per, err, sizeof err) == 0;
    if (!ok)
      fprintf(stderr, "%s: %s: %s\n", name, archs[a], err);
    for (int f = 0; ok && f < plan->num_functions; f++)
      if (per[f].spill_stores || per[f].spill_loads) {
        fprintf(stderr, "%s: %s: kernel function %d spills (%ld bytes stored, %ld loaded)\n", name,
                archs[a], f, per[f].spill_stores, per[f].spill_loads);
        ok = false;
      }
    free(ptx);
  }
  free(per);
  return per && ok;
}

static bool load(const char *name, const KernelPlan *plan, const char *cpu, Loaded *out) {
  char err[512];
  if (!work_dir[0]) {
    snprintf(work_dir, sizeof work_dir, "/tmp/tfm_codegen_XXXXXX");
    if (!mkdtemp(work_dir))
      return false;
  }
  char *ptx = NULL;
  if (target() == TARGET_CUDA &&
      !(ptx = ptx_compile(plan, &(PtxOptions){.prefix = "model"}, err, sizeof err))) {
    fprintf(stderr, "%s: %s\n", name, err);
    return false;
  }
  PtxHost host = {.ptx = ptx};
  Target cuda_host = ptx_host_target(&host);
  CpuOptions options = {.cpu = cpu, .prefix = "model",
                        .target = target() == TARGET_CUDA       ? &cuda_host
                                  : target() == TARGET_GPU_PLAN ? &ptx_serial_target
                                                                : NULL};
  CpuModule *m = cpu_compile(plan, &options, err, sizeof err);
  free(ptx);
  if (!m) {
    fprintf(stderr, "%s: %s\n", name, err);
    return false;
  }
  static int serial;
  snprintf(out->object, sizeof out->object, "%s/case%d.o", work_dir, serial);
  snprintf(out->library, sizeof out->library, "%s/case%d.so", work_dir, serial++);
  const char *objects[1] = {out->object};
  bool ok = cpu_emit_object(m, out->object, err, sizeof err) &&
            link_shared_object(objects, 1, out->library, err, sizeof err);
  cpu_module_free(m);
  if (!ok) {
    fprintf(stderr, "%s: %s\n", name, err);
    return false;
  }
  out->handle = dlopen(out->library, RTLD_NOW | RTLD_LOCAL);
  if (!out->handle) {
    fprintf(stderr, "%s: %s\n", name, dlerror());
    return false;
  }
  out->run = (RunFn)(uintptr_t)dlsym(out->handle, "model_run");
  out->update = (UpdateFn)(uintptr_t)dlsym(out->handle, "model_update");
  return out->run && out->update;
}

static void unload(Loaded *l) {
  const tfm_gpu_program *program = l->handle ? dlsym(l->handle, "model_gpu_program") : NULL;
  if (program)
    tfm_gpu_program_unload(program);
  if (l->handle)
    dlclose(l->handle);
  unlink(l->object);
  unlink(l->library);
}

/* The compiled graph is the tested graph after kernel_prepare (which
 * rewrites column sums and copies nodes): map takes a node of the tested
 * graph to the plan's. */
typedef struct Planned {
  const KernelPlan *plan;
  const GraphId *map;
} Planned;

static const KernelBuffer *buffer_of(const Planned *p, GraphId id) {
  return kernel_plan_buffer(p->plan, p->map[id]);
}

static void *address(const Planned *p, const tfm_arena *arena, GraphId id) {
  const KernelBuffer *b = buffer_of(p, id);
  return (b->region == KERNEL_PERSISTENT ? arena->persistent : arena->scratch) + b->offset;
}

/* The evaluator must store every leaf as the compiled code does. */
static bool copy_leaves_in(const Planned *p, const Graph *g, const tfm_arena *arena,
                           EvalValues *ref) {
  for (GraphId id = 0; id < graph_count(g); id++) {
    if (p->plan->placement[p->map[id]] != KERNEL_LEAF)
      continue;
    EvalTensor *t = eval_tensor(ref, id);
    const KernelBuffer *b = buffer_of(p, id);
    if (b->storage == GRAPH_BF16 && t->dtype == GRAPH_F32) {
      /* A bf16 leaf holds bf16 values: round the evaluator's, store the bits. */
      float *values = t->data;
      uint16_t *bits = address(p, arena, id);
      for (int64_t i = 0; i < t->numel; i++) {
        uint32_t u;
        values[i] = eval_bf16_round(values[i]);
        memcpy(&u, &values[i], sizeof u);
        bits[i] = (uint16_t)(u >> 16);
      }
      continue;
    }
    if (!CG_CHECK(t->dtype == b->storage))
      return false;
    memcpy(address(p, arena, id), t->data, (size_t)b->bytes);
  }
  return true;
}

static double compiled_at(const void *base, GraphDtype dtype, int64_t i) {
  if (dtype == GRAPH_I32)
    return ((const int32_t *)base)[i];
  if (dtype == GRAPH_F64)
    return ((const double *)base)[i];
  if (dtype == GRAPH_BF16) {
    uint32_t u = (uint32_t)((const uint16_t *)base)[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  return ((const float *)base)[i];
}

/* got holds numel values of got_dtype. */
static double norm_error(const EvalTensor *t, const void *got, GraphDtype got_dtype) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < t->numel; i++) {
    double want = eval_tensor_get(t, i), d = compiled_at(got, got_dtype, i) - want;
    diff += d * d;
    scale += want * want;
  }
  return sqrt(diff) / fmax(sqrt(scale), 1e-3 * sqrt((double)t->numel));
}

double cg_norm_error(const EvalTensor *t, const void *got) {
  return norm_error(t, got, t->dtype);
}

/* The scale an element's rounding error is measured against. For a dot,
 * sum_k |a_ik| |b_kj| (the evaluator's own dot on |a| and |b|, in f64), and
 * for a sum, sum_i |x_i|: the error of any order of summation, fused or
 * not, is bounded by a multiple of it, and so is what the inputs' own
 * errors (each relative to the input) add up to, while the result can
 * cancel to near zero, where a relative bound on it would ask the GPU's
 * tree of partial sums or a fused multiply-add to round exactly as the
 * evaluator's sequential separate multiply and add do. Elsewhere the
 * element itself. NULL data means the element itself. */
static EvalTensor error_scale(const GraphNode *node, EvalValues *ref) {
  EvalTensor scale = {0};
  int inputs = node->op == GRAPH_OP_DOT ? 2 : node->op == GRAPH_OP_REDUCE_SUM ? 1 : 0;
  if (inputs == 0 || node->dtype == GRAPH_I32)
    return scale;
  EvalTensor in[2] = {{0}, {0}};
  bool ok = true;
  for (int i = 0; i < inputs; i++) {
    const EvalTensor *x = eval_tensor(ref, node->inputs[i]);
    ok = ok && eval_tensor_alloc(&in[i], GRAPH_F64, &x->shape);
    for (int64_t e = 0; ok && e < x->numel; e++)
      eval_tensor_set(&in[i], e, fabs(eval_tensor_get(x, e)));
  }
  if (CG_CHECK(ok && eval_tensor_alloc(&scale, GRAPH_F64, &node->shape)))
    eval_node(node, in, &scale);
  eval_tensor_release(&in[0]);
  eval_tensor_release(&in[1]);
  return scale;
}

/* worst: the largest error of a tensor held to the tolerance; rounded:
 * counts the tensors judged by options->rounding instead. */
static bool same(const char *name, const char *what, const Planned *p, const Graph *g,
                 const tfm_arena *arena, EvalValues *ref, GraphId id, const CgRunOptions *options,
                 double *worst, int *rounded) {
  EvalTensor *t = eval_tensor(ref, id);
  const void *got = address(p, arena, id);
  GraphDtype storage = buffer_of(p, id)->storage;
  double tol = options->tolerance;
  if (options->norm && t->dtype != GRAPH_I32) {
    double e = norm_error(t, got, storage);
    if (e <= tol) { /* also false for NaN */
      *worst = fmax(*worst, e);
      return true;
    }
    if (options->rounding) {
      const EvalTensor *exact = eval_tensor(options->rounding, id);
      double own = norm_error(t, exact->data, exact->dtype);
      if (e <= CG_ROUNDING_FACTOR * own) {
        ++*rounded;
        return true;
      }
      fprintf(stderr,
              "%s: %s (node %d): relative error %.3g in the 2-norm (f32 rounding alone: %.3g)\n",
              name, what, id, e, own);
      return false;
    }
    fprintf(stderr, "%s: %s (node %d): relative error %.3g in the 2-norm\n", name, what, id, e);
    return false;
  }
  EvalTensor scale = error_scale(graph_node(g, id), ref);
  bool ok = true;
  for (int64_t i = 0; ok && i < t->numel; i++) {
    double want = eval_tensor_get(t, i), have = compiled_at(got, storage, i);
    double magnitude = scale.data ? eval_tensor_get(&scale, i) : fabs(want);
    if (storage == GRAPH_BF16 && tol == 0) {
      /* Bit for bit: the evaluator's f32 holds a bf16 value (NaN, sign of
       * zero and all), the compiled buffer its high half. A GPU's
       * arithmetic returns the canonical NaN whatever its operands' (PTX
       * ISA: NaN payloads are not kept), so there any NaN matches one. */
      float f = (float)want;
      uint32_t u;
      memcpy(&u, &f, sizeof u);
      ok = ((const uint16_t *)got)[i] == (uint16_t)(u >> 16) ||
           (cg_on_gpu() && isnan(f) && isnan(have));
      if (!ok)
        fprintf(stderr, "%s: %s (node %d) element %lld: compiled bits 0x%04x, reference 0x%04x\n",
                name, what, id, (long long)i, ((const uint16_t *)got)[i], (unsigned)(u >> 16));
      continue;
    }
    ok = t->dtype == GRAPH_I32 ? have == want
         : isnan(want)         ? isnan(have)
                               : have == want || fabs(have - want) <= tol * fmax(magnitude, 1e-3);
    if (!ok)
      fprintf(stderr, "%s: %s (node %d) element %lld: compiled %.9g, reference %.9g (scale %.3g)\n",
              name, what, id, (long long)i, have, want, magnitude);
  }
  eval_tensor_release(&scale);
  return ok;
}

/* The outputs of arena's run (with the pool) against a run without it on
 * the same leaves, bit for bit; on the GPU, which takes no pool, against a
 * second run of its kernels on another arena. */
static bool same_without_pool(const char *name, const Planned *p, const Graph *g,
                              const Loaded *loaded, const tfm_arena *arena, EvalValues *ref,
                              GraphId step) {
  tfm_arena serial = {0};
  bool ok = CG_CHECK(tfm_arena_create(&serial, (size_t)p->plan->persistent_bytes,
                                      (size_t)p->plan->scratch_bytes) == TFM_OK) &&
            copy_leaves_in(p, g, &serial, ref);
  if (ok && step != GRAPH_NONE)
    *(int32_t *)address(p, &serial, step) = *(const int32_t *)address(p, arena, step);
  if (ok)
    loaded->run(serial.persistent, serial.scratch, NULL);
  for (int i = 0; ok && i < graph_num_outputs(g); i++) {
    GraphId id = graph_output_at(g, i).node;
    size_t bytes = (size_t)buffer_of(p, id)->bytes;
    ok = memcmp(address(p, arena, id), address(p, &serial, id), bytes) == 0;
    if (!ok)
      fprintf(stderr, "%s: %s differs between %s\n", name, graph_output_at(g, i).name,
              cg_on_gpu() ? "two runs on the GPU" : "the thread pool and no pool");
  }
  tfm_arena_destroy(&serial);
  return ok;
}

/* TFM_CPU_KERNELS picks the family of bf16 products the compiled code
 * runs (ctest runs the suites once per family): a family this CPU lacks,
 * or AMX that Linux refuses, skips the suite (exit 77); a name that is no
 * family fails it. Also links the runtime's choice into the executable,
 * where the loaded models find it. */
static void choose_kernel_family(void) {
  static bool chosen;
  if (chosen)
    return;
  chosen = true;
  const char *forced = getenv("TFM_CPU_KERNELS");
  int family = forced && *forced ? tfm_cpu_kernels_from_name(forced) : -1;
  if (family >= 0 && !tfm_cpu_kernels_supported(family)) {
    printf("skipped: no %s on this CPU\n", family == TFM_CPU_KERNELS_AMX ? "AMX" : "AVX512-BF16");
    exit(77);
  }
  if (tfm_cpu_kernels_choose() != TFM_OK) {
    printf("%s: %s\n", family >= 0 ? "skipped" : "error", tfm_error());
    exit(family >= 0 ? 77 : 1);
  }
}

bool cg_run(const char *name, const Graph *g, EvalValues *ref, const CgRunOptions *options) {
  int failures_before = cg_failures;
  choose_kernel_family();
  char err[512];
  GraphId *map = malloc(sizeof(GraphId) * (size_t)(graph_count(g) + 1));
  /* The CPU's plan (with attention's backward kernels joined from one
   * (batch, head) pair, so that every attention case runs the merged
   * kernel), or the GPU's. */
  KernelPlanOptions plan_options = ptx_plan_options();
  if (target() == TARGET_CPU) {
    plan_options = cpu_plan_options();
    plan_options.merge_attention_backward_from = 1;
  }
  Graph *compiled = map ? kernel_prepare(g, &plan_options, map, err, sizeof err) : NULL;
  KernelPlan *plan = compiled ? kernel_plan_build(compiled, &plan_options, err, sizeof err) : NULL;
  Planned planned = {plan, map};
  if (!plan)
    fprintf(stderr, "%s: planning: %s\n", name, err);
  Loaded loaded = {0};
  tfm_arena arena = {0};
  tfm_pool *pool = NULL;
  double worst = 0;
  int rounded = 0;
  KernelPlan *threads = NULL; /* TARGET_GPU_PLAN */
  bool run_compiled = target() != TARGET_PTXAS;
  if (!run_compiled) {
    /* The evaluator still runs, so callers see the values they expect. */
    if (CG_CHECK(plan != NULL) && CG_CHECK(assemble(name, plan)))
      for (int s = 1; s <= options->steps; s++) {
        GraphId step = graph_find_leaf(g, "step");
        if (step != GRAPH_NONE)
          eval_set(ref, step, 0, s);
        eval_run(ref);
        eval_apply_updates(ref);
      }
    goto done;
  }
  if (plan && target() == TARGET_GPU_PLAN)
    threads = ptx_thread_plan(plan);
  if (!CG_CHECK(plan != NULL) ||
      !CG_CHECK(load(name, threads ? threads : plan, options->cpu, &loaded)) ||
      !CG_CHECK(tfm_arena_create(&arena, (size_t)plan->persistent_bytes,
                                 (size_t)plan->scratch_bytes) == TFM_OK) ||
      !CG_CHECK(options->serial || tfm_pool_create(&pool, 2) == TFM_OK))
    goto done;
  if (!copy_leaves_in(&planned, g, &arena, ref))
    goto done;
  tfm_gpu_arena_written(arena.persistent); /* for the GPU: the host wrote every leaf */
  /* On the GPU f32 dots are tf32 tensor-core products (ptx/dot.c): the
   * reference rounds their operands the same way, so what is left between
   * the two is the order of the sums, which the tolerances are for. */
  eval_set_tf32_dots(ref, cg_on_gpu());
  GraphId step = graph_find_leaf(g, "step");
  for (int s = 1; s <= options->steps; s++) {
    if (step != GRAPH_NONE) {
      eval_set(ref, step, 0, s);
      *(int32_t *)address(&planned, &arena, step) = s;
    }
    if (options->rounding) {
      if (step != GRAPH_NONE)
        eval_set(options->rounding, step, 0, s);
      eval_run(options->rounding);
    }
    eval_run(ref);
    loaded.run(arena.persistent, arena.scratch, pool);
    bool ok = s > 1 || !options->same_serial || !pool ||
              same_without_pool(name, &planned, g, &loaded, &arena, ref, step);
    for (int i = 0; ok && i < graph_num_outputs(g); i++)
      ok = same(name, graph_output_at(g, i).name, &planned, g, &arena, ref,
                graph_output_at(g, i).node, options, &worst, &rounded);
    if (options->rounding)
      eval_apply_updates(options->rounding);
    eval_apply_updates(ref);
    loaded.update(arena.persistent, arena.scratch);
    tfm_gpu_arena_to_host(arena.persistent); /* the GPU updated its copy */
    for (int i = 0; ok && i < graph_num_updates(g); i++) {
      GraphId target = graph_update_at(g, i).target;
      ok = same(name, graph_node(g, target)->attrs.name, &planned, g, &arena, ref, target,
                options, &worst, &rounded);
    }
    if (!CG_CHECK(ok))
      break;
  }
done:
  if (cg_failures != failures_before && plan)
    kernel_plan_print(plan, stderr);
  if (pool)
    tfm_pool_destroy(pool);
  tfm_arena_destroy(&arena);
  unload(&loaded);
  ptx_thread_plan_free(threads);
  kernel_plan_free(plan);
  graph_free(compiled);
  free(map);
  bool ok = cg_failures == failures_before;
  if (!run_compiled)
    printf("%s  %s (PTX accepted by ptxas for sm_80 and sm_90, no spills)\n", ok ? "ok  " : "FAIL",
           name);
  else if (options->norm && rounded)
    printf("%s  %s (largest relative error %.2e; %d tensor(s) within %g times f32 rounding's "
           "own effect)\n",
           ok ? "ok  " : "FAIL", name, worst, rounded, CG_ROUNDING_FACTOR);
  else if (options->norm)
    printf("%s  %s (largest relative error %.2e)\n", ok ? "ok  " : "FAIL", name, worst);
  else
    printf("%s  %s\n", ok ? "ok  " : "FAIL", name);
  return ok;
}

static GraphDtype precision_of(const Graph *g) {
  bool f64 = false, f32 = false;
  for (GraphId id = 0; id < graph_count(g); id++) {
    GraphDtype d = graph_node(g, id)->dtype;
    f64 = f64 || d == GRAPH_F64;
    f32 = f32 || (d != GRAPH_F64 && d != GRAPH_I32);
  }
  return f64 && !f32 ? GRAPH_F64 : GRAPH_F32;
}

bool cg_check_graph(const char *name, Graph *g, CgFillFn fill) {
  bool ok = CG_CHECK(g && graph_error(g) == NULL);
  if (!ok) {
    fprintf(stderr, "%s: graph: %s\n", name, g ? graph_error(g) : "NULL");
  } else {
    EvalValues *ref = cg_reference(g, precision_of(g), 12345);
    if (fill)
      fill(g, ref);
    CgRunOptions options = {.steps = 1, .tolerance = 1e-5};
    ok = cg_run(name, g, ref, &options);
    eval_free(ref);
  }
  graph_free(g);
  return ok;
}

int cg_start(const char *suite) {
  if (target() == TARGET_PTXAS && !cg_ptxas_available()) {
    printf("%s: skipped: no ptxas (%s) to assemble PTX with; install the CUDA toolkit\n", suite,
           ptx_ptxas_path());
    exit(77);
  }
  return 0;
}

int cg_finish(const char *suite) {
  if (work_dir[0])
    rmdir(work_dir);
  if (cg_failures) {
    printf("%s: %d check(s) failed\n", suite, cg_failures);
    return 1;
  }
  printf("%s: all checks passed\n", suite);
  return 0;
}
