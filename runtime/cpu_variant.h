/* The CPU variant a binary built with `tfmc build --cpu generic-dispatch`
 * runs: such a binary holds every graph compiled once per x86-64 level
 * below, and each graph's entry points call the variant chosen here, once
 * per process, from what CPUID and the OS say this machine can run.
 * TFM_CPU_VARIANT=avx2|avx512|amx forces one (tests, comparisons). The
 * numbers are the generated dispatchers' (compiler/codegen/cpu/dispatch.c
 * lists the same variants in the same order). */
#ifndef TFM_CPU_VARIANT_H
#define TFM_CPU_VARIANT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TFM_CPU_AVX2,   /* x86-64-v3: AVX2, FMA (Haswell and later, Zen) */
  TFM_CPU_AVX512, /* x86-64-v4: AVX-512 F, BW, DQ, CD, VL */
  TFM_CPU_AMX,    /* x86-64-v4 with AVX512-BF16, AMX-TILE and AMX-BF16 (Sapphire Rapids) */
  TFM_CPU_VARIANTS
};

/* "avx2", "avx512" or "amx". */
const char *tfm_cpu_variant_name(int32_t variant);

/* Chooses the variant (TFM_CPU_VARIANT's if set, else the best this
 * machine runs) and keeps it for tfm_cpu_variant. TFM_FAILED, with the
 * reason in tfm_error(), when the variable names an unknown variant or one
 * this machine cannot run, or when the machine lacks even AVX2. */
int tfm_cpu_variant_select(int32_t *variant);

/* The chosen variant, choosing on the first call; what the generated
 * dispatchers call. Where choosing fails (a binary's main reports that
 * before any graph runs; a program embedding a model library may not), it
 * says why on stderr once and runs the best variant this machine has. */
int32_t tfm_cpu_variant(void);

#ifdef __cplusplus
}
#endif

#endif
