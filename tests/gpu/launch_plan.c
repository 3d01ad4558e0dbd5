/* The host side of a CUDA build, checked without a GPU: the tfm_gpu_program
 * a host module describes (launches, arena offsets of every argument,
 * threads, the scratch ranges its update reads back, the PTX itself)
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
#include "ptx.h"

static int failures;
#define CHECK(cond) \
  ((cond) ? 1 : (failures++, fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond), 0))

#define SHAPE(...) ((GraphShape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

/* y = sum(tanh(x @ w)), and an SGD-like update of w from a scratch value. */
static Graph *example(void) {
  Graph *g = graph_new();
  GraphId x = graph_input(g, "x", GRAPH_F32, SHAPE(33, 7));
  GraphId w = graph_param(g, "w", GRAPH_F32, SHAPE(7, 300));
  GraphId h = graph_unary(g, GRAPH_OP_TANH, graph_dot(g, x, w, false, false));
  graph_output(g, "y", graph_reduce(g, GRAPH_OP_REDUCE_SUM, h, 3));
  GraphId scale = graph_broadcast(g, graph_scalar(g, GRAPH_F32, 0.5), SHAPE(7, 300));
  graph_update(g, w, graph_binary(g, GRAPH_OP_MUL, w, scale));
  return g;
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
  /* w's new value is written over w in the persistent region (in-place
   * update), which comes back whole: no scratch value to read back. */
  CHECK(p->num_downloads == 0);
  CHECK(tfm_gpu_scratch_offset(p) >= p->persistent_bytes && tfm_gpu_scratch_offset(p) % 256 == 0);
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
  CpuModule *m = ptx ? cpu_compile(plan, &(CpuOptions){.prefix = "model", .gpu_ptx = ptx,
                                                       .gpu_cublas = cublas}, err, sizeof err)
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
  KernelPlan *plan = kernel_plan_build(g, err, sizeof err);
  if (!CHECK(plan != NULL)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  check_host(plan, false);
  check_host(plan, true);
  grids();
  kernel_plan_free(plan);
  graph_free(g);
  printf("%s: %s\n", "gpu.launch_plan", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
