/* Which family of generated CPU kernels runs bf16 products: AMX tiles,
 * AVX512-BF16 pair dot products, or the f32 path (bf16 widened to f32 on
 * AVX2/AVX-512F). Chosen once per process from CPUID and the operating
 * system's consent, or forced by TFM_CPU_KERNELS; generated code asks
 * tfm_cpu_kernels() at each bf16 GEMM call (a load after the first). */
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
  chosen = TFM_CPU_KERNELS_AVX2;
  if (tfm_cpu_kernels_supported(TFM_CPU_KERNELS_AMX)) {
    if (request_tiles(why, sizeof why)) {
      chosen = TFM_CPU_KERNELS_AMX;
      return;
    }
    fprintf(stderr,
            "tfm: Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: %s); "
            "bf16 products run on AVX512-BF16\n", why);
  }
  if (tfm_cpu_kernels_supported(TFM_CPU_KERNELS_AVX512BF16))
    chosen = TFM_CPU_KERNELS_AVX512BF16;
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
