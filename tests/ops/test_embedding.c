/* tg_embedding: values by hand, repeated indices adding up in backward, every index shape
 * (0-dim, zero-size, strided), errors, gradcheck and gradgradcheck, a size the CPU splits
 * over threads, and the allocation-failure sweep. */
#include "testutil.h"
#include "alloc_sweep.h"

static const tg_gradcheck_options quiet = {.quiet = true};

static tg_tensor *index_tensor(int ndim, const int64_t *sizes, const int64_t *values) {
  tg_tensor *t = tg_from_data(ndim, sizes, values, TG_OPTS(.dtype = TG_I64));
  cr_assert_not_null(t, "%s", tg_last_error_message());
  return t;
}
#define INDICES(shape, ...) index_tensor(shape, (const int64_t[]){__VA_ARGS__})
/* A 0-dim index. */
#define INDEX(value) index_tensor(0, NULL, (const int64_t[]){value})

/* weight[r, c] = 10 r + c, [n, d], F64 unless dtype says otherwise. */
static tg_tensor *table(int64_t n, int64_t d, tg_dtype dtype, bool grad) {
  tg_tensor *w = tg_empty(TG_SHAPE(n, d), TG_OPTS(.dtype = TG_F64));
  for (int64_t r = 0; r < n; r++)
    for (int64_t c = 0; c < d; c++) tg_set(w, (const int64_t[]){r, c}, (double)(10 * r + c));
  w = tg_to_dtype(w, dtype);
  cr_assert(w && tg_set_requires_grad(w, grad) == TG_OK, "%s", tg_last_error_message());
  return w;
}

TG_TEST(embedding, values_by_hand) {
  tg_dtype dtypes[] = {TG_F32, TG_F64};
  for (int k = 0; k < 2; k++) {
    tg_tensor *w = table(4, 3, dtypes[k], false);
    tg_tensor *y = tg_embedding(w, INDICES(TG_SHAPE(2, 2), 2, 0, 2, 3));
    tg_expect_ok();
    cr_assert_eq(tg_tensor_dtype(y), dtypes[k]);
    tg_assert_sizes(y, 2, 2, 3);
    tg_test_expect_values(y, 12, (const double[]){20, 21, 22, 0, 1, 2, 20, 21, 22, 30, 31, 32}, 0);
  }
}

TG_TEST(embedding, strided_weight_and_indices) {
  /* weight^T of a [3, 4] table: weight[r, c] = 10 c + r. */
  tg_tensor *w = tg_t(table(3, 4, TG_F64, false));
  /* indices [[3, 1], [0, 3]] read through a transpose. */
  tg_tensor *idx = tg_t(INDICES(TG_SHAPE(2, 2), 3, 0, 1, 3));
  tg_tensor *y = tg_embedding(w, idx);
  tg_assert_sizes(y, 2, 2, 3);
  tg_test_expect_values(y, 12, (const double[]){3, 13, 23, 1, 11, 21, 0, 10, 20, 3, 13, 23}, 0);
}

TG_TEST(embedding, zero_dim_and_zero_size_indices) {
  tg_tensor *w = table(4, 3, TG_F64, true);
  tg_tensor *one = tg_embedding(w, INDEX(2));
  tg_assert_sizes(one, 3);
  tg_test_expect_values(one, 3, (const double[]){20, 21, 22}, 0);

  tg_tensor *none = tg_embedding(w, tg_empty(TG_SHAPE(2, 0), TG_OPTS(.dtype = TG_I64)));
  tg_assert_sizes(none, 2, 0, 3);
  cr_assert_eq(tg_backward(tg_sum(none), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(w), 12, (const double[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0);

  /* A table of zero width or zero rows (the latter with no indices to look up). */
  tg_assert_sizes(
      tg_embedding(tg_zeros(TG_SHAPE(4, 0), TG_OPTS_DEFAULT), INDICES(TG_SHAPE(2), 1, 3)), 2, 0);
  tg_assert_sizes(tg_embedding(tg_zeros(TG_SHAPE(0, 5), TG_OPTS_DEFAULT),
                               tg_empty(TG_SHAPE(0), TG_OPTS(.dtype = TG_I64))),
                  0, 5);
  tg_expect_ok();
}

TG_TEST(embedding, repeated_indices_add_up_in_backward) {
  tg_tensor *w = table(4, 2, TG_F64, true);
  tg_tensor *idx = INDICES(TG_SHAPE(4), 1, 1, 3, 1);
  tg_tensor *y = tg_embedding(w, idx);
  cr_assert_str_eq(tg_grad_fn_name(y), "embedding");
  /* upstream gradient row i = (i + 1, 10 (i + 1)) */
  tg_tensor *g =
      tg_test_tensor_of(TG_F64, TG_SHAPE(4, 2), (const double[]){1, 10, 2, 20, 3, 30, 4, 40});
  cr_assert_eq(tg_backward(y, g), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(w), 8, (const double[]){0, 0, 7, 70, 0, 0, 3, 30}, 0);
  cr_assert_null(tg_grad(idx), "indices get no gradient");
  cr_assert(!tg_requires_grad(idx));
}

/* The CPU's scatter-add splits the columns over threads at this size; each column still
 * sums its rows in index order, so the result is the serial loop's to the last bit. */
TG_TEST(embedding, large_backward_is_the_serial_sum) {
  enum { N = 50, D = 300, M = 500 };
  tg_tensor *w = tg_zeros(TG_SHAPE(N, D), TG_OPTS(.dtype = TG_F32, .requires_grad = true));
  static int64_t ids[M];
  for (int i = 0; i < M; i++) ids[i] = (i * 7 + i / 3) % N;
  tg_tensor *idx = index_tensor(1, (const int64_t[]){M}, ids);
  tg_generator *gen = tg_generator_new(3);
  tg_tensor *g = tg_randn(TG_SHAPE(M, D), TG_OPTS(.dtype = TG_F32), gen);
  tg_generator_free(gen);
  cr_assert_eq(tg_backward(tg_embedding(w, idx), g), TG_OK, "%s", tg_last_error_message());
  static float gh[M * D], want[N * D], got[N * D];
  cr_assert_eq(tg_to_host_array(g, gh, sizeof gh), TG_OK);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < D; j++) want[ids[i] * D + j] += gh[i * D + j];
  cr_assert_eq(tg_to_host_array(tg_grad(w), got, sizeof got), TG_OK);
  cr_assert_eq(memcmp(got, want, sizeof got), 0, "the threaded sums differ from the serial ones");
}

TG_TEST(embedding, errors) {
  tg_tensor *w = table(4, 3, TG_F64, false);
  tg_tensor *idx = INDICES(TG_SHAPE(2), 0, 1);
  cr_assert_null(tg_embedding(NULL, idx));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_embedding", "weight is NULL");
  cr_assert_null(tg_embedding(w, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_embedding", "indices is NULL");

  cr_assert_null(tg_embedding(w, INDICES(TG_SHAPE(2, 2), 0, 1, -1, 2)));
  tg_expect_error(TG_ERR_INDEX,
                  "tg_embedding: indices[1, 0] = -1 is outside the weight's rows [0, 4)");
  cr_assert_null(tg_embedding(w, INDICES(TG_SHAPE(3), 3, 4, 0)));
  tg_expect_error(TG_ERR_INDEX, "tg_embedding: indices[1] = 4", "[0, 4)");
  cr_assert_null(tg_embedding(w, INDEX(9)));
  tg_expect_error(TG_ERR_INDEX, "tg_embedding: indices = 9");
  cr_assert_null(tg_embedding(tg_zeros(TG_SHAPE(0, 3), TG_OPTS_DEFAULT), INDICES(TG_SHAPE(1), 0)));
  tg_expect_error(TG_ERR_INDEX, "indices[0] = 0", "[0, 0)");

  cr_assert_null(tg_embedding(w, tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64))));
  tg_expect_error(TG_ERR_DTYPE, "tg_embedding: indices is float64; row indices must be int64");
  cr_assert_null(tg_embedding(tg_zeros(TG_SHAPE(4, 3), TG_OPTS(.dtype = TG_I64)), idx));
  tg_expect_error(TG_ERR_DTYPE, "tg_embedding: weight");
  cr_assert_null(tg_embedding(tg_zeros(TG_SHAPE(12), TG_OPTS_DEFAULT), idx));
  tg_expect_error(TG_ERR_SHAPE, "tg_embedding: weight must be 2-D [n, d], got [12]");
  cr_assert_null(tg_embedding(tg_zeros(TG_SHAPE(2, 2, 3), TG_OPTS_DEFAULT), idx));
  tg_expect_error(TG_ERR_SHAPE, "weight must be 2-D", "[2, 2, 3]");
  cr_assert_null(
      tg_embedding(w, tg_zeros(TG_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), TG_OPTS(.dtype = TG_I64))));
  tg_expect_error(TG_ERR_SHAPE, "tg_embedding: indices has 8 dims");
}

/* in[0] the weight (maybe transposed by the caller), user the indices. */
static tg_status fn_embedding(void *user, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_embedding(in[0], user);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(embedding, gradcheck_and_gradgradcheck) {
  tg_generator *gen = tg_generator_new(11);
  tg_tensor *contiguous =
      tg_randn(TG_SHAPE(4, 3), TG_OPTS(.dtype = TG_F64, .requires_grad = true), gen);
  tg_tensor *base = tg_randn(TG_SHAPE(3, 4), TG_OPTS(.dtype = TG_F64), gen);
  tg_generator_free(gen);
  tg_tensor *transposed = tg_t(base);
  cr_assert_eq(tg_set_requires_grad(transposed, true), TG_OK, "%s", tg_last_error_message());
  tg_tensor *weights[] = {contiguous, transposed};
  tg_tensor *indices[] = {INDICES(TG_SHAPE(5), 3, 0, 3, 3, 1),
                          INDICES(TG_SHAPE(2, 3), 1, 1, 2, 0, 1, 1), INDEX(2),
                          tg_empty(TG_SHAPE(0), TG_OPTS(.dtype = TG_I64))};
  for (int w = 0; w < 2; w++)
    for (int i = 0; i < 4; i++) {
      cr_assert_eq(tg_gradcheck(fn_embedding, indices[i], 1, &weights[w], 1, quiet), TG_OK,
                   "weight %d, indices %d: %s", w, i, tg_last_error_message());
      cr_assert_eq(tg_gradgradcheck(fn_embedding, indices[i], 1, &weights[w], 1, quiet), TG_OK,
                   "weight %d, indices %d: %s", w, i, tg_last_error_message());
    }
}

TG_TEST(embedding, double_backward_picks_the_rows_again) {
  /* L = sum(c * dW) with dW = d(sum(g * emb(W, idx)))/dW: dL/dg = c[idx]. */
  tg_tensor *w = table(3, 2, TG_F64, true);
  tg_tensor *idx = INDICES(TG_SHAPE(3), 2, 0, 2);
  tg_tensor *g = tg_zeros(TG_SHAPE(3, 2), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_sum(tg_mul(tg_embedding(w, idx), g));
  tg_tensor *dw = NULL;
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){y}, NULL, 1,
                                (const tg_tensor *const[]){w}, &dw,
                                (tg_backward_options){.create_graph = true}, false),
               TG_OK, "%s", tg_last_error_message());
  cr_assert_str_eq(tg_grad_fn_name(dw), "embedding_backward");
  tg_tensor *c = tg_test_tensor_of(TG_F64, TG_SHAPE(3, 2), (const double[]){1, 2, 3, 4, 5, 6});
  cr_assert_eq(tg_backward(tg_sum(tg_mul(dw, c)), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(g), 6, (const double[]){5, 6, 1, 2, 5, 6}, 0);
}

/* ---- allocation failures ---- */

static tg_status embedding_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *w = tg_from_data(TG_SHAPE(3, 2), (const double[]){1, 2, 3, 4, 5, 6},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *idx =
      w ? tg_from_data(TG_SHAPE(2, 2), (const int64_t[]){2, 0, 2, 1}, TG_OPTS(.dtype = TG_I64))
        : NULL;
  tg_tensor *y = idx ? tg_embedding(w, idx) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(w), out, n_out);
  /* An index out of range stays TG_ERR_INDEX unless memory ran out first. */
  if (st == TG_OK) {
    tg_tensor *bad = tg_from_data(TG_SHAPE(1), (const int64_t[]){3}, TG_OPTS(.dtype = TG_I64));
    st = status_of(bad);
    if (st == TG_OK && !tg_embedding(w, bad)) {
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

TG_TEST(embedding, allocation_failures) {
  sweep("embedding forward and backward", embedding_step, NULL);
}
