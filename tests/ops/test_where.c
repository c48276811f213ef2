/* tg_where (torch.where): values by hand for every cond dtype, NaN and -0 conds, inf and
 * NaN in the branch not taken, broadcasting of all three operands, strided operands,
 * promotion of a and b, gradcheck and gradgradcheck in F64, gradients as selections (a NaN
 * upstream gradient never crosses to the other branch), errors; and relu's gradient, which
 * is built on it. */
#include <math.h>

#include "testutil.h"
#include "tg/ops.h"

static const tg_gradcheck_options quiet = {.quiet = true};

static tg_tensor *leaf_f64(int ndim, const int64_t *sizes, const double *values) {
  tg_tensor *t = tg_test_tensor_of(TG_F64, ndim, sizes, values);
  cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
  return t;
}

/* Nonzero picks a, for every cond dtype; NaN counts as nonzero (a bool cast), -0 as zero. */
TG_TEST(where, picks_a_where_cond_is_nonzero_for_every_cond_dtype) {
  tg_scope sc = tg_scope_begin();
  const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {-1, -2, -3, -4, -5, -6};
  const tg_dtype conds[] = {TG_F32, TG_F64, TG_I64};
  const tg_dtype values[] = {TG_F32, TG_F64, TG_I64};
  for (int c = 0; c < 3; c++) {
    const bool fl = conds[c] != TG_I64;
    const double cv[] = {1, 0, fl ? NAN : -7, fl ? -0.0 : 0, fl ? 1e-300 : 3, fl ? -INFINITY : 1};
    for (int v = 0; v < 3; v++) {
      tg_tensor *y = tg_where(tg_test_tensor_of(conds[c], TG_SHAPE(6), cv),
                              tg_test_tensor_of(values[v], TG_SHAPE(6), a),
                              tg_test_tensor_of(values[v], TG_SHAPE(6), b));
      cr_assert(y, "%s", tg_last_error_message());
      cr_assert_eq(tg_tensor_dtype(y), values[v]);
      /* 1e-300 is 0 in F32 (the F32 cond holds what converts) */
      const double third = conds[c] == TG_F32 ? -5 : 5;
      tg_test_expect_ieee(y, 6, (const double[]){1, -2, 3, -4, fl ? third : 5, 6}, 0);
    }
  }
  tg_scope_end(sc);
}

/* A selection, not arithmetic: inf and NaN in the branch not taken do not reach the
 * result, -0 is kept, and all three operands broadcast. */
TG_TEST(where, selects_without_arithmetic_and_broadcasts_all_three) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *cond = tg_test_tensor_of(TG_F64, TG_SHAPE(3, 1), (const double[]){1, 0, NAN});
  tg_tensor *a = tg_test_tensor_of(TG_F64, TG_SHAPE(2), (const double[]){-0.0, NAN});
  tg_tensor *b = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 1, 1), (const double[]){INFINITY, -1});
  tg_tensor *y = tg_where(cond, a, b);
  cr_assert(y, "%s", tg_last_error_message());
  tg_assert_sizes(y, 2, 3, 2);
  tg_test_expect_ieee(y, 12,
                      (const double[]){-0.0, NAN, INFINITY, INFINITY, -0.0, NAN, /* b = inf */
                                       -0.0, NAN, -1, -1, -0.0, NAN},
                      0);
  cr_assert(signbit(tg_test_at(y, 0)), "-0 from a keeps its sign");
  tg_scope_end(sc);
}

/* Transposed, stepped and expanded operands give what their contiguous copies give. */
TG_TEST(where, strided_operands_match_contiguous) {
  tg_scope sc = tg_scope_begin();
  double cv[12], av[24], bv[12];
  for (int i = 0; i < 24; i++) av[i] = i < 12 ? i : -i;
  for (int i = 0; i < 12; i++) cv[i] = i % 3 == 0, bv[i] = 100 + i;
  tg_tensor *cond = tg_t(tg_test_tensor_of(TG_I64, TG_SHAPE(4, 3), cv));
  tg_tensor *a = tg_slice(tg_test_tensor_of(TG_F32, TG_SHAPE(3, 8), av), 1, 0, 8, 2);
  tg_tensor *b = tg_expand(tg_test_tensor_of(TG_F32, TG_SHAPE(1, 4), bv), TG_SHAPE(3, 4));
  cr_assert(cond && a && b, "%s", tg_last_error_message());
  tg_tensor *y = tg_where(cond, a, b);
  tg_tensor *want = tg_where(tg_contiguous(cond), tg_contiguous(a), tg_contiguous(b));
  cr_assert(y && want, "%s", tg_last_error_message());
  cr_assert_eq(tg_test_max_abs_diff(y, want), 0.0);
  /* cond[i][j] = cv[3j + i]: cond[0][1] = cv[3] = 1 picks a[0][1] = av[2]; cond[1][0] =
   * cv[1] = 0 picks b[1][0] = bv[0] */
  cr_assert_eq(tg_test_at(y, 1), 2.0);
  cr_assert_eq(tg_test_at(y, 4), 100.0);
  tg_scope_end(sc);
}

/* a and b promote as the binary ops' operands (a 0-dim operand joins only with a higher
 * category); cond's dtype plays no part. */
TG_TEST(where, a_and_b_promote_as_binary_operands) {
  tg_scope sc = tg_scope_begin();
  const double v[] = {1, 2};
  tg_tensor *cond = tg_test_tensor_of(TG_F64, TG_SHAPE(2), (const double[]){1, 0});
  const struct {
    tg_dtype a, b;
    int b_ndim;
    tg_dtype want;
  } cases[] = {{TG_F32, TG_F64, 1, TG_F64},
               {TG_I64, TG_I64, 1, TG_I64},
               {TG_I64, TG_F32, 1, TG_F32},
               {TG_F32, TG_F64, 0, TG_F32},
               {TG_I64, TG_F64, 0, TG_F64}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    tg_tensor *a = tg_test_tensor_of(cases[k].a, TG_SHAPE(2), v);
    tg_tensor *b = cases[k].b_ndim ? tg_test_tensor_of(cases[k].b, TG_SHAPE(2), v)
                                   : tg_test_tensor_of(cases[k].b, 0, NULL, v + 1);
    tg_tensor *y = tg_where(cond, a, b);
    cr_assert(y, "case %zu: %s", k, tg_last_error_message());
    cr_assert_eq(tg_tensor_dtype(y), cases[k].want, "case %zu", k);
    tg_test_expect_values(y, 2, (const double[]){1, 2}, 0);
  }
  tg_scope_end(sc);
}

static tg_status run_where(void *user, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_where(user, in[0], in[1]);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(where, gradcheck_and_gradgradcheck_f64) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *cond = tg_test_tensor_of(TG_F64, TG_SHAPE(3, 1), (const double[]){1, 0, NAN});
  const double av[] = {0.5, -1, 2, 0.25, -0.75, 1.5}, bv[] = {3, -2};
  tg_tensor *cases[][2] = {
      {leaf_f64(TG_SHAPE(2), bv), leaf_f64(TG_SHAPE(3, 2), av)},       /* a broadcast */
      {leaf_f64(TG_SHAPE(2, 1, 2), av), leaf_f64(0, NULL, bv)},        /* 0-dim b, 3-d out */
      {tg_t(leaf_f64(TG_SHAPE(2, 3), av)), leaf_f64(TG_SHAPE(1), bv)}, /* transposed a */
  };
  for (int k = 0; k < 3; k++) {
    cr_assert_eq(tg_gradcheck(run_where, cond, 2, cases[k], 1, quiet), TG_OK, "case %d: %s", k,
                 tg_last_error_message());
    cr_assert_eq(tg_gradgradcheck(run_where, cond, 2, cases[k], 1, quiet), TG_OK, "case %d: %s", k,
                 tg_last_error_message());
  }
  tg_scope_end(sc);
}

/* grad_a = where(cond, g, 0), grad_b = where(cond, 0, g): a NaN or inf upstream gradient
 * stays on its branch; cond gets no gradient even when it requires one. */
TG_TEST(where, gradients_are_selections_and_cond_gets_none) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *cond = leaf_f64(TG_SHAPE(4), (const double[]){1, 0, NAN, -0.0});
  tg_tensor *a = leaf_f64(TG_SHAPE(4), (const double[]){1, 2, 3, 4});
  tg_tensor *b = leaf_f64(TG_SHAPE(1), (const double[]){9});
  tg_tensor *y = tg_where(cond, a, b);
  tg_tensor *g = tg_test_tensor_of(TG_F64, TG_SHAPE(4), (const double[]){NAN, INFINITY, 2, 3});
  cr_assert_eq(tg_backward(y, g), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_ieee(tg_grad(a), 4, (const double[]){NAN, 0, 2, 0}, 0);
  tg_test_expect_ieee(tg_grad(b), 1, (const double[]){INFINITY}, 0); /* 0 + inf + 0 + 3 */
  cr_assert_null(tg_grad(cond));
  tg_scope_end(sc);
}

TG_TEST(where, bad_arguments_are_errors_naming_the_operands) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *c3 = tg_test_tensor_of(TG_F32, TG_SHAPE(3), (const double[]){1, 0, 1});
  tg_tensor *m = tg_zeros(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F32));
  tg_tensor *v2 = tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_F32));
  cr_assert_null(tg_where(NULL, m, m));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_where", "cond");
  cr_assert_null(tg_where(c3, NULL, m));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_where", "a");
  cr_assert_null(tg_where(c3, m, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_where", "b");
  cr_assert_null(tg_where(c3, v2, m));
  tg_expect_error(TG_ERR_SHAPE, "tg_where", "cond is [3]", "a is [2]");
  cr_assert_null(tg_where(c3, m, v2));
  tg_expect_error(TG_ERR_SHAPE, "tg_where", "cond and a is [2, 3]", "b is [2]");
  tg_scope_end(sc);
}

/* relu's gradient is y <= 0 ? 0 : g (PyTorch's threshold_backward): 0, not NaN, where the
 * upstream gradient is NaN or inf and x <= 0; g where x is NaN or positive. Failed before
 * (g * step(y) gave NaN). In place too; double backward through it. */
TG_TEST(where, relu_gradient_is_a_selection_of_the_upstream_gradient) {
  const double xs[] = {-1, 0, -0.0, -INFINITY, NAN, 2, -3, 5};
  const double gs[] = {NAN, NAN, INFINITY, -INFINITY, 7, NAN, INFINITY, -INFINITY};
  const double want[] = {0, 0, 0, 0, 7, NAN, 0, -INFINITY};
  for (int d = 0; d < 2; d++) {
    tg_scope sc = tg_scope_begin();
    const tg_dtype dt = d ? TG_F64 : TG_F32;
    tg_tensor *x = tg_test_tensor_of(dt, TG_SHAPE(8), xs);
    cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
    cr_assert_eq(tg_backward(tg_relu(x), tg_test_tensor_of(dt, TG_SHAPE(8), gs)), TG_OK, "%s",
                 tg_last_error_message());
    tg_test_expect_ieee(tg_grad(x), 8, want, 0);
    tg_tensor *x2 = tg_test_tensor_of(dt, TG_SHAPE(8), xs);
    cr_assert_eq(tg_set_requires_grad(x2, true), TG_OK);
    tg_tensor *y = tg_mul_scalar(x2, 1.0);
    cr_assert_eq(tg_relu_(y), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_backward(y, tg_test_tensor_of(dt, TG_SHAPE(8), gs)), TG_OK, "%s",
                 tg_last_error_message());
    tg_test_expect_ieee(tg_grad(x2), 8, want, 0);
    tg_scope_end(sc);
  }
}

static tg_status run_relu(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = tg_relu(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(where, relu_gradgradcheck_still_passes) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf_f64(TG_SHAPE(2, 3), (const double[]){-1, 0.5, 2, -0.25, 1.5, -3});
  cr_assert_eq(tg_gradcheck(run_relu, NULL, 1, &x, 1, quiet), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(run_relu, NULL, 1, &x, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}
