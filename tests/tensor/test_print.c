/* Printing like PyTorch: values, sizes, dtype, device; elided middle for large tensors. */
#include <stdlib.h>

#include "testutil.h"

static void expect_string(const tg_tensor *t, const char *expected) {
  char *s = tg_to_string(t);
  cr_assert_not_null(s, "%s", tg_last_error_message());
  cr_assert_str_eq(s, expected);
  free(s);
}

TG_TEST(print, small_float_matrix) {
  tg_scope sc = tg_scope_begin();
  float data[] = {1.5f, -2.25f, 3.0f, 0.125f};
  expect_string(tg_from_data(TG_SHAPE(2, 2), data, TG_OPTS_DEFAULT),
                "tensor([[ 1.5000, -2.2500],\n"
                "        [ 3.0000,  0.1250]], size=[2, 2])");
  tg_scope_end(sc);
}

TG_TEST(print, integral_values_print_with_a_dot) {
  tg_scope sc = tg_scope_begin();
  expect_string(tg_arange(0, 4, 1, TG_OPTS(.dtype = TG_F64)),
                "tensor([0., 1., 2., 3.], size=[4], dtype=float64)");
  tg_scope_end(sc);
}

TG_TEST(print, int64_and_scalars) {
  tg_scope sc = tg_scope_begin();
  expect_string(tg_arange(-2, 2, 1, TG_OPTS(.dtype = TG_I64)),
                "tensor([-2, -1,  0,  1], size=[4], dtype=int64)");
  expect_string(tg_full(0, NULL, 0.5, TG_OPTS_DEFAULT), "tensor(0.5000, size=[])");
  expect_string(tg_zeros(TG_SHAPE(0, 2), TG_OPTS_DEFAULT), "tensor([], size=[0, 2])");
  tg_scope_end(sc);
}

TG_TEST(print, wide_ranges_use_scientific_notation) {
  tg_scope sc = tg_scope_begin();
  double data[] = {1e-5, 2.5, 3e9};
  expect_string(tg_from_data(TG_SHAPE(3), data, TG_OPTS(.dtype = TG_F64)),
                "tensor([1.0000e-05, 2.5000e+00, 3.0000e+09], size=[3], dtype=float64)");
  tg_scope_end(sc);
}

TG_TEST(print, large_tensors_elide_the_middle) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(tg_arange(0, 2000, 1, TG_OPTS(.dtype = TG_I64)), TG_SHAPE(40, 50));
  char *s = tg_to_string(t);
  cr_assert_not_null(s);
  cr_assert(strstr(s, "[   0,    1,    2, ...,   47,   48,   49]") != NULL, "%s", s);
  cr_assert(strstr(s, "...,\n") != NULL, "%s", s);
  cr_assert(strstr(s, "1999]], size=[40, 50], dtype=int64)") != NULL, "%s", s);
  cr_assert(strstr(s, " 500,") == NULL, "middle rows must be elided: %s", s);
  free(s);
  tg_scope_end(sc);
}

TG_TEST(print, non_contiguous_views_print_logically) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_t(tg_view(tg_arange(0, 6, 1, TG_OPTS(.dtype = TG_I64)), TG_SHAPE(2, 3)));
  expect_string(t, "tensor([[0, 3],\n        [1, 4],\n        [2, 5]], size=[3, 2], dtype=int64)");
  tg_scope_end(sc);
}

TG_TEST(print, requires_grad_is_shown) {
  tg_scope sc = tg_scope_begin();
  expect_string(tg_ones(TG_SHAPE(2), TG_OPTS(.requires_grad = true)),
                "tensor([1., 1.], size=[2], requires_grad=true)");
  cr_assert_null(tg_to_string(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_to_string");
  cr_assert_eq(tg_fprint(NULL, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_fprint");
  tg_scope_end(sc);
}
