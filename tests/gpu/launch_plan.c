/* The host side of a CUDA build, checked without a GPU: the tfm_gpu_program
 * a host module describes (launches, arena offsets of every argument,
 * threads, the inputs and outputs moved at each run, the update's device
 * copies, the PTX itself)
 * against the kernel plan it came from, with the dot as a PTX entry and as
 * a cuBLAS call (--gemm=cublas); the runtime's parameter packing
 * and grid sizes; and, when no driver is installed, the clean refusal of
 * the generated P_run in a child process. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu.h"
#include "gpu.h"
#include "link.h"
#include "model.h"
#include "ptx.h"

static int failures;
#define CHECK(cond) \
  ((cond) ? 1 : (failures++, fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond), 0))

#define SHAPE(...) ((GraphShape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

/* y = sum(tanh(x @ w)), p = softmax(tanh(x @ w)) over rows of 300, and an
 * SGD-like update of w from a scratch value. */
static Graph *example(void) {
  Graph *g = graph_new();
  GraphId x = graph_input(g, "x", GRAPH_F32, SHAPE(33, 7));
  GraphId w = graph_param(g, "w", GRAPH_F32, SHAPE(7, 300));
  GraphId h = graph_unary(g, GRAPH_OP_TANH, graph_dot(g, x, w, false, false));
  graph_output(g, "y", graph_reduce(g, GRAPH_OP_REDUCE_SUM, h, 3));
  GraphId m = graph_broadcast(g, graph_reduce(g, GRAPH_OP_REDUCE_MAX, h, 2), SHAPE(33, 300));
  GraphId e = graph_unary(g, GRAPH_OP_EXP, graph_binary(g, GRAPH_OP_SUB, h, m));
  GraphId s = graph_broadcast(g, graph_reduce(g, GRAPH_OP_REDUCE_SUM, e, 2), SHAPE(33, 300));
  graph_output(g, "p", graph_binary(g, GRAPH_OP_DIV, e, s));
  GraphId scale = graph_broadcast(g, graph_scalar(g, GRAPH_F32, 0.5), SHAPE(7, 300));
  graph_update(g, w, graph_binary(g, GRAPH_OP_MUL, w, scale));
  return g;
}

/* The text of PTX entry `name` (from its .entry line to its closing
 * brace), or an empty string. */
static void entry_body(const char *ptx, const char *name, char *body, size_t size) {
  char decl[96];
  snprintf(decl, sizeof decl, ".entry %s(", name);
  const char *start = strstr(ptx, decl), *end = start ? strstr(start, "\n}\n") : NULL;
  size_t n = start && end ? (size_t)(end - start) : 0;
  n = n < size - 1 ? n : size - 1;
  memcpy(body, start ? start : "", n);
  body[n] = '\0';
}

static bool is_reduce(const KernelPlan *plan, const Kernel *k) {
  GraphOp op = graph_node(plan->graph, k->root)->op;
  return op == GRAPH_OP_REDUCE_SUM || op == GRAPH_OP_REDUCE_MAX;
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *at = text; (at = strstr(at, what)); at++)
    n++;
  return n;
}

/* Row reductions share their rows (ptx_row.h): y's 9900 elements are one
 * row, over one block of PTX_BLOCK_THREADS (shuffles, then shared memory
 * and a barrier across its 8 warps); the softmax is one kernel (its max
 * and sum hoisted) whose 33 rows of 300 are a warp each (5 shuffles a
 * reduction, no barrier), 33 x 32 threads, ceil(1056 / 256) = 5 blocks
 * whose last one has one warp in range. Elementwise kernels stay one
 * thread an element. */
static void check_rows(const KernelPlan *plan, const tfm_gpu_program *p, const char *ptx) {
  static char body[1 << 16];
  int block_rows = 0, warp_rows = 0;
  for (int k = 0; k < plan->num_kernels; k++) {
    const Kernel *kernel = &plan->kernels[k];
    const GraphNode *root = graph_node(plan->graph, kernel->root);
    if (kernel->kind != KERNEL_LOOP)
      continue;
    char entry[64];
    ptx_entry_name("model", kernel->function, entry, sizeof entry);
    entry_body(ptx, entry, body, sizeof body);
    bool shuffles = count(body, "shfl.sync.bfly.b32") > 0;
    bool barrier = strstr(body, "bar.sync") != NULL;
    if (is_reduce(plan, kernel) && graph_shape_numel(&root->shape) == 1) {
      block_rows++;
      CHECK(p->launches[k].items == PTX_BLOCK_THREADS);
      CHECK(shuffles && barrier && strstr(body, ".shared") != NULL);
    } else if (is_reduce(plan, kernel) || kernel->num_hoisted > 0) {
      warp_rows++;
      CHECK(p->launches[k].items == 33 * 32);
      CHECK(tfm_gpu_blocks(p->launches[k].items, p->block_threads) == 5);
      CHECK(kernel->num_hoisted == 2 && count(body, "shfl.sync.bfly.b32") == 10 && !barrier);
    } else {
      CHECK(p->launches[k].items == graph_shape_numel(&root->shape));
      CHECK(!shuffles && !barrier);
    }
  }
  CHECK(block_rows == 1);
  CHECK(warp_rows == 1);
}

/* A {region, offset, bytes} triple of the program is node id's buffer. */
static void check_range(const KernelPlan *plan, GraphId id, const int64_t *range) {
  const KernelBuffer *b = &plan->buffers[plan->buffer_of[id]];
  CHECK(range[0] == (b->region == KERNEL_PERSISTENT ? TFM_REGION_PERSISTENT : TFM_REGION_SCRATCH));
  CHECK(range[1] == b->offset && range[2] == b->bytes);
}

static void check_program(const KernelPlan *plan, const tfm_gpu_program *p, const char *ptx,
                          bool cublas) {
  CHECK(strcmp(p->ptx, ptx) == 0);
  CHECK(p->persistent_bytes == plan->persistent_bytes);
  CHECK(p->scratch_bytes == plan->scratch_bytes);
  CHECK(p->block_threads == PTX_BLOCK_THREADS);
  if (!CHECK(p->num_launches == plan->num_kernels))
    return;
  for (int k = 0; k < plan->num_kernels; k++) {
    const Kernel *kernel = &plan->kernels[k];
    const tfm_gpu_launch *l = &p->launches[k];
    char entry[64], decl[96];
    ptx_entry_name("model", kernel->function, entry, sizeof entry);
    snprintf(decl, sizeof decl, ".entry %s(", entry);
    if (cublas && kernel->kind == KERNEL_DOT) {
      /* x [33, 7] @ w [7, 300]: one batch, both operands rank 2. */
      const int64_t want[PTX_GEMM_FIELDS] = {0, 0, 33, 300, 7, 1, 0, 0, 33 * 300};
      CHECK(l->entry == NULL && strstr(ptx, decl) == NULL); /* no PTX for it */
      if (CHECK(l->gemm != NULL))
        CHECK(memcmp(l->gemm, want, sizeof want) == 0);
    } else {
      CHECK(l->gemm == NULL);
      CHECK(strcmp(l->entry, entry) == 0);
      CHECK(strstr(ptx, decl) != NULL); /* the entry exists in the PTX */
    }
    CHECK(l->items == ptx_work_items(plan, k));
    CHECK(l->num_args == kernel->num_args);
    for (int i = 0; i < kernel->num_args; i++) {
      const KernelBuffer *b = &plan->buffers[kernel->args[i]];
      CHECK(p->arg_offset[l->first_arg + i] == b->offset);
      CHECK(p->arg_region[l->first_arg + i] == (b->region == KERNEL_PERSISTENT ? 0 : 1));
    }
    /* Packing: every pointer is its region's base plus the offset. */
    tfm_device_ptr pointers[16];
    void *params[17];
    int64_t items = -1;
    if (!CHECK(l->num_args < 16))
      continue;
    tfm_gpu_pack(p, k, 0x100000, 0x900000, pointers, &items, params);
    for (int i = 0; i < kernel->num_args; i++) {
      const KernelBuffer *b = &plan->buffers[kernel->args[i]];
      tfm_device_ptr base = b->region == KERNEL_PERSISTENT ? 0x100000 : 0x900000;
      CHECK(pointers[i] == base + (tfm_device_ptr)b->offset);
      CHECK(params[i] == &pointers[i]);
    }
    CHECK(params[kernel->num_args] == &items && items == l->items);
  }
  /* The f32 dot is tiled: its [33, 300] output is 1 x 3 tiles of 64 x 128,
   * a block of PTX_BLOCK_THREADS each. */
  int dots = 0;
  for (int k = 0; k < plan->num_kernels; k++)
    if (plan->kernels[k].kind == KERNEL_DOT)
      dots++, CHECK(p->launches[k].items == 3 * PTX_BLOCK_THREADS);
  CHECK(dots == 1);
  check_rows(plan, p, ptx);
  /* Moved at every run: x up, y and p down, at their buffers' places. */
  const Graph *g = plan->graph;
  if (CHECK(p->num_inputs == 1 && p->num_outputs == 2)) {
    check_range(plan, graph_input_at(g, 0), p->inputs);
    check_range(plan, graph_output_at(g, 0).node, p->outputs);
    check_range(plan, graph_output_at(g, 1).node, p->outputs + 3);
  }
  /* w's new value is written over w (an in-place update): the update has
   * nothing to copy on the device. */
  CHECK(plan->buffer_of[graph_update_at(g, 0).target] == plan->buffer_of[graph_update_at(g, 0).value]);
  CHECK(p->num_copies == 0);
  CHECK(tfm_gpu_scratch_offset(p) >= p->persistent_bytes && tfm_gpu_scratch_offset(p) % 256 == 0);
}

/* Whether a conditional branch lies between the last barrier of `body`
 * and its last mma.sync: a lane-dependent one there would leave the mma
 * to part of a warp. */
static bool branch_before_last_mma(const char *body) {
  const char *last_mma = NULL, *last_bar = NULL;
  for (const char *at = body; (at = strstr(at, "mma.sync")); at++)
    last_mma = at;
  for (const char *at = body; (at = strstr(at, "bar.sync")); at++)
    last_bar = at;
  if (!last_mma || !last_bar || last_mma < last_bar)
    return true;
  /* a conditional branch is a line "\t@%p.. bra ..." */
  for (const char *line = strchr(last_bar, '\n'); line && line < last_mma;
       line = strchr(line + 1, '\n'))
    if (line[1] == '\t' && line[2] == '@' && strstr(line, " bra") < strchr(line + 1, '\n'))
      return true;
  return false;
}

/* Edge tiles so small that most lanes store nothing (1 x 1 x 1, a 17 x 17
 * batch with k = 9, bf16 too) keep every mma.sync where all 32 lanes run
 * it: LLVM 14's backend had moved it under the lanes' store branch, and on
 * an H200 the 1 x 1 x 1 dot returned A x 1.0 (ptx/dot.c, keep_converged). */
static void edge_tiles_converged(void) {
  static char body[1 << 17];
  const struct {
    GraphShape a, b;
    bool tb;
    GraphDtype dtype;
  } cases[] = {{SHAPE(1, 1), SHAPE(1, 1), false, GRAPH_F32},
               {SHAPE(6, 17, 9), SHAPE(6, 17, 9), true, GRAPH_F32},
               {SHAPE(1, 1), SHAPE(1, 1), false, GRAPH_BF16}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    Graph *g = graph_new();
    GraphId a = graph_input(g, "a", cases[c].dtype, cases[c].a);
    GraphId b = graph_input(g, "b", cases[c].dtype, cases[c].b);
    graph_output(g, "c", graph_dot(g, a, b, false, cases[c].tb));
    char err[512];
    KernelPlan *plan = kernel_plan_build(g, NULL, err, sizeof err);
    char *ptx = plan ? ptx_compile(plan, &(PtxOptions){.prefix = "model"}, err, sizeof err) : NULL;
    if (CHECK(ptx != NULL)) {
      char entry[64];
      ptx_entry_name("model", plan->kernels[0].function, entry, sizeof entry);
      entry_body(ptx, entry, body, sizeof body);
      if (!CHECK(!branch_before_last_mma(body)))
        fprintf(stderr, "edge tile case %zu: a branch before the last mma.sync\n", c);
    } else {
      fprintf(stderr, "%s\n", err);
    }
    free(ptx);
    kernel_plan_free(plan);
    graph_free(g);
  }
}

static void grids(void) {
  CHECK(tfm_gpu_blocks(1, 256) == 1);
  CHECK(tfm_gpu_blocks(256, 256) == 1);
  CHECK(tfm_gpu_blocks(257, 256) == 2);
  CHECK(tfm_gpu_blocks(9900, 256) == 39);
  CHECK(tfm_gpu_blocks(0, 256) == 1);
}

/* Without libcuda.so.1, P_run prints the one line and exits 1. */
static void refusal(void (*run)(uint8_t *, uint8_t *, void *), const KernelPlan *plan) {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver) {
    printf("a CUDA driver is installed: the refusal is checked by tests/gpu/run.sh's absence\n");
    return;
  }
  int pipe_fd[2];
  if (!CHECK(pipe(pipe_fd) == 0))
    return;
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    dup2(pipe_fd[1], 2);
    close(pipe_fd[0]);
    uint8_t *persistent = calloc(1, (size_t)plan->persistent_bytes + 1);
    uint8_t *scratch = calloc(1, (size_t)plan->scratch_bytes + 1);
    run(persistent, scratch, NULL);
    _exit(0); /* must not get here */
  }
  close(pipe_fd[1]);
  char text[512] = "";
  ssize_t n = read(pipe_fd[0], text, sizeof text - 1);
  text[n > 0 ? n : 0] = '\0';
  close(pipe_fd[0]);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  CHECK(strcmp(text, "no CUDA driver found (libcuda.so.1): build with --target cpu or run on a "
                     "machine with an NVIDIA GPU\n") == 0);
  printf("ok    no driver: P_run said \"%.*s\" and exited 1\n", (int)strcspn(text, "\n"), text);
}

/* The example's host module for the dot as PTX or as cuBLAS, loaded and
 * checked; the refusal without a driver comes first either way. */
static void check_host(const KernelPlan *plan, bool cublas) {
  char err[512];
  char *ptx = ptx_compile(plan, &(PtxOptions){.prefix = "model", .cublas = cublas}, err, sizeof err);
  PtxHost host = {.ptx = ptx, .cublas = cublas};
  Target cuda_host = ptx_host_target(&host);
  CpuModule *m = ptx ? cpu_compile(plan, &(CpuOptions){.prefix = "model", .target = &cuda_host},
                                   err, sizeof err)
                     : NULL;
  char dir[] = "/tmp/tfm_gpu_plan_XXXXXX", object[64], library[64];
  if (!CHECK(m != NULL) || !CHECK(mkdtemp(dir) != NULL)) {
    fprintf(stderr, "%s\n", err);
    cpu_module_free(m);
    free(ptx);
    return;
  }
  snprintf(object, sizeof object, "%s/host.o", dir);
  snprintf(library, sizeof library, "%s/host.so", dir);
  const char *objects[1] = {object};
  void *handle = NULL;
  if (CHECK(cpu_emit_object(m, object, err, sizeof err)) &&
      CHECK(link_shared_object(objects, 1, library, err, sizeof err)))
    handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (CHECK(handle != NULL)) {
    const tfm_gpu_program *p = dlsym(handle, "model_gpu_program");
    void *run = dlsym(handle, "model_run");
    if (CHECK(p != NULL) && CHECK(run != NULL)) {
      check_program(plan, p, ptx, cublas);
      void (*run_fn)(uint8_t *, uint8_t *, void *);
      memcpy(&run_fn, &run, sizeof run);
      refusal(run_fn, plan);
    }
  } else {
    fprintf(stderr, "%s\n", dlerror());
  }
  unlink(object);
  unlink(library);
  rmdir(dir);
  cpu_module_free(m);
  free(ptx);
}

int main(void) {
  char err[512];
  Graph *g = example();
  KernelPlan *plan = kernel_plan_build(g, NULL, err, sizeof err);
  if (!CHECK(plan != NULL)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  check_host(plan, false);
  check_host(plan, true);
  grids();
  edge_tiles_converged();
  kernel_plan_free(plan);
  graph_free(g);
  printf("%s: %s\n", "gpu.launch_plan", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
