/* Training graphs from train_build run compiled against the evaluator: an
 * MLP (embedding gather, dropout keyed on the step, tanh, softmax cross
 * entropy) with Adam and gradient clipping, several steps; loss and every
 * param and moment agree within 1e-4 relative. Also times the compilation
 * of a medium training graph. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <time.h>

#include "cpu.h"
#include "harness.h"
#include "train.h"

#define SHAPE(...) ((GraphShape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static GraphId bcast(Graph *g, GraphId x, GraphShape s) { return graph_broadcast(g, x, s); }

static GraphId dense(Graph *g, GraphId x, int64_t rows, int64_t in, int64_t out, int layer) {
  char name[32];
  snprintf(name, sizeof name, "layer%d.w", layer);
  GraphId w = graph_param(g, name, GRAPH_F32, SHAPE(in, out));
  snprintf(name, sizeof name, "layer%d.b", layer);
  GraphId b = graph_param(g, name, GRAPH_F32, SHAPE(out));
  return graph_binary(g, GRAPH_OP_ADD, graph_dot(g, x, w, false, false),
                      bcast(g, b, SHAPE(rows, out)));
}

/* mean over rows of -sum(target * log_softmax(z)) */
static GraphId cross_entropy(Graph *g, GraphId z, GraphId target, int64_t rows, int64_t classes) {
  GraphShape s = SHAPE(rows, classes);
  GraphId m = graph_reduce(g, GRAPH_OP_REDUCE_MAX, z, 2);
  GraphId shifted = graph_binary(g, GRAPH_OP_SUB, z, bcast(g, m, s));
  GraphId lse =
      graph_unary(g, GRAPH_OP_LOG,
                  graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_unary(g, GRAPH_OP_EXP, shifted), 2));
  GraphId logp = graph_binary(g, GRAPH_OP_SUB, shifted, bcast(g, lse, s));
  GraphId total =
      graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, target, logp), 3);
  total = graph_reshape(g, total, graph_shape_scalar());
  return graph_binary(g, GRAPH_OP_MUL, total, graph_scalar(g, GRAPH_F32, -1.0 / (double)rows));
}

/* tokens -> embedding -> (dense, tanh, dropout) x layers -> dense -> loss */
static Graph *mlp(int64_t batch, int64_t vocab, int64_t width, int64_t classes, int layers,
                  double clip) {
  Graph *g = graph_new();
  GraphId step = train_step_input(g);
  GraphId tokens = graph_input(g, "tokens", GRAPH_I32, SHAPE(batch));
  GraphId target = graph_input(g, "target", GRAPH_F32, SHAPE(batch, classes));
  GraphId emb = graph_param(g, "emb", GRAPH_F32, SHAPE(vocab, width));
  GraphId h = graph_gather(g, emb, tokens);
  for (int layer = 0; layer < layers; layer++) {
    h = graph_unary(g, GRAPH_OP_TANH, dense(g, h, batch, width, width, layer));
    GraphShape s = SHAPE(batch, width);
    GraphId keep =
        graph_binary(g, GRAPH_OP_CMPLT, graph_random(g, step, GRAPH_F32, s, 1000 + layer),
                     graph_splat(g, GRAPH_F32, s, 0.9));
    GraphId scaled = graph_binary(g, GRAPH_OP_MUL, h, graph_splat(g, GRAPH_F32, s, 1 / 0.9));
    h = graph_select(g, keep, scaled, graph_splat(g, GRAPH_F32, s, 0.0));
  }
  GraphId loss =
      cross_entropy(g, dense(g, h, batch, width, classes, layers), target, batch, classes);
  graph_output(g, "loss", loss);
  TrainConfig config = {.optimizer = TRAIN_ADAM,
                        .beta1 = 0.9,
                        .beta2 = 0.999,
                        .eps = 1e-8,
                        .clip_norm = clip,
                        .lr = graph_scalar(g, GRAPH_F32, 0.01)};
  if (!train_build(g, loss, &config))
    fprintf(stderr, "train_build: %s\n", graph_error(g));
  return g;
}

static void fill_training(const Graph *g, EvalValues *ref, int64_t vocab) {
  uint64_t state = 17;
  for (int i = 0; i < graph_num_states(g); i++)
    cg_fill(ref, graph_state_at(g, i), 0, 0, &state);
  cg_fill(ref, graph_find_leaf(g, "tokens"), 0, (double)vocab, &state);
  GraphId target = graph_find_leaf(g, "target");
  EvalTensor *t = eval_tensor(ref, target);
  int64_t classes = t->shape.dims[1];
  for (int64_t i = 0; i < t->numel; i++)
    eval_tensor_set(t, i, i % classes == (i / classes) % classes);
  for (int i = 0; i < graph_num_params(g); i++)
    cg_fill(ref, graph_param_at(g, i), -0.5, 0.5, &state);
}

static void train_steps(const char *name, double clip) {
  Graph *g = mlp(8, 10, 16, 4, 2, clip);
  if (!CG_CHECK(graph_error(g) == NULL)) {
    graph_free(g);
    return;
  }
  EvalValues *ref = cg_reference(g, GRAPH_F32, 1);
  fill_training(g, ref, 10);
  double before = eval_get(ref, graph_find_leaf(g, "layer0.w"), 0);
  /* On the GPU, sums in other orders and tf32 products move a small Adam
   * moment by more than 1e-4 of itself after 5 steps (Adam's division
   * magnifies differences in small gradients): there the tensors are
   * compared in the 2-norm, as the models' are. */
  cg_run(name, g, ref, &(CgRunOptions){.steps = 5, .tolerance = 1e-4, .norm = cg_on_gpu()});
  /* The parameters moved, so the comparison was not of untouched memory. */
  CG_CHECK(eval_get(ref, graph_find_leaf(g, "layer0.w"), 0) != before);
  eval_free(ref);
  graph_free(g);
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Plans, compiles (O3) and emits a 4-layer, 256-wide training graph. */
static void compile_time(void) {
  Graph *g = mlp(64, 1000, 256, 10, 4, 1.0);
  char err[256];
  double t0 = seconds();
  KernelPlan *plan = kernel_plan_build(g, NULL, err, sizeof err);
  double t1 = seconds();
  CpuModule *m = plan ? cpu_compile(plan, NULL, err, sizeof err) : NULL;
  double t2 = seconds();
  bool ok = m && cpu_emit_object(m, "/tmp/tfm_codegen_medium.o", err, sizeof err);
  double t3 = seconds();
  if (CG_CHECK(ok)) {
    printf("ok    medium graph: %d nodes, %d kernels, %d functions; plan %.3f s, "
           "generate+O3 %.3f s, object %.3f s\n",
           graph_count(g), plan->num_kernels, plan->num_functions, t1 - t0, t2 - t1, t3 - t2);
  } else {
    fprintf(stderr, "medium graph: %s\n", err);
  }
  remove("/tmp/tfm_codegen_medium.o");
  cpu_module_free(m);
  kernel_plan_free(plan);
  graph_free(g);
}

int main(void) {
  cg_start("codegen_train");
  train_steps("mlp with adam", 0.0);
  train_steps("mlp with adam and clipping", 0.5);
  compile_time();
  return cg_finish("codegen_train");
}
