#define _POSIX_C_SOURCE 200809L /* open_memstream */
/* Fusion: a softmax and a layernorm row each become one kernel, views cost
 * no buffer, identical kernels share a function; and the module prints as
 * LLVM IR and assembly. Each graph is also compared with the evaluator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "harness.h"
#include "ptx.h"

#define SHAPE(...) ((GraphShape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static KernelPlan *plan_of(const Graph *g) {
  char err[256];
  KernelPlan *plan = kernel_plan_build(g, NULL, err, sizeof err);
  if (!CG_CHECK(plan != NULL))
    fprintf(stderr, "%s\n", err);
  return plan;
}

static int plan_kernels(const Graph *g) {
  KernelPlan *plan = plan_of(g);
  int kernels = plan ? plan->num_kernels : -1;
  kernel_plan_free(plan);
  return kernels;
}

/* Checks the plan's shape, then compares it with the evaluator. */
static void expect_plan(const char *name, Graph *g, int kernels, int functions,
                        int64_t scratch) {
  KernelPlan *plan = plan_of(g);
  if (plan) {
    bool ok = CG_CHECK(plan->num_kernels == kernels) &&
              CG_CHECK(plan->num_functions == functions) &&
              CG_CHECK(scratch < 0 || plan->scratch_bytes == scratch);
    if (!ok) {
      fprintf(stderr, "%s: expected %d kernels, %d functions\n", name, kernels, functions);
      kernel_plan_print(plan, stderr);
    }
  }
  kernel_plan_free(plan);
}

static void expect(const char *name, Graph *g, int kernels, int functions, int64_t scratch) {
  expect_plan(name, g, kernels, functions, scratch);
  cg_check_graph(name, g, NULL);
}

/* Values that pass through several layers carry the earlier layers'
 * rounding (tanh a few ulp from libm's, FMA in the dots), amplified where a
 * dot cancels: they are compared as a whole, as the model tests do. */
static void expect_whole(const char *name, Graph *g, int kernels, int functions,
                         int64_t scratch) {
  expect_plan(name, g, kernels, functions, scratch);
  EvalValues *ref = cg_reference(g, GRAPH_F32, 12345);
  CgRunOptions options = {.steps = 1, .tolerance = 1e-5, .norm = true};
  cg_run(name, g, ref, &options);
  eval_free(ref);
  graph_free(g);
}

static void expect_layers(const char *name, Graph *g, int kernels, int functions) {
  expect_whole(name, g, kernels, functions, -1);
}

static GraphId bcast(Graph *g, GraphId x, GraphShape s) { return graph_broadcast(g, x, s); }

/* softmax over `axis`; *max and *sum (when not NULL) get its row max and
 * sum of exponentials. */
static GraphId softmax_parts(Graph *g, GraphId x, int axis, GraphId *max, GraphId *sum) {
  GraphShape s = graph_node(g, x)->shape;
  GraphId m = graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 1u << axis);
  GraphId e = graph_unary(g, GRAPH_OP_EXP, graph_binary(g, GRAPH_OP_SUB, x, bcast(g, m, s)));
  GraphId total = graph_reduce(g, GRAPH_OP_REDUCE_SUM, e, 1u << axis);
  if (max) *max = m;
  if (sum) *sum = total;
  return graph_binary(g, GRAPH_OP_DIV, e, bcast(g, total, s));
}

static GraphId softmax(Graph *g, GraphId x, int axis) {
  return softmax_parts(g, x, axis, NULL, NULL);
}

/* x [3, 5, 48] less its row mean; *mean and *var get the row mean and
 * variance ([3, 5, 1]), as a layernorm computes them. */
static GraphId centred_rows(Graph *g, GraphId x, GraphId *mean, GraphId *var) {
  GraphShape s = SHAPE(3, 5, 48);
  GraphId inv_d = graph_splat(g, GRAPH_F32, SHAPE(3, 5, 1), 1.0 / 48);
  *mean = graph_binary(g, GRAPH_OP_MUL, graph_reduce(g, GRAPH_OP_REDUCE_SUM, x, 4), inv_d);
  GraphId xc = graph_binary(g, GRAPH_OP_SUB, x, bcast(g, *mean, s));
  *var = graph_binary(
      g, GRAPH_OP_MUL,
      graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, xc, xc), 4), inv_d);
  return xc;
}

static void softmax_rows(void) {
  Graph *g = graph_new();
  GraphId x = graph_input(g, "x", GRAPH_F32, SHAPE(4, 6, 33));
  graph_output(g, "y", softmax(g, x, 2));
  expect("softmax row: one kernel", g, 1, 1, 0);

  /* Over a middle axis the row values vary along the inner loop: the
   * reductions get kernels of their own and exp(x - max) is stored once. */
  g = graph_new();
  x = graph_input(g, "x", GRAPH_F32, SHAPE(4, 6, 5));
  graph_output(g, "y", softmax(g, x, 1));
  expect("softmax over a middle axis", g, 4, 4, -1);

  /* As autodiff and the front end write it: reduce, reshape, broadcast. */
  g = graph_new();
  x = graph_input(g, "x", GRAPH_F32, SHAPE(12, 40));
  GraphId m = graph_reshape(g, graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 2), SHAPE(12));
  GraphId z =
      graph_binary(g, GRAPH_OP_SUB, x, bcast(g, graph_reshape(g, m, SHAPE(12, 1)), SHAPE(12, 40)));
  GraphId sum = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_unary(g, GRAPH_OP_EXP, z), 2);
  GraphId lse = graph_unary(g, GRAPH_OP_LOG, sum);
  graph_output(g, "log_softmax", graph_binary(g, GRAPH_OP_SUB, z, bcast(g, lse, SHAPE(12, 40))));
  expect("log_softmax through reshapes: one kernel", g, 1, 1, 0);

  /* A row of two axes: the GPU's split rows flatten both the reduced axes
   * and the inner loops (ptx_row.h). */
  g = graph_new();
  x = graph_input(g, "x", GRAPH_F32, SHAPE(3, 5, 7));
  GraphShape s = SHAPE(3, 5, 7);
  m = graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 6);
  GraphId e = graph_unary(g, GRAPH_OP_EXP, graph_binary(g, GRAPH_OP_SUB, x, bcast(g, m, s)));
  sum = graph_reduce(g, GRAPH_OP_REDUCE_SUM, e, 6);
  graph_output(g, "y", graph_binary(g, GRAPH_OP_DIV, e, bcast(g, sum, s)));
  expect("softmax over two trailing axes: one kernel", g, 1, 1, 0);

  /* Rows longer than PTX_ROW_WARP_MAX: a block a row on the GPU. */
  g = graph_new();
  x = graph_input(g, "x", GRAPH_F32, SHAPE(3, 1500));
  graph_output(g, "y", softmax(g, x, 1));
  expect("softmax over long rows: one kernel", g, 1, 1, 0);
}

static void layernorm_rows(void) {
  Graph *g = graph_new();
  GraphShape s = SHAPE(3, 5, 48);
  GraphId x = graph_input(g, "x", GRAPH_F32, s);
  GraphId gamma = graph_param(g, "gamma", GRAPH_F32, SHAPE(48));
  GraphId beta = graph_param(g, "beta", GRAPH_F32, SHAPE(48));
  GraphId mean, var, xc = centred_rows(g, x, &mean, &var);
  GraphId eps = graph_splat(g, GRAPH_F32, SHAPE(3, 5, 1), 1e-5);
  GraphId scale = graph_unary(g, GRAPH_OP_RSQRT, graph_binary(g, GRAPH_OP_ADD, var, eps));
  GraphId y = graph_binary(g, GRAPH_OP_MUL, xc, bcast(g, scale, s));
  y = graph_binary(g, GRAPH_OP_ADD, graph_binary(g, GRAPH_OP_MUL, y, bcast(g, gamma, s)),
                   bcast(g, beta, s));
  graph_output(g, "y", y);
  /* As a whole: where x is near its mean, y's element error is the mean's
   * rounding over |x - mean|, so any order of the CPU's row sum (its lanes,
   * llvm/loop_rows.c) other than the evaluator's misses an elementwise 1e-5. */
  expect_whole("layernorm row: one kernel", g, 1, 1, 0);
}

static void views_and_sharing(void) {
  Graph *g = graph_new();
  GraphId x = graph_input(g, "x", GRAPH_F32, SHAPE(4, 5, 6));
  GraphId b = graph_input(g, "b", GRAPH_F32, SHAPE(4));
  int perm[GRAPH_MAX_RANK] = {2, 1, 0};
  GraphId y = graph_binary(g, GRAPH_OP_ADD, graph_unary(g, GRAPH_OP_EXP, graph_permute(g, x, perm)),
                           bcast(g, b, SHAPE(6, 5, 4)));
  graph_output(g, "y", graph_reshape(g, y, SHAPE(30, 4)));
  expect("permute, broadcast, reshape: one kernel, no copies", g, 1, 1, 0);

  /* Two layers of one shape: the dot kernels and the bias kernels repeat. */
  g = graph_new();
  GraphId h = graph_input(g, "x", GRAPH_F32, SHAPE(8, 16));
  for (int layer = 0; layer < 3; layer++) {
    char name[16];
    snprintf(name, sizeof name, "w%d", layer);
    GraphId w = graph_param(g, name, GRAPH_F32, SHAPE(16, 16));
    snprintf(name, sizeof name, "b%d", layer);
    GraphId bias = graph_param(g, name, GRAPH_F32, SHAPE(16));
    h = graph_binary(g, GRAPH_OP_ADD, graph_dot(g, h, w, false, false),
                     bcast(g, bias, SHAPE(8, 16)));
    h = graph_unary(g, GRAPH_OP_TANH, h);
  }
  graph_output(g, "y", h);
  /* The first two bias kernels write over their dot's result; the last
   * writes the output, so it is its own (out-of-place) function. */
  expect_layers("three equal layers: six kernels, three functions", g, 6, 3);
}

/* A transcendental read through a broadcast is computed once per copy when
 * inlined (sinusoidal positions added to each batch row): past four
 * evaluations an element it gets a kernel of its own; at two it stays. */
static void broadcast_transcendental(void) {
  for (int copies = 2; copies <= 8; copies *= 4) {
    Graph *g = graph_new();
    GraphShape s = SHAPE(copies, 10, 16);
    GraphId x = graph_input(g, "x", GRAPH_F32, s);
    GraphId p = graph_input(g, "p", GRAPH_F32, SHAPE(10, 16));
    GraphId pe = graph_unary(g, GRAPH_OP_SIN, p);
    graph_output(g, "y", graph_binary(g, GRAPH_OP_ADD, x, bcast(g, pe, s)));
    KernelPlan *plan = plan_of(g);
    if (plan) CG_CHECK((plan->placement[pe] == KERNEL_ROOT) == (copies == 8));
    kernel_plan_free(plan);
    if (copies == 2) expect("sin read by 2 broadcast rows: inlined", g, 1, 1, 0);
    else expect("sin read by 8 broadcast rows: a kernel of its own", g, 2, 2, -1);
  }
}

/* The buffer of a node in a plan, or -1. */
static int buffer_index(const Graph *g, GraphId node) {
  KernelPlan *plan = plan_of(g);
  int b = plan ? plan->buffer_of[node] : -1;
  kernel_plan_free(plan);
  return b;
}

static void in_place(void) {
  int failures_before = cg_failures;
  /* A chain after a dot: tanh(d) writes over d, which nothing reads later. */
  Graph *g = graph_new();
  GraphId a = graph_input(g, "a", GRAPH_F32, SHAPE(8, 16));
  GraphId w = graph_param(g, "w", GRAPH_F32, SHAPE(16, 16));
  GraphId d = graph_dot(g, a, w, false, false);
  GraphId t = graph_unary(g, GRAPH_OP_TANH, d);
  GraphId y = graph_dot(g, t, w, false, false);
  graph_output(g, "y", y);
  CG_CHECK(buffer_index(g, t) == buffer_index(g, d));
  expect("tanh over a dying dot result: in place, one scratch buffer", g, 3, 2, 512);

  /* A transpose reads other elements than it writes: never in place. */
  g = graph_new();
  a = graph_input(g, "a", GRAPH_F32, SHAPE(16, 16));
  d = graph_dot(g, a, a, false, false);
  int perm[GRAPH_MAX_RANK] = {1, 0};
  t = graph_binary(g, GRAPH_OP_ADD, d, graph_permute(g, d, perm));
  graph_output(g, "y", graph_dot(g, t, a, false, false));
  CG_CHECK(buffer_index(g, t) != buffer_index(g, d));
  expect("d + transpose(d): out of place", g, 3, 3, 2048);

  /* A softmax row reads its row in the hoisted reductions first: in place. */
  g = graph_new();
  a = graph_input(g, "a", GRAPH_F32, SHAPE(8, 16));
  d = graph_dot(g, a, graph_param(g, "w", GRAPH_F32, SHAPE(16, 16)), false, false);
  t = softmax(g, d, 1);
  graph_output(g, "y", graph_dot(g, t, graph_param(g, "v", GRAPH_F32, SHAPE(16, 16)), false,
                                 false));
  CG_CHECK(buffer_index(g, t) == buffer_index(g, d));
  expect("softmax over a dying dot result: in place", g, 3, 2, 512);

  /* The last row's value read by every row: not in place. */
  g = graph_new();
  a = graph_input(g, "a", GRAPH_F32, SHAPE(8, 16));
  d = graph_dot(g, a, graph_param(g, "w", GRAPH_F32, SHAPE(16, 16)), false, false);
  GraphId last = graph_slice(g, d, (int64_t[]){7, 0}, (int64_t[]){8, 16}, (int64_t[]){1, 1});
  t = graph_binary(g, GRAPH_OP_MUL, d, bcast(g, graph_reshape(g, last, SHAPE(16)), SHAPE(8, 16)));
  graph_output(g, "y", graph_dot(g, t, graph_param(g, "v", GRAPH_F32, SHAPE(16, 16)), false,
                                 false));
  CG_CHECK(buffer_index(g, t) != buffer_index(g, d));
  expect("d * d[last row]: out of place", g, 3, 2, 1024);

  /* An update written over its target: p' = p - 0.1 * grad, no copy-back. */
  g = graph_new();
  GraphId p = graph_param(g, "p", GRAPH_F32, SHAPE(4, 8));
  GraphId grad = graph_input(g, "grad", GRAPH_F32, SHAPE(4, 8));
  GraphId loss = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, p, grad), 3);
  graph_output(g, "loss", loss);
  GraphId step = graph_binary(g, GRAPH_OP_MUL, graph_splat(g, GRAPH_F32, SHAPE(4, 8), 0.1), grad);
  GraphId next = graph_binary(g, GRAPH_OP_SUB, p, step);
  graph_update(g, p, next);
  CG_CHECK(buffer_index(g, next) == buffer_index(g, p));
  expect("update over its target", g, 2, 2, 0);
  printf("%s  in-place buffers\n", cg_failures == failures_before ? "ok  " : "FAIL");
}

static void printing(void) {
  int failures_before = cg_failures;
  Graph *g = graph_new();
  GraphId x = graph_input(g, "x", GRAPH_F32, SHAPE(4, 9));
  graph_output(g, "y", softmax(g, x, 1));
  KernelPlan *plan = plan_of(g);
  char err[256];
  CpuModule *m =
      plan ? cpu_compile(plan, &(CpuOptions){.cpu = "x86-64-v3", .prefix = "net"}, err, sizeof err)
           : NULL;
  if (CG_CHECK(m != NULL)) {
    char *ir = cpu_llvm_text(m), *asm_text = cpu_assembly_text(m, err, sizeof err);
    CG_CHECK(ir && strstr(ir, "define void @net_run(") && strstr(ir, "@net_scratch_bytes"));
    CG_CHECK(asm_text && strstr(asm_text, "net_run:") && strstr(asm_text, "net_update:"));
    free(ir);
    free(asm_text);
    cpu_module_free(m);
  }
  char *listing = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&listing, &size);
  if (plan && out)
    kernel_plan_print(plan, out);
  if (out)
    fclose(out);
  CG_CHECK(listing && strstr(listing, "^reduce_max") && strstr(listing, "^reduce_sum"));
  free(listing);
  kernel_plan_free(plan);
  graph_free(g);
  printf("%s  emit llvm, asm and the kernel listing\n",
         cg_failures == failures_before ? "ok  " : "FAIL");
}

/* Kernels (and scratch bytes) in the plan of `g` after kernel_recompute. */
static int recomputed_kernels_scratch(const Graph *g, int64_t *scratch) {
  char err[256];
  Graph *copied = kernel_recompute(g, NULL, err, sizeof err);
  KernelPlan *plan = copied ? plan_of(copied) : NULL;
  if (!CG_CHECK(plan != NULL))
    fprintf(stderr, "kernel_recompute: %s\n", err);
  int kernels = plan ? plan->num_kernels : -1;
  *scratch = plan ? plan->scratch_bytes : -1;
  kernel_plan_free(plan);
  graph_free(copied);
  return kernels;
}

static int recomputed_kernels(const Graph *g) {
  int64_t scratch;
  return recomputed_kernels_scratch(g, &scratch);
}

/* y = f(x) read by a row reduction and by an elementwise output: stored
 * once by a kernel of its own unless kernel_recompute copies f into both. */
static void expect_copied(const char *name, Graph *g, GraphId x, GraphOp op, bool copied) {
  GraphShape s = graph_node(g, x)->shape;
  GraphId y = graph_unary(g, op, x);
  GraphId sum = graph_reduce(g, GRAPH_OP_REDUCE_SUM, y, 1u << (s.rank - 1));
  graph_output(g, "sum", sum);
  graph_output(g, "z", graph_binary(g, GRAPH_OP_MUL, y, y));
  int before = 3, after = copied ? 2 : 3;
  bool ok = CG_CHECK(plan_kernels(g) == before) && CG_CHECK(recomputed_kernels(g) == after);
  if (!ok)
    fprintf(stderr, "%s: expected %d kernels, %d after recomputation\n", name, before, after);
  cg_check_graph(name, g, NULL);
}

static void recomputation(void) {
  Graph *g = graph_new();
  expect_copied("a negation read by two kernels is recomputed in both", g,
                graph_input(g, "x", GRAPH_F32, SHAPE(6, 37)), GRAPH_OP_NEG, true);
  /* Copied into two kernels a value is computed once more and saves three
   * floats of traffic an element: worth up to 24 operations (a tanh is 16,
   * a tanh of an exp 32). */
  g = graph_new();
  expect_copied("a tanh read by two kernels is recomputed in both", g,
                graph_input(g, "x", GRAPH_F32, SHAPE(6, 37)), GRAPH_OP_TANH, true);
  g = graph_new();
  expect_copied("a tanh of an exp read by two kernels is stored", g,
                graph_unary(g, GRAPH_OP_EXP, graph_input(g, "x", GRAPH_F32, SHAPE(6, 37))),
                GRAPH_OP_TANH, false);
  /* A reader whose row sum of the value is hoisted would compute it in
   * that pass too: three evaluations for two readers, 32 > 24. */
  g = graph_new();
  GraphId t = graph_unary(g, GRAPH_OP_TANH, graph_input(g, "x", GRAPH_F32, SHAPE(6, 37)));
  graph_output(g, "square", graph_binary(g, GRAPH_OP_MUL, t, t));
  graph_output(g, "centred", graph_binary(g, GRAPH_OP_SUB, t,
                                          bcast(g, graph_reduce(g, GRAPH_OP_REDUCE_SUM, t, 2),
                                                SHAPE(6, 37))));
  if (!CG_CHECK(plan_kernels(g) == 3) || !CG_CHECK(recomputed_kernels(g) == 3))
    fprintf(stderr, "a tanh read in a hoisted reduction: expected 3 kernels, 3 after\n");
  cg_check_graph("a tanh also read by a hoisted reduction is stored", g, NULL);
  /* A hoisted reduction that does not read the value costs no evaluation
   * of it: two for two readers, and the tanh is copied. */
  g = graph_new();
  GraphId w = graph_input(g, "w", GRAPH_F32, SHAPE(6, 37));
  t = graph_unary(g, GRAPH_OP_TANH, graph_input(g, "x", GRAPH_F32, SHAPE(6, 37)));
  graph_output(g, "square", graph_binary(g, GRAPH_OP_MUL, t, t));
  GraphId w2 = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, w, w), 2);
  graph_output(g, "t times w's row sum of squares",
               graph_binary(g, GRAPH_OP_MUL, t, bcast(g, w2, SHAPE(6, 37))));
  if (!CG_CHECK(plan_kernels(g) == 3) || !CG_CHECK(recomputed_kernels(g) == 2))
    fprintf(stderr, "a tanh beside a hoisted reduction: expected 3 kernels, 2 after\n");
  cg_check_graph("a tanh beside a hoisted reduction is recomputed", g, NULL);
  /* A broadcast row statistic: read again by each consumer, not stored. */
  g = graph_new();
  GraphId v = graph_input(g, "v", GRAPH_F64, SHAPE(5, 1));
  expect_copied("a broadcast read by two kernels is recomputed in both", g,
                graph_broadcast(g, v, SHAPE(5, 9)), GRAPH_OP_ABS, true);
  /* Copying a product of four inputs into two kernels that read none of
   * them moves more bytes than storing it. */
  g = graph_new();
  GraphId in[4];
  for (int i = 0; i < 4; i++) {
    char name[4] = {'a', (char)('0' + i), 0};
    in[i] = graph_input(g, name, GRAPH_F32, SHAPE(6, 37));
  }
  GraphId p = graph_binary(g, GRAPH_OP_MUL, graph_binary(g, GRAPH_OP_MUL, in[0], in[1]),
                           graph_binary(g, GRAPH_OP_MUL, in[2], in[3]));
  expect_copied("a value of four inputs read by two kernels is stored", g, p, GRAPH_OP_NEG, false);
  /* Read through a reshape, which alone would be a view of the stored
   * value: the reshape is copied with it. */
  g = graph_new();
  GraphId y = graph_unary(g, GRAPH_OP_NEG, graph_input(g, "x", GRAPH_F32, SHAPE(6, 4, 8)));
  GraphId flat = graph_reshape(g, y, SHAPE(6, 32));
  graph_output(g, "sum", graph_reduce(g, GRAPH_OP_REDUCE_SUM, flat, 2));
  graph_output(g, "z", graph_binary(g, GRAPH_OP_MUL, flat, flat));
  if (!CG_CHECK(plan_kernels(g) == 3) || !CG_CHECK(recomputed_kernels(g) == 2))
    fprintf(stderr, "a negation read through a reshape: expected 3 kernels, 2 after\n");
  cg_check_graph("a negation read through a reshape by two kernels is recomputed in both", g, NULL);

  /* A row statistic computed after its reduction (a tanh) and broadcast
   * to two kernels: the reduction is stored, 4 bytes a row, and the tanh
   * and the broadcast are copied into both (a value a row there), not the
   * broadcast tensor stored. */
  g = graph_new();
  GraphId u = graph_input(g, "u", GRAPH_F32, SHAPE(6, 37));
  GraphId stat = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_unary(g, GRAPH_OP_EXP, u), 2);
  stat = graph_unary(g, GRAPH_OP_TANH, stat);
  GraphId spread = bcast(g, stat, SHAPE(6, 37));
  graph_output(g, "plus", graph_binary(g, GRAPH_OP_ADD, spread, u));
  graph_output(g, "times", graph_binary(g, GRAPH_OP_MUL, spread, u));
  int64_t stat_scratch;
  int stat_kernels = recomputed_kernels_scratch(g, &stat_scratch);
  /* the sum and the two outputs */
  if (!CG_CHECK(stat_kernels == 3) || !CG_CHECK(stat_scratch == 64))
    fprintf(stderr, "a broadcast statistic: expected 3 kernels and the sum alone stored "
                    "(64 bytes), got %d kernels, %lld bytes\n", stat_kernels,
            (long long)stat_scratch);
  cg_check_graph("a broadcast statistic read by two kernels is stored unexpanded", g, NULL);

  /* A row max broadcast to two kernels: the broadcast is copied into both
   * and the max alone is stored, 4 bytes a row instead of 4 * 37. */
  g = graph_new();
  GraphId x = graph_input(g, "x", GRAPH_F32, SHAPE(6, 37));
  GraphId m = bcast(g, graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 2), SHAPE(6, 37));
  GraphId shifted = graph_binary(g, GRAPH_OP_SUB, x, m);
  graph_output(g, "sum", graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_unary(g, GRAPH_OP_EXP, shifted), 2));
  graph_output(g, "shifted", graph_binary(g, GRAPH_OP_MUL, shifted, shifted));
  int64_t scratch;
  if (!CG_CHECK(recomputed_kernels_scratch(g, &scratch) == 3) || !CG_CHECK(scratch == 64))
    fprintf(stderr, "a broadcast row max: expected 3 kernels and the max alone stored "
                    "(64 bytes), got %lld bytes\n", (long long)scratch);
  cg_check_graph("a broadcast row max read by two kernels: the max alone is stored", g, NULL);

  /* A broadcast scalar read by six kernels, more than a kernel that
   * computes is copied into: a broadcast only expands, so it is copied into
   * all six instead of stored full size (Adam's bias corrections). */
  g = graph_new();
  GraphId scale = bcast(g, graph_input(g, "s", GRAPH_F32, SHAPE(1, 1)), SHAPE(6, 37));
  for (int i = 0; i < 6; i++) {
    char x[3] = {'x', (char)('0' + i), 0}, y[3] = {'y', (char)('0' + i), 0};
    graph_output(g, y, graph_binary(g, GRAPH_OP_MUL, graph_input(g, x, GRAPH_F32, SHAPE(6, 37)), scale));
  }
  if (!CG_CHECK(plan_kernels(g) == 7) || !CG_CHECK(recomputed_kernels_scratch(g, &scratch) == 6) ||
      !CG_CHECK(scratch == 0))
    fprintf(stderr, "a broadcast read by six kernels: expected 7 kernels, 6 after and no "
                    "scratch, got %lld bytes\n", (long long)scratch);
  cg_check_graph("a broadcast scalar read by six kernels is copied into each", g, NULL);

  /* A GELU's shape: t = tanh(x) read by u = -t and by the backward, u by
   * the forward's product and the backward. t is copied into u's kernel
   * and the backward's in one round, u (with its copy of t) into both in
   * the next: the backward then holds two tanh of x, merged into one. */
  g = graph_new();
  x = graph_input(g, "x", GRAPH_F32, SHAPE(6, 37));
  GraphId dy = graph_input(g, "dy", GRAPH_F32, SHAPE(6, 37));
  t = graph_unary(g, GRAPH_OP_TANH, x);
  GraphId minus_t = graph_unary(g, GRAPH_OP_NEG, t);
  graph_output(g, "forward", graph_binary(g, GRAPH_OP_MUL, x, minus_t));
  graph_output(g, "backward", graph_binary(g, GRAPH_OP_MUL, graph_binary(g, GRAPH_OP_MUL, dy, minus_t),
                                           graph_binary(g, GRAPH_OP_MUL, t, t)));
  char err[256];
  Graph *copied = kernel_recompute(g, NULL, err, sizeof err);
  KernelPlan *plan = copied ? plan_of(copied) : NULL;
  int kernels = plan ? plan->num_kernels : -1, tanhs = 0;
  for (GraphId id = 0; plan && id < graph_count(copied); id++)
    tanhs += graph_node(copied, id)->op == GRAPH_OP_TANH && plan->placement[id] != KERNEL_UNUSED;
  if (!CG_CHECK(kernels == 2) || !CG_CHECK(tanhs == 2))
    fprintf(stderr, "a tanh copied twice into one kernel: expected 2 kernels and 2 tanh, got "
                    "%d and %d\n", kernels, tanhs);
  kernel_plan_free(plan);
  graph_free(copied);
  cg_check_graph("copies of one value in one kernel are merged", g, NULL);
}

/* The CPU's plan sums a bias's gradient ([64, 24] rows into [1, 24]) in
 * 8 groups of 8 rows ([8, 1, 24], one kernel that reads whole rows), then
 * the groups; the GPU's keeps one reduction. 37 rows do not split. */
static void column_sums(void) {
  Graph *g = graph_new();
  GraphId x = graph_input(g, "x", GRAPH_F32, SHAPE(64, 24));
  graph_output(g, "sum", graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_unary(g, GRAPH_OP_TANH, x), 1));
  graph_output(g, "odd", graph_reduce(g, GRAPH_OP_REDUCE_SUM,
                                      graph_input(g, "y", GRAPH_F32, SHAPE(37, 5)), 1));
  KernelPlanOptions cpu = cpu_plan_options(), gpu = ptx_plan_options();
  char err[256];
  int kernels[2] = {-1, -1};
  bool grouped = false;
  for (int i = 0; i < 2; i++) {
    Graph *prepared = kernel_prepare(g, i ? &gpu : &cpu, NULL, err, sizeof err);
    KernelPlan *plan = prepared ? kernel_plan_build(prepared, i ? &gpu : &cpu, err, sizeof err) : NULL;
    for (int k = 0; plan && k < plan->num_kernels; k++)
      grouped |= i == 0 && graph_shape_equal(&graph_node(prepared, plan->kernels[k].root)->shape,
                                             &SHAPE(8, 1, 24));
    kernels[i] = plan ? plan->num_kernels : -1;
    if (plan && kernels[i] != 3 - i)
      kernel_plan_print(plan, stderr);
    kernel_plan_free(plan);
    graph_free(prepared);
  }
  if (!CG_CHECK(kernels[0] == 3) || !CG_CHECK(kernels[1] == 2) || !CG_CHECK(grouped))
    fprintf(stderr, "column sums: expected 3 kernels on the CPU (one of [8, 1, 24]) and 2 on the "
                    "GPU, got %d and %d\n", kernels[0], kernels[1]);
  cg_check_graph("column sums in groups of rows", g, NULL);
}

/* Kernels of `g` as `options` plan them (NULL with a check failed). */
static KernelPlan *prepared_plan(const Graph *g, const KernelPlanOptions *options,
                                 Graph **prepared) {
  char err[256];
  *prepared = kernel_prepare(g, options, NULL, err, sizeof err);
  KernelPlan *plan = *prepared ? kernel_plan_build(*prepared, options, err, sizeof err) : NULL;
  if (!CG_CHECK(plan != NULL))
    fprintf(stderr, "planning: %s\n", err);
  return plan;
}

/* Whether some kernel of `plan` has a root of shape `s`. */
static bool has_root_shape(const KernelPlan *plan, GraphShape s) {
  for (int k = 0; k < plan->num_kernels; k++)
    if (graph_shape_equal(&graph_node(plan->graph, plan->kernels[k].root)->shape, &s))
      return true;
  return false;
}

/* The most reductions one kernel of `plan` hoists. */
static int most_hoisted(const KernelPlan *plan) {
  int most = 0;
  for (int k = 0; k < plan->num_kernels; k++)
    most = plan->kernels[k].num_hoisted > most ? plan->kernels[k].num_hoisted : most;
  return most;
}

/* Compiled against the evaluator, and run twice with the same bits
 * (on the GPU: two runs of its kernels; on the CPU: with and without the
 * thread pool). `negative`, when not GRAPH_NONE, is filled in [-3, -1). */
static void check_twice(const char *name, Graph *g, GraphId negative) {
  EvalValues *ref = cg_reference(g, GRAPH_F32, 4242);
  uint64_t state = 99;
  if (negative != GRAPH_NONE)
    cg_fill(ref, negative, -3, -1, &state);
  CgRunOptions options = {.steps = 1, .tolerance = 1e-5, .same_serial = true};
  cg_run(name, g, ref, &options);
  eval_free(ref);
  graph_free(g);
}

/* Long reductions into few rows (kernel_block_reductions.c): the GPU's
 * plan reduces a chunk of PTX_ROW_CHUNK (8192) elements a block, then the
 * chunks; the CPU's keeps one reduction. A sum of all 7 x 3653 elements
 * (4 chunks, the last padded), 3 rows of 20011 (3 chunks each) and a max
 * over rows of 20000 negative values (the last chunk's padding must not
 * win); each is 2 kernels on the GPU, 1 on the CPU. */
static void long_reductions(void) {
  Graph *g = graph_new();
  GraphId x = graph_input(g, "x", GRAPH_F32, SHAPE(7, 3653));
  GraphId y = graph_input(g, "y", GRAPH_F32, SHAPE(3, 20011));
  GraphId z = graph_input(g, "z", GRAPH_F32, SHAPE(2, 20000));
  GraphId tanh_x = graph_unary(g, GRAPH_OP_TANH, x);
  graph_output(g, "total", graph_reduce(g, GRAPH_OP_REDUCE_SUM, tanh_x, 3));
  graph_output(g, "rows", graph_reduce(g, GRAPH_OP_REDUCE_SUM, y, 2));
  graph_output(g, "max", graph_reduce(g, GRAPH_OP_REDUCE_MAX, z, 2));
  KernelPlanOptions cpu = cpu_plan_options(), gpu = ptx_plan_options();
  Graph *prepared[2];
  KernelPlan *plans[2] = {prepared_plan(g, &cpu, &prepared[0]),
                          prepared_plan(g, &gpu, &prepared[1])};
  if (plans[0] && plans[1] &&
      (!CG_CHECK(plans[0]->num_kernels == 3) || !CG_CHECK(plans[1]->num_kernels == 6) ||
       !CG_CHECK(has_root_shape(plans[1], SHAPE(1, 4, 1))) ||
       !CG_CHECK(has_root_shape(plans[1], SHAPE(3, 3, 1))))) {
    kernel_plan_print(plans[0], stderr);
    kernel_plan_print(plans[1], stderr);
  }
  for (int i = 0; i < 2; i++) {
    kernel_plan_free(plans[i]);
    graph_free(prepared[i]);
  }
  check_twice("long reductions over chunks", g, z);
}

/* The gradient norm's shape, sqrt(0 + sum x1^2 + ... + sum x12^2) over 12
 * inputs of 7 to 17001 elements (compiler/ir/train.c). The CPU's plan
 * hoists all 12 sums into the square root's kernel; the GPU's hoists at
 * most KernelPlanOptions.max_hoisted a kernel (GPT-2's 148 parameters in
 * one kernel spilled registers) and splits the 17001-element sum into 3
 * chunks. */
static void many_input_norm(void) {
  const GraphShape shapes[] = {SHAPE(17001), SHAPE(30, 40), SHAPE(7),    SHAPE(64, 3),
                               SHAPE(513),   SHAPE(5, 5, 5), SHAPE(1000), SHAPE(33),
                               SHAPE(2, 1024), SHAPE(300),  SHAPE(77),   SHAPE(4096)};
  int count = (int)(sizeof shapes / sizeof shapes[0]);
  Graph *g = graph_new();
  GraphId sum = graph_scalar(g, GRAPH_F32, 0.0);
  for (int i = 0; i < count; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    GraphId x = graph_input(g, name, GRAPH_F32, shapes[i]);
    GraphId squares = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, x, x),
                                   (1u << shapes[i].rank) - 1);
    sum = graph_binary(g, GRAPH_OP_ADD, sum, graph_reshape(g, squares, graph_shape_scalar()));
  }
  graph_output(g, "norm", graph_unary(g, GRAPH_OP_SQRT, sum));
  KernelPlanOptions cpu = cpu_plan_options(), gpu = ptx_plan_options();
  Graph *prepared[2];
  KernelPlan *plans[2] = {prepared_plan(g, &cpu, &prepared[0]),
                          prepared_plan(g, &gpu, &prepared[1])};
  if (plans[0] && plans[1] &&
      (!CG_CHECK(plans[0]->num_kernels == 1) || !CG_CHECK(most_hoisted(plans[0]) == count) ||
       !CG_CHECK(gpu.max_hoisted > 0 && gpu.max_hoisted < count) ||
       !CG_CHECK(most_hoisted(plans[1]) == gpu.max_hoisted) ||
       !CG_CHECK(has_root_shape(plans[1], SHAPE(1, 3, 1))))) {
    kernel_plan_print(plans[0], stderr);
    kernel_plan_print(plans[1], stderr);
  }
  for (int i = 0; i < 2; i++) {
    kernel_plan_free(plans[i]);
    graph_free(prepared[i]);
  }
  check_twice("sum of 12 inputs' squares (the gradient norm)", g, GRAPH_NONE);
}

/* Kernels of `g` planned for the CPU (kernel_prepare and the CPU's
 * options); *root_of_m: whether some kernel's root is node m. */
static int cpu_plan_kernels(const Graph *g, GraphId m, bool *root_of_m, bool *m_in_place,
                            GraphId m_target) {
  KernelPlanOptions cpu = cpu_plan_options();
  char err[256];
  GraphId *map = malloc(sizeof(GraphId) * (size_t)graph_count(g));
  Graph *prepared = map ? kernel_prepare(g, &cpu, map, err, sizeof err) : NULL;
  KernelPlan *plan = prepared ? kernel_plan_build(prepared, &cpu, err, sizeof err) : NULL;
  int kernels = plan ? plan->num_kernels : -1;
  *root_of_m = false;
  for (int k = 0; plan && k < plan->num_kernels; k++)
    *root_of_m |= plan->kernels[k].root == map[m];
  *m_in_place = plan && plan->buffer_of[map[m]] == plan->buffer_of[map[m_target]];
  if (!plan)
    fprintf(stderr, "planning: %s\n", err);
  kernel_plan_free(plan);
  graph_free(prepared);
  free(map);
  return kernels;
}

/* The nominal FLOPs of `g`'s CPU plan, with or without update values
 * merged into their readers: the same nodes, the same count. */
static int64_t cpu_plan_flops(const Graph *g, bool merge_update_values) {
  KernelPlanOptions cpu = cpu_plan_options();
  cpu.merge_update_values = merge_update_values;
  char err[256];
  Graph *prepared = kernel_prepare(g, &cpu, NULL, err, sizeof err);
  KernelPlan *plan = prepared ? kernel_plan_build(prepared, &cpu, err, sizeof err) : NULL;
  int64_t flops = plan ? 0 : -1;
  for (int k = 0; plan && k < plan->num_kernels; k++)
    flops += kernel_flops(plan, k);
  kernel_plan_free(plan);
  graph_free(prepared);
  return flops;
}

/* Adam's step, p' = p - lr m' / (sqrt(v') + eps) with m' = b1 m + (1 - b1) g
 * and v' = b2 v + (1 - b2) g g: on the CPU m' and v' are stored by the
 * kernel that writes p' (Kernel.also, also_q), each over its own state,
 * one pass instead of three; m' also read by another kernel keeps its own. */
static void adam_update(void) {
  for (int shared = 0; shared < 2; shared++) {
    Graph *g = graph_new();
    GraphShape s = SHAPE(6, 37);
    GraphId p = graph_param(g, "p", GRAPH_F32, s), m = graph_state(g, "m", GRAPH_F32, s);
    GraphId v = graph_state(g, "v", GRAPH_F32, s), grad = graph_input(g, "grad", GRAPH_F32, s);
    GraphId m1 = graph_binary(g, GRAPH_OP_ADD,
                              graph_binary(g, GRAPH_OP_MUL, graph_splat(g, GRAPH_F32, s, 0.9), m),
                              graph_binary(g, GRAPH_OP_MUL, graph_splat(g, GRAPH_F32, s, 0.1), grad));
    GraphId g2 = graph_binary(g, GRAPH_OP_MUL, grad, grad);
    GraphId v1 = graph_binary(g, GRAPH_OP_ADD,
                              graph_binary(g, GRAPH_OP_MUL, graph_splat(g, GRAPH_F32, s, 0.999), v),
                              graph_binary(g, GRAPH_OP_MUL, graph_splat(g, GRAPH_F32, s, 0.001), g2));
    GraphId denom = graph_binary(g, GRAPH_OP_ADD, graph_unary(g, GRAPH_OP_SQRT, v1),
                                 graph_splat(g, GRAPH_F32, s, 1e-3));
    GraphId step = graph_binary(g, GRAPH_OP_DIV,
                                graph_binary(g, GRAPH_OP_MUL, graph_splat(g, GRAPH_F32, s, 0.01), m1),
                                denom);
    GraphId p1 = graph_binary(g, GRAPH_OP_SUB, p, step);
    graph_output(g, "loss", graph_reduce(g, GRAPH_OP_REDUCE_SUM,
                                         graph_binary(g, GRAPH_OP_MUL, p, grad), 3));
    if (shared)
      graph_output(g, "m' sum", graph_reduce(g, GRAPH_OP_REDUCE_SUM, m1, 3));
    graph_update(g, p, p1);
    graph_update(g, m, m1);
    graph_update(g, v, v1);
    bool own_kernel, in_place;
    int kernels = cpu_plan_kernels(g, m1, &own_kernel, &in_place, m);
    /* the loss, the update; shared: m' and its sum too */
    int expected = shared ? 4 : 2;
    if (!CG_CHECK(kernels == expected) || !CG_CHECK(own_kernel == (shared != 0)) ||
        !CG_CHECK(in_place))
      fprintf(stderr, "adam (m' read %s): expected %d kernels, m' %s, over m; got %d, %s, %s\n",
              shared ? "twice" : "once", expected, shared ? "a root" : "stored alongside",
              kernels, own_kernel ? "a root" : "alongside", in_place ? "over m" : "elsewhere");
    int64_t merged = cpu_plan_flops(g, true), apart = cpu_plan_flops(g, false);
    if (!CG_CHECK(merged == apart && merged > 0))
      fprintf(stderr, "adam: %lld FLOPs with m' and v' merged, %lld apart\n", (long long)merged,
              (long long)apart);
    cg_check_graph(shared ? "adam: m' read by two kernels has its own" : "adam: one kernel", g,
                   NULL);
  }
}

/* Kernels of g's CPU plan, with or without row statistics stored where
 * they are computed; *stored: the hoisted reductions kernels store. */
static int row_statistics_plan(const Graph *g, bool store, int *stored) {
  KernelPlanOptions cpu = cpu_plan_options();
  cpu.store_row_statistics = store;
  char err[256];
  Graph *prepared = kernel_prepare(g, &cpu, NULL, err, sizeof err);
  KernelPlan *plan = prepared ? kernel_plan_build(prepared, &cpu, err, sizeof err) : NULL;
  int kernels = plan ? plan->num_kernels : -1;
  *stored = 0;
  for (int k = 0; plan && k < plan->num_kernels; k++) {
    GraphId out[3];
    for (int o = 1, count = kernel_outputs(&plan->kernels[k], out); o < count; o++)
      for (int h = 0; h < plan->kernels[k].num_hoisted; h++)
        *stored += plan->kernels[k].hoisted[h].node == out[o];
  }
  if (!plan)
    fprintf(stderr, "planning: %s\n", err);
  kernel_plan_free(plan);
  graph_free(prepared);
  return kernels;
}

static void expect_row_statistics(const char *name, Graph *g, int kernels, int stored,
                                  int kernels_apart) {
  int got_stored, apart_stored;
  int got = row_statistics_plan(g, true, &got_stored);
  int apart = row_statistics_plan(g, false, &apart_stored);
  if (!CG_CHECK(got == kernels) || !CG_CHECK(got_stored == stored) ||
      !CG_CHECK(apart == kernels_apart) || !CG_CHECK(apart_stored == 0))
    fprintf(stderr, "%s: expected %d kernels storing %d row statistics (%d kernels without), "
                    "got %d storing %d (%d storing %d)\n",
            name, kernels, stored, kernels_apart, got, got_stored, apart, apart_stored);
  cg_check_graph(name, g, NULL);
}

/* A row reduction that two kernels read is computed by the first among
 * its hoisted reductions and stored from there (store_row_statistics):
 * a softmax's max and sum, also read by its log-sum-exp; a layernorm's
 * mean and variance, also read by its inverse deviation. A sum over the
 * whole tensor, one value for all rows, keeps its own kernel, and so does
 * a statistic that the first kernel reads through a concat along the row
 * (at a shifted index, in the row's inner loop: an element of the concat,
 * not once a row). */
static void row_statistics(void) {
  Graph *g = graph_new();
  GraphShape s = SHAPE(6, 40);
  GraphId x = graph_input(g, "x", GRAPH_F32, s);
  GraphId m, sum;
  graph_output(g, "y", softmax_parts(g, x, 1, &m, &sum));
  graph_output(g, "lse", graph_binary(g, GRAPH_OP_ADD, graph_unary(g, GRAPH_OP_LOG, sum), m));
  expect_row_statistics("softmax: max and sum stored with the output", g, 2, 2, 4);

  g = graph_new();
  s = SHAPE(3, 5, 48);
  x = graph_input(g, "x", GRAPH_F32, s);
  GraphId mean, var, xc = centred_rows(g, x, &mean, &var);
  GraphId rstd = graph_unary(
      g, GRAPH_OP_RSQRT,
      graph_binary(g, GRAPH_OP_ADD, var, graph_splat(g, GRAPH_F32, SHAPE(3, 5, 1), 1e-5)));
  graph_output(g, "y", graph_binary(g, GRAPH_OP_MUL, xc, bcast(g, rstd, s)));
  graph_output(g, "rstd and mean", graph_binary(g, GRAPH_OP_ADD, rstd, mean));
  expect_row_statistics("layernorm: mean and variance stored with the output", g, 2, 2, 4);

  g = graph_new();
  s = SHAPE(16, 8);
  x = graph_input(g, "x", GRAPH_F32, s);
  /* a sum of squares: a sum that cancels would make x / total as far off
   * as the GPU's order of summation moves the total (1e-5 seen) */
  GraphId total = bcast(
      g, graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, x, x), 3), s);
  graph_output(g, "x / total", graph_binary(g, GRAPH_OP_DIV, x, total));
  graph_output(g, "x * total", graph_binary(g, GRAPH_OP_MUL, x, total));
  expect_row_statistics("a total read by two kernels of rows keeps its kernel", g, 3, 0, 3);

  g = graph_new();
  x = graph_input(g, "x", GRAPH_F32, SHAPE(6, 40));
  m = graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 2);
  graph_output(g, "x and its max", graph_concat(g, (GraphId[]){x, m}, 2, 1));
  graph_output(g, "twice the max", graph_binary(g, GRAPH_OP_ADD, m, m));
  expect_row_statistics("a max read through a concat keeps its kernel", g, 3, 0, 3);

  /* The row's kept axis of length 1 read at a shifted index: a sum of a
   * slice, concatenated after another input along that axis. */
  g = graph_new();
  GraphId x0 = graph_input(g, "x0", GRAPH_F32, SHAPE(6, 40, 3));
  GraphId o = graph_input(g, "o", GRAPH_F32, SHAPE(6, 1, 4));
  GraphId w = graph_input(g, "w", GRAPH_F32, SHAPE(6, 1, 5));
  GraphId xs = graph_slice(g, x0, (int64_t[]){0, 0, 2}, (int64_t[]){6, 40, 3}, (int64_t[]){1, 1, 1});
  sum = graph_reduce(g, GRAPH_OP_REDUCE_SUM, xs, 2);
  graph_output(g, "concat times w",
               graph_binary(g, GRAPH_OP_MUL, graph_concat(g, (GraphId[]){o, sum}, 2, 2), w));
  graph_output(g, "sum squared", graph_binary(g, GRAPH_OP_MUL, sum, sum));
  expect_row_statistics("a sum read at a shifted index keeps its kernel", g, 3, 0, 3);
}

/* An update value stored alongside its parameter's update (m' with p')
 * that reads the parameter at another element: p' must not be written
 * over p, or rows of m' computed later would read updated parameters. */
static void update_reading_across(void) {
  Graph *g = graph_new();
  GraphShape s = SHAPE(8, 8);
  GraphId p = graph_param(g, "p", GRAPH_F32, s), m = graph_state(g, "m", GRAPH_F32, s);
  GraphId grad = graph_input(g, "grad", GRAPH_F32, s);
  GraphId m1 = graph_binary(
      g, GRAPH_OP_ADD, graph_binary(g, GRAPH_OP_MUL, graph_splat(g, GRAPH_F32, s, 0.9), m),
      graph_binary(g, GRAPH_OP_ADD, grad, graph_permute(g, p, (int[]){1, 0})));
  GraphId p1 = graph_binary(g, GRAPH_OP_SUB, p,
                            graph_binary(g, GRAPH_OP_MUL, graph_splat(g, GRAPH_F32, s, 0.1), m1));
  graph_output(g, "loss", graph_reduce(g, GRAPH_OP_REDUCE_SUM, grad, 3));
  graph_update(g, p, p1);
  graph_update(g, m, m1);
  bool own_kernel, in_place;
  cpu_plan_kernels(g, p1, &own_kernel, &in_place, p);
  if (!CG_CHECK(!in_place))
    fprintf(stderr, "p' = p - 0.1 m' with m' reading p transposed: written over p\n");
  cg_check_graph("an update value reading its parameter transposed", g, NULL);
}

/* A loop kernel's buffers are noalias parameters of its body, which the
 * inliner turns into alias scopes named after the body's arguments
 * (llvm/loop_rows.c), so the output is known apart from the inputs. (The loop
 * vectorizer's runtime checks make alias scopes too, but not these.) The
 * in-place kernel (tanh over the dying d + b) names d's buffer once. */
static void noalias_buffers(void) {
  Graph *g = graph_new();
  GraphId a = graph_input(g, "a", GRAPH_F32, SHAPE(64, 64));
  GraphId b = graph_input(g, "b", GRAPH_F32, SHAPE(64, 64));
  GraphId d = graph_dot(g, a, b, false, false);
  GraphId t = graph_unary(g, GRAPH_OP_TANH, graph_binary(g, GRAPH_OP_ADD, d, b));
  graph_output(g, "y", graph_dot(g, t, b, false, false));
  KernelPlan *plan = plan_of(g);
  char err[256] = "";
  CpuModule *module = plan ? cpu_compile(plan, NULL, err, sizeof err) : NULL;
  char *ir = module ? cpu_llvm_text(module) : NULL;
  if (!CG_CHECK(ir && strstr(ir, "_body: argument 0") && strstr(ir, "_body: argument 1")))
    fprintf(stderr, "loop kernel: no noalias scopes of its body's arguments in the IR %s\n", err);
  free(ir);
  cpu_module_free(module);
  kernel_plan_free(plan);
  cg_check_graph("noalias loop kernel buffers, in place", g, NULL);
}

/* Attention kernels of q, k, v [batch..., 8, 16] and the three gradients,
 * planned with `options`: how many, and whether one writes dq, dk and dv. */
static int attention_backward_plan(GraphShape batch, const KernelPlanOptions *options,
                                   bool *merged) {
  Graph *g = graph_new();
  GraphShape s = batch;
  s.rank += 2;
  s.dims[s.rank - 2] = 8;
  s.dims[s.rank - 1] = 16;
  GraphId in[4];
  const char *names[4] = {"q", "k", "v", "do"};
  for (int i = 0; i < 4; i++)
    in[i] = graph_input(g, names[i], GRAPH_F32, s);
  GraphAttrs at = {.scale = 0.25, .causal = true};
  GraphId o = graph_attention(g, in[0], in[1], in[2], GRAPH_NONE, 0.25, true);
  GraphId lse = graph_add_node(g, GRAPH_OP_ATTENTION_LSE, in, 2, &at);
  GraphId delta = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, in[3], o),
                               1u << (s.rank - 1));
  GraphId grad_in[6] = {in[0], in[1], in[2], in[3], lse, delta};
  const GraphOp grads[3] = {GRAPH_OP_ATTENTION_GRAD_Q, GRAPH_OP_ATTENTION_GRAD_K,
                            GRAPH_OP_ATTENTION_GRAD_V};
  const char *outs[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; i++)
    graph_output(g, outs[i], graph_add_node(g, grads[i], grad_in, 6, &at));
  char err[256];
  KernelPlan *plan = kernel_plan_build(g, options, err, sizeof err);
  int count = 0;
  *merged = false;
  for (int k = 0; plan && k < plan->num_kernels; k++) {
    count += plan->kernels[k].kind == KERNEL_ATTENTION;
    *merged |= plan->kernels[k].also_q != GRAPH_NONE;
  }
  if (!CG_CHECK(plan != NULL))
    fprintf(stderr, "attention backward: %s\n", err);
  kernel_plan_free(plan);
  graph_free(g);
  return count;
}

/* The CPU's plan writes the three gradients in one kernel from 16 (batch,
 * head) pairs; fewer pairs, and the GPU's plan, keep grad_q apart. (Every
 * attention case of codegen_ops runs the merged kernel: its harness merges
 * from one pair.) */
static void attention_backward(void) {
  int failures_before = cg_failures;
  KernelPlanOptions cpu = cpu_plan_options();
  bool merged;
  /* attention (+ lse), grad_k (+ grad_v), grad_q */
  CG_CHECK(attention_backward_plan(SHAPE(4, 4), &cpu, &merged) == 2 && merged);
  CG_CHECK(attention_backward_plan(SHAPE(3, 5), &cpu, &merged) == 3 && !merged);
  CG_CHECK(attention_backward_plan(SHAPE(4, 4), NULL, &merged) == 3 && !merged);
  printf("%s  attention's backward: one kernel for 16 pairs on the CPU\n",
         cg_failures == failures_before ? "ok  " : "FAIL");
}

int main(void) {
  cg_start("codegen_fusion");
  attention_backward();
  softmax_rows();
  layernorm_rows();
  views_and_sharing();
  broadcast_transcendental();
  in_place();
  noalias_buffers();
  recomputation();
  column_sums();
  long_reductions();
  many_input_norm();
  adam_update();
  update_reading_across();
  row_statistics();
  printing();
  return cg_finish("codegen_fusion");
}
