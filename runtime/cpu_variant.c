/* Which of a dispatching binary's CPU variants this machine runs: the CPU
 * must have the variant's instructions (CPUID) and the OS must save their
 * registers (XGETBV: the AVX and AVX-512 state; for AMX, Linux hands out
 * the tile state only on request, arch_prctl(ARCH_REQ_XCOMP_PERM)). */
#define _GNU_SOURCE /* syscall */
#include "cpu_variant.h"

#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tfmrt.h"

static const char *const variant_names[TFM_CPU_VARIANTS] = {"avx2", "avx512", "amx"};

const char *tfm_cpu_variant_name(int32_t variant) {
  return variant >= 0 && variant < TFM_CPU_VARIANTS ? variant_names[variant] : "?";
}

static int has_bits(unsigned reg, unsigned bits) { return (reg & bits) == bits; }

#define BIT(n) (1u << (n))

/* XCR0: the register state the OS saves on a context switch. */
static unsigned long long xcr0(void) {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((unsigned long long)hi << 32) | lo;
}

/* Linux 5.16+ gives a process the AMX tile data state on request; without
 * it the first tile instruction faults. */
static int amx_permitted(void) {
  enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
  return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

/* The best variant this machine runs, or -1 below AVX2 (no reason needed:
 * the caller says what is missing). */
static int32_t best_variant(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return -1;
  /* x86-64-v3: AVX, AVX2, BMI1/2, F16C, FMA, LZCNT, MOVBE (and XSAVE/OSXSAVE for AVX) */
  unsigned leaf1_c = BIT(12) | BIT(22) | BIT(26) | BIT(27) | BIT(28) | BIT(29);
  if (!has_bits(c, leaf1_c) || (xcr0() & 0x6) != 0x6) return -1;
  unsigned a7, b7, c7, d7;
  if (!__get_cpuid_count(7, 0, &a7, &b7, &c7, &d7)) return -1;
  unsigned ea, eb, ec, ed;
  if (!__get_cpuid(0x80000001, &ea, &eb, &ec, &ed) || !has_bits(ec, BIT(5))) return -1;
  if (!has_bits(b7, BIT(3) | BIT(5) | BIT(8))) return -1;
  /* x86-64-v4: AVX-512 F, DQ, CD, BW, VL, and the opmask and ZMM state */
  if (!has_bits(b7, BIT(16) | BIT(17) | BIT(28) | BIT(30) | BIT(31)) || (xcr0() & 0xe0) != 0xe0)
    return TFM_CPU_AVX2;
  /* AMX-BF16 and AMX-TILE (leaf 7 EDX), AVX512-BF16 (leaf 7.1 EAX) */
  unsigned a71, b71, c71, d71;
  int bf16 = __get_cpuid_count(7, 1, &a71, &b71, &c71, &d71) && has_bits(a71, BIT(5));
  if (!bf16 || !has_bits(d7, BIT(22) | BIT(24)) || !amx_permitted()) return TFM_CPU_AVX512;
  return TFM_CPU_AMX;
}

static int32_t chosen = -1;

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
  __atomic_store_n(&chosen, want, __ATOMIC_RELEASE);
  *variant = want;
  return TFM_OK;
}

int32_t tfm_cpu_variant(void) {
  /* Every thread would choose the same; the first store wins harmlessly. */
  int32_t v = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
  if (v >= 0) return v;
  if (tfm_cpu_variant_select(&v) == TFM_OK) return v;
  v = best_variant();
  fprintf(stderr, "tfm: %s%s%s\n", tfm_error(), v >= 0 ? "; running " : "",
          v >= 0 ? variant_names[v] : "");
  if (v < 0) abort();
  __atomic_store_n(&chosen, v, __ATOMIC_RELEASE);
  return v;
}
