/* The generated GEMM (compiler/codegen/cpu/gemm.c) against the evaluator:
 * every transpose combination on odd sizes (edge tiles in m and n, rows
 * ending a block in a part of a tile's, k = 1,
 * k past one k block, m past one row block, k not a multiple of the
 * packing's four-step transposes or of its 16-row groups; both loop
 * orders: row_blocks, and 37 x 1027 x 515, whose threads get 544 columns
 * with k past 512 (the row order) and 483 (the column order)),
 * batched and broadcast operands, f64, each with the AVX-512 geometry
 * (native here), the AVX2 one (x86-64-v3), with and without the thread pool.
 * The GEMM sums k ascending as the evaluator does but fuses each multiply
 * and add, so elements agree to 1e-5 of sum_k |a||b| (the harness's bound
 * for dots), not bit for bit.
 *
 * `codegen_gemm bf16` runs the same sizes in bf16 on the kernel family
 * TFM_CPU_KERNELS names (ctest runs it once per family: AMX, AVX512-BF16,
 * the widening f32 path): C holds one rounding of an f32 sum, so elements agree to one
 * bf16 step, 2^-7 of sum_k |a||b| at most. The sizes cross the pair
 * families' blocks too: 128-column panels (n = 1027, 1030), 256-row
 * blocks (m = 450), k blocks of 2048 (k = 2083), k padded to a multiple of
 * 32, and B packed in more than one go (packed_spans). */
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define SHAPE(...) ((GraphShape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

typedef struct Size {
  int64_t m, n, k;
} Size;

static const Size sizes[] = {
    {1, 1, 1},    {3, 17, 1},  {17, 63, 65}, {65, 129, 3}, {129, 65, 300},
    {63, 3, 129}, {450, 33, 17}, {5, 1030, 7}, {12, 32, 256}, {24, 64, 513},
    /* The packing's paths: rows of the block read in order across slivers
     * where the sliver's elements are contiguous, four k steps transposed at
     * a time where they are strided, then the k steps left over (k blocks
     * of 256 + 3 and 512 + 3 (AVX2's KC and AVX-512's), 4 x 256 + 6) and
     * the part-filled last sliver. 37 x 1027 x 515 split between two
     * threads also runs AVX-512's f32 row order (n 544 >= 512, k > 512)
     * beside its column order (n 483). */
    {37, 1027, 259}, {37, 1027, 515}, {46, 70, 1030},
    /* Blocks ending in a third or two thirds of MR rows (AVX-512: 4 or 8 of
     * 12; AVX2: 2 or 4 of 6) over whole tiles' columns: the smaller
     * micro-kernels, in place in C, serial and split between threads. */
    {28, 64, 40}, {44, 96, 300}, {256, 64, 20},
    /* k past the pair families' k block of 2048 (the sums carried across
     * blocks in f32). */
    {37, 45, 2083},
};

/* A [m, k] operand, or [k, m] when transposed. */
static GraphShape operand(int64_t rows, int64_t cols, bool transposed) {
  return transposed ? SHAPE(cols, rows) : SHAPE(rows, cols);
}

static void run_tolerance(const char *name, Graph *g, GraphDtype precision, double tolerance) {
  EvalValues *ref = cg_reference(g, precision, 7);
  char label[96];
  snprintf(label, sizeof label, "%s native", name);
  cg_run(label, g, ref, &(CgRunOptions){.steps = 1, .tolerance = tolerance});
  snprintf(label, sizeof label, "%s serial", name);
  cg_run(label, g, ref, &(CgRunOptions){.steps = 1, .tolerance = tolerance, .serial = true});
  snprintf(label, sizeof label, "%s x86-64-v3", name);
  cg_run(label, g, ref, &(CgRunOptions){.steps = 1, .tolerance = tolerance, .cpu = "x86-64-v3"});
  eval_free(ref);
  graph_free(g);
}

static void run_modes(const char *name, Graph *g, GraphDtype precision) {
  run_tolerance(name, g, precision, 1e-5);
}

static void transposes(GraphDtype dtype, bool ta, bool tb) {
  Graph *g = graph_new();
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    Size s = sizes[i];
    char a_name[32], b_name[32], c_name[32];
    snprintf(a_name, sizeof a_name, "a%zu", i);
    snprintf(b_name, sizeof b_name, "b%zu", i);
    snprintf(c_name, sizeof c_name, "c%zu_%lldx%lldx%lld", i, (long long)s.m, (long long)s.n,
             (long long)s.k);
    GraphId a = graph_input(g, a_name, dtype, operand(s.m, s.k, ta));
    GraphId b = graph_input(g, b_name, dtype, operand(s.k, s.n, tb));
    graph_output(g, c_name, graph_dot(g, a, b, ta, tb));
  }
  char name[32];
  snprintf(name, sizeof name, "gemm %s%s%s", dtype == GRAPH_BF16 ? "bf16 " : "", ta ? "t" : "n",
           tb ? "t" : "n");
  run_tolerance(name, g, GRAPH_F32, dtype == GRAPH_BF16 ? 1.0 / 128 : 1e-5);
}

/* Output `name` = dot of two new inputs named a and b. */
static void output_dot(Graph *g, const char *name, GraphDtype dtype, const char *a, GraphShape sa,
                       const char *b, GraphShape sb, bool ta, bool tb) {
  GraphId x = graph_input(g, a, dtype, sa), y = graph_input(g, b, dtype, sb);
  graph_output(g, name, graph_dot(g, x, y, ta, tb));
}

/* Batches: both operands batched, and either one shared by every batch
 * (rank 2), in the shapes of attention (6 batches of 17 x 9, transposed). */
static void batched(void) {
  Graph *g = graph_new();
  GraphId q = graph_input(g, "q", GRAPH_F32, SHAPE(6, 17, 9));
  GraphId k = graph_input(g, "k", GRAPH_F32, SHAPE(6, 17, 9));
  GraphId v = graph_input(g, "v", GRAPH_F32, SHAPE(6, 17, 9));
  GraphId w = graph_input(g, "w", GRAPH_F32, SHAPE(9, 33));
  GraphId x = graph_input(g, "x", GRAPH_F32, SHAPE(13, 17));
  GraphId scores = graph_dot(g, q, k, false, true);
  graph_output(g, "scores", scores);
  graph_output(g, "context", graph_dot(g, scores, v, false, false));
  graph_output(g, "grad_v", graph_dot(g, scores, q, true, false));
  graph_output(g, "shared_b", graph_dot(g, v, w, false, false));
  graph_output(g, "shared_a", graph_dot(g, x, k, false, false));
  graph_output(g, "shared_a_tb",
               graph_dot(g, graph_input(g, "y", GRAPH_F32, SHAPE(13, 9)), k, false, true));
  output_dot(g, "batch4", GRAPH_F32, "p", SHAPE(2, 3, 5, 70), "r", SHAPE(2, 3, 70, 40), false,
             false);
  /* Fewer rows (batch x m) than columns: the range splits the columns into
   * two blocks too (cpu/dot.c), here with odd widths, B batched or shared,
   * transposed or not. The 2-D sizes above with m < n (5 x 1030, 24 x 64,
   * 65 x 129) take that path as well. */
  output_dot(g, "wide_nn", GRAPH_F32, "wa", SHAPE(2, 3, 70), "wb", SHAPE(2, 70, 151), false, false);
  output_dot(g, "wide_nt", GRAPH_F32, "wc", SHAPE(2, 5, 70), "wd", SHAPE(2, 97, 70), false, true);
  output_dot(g, "wide_tn_shared", GRAPH_F32, "we", SHAPE(3, 70, 7), "wf", SHAPE(70, 99), true,
             false);
  output_dot(g, "wide_tt_shared", GRAPH_F32, "wg", SHAPE(3, 70, 7), "wh", SHAPE(131, 70), true,
             true);
  run_modes("gemm batched", g, GRAPH_F32);
}

/* One row a batch against a B of each batch (an RNN decoder's query and
 * its encoder states): matrix-vector products instead of the GEMM
 * (cpu/dot.c), B transposed or not, k within a vector, past whole vectors
 * and past a GEMM k block, A shared or batched or transposed, and f64. */
static void vector_rows(void) {
  Graph *g = graph_new();
  output_dot(g, "scores_nt", GRAPH_F32, "q", SHAPE(32, 1, 128), "e", SHAPE(32, 25, 128), false,
             true);
  output_dot(g, "context_nn", GRAPH_F32, "p", SHAPE(7, 1, 300), "v", SHAPE(7, 300, 37), false,
             false);
  output_dot(g, "short_k_nt", GRAPH_F32, "s", SHAPE(4, 1, 5), "t", SHAPE(4, 9, 5), false, true);
  output_dot(g, "shared_a_ta", GRAPH_F32, "x", SHAPE(19, 1), "y", SHAPE(5, 19, 33), true, false);
  run_modes("gemm vector rows", g, GRAPH_F32);
  g = graph_new();
  output_dot(g, "f64_nn", GRAPH_F64, "a", SHAPE(3, 1, 21), "b", SHAPE(3, 21, 9), false, false);
  output_dot(g, "f64_nt", GRAPH_F64, "c", SHAPE(3, 1, 21), "d", SHAPE(3, 9, 21), false, true);
  run_modes("gemm vector rows f64", g, GRAPH_F64);
}

static void f64(void) {
  Graph *g = graph_new();
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    char name[16];
    snprintf(name, sizeof name, "a%d", t);
    GraphId a = graph_input(g, name, GRAPH_F64, operand(19, 37, ta));
    snprintf(name, sizeof name, "b%d", t);
    GraphId b = graph_input(g, name, GRAPH_F64, operand(37, 21, tb));
    snprintf(name, sizeof name, "c%d", t);
    graph_output(g, name, graph_dot(g, a, b, ta, tb));
  }
  run_modes("gemm f64", g, GRAPH_F64);
}

/* B larger than the pair families pack at once (8 MiB): at k = 26250
 * packed B is 160 x 26272 bf16 (8.4 MB) and only one 128-column panel
 * fits, so its 130 columns are packed in two spans and C's columns past
 * the first span are written from the second; B transposed or not. m = n,
 * so the kernel does not split the columns between threads (cpu/dot.c). */
static void packed_spans(void) {
  Graph *g = graph_new();
  output_dot(g, "spans_nn", GRAPH_BF16, "a", SHAPE(130, 26250), "b", SHAPE(26250, 130), false,
             false);
  output_dot(g, "spans_nt", GRAPH_BF16, "c", SHAPE(130, 26250), "d", SHAPE(130, 26250), false,
             true);
  run_tolerance("gemm bf16 packed spans", g, GRAPH_F32, 1.0 / 128);
}

/* n past 1024, where AVX-512's f32 GEMM puts A's row blocks outermost
 * (gemm.c), nn and tt (each operand packed both ways): serial, m past its
 * 1032-row block (ending in two thirds of MR), k past its 384, n past two
 * 512-column blocks into a part-filled sliver; split between threads, 520
 * rows each (ending in a third of MR). Its x86-64-v3 run is the AVX2
 * column order past one 1024-column block. */
static void row_blocks(void) {
  Graph *g = graph_new();
  for (int t = 0; t < 2; t++) {
    bool ta = t, tb = t;
    char a[8], b[8], c[16];
    snprintf(a, sizeof a, "a%d", t), snprintf(b, sizeof b, "b%d", t);
    snprintf(c, sizeof c, "rows_%c%c", ta ? 't' : 'n', tb ? 't' : 'n');
    output_dot(g, c, GRAPH_F32, a, operand(1040, 390, ta), b, operand(390, 1030, tb), ta, tb);
  }
  run_modes("gemm row blocks", g, GRAPH_F32);
}

/* "codegen_gemm bf16": the bf16 cases, which ctest runs once per kernel
 * family; without it, the f32 and f64 ones. */
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "bf16") == 0) {
    for (int t = 0; t < 4; t++)
      transposes(GRAPH_BF16, t & 1, t & 2);
    packed_spans();
    return cg_finish("codegen_gemm bf16");
  }
  for (int t = 0; t < 4; t++)
    transposes(GRAPH_F32, t & 1, t & 2);
  row_blocks();
  batched();
  vector_rows();
  f64();
  return cg_finish("codegen_gemm");
}
