/* The sampler on fixed logits: greedy is the argmax; temperature 0 and
 * top-k 1 are greedy; top-k and top-p keep exactly the right sets with the
 * right renormalised probabilities; a seed reproduces a run; draws follow
 * the distribution. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "sample.h"

#define LN2 0.69314718055994530942

/* p = softmax: 0.5, 0.25, 0.125, 0.0625, 0.0625 (ids 3, 0, 4, 1, 2). */
static const float L[5] = {(float)LN2 * 3, (float)LN2 * 1, (float)LN2 * 1, (float)LN2 * 4,
                           (float)LN2 * 2};

static size_t kept(tfm_sampling s, int32_t *ids, double *p) {
  return tfm_sample_candidates(L, 5, &s, ids, p);
}

int main(void) {
  int32_t ids[5];
  double p[5];
  uint64_t rng = 1;
  /* Greedy: temperature 0, or top-k 1 at any temperature. */
  CHECK(kept((tfm_sampling){0, 0, 1}, ids, p) == 1 && ids[0] == 3 && p[0] == 1);
  CHECK(kept((tfm_sampling){2.0, 1, 1}, ids, p) == 1 && ids[0] == 3);
  for (int i = 0; i < 50; i++) {
    CHECK(tfm_sample(L, 5, &(tfm_sampling){0, 0, 1}, &rng) == 3);
    CHECK(tfm_sample(L, 5, &(tfm_sampling){1.5, 1, 0.9}, &rng) == 3);
  }
  /* A tie goes to the smaller id, as greedy decoding always did. */
  const float tie[3] = {1, 5, 5};
  CHECK(tfm_sample(tie, 3, &(tfm_sampling){0, 0, 1}, &rng) == 1);
  /* Everything, most likely first, ties by id. */
  CHECK(kept((tfm_sampling){1, 0, 1}, ids, p) == 5);
  CHECK(ids[0] == 3 && ids[1] == 0 && ids[2] == 4 && ids[3] == 1 && ids[4] == 2);
  CHECK(fabs(p[0] - 0.5) < 1e-6 && fabs(p[1] - 0.25) < 1e-6 && fabs(p[4] - 0.0625) < 1e-6);
  /* top-k 2: ids 3 and 0, renormalised to 2/3 and 1/3. */
  CHECK(kept((tfm_sampling){1, 2, 1}, ids, p) == 2 && ids[0] == 3 && ids[1] == 0);
  CHECK(fabs(p[0] - 2.0 / 3) < 1e-9 && fabs(p[1] - 1.0 / 3) < 1e-9);
  /* top-p: the smallest prefix reaching p. 0.5 -> {3}; 0.6 -> {3, 0};
   * 0.75 -> {3, 0} (exactly reached); 0.8 -> {3, 0, 4}; 1 -> all. */
  CHECK(kept((tfm_sampling){1, 0, 0.5}, ids, p) == 1 && ids[0] == 3);
  CHECK(kept((tfm_sampling){1, 0, 0.6}, ids, p) == 2);
  CHECK(kept((tfm_sampling){1, 0, 0.75}, ids, p) == 2);
  CHECK(kept((tfm_sampling){1, 0, 0.8}, ids, p) == 3 && ids[2] == 4);
  CHECK(fabs(p[0] - 0.5 / 0.875) < 1e-9 && fabs(p[2] - 0.125 / 0.875) < 1e-9);
  /* top-k then top-p: k 2 gives {2/3, 1/3}; p 0.5 keeps id 3 alone. */
  CHECK(kept((tfm_sampling){1, 2, 0.5}, ids, p) == 1 && ids[0] == 3);
  /* Temperature 2 flattens: p proportional to sqrt of the T=1 ones. */
  CHECK(kept((tfm_sampling){2, 0, 1}, ids, p) == 5);
  CHECK(fabs(p[0] / p[1] - sqrt(2.0)) < 1e-6);
  /* A seed reproduces the draws; another seed gives others. */
  int32_t a[64], b[64], c[64];
  uint64_t ra = 7, rb = 7, rc = 8;
  tfm_sampling s = {1, 0, 1};
  for (int i = 0; i < 64; i++) {
    a[i] = tfm_sample(L, 5, &s, &ra);
    b[i] = tfm_sample(L, 5, &s, &rb);
    c[i] = tfm_sample(L, 5, &s, &rc);
  }
  CHECK(!memcmp(a, b, sizeof a) && memcmp(a, c, sizeof a));
  /* Frequencies follow the distribution; top-k/top-p never leave the set. */
  int count[5] = {0}, outside = 0;
  enum { N = 40000 };
  for (int i = 0; i < N; i++) count[tfm_sample(L, 5, &s, &ra)]++;
  CHECK(fabs(count[3] / (double)N - 0.5) < 0.015 && fabs(count[0] / (double)N - 0.25) < 0.015);
  CHECK(fabs(count[2] / (double)N - 0.0625) < 0.01);
  for (int i = 0; i < N; i++) {
    int32_t k = tfm_sample(L, 5, &(tfm_sampling){1, 2, 1}, &ra);
    int32_t q = tfm_sample(L, 5, &(tfm_sampling){1, 0, 0.8}, &ra);
    outside += !(k == 3 || k == 0) + !(q == 3 || q == 0 || q == 4);
  }
  CHECK(outside == 0);
  for (int i = 0; i < 1000; i++) {
    double u = tfm_sample_uniform(&ra);
    CHECK(u >= 0 && u < 1);
  }
  return check_result("sample");
}
