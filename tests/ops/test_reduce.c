/* Reductions (src/ops/reduce.c): sum, mean and max over all elements or one dim, max_dim's
 * indices, sum_to_size; values by hand, strided inputs, F32 and F64, gradcheck and
 * gradgradcheck on contiguous, transposed, sliced-with-offset and broadcast inputs, errors. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

static const tg_gradcheck_options quiet = {.quiet = true};

/* ---- helpers ---- */

static tg_tensor *random_f64(int ndim, const int64_t *sizes, uint64_t seed) {
  tg_generator *gen = tg_generator_new(seed);
  tg_tensor *t = tg_uniform(ndim, sizes, -2, 2, (tg_options){.dtype = TG_F64}, gen);
  tg_generator_free(gen);
  cr_assert(t);
  return t;
}

typedef enum layout { CONTIGUOUS, TRANSPOSED, SLICED, BROADCAST, NUM_LAYOUTS } layout;
static const char *const layout_names[] = {"contiguous", "transposed", "sliced", "broadcast"};

/* An F64 input requiring grad that the function sees as [2, 3]: contiguous, the transpose of
 * a [3, 2], a stride-2 window at an offset in a [4, 7], or a [3] the function expands. */
static tg_tensor *input(layout l, uint64_t seed) {
  tg_tensor *t;
  switch (l) {
  case TRANSPOSED:
    t = tg_t(random_f64(TG_SHAPE(3, 2), seed));
    break;
  case SLICED:
    t = tg_slice(tg_narrow(random_f64(TG_SHAPE(4, 7), seed), 0, 1, 2), 1, 1, 7, 2);
    break;
  case BROADCAST:
    t = random_f64(TG_SHAPE(3), seed);
    break;
  default:
    t = random_f64(TG_SHAPE(2, 3), seed);
    break;
  }
  cr_assert(t && tg_set_requires_grad(t, true) == TG_OK, "%s", tg_last_error_message());
  return t;
}

/* ---- gradcheck ---- */

typedef tg_tensor *(*reduce_fn)(const tg_tensor *);

static tg_tensor *sum_dim_0(const tg_tensor *x) { return tg_sum_dim(x, 0, false); }
static tg_tensor *sum_dim_1_keep(const tg_tensor *x) { return tg_sum_dim(x, 1, true); }
static tg_tensor *sum_dim_neg1(const tg_tensor *x) { return tg_sum_dim(x, -1, false); }
static tg_tensor *mean_dim_1(const tg_tensor *x) { return tg_mean_dim(x, 1, false); }
static tg_tensor *mean_dim_neg2_keep(const tg_tensor *x) { return tg_mean_dim(x, -2, true); }
static tg_tensor *max_values(const tg_tensor *x, int dim, bool keepdim) {
  tg_tensor *v = NULL;
  return tg_max_dim(x, dim, keepdim, &v, NULL) == TG_OK ? v : NULL;
}
static tg_tensor *max_dim_1(const tg_tensor *x) { return max_values(x, 1, false); }
static tg_tensor *max_dim_0_keep(const tg_tensor *x) { return max_values(x, 0, true); }
static tg_tensor *max_dim_neg1_keep(const tg_tensor *x) { return max_values(x, -1, true); }
static tg_tensor *min_values(const tg_tensor *x, int dim, bool keepdim) {
  tg_tensor *v = NULL;
  return tg_min_dim(x, dim, keepdim, &v, NULL) == TG_OK ? v : NULL;
}
static tg_tensor *min_dim_1(const tg_tensor *x) { return min_values(x, 1, false); }
static tg_tensor *min_dim_0_keep(const tg_tensor *x) { return min_values(x, 0, true); }
static tg_tensor *sum_to_1x3(const tg_tensor *x) { return tg_sum_to_size(x, TG_SHAPE(1, 3)); }
static tg_tensor *sum_to_3(const tg_tensor *x) { return tg_sum_to_size(x, TG_SHAPE(3)); }
static tg_tensor *sum_to_2x1(const tg_tensor *x) { return tg_sum_to_size(x, TG_SHAPE(2, 1)); }
static tg_tensor *sum_to_scalar(const tg_tensor *x) {
  return tg_sum_to_size(x, 0, (const int64_t[]){1});
}
static tg_tensor *sum_to_row(const tg_tensor *x) {
  return tg_sum_to_size(x, TG_SHAPE(1, tg_size(x, 1)));
}
static tg_tensor *sum_to_column(const tg_tensor *x) {
  return tg_sum_to_size(x, TG_SHAPE(tg_size(x, 0), 1));
}
static tg_tensor *sum_to_same(const tg_tensor *x) { return tg_sum_to_size(x, TG_SHAPE(2, 3)); }
/* sum_dim of a product, so the second derivative is not zero */
static tg_tensor *sum_dim_of_square(const tg_tensor *x) {
  return tg_sum_dim(tg_mul(x, x), 0, false);
}
static tg_tensor *max_of_square(const tg_tensor *x) { return tg_max(tg_mul(x, x)); }

typedef struct reduce_case {
  const char *name;
  reduce_fn fn;
} reduce_case;

static const reduce_case cases[] = {
    {"sum", tg_sum},
    {"sum_dim 0", sum_dim_0},
    {"sum_dim 1 keepdim", sum_dim_1_keep},
    {"sum_dim -1", sum_dim_neg1},
    {"mean", tg_mean},
    {"mean_dim 1", mean_dim_1},
    {"mean_dim -2 keepdim", mean_dim_neg2_keep},
    {"max", tg_max},
    {"max_dim 1", max_dim_1},
    {"max_dim 0 keepdim", max_dim_0_keep},
    {"max_dim -1 keepdim", max_dim_neg1_keep},
    {"min", tg_min},
    {"min_dim 1", min_dim_1},
    {"min_dim 0 keepdim", min_dim_0_keep},
    {"sum_to_size [1, 3]", sum_to_1x3},
    {"sum_to_size [3]", sum_to_3},
    {"sum_to_size [2, 1]", sum_to_2x1},
    {"sum_to_size []", sum_to_scalar},
    {"sum_to_size [2, 3]", sum_to_same},
    {"sum_dim of x*x", sum_dim_of_square},
    {"max of x*x", max_of_square},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static tg_status run_case(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const reduce_case *c = user;
  const tg_tensor *x = tg_ndim(in[0]) == 1 ? tg_expand(in[0], TG_SHAPE(2, 3)) : in[0];
  out[0] = c->fn(x);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(reduce, gradcheck_and_gradgradcheck_every_layout) {
  for (int k = 0; k < N_CASES; k++) {
    for (int l = 0; l < NUM_LAYOUTS; l++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *x = input((layout)l, 20 + (uint64_t)k);
      cr_assert_eq(tg_gradcheck(run_case, (void *)&cases[k], 1, &x, 1, quiet), TG_OK, "%s %s: %s",
                   cases[k].name, layout_names[l], tg_last_error_message());
      cr_assert_eq(tg_gradgradcheck(run_case, (void *)&cases[k], 1, &x, 1, quiet), TG_OK,
                   "%s %s: %s", cases[k].name, layout_names[l], tg_last_error_message());
      tg_scope_end(sc);
    }
  }
}

/* Reductions of 3-D inputs over each dim, including the middle one. */
TG_TEST(reduce, gradcheck_3d_every_dim) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_permute(random_f64(TG_SHAPE(4, 2, 3), 7), 3, (const int[]){1, 2, 0});
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  static const reduce_case dims[] = {
      {"sum_dim 0", sum_dim_0},     {"sum_dim 1 keepdim", sum_dim_1_keep},
      {"sum_dim -1", sum_dim_neg1}, {"mean_dim 1", mean_dim_1},
      {"max_dim 1", max_dim_1},     {"max_dim 0 keepdim", max_dim_0_keep}};
  for (int k = 0; k < 6; k++) {
    cr_assert_eq(tg_gradcheck(run_case, (void *)&dims[k], 1, &x, 1, quiet), TG_OK, "%s: %s",
                 dims[k].name, tg_last_error_message());
    cr_assert_eq(tg_gradgradcheck(run_case, (void *)&dims[k], 1, &x, 1, quiet), TG_OK, "%s: %s",
                 dims[k].name, tg_last_error_message());
  }
  tg_scope_end(sc);
}

/* ---- values ---- */

TG_TEST(reduce, sum_and_mean_by_hand) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_dtype t = (tg_dtype)dt;
    tg_tensor *x = tg_test_tensor_of(t, TG_SHAPE(2, 3), (const double[]){1, 2, 3, 4, 5, 6});
    tg_tensor *s = tg_sum(x);
    cr_assert_eq(tg_ndim(s), 0);
    cr_assert_eq(tg_tensor_dtype(s), t);
    tg_test_expect_values(s, 1, (const double[]){21}, 0);
    tg_tensor *s0 = tg_sum_dim(x, 0, false);
    tg_assert_sizes(s0, 3);
    tg_test_expect_values(s0, 3, (const double[]){5, 7, 9}, 0);
    tg_tensor *s1 = tg_sum_dim(x, 1, true);
    tg_assert_sizes(s1, 2, 1);
    tg_test_expect_values(s1, 2, (const double[]){6, 15}, 0);
    tg_assert_sizes(tg_sum_dim(x, -2, true), 1, 3);
    tg_test_expect_values(tg_sum_dim(x, -1, false), 2, (const double[]){6, 15}, 0);
    tg_tensor *m = tg_mean(x);
    cr_assert_eq(tg_ndim(m), 0);
    tg_test_expect_values(m, 1, (const double[]){3.5}, 0);
    tg_test_expect_values(tg_mean_dim(x, 0, false), 3, (const double[]){2.5, 3.5, 4.5}, 1e-15);
    tg_tensor *m1 = tg_mean_dim(x, 1, true);
    tg_assert_sizes(m1, 2, 1);
    tg_test_expect_values(m1, 2, (const double[]){2, 5}, 1e-15);
  }
  tg_scope_end(sc);
}

TG_TEST(reduce, zero_dim_and_empty_inputs) {
  tg_scope sc = tg_scope_begin();
  tg_options o = {.dtype = TG_F64};
  tg_tensor *s = tg_full(0, (const int64_t[]){1}, 3.0, o);
  tg_test_expect_values(tg_sum(s), 1, (const double[]){3}, 0);
  tg_tensor *sd = tg_sum_dim(s, 0, false);
  cr_assert_eq(tg_ndim(sd), 0);
  tg_test_expect_values(sd, 1, (const double[]){3}, 0);
  cr_assert_eq(tg_ndim(tg_mean_dim(s, -1, true)), 0);
  tg_test_expect_values(tg_max(s), 1, (const double[]){3}, 0);
  tg_tensor *v, *i;
  cr_assert_eq(tg_max_dim(s, 0, false, &v, &i), TG_OK);
  cr_assert_eq(tg_ndim(v), 0);
  tg_test_expect_values(i, 1, (const double[]){0}, 0);

  tg_tensor *e = tg_zeros(TG_SHAPE(0, 3), o);
  tg_test_expect_values(tg_sum(e), 1, (const double[]){0}, 0);
  tg_test_expect_values(tg_sum_dim(e, 0, false), 3, (const double[]){0, 0, 0}, 0);
  tg_assert_sizes(tg_sum_dim(e, 1, false), 0);
  cr_assert(isnan(tg_test_at(tg_mean(e), 0)), "the mean of nothing is NaN, as in PyTorch");
  tg_expect_ok();
  tg_scope_end(sc);
}

/* max/min over all elements with a NaN result share the gradient evenly among the NaNs
 * (PyTorch's evenly_distribute_backward); max_dim/min_dim give the first NaN's index and
 * its gradient is one-hot there. Failed before: max's gradient was 0 everywhere. */
TG_TEST(reduce, max_and_min_gradient_when_the_result_is_nan) {
  const double xs[] = {1, NAN, 3, NAN, 2};
  for (int d = 0; d < 2; d++)
    for (int which = 0; which < 2; which++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *x = tg_test_tensor_of(d ? TG_F64 : TG_F32, TG_SHAPE(5), xs);
      cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
      tg_tensor *y = which ? tg_min(x) : tg_max(x);
      tg_test_expect_ieee(y, 1, (const double[]){NAN}, 0);
      cr_assert_eq(tg_backward(y, NULL), TG_OK, "%s", tg_last_error_message());
      tg_test_expect_ieee(tg_grad(x), 5, (const double[]){0, 0.5, 0, 0.5, 0}, 0);
      tg_scope_end(sc);
    }
  /* torch.max(x, 1) / torch.min(x, 1) of [[1, nan, 3, nan], [2, 5, 5, 1]] */
  const double rows[] = {1, NAN, 3, NAN, 2, 5, 5, 1};
  for (int which = 0; which < 2; which++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 4), rows);
    cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
    tg_tensor *values = NULL, *indices = NULL;
    tg_status st = which ? tg_min_dim(x, 1, false, &values, &indices)
                         : tg_max_dim(x, 1, false, &values, &indices);
    cr_assert_eq(st, TG_OK, "%s", tg_last_error_message());
    tg_test_expect_ieee(values, 2, (const double[]){NAN, which ? 1 : 5}, 0);
    tg_test_expect_values(indices, 2, (const double[]){1, which ? 3 : 1}, 0);
    cr_assert_eq(tg_backward(tg_sum(values), NULL), TG_OK, "%s", tg_last_error_message());
    tg_test_expect_ieee(tg_grad(x), 8,
                        which ? (const double[]){0, 1, 0, 0, 0, 0, 0, 1}
                              : (const double[]){0, 1, 0, 0, 0, 1, 0, 0},
                        0);
    tg_scope_end(sc);
  }
}

TG_TEST(reduce, max_and_max_dim_by_hand) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_dtype t = (tg_dtype)dt;
    tg_tensor *x = tg_test_tensor_of(t, TG_SHAPE(2, 3), (const double[]){1, 7, 7, -4, -5, 2});
    tg_tensor *m = tg_max(x);
    cr_assert_eq(tg_ndim(m), 0);
    tg_test_expect_values(m, 1, (const double[]){7}, 0);
    tg_tensor *v, *i;
    cr_assert_eq(tg_max_dim(x, 1, false, &v, &i), TG_OK);
    tg_assert_sizes(v, 2);
    tg_assert_sizes(i, 2);
    cr_assert_eq(tg_tensor_dtype(i), TG_I64);
    cr_assert_eq(tg_tensor_dtype(v), t);
    tg_test_expect_values(v, 2, (const double[]){7, 2}, 0);
    tg_test_expect_values(i, 2, (const double[]){1, 2}, 0); /* the first of tied maxima */
    cr_assert_eq(tg_max_dim(x, -2, true, &v, &i), TG_OK);
    tg_assert_sizes(v, 1, 3);
    tg_assert_sizes(i, 1, 3);
    tg_test_expect_values(v, 3, (const double[]){1, 7, 7}, 0);
    tg_test_expect_values(i, 3, (const double[]){0, 0, 0}, 0);
    /* either output may be left out */
    cr_assert_eq(tg_max_dim(x, 0, false, NULL, &i), TG_OK);
    tg_test_expect_values(i, 3, (const double[]){0, 0, 0}, 0);
    cr_assert_eq(tg_max_dim(x, 0, false, &v, NULL), TG_OK);
    tg_test_expect_values(v, 3, (const double[]){1, 7, 7}, 0);
  }
  tg_scope_end(sc);
}

/* min is max's mirror: the first of tied minima, NaN propagates, ties share the gradient,
 * and the errors name tg_min / tg_min_dim. */
TG_TEST(reduce, min_and_min_dim_by_hand) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_dtype t = (tg_dtype)dt;
    tg_tensor *x = tg_test_tensor_of(t, TG_SHAPE(2, 3), (const double[]){1, -7, -7, 4, 5, -2});
    tg_test_expect_values(tg_min(x), 1, (const double[]){-7}, 0);
    tg_tensor *v, *i;
    cr_assert_eq(tg_min_dim(x, 1, false, &v, &i), TG_OK);
    tg_test_expect_values(v, 2, (const double[]){-7, -2}, 0);
    tg_test_expect_values(i, 2, (const double[]){1, 2}, 0); /* the first of tied minima */
    cr_assert_eq(tg_min_dim(x, -2, true, &v, &i), TG_OK);
    tg_assert_sizes(v, 1, 3);
    tg_test_expect_values(v, 3, (const double[]){1, -7, -7}, 0);
    tg_test_expect_values(i, 3, (const double[]){0, 0, 0}, 0);
    tg_tensor *n = tg_test_tensor_of(t, TG_SHAPE(3), (const double[]){1, NAN, -3});
    cr_assert(isnan(tg_test_at(tg_min(n), 0)), "NaN propagates");
    cr_assert_eq(tg_min_dim(n, 0, false, &v, &i), TG_OK);
    tg_test_expect_values(i, 1, (const double[]){1}, 0);
  }
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 3), (const double[]){1, -7, -7, 4, 5, -2});
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  cr_assert_eq(tg_backward(tg_min(x), NULL), TG_OK);
  tg_test_expect_values(tg_grad(x), 6, (const double[]){0, 0.5, 0.5, 0, 0, 0}, 0);
  tg_tensor *e = tg_zeros(TG_SHAPE(2, 0), TG_OPTS_DEFAULT);
  cr_assert_null(tg_min(e));
  tg_expect_error(TG_ERR_SHAPE, "tg_min: x is [2, 0]", "the min of no elements");
  cr_assert_eq(tg_min_dim(e, 1, false, NULL, NULL), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_min_dim: x is [2, 0]", "dim 1 of size 0");
  cr_assert_eq(tg_min_dim(x, 5, false, NULL, NULL), TG_ERR_INDEX);
  tg_expect_error(TG_ERR_INDEX, "tg_min_dim", "dim 5 is out of range");
  tg_scope_end(sc);
}

/* A result the caller did not ask for is not leaked (the scope owns both). */
TG_TEST(reduce, max_dim_unasked_results_do_not_leak) {
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  tg_tensor *v = NULL, *i = NULL;
  cr_assert_eq(tg_max_dim(x, 1, false, &v, NULL), TG_OK);
  cr_assert_eq(tg_max_dim(x, 1, false, NULL, &i), TG_OK);
  cr_assert(v && i);
  cr_assert_eq(tg_max_dim(x, 1, false, NULL, NULL), TG_OK);
}

/* The gradient of max is shared among tied maxima; max_dim's goes to the index it returns. */
TG_TEST(reduce, max_gradients_with_ties) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 3), (const double[]){1, 7, 7, -4, -5, 2});
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  cr_assert_eq(tg_backward(tg_max(x), NULL), TG_OK);
  tg_test_expect_values(tg_grad(x), 6, (const double[]){0, 0.5, 0.5, 0, 0, 0}, 0);
  cr_assert_eq(tg_zero_grad(x), TG_OK);
  tg_tensor *v, *i;
  cr_assert_eq(tg_max_dim(x, 1, false, &v, &i), TG_OK);
  cr_assert(tg_requires_grad(v));
  cr_assert(!tg_requires_grad(i), "indices are not differentiable");
  cr_assert_eq(tg_backward(v, tg_test_tensor_of(TG_F64, TG_SHAPE(2), (const double[]){10, 20})),
               TG_OK);
  tg_test_expect_values(tg_grad(x), 6, (const double[]){0, 10, 0, 0, 0, 20}, 0);
  tg_scope_end(sc);
}

TG_TEST(reduce, strided_inputs_match_contiguous) {
  static const reduce_case all[] = {{"sum", tg_sum},
                                    {"sum_dim 0", sum_dim_0},
                                    {"sum_dim 1 keepdim", sum_dim_1_keep},
                                    {"mean", tg_mean},
                                    {"mean_dim 1", mean_dim_1},
                                    {"max", tg_max},
                                    {"max_dim 1", max_dim_1},
                                    {"max_dim 0 keepdim", max_dim_0_keep},
                                    {"min", tg_min},
                                    {"min_dim 1", min_dim_1},
                                    {"sum_to_size [1, n]", sum_to_row},
                                    {"sum_to_size [m, 1]", sum_to_column}};
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_tensor *base = tg_to_dtype(random_f64(TG_SHAPE(5, 9), 4), (tg_dtype)dt);
    tg_tensor *views[] = {tg_narrow(tg_t(base), 1, 0, 3),                       /* [9, 3] */
                          tg_slice(tg_narrow(base, 0, 1, 3), 1, 2, 9, 3),       /* [3, 3] offset */
                          tg_expand(tg_narrow(base, 0, 3, 1), TG_SHAPE(4, 9))}; /* stride 0 */
    for (int v = 0; v < 3; v++) {
      const tg_tensor *x = views[v];
      cr_assert(x, "%s", tg_last_error_message());
      for (int k = 0; k < 10; k++) {
        tg_tensor *got = all[k].fn(x), *want = all[k].fn(tg_clone(x));
        cr_assert(got && want, "%s view %d: %s", all[k].name, v, tg_last_error_message());
        tg_assert_close(got, want, dt == TG_F32 ? 1e-6 : 1e-14, 0);
      }
    }
    /* a permuted dense tensor sums in one pass like its contiguous twin */
    tg_tensor *perm = tg_permute(tg_view(base, TG_SHAPE(3, 3, 5)), 3, (const int[]){2, 0, 1});
    tg_assert_close(tg_sum(perm), tg_sum(base), 0, 0);
  }
  tg_scope_end(sc);
}

/* Sums accumulate in double: a million float ones sum to exactly 1e6. */
TG_TEST(reduce, float_sums_are_accurate) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_full(TG_SHAPE(1000, 1000), 0.1, TG_OPTS_DEFAULT);
  double s;
  cr_assert_eq(tg_item(tg_sum(x), &s), TG_OK);
  cr_assert(fabs(s - 1e5) < 1e-2, "sum %.9g", s);
  cr_assert_eq(tg_item(tg_sum(tg_t(x)), &s), TG_OK);
  cr_assert(fabs(s - 1e5) < 1e-2, "sum %.9g", s);
  tg_scope_end(sc);
}

TG_TEST(reduce, sum_to_size_by_hand) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 3), (const double[]){1, 2, 3, 4, 5, 6});
  tg_tensor *r = tg_sum_to_size(x, TG_SHAPE(1, 3));
  tg_assert_sizes(r, 1, 3);
  tg_test_expect_values(r, 3, (const double[]){5, 7, 9}, 0);
  r = tg_sum_to_size(x, TG_SHAPE(3));
  tg_assert_sizes(r, 3);
  tg_test_expect_values(r, 3, (const double[]){5, 7, 9}, 0);
  r = tg_sum_to_size(x, TG_SHAPE(2, 1));
  tg_assert_sizes(r, 2, 1);
  tg_test_expect_values(r, 2, (const double[]){6, 15}, 0);
  r = tg_sum_to_size(x, TG_SHAPE(1, 1));
  tg_assert_sizes(r, 1, 1);
  tg_test_expect_values(r, 1, (const double[]){21}, 0);
  r = tg_sum_to_size(x, 0, (const int64_t[]){1});
  cr_assert_eq(tg_ndim(r), 0);
  tg_test_expect_values(r, 1, (const double[]){21}, 0);
  /* already the right sizes: x itself, nothing summed (as in PyTorch) */
  r = tg_sum_to_size(x, TG_SHAPE(2, 3));
  cr_assert(tg_shares_storage(r, x));
  tg_test_expect_values(r, 6, (const double[]){1, 2, 3, 4, 5, 6}, 0);
  /* leading dims and inner unit dims together */
  tg_tensor *y = tg_ones(TG_SHAPE(4, 2, 3), (tg_options){.dtype = TG_F64});
  r = tg_sum_to_size(y, TG_SHAPE(2, 1));
  tg_assert_sizes(r, 2, 1);
  tg_test_expect_values(r, 2, (const double[]){12, 12}, 0);
  tg_scope_end(sc);
}

/* The backward of sum is the gradient expanded: a stride-0 view, not a copy. */
TG_TEST(reduce, sum_backward_expands_without_copying) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(3, 4), (tg_options){.dtype = TG_F64, .requires_grad = true});
  tg_tensor *y = tg_mul_scalar(x, 2);
  const tg_tensor *outs[] = {tg_sum(y)}, *ins[] = {y};
  tg_tensor *g = NULL;
  cr_assert_eq(tg_autograd_grad(1, outs, (const tg_tensor *const[]){NULL}, 1, ins, &g,
                                (tg_backward_options){0}, false),
               TG_OK, "%s", tg_last_error_message());
  tg_assert_sizes(g, 3, 4);
  cr_assert(tg_stride(g, 0) == 0 && tg_stride(g, 1) == 0);
  tg_test_expect_values(g, 12, (const double[]){1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 0);
  tg_scope_end(sc);
}

/* ---- errors ---- */

TG_TEST(reduce, dims_out_of_range_are_rejected) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_sum_dim(x, 2, false));
  tg_expect_error(TG_ERR_INDEX, "tg_sum_dim", "dim 2 is out of range");
  cr_assert_null(tg_mean_dim(x, -3, true));
  tg_expect_error(TG_ERR_INDEX, "tg_mean_dim", "dim -3 is out of range");
  tg_tensor *v = x, *i = x;
  cr_assert_eq(tg_max_dim(x, 5, false, &v, &i), TG_ERR_INDEX);
  cr_assert(v == NULL && i == NULL);
  tg_expect_error(TG_ERR_INDEX, "tg_max_dim", "dim 5 is out of range");
  tg_tensor *s = tg_ones(0, (const int64_t[]){1}, TG_OPTS_DEFAULT);
  cr_assert_null(tg_sum_dim(s, 1, false));
  tg_expect_error(TG_ERR_INDEX, "tg_sum_dim", "dim 1");
  tg_scope_end(sc);
}

/* int64: sums and selections keep int64 (tests/ops/test_promotion.c has the values); a mean
 * refuses it, as PyTorch does, naming the cast to write. */
TG_TEST(reduce, int64_inputs_sum_select_or_refuse_the_mean) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *i = tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_I64});
  cr_assert_eq(tg_tensor_dtype(tg_sum(i)), TG_I64);
  cr_assert_eq(tg_tensor_dtype(tg_max(i)), TG_I64);
  cr_assert_eq(tg_max_dim(i, 0, false, NULL, NULL), TG_OK);
  cr_assert_eq(tg_tensor_dtype(tg_sum_to_size(i, TG_SHAPE(1))), TG_I64);
  tg_expect_ok();
  cr_assert_null(tg_mean_dim(i, 0, false));
  tg_expect_error(TG_ERR_DTYPE, "tg_mean_dim: x is int64", "tg_to_dtype(x, TG_F32)");
  cr_assert_null(tg_mean(i));
  tg_expect_error(TG_ERR_DTYPE, "tg_mean: x is int64");
  tg_scope_end(sc);
}

TG_TEST(reduce, sum_to_size_rejects_incompatible_sizes) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_sum_to_size(x, TG_SHAPE(4)));
  tg_expect_error(TG_ERR_SHAPE, "tg_sum_to_size: sizes is [4] and x is [2, 3]");
  cr_assert_null(tg_sum_to_size(x, TG_SHAPE(1, 2, 3)));
  tg_expect_error(TG_ERR_SHAPE, "tg_sum_to_size: sizes is [1, 2, 3] and x is [2, 3]");
  cr_assert_null(tg_sum_to_size(x, TG_SHAPE(3, 1)));
  tg_expect_error(TG_ERR_SHAPE, "sizes is [3, 1]");
  cr_assert_null(tg_sum_to_size(x, -1, NULL));
  tg_expect_error(TG_ERR_SHAPE, "tg_sum_to_size: ndim -1");
  tg_scope_end(sc);
}

TG_TEST(reduce, max_of_nothing_is_rejected) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *e = tg_zeros(TG_SHAPE(2, 0), TG_OPTS_DEFAULT);
  cr_assert_null(tg_max(e));
  tg_expect_error(TG_ERR_SHAPE, "tg_max: x is [2, 0]");
  cr_assert_eq(tg_max_dim(e, 1, false, NULL, NULL), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_max_dim: x is [2, 0]", "dim 1 of size 0");
  /* over the other dim there is nothing to take a max of, and nothing to return */
  tg_tensor *v;
  cr_assert_eq(tg_max_dim(e, 0, false, &v, NULL), TG_OK);
  tg_assert_sizes(v, 0);
  tg_scope_end(sc);
}

TG_TEST(reduce, null_inputs_keep_the_first_error) {
  tg_scope sc = tg_scope_begin();
  cr_assert_null(tg_sum(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sum: x is NULL");
  cr_assert_eq(tg_max_dim(NULL, 0, false, NULL, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_dim: x is NULL");
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_mean(tg_sum_dim(tg_max(tg_sum_dim(x, 7, false)), 0, false)));
  tg_expect_error(TG_ERR_INDEX, "tg_sum_dim: dim 7");
  cr_assert_null(tg_sum_to_size(NULL, TG_SHAPE(1)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sum_to_size: x is NULL");
  tg_scope_end(sc);
}

/* max_dim / min_dim over long contiguous rows (the two-pass scan of cpu_reduce.c) against the
 * one-pass rule written here: the first strictly better element wins, the first NaN beats
 * everything, -0 and +0 tie. Rows of 64 to 300 elements with repeated maxima, signed zeros,
 * infinities and NaNs planted at the front, middle and end, in F32, F64 and I64. */
static void one_pass(const double *row, int64_t n, bool max, double *value, int64_t *index) {
  double best = row[0];
  int64_t at = 0;
  for (int64_t r = 1; r < n && best == best; r++)
    if (row[r] != row[r] || (max ? row[r] > best : row[r] < best)) best = row[r], at = r;
  *value = best;
  *index = at;
}

TG_TEST(reduce, max_and_min_over_long_rows_keep_the_first_best_and_the_first_nan) {
  const int64_t lengths[] = {64, 65, 79, 128, 300};
  const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};
  uint64_t seed = 12345;
  for (int li = 0; li < 5; li++)
    for (int di = 0; di < 3; di++)
      for (int pattern = 0; pattern < 8; pattern++) {
        const int64_t n = lengths[li], rows = 3;
        const tg_dtype dt = dtypes[di];
        if (dt == TG_I64 && pattern >= 4) continue; /* no NaN, zeros or infinities to plant */
        double v[3 * 300];
        for (int64_t i = 0; i < rows * n; i++) {
          seed = seed * 6364136223846793005u + 1442695040888963407u;
          v[i] = (double)(int64_t)((seed >> 33) % 7) - 3; /* many ties */
        }
        for (int64_t r = 0; r < rows; r++) {
          double *row = v + r * n;
          const int64_t spot[3] = {0, n / 2 + r, n - 1};
          if (pattern == 1) row[spot[r]] = 9, row[n - 1 - r] = 9;         /* repeated maxima */
          if (pattern == 2) row[spot[r]] = -9, row[(n - 1 + r) / 2] = -9; /* repeated minima */
          if (pattern == 3) row[n - 1] = 100 + r;                         /* the best last */
          if (pattern == 4) row[spot[r]] = NAN, row[n - 1] = NAN;         /* two NaNs */
          if (pattern == 5)                                               /* only signed zeros */
            for (int64_t i = 0; i < n; i++) row[i] = (i + r) % 3 ? 0.0 : -0.0;
          if (pattern == 6) row[spot[r]] = INFINITY, row[n / 3] = -INFINITY;
          if (pattern == 7) row[spot[r]] = -INFINITY, row[(2 * n) / 3] = INFINITY, row[1] = NAN;
        }
        tg_scope sc = tg_scope_begin();
        const int64_t sizes[2] = {rows, n};
        tg_tensor *x = tg_to_dtype(tg_from_data(2, sizes, v, (tg_options){.dtype = TG_F64}), dt);
        cr_assert_not_null(x, "%s", tg_last_error_message());
        for (int max = 0; max < 2; max++) {
          tg_tensor *values = NULL, *indices = NULL;
          cr_assert_eq((max ? tg_max_dim : tg_min_dim)(x, 1, false, &values, &indices), TG_OK);
          double got_v[3];
          int64_t got_i[3];
          cr_assert_eq(tg_to_host_array(tg_to_dtype(values, TG_F64), got_v, sizeof got_v), TG_OK);
          cr_assert_eq(tg_to_host_array(indices, got_i, sizeof got_i), TG_OK);
          double host[3 * 300];
          cr_assert_eq(
              tg_to_host_array(tg_to_dtype(x, TG_F64), host, sizeof(double) * (size_t)(rows * n)),
              TG_OK);
          for (int64_t r = 0; r < rows; r++) {
            double want_v;
            int64_t want_i;
            one_pass(host + r * n, n, max, &want_v, &want_i);
            cr_assert_eq(got_i[r], want_i,
                         "%s n=%lld pattern %d row %lld %s: index %lld, want %lld",
                         tg_dtype_name(dt), (long long)n, pattern, (long long)r,
                         max ? "max" : "min", (long long)got_i[r], (long long)want_i);
            const bool same = (got_v[r] != got_v[r] && want_v != want_v) ||
                              (got_v[r] == want_v && signbit(got_v[r]) == signbit(want_v));
            cr_assert(same, "%s n=%lld pattern %d row %lld: value %g, want %g", tg_dtype_name(dt),
                      (long long)n, pattern, (long long)r, got_v[r], want_v);
          }
        }
        tg_scope_end(sc);
      }
}

/* max_dim / min_dim over an outer dim, against the same one-pass rule: each column of x is a
 * reduced run, planted as above, in three layouts, each its own row path of cpu_reduce.c:
 * x contiguous [n, cols] (the outputs and x's columns unit-stride: reduced in place, without
 * branches), every other column of [n, 2 cols] (x strided: one branch per element), and
 * x [cols, n] transposed (the reduced dim contiguous). 37 columns: a vector loop and a tail. */
TG_TEST(reduce, max_and_min_over_an_outer_dim_keep_the_first_best_and_the_first_nan) {
  enum { COLS = 37, N_MAX = 65 };
  const int64_t lengths[] = {1, 2, 3, 17, 65};
  const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};
  uint64_t seed = 777;
  for (int li = 0; li < 5; li++)
    for (int di = 0; di < 3; di++)
      for (int pattern = 0; pattern < 8; pattern++)
        for (int layout = 0; layout < 3; layout++) {
          const int64_t n = lengths[li];
          const tg_dtype dt = dtypes[di];
          if (dt == TG_I64 && pattern >= 4) continue;
          double col[COLS][N_MAX]; /* col[c] is the run reduced into output c */
          for (int64_t c = 0; c < COLS; c++) {
            double *run = col[c];
            for (int64_t i = 0; i < n; i++) {
              seed = seed * 6364136223846793005u + 1442695040888963407u;
              run[i] = (double)(int64_t)((seed >> 33) % 5) - 2;
            }
            const int64_t spot = (c * 7) % n, other = (c * 3 + 1) % n;
            if (pattern == 1) run[spot] = 9, run[other] = 9;
            if (pattern == 2) run[spot] = -9, run[other] = -9;
            if (pattern == 3) run[n - 1] = 100 + (double)c;
            if (pattern == 4 && c % 3) run[spot] = NAN, run[n - 1] = NAN;
            if (pattern == 5)
              for (int64_t i = 0; i < n; i++) run[i] = (i + c) % 3 ? 0.0 : -0.0;
            if (pattern == 6) run[spot] = INFINITY, run[other] = -INFINITY;
            if (pattern == 7) run[spot] = -INFINITY, run[other] = INFINITY, run[n / 2] = NAN;
          }
          /* host[i][c * step] = col[c][i] (layouts 0 and 1), host[c][i] (layout 2) */
          const int64_t step = layout == 1 ? 2 : 1;
          double host[N_MAX * 2 * COLS];
          for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < COLS * step; c++)
              host[i * COLS * step + c] = c % step ? -50 : col[c / step][i];
          if (layout == 2)
            for (int64_t c = 0; c < COLS; c++)
              for (int64_t i = 0; i < n; i++) host[c * n + i] = col[c][i];
          tg_scope sc = tg_scope_begin();
          const int64_t sizes[2] = {layout == 2 ? COLS : n, layout == 2 ? n : COLS * step};
          tg_tensor *full =
              tg_to_dtype(tg_from_data(2, sizes, host, (tg_options){.dtype = TG_F64}), dt);
          tg_tensor *x = layout == 0   ? full
                         : layout == 1 ? tg_as_strided(full, 2, (const int64_t[]){n, COLS},
                                                       (const int64_t[]){2 * COLS, 2}, 0)
                                       : tg_t(full);
          cr_assert_not_null(x, "%s", tg_last_error_message());
          for (int max = 0; max < 2; max++) {
            tg_tensor *values = NULL, *indices = NULL;
            cr_assert_eq((max ? tg_max_dim : tg_min_dim)(x, 0, false, &values, &indices), TG_OK,
                         "%s", tg_last_error_message());
            double got_v[COLS];
            int64_t got_i[COLS];
            cr_assert_eq(tg_to_host_array(tg_to_dtype(values, TG_F64), got_v, sizeof got_v), TG_OK);
            cr_assert_eq(tg_to_host_array(indices, got_i, sizeof got_i), TG_OK);
            for (int64_t c = 0; c < COLS; c++) {
              double want_v;
              int64_t want_i;
              one_pass(col[c], n, max, &want_v, &want_i);
              const bool same = (got_v[c] != got_v[c] && want_v != want_v) ||
                                (got_v[c] == want_v && signbit(got_v[c]) == signbit(want_v));
              cr_assert(got_i[c] == want_i && same,
                        "%s n=%lld pattern %d layout %d column %lld %s: %g at %lld, want %g at "
                        "%lld",
                        tg_dtype_name(dt), (long long)n, pattern, layout, (long long)c,
                        max ? "max" : "min", got_v[c], (long long)got_i[c], want_v,
                        (long long)want_i);
            }
          }
          tg_scope_end(sc);
        }
}
