/* Which generated CPU code runs, chosen once per process from CPUID and
 * the operating system's consent (XGETBV; for AMX, Linux's arch_prctl):
 *  - the family of bf16 products: AMX tiles, AVX512-BF16 pair dot
 *    products, or the f32 path (bf16 widened to f32 on AVX2/AVX-512F);
 *    forced by TFM_CPU_KERNELS; generated code asks tfm_cpu_kernels() at
 *    each bf16 GEMM call (a load after the first);
 *  - in a binary built with --cpu generic-dispatch, the variant of the
 *    whole program (x86-64-v3, x86-64-v4, v4 with AMX); forced by
 *    TFM_CPU_VARIANT; its graphs' entry points ask tfm_cpu_variant(). */
#define _GNU_SOURCE /* syscall */
#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tfmrt.h"

/* Linux's request for a dynamically enabled state component
 * (asm/prctl.h, Linux 5.16): AMX tile data is state component 18. */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static const char *const family_names[] = {"avx2", "avx512bf16", "amx"};

const char *tfm_cpu_kernels_name(int family) {
  return family >= 0 && family <= TFM_CPU_KERNELS_AMX ? family_names[family] : "?";
}

int tfm_cpu_kernels_from_name(const char *name) {
  for (int f = 0; f <= TFM_CPU_KERNELS_AMX; f++)
    if (strcmp(name, family_names[f]) == 0)
      return f;
  return -1;
}

/* XCR0: which register states the operating system saves. */
static uint64_t enabled_states(void) {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) /* OSXSAVE */
    return 0;
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t)hi << 32 | lo;
}

int tfm_cpu_kernels_supported(int family) {
  unsigned eax, ebx, ecx, edx;
  if (family == TFM_CPU_KERNELS_AVX2)
    return true; /* the widening path runs wherever the module itself runs */
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
    return false;
  bool avx512 = (ebx & (1u << 16)) && (ebx & (1u << 30)) && /* AVX512F, AVX512BW */
                (enabled_states() & 0xe6) == 0xe6;         /* SSE, AVX, opmask, ZMM */
  if (family == TFM_CPU_KERNELS_AMX)
    return avx512 && (edx & (1u << 24)) && (edx & (1u << 22)); /* AMX-TILE, AMX-BF16 */
  unsigned max_sub = eax;
  if (max_sub < 1 || !__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
    return false;
  return avx512 && (eax & (1u << 5)); /* AVX512_BF16 */
}

/* Asks Linux to let this process use the tile registers (refused by a
 * kernel older than 5.16 or by a signal stack too small for them). */
static bool request_tiles(char *why, size_t size) {
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0)
    return true;
  snprintf(why, size, "%s", strerror(errno));
  return false;
}

static int chosen = -1;
static int choose_status;
static char choose_error[256];
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose(void) {
  const char *forced = getenv("TFM_CPU_KERNELS");
  char why[128];
  if (forced && *forced) {
    int f = tfm_cpu_kernels_from_name(forced);
    if (f < 0) {
      snprintf(choose_error, sizeof choose_error,
               "TFM_CPU_KERNELS is \"%s\": expected amx, avx512bf16 or avx2", forced);
    } else if (!tfm_cpu_kernels_supported(f)) {
      snprintf(choose_error, sizeof choose_error,
               "TFM_CPU_KERNELS=%s: this CPU (or its operating system) has no %s", forced,
               f == TFM_CPU_KERNELS_AMX ? "AMX-BF16" : "AVX512-BF16");
    } else if (f == TFM_CPU_KERNELS_AMX && !request_tiles(why, sizeof why)) {
      snprintf(choose_error, sizeof choose_error,
               "TFM_CPU_KERNELS=amx: Linux refused the AMX tile state "
               "(arch_prctl ARCH_REQ_XCOMP_PERM: %s)", why);
    } else {
      chosen = f;
    }
    choose_status = chosen < 0 ? TFM_FAILED : TFM_OK;
    return;
  }
  /* Without AMX the widening path, not AVX512-BF16: on Sapphire Rapids
   * vdpbf16ps does no more multiply-adds a cycle than f32 FMA, and its
   * step measured 0.74 of the widening path's speed (bench/RESULTS.md,
   * 2026-12-07); TFM_CPU_KERNELS=avx512bf16 still runs it. */
  chosen = TFM_CPU_KERNELS_AVX2;
  if (tfm_cpu_kernels_supported(TFM_CPU_KERNELS_AMX)) {
    if (request_tiles(why, sizeof why)) {
      chosen = TFM_CPU_KERNELS_AMX;
      return;
    }
    fprintf(stderr,
            "tfm: Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: %s); "
            "bf16 products run widened to f32\n", why);
  }
}

int tfm_cpu_kernels_choose(void) {
  pthread_once(&choose_once, choose);
  if (choose_status != TFM_OK)
    return tfm_fail("%s", choose_error);
  return TFM_OK;
}

int32_t tfm_cpu_kernels(void) {
  if (tfm_cpu_kernels_choose() != TFM_OK) {
    /* Generated code cannot report a status: a program that did not call
     * tfm_cpu_kernels_choose first ends here with the same message. */
    fprintf(stderr, "tfm: error: %s\n", tfm_error());
    exit(1);
  }
  return chosen;
}

/* --- the program's variant (--cpu generic-dispatch) ----------------------- */

static const char *const variant_names[TFM_CPU_VARIANTS] = {"avx2", "avx512", "amx"};

const char *tfm_cpu_variant_name(int32_t variant) {
  return variant >= 0 && variant < TFM_CPU_VARIANTS ? variant_names[variant] : "?";
}

static bool has_bits(unsigned reg, unsigned bits) { return (reg & bits) == bits; }

#define BIT(n) (1u << (n))

/* The best variant this machine runs, or -1 below x86-64-v3. */
static int32_t best_variant(void) {
  unsigned a, b, c, d;
  /* x86-64-v3: AVX, AVX2, BMI1/2, F16C, FMA, LZCNT, MOVBE, XSAVE, and the AVX state */
  unsigned leaf1_c = BIT(12) | BIT(22) | BIT(26) | BIT(27) | BIT(28) | BIT(29);
  if (!__get_cpuid(1, &a, &b, &c, &d) || !has_bits(c, leaf1_c) ||
      (enabled_states() & 0x6) != 0x6)
    return -1;
  unsigned ea, eb, ec, ed;
  if (!__get_cpuid(0x80000001, &ea, &eb, &ec, &ed) || !has_bits(ec, BIT(5)) ||
      !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !has_bits(b, BIT(3) | BIT(5) | BIT(8)))
    return -1;
  /* x86-64-v4: AVX-512 F, DQ, CD, BW, VL, and the opmask and ZMM state */
  if (!has_bits(b, BIT(16) | BIT(17) | BIT(28) | BIT(30) | BIT(31)) ||
      (enabled_states() & 0xe6) != 0xe6)
    return TFM_CPU_AVX2;
  char why[128];
  if (!tfm_cpu_kernels_supported(TFM_CPU_KERNELS_AMX) ||
      !tfm_cpu_kernels_supported(TFM_CPU_KERNELS_AVX512BF16) || !request_tiles(why, sizeof why))
    return TFM_CPU_AVX512;
  return TFM_CPU_AMX;
}

static int32_t chosen_variant = -1;

int tfm_cpu_variant_select(int32_t *variant) {
  int32_t best = best_variant();
  const char *forced = getenv("TFM_CPU_VARIANT");
  if (best < 0)
    return tfm_fail("this CPU cannot run the model: its code needs AVX2 and FMA "
                    "(x86-64-v3, Haswell or later)");
  int32_t want = best;
  if (forced && *forced) {
    for (want = 0; want < TFM_CPU_VARIANTS && strcmp(forced, variant_names[want]); want++) {}
    if (want == TFM_CPU_VARIANTS)
      return tfm_fail("TFM_CPU_VARIANT=%s: unknown (avx2, avx512, amx)", forced);
    if (want > best)
      return tfm_fail("TFM_CPU_VARIANT=%s: this machine cannot run it (the best it runs is %s)",
                      forced, variant_names[best]);
  }
  __atomic_store_n(&chosen_variant, want, __ATOMIC_RELEASE);
  *variant = want;
  return TFM_OK;
}

int32_t tfm_cpu_variant(void) {
  /* Every thread would choose the same; the first store wins harmlessly. */
  int32_t v = __atomic_load_n(&chosen_variant, __ATOMIC_ACQUIRE);
  if (v >= 0) return v;
  if (tfm_cpu_variant_select(&v) == TFM_OK) return v;
  v = best_variant();
  fprintf(stderr, "tfm: %s%s%s\n", tfm_error(), v >= 0 ? "; running " : "",
          v >= 0 ? variant_names[v] : "");
  if (v < 0) abort();
  __atomic_store_n(&chosen_variant, v, __ATOMIC_RELEASE);
  return v;
}
