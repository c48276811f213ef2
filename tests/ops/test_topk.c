/* tg_topk: values and indices by hand (PyTorch's where its order is defined), ties, NaN and
 * ±0, k = 0 and k = the size, every dim and layout, 0-dim and empty inputs, I64, errors, the
 * gradient (scattered into zeros, twice differentiable), a long row against a sort, and the
 * allocation sweep. The OpInfo checks run in test_index.c with the other indexing ops. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"
#include "alloc_sweep.h"

#include "tg/index.h"

static const tg_gradcheck_options quiet = {.quiet = true};

static tg_tensor *f64(int ndim, const int64_t *sizes, const double *values) {
  return tg_test_tensor_of(TG_F64, ndim, sizes, values);
}
#define F64(shape, ...) f64(shape, (const double[]){__VA_ARGS__})

static void expect(const tg_tensor *t, int64_t n, const double *want) {
  cr_assert_not_null(t, "%s", tg_last_error_message());
  tg_test_expect_ieee(t, n, want, 0);
}
#define EXPECT(t, ...)                                                                             \
  expect(t, (int64_t)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)),                     \
         (const double[]){__VA_ARGS__})

static void topk(const tg_tensor *x, int64_t k, int dim, bool largest, tg_tensor **v,
                 tg_tensor **i) {
  cr_assert_eq(tg_topk(x, k, dim, largest, true, v, i), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_dtype(*i), TG_I64);
  cr_assert_eq(tg_tensor_dtype(*v), tg_tensor_dtype(x));
}

TG_TEST(topk, values_by_hand) {
  tg_tensor *v, *i;
  tg_tensor *x = F64(TG_SHAPE(2, 4), 5, 1, 4, 2, -3, 8, 0, 7);
  topk(x, 2, 1, true, &v, &i);
  tg_assert_sizes(v, 2, 2);
  EXPECT(v, 5, 4, 8, 7);
  EXPECT(i, 0, 2, 1, 3);
  topk(x, 3, -1, false, &v, &i);
  EXPECT(v, 1, 2, 4, -3, 0, 7);
  EXPECT(i, 1, 3, 2, 0, 2, 3);
  topk(x, 1, 0, true, &v, &i); /* along dim 0 */
  tg_assert_sizes(v, 1, 4);
  EXPECT(v, 5, 8, 4, 7);
  EXPECT(i, 0, 1, 0, 1);
  /* transposed x: the same along the other dim */
  topk(tg_t(x), 2, 0, true, &v, &i);
  tg_assert_sizes(v, 2, 2);
  EXPECT(v, 5, 8, 4, 7);
  EXPECT(i, 0, 1, 2, 3);
  /* 3-D, middle dim, stepped */
  tg_tensor *x3 = tg_slice(
      tg_reshape(tg_arange(0, 24, 1, TG_OPTS(.dtype = TG_F64)), TG_SHAPE(2, 3, 4)), 2, 0, 4, 2);
  topk(x3, 2, 1, true, &v, &i); /* x3[a, :, c] = 12 a + 4 j + 2 c */
  tg_assert_sizes(v, 2, 2, 2);
  EXPECT(v, 8, 10, 4, 6, 20, 22, 16, 18);
  EXPECT(i, 2, 2, 1, 1, 2, 2, 1, 1);
  /* I64 */
  topk(tg_to_dtype(x, TG_I64), 2, 1, false, &v, &i);
  EXPECT(v, 1, 2, -3, 0);
  EXPECT(i, 1, 3, 0, 2);
}

TG_TEST(topk, ties_nan_and_signed_zeros) {
  tg_tensor *v, *i;
  /* equal values in index order (PyTorch's CPU gives [2, 4] here: its sort's order, not a
   * documented one) */
  tg_tensor *x = F64(TG_SHAPE(6), 1, 3, 3, 2, 3, 1);
  topk(x, 2, 0, true, &v, &i);
  EXPECT(v, 3, 3);
  EXPECT(i, 1, 2);
  topk(x, 6, 0, true, &v, &i); /* k = the size: all, sorted */
  EXPECT(v, 3, 3, 3, 2, 1, 1);
  EXPECT(i, 1, 2, 4, 3, 0, 5);
  topk(x, 3, 0, false, &v, &i);
  EXPECT(v, 1, 1, 2);
  EXPECT(i, 0, 5, 3);
  /* NaN is above every number: first when largest, last when smallest (PyTorch) */
  tg_tensor *n = F64(TG_SHAPE(5), 1, NAN, INFINITY, NAN, -INFINITY);
  topk(n, 3, 0, true, &v, &i);
  EXPECT(v, NAN, NAN, INFINITY);
  EXPECT(i, 1, 3, 2);
  topk(n, 4, 0, false, &v, &i); /* PyTorch's CPU picks the NaN at 3: again its sort's order */
  EXPECT(v, -INFINITY, 1, INFINITY, NAN);
  EXPECT(i, 4, 0, 2, 1);
  /* ±0 are equal: index order, the signs kept */
  topk(F64(TG_SHAPE(3), -0.0, 0.0, -0.0), 2, 0, true, &v, &i);
  EXPECT(i, 0, 1);
  double got[2];
  cr_assert_eq(tg_to_host_array(v, got, sizeof got), TG_OK);
  cr_assert(signbit(got[0]) && !signbit(got[1]));
}

TG_TEST(topk, sorted_false_gives_the_same_order) {
  tg_tensor *x = F64(TG_SHAPE(5), 0.5, -1, 9, 3, 9);
  tg_tensor *v, *i, *v2, *i2;
  cr_assert_eq(tg_topk(x, 3, 0, true, false, &v, &i), TG_OK);
  topk(x, 3, 0, true, &v2, &i2);
  tg_assert_close(v, v2, 0, 0);
  tg_assert_close(i, i2, 0, 0);
  /* either result may be left out */
  cr_assert_eq(tg_topk(x, 1, 0, true, true, NULL, &i), TG_OK);
  EXPECT(i, 2);
  cr_assert_eq(tg_topk(x, 1, 0, false, true, &v, NULL), TG_OK);
  EXPECT(v, -1);
}

TG_TEST(topk, zero_dim_and_empty) {
  tg_tensor *v, *i;
  topk(tg_scalar(3, TG_OPTS(.dtype = TG_F64)), 1, 0, true, &v, &i);
  tg_assert_sizes(v);
  EXPECT(v, 3);
  EXPECT(i, 0);
  topk(F64(TG_SHAPE(4), 1, 2, 3, 4), 0, 0, true, &v, &i); /* k = 0 */
  tg_assert_sizes(v, 0);
  tg_assert_sizes(i, 0);
  topk(tg_zeros(TG_SHAPE(0, 3), TG_OPTS(.dtype = TG_F64)), 2, 1, true, &v, &i); /* no rows */
  tg_assert_sizes(v, 0, 2);
  topk(tg_zeros(TG_SHAPE(2, 0), TG_OPTS(.dtype = TG_F64)), 0, 1, true, &v, &i);
  tg_assert_sizes(v, 2, 0);
}

TG_TEST(topk, errors) {
  tg_tensor *v = NULL, *i = NULL;
  tg_tensor *x = F64(TG_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  cr_assert_eq(tg_topk(NULL, 1, 0, true, true, &v, &i), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_topk", "x is NULL");
  cr_assert_eq(tg_topk(x, 4, 1, true, true, &v, &i), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT,
                  "tg_topk: k = 4 is outside [0, 3], the size of dim 1 of x [2, 3]");
  cr_assert(!v && !i);
  cr_assert_eq(tg_topk(x, -1, 0, true, true, &v, &i), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_topk: k = -1");
  cr_assert_eq(tg_topk(x, 1, 2, true, true, &v, &i), TG_ERR_INDEX);
  tg_expect_error(TG_ERR_INDEX, "tg_topk", "dim");
  cr_assert_eq(tg_topk(tg_scalar(1, TG_OPTS_DEFAULT), 2, 0, true, true, &v, &i), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "k = 2 is outside [0, 1]");
}

/* the values only (the op's second output is not differentiable) */
static tg_status fn_topk(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const int64_t *p = user; /* k, dim, largest */
  return tg_topk(in[0], p[0], (int)p[1], p[2] != 0, true, &out[0], NULL);
}

TG_TEST(topk, gradient_goes_to_the_picked_places) {
  tg_tensor *x = F64(TG_SHAPE(2, 3), 1, 5, 3, 6, 4, 2);
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  tg_tensor *v;
  cr_assert_eq(tg_topk(x, 2, 1, true, true, &v, NULL), TG_OK);
  cr_assert_eq(tg_backward(v, F64(TG_SHAPE(2, 2), 10, 20, 30, 40)), TG_OK, "%s",
               tg_last_error_message());
  EXPECT(tg_grad(x), 0, 10, 20, 30, 40, 0);
  /* gradcheck and gradgradcheck over dims, both directions, a transposed input */
  tg_generator *gen = tg_generator_new(5);
  tg_tensor *c = tg_randn(TG_SHAPE(3, 5), TG_OPTS(.dtype = TG_F64, .requires_grad = true), gen);
  tg_tensor *t = tg_t(tg_randn(TG_SHAPE(5, 3), TG_OPTS(.dtype = TG_F64), gen));
  tg_generator_free(gen);
  cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
  const int64_t params[][3] = {{2, 1, 1}, {3, 0, 0}, {5, 1, 0}, {0, 1, 1}};
  tg_tensor *inputs[] = {c, t};
  for (int in = 0; in < 2; in++)
    for (int p = 0; p < 4; p++) {
      cr_assert_eq(tg_gradcheck(fn_topk, (void *)params[p], 1, &inputs[in], 1, quiet), TG_OK,
                   "input %d, params %d: %s", in, p, tg_last_error_message());
      cr_assert_eq(tg_gradgradcheck(fn_topk, (void *)params[p], 1, &inputs[in], 1, quiet), TG_OK,
                   "input %d, params %d: %s", in, p, tg_last_error_message());
    }
}

static int descending(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x < y) - (x > y);
}

TG_TEST(topk, long_rows_split_over_threads_match_a_sort) {
  enum { R = 40, N = 5000, K = 50 };
  tg_generator *gen = tg_generator_new(9);
  tg_tensor *x = tg_randn(TG_SHAPE(R, N), TG_OPTS(.dtype = TG_F64), gen);
  tg_generator_free(gen);
  static double host[R * N], got[R * K];
  cr_assert_eq(tg_to_host_array(x, host, sizeof host), TG_OK);
  tg_tensor *v, *i;
  topk(x, K, 1, true, &v, &i);
  cr_assert_eq(tg_to_host_array(v, got, sizeof got), TG_OK);
  for (int r = 0; r < R; r++) {
    qsort(host + r * N, N, sizeof(double), descending);
    for (int k = 0; k < K; k++)
      cr_assert_eq(got[r * K + k], host[r * N + k], "row %d, %d-th", r, k);
  }
  /* the indices point at the values */
  tg_assert_close(tg_gather(x, 1, i), v, 0, 0);
}

static tg_status topk_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){1, 5, 3, 6, 4, 2},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *v = NULL, *i = NULL;
  tg_status st = x ? clean(tg_topk(tg_t(x), 1, 0, false, true, &v, &i)) : status_of(x);
  if (st == TG_OK) st = append(v, out, n_out);
  if (st == TG_OK) st = append(i, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(v, v)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(topk, allocation_failures) { sweep("topk forward and backward", topk_step, NULL); }
