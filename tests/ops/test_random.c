/* Seeded, counter-based random numbers. */
#include <math.h>

#include "testutil.h"

TG_TEST(random, the_same_seed_gives_the_same_numbers) {
  tg_scope sc = tg_scope_begin();
  tg_manual_seed(42);
  tg_tensor *a = tg_randn(TG_SHAPE(100), TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *b = tg_rand(TG_SHAPE(7), TG_OPTS_DEFAULT, NULL);
  tg_manual_seed(42);
  tg_tensor *c = tg_randn(TG_SHAPE(100), TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *d = tg_rand(TG_SHAPE(7), TG_OPTS_DEFAULT, NULL);
  cr_assert_eq(tg_test_max_abs_diff(a, c), 0.0);
  cr_assert_eq(tg_test_max_abs_diff(b, d), 0.0);
  tg_tensor *e = tg_randn(TG_SHAPE(100), TG_OPTS(.dtype = TG_F64), NULL);
  cr_assert_gt(tg_test_max_abs_diff(a, e), 0.1); /* the stream moved on */
  tg_scope_end(sc);
}

TG_TEST(random, generators_are_independent_of_the_default) {
  tg_scope sc = tg_scope_begin();
  tg_generator *g1 = tg_generator_new(7), *g2 = tg_generator_new(7);
  tg_tensor *a = tg_uniform(TG_SHAPE(3, 5), -2, 3, TG_OPTS(.dtype = TG_F64), g1);
  tg_manual_seed(1);
  tg_tensor *noise = tg_rand(TG_SHAPE(9), TG_OPTS_DEFAULT, NULL);
  (void)noise;
  tg_tensor *b = tg_uniform(TG_SHAPE(3, 5), -2, 3, TG_OPTS(.dtype = TG_F64), g2);
  cr_assert_eq(tg_test_max_abs_diff(a, b), 0.0);
  for (int i = 0; i < 15; i++) {
    double v = tg_test_at(a, i);
    cr_assert(v >= -2 && v < 3, "%g outside [-2, 3)", v);
  }
  tg_generator_free(g1);
  tg_generator_free(g2);
  tg_scope_end(sc);
}

TG_TEST(random, normal_moments_are_plausible) {
  tg_scope sc = tg_scope_begin();
  tg_generator *g = tg_generator_new(123);
  tg_tensor *t = tg_zeros(TG_SHAPE(20000), TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_normal_(t, 1.0, 2.0, g), TG_OK);
  double sum = 0, sq = 0;
  for (int i = 0; i < 20000; i++) {
    double v = tg_test_at(t, i);
    sum += v;
    sq += v * v;
  }
  double mean = sum / 20000, var = sq / 20000 - mean * mean;
  cr_assert(fabs(mean - 1.0) < 0.05, "mean %g", mean);
  cr_assert(fabs(sqrt(var) - 2.0) < 0.05, "std %g", sqrt(var));
  tg_generator_free(g);
  tg_scope_end(sc);
}

TG_TEST(random, filling_a_strided_view_fills_only_the_view) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(4, 4), TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_uniform_(tg_t(tg_narrow(t, 1, 1, 2)), 1, 2, NULL), TG_OK);
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 4; c++) {
      double v = tg_test_at(t, r * 4 + c);
      if (c == 1 || c == 2)
        cr_assert(v >= 1 && v < 2);
      else
        cr_assert_eq(v, 0.0);
    }
  tg_scope_end(sc);
}

TG_TEST(random, bad_arguments_are_errors) {
  tg_scope sc = tg_scope_begin();
  cr_assert_null(tg_rand(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64), NULL));
  tg_expect_error(TG_ERR_DTYPE, "tg_rand", "int64");
  cr_assert_null(tg_uniform(TG_SHAPE(2), 3, 1, TG_OPTS_DEFAULT, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_uniform", "low 3");
  tg_tensor *t = tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  cr_assert_eq(tg_normal_(t, 0, -1, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_normal_", "std -1");
  tg_scope_end(sc);
}

/* Bounds beyond the dtype's range, or a span that is, gave inf and NaN; refused as in
 * PyTorch ("from is out of bounds for float", "expects to-from <= max"). Failed before. */
TG_TEST(random, uniform_bounds_must_fit_the_dtype) {
  tg_scope sc = tg_scope_begin();
  cr_assert_null(tg_uniform(TG_SHAPE(3), -1e300, 1e300, TG_OPTS_DEFAULT, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_uniform: low -1e+300 is out of range for float32");
  tg_tensor *f = tg_zeros(TG_SHAPE(3), TG_OPTS_DEFAULT);
  cr_assert_eq(tg_uniform_(f, 0, 1e39, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_uniform_: high 1e+39 is out of range for float32");
  cr_assert_eq(tg_uniform_(f, -3e38, 3e38, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_uniform_: low -3e+38, high 3e+38", "exceeds the largest");
  cr_assert_eq(tg_uniform_(f, 0, INFINITY, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "high inf is out of range");
  cr_assert_null(tg_uniform(TG_SHAPE(3), -1e308, 1e308, TG_OPTS(.dtype = TG_F64), NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_uniform", "exceeds the largest float64");
  /* Wide bounds that fit are fine, and every value stays finite. */
  tg_tensor *w = tg_uniform(TG_SHAPE(64), -1.5e38, 1.5e38, TG_OPTS_DEFAULT, NULL);
  cr_assert_not_null(w, "%s", tg_last_error_message());
  cr_assert(tg_all_finite(w));
  tg_scope_end(sc);
}
