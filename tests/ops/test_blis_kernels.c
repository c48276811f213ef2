/* BLIS's kernel set: a user's BLIS_ARCH_TYPE is honoured, a value BLIS 0.9 would misread or
 * abort on is a clear error (and BLIS is never started with it), and tg's own choice for CPUs
 * BLIS 0.9 does not know. Each test is its own process, so each starts BLIS afresh. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  cr_assert_null(tg_blis_large_kernels());
  tg_expect_error(TG_ERR_ARGUMENT, "tg_blis_large_kernels", why);
  cr_assert_null(tg_small_gemm_engine());
  tg_expect_error(TG_ERR_ARGUMENT, "tg_small_gemm_engine", why);
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
  cr_assert_str_eq(tg__blis_default_kernels(&zen5), "haswell");
  tg_cpu_features zen4 = cpu("AuthenticAMD", 0x19, true, true); /* BLIS would pick zen3 */
  cr_assert_str_eq(tg__blis_default_kernels(&zen4), "haswell");
  tg_cpu_features zen3 = cpu("AuthenticAMD", 0x19, true, false); /* BLIS's zen3 is for it */
  cr_assert_null(tg__blis_default_kernels(&zen3));
  tg_cpu_features zen5_no512 = cpu("AuthenticAMD", 0x1a, true, false);
  cr_assert_str_eq(tg__blis_default_kernels(&zen5_no512), "zen3");
  tg_cpu_features xeon = cpu("GenuineIntel", 6, true, true);
  cr_assert_null(tg__blis_default_kernels(&xeon));
  tg_cpu_features old_amd = cpu("AuthenticAMD", 0x1a, false, false); /* no AVX2: generic */
  cr_assert_null(tg__blis_default_kernels(&old_amd));
}

TG_TEST(blis_kernels, large_gemm_policy) {
  tg_cpu_features xeon = cpu("GenuineIntel", 6, true, true);
  cr_assert_str_eq(tg__blis_large_kernels(&xeon, "haswell"), "skx");
  cr_assert_null(tg__blis_large_kernels(&xeon, "skx")); /* already the set */
  tg_cpu_features avx2_intel = cpu("GenuineIntel", 6, true, false);
  cr_assert_null(tg__blis_large_kernels(&avx2_intel, "haswell"));
  tg_cpu_features zen4 = cpu("AuthenticAMD", 0x19, true, true); /* skx slower there */
  cr_assert_null(tg__blis_large_kernels(&zen4, "haswell"));
  cr_assert_null(tg__blis_large_kernels(&xeon, NULL));
}

/* A product of at least 2^22 multiply-adds against the same one on one set. */
static tg_tensor *large_mm(void) {
  tg_manual_seed(7);
  tg_tensor *a = tg_uniform(TG_SHAPE(160, 170), -1, 1, TG_OPTS_DEFAULT, NULL);
  tg_tensor *b = tg_uniform(TG_SHAPE(170, 161), -1, 1, TG_OPTS_DEFAULT, NULL);
  return tg_mm(a, tg_contiguous(b));
}

TG_TEST(blis_kernels, large_gemms_on_a_second_set) {
  tg_cpu_features f = tg_cpu_features_read();
  unsetenv("BLIS_ARCH_TYPE");
  const char *second = tg__blis_can_run(&f, "skx") ? "skx" : "generic";
  tg__blis_prefer_large_kernels(second);
  const char *first = tg_blis_kernels();
  cr_assert(first, "%s", tg_last_error_message());
#if TG_BLIS_CONTEXTS
  if (strcmp(first, second) != 0) cr_assert_str_eq(tg_blis_large_kernels(), second);
#else
  cr_assert_null(tg_blis_large_kernels()); /* shared BLIS: one set per process */
#endif
  /* Both sets in one process give what a plain loop gives. */
  tg_tensor *c = large_mm(), *a = NULL;
  cr_assert(c, "%s", tg_last_error_message());
  tg_manual_seed(7);
  a = tg_uniform(TG_SHAPE(160, 170), -1, 1, TG_OPTS_DEFAULT, NULL);
  tg_tensor *b = tg_uniform(TG_SHAPE(170, 161), -1, 1, TG_OPTS_DEFAULT, NULL);
  const float *pa = tg_data_ptr(a), *pb = tg_data_ptr(b), *pc = tg_data_ptr(c);
  double worst = 0;
  for (int i = 0; i < 160; i++)
    for (int j = 0; j < 161; j++) {
      double ref = 0;
      for (int k = 0; k < 170; k++) ref += (double)pa[i * 170 + k] * pb[k * 161 + j];
      double d = ref - pc[i * 161 + j];
      worst = d > worst ? d : -d > worst ? -d : worst;
    }
  cr_assert_lt(worst, 1e-3, "large GEMM on %s differs from a plain loop by %g", second, worst);
  tg_tensor *small =
      tg_mm(tg_ones(TG_SHAPE(2, 2), TG_OPTS_DEFAULT), tg_ones(TG_SHAPE(2, 2), TG_OPTS_DEFAULT));
  tg_test_expect_values(small, 4, (double[]){2, 2, 2, 2}, 0);
}

TG_TEST(blis_kernels, small_gemm_engine) {
  unsetenv("BLIS_ARCH_TYPE");
#if TG_WITH_XSMM
  cr_assert_str_eq(tg_small_gemm_engine(), "libxsmm");
#else
  cr_assert_null(tg_small_gemm_engine());
#endif
  tg_expect_ok();
}

TG_TEST(blis_kernels, pinned_set_runs_every_gemm) {
  cr_assert_eq(setenv("BLIS_ARCH_TYPE", "25", 1), 0);
  tg__blis_prefer_large_kernels("haswell");
  cr_assert_str_eq(tg_blis_kernels(), "generic");
  cr_assert_null(tg_blis_large_kernels());
  cr_assert_null(tg_small_gemm_engine()); /* BLIS runs every GEMM */
  cr_assert(large_mm(), "%s", tg_last_error_message());
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
