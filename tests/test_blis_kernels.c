/* BLIS's kernel set: a user's BLIS_ARCH_TYPE is honoured, a value BLIS 0.9 would misread or
 * abort on is a clear error (and BLIS is never started with it), and tg's own choice for CPUs
 * BLIS 0.9 does not know. Each test is its own process, so each starts BLIS afresh. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "ops/cpu/blis_kernels.h"
#include "testutil.h"

/* A 2x2 product: the first thing that starts BLIS. */
static tg_tensor *small_mm(void) {
  tg_tensor *a = tg_ones(TG_SHAPE(2, 2), TG_OPTS_DEFAULT);
  return tg_mm(a, a);
}

static void expect_refused(const char *value, const char *const why) {
  cr_assert_eq(setenv("BLIS_ARCH_TYPE", value, 1), 0);
  tg_tensor *c = small_mm();
  cr_assert_null(c, "BLIS_ARCH_TYPE='%s' was accepted", value);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_mm: ", "BLIS_ARCH_TYPE", why);
  /* Refused every time, not only at the first GEMM; threads leave BLIS alone too. */
  cr_assert_null(tg_blis_kernels());
  tg_expect_error(TG_ERR_ARGUMENT, "tg_blis_kernels", why);
  tg_set_num_threads(1);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_set_num_threads", why);
  tg_set_num_threads(0);
  tg_clear_error();
}

TG_TEST(blis_kernels, name_instead_of_number) {
  expect_refused("haswell", "would take this as 0 (skx); set BLIS_ARCH_TYPE=3");
}
TG_TEST(blis_kernels, empty_value) { expect_refused("", "not a kernel set number"); }
TG_TEST(blis_kernels, trailing_garbage) { expect_refused("3x", "not a kernel set number"); }
TG_TEST(blis_kernels, negative) { expect_refused("-1", "not a kernel set number"); }
TG_TEST(blis_kernels, not_in_this_build) { expect_refused("2", "not a kernel set of this BLIS"); }
TG_TEST(blis_kernels, out_of_range) { expect_refused("99", "not a kernel set of this BLIS"); }
TG_TEST(blis_kernels, huge_number) {
  expect_refused("99999999999999999999", "not a kernel set of this BLIS");
}

TG_TEST(blis_kernels, cpu_cannot_execute) {
  tg_cpu_features f = tg_cpu_features_read();
  if (tg__blis_can_run(&f, "bulldozer")) cr_skip_test("this CPU runs bulldozer's FMA4/XOP kernels");
  expect_refused("12", "lacks");
}

TG_TEST(blis_kernels, user_value_honoured) {
  cr_assert_eq(setenv("BLIS_ARCH_TYPE", "25", 1), 0);
  cr_assert_str_eq(tg_blis_kernels(), "generic");
  cr_assert_str_eq(tg_blis_kernels_source(), "BLIS_ARCH_TYPE");
  tg_tensor *c = small_mm();
  cr_assert(c, "%s", tg_last_error_message());
  tg_test_expect_values(c, 4, (double[]){2, 2, 2, 2}, 0);
}

TG_TEST(blis_kernels, unset_picks_a_set_this_cpu_runs) {
  unsetenv("BLIS_ARCH_TYPE");
  const char *name = tg_blis_kernels();
  cr_assert(name, "%s", tg_last_error_message());
  tg_cpu_features f = tg_cpu_features_read();
  cr_assert(tg__blis_can_run(&f, name), "kernel set %s cannot run here", name);
  const char *mine = tg__blis_default_kernels(&f);
  cr_assert_str_eq(tg_blis_kernels_source(), mine ? "tg" : "BLIS");
  if (mine) cr_assert_str_eq(name, mine);
  /* tg restores the environment it set for BLIS. */
  cr_assert_null(getenv("BLIS_ARCH_TYPE"));
}

static tg_cpu_features cpu(const char *vendor, int family, bool avx2_fma, bool avx512) {
  tg_cpu_features f = {.family = family, .sse3 = true, .ssse3 = true, .sse41 = true, .avx = true};
  snprintf(f.vendor, sizeof f.vendor, "%s", vendor);
  f.avx2 = f.fma3 = avx2_fma;
  f.avx512f = f.avx512dq = f.avx512bw = f.avx512vl = avx512;
  return f;
}

TG_TEST(blis_kernels, default_policy) {
  tg_cpu_features zen5 = cpu("AuthenticAMD", 0x1a, true, true);
  cr_assert_str_eq(tg__blis_default_kernels(&zen5), "zen3");
  tg_cpu_features zen4 = cpu("AuthenticAMD", 0x19, true, true); /* BLIS picks zen3 itself */
  cr_assert_null(tg__blis_default_kernels(&zen4));
  tg_cpu_features xeon = cpu("GenuineIntel", 6, true, true);
  cr_assert_null(tg__blis_default_kernels(&xeon));
  tg_cpu_features old_amd = cpu("AuthenticAMD", 0x1a, false, false); /* no AVX2: generic */
  cr_assert_null(tg__blis_default_kernels(&old_amd));
}

TG_TEST(blis_kernels, what_each_set_needs) {
  tg_cpu_features avx2 = cpu("GenuineIntel", 6, true, false);
  cr_assert(tg__blis_can_run(&avx2, "haswell"));
  cr_assert(tg__blis_can_run(&avx2, "zen3"));
  cr_assert(tg__blis_can_run(&avx2, "generic"));
  cr_assert_not(tg__blis_can_run(&avx2, "skx"));
  cr_assert_not(tg__blis_can_run(&avx2, "knl"));
  cr_assert_not(tg__blis_can_run(&avx2, "bulldozer"));
  cr_assert_not(tg__blis_can_run(&avx2, "no-such-set"));
  tg_cpu_features skx = cpu("GenuineIntel", 6, true, true);
  cr_assert(tg__blis_can_run(&skx, "skx"));
  cr_assert_not(tg__blis_can_run(&skx, "knl")); /* no AVX-512 PF/ER */
  tg_cpu_features none = {0};
  cr_assert(tg__blis_can_run(&none, "generic"));
  cr_assert_not(tg__blis_can_run(&none, "penryn"));
}
