/* BLIS kernel selection on CPUs newer than Debian's BLIS (src/ops/cpu/cpu_blis_arch.c). */
#define _POSIX_C_SOURCE 200112L
#include <stdlib.h>

#include "testutil.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

static unsigned amd_family(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u /* "Auth" */) return 0;
  __get_cpuid(1, &a, &b, &c, &d);
  unsigned family = (a >> 8) & 0xF;
  return family == 0xF ? family + ((a >> 20) & 0xFF) : family;
}
#else
static unsigned amd_family(void) { return 0; }
#endif

static void run_a_gemm(void) {
  tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(4, 4), TG_OPTS_DEFAULT);
  cr_assert_eq(tg_test_at(tg_mm(a, a), 0), 4.0);
  tg_scope_end();
}

TG_TEST(blis_arch, haswell_kernels_on_cpus_blis_does_not_know) {
  unsetenv("BLIS_ARCH_TYPE");
  run_a_gemm();
  const char *chosen = getenv("BLIS_ARCH_TYPE");
  if (amd_family() >= 0x1A) {
    cr_assert_not_null(chosen, "AMD family 0x%x: tg should pick BLIS's Haswell kernels",
                       amd_family());
    cr_assert_eq(atoi(chosen), 3); /* BLIS_ARCH_HASWELL in BLIS 0.9's arch_t */
  } else {
    cr_assert_null(chosen, "tg must not choose kernels BLIS knows how to pick");
  }
}

TG_TEST(blis_arch, a_users_choice_is_kept) {
  if (amd_family() < 0x1A) return; /* tg leaves BLIS alone there anyway */
  setenv("BLIS_ARCH_TYPE", "3 ", 1); /* Haswell too (safe here), spelled so we can tell */
  run_a_gemm();
  cr_assert_str_eq(getenv("BLIS_ARCH_TYPE"), "3 ");
}
