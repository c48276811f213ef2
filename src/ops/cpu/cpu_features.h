/* The CPU's vendor, family and the instruction sets BLIS's x86 kernel sets use. */
#ifndef TG_CPU_FEATURES_H
#define TG_CPU_FEATURES_H

#include <stdbool.h>

typedef struct tg_cpu_features {
  char vendor[13]; /* "GenuineIntel", "AuthenticAMD", ... ("" off x86) */
  int family;      /* base + extended family, as the vendors document it */
  int model;
  int stepping;
  char brand[49]; /* the processor's brand string, as cpuid gives it ("" where it has none) */
  bool sse3, ssse3, sse41, avx, fma3, avx2, fma4, xop;
  bool avx512f, avx512dq, avx512bw, avx512vl, avx512pf, avx512er;
} tg_cpu_features;

/* Reads cpuid (and XGETBV: a set counts only when the OS saves its registers). */
tg_cpu_features tg_cpu_features_read(void);

#endif
