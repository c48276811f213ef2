/* Kernel selection for BLIS on CPUs newer than the BLIS build.
 *
 * Debian 12's BLIS 0.9.0 does not know AMD family 0x1A (Zen 5) and falls back to its
 * generic kernels, which run tg's GEMMs about 4x slower than its Haswell (AVX2/FMA)
 * kernels on the same machine. BLIS reads its choice only from the BLIS_ARCH_TYPE
 * environment variable, once, when it initialises, and has no setter: so before tg's first
 * BLIS call, and only when the user has not chosen, tg sets it to the Haswell kernels on
 * such CPUs. */
#define _POSIX_C_SOURCE 200112L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <blis.h>
#include <cpuid.h>

/* AMD family 0x1A or later with AVX2 and FMA: newer than anything BLIS 0.9 recognises. */
static bool amd_cpu_unknown_to_blis(void) {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  char vendor[13];
  memcpy(vendor, &ebx, 4);
  memcpy(vendor + 4, &edx, 4);
  memcpy(vendor + 8, &ecx, 4);
  vendor[12] = '\0';
  if (strcmp(vendor, "AuthenticAMD") != 0 || !__get_cpuid(1, &eax, &ebx, &ecx, &edx))
    return false;
  unsigned family = (eax >> 8) & 0xF;
  if (family == 0xF) family += (eax >> 20) & 0xFF;
  __builtin_cpu_init();
  return family >= 0x1A && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void tg_cpu_blis_arch_init(void) {
  static atomic_bool done;
  if (atomic_exchange(&done, true)) return;
  if (getenv("BLIS_ARCH_TYPE") || !amd_cpu_unknown_to_blis()) return;
  char id[16];
  snprintf(id, sizeof id, "%d", (int)BLIS_ARCH_HASWELL);
  setenv("BLIS_ARCH_TYPE", id, 0);
}
#else
void tg_cpu_blis_arch_init(void) {}
#endif
