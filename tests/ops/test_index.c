/* gather, scatter_add, index_select, index_add, argmax/argmin and one_hot (tg/index.h):
 * values by hand (the same as PyTorch's, checked there), strided and 0-dim inputs, repeated
 * indices adding up, every error, the OpInfo checks (gradcheck and gradgradcheck in F64 on
 * every sample), a size split over threads against the serial sums, and the allocation sweeps.
 * topk has its own file (test_topk.c). */
#include <string.h>

#include "testutil.h"
#include "alloc_sweep.h"

#include "tg/index.h"

static tg_tensor *index_tensor(int ndim, const int64_t *sizes, const int64_t *values) {
  tg_tensor *t = tg_from_data(ndim, sizes, values, TG_OPTS(.dtype = TG_I64));
  cr_assert_not_null(t, "%s", tg_last_error_message());
  return t;
}
#define INDICES(shape, ...) index_tensor(shape, (const int64_t[]){__VA_ARGS__})
#define INDEX(value) index_tensor(0, NULL, (const int64_t[]){value})

/* arange(rows * cols) as [rows, cols], F64 unless dtype says otherwise. */
static tg_tensor *counting(int64_t rows, int64_t cols, tg_dtype dtype, bool grad) {
  tg_tensor *t = tg_arange(0, (double)(rows * cols), 1, TG_OPTS(.dtype = dtype));
  t = tg_reshape(t, TG_SHAPE(rows, cols));
  cr_assert(t && tg_set_requires_grad(t, grad) == TG_OK, "%s", tg_last_error_message());
  return t;
}

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

/* ---- gather ---- */

TG_TEST(gather, values_by_hand) {
  tg_tensor *x = counting(3, 4, TG_F64, false);
  tg_tensor *y = tg_gather(x, 1, INDICES(TG_SHAPE(3, 2), 0, 3, 1, 1, 2, 0));
  tg_assert_sizes(y, 3, 2);
  EXPECT(y, 0, 3, 5, 5, 10, 8);
  /* index smaller than x in the other dim, dim counted from the end */
  EXPECT(tg_gather(x, -2, INDICES(TG_SHAPE(1, 2), 2, 0)), 8, 1);
  /* larger than x along dim itself (PyTorch allows it) */
  EXPECT(tg_gather(x, 1, INDICES(TG_SHAPE(1, 6), 3, 3, 2, 1, 0, 0)), 3, 3, 2, 1, 0, 0);
  /* transposed x, stepped index */
  tg_tensor *xt = tg_t(x); /* [4, 3] */
  tg_tensor *idx = tg_slice(INDICES(TG_SHAPE(2, 4), 2, 9, 0, 9, 1, 9, 1, 9), 1, 0, 4, 2);
  EXPECT(tg_gather(xt, 1, idx), 8, 0, 5, 5);
  /* I64 x keeps its dtype */
  tg_tensor *yi = tg_gather(counting(2, 3, TG_I64, false), 1, INDICES(TG_SHAPE(2, 1), 2, 0));
  cr_assert_eq(tg_tensor_dtype(yi), TG_I64);
  EXPECT(yi, 2, 3);
  /* 0-dim x and index (PyTorch takes them as [1]) */
  tg_tensor *s = tg_scalar(7, TG_OPTS(.dtype = TG_F64));
  tg_assert_sizes(tg_gather(s, 0, INDEX(0)));
  EXPECT(tg_gather(s, -1, INDICES(TG_SHAPE(2), 0, 0)), 7, 7);
  /* empty index: empty out */
  tg_assert_sizes(tg_gather(x, 1, tg_empty(TG_SHAPE(3, 0), TG_OPTS(.dtype = TG_I64))), 3, 0);
}

TG_TEST(gather, repeated_indices_add_up_in_backward) {
  tg_tensor *x = counting(2, 3, TG_F64, true);
  tg_tensor *y = tg_gather(x, 1, INDICES(TG_SHAPE(2, 4), 1, 1, 1, 0, 2, 2, 2, 2));
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  EXPECT(tg_grad(x), 1, 3, 0, 0, 0, 4);
}

TG_TEST(gather, double_backward_gathers_again) {
  /* L = sum(c * dx) with dx = d(sum(g * gather(x, idx)))/dx = scatter_add(g): dL/dg = c[idx]. */
  tg_tensor *x = counting(2, 3, TG_F64, true);
  tg_tensor *idx = INDICES(TG_SHAPE(2, 2), 2, 2, 0, 1);
  tg_tensor *g = tg_zeros(TG_SHAPE(2, 2), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_sum(tg_mul(tg_gather(x, 1, idx), g));
  tg_tensor *dx = NULL;
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){y}, NULL, 1,
                                (const tg_tensor *const[]){x}, &dx,
                                (tg_backward_options){.create_graph = true}, false),
               TG_OK, "%s", tg_last_error_message());
  cr_assert_str_eq(tg_grad_fn_name(dx), "scatter_add");
  tg_tensor *c = F64(TG_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(dx, c)), NULL), TG_OK, "%s", tg_last_error_message());
  EXPECT(tg_grad(g), 3, 3, 4, 5);
}

/* ---- scatter_add ---- */

TG_TEST(scatter_add, values_by_hand) {
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 4), TG_OPTS(.dtype = TG_F64));
  tg_tensor *src = F64(TG_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  EXPECT(tg_scatter_add(x, 1, INDICES(TG_SHAPE(2, 3), 0, 1, 1, 3, 3, 3), src), 1, 5, 0, 0, 0, 0, 0,
         15);
  /* index smaller than src: only its part of src is read */
  EXPECT(tg_scatter_add(x, 0, INDICES(TG_SHAPE(1, 2), 1, 0), src), 0, 2, 0, 0, 1, 0, 0, 0);
  /* x is not written; an expanded x gives a fresh result */
  tg_tensor *ones = tg_expand(tg_ones(TG_SHAPE(1, 1), TG_OPTS(.dtype = TG_F64)), TG_SHAPE(2, 2));
  EXPECT(tg_scatter_add(ones, 1, INDICES(TG_SHAPE(2, 1), 1, 0), F64(TG_SHAPE(2, 1), 5, 7)), 1, 6, 8,
         1);
  EXPECT(ones, 1, 1, 1, 1);
  /* I64 adds (wrapping, as PyTorch's) */
  tg_tensor *xi = tg_full(TG_SHAPE(2), 9.0e18, TG_OPTS(.dtype = TG_I64));
  tg_tensor *si = tg_full(TG_SHAPE(1), 9.0e18, TG_OPTS(.dtype = TG_I64));
  tg_tensor *wi = tg_scatter_add(xi, 0, INDICES(TG_SHAPE(1), 1), si);
  int64_t got[2];
  cr_assert_eq(tg_to_host_array(wi, got, sizeof got), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(got[0], 9000000000000000000);
  cr_assert_eq(got[1], -446744073709551616); /* 18e18 - 2^64 */
}

TG_TEST(scatter_add, gradient_of_a_larger_src_is_zero_where_index_does_not_reach) {
  /* PyTorch refuses this backward ("invalid gradient ... got [1, 2] but expected [2, 5]") */
  tg_tensor *x = tg_zeros(TG_SHAPE(3, 4), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *src = tg_ones(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_scatter_add(x, 1, INDICES(TG_SHAPE(1, 2), 3, 3), src);
  tg_tensor *w = F64(TG_SHAPE(3, 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(y, w)), NULL), TG_OK, "%s", tg_last_error_message());
  EXPECT(tg_grad(src), 4, 4, 0, 0, 0, 0);
  EXPECT(tg_grad(x), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
}

/* ---- index_select / index_add ---- */

TG_TEST(index_select, values_by_hand) {
  tg_tensor *x = counting(3, 4, TG_F64, false);
  EXPECT(tg_index_select(x, 0, INDICES(TG_SHAPE(3), 2, 0, 2)), 8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10,
         11);
  EXPECT(tg_index_select(x, 1, INDICES(TG_SHAPE(2), 3, 0)), 3, 0, 7, 4, 11, 8);
  /* 0-dim index: a size-1 dim (PyTorch's) */
  tg_tensor *one = tg_index_select(x, 0, INDEX(1));
  tg_assert_sizes(one, 1, 4);
  EXPECT(one, 4, 5, 6, 7);
  /* transposed x, stepped index, 3-D middle dim */
  tg_tensor *idx = tg_slice(INDICES(TG_SHAPE(4), 1, 9, 0, 9), 0, 0, 4, 2);
  EXPECT(tg_index_select(tg_t(x), 1, idx), 4, 0, 5, 1, 6, 2, 7, 3);
  tg_tensor *x3 = tg_reshape(tg_arange(0, 12, 1, TG_OPTS(.dtype = TG_F64)), TG_SHAPE(2, 3, 2));
  EXPECT(tg_index_select(x3, 1, INDICES(TG_SHAPE(2), 2, 2)), 4, 5, 4, 5, 10, 11, 10, 11);
  tg_assert_sizes(tg_index_select(x, 1, tg_empty(TG_SHAPE(0), TG_OPTS(.dtype = TG_I64))), 3, 0);
  /* 0-dim x: a 0-dim result */
  tg_tensor *s =
      tg_index_select(tg_scalar(5, TG_OPTS(.dtype = TG_F64)), 0, INDICES(TG_SHAPE(1), 0));
  tg_assert_sizes(s);
  EXPECT(s, 5);
}

TG_TEST(index_add, values_by_hand) {
  tg_tensor *x = counting(3, 4, TG_F64, false);
  tg_tensor *src = tg_ones(TG_SHAPE(2, 4), TG_OPTS(.dtype = TG_F64));
  EXPECT(tg_index_add(x, 0, INDICES(TG_SHAPE(2), 1, 1), src, 2.5), 0, 1, 2, 3, 9, 10, 11, 12, 8, 9,
         10, 11);
  EXPECT(
      tg_index_add(x, 1, INDICES(TG_SHAPE(3), 0, 3, 0), tg_t(counting(3, 3, TG_F64, false)), 1.0),
      6, 1, 2, 6, 12, 5, 6, 11, 18, 9, 10, 16);
  EXPECT(x, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11); /* x is not written */
}

TG_TEST(index_add, gradients) {
  tg_tensor *x = tg_zeros(TG_SHAPE(3, 2), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *src = tg_ones(TG_SHAPE(3, 2), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_index_add(x, 0, INDICES(TG_SHAPE(3), 2, 0, 2), src, -2.0);
  tg_tensor *w = F64(TG_SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(y, w)), NULL), TG_OK, "%s", tg_last_error_message());
  EXPECT(tg_grad(x), 1, 2, 3, 4, 5, 6);
  EXPECT(tg_grad(src), -10, -12, -2, -4, -10, -12);
  /* index_select's gradient: the picks added back */
  tg_tensor *t = counting(3, 2, TG_F64, true);
  cr_assert_eq(tg_backward(tg_sum(tg_index_select(t, 0, INDICES(TG_SHAPE(4), 1, 1, 0, 1))), NULL),
               TG_OK, "%s", tg_last_error_message());
  EXPECT(tg_grad(t), 1, 1, 3, 3, 0, 0);
}

/* ---- the OpInfo checks: gradcheck and gradgradcheck in F64 on every sample ---- */

TG_TEST(index, passes_the_opinfo_checks) {
  const char *names[] = {"gather", "scatter_add", "index_select", "index_add", "topk"};
  tg_op_check_options opts = {.gradcheck = {.quiet = true}};
  for (int k = 0; k < 5; k++) {
    const tg_op_desc *op = tg_op_lookup(names[k]);
    cr_assert_not_null(op, "%s", names[k]);
    cr_assert_eq(tg_op_check(op, opts), TG_OK, "%s: %s", names[k], tg_last_error_message());
  }
}

/* ---- threads: the parallel sums are the serial ones ---- */

TG_TEST(index, large_scatters_are_the_serial_sums) {
  /* rows of 1024 picks from 7 places, and index_add of 4096 rows into 5 */
  enum { R = 160, M = 1024, N = 7 };
  static int64_t idx[R * M];
  static double src[R * M], want[R * N];
  memset(want, 0, sizeof want);
  for (int64_t k = 0; k < R * M; k++) {
    idx[k] = (k * 5 + k / 3) % N;
    src[k] = 1.0 / (double)(k % 97 + 1);
  }
  for (int64_t r = 0; r < R; r++)
    for (int64_t m = 0; m < M; m++) want[r * N + idx[r * M + m]] += src[r * M + m];
  tg_tensor *s = tg_from_data(TG_SHAPE(R, M), src, TG_OPTS(.dtype = TG_F64));
  tg_tensor *i = tg_from_data(TG_SHAPE(R, M), idx, TG_OPTS(.dtype = TG_I64));
  tg_tensor *y = tg_scatter_add(tg_zeros(TG_SHAPE(R, N), TG_OPTS(.dtype = TG_F64)), 1, i, s);
  static double got[R * N];
  cr_assert_eq(tg_to_host_array(y, got, sizeof got), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(memcmp(got, want, sizeof got), 0, "the threaded sums differ from the serial ones");

  /* index_add: [R * M / 32, 32] rows into [N, 32], in index order */
  tg_tensor *rows = tg_reshape(s, TG_SHAPE(R * M / 32, 32));
  tg_tensor *ri = tg_narrow(tg_reshape(i, TG_SHAPE(R * M)), 0, 0, R * M / 32);
  tg_tensor *z = tg_index_add(tg_zeros(TG_SHAPE(N, 32), TG_OPTS(.dtype = TG_F64)), 0, ri, rows, 1);
  static double want2[N * 32], got2[N * 32];
  memset(want2, 0, sizeof want2);
  for (int64_t m = 0; m < R * M / 32; m++)
    for (int64_t c = 0; c < 32; c++) want2[idx[m] * 32 + c] += src[m * 32 + c];
  cr_assert_eq(tg_to_host_array(z, got2, sizeof got2), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(memcmp(got2, want2, sizeof got2), 0, "index_add's sums differ from the serial ones");
}

/* ---- argmax / argmin ---- */

TG_TEST(argmax, values_ties_nan_and_all_dims) {
  tg_tensor *x = F64(TG_SHAPE(2, 4), 1, 3, 3, 2, -1, NAN, 5, NAN);
  tg_tensor *a = tg_argmax(x, 1, false);
  cr_assert_eq(tg_tensor_dtype(a), TG_I64);
  EXPECT(a, 1, 1); /* the first of equal maxima; a NaN wins (the first NaN) */
  EXPECT(tg_argmin(x, -1, false), 0, 1);
  tg_tensor *k = tg_argmax(x, 0, true);
  tg_assert_sizes(k, 1, 4);
  EXPECT(k, 0, 1, 1, 1);
  tg_tensor *all = tg_argmax(x, TG_ALL_DIMS, false);
  tg_assert_sizes(all);
  EXPECT(all, 5);
  tg_tensor *allk = tg_argmin(F64(TG_SHAPE(2, 2), 4, 0, 0, 1), TG_ALL_DIMS, true);
  tg_assert_sizes(allk, 1, 1);
  EXPECT(allk, 1);
  /* I64, and a 0-dim x (dim 0 or -1: index 0) */
  EXPECT(tg_argmax(counting(2, 3, TG_I64, false), 1, false), 2, 2);
  EXPECT(tg_argmax(tg_scalar(4, TG_OPTS(.dtype = TG_F64)), 0, true), 0);
  /* an empty tensor with a non-empty dim: an empty result */
  tg_assert_sizes(tg_argmax(tg_zeros(TG_SHAPE(0, 3), TG_OPTS_DEFAULT), 1, false), 0);
  /* not differentiable: a result without a grad_fn even from a leaf that requires grad */
  tg_tensor *g = counting(2, 2, TG_F64, true);
  cr_assert_not(tg_requires_grad(tg_argmax(g, 1, false)));
}

TG_TEST(argmax, errors) {
  cr_assert_null(tg_argmax(NULL, 0, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_argmax", "x is NULL");
  cr_assert_null(tg_argmax(tg_zeros(TG_SHAPE(0, 3), TG_OPTS_DEFAULT), TG_ALL_DIMS, false));
  tg_expect_error(TG_ERR_SHAPE, "tg_argmax: x [0, 3] is empty", "TG_ALL_DIMS");
  cr_assert_null(tg_argmin(tg_zeros(TG_SHAPE(3, 0), TG_OPTS_DEFAULT), 1, false));
  tg_expect_error(TG_ERR_SHAPE, "tg_argmin: dim 1 of x [3, 0] is empty");
  cr_assert_null(tg_argmax(tg_zeros(TG_SHAPE(3, 2), TG_OPTS_DEFAULT), 2, false));
  tg_expect_error(TG_ERR_INDEX, "tg_argmax", "dim");
}

/* ---- one_hot ---- */

TG_TEST(one_hot, values_by_hand) {
  tg_tensor *y = tg_one_hot(INDICES(TG_SHAPE(3), 0, 2, 1), -1);
  cr_assert_eq(tg_tensor_dtype(y), TG_I64);
  tg_assert_sizes(y, 3, 3);
  EXPECT(y, 1, 0, 0, 0, 0, 1, 0, 1, 0);
  tg_tensor *z = tg_one_hot(tg_t(INDICES(TG_SHAPE(2, 2), 3, 0, 1, 1)), 4);
  tg_assert_sizes(z, 2, 2, 4);
  EXPECT(z, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0);
  tg_tensor *s = tg_one_hot(INDEX(1), 3);
  tg_assert_sizes(s, 3);
  EXPECT(s, 0, 1, 0);
  tg_assert_sizes(tg_one_hot(tg_empty(TG_SHAPE(0), TG_OPTS(.dtype = TG_I64)), 3), 0, 3);
  tg_assert_sizes(tg_one_hot(tg_empty(TG_SHAPE(2, 0), TG_OPTS(.dtype = TG_I64)), 0), 2, 0, 0);
}

TG_TEST(one_hot, errors) {
  cr_assert_null(tg_one_hot(NULL, 3));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_one_hot", "index is NULL");
  cr_assert_null(tg_one_hot(tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT), 3));
  tg_expect_error(TG_ERR_DTYPE, "tg_one_hot: index is float32", "int64");
  cr_assert_null(tg_one_hot(INDICES(TG_SHAPE(3), 0, -2, 1), 3));
  tg_expect_error(TG_ERR_INDEX, "tg_one_hot: index[1] = -2 is outside the classes [0, 3)");
  cr_assert_null(tg_one_hot(INDICES(TG_SHAPE(2), 0, 2), 2));
  tg_expect_error(TG_ERR_INDEX, "tg_one_hot: index[1] = 2 is outside the classes [0, 2)");
  cr_assert_null(tg_one_hot(INDICES(TG_SHAPE(1), -1), -1));
  tg_expect_error(TG_ERR_INDEX, "index[0] = -1", "[0, 0)");
  cr_assert_null(tg_one_hot(tg_empty(TG_SHAPE(0), TG_OPTS(.dtype = TG_I64)), -1));
  tg_expect_error(TG_ERR_SHAPE, "tg_one_hot: index [0] is empty", "num_classes = -1");
  cr_assert_null(tg_one_hot(INDICES(TG_SHAPE(1), 0), -2));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_one_hot: num_classes = -2");
}

/* ---- errors of gather, scatter_add, index_select, index_add ---- */

TG_TEST(gather, errors) {
  tg_tensor *x = counting(3, 4, TG_F64, false);
  tg_tensor *idx = INDICES(TG_SHAPE(3, 1), 0, 1, 2);
  cr_assert_null(tg_gather(NULL, 1, idx));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gather", "x is NULL");
  cr_assert_null(tg_gather(x, 1, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gather", "index is NULL");
  cr_assert_null(tg_gather(x, 2, idx));
  tg_expect_error(TG_ERR_INDEX, "tg_gather", "dim");
  cr_assert_null(tg_gather(x, 1, INDICES(TG_SHAPE(2, 2), 0, 1, -1, 2)));
  tg_expect_error(TG_ERR_INDEX, "tg_gather: index[1, 0] = -1 is outside dim 1 of x [0, 4)");
  cr_assert_null(tg_gather(x, 0, INDICES(TG_SHAPE(1, 2), 0, 3)));
  tg_expect_error(TG_ERR_INDEX, "tg_gather: index[0, 1] = 3 is outside dim 0 of x [0, 3)");
  cr_assert_null(tg_gather(x, 1, tg_zeros(TG_SHAPE(3, 1), TG_OPTS(.dtype = TG_F64))));
  tg_expect_error(TG_ERR_DTYPE, "tg_gather: index is float64", "int64");
  cr_assert_null(tg_gather(x, 1, INDICES(TG_SHAPE(3), 0, 1, 2)));
  tg_expect_error(TG_ERR_SHAPE, "tg_gather: index is [3] and x [3, 4]", "number of dims");
  cr_assert_null(tg_gather(x, 1, INDICES(TG_SHAPE(4, 1), 0, 1, 2, 3)));
  tg_expect_error(TG_ERR_SHAPE, "tg_gather: index [4, 1] is larger than x [3, 4] in dim 0");
}

TG_TEST(scatter_add, errors) {
  tg_tensor *x = counting(3, 4, TG_F64, false);
  tg_tensor *idx = INDICES(TG_SHAPE(1, 2), 0, 1);
  tg_tensor *src = tg_ones(TG_SHAPE(1, 2), TG_OPTS(.dtype = TG_F64));
  cr_assert_null(tg_scatter_add(x, 1, idx, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_scatter_add", "src is NULL");
  cr_assert_null(tg_scatter_add(x, 1, INDICES(TG_SHAPE(1, 2), 4, 0), src));
  tg_expect_error(TG_ERR_INDEX, "tg_scatter_add: index[0, 0] = 4 is outside dim 1 of x [0, 4)");
  cr_assert_null(tg_scatter_add(x, 0, INDICES(TG_SHAPE(1, 2), 0, -3), src));
  tg_expect_error(TG_ERR_INDEX, "index[0, 1] = -3", "dim 0 of x [0, 3)");
  cr_assert_null(tg_scatter_add(x, 1, idx, tg_ones(TG_SHAPE(1, 2), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_DTYPE, "tg_scatter_add: src is float32 and x float64");
  cr_assert_null(tg_scatter_add(x, 1, idx, tg_ones(TG_SHAPE(1, 1), TG_OPTS(.dtype = TG_F64))));
  tg_expect_error(TG_ERR_SHAPE, "tg_scatter_add: index [1, 2] is larger than src [1, 1] in dim 1");
  cr_assert_null(tg_scatter_add(x, 1, idx, tg_ones(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64))));
  tg_expect_error(TG_ERR_SHAPE, "tg_scatter_add: index is [1, 2] and src [2]");
  cr_assert_null(tg_scatter_add(x, 1, tg_zeros(TG_SHAPE(1, 2), TG_OPTS_DEFAULT), src));
  tg_expect_error(TG_ERR_DTYPE, "tg_scatter_add: index is float32");
}

TG_TEST(index_select, errors) {
  tg_tensor *x = counting(3, 4, TG_F64, false);
  cr_assert_null(tg_index_select(x, 0, INDICES(TG_SHAPE(2), 1, 3)));
  tg_expect_error(TG_ERR_INDEX, "tg_index_select: index[1] = 3 is outside dim 0 of x [0, 3)");
  cr_assert_null(tg_index_select(x, 1, INDICES(TG_SHAPE(1), -1)));
  tg_expect_error(TG_ERR_INDEX, "tg_index_select: index[0] = -1 is outside dim 1 of x [0, 4)");
  cr_assert_null(tg_index_select(x, 0, INDICES(TG_SHAPE(1, 1), 1)));
  tg_expect_error(TG_ERR_SHAPE, "tg_index_select: index is [1, 1]", "1-D or 0-dim");
  cr_assert_null(tg_index_select(x, 0, tg_zeros(TG_SHAPE(1), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_DTYPE, "tg_index_select: index is float32");
  cr_assert_null(tg_index_select(tg_scalar(1, TG_OPTS_DEFAULT), 0, INDICES(TG_SHAPE(2), 0, 0)));
  tg_expect_error(TG_ERR_SHAPE, "tg_index_select: x is 0-dim, so index must have 1 element");
  cr_assert_null(tg_index_select(x, -3, INDICES(TG_SHAPE(1), 0)));
  tg_expect_error(TG_ERR_INDEX, "tg_index_select", "dim");
}

TG_TEST(index_add, errors) {
  tg_tensor *x = counting(3, 4, TG_F64, false);
  tg_tensor *src = tg_ones(TG_SHAPE(2, 4), TG_OPTS(.dtype = TG_F64));
  cr_assert_null(tg_index_add(x, 0, INDICES(TG_SHAPE(2), 0, 3), src, 1));
  tg_expect_error(TG_ERR_INDEX, "tg_index_add: index[1] = 3 is outside dim 0 of x [0, 3)");
  cr_assert_null(tg_index_add(x, 0, INDICES(TG_SHAPE(3), 0, 1, 2), src, 1));
  tg_expect_error(TG_ERR_SHAPE, "tg_index_add: src is [2, 4]", "must be [3, 4]");
  cr_assert_null(
      tg_index_add(x, 0, INDICES(TG_SHAPE(2), 0, 1), tg_ones(TG_SHAPE(2, 4), TG_OPTS_DEFAULT), 1));
  tg_expect_error(TG_ERR_DTYPE, "tg_index_add: src is float32 and x float64");
  cr_assert_null(tg_index_add(x, 0, INDICES(TG_SHAPE(2), 0, 1), NULL, 1));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_index_add", "src is NULL");
}

/* ---- allocation failures ---- */

static tg_status check_ok(tg_tensor *t, double *out, int *n_out) {
  tg_status st = status_of(t);
  return st == TG_OK ? append(t, out, n_out) : st;
}

static tg_status index_ops_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){1, 2, 3, 4, 5, 6},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *idx =
      x ? tg_from_data(TG_SHAPE(2, 2), (const int64_t[]){2, 0, 2, 2}, TG_OPTS(.dtype = TG_I64))
        : NULL;
  tg_tensor *row =
      idx ? tg_from_data(TG_SHAPE(3), (const int64_t[]){1, 1, 0}, TG_OPTS(.dtype = TG_I64)) : NULL;
  tg_tensor *g = row ? tg_gather(x, 1, idx) : NULL;
  tg_tensor *s = g ? tg_scatter_add(x, 1, idx, g) : NULL;
  tg_tensor *sel = s ? tg_index_select(s, 0, row) : NULL;
  tg_tensor *add = sel ? tg_index_add(x, 0, row, sel, 0.5) : NULL;
  tg_status st = check_ok(add, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(add, add)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  if (st == TG_OK) st = check_ok(tg_argmax(x, 1, false), out, n_out);
  if (st == TG_OK) st = check_ok(tg_argmin(x, TG_ALL_DIMS, true), out, n_out);
  if (st == TG_OK) st = check_ok(tg_one_hot(row, -1), out, n_out);
  /* an index out of range stays TG_ERR_INDEX unless memory ran out first */
  if (st == TG_OK) {
    tg_tensor *bad = tg_from_data(TG_SHAPE(1), (const int64_t[]){3}, TG_OPTS(.dtype = TG_I64));
    st = status_of(bad);
    if (st == TG_OK && !tg_index_select(x, 1, bad)) {
      st = tg_last_error();
      if (st == TG_ERR_INDEX) {
        tg_clear_error();
        st = TG_OK;
      }
    } else if (st == TG_OK) {
      st = TG_ERR_STATE;
    }
  }
  return st;
}

TG_TEST(index, allocation_failures) {
  sweep("gather, scatter_add, index_select, index_add, argmax, one_hot", index_ops_step, NULL);
}
