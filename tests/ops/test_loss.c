/* log_softmax, softmax, mse_loss and cross_entropy: hand-checked values, stability for
 * large logits, empty and 0-dim inputs, gradients by gradcheck and gradgradcheck in F64 on
 * contiguous, transposed, sliced and broadcast inputs, and every error path. */
#include <math.h>

#include "testutil.h"

static const tg_gradcheck_options quiet = {.quiet = true};

static tg_tensor *from(int ndim, const int64_t *sizes, const double *values) {
  return tg_from_data(ndim, sizes, values, TG_OPTS(.dtype = TG_F64));
}

static tg_tensor *labels(int64_t n, const int64_t *values) {
  return tg_from_data(1, &n, values, TG_OPTS(.dtype = TG_I64));
}

static double item(const tg_tensor *t) {
  double v = NAN;
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_item(t, &v), TG_OK, "%s", tg_last_error_message());
  return v;
}

/* log(e^1 + e^2 + e^3) */
#define LSE123 3.40760596444437563

/* ---- softmax / log_softmax values ---- */

TG_TEST(loss, log_softmax_and_softmax_by_hand) {
  tg_scope sc = tg_scope_begin();
  for (int dt = 0; dt < 2; dt++) {
    tg_dtype dtype = dt ? TG_F32 : TG_F64;
    double tol = dt ? 1e-6 : 1e-14;
    tg_tensor *x =
        tg_to_dtype(from(TG_SHAPE(2, 3), (const double[]){1, 2, 3, 1001, 1002, 1003}), dtype);
    const double lsm[] = {1 - LSE123, 2 - LSE123, 3 - LSE123};
    tg_tensor *want =
        from(TG_SHAPE(2, 3), (const double[]){lsm[0], lsm[1], lsm[2], lsm[0], lsm[1], lsm[2]});
    tg_tensor *y = tg_log_softmax(x, 1);
    cr_assert(y, "%s", tg_last_error_message());
    cr_assert_eq(tg_tensor_dtype(y), dtype);
    tg_assert_close(y, want, tol, tol); /* the 1000s do not overflow */
    tg_assert_close(tg_softmax(x, -1), tg_exp(want), tol, tol);
  }
  tg_scope_end(sc);
}

TG_TEST(loss, softmax_along_dim_0_of_a_transposed_input) {
  tg_scope sc = tg_scope_begin();
  /* x^T is [[1, 1001], [2, 1002], [3, 1003]]: dim 0 of it is each row of x. */
  tg_tensor *x = from(TG_SHAPE(2, 3), (const double[]){1, 2, 3, 1001, 1002, 1003});
  tg_tensor *p = tg_softmax(tg_t(x), 0);
  tg_assert_sizes(p, 3, 2);
  const double s[] = {exp(1 - LSE123), exp(2 - LSE123), exp(3 - LSE123)};
  tg_assert_close(p, from(TG_SHAPE(3, 2), (const double[]){s[0], s[0], s[1], s[1], s[2], s[2]}),
                  1e-14, 1e-14);
  /* Every column sums to one; a very negative logit underflows to 0, not NaN. */
  tg_tensor *q = tg_softmax(from(TG_SHAPE(3), (const double[]){-1e4, 0, 1e4}), 0);
  tg_assert_close(q, from(TG_SHAPE(3), (const double[]){0, 0, 1}), 0, 0);
  tg_tensor *lq = tg_log_softmax(from(TG_SHAPE(3), (const double[]){-1e4, 0, 1e4}), 0);
  tg_assert_close(lq, from(TG_SHAPE(3), (const double[]){-2e4, -1e4, 0}), 0, 0);
  tg_scope_end(sc);
}

TG_TEST(loss, softmax_of_0_dim_and_empty_inputs) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *s = tg_full(0, NULL, 7.5, TG_OPTS(.dtype = TG_F64));
  tg_tensor *ls = tg_log_softmax(s, 0), *p = tg_softmax(s, -1);
  cr_assert_eq(tg_ndim(ls), 0);
  cr_assert_eq(item(ls), 0.0);
  cr_assert_eq(item(p), 1.0);
  tg_tensor *e = tg_empty(TG_SHAPE(0, 4), TG_OPTS_DEFAULT);
  tg_assert_sizes(tg_log_softmax(e, 1), 0, 4);
  tg_assert_sizes(tg_softmax(e, 0), 0, 4);
  tg_scope_end(sc);
}

/* ---- mse_loss / cross_entropy values ---- */

TG_TEST(loss, mse_loss_by_hand) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *in = from(TG_SHAPE(3), (const double[]){1, 2, 3});
  tg_tensor *target = from(TG_SHAPE(3), (const double[]){0, 2, 5});
  tg_tensor *l = tg_mse_loss(in, target);
  cr_assert(l, "%s", tg_last_error_message());
  cr_assert_eq(tg_ndim(l), 0);
  cr_assert_float_eq(item(l), 5.0 / 3.0, 1e-15);
  /* Strided operands: (x^T - x^T)^2 is 0; a 2-D case against its formula. */
  tg_tensor *x = from(TG_SHAPE(2, 2), (const double[]){1, 2, 3, 4});
  cr_assert_eq(item(tg_mse_loss(tg_t(x), tg_t(x))), 0.0);
  cr_assert_float_eq(item(tg_mse_loss(tg_t(x), x)), (0 + 1 + 1 + 0) / 4.0, 1e-15);
  cr_assert_float_eq(item(tg_mse_loss(tg_to_dtype(in, TG_F32), tg_to_dtype(target, TG_F32))),
                     5.0 / 3.0, 1e-6);
  /* The mean of nothing is NaN, like PyTorch. */
  tg_tensor *e = tg_empty(TG_SHAPE(0, 2), TG_OPTS(.dtype = TG_F64));
  cr_assert(isnan(item(tg_mse_loss(e, e))));
  tg_scope_end(sc);
}

TG_TEST(loss, cross_entropy_by_hand) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *logits = from(TG_SHAPE(2, 3), (const double[]){1, 2, 3, 1, 1, 1});
  tg_tensor *l = tg_cross_entropy(logits, labels(2, (const int64_t[]){2, 0}));
  cr_assert(l, "%s", tg_last_error_message());
  cr_assert_eq(tg_ndim(l), 0);
  double want = ((LSE123 - 3) + log(3.0)) / 2;
  cr_assert_float_eq(item(l), want, 1e-14);
  /* Large logits stay finite: -log_softmax([1000, 0])[1] = 1000. */
  tg_tensor *big = from(TG_SHAPE(1, 2), (const double[]){1000, 0});
  cr_assert_float_eq(item(tg_cross_entropy(big, labels(1, (const int64_t[]){1}))), 1000.0, 1e-9);
  cr_assert_float_eq(
      item(tg_cross_entropy(tg_to_dtype(big, TG_F32), labels(1, (const int64_t[]){1}))), 1000.0,
      1e-3);
  /* Transposed logits and a strided target. */
  tg_tensor *lt = tg_t(from(TG_SHAPE(3, 2), (const double[]){1, 1, 2, 1, 3, 1}));
  tg_tensor *tgt = tg_slice(labels(4, (const int64_t[]){2, 9, 0, 9}), 0, 0, 4, 2);
  cr_assert_float_eq(item(tg_cross_entropy(lt, tgt)), want, 1e-14);
  /* An empty batch gives NaN. */
  cr_assert(isnan(item(tg_cross_entropy(tg_empty(TG_SHAPE(0, 3), TG_OPTS(.dtype = TG_F64)),
                                        tg_empty(TG_SHAPE(0), TG_OPTS(.dtype = TG_I64))))));
  tg_scope_end(sc);
}

/* ---- gradients ---- */

typedef enum layout { CONTIGUOUS, TRANSPOSED, SLICED, BROADCAST, NUM_LAYOUTS } layout;
static const char *const layout_names[] = {"contiguous", "transposed", "sliced", "broadcast"};

/* An F64 leaf [rows, cols] that requires grad, laid out as asked. BROADCAST gives a [1, cols]
 * leaf, which the functions below expand to [rows, cols] before the op sees it. */
static tg_tensor *leaf(int64_t rows, int64_t cols, layout l) {
  tg_options o = {.dtype = TG_F64};
  tg_tensor *t;
  switch (l) {
  case TRANSPOSED:
    t = tg_t(tg_uniform(TG_SHAPE(cols, rows), -2, 2, o, NULL));
    break;
  case SLICED:
    t = tg_narrow(tg_narrow(tg_uniform(TG_SHAPE(rows + 2, cols + 3), -2, 2, o, NULL), 0, 1, rows),
                  1, 2, cols);
    break;
  case BROADCAST:
    t = tg_uniform(TG_SHAPE(1, cols), -2, 2, o, NULL);
    break;
  default:
    t = tg_uniform(TG_SHAPE(rows, cols), -2, 2, o, NULL);
    break;
  }
  cr_assert(t && tg_set_requires_grad(t, true) == TG_OK, "%s", tg_last_error_message());
  return t;
}

typedef struct call {
  int which; /* 0 log_softmax, 1 softmax, 2 mse_loss, 3 cross_entropy */
  int dim;
  int64_t rows; /* inputs of 1 row are expanded to this many */
} call;

static const tg_tensor *broadcast(const tg_tensor *t, int64_t rows) {
  return tg_ndim(t) == 2 && tg_size(t, 0) == 1 && rows > 1 ? tg_expand(t, TG_SHAPE(rows, -1)) : t;
}

static tg_status fn_call(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const call *c = user;
  const tg_tensor *x = broadcast(in[0], c->rows);
  switch (c->which) {
  case 0:
    out[0] = tg_log_softmax(x, c->dim);
    break;
  case 1:
    out[0] = tg_softmax(x, c->dim);
    break;
  case 2:
    out[0] = tg_mse_loss(x, broadcast(in[1], c->rows));
    break;
  default:
    out[0] = tg_cross_entropy(x, in[1]);
    break;
  }
  return out[0] ? TG_OK : tg_last_error();
}

static void check_grads(call *c, int n, tg_tensor **in, const char *what) {
  cr_assert_eq(tg_gradcheck(fn_call, c, n, in, 1, quiet), TG_OK, "%s: %s", what,
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(fn_call, c, n, in, 1, quiet), TG_OK, "%s: %s", what,
               tg_last_error_message());
}

TG_TEST(loss, softmax_gradcheck_every_layout_and_dim) {
  tg_scope sc = tg_scope_begin();
  for (int which = 0; which < 2; which++)
    for (int l = 0; l < NUM_LAYOUTS; l++)
      for (int dim = -1; dim < 2; dim++) {
        call c = {which, dim, 3};
        tg_tensor *in[] = {leaf(3, 4, (layout)l)};
        check_grads(&c, 1, in, layout_names[l]);
      }
  tg_scope_end(sc);
}

TG_TEST(loss, softmax_gradcheck_of_1d_and_0_dim_inputs) {
  tg_scope sc = tg_scope_begin();
  for (int which = 0; which < 2; which++) {
    call c = {which, 0, 1};
    tg_tensor *v[] = {
        tg_uniform(TG_SHAPE(5), -3, 3, TG_OPTS(.dtype = TG_F64, .requires_grad = true), NULL)};
    check_grads(&c, 1, v, "1-D");
    tg_tensor *s[] = {tg_full(0, NULL, 0.3, TG_OPTS(.dtype = TG_F64, .requires_grad = true))};
    check_grads(&c, 1, s, "0-dim");
  }
  tg_scope_end(sc);
}

TG_TEST(loss, mse_loss_gradcheck_every_layout) {
  tg_scope sc = tg_scope_begin();
  for (int li = 0; li < NUM_LAYOUTS; li++)
    for (int lt = 0; lt < NUM_LAYOUTS; lt++) {
      call c = {2, 0, 3};
      tg_tensor *in[] = {leaf(3, 2, (layout)li), leaf(3, 2, (layout)lt)};
      check_grads(&c, 2, in, layout_names[li]);
    }
  /* A target that needs no gradient. */
  call c = {2, 0, 1};
  tg_tensor *in[] = {leaf(2, 2, TRANSPOSED), tg_ones(TG_SHAPE(2, 2), TG_OPTS(.dtype = TG_F64))};
  check_grads(&c, 2, in, "constant target");
  tg_scope_end(sc);
}

TG_TEST(loss, cross_entropy_gradcheck_every_layout) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *target = labels(4, (const int64_t[]){2, 0, 4, 2});
  for (int l = 0; l < NUM_LAYOUTS; l++) {
    call c = {3, 0, 4};
    tg_tensor *in[] = {leaf(4, 5, (layout)l), target};
    check_grads(&c, 2, in, layout_names[l]);
  }
  tg_scope_end(sc);
}

TG_TEST(loss, cross_entropy_backward_is_softmax_minus_one_hot) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *logits = tg_zeros(TG_SHAPE(2, 4), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *l = tg_cross_entropy(logits, labels(2, (const int64_t[]){1, 3}));
  cr_assert_str_eq(tg_grad_fn_name(l), "cross_entropy");
  cr_assert_eq(tg_backward(l, NULL), TG_OK, "%s", tg_last_error_message());
  /* (1/4 - one_hot) / 2 */
  const double want[] = {0.125, -0.375, 0.125, 0.125, 0.125, 0.125, 0.125, -0.375};
  tg_assert_close(tg_grad(logits), from(TG_SHAPE(2, 4), want), 0, 1e-15);
  tg_scope_end(sc);
}

/* ---- errors ---- */

TG_TEST(loss, softmax_errors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_log_softmax(x, 2));
  tg_expect_error(TG_ERR_INDEX, "tg_log_softmax", "dim 2");
  cr_assert_null(tg_softmax(x, -3));
  tg_expect_error(TG_ERR_INDEX, "tg_softmax", "dim -3");
  cr_assert_null(tg_softmax(tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_I64)), 0));
  tg_expect_error(TG_ERR_DTYPE, "tg_softmax: x is int64; expected float32 or float64");
  cr_assert_null(tg_log_softmax(NULL, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_log_softmax", "x is NULL");
  tg_scope_end(sc);
}

TG_TEST(loss, mse_loss_errors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_mse_loss(a, tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_SHAPE,
                  "tg_mse_loss: input is [2, 3] but target is [3]: sizes must be equal");
  cr_assert_null(tg_mse_loss(a, tg_ones(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F64))));
  tg_expect_error(TG_ERR_DTYPE, "tg_mse_loss: target is float64 but input is float32");
  cr_assert_null(tg_mse_loss(tg_zeros(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_I64)), a));
  tg_expect_error(TG_ERR_DTYPE, "tg_mse_loss: input is int64; expected float32 or float64");
  cr_assert_null(tg_mse_loss(a, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_mse_loss", "target is NULL");
  tg_scope_end(sc);
}

TG_TEST(loss, cross_entropy_errors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *logits = tg_zeros(TG_SHAPE(3, 5), TG_OPTS_DEFAULT);
  tg_tensor *target = labels(3, (const int64_t[]){0, 4, 1});
  cr_assert_null(tg_cross_entropy(logits, labels(3, (const int64_t[]){0, 5, 1})));
  tg_expect_error(TG_ERR_INDEX,
                  "tg_cross_entropy: target[1] = 5 is outside the class range [0, 5)");
  cr_assert_null(tg_cross_entropy(logits, labels(3, (const int64_t[]){0, 1, -1})));
  tg_expect_error(TG_ERR_INDEX, "tg_cross_entropy: target[2] = -1");
  cr_assert_null(tg_cross_entropy(tg_zeros(TG_SHAPE(5), TG_OPTS_DEFAULT), target));
  tg_expect_error(TG_ERR_SHAPE, "tg_cross_entropy: logits must be 2-D [n, c], got [5]");
  cr_assert_null(tg_cross_entropy(logits, labels(2, (const int64_t[]){0, 1})));
  tg_expect_error(TG_ERR_SHAPE, "tg_cross_entropy: target is [2] but logits is [3, 5]");
  cr_assert_null(tg_cross_entropy(logits, tg_zeros(TG_SHAPE(3), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_DTYPE, "tg_cross_entropy: target is float32; class indices must be int64");
  cr_assert_null(tg_cross_entropy(tg_zeros(TG_SHAPE(3, 5), TG_OPTS(.dtype = TG_I64)), target));
  tg_expect_error(TG_ERR_DTYPE, "tg_cross_entropy: logits is int64; expected float32 or float64");
  cr_assert_null(tg_cross_entropy(NULL, target));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_cross_entropy", "logits is NULL");
  /* A class index that requires grad cannot exist: integer tensors refuse it. */
  tg_tensor *t = labels(3, (const int64_t[]){0, 1, 2});
  cr_assert_neq(tg_set_requires_grad(t, true), TG_OK);
  tg_clear_error();
  tg_scope_end(sc);
}

TG_TEST(loss, arguments_on_different_devices) {
  if (!tg_cuda_is_available()) cr_skip_test("no CUDA device in this build/machine");
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_mse_loss(x, tg_to_device(x, TG_DEVICE_CUDA(0))));
  tg_expect_error(TG_ERR_DEVICE, "tg_mse_loss: target is on");
  tg_tensor *t = tg_to_device(labels(2, (const int64_t[]){0, 1}), TG_DEVICE_CUDA(0));
  cr_assert_null(tg_cross_entropy(x, t));
  tg_expect_error(TG_ERR_DEVICE, "tg_cross_entropy: target is on");
  tg_scope_end(sc);
}
