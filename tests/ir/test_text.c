/* The text form (print and parse), DOT output, and the error messages of
 * the parser and of the builders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "graph_text.h"
#include "testutil.h"

/* Every op once, in the printer's canonical form. */
static const char *const every_op =
    "%0 = input \"x\" : f32[2,3]\n"
    "%1 = param \"encoder.3.attn.wq\" : f32[3,4]\n"
    "%2 = state \"adam.m.encoder.3.attn.wq\" : f32[3,4]\n"
    "%3 = input \"step\" : i32[]\n"
    "%4 = input \"tokens\" : i32[2,2]\n"
    "%5 = constant 1.5 : f32[2,3]\n"
    "%6 = constant [1, 2.5, -3] : f32[3]\n"
    "%7 = iota axis=1 : i32[2,3]\n"
    "%8 = random %3 seed=42 stream=0 : f32[2,3]\n"
    "%9 = neg %0 : f32[2,3]\n"
    "%10 = exp %9 : f32[2,3]\n"
    "%11 = log %10 : f32[2,3]\n"
    "%12 = sqrt %11 : f32[2,3]\n"
    "%13 = rsqrt %12 : f32[2,3]\n"
    "%14 = tanh %13 : f32[2,3]\n"
    "%15 = sin %14 : f32[2,3]\n"
    "%16 = cos %15 : f32[2,3]\n"
    "%17 = abs %16 : f32[2,3]\n"
    "%18 = recip %17 : f32[2,3]\n"
    "%19 = add %18, %5 : f32[2,3]\n"
    "%20 = sub %19, %5 : f32[2,3]\n"
    "%21 = mul %20, %8 : f32[2,3]\n"
    "%22 = div %21, %5 : f32[2,3]\n"
    "%23 = max %22, %0 : f32[2,3]\n"
    "%24 = min %23, %0 : f32[2,3]\n"
    "%25 = pow %24, %5 : f32[2,3]\n"
    "%26 = cmplt %25, %0 : i32[2,3]\n"
    "%27 = cmpeq %7, %26 : i32[2,3]\n"
    "%28 = select %27, %25, %0 : f32[2,3]\n"
    "%29 = cast %28 : f64[2,3]\n"
    "%30 = reduce_sum %28 axes=[1] : f32[2,1]\n"
    "%31 = reduce_max %28 axes=[0,1] : f32[1,1]\n"
    "%32 = reshape %28 : f32[3,2]\n"
    "%33 = permute %28 perm=[1,0] : f32[3,2]\n"
    "%34 = broadcast %6 : f32[2,3]\n"
    "%35 = slice %28 start=[0,1] stop=[2,3] step=[1,2] : f32[2,1]\n"
    "%36 = concat %28, %34 axis=0 : f32[4,3]\n"
    "%37 = pad %28 lo=[1,0] hi=[0,2] interior=[0,1] value=0 : f32[3,7]\n"
    "%38 = gather %1, %4 : f32[2,2,4]\n"
    "%39 = scatter_add %38, %4 : f32[3,4]\n"
    "%40 = dot %28, %1 transpose_a=false transpose_b=false : f32[2,4]\n"
    "%41 = attention %28, %28, %34, %30 scale=0.5 causal=false : f32[2,3]\n"
    "%42 = attention_lse %28, %28 scale=0.5 causal=true : f32[2,1]\n"
    "%43 = attention_grad_q %28, %28, %34, %41, %42, %30 scale=0.5 causal=true : f32[2,3]\n"
    "%44 = attention_grad_k %28, %28, %34, %41, %42, %30 scale=0.5 causal=true : f32[2,3]\n"
    "%45 = attention_grad_v %28, %28, %34, %41, %42, %30, %30 scale=0.5 causal=false : f32[2,3]\n"
    "%46 = stop_gradient %28 : f32[2,3]\n"
    "%47 = erf %46 : f32[2,3]\n"
    "output \"y\" = %40\n"
    "output \"probe\" = %30\n"
    "update %1 = %39\n"
    "update %2 = %39\n";

static void round_trip(void) {
  Graph *g = test_parse(every_op);
  if (!g) return;
  CHECK(graph_count(g) == GRAPH_OP_COUNT + 3); /* three extra leaves */
  bool seen[GRAPH_OP_COUNT] = {false};
  for (GraphId id = 0; id < graph_count(g); id++) seen[graph_node(g, id)->op] = true;
  for (int op = 0; op < GRAPH_OP_COUNT; op++)
    if (!CHECK(seen[op])) fprintf(stderr, "  %s is missing\n", graph_op_name((GraphOp)op));
  char *text = graph_to_text(g);
  if (!CHECK(text && strcmp(text, every_op) == 0))
    fprintf(stderr, "--- printed:\n%s--- expected:\n%s", text ? text : "(null)", every_op);
  CHECK(graph_num_inputs(g) == 3 && graph_num_params(g) == 1 && graph_num_states(g) == 1);
  CHECK(graph_find_leaf(g, "encoder.3.attn.wq") == 1);
  CHECK(graph_find_output(g, "probe") == 30);
  CHECK(graph_update_at(g, 1).target == 2);

  char *dot = graph_to_dot(g, NULL);
  CHECK(dot && strstr(dot, "digraph tfm {"));
  CHECK(dot && strstr(dot, "n28 -> n40;"));
  CHECK(dot && strstr(dot, "n1 -> n40;"));
  CHECK(dot && strstr(dot, "label=\"%40 = dot %28, %1 transpose_a=false transpose_b=false\\nf32[2,4]\""));
  CHECK(dot && strstr(dot, "n39 -> n1 [style=dashed"));
  free(dot);
  free(text);
  graph_free(g);
}

/* Sparse ids, comments and blank lines are accepted; numbers print in the
 * shortest form that reads back as the same value of the dtype. */
static void loose_input(void) {
  const char *text = "# a comment\n\n"
                     "%10 = constant [0.1, 1e-9, 3] : f32[3]   # trailing comment\n"
                     "%20 = constant [0.1, 123456789, -0.5] : f64[3]\n"
                     "%30 = constant 7 : i32[2]\n"
                     "%31 = slice %10 start=[1] stop=[3] : f32[2]\n"
                     "%40 = constant [2147483647, -5] : i32[2]\n"
                     "output \"a\" = %31\n";
  Graph *g = test_parse(text);
  if (!g) return;
  char *out = graph_to_text(g);
  const char *expected = "%0 = constant [0.1, 1e-09, 3] : f32[3]\n"
                         "%1 = constant [0.1, 123456789, -0.5] : f64[3]\n"
                         "%2 = constant 7 : i32[2]\n"
                         "%3 = slice %0 start=[1] stop=[3] step=[1] : f32[2]\n"
                         "%4 = constant [2147483647, -5] : i32[2]\n"
                         "output \"a\" = %3\n";
  if (!CHECK(out && strcmp(out, expected) == 0)) fprintf(stderr, "--- printed:\n%s", out);
  free(out);
  graph_free(g);
}

static void parse_error(const char *text, const char *expected) {
  char err[256];
  Graph *g = graph_parse(text, err, sizeof err);
  CHECK(g == NULL);
  if (!CHECK(strstr(err, expected) != NULL))
    fprintf(stderr, "  error \"%s\" lacks \"%s\"\n", err, expected);
  graph_free(g);
}

static void parse_errors(void) {
  parse_error("%0 = foo : f32[2]\n", "line 1: unknown op 'foo'");
  parse_error("%0 = input \"a\" : f32[2]\n%1 = neg %5 : f32[2]\n", "line 2: %5 is not defined");
  parse_error("%0 = input \"a\" : f32[2]\n%1 = input \"b\" : f32[3]\n%2 = add %0, %1 : f32[2]\n",
              "line 3: add: operands f32[2] and f32[3] differ");
  parse_error("%0 = input \"a\" : f32[2,3]\n%1 = permute %0 perm=[1,0] : f32[2,3]\n",
              "line 2: declared f32[2,3] but permute gives f32[3,2]");
  parse_error("%0 = input \"a\" : f32[2]\n%1 = param \"a\" : f32[2]\n",
              "line 2: param: the name 'a' is already used");
  parse_error("%0 = input \"a\" : q8[2]\n", "line 1: unknown dtype 'q8'");
  parse_error("%0 = input \"a\" : f32[2]\n%0 = neg %0 : f32[2]\n", "line 2: %0 is defined twice");
  parse_error("%0 = input \"a\" : f32[2]\noutput \"y\" = %0\noutput \"y\" = %0\n",
              "line 3: output: the name 'y'");
  parse_error("%0 = input \"a\" : f32[2]\nupdate %0 = %0\n", "line 2: update:");
  parse_error("%0 = constant [1, 2] : f32[3]\n", "line 1: constant: 2 values for 3 elements");
  parse_error("%0 = input \"a : f32[2]\n", "line 1: unterminated string");
  parse_error("%0 = input \"a\" : f32[2] extra\n", "line 1: unexpected text");
  parse_error("%0 = input \"a\" : f32[2]\n%1 = neg %0 bogus=1 : f32[2]\n",
              "line 2: unknown attribute 'bogus'");
}

static GraphShape vec(int64_t n) { return (GraphShape){1, {n}}; }

static void expect_error(Graph *g, GraphId id, const char *message) {
  const char *err = graph_error(g);
  CHECK(id == GRAPH_NONE);
  if (!CHECK(err && strstr(err, message)))
    fprintf(stderr, "  error \"%s\" lacks \"%s\"\n", err ? err : "(none)", message);
  graph_clear_error(g);
}

static void builder_errors(void) {
  Graph *g = graph_new();
  GraphId a = graph_input(g, "a", GRAPH_F32, vec(2)), b = graph_input(g, "b", GRAPH_F32, vec(3));
  GraphId idx = graph_input(g, "i", GRAPH_I32, vec(2));
  CHECK(graph_error(g) == NULL);

  GraphId bad = graph_binary(g, GRAPH_OP_ADD, a, b);
  CHECK(bad == GRAPH_NONE);
  CHECK(graph_error(g) && strstr(graph_error(g), "add: operands f32[2] and f32[3] differ"));
  /* A builder given GRAPH_NONE keeps the first message. */
  CHECK(graph_unary(g, GRAPH_OP_EXP, bad) == GRAPH_NONE);
  CHECK(strstr(graph_error(g), "add:") != NULL);
  int count = graph_count(g);
  graph_clear_error(g);
  CHECK(graph_error(g) == NULL && graph_count(g) == count);

  /* Each builder call fails alone: the first error of a graph is kept. */
#define EXPECT_ERROR(call, message) expect_error(g, (call), (message))
  EXPECT_ERROR(graph_reshape(g, a, vec(3)), "reshape: cannot reshape f32[2] to f32[3]");
  EXPECT_ERROR(graph_broadcast(g, b, (GraphShape){2, {3, 2}}),
               "broadcast: cannot broadcast f32[3] to f32[3,2]");
  EXPECT_ERROR(graph_slice(g, a, (const int64_t[]){1}, (const int64_t[]){3}, NULL),
               "slice: axis 0");
  EXPECT_ERROR(graph_gather(g, a, a), "gather: the table f32[2] must be [V, D]");
  EXPECT_ERROR(graph_dot(g, a, b, false, false), "dot: needs two float operands of rank >= 2");
  EXPECT_ERROR(graph_unary(g, GRAPH_OP_EXP, idx), "exp: needs a float input, got i32[2]");
  EXPECT_ERROR(graph_binary(g, GRAPH_OP_NEG, a, a), "neg is not an op with 2 inputs");
  EXPECT_ERROR(graph_reduce(g, GRAPH_OP_REDUCE_SUM, a, 2u), "reduce_sum: an axis is outside");
  EXPECT_ERROR(graph_permute(g, a, (const int[]){1}), "permute: perm is not a permutation");
  EXPECT_ERROR(graph_select(g, a, a, a), "select: the condition f32[2] must be i32");
  EXPECT_ERROR(graph_concat(g, (const GraphId[]){a, idx}, 2, 0),
               "concat: f32[2] and i32[2] do not join");
  EXPECT_ERROR(graph_pad(g, a, (const int64_t[]){-1}, (const int64_t[]){0}, NULL, 0),
               "pad: axis 0");
  EXPECT_ERROR(graph_iota(g, GRAPH_F32, vec(2), 1), "iota: axis 1 is outside rank 1");
  EXPECT_ERROR(graph_random(g, a, GRAPH_F32, vec(2), 1),
               "random: the offset must be an i32 scalar");
  EXPECT_ERROR(graph_input(g, "a", GRAPH_F32, vec(2)), "input: the name 'a' is already used");
  EXPECT_ERROR(graph_param(g, "p", GRAPH_F32, (GraphShape){2, {2, 0}}),
               "param: dimension 1 has size 0");
  EXPECT_ERROR(graph_scatter_add(g, a, idx, 4), "scatter_add: updates f32[2] must be [..., D]");
#undef EXPECT_ERROR
  CHECK(!graph_update(g, a, graph_unary(g, GRAPH_OP_NEG, a))); /* an input is not updatable */
  CHECK(graph_count(g) == count + 1);
  graph_free(g);
}

/* Scopes: new nodes take the current one, copies keep theirs; DOT with
 * layers nests the boxes as the paths do, with each node in its own box,
 * and with groups fills a group's nodes alike. */
static void dot_layers(void) {
  Graph *g = graph_new();
  GraphId x = graph_input(g, "x", GRAPH_F32, (GraphShape){1, {4}});
  graph_set_scope(g, "enc.0.attn");
  GraphId a = graph_unary(g, GRAPH_OP_EXP, x);
  graph_set_scope(g, "enc.0");
  GraphId b = graph_unary(g, GRAPH_OP_NEG, a);
  graph_set_scope(g, NULL);
  GraphId c = graph_binary(g, GRAPH_OP_ADD, a, b);
  graph_output(g, "y", c);
  CHECK(strcmp(graph_node(g, a)->scope, "enc.0.attn") == 0);
  CHECK(graph_node(g, c)->scope == NULL);
  Graph *copy = graph_new();
  GraphId xc = graph_copy_node(copy, g, x, NULL);
  GraphId ac = graph_copy_node(copy, g, a, &xc);
  CHECK(graph_node(copy, ac)->scope && strcmp(graph_node(copy, ac)->scope, "enc.0.attn") == 0);
  CHECK(graph_current_scope(copy) == NULL); /* a copy leaves the current scope alone */
  graph_free(copy);

  char *plain = graph_to_dot(g, NULL);
  CHECK(plain && !strstr(plain, "subgraph"));
  char *dot = graph_to_dot(g, &(GraphDotStyle){.layers = true});
  const char *enc = dot ? strstr(dot, "subgraph cluster_0 {\n    label=\"enc\";") : NULL;
  const char *enc0 = enc ? strstr(enc, "subgraph cluster_1 {\n      label=\"enc.0\";") : NULL;
  const char *attn = enc0 ? strstr(enc0, "subgraph cluster_2 {\n        label=\"enc.0.attn\";") : NULL;
  if (!CHECK(enc && enc0 && attn)) fprintf(stderr, "--- dot:\n%s", dot ? dot : "(null)");
  CHECK(attn && strstr(attn, "n1 [label=\"%1 = exp %0"));  /* inside the innermost box */
  CHECK(enc0 && attn && strstr(enc0, "n2 [label=\"%2 = neg %1") < attn);
  CHECK(dot && enc && strstr(dot, "n3 [label=\"%3 = add") < enc); /* outside every box */
  int group[4] = {-1, 0, 0, 1};
  bool root[4] = {false, false, true, true};
  char *fused = graph_to_dot(g, &(GraphDotStyle){.group = group, .group_root = root,
                                                   .group_name = "kernel"});
  CHECK(fused && strstr(fused, "%1 = exp %0\\nf32[4]\\nkernel 0\", style=filled, fillcolor=\"#fde2a8\"];"));
  CHECK(fused && strstr(fused, "kernel 0\", style=filled, fillcolor=\"#fde2a8\", penwidth=2.5];"));
  CHECK(fused && strstr(fused, "kernel 1\", style=filled, fillcolor=\"#b9e3c6\", penwidth=2.5];"));
  free(plain);
  free(dot);
  free(fused);
  graph_free(g);
}

int main(void) {
  round_trip();
  dot_layers();
  loose_input();
  parse_errors();
  builder_errors();
  return test_finish("text");
}
