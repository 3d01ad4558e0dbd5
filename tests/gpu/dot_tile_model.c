/* A CPU model of the tiled tensor-core dot (compiler/codegen/ptx/dot.c):
 * every thread of every block stages its share of the A and B tiles and
 * gathers its mma fragments with the formulas of ptx_dot_tile.h, as the
 * emitter does; mma.m16n8k8 itself is simulated from the PTX ISA's
 * fragment tables, written out independently of the header in
 * mma_fragments.h (which the PTX simulator shares). So a
 * wrong fragment or staging formula in the header gives a wrong C here.
 * Sizes are odd (edge tiles in m, n and k), with all four transposes and a
 * batch with a broadcast operand; results are checked against a naive
 * matmul of the tf32-rounded inputs, and against the unrounded one within
 * the tf32 bound docs/internals.md gives.
 *
 * The bf16 kernel (mma.m16n8k16 on bf16 tiles, B staged transposed) is
 * modelled the same way: staging and fragment formulas from the header,
 * mma.m16n8k16 simulated from the ISA's table (mma_fragments.h), and the
 * emitter's reading of each fragment register as one 32-bit word (its two
 * bf16 neighbours in shared memory) checked; C is compared with a naive
 * f32-accurate matmul of the bf16 inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "mma_fragments.h"
#include "ptx_dot_tile.h"

static int failures;

/* bf16 round to nearest even (the inputs here are finite). */
static float bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&x, &u, 4);
  return x;
}

#define TM (PTX_DOT_WARP_TILE / PTX_MMA_M)
#define TN (PTX_DOT_WARP_TILE / PTX_MMA_N)

typedef struct Dot {
  int64_t batch, m, n, k, batch_a, batch_b; /* batch_x: 0 for a broadcast operand */
  bool ta, tb;
} Dot;

/* How the emitter stages a block's k step: A as [BM][as_stride] (row,
 * k), B as [BK][bs_stride] (k, column) or, b_by_column, [BN][bs_stride]
 * (column, k); each value through `value` (tf32 rounding, or none for
 * bf16 inputs that are bf16 values already). */
typedef struct Staging {
  int64_t as_stride, bs_stride;
  bool b_by_column;
  float (*value)(float);
} Staging;

static float as_is(float x) { return x; }

/* Elements rounded as cvt.rna.tf32.f32 does, as the evaluator's reference
 * for GPU runs rounds them too. */
static const Staging TF32_STAGING = {PTX_DOT_AS_STRIDE, PTX_DOT_BS_STRIDE, false,
                                     eval_tf32_round};
static const Staging BF16_STAGING = {PTX_DOT16_AS_STRIDE, PTX_DOT16_BS_STRIDE, true, as_is};

/* One operand's staging loads, every thread's `steps` of them, by the
 * header's formulas: the operand spans `extent` along its other axis (m
 * for A, n for B) and k, stored with k contiguous (A as [m, k], B
 * transposed as [n, k]) or not; element (o, kk) of the block at o0 lands at
 * o * stride + kk when `o_major`, else kk * stride + o. */
static void stage_operand(int steps, int64_t inner, bool k_contiguous, int64_t o0, int64_t extent,
                          int64_t k, int64_t p0, int64_t base, const float *X, float *xs,
                          int64_t stride, bool o_major, float (*value)(float)) {
  for (int64_t tid = 0; tid < PTX_DOT_THREADS; tid++)
    for (int s = 0; s < steps; s++) {
      int64_t e = tid + (int64_t)s * PTX_DOT_THREADS, slow = e / inner, fast = e % inner;
      int64_t o = k_contiguous ? slow : fast, kk = k_contiguous ? fast : slow;
      int64_t go = o0 + o, gp = p0 + kk;
      bool ok = go < extent && gp < k;
      int64_t index = base + (k_contiguous ? go * k + gp : gp * extent + go);
      xs[o_major ? o * stride + kk : kk * stride + o] = ok ? value(X[index]) : 0.0f;
    }
}

/* Every thread's staging loads for the k step at p0 of the block at
 * (row0, col0). Cells no thread stages stay NaN, so reading one poisons C. */
static void stage(const Dot *d, const Staging *st, const float *A, const float *B, int64_t row0,
                  int64_t col0, int64_t p0, int64_t a_base, int64_t b_base, float *as,
                  size_t as_len, float *bs, size_t bs_len) {
  for (size_t i = 0; i < as_len; i++) as[i] = NAN;
  for (size_t i = 0; i < bs_len; i++) bs[i] = NAN;
  stage_operand(PTX_DOT_A_STEPS, ptx_dot_a_inner(d->ta), !d->ta, row0, d->m, d->k, p0, a_base, A,
                as, st->as_stride, true, st->value);
  stage_operand(PTX_DOT_B_STEPS, ptx_dot_b_inner(d->tb), d->tb, col0, d->n, d->k, p0, b_base, B,
                bs, st->bs_stride, st->b_by_column, st->value);
}

/* The emitter's kernel, thread by thread (its emit_tiled, stage, multiply). */
static void model(const Dot *d, const float *A, const float *B, float *C) {
  static float acc[PTX_DOT_THREADS][TM][TN][4];
  static float as[PTX_DOT_BM * PTX_DOT_AS_STRIDE], bs[PTX_DOT_BK * PTX_DOT_BS_STRIDE];
  int64_t tiles_n = ptx_dot_tiles(d->n, PTX_DOT_BN), tiles_m = ptx_dot_tiles(d->m, PTX_DOT_BM);
  int64_t blocks = d->batch * tiles_m * tiles_n;
  for (int64_t block = 0; block < blocks; block++) {
    int64_t col0 = block % tiles_n * PTX_DOT_BN, rest = block / tiles_n;
    int64_t row0 = rest % tiles_m * PTX_DOT_BM, batch = rest / tiles_m;
    int64_t a_base = batch * d->batch_a, b_base = batch * d->batch_b;
    memset(acc, 0, sizeof acc);
    for (int64_t step = 0; step < ptx_dot_tiles(d->k, PTX_DOT_BK); step++) {
      int64_t p0 = step * PTX_DOT_BK;
      stage(d, &TF32_STAGING, A, B, row0, col0, p0, a_base, b_base, as, sizeof as / sizeof *as, bs,
            sizeof bs / sizeof *bs);
      for (int64_t warp = 0; warp < PTX_DOT_THREADS / 32; warp++)
        for (int ks = 0; ks < PTX_DOT_BK; ks += PTX_MMA_K) {
          static float fa[TM][32][4], fb[TN][32][2], fc[32][4];
          for (int64_t lane = 0; lane < 32; lane++) {
            int64_t group = lane / PTX_MMA_GROUP, quad = lane % PTX_MMA_GROUP;
            for (int mi = 0; mi < TM; mi++)
              for (int i = 0; i < 4; i++) {
                int64_t r = ptx_dot_warp_row(warp) + group + mi * PTX_MMA_M + ptx_mma_a_row(i);
                int64_t kk = quad + ks + ptx_mma_a_col(i);
                fa[mi][lane][i] = as[r * PTX_DOT_AS_STRIDE + kk];
              }
            for (int ni = 0; ni < TN; ni++)
              for (int i = 0; i < 2; i++) {
                int64_t kk = quad + ks + ptx_mma_b_row(i);
                int64_t c = ptx_dot_warp_col(warp) + group + ni * PTX_MMA_N;
                fb[ni][lane][i] = bs[kk * PTX_DOT_BS_STRIDE + c];
              }
          }
          for (int mi = 0; mi < TM; mi++)
            for (int ni = 0; ni < TN; ni++) {
              for (int lane = 0; lane < 32; lane++)
                memcpy(fc[lane], acc[warp * 32 + lane][mi][ni], sizeof fc[lane]);
              tfm_mma_m16n8k8_tf32(fa[mi], fb[ni], fc);
              for (int lane = 0; lane < 32; lane++)
                memcpy(acc[warp * 32 + lane][mi][ni], fc[lane], sizeof fc[lane]);
            }
        }
    }
    for (int64_t tid = 0; tid < PTX_DOT_THREADS; tid++) {
      int64_t warp = tid / 32, lane = tid % 32;
      int64_t group = lane / PTX_MMA_GROUP, quad = lane % PTX_MMA_GROUP;
      for (int mi = 0; mi < TM; mi++)
        for (int ni = 0; ni < TN; ni++)
          for (int i = 0; i < 4; i++) {
            int64_t r = row0 + ptx_dot_warp_row(warp) + group + mi * PTX_MMA_M + ptx_mma_c_row(i);
            int64_t c = col0 + ptx_dot_warp_col(warp) + quad * 2 + ni * PTX_MMA_N + ptx_mma_c_col(i);
            if (r < d->m && c < d->n)
              C[batch * d->m * d->n + r * d->n + c] = acc[tid][mi][ni][i];
          }
    }
  }
}

/* The bf16 kernel, thread by thread: A and B (bf16 values) staged as the
 * emitter stages them (A [BM][BK], B [BN][BK]), fragments gathered by the
 * header's formulas, one mma16 per tile and step. */
static void model16(const Dot *d, const float *A, const float *B, float *C) {
  static float acc[PTX_DOT_THREADS][TM][TN][4];
  static float as[PTX_DOT_BM * PTX_DOT16_AS_STRIDE], bs[PTX_DOT_BN * PTX_DOT16_BS_STRIDE];
  int64_t tiles_n = ptx_dot_tiles(d->n, PTX_DOT_BN), tiles_m = ptx_dot_tiles(d->m, PTX_DOT_BM);
  int64_t blocks = d->batch * tiles_m * tiles_n;
  for (int64_t block = 0; block < blocks; block++) {
    int64_t col0 = block % tiles_n * PTX_DOT_BN, rest = block / tiles_n;
    int64_t row0 = rest % tiles_m * PTX_DOT_BM, batch = rest / tiles_m;
    int64_t a_base = batch * d->batch_a, b_base = batch * d->batch_b;
    memset(acc, 0, sizeof acc);
    for (int64_t step = 0; step < ptx_dot_tiles(d->k, PTX_DOT_BK); step++) {
      int64_t p0 = step * PTX_DOT_BK;
      stage(d, &BF16_STAGING, A, B, row0, col0, p0, a_base, b_base, as, sizeof as / sizeof *as, bs,
            sizeof bs / sizeof *bs);
      for (int64_t warp = 0; warp < PTX_DOT_THREADS / 32; warp++)
        for (int ks = 0; ks < PTX_DOT_BK; ks += PTX_MMA16_K) {
          static float fa[TM][32][8], fb[TN][32][4], fc[32][4];
          for (int64_t lane = 0; lane < 32; lane++) {
            int64_t group = lane / PTX_MMA_GROUP, quad = lane % PTX_MMA_GROUP;
            for (int mi = 0; mi < TM; mi++)
              for (int i = 0; i < 8; i++) {
                int64_t r = ptx_dot_warp_row(warp) + group + mi * PTX_MMA_M + ptx_mma16_a_row(i);
                int64_t kk = 2 * quad + ks + ptx_mma16_a_col(i);
                int64_t at = r * PTX_DOT16_AS_STRIDE + kk;
                /* The emitter loads elements 2r, 2r + 1 as the word at 2r. */
                int64_t r0 = ptx_dot_warp_row(warp) + group + mi * PTX_MMA_M + ptx_mma16_a_row(i & ~1);
                int64_t word = r0 * PTX_DOT16_AS_STRIDE + 2 * quad + ks + ptx_mma16_a_col(i & ~1);
                if (at != word + (i & 1) || word % 2 != 0) failures++;
                fa[mi][lane][i] = as[at];
              }
            for (int ni = 0; ni < TN; ni++)
              for (int i = 0; i < 4; i++) {
                int64_t kk = 2 * quad + ks + ptx_mma16_b_row(i);
                int64_t c = ptx_dot_warp_col(warp) + group + ni * PTX_MMA_N;
                int64_t at = c * PTX_DOT16_BS_STRIDE + kk;
                int64_t word = c * PTX_DOT16_BS_STRIDE + 2 * quad + ks + ptx_mma16_b_row(i & ~1);
                if (at != word + (i & 1) || word % 2 != 0) failures++;
                fb[ni][lane][i] = bs[at];
              }
          }
          for (int mi = 0; mi < TM; mi++)
            for (int ni = 0; ni < TN; ni++) {
              for (int lane = 0; lane < 32; lane++)
                memcpy(fc[lane], acc[warp * 32 + lane][mi][ni], sizeof fc[lane]);
              tfm_mma_m16n8k16_bf16(fa[mi], fb[ni], fc);
              for (int lane = 0; lane < 32; lane++)
                memcpy(acc[warp * 32 + lane][mi][ni], fc[lane], sizeof fc[lane]);
            }
        }
    }
    for (int64_t tid = 0; tid < PTX_DOT_THREADS; tid++) {
      int64_t warp = tid / 32, lane = tid % 32;
      int64_t group = lane / PTX_MMA_GROUP, quad = lane % PTX_MMA_GROUP;
      for (int mi = 0; mi < TM; mi++)
        for (int ni = 0; ni < TN; ni++)
          for (int i = 0; i < 4; i++) {
            int64_t r = row0 + ptx_dot_warp_row(warp) + group + mi * PTX_MMA_M + ptx_mma_c_row(i);
            int64_t c = col0 + ptx_dot_warp_col(warp) + quad * 2 + ni * PTX_MMA_N + ptx_mma_c_col(i);
            if (r < d->m && c < d->n)
              C[batch * d->m * d->n + r * d->n + c] = acc[tid][mi][ni][i];
          }
    }
  }
}

static float *values(int64_t count, unsigned *seed) {
  float *v = malloc(sizeof *v * (size_t)(count ? count : 1));
  for (int64_t i = 0; i < count; i++) {
    *seed = *seed * 1103515245u + 12345u;
    v[i] = (float)((*seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
  return v;
}

/* C of the model against naive sums in double: of the tf32-rounded inputs
 * (only f32 accumulation differs: 2^-20 of sum |a||b| is ample), and of the
 * inputs as given (each product is off by up to 2^-10 relative after
 * rounding both factors to tf32, so the bound is 2^-10 sum |a||b| plus the
 * accumulation's share). */
static void check(Dot d) {
  unsigned seed = (unsigned)(d.m * 131 + d.n * 17 + d.k + d.ta * 2 + d.tb);
  float *A = values((d.batch_a ? d.batch : 1) * d.m * d.k, &seed);
  float *B = values((d.batch_b ? d.batch : 1) * d.k * d.n, &seed);
  float *C = malloc(sizeof *C * (size_t)(d.batch * d.m * d.n));
  for (int64_t i = 0; i < d.batch * d.m * d.n; i++) C[i] = NAN;
  model(&d, A, B, C);
  double worst_rounded = 0, worst_exact = 0;
  for (int64_t b = 0; b < d.batch; b++)
    for (int64_t i = 0; i < d.m; i++)
      for (int64_t j = 0; j < d.n; j++) {
        double rounded = 0, exact = 0, magnitude = 0;
        for (int64_t p = 0; p < d.k; p++) {
          float a = A[b * d.batch_a + (d.ta ? p * d.m + i : i * d.k + p)];
          float x = B[b * d.batch_b + (d.tb ? j * d.k + p : p * d.n + j)];
          rounded += (double)eval_tf32_round(a) * eval_tf32_round(x);
          exact += (double)a * x;
          magnitude += fabs((double)a * x);
        }
        double got = C[b * d.m * d.n + i * d.n + j];
        double scale = magnitude > 0 ? magnitude : 1;
        double er = fabs(got - rounded) / scale, ee = fabs(got - exact) / scale;
        if (!(er <= ldexp(1, -20)) || !(ee <= ldexp(1, -10) + ldexp(1, -20))) {
          if (failures++ < 10)
            printf("FAIL: %lldx%lldx%lld batch %lld ta %d tb %d: C[%lld][%lld][%lld] = %g, want %g\n",
                   (long long)d.m, (long long)d.n, (long long)d.k, (long long)d.batch, d.ta, d.tb,
                   (long long)b, (long long)i, (long long)j, got, exact);
        }
        if (er > worst_rounded) worst_rounded = er;
        if (ee > worst_exact) worst_exact = ee;
      }
  printf("%lldx%lldx%lld batch %lld ta %d tb %d: worst error / sum|ab| %.3g (tf32 inputs), %.3g (f32 inputs)\n",
         (long long)d.m, (long long)d.n, (long long)d.k, (long long)d.batch, d.ta, d.tb,
         worst_rounded, worst_exact);
  free(A);
  free(B);
  free(C);
}

/* The bf16 kernel's f32 C (before its one rounding to bf16) against a
 * naive sum in double of the same bf16 inputs: only f32 accumulation
 * differs, 2^-20 of sum |a||b| is ample. */
static void check16(Dot d) {
  unsigned seed = (unsigned)(d.m * 71 + d.n * 13 + d.k + d.ta * 2 + d.tb);
  int64_t na = (d.batch_a ? d.batch : 1) * d.m * d.k, nb = (d.batch_b ? d.batch : 1) * d.k * d.n;
  float *A = values(na, &seed), *B = values(nb, &seed);
  for (int64_t i = 0; i < na; i++) A[i] = bf16(A[i]);
  for (int64_t i = 0; i < nb; i++) B[i] = bf16(B[i]);
  float *C = malloc(sizeof *C * (size_t)(d.batch * d.m * d.n));
  for (int64_t i = 0; i < d.batch * d.m * d.n; i++) C[i] = NAN;
  int before = failures;
  model16(&d, A, B, C);
  if (failures != before)
    printf("FAIL: bf16 %lldx%lldx%lld: a fragment register is not one word of shared memory\n",
           (long long)d.m, (long long)d.n, (long long)d.k);
  double worst = 0;
  for (int64_t b = 0; b < d.batch; b++)
    for (int64_t i = 0; i < d.m; i++)
      for (int64_t j = 0; j < d.n; j++) {
        double exact = 0, magnitude = 0;
        for (int64_t p = 0; p < d.k; p++) {
          float a = A[b * d.batch_a + (d.ta ? p * d.m + i : i * d.k + p)];
          float x = B[b * d.batch_b + (d.tb ? j * d.k + p : p * d.n + j)];
          exact += (double)a * x;
          magnitude += fabs((double)a * x);
        }
        double got = C[b * d.m * d.n + i * d.n + j];
        double e = fabs(got - exact) / (magnitude > 0 ? magnitude : 1);
        if (!(e <= ldexp(1, -20)) && failures++ < 10)
          printf("FAIL: bf16 %lldx%lldx%lld batch %lld ta %d tb %d: C[%lld][%lld][%lld] = %g, want %g\n",
                 (long long)d.m, (long long)d.n, (long long)d.k, (long long)d.batch, d.ta, d.tb,
                 (long long)b, (long long)i, (long long)j, got, exact);
        if (e > worst || e != e) worst = e;
      }
  printf("bf16 %lldx%lldx%lld batch %lld ta %d tb %d: worst error / sum|ab| %.3g\n", (long long)d.m,
         (long long)d.n, (long long)d.k, (long long)d.batch, d.ta, d.tb, worst);
  free(A);
  free(B);
  free(C);
}

int main(void) {
  /* m, n, k: single elements, exact tiles, and one past them in each. */
  static const int64_t sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {64, 128, 16}, {65, 129, 17}, {33, 300, 40}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int t = 0; t < 4; t++) {
      int64_t m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
      check((Dot){.batch = 1, .m = m, .n = n, .k = k, .batch_a = m * k, .batch_b = k * n,
                  .ta = t & 1, .tb = t >> 1});
    }
  /* A batch, B broadcast (a rank-2 weight), as attention's projections. */
  for (int t = 0; t < 4; t++)
    check((Dot){.batch = 3, .m = 70, .n = 9, .k = 20, .batch_a = 70 * 20, .batch_b = 0,
                .ta = t & 1, .tb = t >> 1});
  check((Dot){.batch = 2, .m = 3, .n = 130, .k = 5, .batch_a = 0, .batch_b = 5 * 130});
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int t = 0; t < 4; t++) {
      int64_t m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
      check16((Dot){.batch = 1, .m = m, .n = n, .k = k, .batch_a = m * k, .batch_b = k * n,
                    .ta = t & 1, .tb = t >> 1});
    }
  for (int t = 0; t < 4; t++)
    check16((Dot){.batch = 3, .m = 70, .n = 9, .k = 20, .batch_a = 70 * 20, .batch_b = 0,
                  .ta = t & 1, .tb = t >> 1});
  check16((Dot){.batch = 2, .m = 3, .n = 130, .k = 5, .batch_a = 0, .batch_b = 5 * 130});
  printf("%s: %s\n", "gpu.dot_tile_model", failures ? "FAILED" : "all checks passed");
  return failures != 0;
}
