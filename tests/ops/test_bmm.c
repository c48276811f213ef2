/* Batched matmul and bmm (issue 25): values against a reference made of pointwise ops and a
 * sum (no GEMM) for every rank combination, broadcast batch dims, folding, transposed and
 * stepped views, empty batches and k = 0; gradcheck and gradgradcheck in F64; the thread
 * split against one thread; every error; an allocation-failure sweep. */
#include <math.h>

#include "testutil.h"
#include "alloc_sweep.h"

static const tg_gradcheck_options quiet = {.quiet = true};

static tg_tensor *rand_t(int ndim, const int64_t *sizes, tg_dtype dtype) {
  tg_tensor *t = tg_uniform(ndim, sizes, -2, 2, TG_OPTS(.dtype = dtype), NULL);
  cr_assert(t, "%s", tg_last_error_message());
  return t;
}

/* torch.matmul by broadcasting and a sum over k: a [.., m, k, 1] * b [.., 1, k, n]. */
static tg_tensor *reference(const tg_tensor *a, const tg_tensor *b) {
  const tg_tensor *l = tg_ndim(a) == 1 ? tg_unsqueeze(a, 0) : a;
  const tg_tensor *r = tg_ndim(b) == 1 ? tg_unsqueeze(b, 1) : b;
  tg_tensor *p =
      tg_sum_dim(tg_mul(tg_unsqueeze(l, tg_ndim(l)), tg_unsqueeze(r, tg_ndim(r) - 2)), -2, false);
  cr_assert(p, "%s", tg_last_error_message());
  if (tg_ndim(a) == 1) p = tg_squeeze(p, tg_ndim(p) - 2);
  if (tg_ndim(b) == 1) p = tg_squeeze(p, tg_ndim(p) - 1);
  return p;
}

static void expect_matches(const tg_tensor *got, const tg_tensor *want, double tol,
                           const char *what) {
  cr_assert(got, "%s: %s", what, tg_last_error_message());
  cr_assert_eq(tg_ndim(got), tg_ndim(want), "%s: ndim %d, want %d", what, tg_ndim(got),
               tg_ndim(want));
  for (int d = 0; d < tg_ndim(got); d++)
    cr_assert_eq(tg_size(got, d), tg_size(want, d), "%s: dim %d is %lld, want %lld", what, d,
                 (long long)tg_size(got, d), (long long)tg_size(want, d));
  for (int64_t i = 0; i < tg_numel(want); i++) {
    double g = tg_test_at(got, i), w = tg_test_at(want, i);
    cr_assert(fabs(g - w) <= tol * (1 + fabs(w)), "%s: element %lld is %.17g, want %.17g", what,
              (long long)i, g, w);
  }
}

typedef struct shape_case {
  const char *what;
  int na;
  int64_t a[5];
  int nb;
  int64_t b[5];
  int64_t out_numel;
} shape_case;

/* Every rank combination PyTorch's matmul takes, broadcasting included. */
static const shape_case shapes[] = {
    {"3-D @ 2-D (folded)", 3, {2, 3, 4}, 2, {4, 5}, 30},
    {"3-D @ 1-D", 3, {2, 3, 4}, 1, {4}, 6},
    {"1-D @ 3-D", 1, {4}, 3, {2, 4, 3}, 6},
    {"2-D @ 3-D", 2, {3, 4}, 3, {2, 4, 5}, 30},
    {"3-D @ 3-D", 3, {2, 3, 4}, 3, {2, 4, 5}, 30},
    {"4-D @ 3-D, batch broadcast", 4, {2, 1, 3, 4}, 3, {5, 4, 2}, 60},
    {"4-D @ 4-D, both broadcast", 4, {2, 1, 3, 4}, 4, {1, 3, 4, 2}, 36},
    {"5-D @ 2-D", 5, {2, 2, 1, 3, 4}, 2, {4, 3}, 36},
    {"4-D @ 1-D", 4, {2, 3, 2, 4}, 1, {4}, 12},
    {"1-D @ 4-D", 1, {4}, 4, {2, 3, 4, 2}, 12},
    {"empty batch", 3, {0, 3, 4}, 3, {1, 4, 5}, 0},
    {"k = 0", 3, {2, 3, 0}, 3, {2, 0, 4}, 24},
    {"m = 0", 3, {2, 0, 4}, 2, {4, 5}, 0},
    {"GPT scores", 4, {2, 3, 16, 8}, 4, {2, 3, 8, 16}, 1536},
};

TG_TEST(bmm, matmul_values_for_every_rank) {
  for (int dt = 0; dt < 2; dt++)
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
      tg_scope s = tg_scope_begin();
      const shape_case *sc = &shapes[c];
      tg_tensor *a = rand_t(sc->na, sc->a, dt ? TG_F64 : TG_F32);
      tg_tensor *b = rand_t(sc->nb, sc->b, dt ? TG_F64 : TG_F32);
      tg_tensor *y = tg_matmul(a, b);
      cr_assert(y, "%s: %s", sc->what, tg_last_error_message());
      cr_assert_eq(tg_numel(y), sc->out_numel, "%s", sc->what);
      cr_assert_eq(tg_tensor_dtype(y), tg_tensor_dtype(a));
      expect_matches(y, reference(a, b), dt ? 1e-12 : 1e-5, sc->what);
      tg_scope_end(s);
    }
}

/* k = 0 is zeros (not garbage), the empty batch keeps its sizes, as PyTorch. */
TG_TEST(bmm, empty_products) {
  tg_tensor *y = tg_bmm(tg_ones(TG_SHAPE(2, 3, 0), TG_OPTS_DEFAULT),
                        tg_ones(TG_SHAPE(2, 0, 2), TG_OPTS_DEFAULT));
  tg_test_expect_ieee(y, 12, (const double[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0);
  tg_tensor *e = tg_matmul(tg_ones(TG_SHAPE(0, 3, 4), TG_OPTS_DEFAULT),
                           tg_ones(TG_SHAPE(2, 1, 4, 5), TG_OPTS_DEFAULT));
  cr_assert(e, "%s", tg_last_error_message());
  const int64_t want[] = {2, 0, 3, 5};
  cr_assert_eq(tg_ndim(e), 4);
  for (int d = 0; d < 4; d++) cr_assert_eq(tg_size(e, d), want[d]);
}

/* Operands as views: transposed matrices (q @ k^T), stepped, a permuted batch, an expanded
 * batch (stride 0), an overlapping as_strided view; each against its contiguous copy. */
TG_TEST(bmm, strided_operands_equal_contiguous) {
  tg_tensor *base = rand_t(TG_SHAPE(2, 3, 8, 6), TG_F64);
  tg_tensor *k = rand_t(TG_SHAPE(2, 3, 5, 6), TG_F64);
  tg_tensor *cases[][2] = {
      {base, tg_transpose(k, -2, -1)},
      {tg_transpose(tg_transpose(base, -2, -1), -2, -1),
       tg_permute(k, 4, (const int[]){0, 1, 3, 2})},
      {tg_slice(base, 3, 0, 6, 2), tg_slice(tg_transpose(k, -2, -1), 2, 0, 6, 2)},
      {tg_permute(base, 4, (const int[]){1, 0, 2, 3}),
       tg_permute(tg_transpose(k, -2, -1), 4, (const int[]){1, 0, 2, 3})},
      {tg_expand(tg_narrow(base, 1, 0, 1), TG_SHAPE(2, 3, 8, 6)), tg_transpose(k, -2, -1)},
      {tg_as_strided(base, TG_SHAPE(2, 4, 3), (const int64_t[]){3, 1, 2}, 0),
       tg_as_strided(k, TG_SHAPE(2, 3, 2), (const int64_t[]){1, 2, 1}, 1)},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    tg_tensor *a = cases[c][0], *b = cases[c][1];
    cr_assert(a && b, "case %zu: %s", c, tg_last_error_message());
    expect_matches(tg_matmul(a, b), tg_matmul(tg_contiguous(a), tg_contiguous(b)), 1e-13,
                   "strided against contiguous");
    expect_matches(tg_matmul(a, b), reference(a, b), 1e-12, "strided against reference");
  }
}

/* The batch split across the pool gives the same numbers as one thread, GEMM by GEMM. */
TG_TEST(bmm, thread_split_equals_one_thread) {
  const int threads = tg_get_num_threads();
  tg_tensor *a = rand_t(TG_SHAPE(8, 32, 24), TG_F32), *b = rand_t(TG_SHAPE(8, 24, 40), TG_F32);
  tg_set_num_threads(2);
  tg_tensor *two = tg_bmm(a, b);
  tg_set_num_threads(1);
  tg_tensor *one = tg_bmm(a, b);
  tg_set_num_threads(threads);
  expect_matches(two, one, 0, "2 threads against 1");
  expect_matches(one, reference(a, b), 1e-5, "against the reference");
}

/* ---- gradients ---- */

static tg_status fn_matmul(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = tg_matmul(in[0], in[1]);
  return out[0] ? TG_OK : tg_last_error();
}

static tg_status fn_bmm(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = tg_bmm(in[0], in[1]);
  return out[0] ? TG_OK : tg_last_error();
}

static void check_grads(tg_gradcheck_fn fn, tg_tensor *a, tg_tensor *b, const char *what) {
  tg_tensor *in[2] = {a, b};
  cr_assert(tg_set_requires_grad(a, true) == TG_OK && tg_set_requires_grad(b, true) == TG_OK);
  cr_assert_eq(tg_gradcheck(fn, NULL, 2, in, 1, quiet), TG_OK, "%s: %s", what,
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(fn, NULL, 2, in, 1, quiet), TG_OK, "%s: %s", what,
               tg_last_error_message());
}

TG_TEST(bmm, matmul_gradcheck_for_every_rank) {
  for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
    const shape_case *sc = &shapes[c];
    if (sc->out_numel > 200) continue; /* gradgradcheck time */
    check_grads(fn_matmul, rand_t(sc->na, sc->a, TG_F64), rand_t(sc->nb, sc->b, TG_F64), sc->what);
  }
}

/* The gradient of a transposed operand (attention's k^T) and of a broadcast one. */
TG_TEST(bmm, gradcheck_of_views) {
  tg_tensor *k = rand_t(TG_SHAPE(2, 3, 4), TG_F64);
  tg_tensor *q = rand_t(TG_SHAPE(2, 5, 4), TG_F64);
  cr_assert_eq(tg_set_requires_grad(k, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(q, true), TG_OK);
  tg_tensor *y = tg_bmm(q, tg_transpose(k, 1, 2));
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  /* d k = (q^T @ 1)^T, reached k in its own layout (contiguous) */
  cr_assert(tg_is_contiguous(tg_grad(k)));
  expect_matches(tg_grad(k), tg_expand(tg_sum_dim(q, 1, true), TG_SHAPE(2, 3, 4)), 1e-12,
                 "grad of k^T");
  check_grads(fn_bmm, rand_t(TG_SHAPE(2, 3, 2), TG_F64), rand_t(TG_SHAPE(2, 2, 4), TG_F64), "bmm");
}

/* A weight shared by the batch gets the sum of its batch's gradients (folded and not). */
TG_TEST(bmm, broadcast_gradient_is_summed) {
  tg_tensor *x = rand_t(TG_SHAPE(3, 2, 4), TG_F64), *w = rand_t(TG_SHAPE(4, 5), TG_F64);
  cr_assert_eq(tg_set_requires_grad(w, true), TG_OK);
  tg_tensor *xt = tg_transpose(tg_transpose(x, 0, 1), 0, 1); /* same values */
  tg_tensor *views[] = {x,
                        tg_permute(tg_contiguous(tg_permute(x, 3, (const int[]){1, 0, 2})), 3,
                                   (const int[]){1, 0, 2}),
                        xt};
  for (int v = 0; v < 3; v++) {
    tg_zero_grad(w);
    cr_assert_eq(tg_backward(tg_sum(tg_matmul(views[v], w)), NULL), TG_OK, "%s",
                 tg_last_error_message());
    /* d w[p, j] = sum over batch and rows of x[.., p] */
    tg_tensor *want =
        tg_expand(tg_unsqueeze(tg_sum_dim(tg_sum_dim(x, 0, false), 0, false), 1), TG_SHAPE(4, 5));
    expect_matches(tg_grad(w), want, 1e-12, "summed weight gradient");
  }
}

/* ---- errors ---- */

TG_TEST(bmm, errors_name_the_operands) {
  tg_tensor *a3 = tg_ones(TG_SHAPE(2, 3, 4), TG_OPTS_DEFAULT);
  cr_assert_null(tg_matmul(a3, tg_ones(TG_SHAPE(2, 5, 2), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_SHAPE, "tg_matmul: a is [2, 3, 4] but b is [2, 5, 2]: inner sizes differ");
  cr_assert_null(tg_matmul(a3, tg_ones(TG_SHAPE(3, 4, 2), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_SHAPE, "tg_matmul: a is [2, 3, 4] and b is [3, 4, 2]", "do not broadcast");
  cr_assert_null(tg_matmul(a3, tg_ones(0, NULL, TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_SHAPE, "tg_matmul", "at least 1 dim");
  cr_assert_null(tg_matmul(a3, tg_ones(TG_SHAPE(4, 2), TG_OPTS(.dtype = TG_F64))));
  tg_expect_error(TG_ERR_DTYPE, "tg_matmul: b is float64 but a is float32");
  cr_assert_null(tg_matmul(tg_zeros(TG_SHAPE(2, 3, 4), TG_OPTS(.dtype = TG_I64)), a3));
  tg_expect_error(TG_ERR_DTYPE, "tg_matmul: a is int64");

  cr_assert_null(tg_bmm(tg_ones(TG_SHAPE(3, 4), TG_OPTS_DEFAULT), a3));
  tg_expect_error(TG_ERR_SHAPE, "tg_bmm: a must be 3-D");
  cr_assert_null(tg_bmm(a3, tg_ones(TG_SHAPE(1, 2, 4, 2), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_SHAPE, "tg_bmm: b must be 3-D");
  cr_assert_null(tg_bmm(a3, tg_ones(TG_SHAPE(1, 4, 2), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_SHAPE, "tg_bmm: a is [2, 3, 4] but b is [1, 4, 2]: batch sizes differ");
  cr_assert_null(tg_bmm(a3, tg_ones(TG_SHAPE(2, 3, 2), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_SHAPE, "tg_bmm: a is [2, 3, 4] but b is [2, 3, 2]: inner sizes differ");
  cr_assert_null(tg_bmm(a3, tg_ones(TG_SHAPE(2, 4, 2), TG_OPTS(.dtype = TG_F64))));
  tg_expect_error(TG_ERR_DTYPE, "tg_bmm: b is float64 but a is float32");
  cr_assert_null(tg_bmm(NULL, a3));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_bmm: a is NULL");
}

/* ---- allocation failures ---- */

static tg_status bmm_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *a = tg_arange(0, 24, 1, TG_OPTS(.dtype = TG_F64));
  tg_tensor *w = tg_arange(0, 8, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *b = tg_arange(0, 16, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *x = a ? tg_reshape(a, TG_SHAPE(2, 3, 4)) : NULL;
  tg_tensor *w2 = w ? tg_reshape(w, TG_SHAPE(4, 2)) : NULL;
  tg_tensor *b3 = b ? tg_transpose(tg_reshape(b, TG_SHAPE(2, 2, 4)), 1, 2) : NULL;
  tg_tensor *y1 = x && w2 ? tg_matmul(x, w2) : NULL;
  tg_tensor *y2 = y1 && b3 ? tg_matmul(x, b3) : NULL;
  tg_status st = status_of(y2);
  if (st == TG_OK) st = append(y1, out, n_out);
  if (st == TG_OK) st = append(y2, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_add(tg_sum(y1), tg_sum(y2)), NULL));
  if (st == TG_OK) st = append(tg_grad(w), out, n_out);
  if (st == TG_OK) st = append(tg_grad(b), out, n_out);
  return st;
}

TG_TEST(bmm, allocation_failures) { sweep("batched matmul forward and backward", bmm_step, NULL); }
