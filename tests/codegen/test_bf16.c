/* bf16 storage in compiled kernels: 2-byte buffers, loads widened to f32,
 * arithmetic and every accumulation in f32, one rounding to nearest even
 * (NaN kept NaN) per bf16 value.
 *
 * First the rounding itself, bit for bit, against an independent C
 * reference that picks the nearer of the two neighbouring bf16 values by
 * comparing distances (ties to the even one) rather than by the
 * add-0x7fff trick the compiler and the evaluator use: ties, the values
 * next to ties, signed zeros, subnormals, the overflow to infinity,
 * infinities, quiet and signalling NaNs, and random bit patterns; compiled
 * for a CPU without AVX512-BF16 (the kernels' integer rounding) and for
 * this one (on AVX512-BF16, vcvtneps2bf16, which flushes f32 subnormals to
 * zero, so there all patterns but those). Then
 * bf16 graphs (elementwise chains, row and column reductions, dots with k
 * across the GEMM's k blocks) compiled against the evaluator, which rounds
 * at the same points. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define SHAPE(...) ((GraphShape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* The value of bf16 bits h for measuring distances: the pattern after the
 * largest finite value (infinity) counts as 2^128, the next step of the
 * grid, as IEEE rounding does. */
static double grid_value(uint32_t h) {
  if ((h & 0x7fffu) == 0x7f80u)
    return (h & 0x8000u) ? -ldexp(1.0, 128) : ldexp(1.0, 128);
  return (double)from_bits(h << 16);
}

static uint16_t reference_bf16(uint32_t u) {
  float f = from_bits(u);
  if (isnan(f))
    return (uint16_t)((u >> 16) | 0x0040u);
  uint32_t low = u >> 16; /* toward zero */
  if ((u & 0xffffu) == 0)
    return (uint16_t)low;
  uint32_t high = low + 1; /* the next one away from zero */
  double dl = fabs((double)f - grid_value(low)), dh = fabs(grid_value(high) - (double)f);
  if (dl < dh)
    return (uint16_t)low;
  if (dh < dl)
    return (uint16_t)high;
  return (uint16_t)((low & 1u) ? high : low);
}

static const uint32_t special[] = {
    0x00000000u, 0x80000000u,             /* +-0 */
    0x3f800000u, 0x3f808000u, 0x3f818000u, /* 1, the tie above 1 (to even: 1), a tie up */
    0x3f807fffu, 0x3f808001u, 0xbf808000u, 0xbf818000u,
    0x3f80ffffu, 0x3fffffffu, 0x4effffffu,
    0x00000001u, 0x00008000u, 0x00018000u, /* subnormals: tiny, ties to even */
    0x00007fffu, 0x00008001u, 0x007fffffu, 0x80008000u, 0x80018000u, 0x807fffffu,
    0x00800000u, 0x007f8000u,             /* smallest normal, a tie up to it */
    0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, /* to infinity, the tie (odd: up), just below */
    0xff7fffffu, 0xff7f8000u,
    0x7f800000u, 0xff800000u,             /* infinities */
    0x7fc00000u, 0xffc00000u,             /* quiet NaNs */
    0x7f800001u, 0xff800001u, 0x7f80ffffu, /* signalling NaNs whose payload is all low */
    0x7fbfffffu, 0x7fc0ffffu,
};
#define NUM_SPECIAL ((int)(sizeof special / sizeof special[0]))
#define NUM_BITS 4096

static uint32_t patterns[NUM_BITS];
static bool reference_ok; /* the reference on cases worked by hand */

static void make_patterns(void) {
  uint64_t state = 0x62663136;
  for (int i = 0; i < NUM_BITS; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t r = (uint32_t)(state >> 32);
    /* Every fourth pattern is a tie or next to one. */
    if (i % 4 == 1)
      r = (r & 0xffff0000u) | 0x8000u;
    else if (i % 4 == 2)
      r = (r & 0xffff0000u) | ((r & 1) ? 0x7fffu : 0x8001u);
    patterns[i] = i < NUM_SPECIAL ? special[i] : r;
  }
}

static void set_bits(EvalValues *ref, GraphId id, const uint32_t *bits, int count) {
  float *data = eval_tensor(ref, id)->data;
  for (int i = 0; i < count; i++)
    data[i] = from_bits(bits[i]);
}

/* The evaluator's rounding against the reference, bit for bit. */
static void evaluator_rounding(void) {
  int bad = 0;
  for (int i = 0; i < NUM_BITS; i++) {
    uint32_t got = bits_of(eval_bf16_round(from_bits(patterns[i])));
    uint16_t want = reference_bf16(patterns[i]);
    if ((got & 0xffffu) != 0 || (got >> 16) != want) {
      if (bad++ < 5)
        fprintf(stderr, "eval_bf16_round(0x%08x) = 0x%08x, reference 0x%04x0000\n", patterns[i],
                got, want);
    }
  }
  /* The reference itself, on cases worked by hand. */
  reference_ok = reference_bf16(0x3f808000u) == 0x3f80u && reference_bf16(0x3f818000u) == 0x3f82u &&
           reference_bf16(0x7f7fffffu) == 0x7f80u && reference_bf16(0x00008000u) == 0x0000u &&
           reference_bf16(0x7f800001u) == 0x7fc0u && reference_bf16(0x80018000u) == 0x8002u;
  CG_CHECK(reference_ok);
  CG_CHECK(bad == 0);
  printf("%s  evaluator's bf16 rounding, %d patterns, bit for bit\n", bad ? "FAIL" : "ok  ",
         NUM_BITS);
}

static Graph *rounding_graph(GraphId *x, GraphId *y) {
  Graph *g = graph_new();
  *x = graph_input(g, "x", GRAPH_F32, SHAPE(NUM_BITS));
  *y = graph_input(g, "y", GRAPH_BF16, SHAPE(NUM_BITS));
  graph_output(g, "narrow", graph_cast(g, *x, GRAPH_BF16));
  graph_output(g, "widen", graph_cast(g, *y, GRAPH_F32));
  /* f32 arithmetic on widened values, rounded once: y * 1.5 + y. */
  GraphId scaled = graph_binary(g, GRAPH_OP_MUL, *y, graph_splat(g, GRAPH_BF16, SHAPE(NUM_BITS), 1.5));
  graph_output(g, "arith", graph_binary(g, GRAPH_OP_ADD, scaled, *y));
  return g;
}

static bool is_subnormal(uint32_t u) { return (u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0; }

/* Compiled narrowing, widening and arithmetic, bit for bit (tolerance 0
 * makes the harness compare bf16 buffers by their bits), with the
 * evaluator's narrowing checked against the reference on the same run;
 * for `cpu` (NULL: native). With normal_only, each subnormal pattern is
 * made normal first (its exponent's lowest bit set): on a CPU with
 * AVX512-BF16 the kernels round with vcvtneps2bf16 (cpu/bf16_convert.c),
 * which reads an f32 subnormal as zero where the evaluator rounds it. */
static void compiled_rounding(const char *cpu, bool normal_only) {
  uint32_t xs[NUM_BITS], ys[NUM_BITS];
  for (int i = 0; i < NUM_BITS; i++)
    xs[i] = normal_only && is_subnormal(patterns[i]) ? patterns[i] | 0x00800000u : patterns[i];
  GraphId x, y;
  Graph *g = rounding_graph(&x, &y);
  EvalValues *ref = cg_reference(g, GRAPH_F32, 7);
  set_bits(ref, x, xs, NUM_BITS);
  for (int i = 0; i < NUM_BITS; i++)
    ys[i] = (uint32_t)reference_bf16(xs[(i * 7) % NUM_BITS]) << 16;
  set_bits(ref, y, ys, NUM_BITS);
  CgRunOptions options = {.steps = 1, .tolerance = 0, .cpu = cpu};
  char name[96];
  snprintf(name, sizeof name, "bf16 narrow, widen, arithmetic (bits), %s%s", cpu ? cpu : "native",
           normal_only ? ", subnormals made normal" : "");
  cg_run(name, g, ref, &options);
  GraphId narrow = graph_find_output(g, "narrow");
  int bad = 0;
  for (int i = 0; i < NUM_BITS; i++)
    if (bits_of((float)eval_get(ref, narrow, i)) >> 16 != reference_bf16(xs[i]))
      bad++;
  CG_CHECK(bad == 0);
  eval_free(ref);
  graph_free(g);
}

/* Small integers: products and sums of a few hundred are exact in f32, so
 * any order of summation gives the same f32 and the one rounding to bf16
 * is the same bits; a sum rounded to bf16 on the way (after the pair
 * families' k block of 2048: the 5 x 40 x 2100 case) would lose the
 * integers above 256. */
static void fill_integers(const Graph *g, EvalValues *ref) {
  uint64_t state = 5;
  for (GraphId id = 0; id < graph_count(g); id++)
    if (graph_node(g, id)->op == GRAPH_OP_INPUT) {
      cg_fill(ref, id, -4, 5, &state);
      EvalTensor *t = eval_tensor(ref, id);
      for (int64_t i = 0; i < t->numel; i++)
        eval_tensor_set(t, i, floor(eval_tensor_get(t, i)));
    }
}

static void dots(void) {
  struct {
    int64_t batch, m, n, k;
    bool ta, tb, shared_b;
  } cases[] = {
      {0, 37, 45, 600, false, false, false}, {0, 37, 45, 600, true, false, false},
      {0, 37, 45, 600, false, true, false},  {0, 13, 70, 300, true, true, false},
      {3, 20, 33, 70, false, false, true},   {2, 19, 23, 530, false, true, false},
      {0, 1, 300, 17, false, false, false},  {0, 5, 40, 2100, false, false, false},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    Graph *g = graph_new();
    int64_t m = cases[c].m, n = cases[c].n, k = cases[c].k, bt = cases[c].batch;
    GraphShape sa = cases[c].ta ? SHAPE(k, m) : SHAPE(m, k);
    GraphShape sb = cases[c].tb ? SHAPE(n, k) : SHAPE(k, n);
    if (bt) {
      sa = cases[c].ta ? SHAPE(bt, k, m) : SHAPE(bt, m, k);
      if (!cases[c].shared_b)
        sb = cases[c].tb ? SHAPE(bt, n, k) : SHAPE(bt, k, n);
    }
    GraphId a = graph_input(g, "a", GRAPH_BF16, sa), b = graph_input(g, "b", GRAPH_BF16, sb);
    graph_output(g, "c", graph_dot(g, a, b, cases[c].ta, cases[c].tb));
    char name[96];
    snprintf(name, sizeof name, "bf16 dot batch %lld, %lld x %lld x %lld%s%s%s", (long long)bt,
             (long long)m, (long long)n, (long long)k, cases[c].ta ? " ta" : "",
             cases[c].tb ? " tb" : "", cases[c].shared_b ? " shared B" : "");
    EvalValues *ref = cg_reference(g, GRAPH_F32, 3);
    fill_integers(g, ref);
    CgRunOptions options = {.steps = 1, .tolerance = 0};
    cg_run(name, g, ref, &options);
    eval_free(ref);
    graph_free(g);
  }
}

/* Row reductions (hoisted into their consumer), a column reduction over
 * more than one stretch of stack accumulators, and a chain: integer inputs
 * keep them exact, so bits must agree. */
static void reductions(void) {
  Graph *g = graph_new();
  GraphId x = graph_input(g, "x", GRAPH_BF16, SHAPE(7, 300));
  GraphId rows = graph_reduce(g, GRAPH_OP_REDUCE_SUM, x, 2u);
  graph_output(g, "row sums", rows);
  graph_output(g, "column sums", graph_reduce(g, GRAPH_OP_REDUCE_SUM, x, 1u));
  graph_output(g, "row max", graph_reduce(g, GRAPH_OP_REDUCE_MAX, x, 2u));
  GraphId centred = graph_binary(g, GRAPH_OP_SUB, x, graph_broadcast(g, rows, SHAPE(7, 300)));
  graph_output(g, "x - row sum", graph_binary(g, GRAPH_OP_MUL, centred, centred));
  GraphId big = graph_input(g, "big", GRAPH_BF16, SHAPE(64, 3, 520));
  graph_output(g, "bias gradient", graph_reduce(g, GRAPH_OP_REDUCE_SUM, big, 3u));
  EvalValues *ref = cg_reference(g, GRAPH_F32, 4);
  fill_integers(g, ref);
  CgRunOptions options = {.steps = 1, .tolerance = 0};
  cg_run("bf16 reductions (bits)", g, ref, &options);
  eval_free(ref);
  graph_free(g);
}

/* Transcendentals: the CPU's exp is an inline polynomial (within 1 ulp of
 * libm's f32), so a value next to a bf16 rounding boundary may round the
 * other way: one bf16 ulp, 2^-7 relative at most. A softmax row in bf16
 * with f32 statistics, as the --dtype bf16 pass builds it. */
static void softmax(void) {
  Graph *g = graph_new();
  GraphShape s = SHAPE(6, 130);
  GraphId x = graph_input(g, "x", GRAPH_BF16, s);
  GraphId wide = graph_cast(g, x, GRAPH_F32);
  GraphId max = graph_cast(g, graph_reduce(g, GRAPH_OP_REDUCE_MAX, wide, 2u), GRAPH_BF16);
  GraphId e = graph_unary(g, GRAPH_OP_EXP, graph_binary(g, GRAPH_OP_SUB, x, graph_broadcast(g, max, s)));
  GraphId sum = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_cast(g, e, GRAPH_F32), 2u);
  GraphId p = graph_binary(g, GRAPH_OP_DIV, e, graph_broadcast(g, graph_cast(g, sum, GRAPH_BF16), s));
  graph_output(g, "softmax", p);
  graph_output(g, "tanh", graph_unary(g, GRAPH_OP_TANH, x));
  EvalValues *ref = cg_reference(g, GRAPH_F32, 8);
  CgRunOptions options = {.steps = 1, .tolerance = 1.0 / 128};
  cg_run("bf16 softmax, tanh (one bf16 ulp)", g, ref, &options);
  eval_free(ref);
  graph_free(g);
}

/* Fused attention over bf16 values (q, k, v and do casts of bf16 inputs,
 * as `--dtype bf16` lowers gpt): on a GPU the tensor-core kernels
 * (ptx/attention_mma.c: mma.sync bf16, 16 rows a warp), elsewhere the f32
 * kernels. o, lse and the three gradients against the evaluator's f32,
 * each tensor to 1e-5 of its 2-norm: the GPU's products take p and ds as
 * two bf16 parts (2^-18 relative) and sum in another order (measured on
 * the PTX simulator: up to 2.9e-6; with p rounded once to bf16, as
 * FlashAttention does, 1.8e-3). Sizes: not multiples of the 16-row
 * blocks, heads of 64 (gpt's) and of 40 and 24 (fragments and C tiles
 * cut short), causal and not, T != S, more rows than a launch block
 * takes, more keys than the AMX forward's chunk of 256 (attention_amx.c);
 * `grads` picks which of dq, dk, dv
 * (bits 0, 1, 2) are outputs, so grad_k and grad_v also run alone.
 * `padding` adds a padding mask [B, 1, .., S] (the AMX kernels take it;
 * the GPU's keep their f32 kernels for it): random finite values, and
 * -inf on batch b's last b + 1 keys (PAD_LAST) or on every key of batch 1
 * (PAD_ALL: its rows see no key: lse = -inf, compared as -1000, o and the
 * gradients 0). */
enum { PAD_NONE, PAD_LAST, PAD_ALL };

static void fill_padding(const Graph *g, GraphId mask, int padding, EvalValues *ref) {
  const GraphShape *m = &graph_node(g, mask)->shape;
  int64_t s = m->dims[m->rank - 1], n = graph_shape_numel(m);
  for (int64_t e = 0; e < n; e++) {
    int64_t j = e % s, b = e / s;
    if ((padding == PAD_LAST && j >= s - 1 - b) || (padding == PAD_ALL && b == 1))
      eval_set(ref, mask, e, -INFINITY);
  }
}

static void attention_case(const char *name, GraphShape batch, int64_t t, int64_t s, int64_t d,
                           int64_t dv, bool causal, unsigned grads, int padding) {
  Graph *g = graph_new();
  GraphShape qs = batch, ks = batch, vs = batch, os = batch;
  int r = batch.rank + 2;
  qs.rank = ks.rank = vs.rank = os.rank = r;
  qs.dims[r - 2] = os.dims[r - 2] = t;
  ks.dims[r - 2] = vs.dims[r - 2] = s;
  qs.dims[r - 1] = ks.dims[r - 1] = d;
  vs.dims[r - 1] = os.dims[r - 1] = dv;
  GraphId q = graph_cast(g, graph_input(g, "q", GRAPH_BF16, qs), GRAPH_F32);
  GraphId k = graph_cast(g, graph_input(g, "k", GRAPH_BF16, ks), GRAPH_F32);
  GraphId v = graph_cast(g, graph_input(g, "v", GRAPH_BF16, vs), GRAPH_F32);
  GraphId d_o = graph_cast(g, graph_input(g, "do", GRAPH_BF16, os), GRAPH_F32);
  GraphId mask = GRAPH_NONE;
  if (padding != PAD_NONE) {
    GraphShape ms = {r, {0}};
    for (int i = 0; i < r; i++) ms.dims[i] = 1;
    ms.dims[0] = batch.dims[0];
    ms.dims[r - 1] = s;
    mask = graph_input(g, "mask", GRAPH_F32, ms);
  }
  int masked = mask == GRAPH_NONE ? 0 : 1;
  double scale = 1.0 / sqrt((double)d);
  GraphId o = graph_attention(g, q, k, v, mask, scale, causal);
  GraphAttrs at = {.scale = scale, .causal = causal};
  GraphId lse = graph_add_node(g, GRAPH_OP_ATTENTION_LSE, (GraphId[]){q, k, mask}, 2 + masked, &at);
  GraphId delta = graph_reduce(g, GRAPH_OP_REDUCE_SUM, graph_binary(g, GRAPH_OP_MUL, d_o, o),
                               1u << (r - 1));
  GraphId grad_in[7] = {q, k, v, d_o, lse, delta, mask};
  graph_output(g, "o", o);
  /* the 2-norm of a tensor with -inf is NaN */
  GraphShape ls = graph_node(g, lse)->shape;
  GraphId empty = graph_binary(g, GRAPH_OP_CMPEQ, lse, graph_splat(g, GRAPH_F32, ls, -INFINITY));
  graph_output(g, "lse", graph_select(g, empty, graph_splat(g, GRAPH_F32, ls, -1000.0), lse));
  const GraphOp ops[3] = {GRAPH_OP_ATTENTION_GRAD_Q, GRAPH_OP_ATTENTION_GRAD_K,
                          GRAPH_OP_ATTENTION_GRAD_V};
  const char *names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; i++)
    if (grads & (1u << i))
      graph_output(g, names[i], graph_add_node(g, ops[i], grad_in, 6 + masked, &at));
  if (!CG_CHECK(graph_error(g) == NULL)) {
    fprintf(stderr, "%s: %s\n", name, graph_error(g));
    graph_free(g);
    return;
  }
  EvalValues *ref = cg_reference(g, GRAPH_F32, 11);
  if (mask != GRAPH_NONE) fill_padding(g, mask, padding, ref);
  CgRunOptions options = {.steps = 1, .tolerance = 1e-5, .norm = true};
  cg_run(name, g, ref, &options);
  eval_free(ref);
  graph_free(g);
}

static void attention(void) {
  attention_case("bf16 attention causal, heads of 64", SHAPE(2, 2), 33, 33, 64, 64, true, 7, PAD_NONE);
  attention_case("bf16 attention T != S, heads of 40 and 24", SHAPE(3), 20, 37, 40, 24, false, 7, PAD_NONE);
  attention_case("bf16 attention gpt's 128 x 64, causal", SHAPE(1, 2), 128, 128, 64, 64, true, 7, PAD_NONE);
  attention_case("bf16 attention grad_k alone, causal", SHAPE(2), 21, 21, 64, 48, true, 2, PAD_NONE);
  attention_case("bf16 attention grad_v alone", SHAPE(2), 17, 30, 24, 64, false, 1 | 4, PAD_NONE);
  /* more rows than a launch block's 128: the second block's causal
   * bounds start and stop off the first's, and keys past 128 */
  attention_case("bf16 attention causal, 150 rows", SHAPE(2), 150, 150, 32, 64, true, 7, PAD_NONE);
  attention_case("bf16 attention 150 queries, 70 keys", SHAPE(1), 150, 70, 64, 40, false, 7, PAD_NONE);
  /* past 256 keys the AMX forward's softmax runs in chunks, rescaling
   * what the earlier chunks summed */
  attention_case("bf16 attention 20 queries, 300 keys", SHAPE(2), 20, 300, 64, 64, false, 7, PAD_NONE);
  attention_case("bf16 attention causal, 290 rows", SHAPE(1), 290, 290, 32, 48, true, 7, PAD_NONE);
  /* padding masks, one value a key: cross (T != S), causal, and a batch
   * whose every key is masked */
  attention_case("bf16 attention T != S, padding", SHAPE(2, 2), 20, 37, 64, 40, false, 7, PAD_LAST);
  attention_case("bf16 attention causal + padding", SHAPE(2, 2), 45, 45, 64, 64, true, 7, PAD_LAST);
  attention_case("bf16 attention padding hides a batch", SHAPE(2), 17, 33, 32, 32, false, 7, PAD_ALL);
}

int main(void) {
  cg_start("codegen_bf16");
  make_patterns();
  evaluator_rounding();
  /* The integer rounding (no AVX512-BF16 in x86-64-v4) on every pattern;
   * native code, on a CPU with AVX512-BF16, on all but the subnormals. */
  compiled_rounding("x86-64-v4", false);
  compiled_rounding(NULL, __builtin_cpu_supports("avx512bf16"));
  dots();
  reductions();
  softmax();
  attention();
  return cg_finish("codegen_bf16");
}
