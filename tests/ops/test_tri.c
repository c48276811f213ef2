/* tril / triu (issue 25): PyTorch's values for every diagonal, batch dims, non-square and
 * empty matrices, inf and NaN outside the triangle, I64; gradients (the same triangle of g)
 * by gradcheck and gradgradcheck; errors. */
#include <math.h>

#include "testutil.h"

static const tg_gradcheck_options quiet = {.quiet = true};

/* x [3, 4] = 1..12: torch.tril / torch.triu of it at diagonals -1, 0, 2. */
TG_TEST(tri, values_as_pytorch) {
  tg_tensor *x = tg_reshape(tg_arange(1, 13, 1, TG_OPTS(.dtype = TG_F64)), TG_SHAPE(3, 4));
  tg_test_expect_ieee(tg_tril(x, 0), 12, (const double[]){1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}, 0);
  tg_test_expect_ieee(tg_tril(x, -1), 12, (const double[]){0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}, 0);
  tg_test_expect_ieee(tg_tril(x, 2), 12, (const double[]){1, 2, 3, 0, 5, 6, 7, 8, 9, 10, 11, 12},
                      0);
  tg_test_expect_ieee(tg_triu(x, 0), 12, (const double[]){1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}, 0);
  tg_test_expect_ieee(tg_triu(x, 1), 12, (const double[]){0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}, 0);
  tg_test_expect_ieee(tg_triu(x, -5), 12, (const double[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
                      0);
  tg_test_expect_ieee(tg_triu(x, 9), 12, (const double[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0);
  /* I64 keeps its dtype */
  tg_tensor *i = tg_tril(tg_to_dtype(x, TG_I64), 0);
  cr_assert_eq(tg_tensor_dtype(i), TG_I64);
  tg_test_expect_ieee(i, 12, (const double[]){1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}, 0);
}

/* Outside the triangle inf and NaN become 0 (a selection, not x * mask); -0 inside stays. */
TG_TEST(tri, non_finite_outside_is_zero) {
  tg_tensor *x =
      tg_test_tensor_of(TG_F32, TG_SHAPE(2, 2), (const double[]){-0.0, NAN, INFINITY, 1});
  tg_test_expect_ieee(tg_tril(x, 0), 4, (const double[]){-0.0, 0, INFINITY, 1}, 0);
  cr_assert(signbit(tg_test_at(tg_tril(x, 0), 0)), "-0 inside the triangle keeps its sign");
  tg_test_expect_ieee(tg_triu(x, 0), 4, (const double[]){-0.0, NAN, 0, 1}, 0);
}

/* Batch dims take one mask; a transposed (non-contiguous) input; empty ones. */
TG_TEST(tri, batches_views_and_empty) {
  tg_tensor *x = tg_uniform(TG_SHAPE(2, 3, 4, 5), -1, 1, TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *y = tg_tril(tg_transpose(x, -2, -1), 1); /* [2, 3, 5, 4] */
  cr_assert(y, "%s", tg_last_error_message());
  for (int64_t b = 0; b < 6; b++)
    for (int64_t i = 0; i < 5; i++)
      for (int64_t j = 0; j < 4; j++) {
        double want = j - i <= 1
                          ? tg_test_at(tg_contiguous(tg_transpose(x, -2, -1)), (b * 5 + i) * 4 + j)
                          : 0;
        cr_assert_eq(tg_test_at(y, (b * 5 + i) * 4 + j), want, "b %lld (%lld, %lld)", (long long)b,
                     (long long)i, (long long)j);
      }
  tg_tensor *e = tg_triu(tg_ones(TG_SHAPE(0, 3), TG_OPTS_DEFAULT), 0);
  cr_assert(e && tg_numel(e) == 0 && tg_size(e, 1) == 3, "%s", tg_last_error_message());
}

static tg_status fn_tril(void *user, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_tril(in[0], *(const int64_t *)user);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status fn_triu(void *user, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_triu(in[0], *(const int64_t *)user);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(tri, gradcheck) {
  const int64_t diagonals[] = {-1, 0, 2};
  for (int d = 0; d < 3; d++) {
    tg_tensor *x =
        tg_uniform(TG_SHAPE(2, 3, 4), -1, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true), NULL);
    tg_tensor *in[1] = {x};
    int64_t diag = diagonals[d];
    cr_assert_eq(tg_gradcheck(fn_tril, &diag, 1, in, 1, quiet), TG_OK, "%s",
                 tg_last_error_message());
    cr_assert_eq(tg_gradgradcheck(fn_tril, &diag, 1, in, 1, quiet), TG_OK, "%s",
                 tg_last_error_message());
    cr_assert_eq(tg_gradcheck(fn_triu, &diag, 1, in, 1, quiet), TG_OK, "%s",
                 tg_last_error_message());
    cr_assert_eq(tg_gradgradcheck(fn_triu, &diag, 1, in, 1, quiet), TG_OK, "%s",
                 tg_last_error_message());
  }
}

TG_TEST(tri, errors) {
  cr_assert_null(tg_tril(tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT), 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_tril: x must have at least 2 dims, got [3]");
  cr_assert_null(tg_triu(tg_ones(0, NULL, TG_OPTS_DEFAULT), 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_triu: x must have at least 2 dims, got []");
  cr_assert_null(tg_triu(NULL, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_triu: x is NULL");
}

/* ---- allocation failures ---- */
#include "alloc_sweep.h"

static tg_status tri_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_arange(0, 24, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *x3 = x ? tg_reshape(x, TG_SHAPE(2, 3, 4)) : NULL;
  tg_tensor *lo = x3 ? tg_tril(x3, 0) : NULL, *up = lo ? tg_triu(x3, 1) : NULL;
  tg_status st = status_of(up);
  if (st == TG_OK) st = append(lo, out, n_out);
  if (st == TG_OK) st = append(up, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_add(tg_sum(lo), tg_sum(tg_mul(up, up))), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(tri, allocation_failures) { sweep("tril and triu forward and backward", tri_step, NULL); }
