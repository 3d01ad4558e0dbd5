/* Philox 4x32-10 against the Random123 known-answer vectors, and the
 * determinism of random nodes (same counter -> same bits). */
#include <stdio.h>

#include "eval.h"
#include "graph.h"
#include "philox.h"
#include "testutil.h"

/* Random123 tests/kat_vectors, the three "philox4x32 10" lines. */
static void known_answers(void) {
  static const struct {
    uint32_t counter[4], key[2], expected[4];
  } cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    uint32_t out[4];
    philox4x32_10(cases[c].counter, cases[c].key, out);
    for (int i = 0; i < 4; i++) CHECK(out[i] == cases[c].expected[i]);
  }
}

/* Element i is word i % 4 of block i / 4, counter (block, 0, stream, offset). */
static void element_layout(void) {
  uint64_t seed = 0x0123456789abcdefull;
  uint32_t key[2] = {0x89abcdef, 0x01234567};
  uint32_t counter[4] = {2, 0, 7, 11}, words[4];
  philox4x32_10(counter, key, words);
  for (int w = 0; w < 4; w++) {
    double expected = (double)(words[w] >> 8) / 16777216.0;
    CHECK(philox_uniform(seed, 7, 11, (uint64_t)(8 + w)) == expected);
  }
}

static GraphShape shape2(int64_t a, int64_t b) { return (GraphShape){2, {a, b}}; }

static void random_nodes(void) {
  Graph *g = graph_new();
  GraphId step = graph_input(g, "step", GRAPH_I32, graph_shape_scalar());
  GraphId r0 = graph_random(g, step, GRAPH_F32, shape2(5, 7), 42);
  GraphId r1 = graph_random(g, step, GRAPH_F32, shape2(5, 7), 42);
  GraphId copy = graph_copy_node(g, g, r0, &step); /* what autodiff does */
  CHECK(graph_node(g, r0)->attrs.stream != graph_node(g, r1)->attrs.stream);
  CHECK(graph_node(g, copy)->attrs.stream == graph_node(g, r0)->attrs.stream);

  EvalValues *a = eval_new(g, GRAPH_F32), *b = eval_new(g, GRAPH_F64);
  eval_set(a, step, 0, 3);
  eval_set(b, step, 0, 3);
  eval_run(a);
  eval_run(a); /* a second run gives the same bits */
  eval_run(b);
  int differ_stream = 0, in_range = 0;
  for (int64_t i = 0; i < 35; i++) {
    double x = eval_get(a, r0, i);
    in_range += x >= 0.0 && x < 1.0;
    CHECK(x == eval_get(b, r0, i));    /* f32 and f64 see the same values */
    CHECK(x == eval_get(a, copy, i));  /* same counter, same bits */
    CHECK(x == philox_uniform(42, graph_node(g, r0)->attrs.stream, 3, (uint64_t)i));
    differ_stream += x != eval_get(a, r1, i);
  }
  CHECK(in_range == 35);
  CHECK(differ_stream >= 34);

  /* Another step (offset) gives another mask. */
  double before = eval_get(a, r0, 0);
  eval_set(a, step, 0, 4);
  eval_run(a);
  int differ_step = 0;
  for (int64_t i = 0; i < 35; i++) differ_step += eval_get(a, r0, i) != eval_get(b, r0, i);
  CHECK(differ_step >= 34);
  CHECK(before == eval_get(b, r0, 0));
  eval_free(a);
  eval_free(b);
  graph_free(g);
}

/* The mean of many uniforms is near 1/2 (a sanity check on the scaling). */
static void rough_distribution(void) {
  double sum = 0;
  int n = 100000;
  for (int i = 0; i < n; i++) sum += philox_uniform(1, 0, 0, (uint64_t)i);
  CHECK_NEAR(sum / n, 0.5, 0.01);
}

int main(void) {
  known_answers();
  element_layout();
  random_nodes();
  rough_distribution();
  return test_finish("philox");
}
