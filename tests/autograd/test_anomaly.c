/* Anomaly mode (tg_set_detect_anomaly, torch.autograd.detect_anomaly): the first op call
 * whose output or whose backward's input gradient is not finite fails with TG_ERR_STATE
 * naming it; off by default; thread-local; nothing half-done. */
#include <math.h>
#include <pthread.h>

#include "testutil.h"
#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};
static const tg_options f64_grad = {.dtype = TG_F64, .requires_grad = true};

/* Every test leaves the mode as it found it (off). */
static void anomaly_on(void) { cr_assert_eq(tg_set_detect_anomaly(true), false); }
static void anomaly_off(void) { cr_assert_eq(tg_set_detect_anomaly(false), true); }

TG_TEST(anomaly, off_by_default_nan_passes_silently) {
  cr_assert_eq(tg_is_anomaly_enabled(), false);
  tg_tensor *y = tg_log(tg_from_data(TG_SHAPE(2), (const double[]){1, -1}, f64));
  cr_assert_not_null(y, "%s", tg_last_error_message());
  cr_assert(isnan(tg_test_at(y, 1)));
  tg_expect_ok();
}

TG_TEST(anomaly, forward_log_of_a_negative_fails_naming_the_op) {
  tg_tensor *x = tg_from_data(TG_SHAPE(4), (const double[]){1, 2, -3, 4}, f64_grad);
  anomaly_on();
  int64_t live = tg_live_objects();
  tg_tensor *y = tg_log(x);
  cr_assert_null(y);
  tg_expect_error(TG_ERR_STATE, "tg_log: detect anomaly: forward produced nan in output 0 at [2]",
                  "(of [4])", "tg_set_detect_anomaly");
  cr_assert_eq(tg_live_objects(), live, "no output, no tape node left behind");
  /* Finite values pass; infinity counts too (F32 as well). */
  cr_assert_not_null(tg_exp(x), "%s", tg_last_error_message());
  cr_assert_null(tg_exp(tg_full(TG_SHAPE(2, 2), 100, TG_OPTS(.dtype = TG_F32))));
  tg_expect_error(TG_ERR_STATE,
                  "tg_exp: detect anomaly: forward produced inf in output 0 at [0, 0]");
  anomaly_off();
}

TG_TEST(anomaly, int64_outputs_are_not_judged) {
  anomaly_on();
  tg_tensor *i = tg_arange(0, 5, 1, TG_OPTS(.dtype = TG_I64));
  cr_assert_not_null(tg_view(i, TG_SHAPE(5, 1)), "%s", tg_last_error_message());
  anomaly_off();
}

/* sqrt at 0 is finite (0) but its gradient 1 / (2 sqrt(0)) is inf. */
TG_TEST(anomaly, backward_sqrt_at_zero_stops_the_pass) {
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const double[]){4, 0, 1}, f64_grad);
  tg_tensor *w = tg_from_data(TG_SHAPE(3), (const double[]){1, 1, 1}, f64_grad);
  anomaly_on();
  tg_tensor *loss = tg_sum(tg_mul(tg_sqrt(x), w));
  cr_assert_not_null(loss, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(loss, NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE,
                  "tg_backward: detect anomaly: backward of sqrt produced inf in the gradient of "
                  "input 0 at [1] (of [3])");
  cr_assert_null(tg_grad(x), "the failed node added nothing");
  /* w's gradient came from mul, a node before sqrt: it stays (as in PyTorch). */
  cr_assert_not_null(tg_grad(w));
  anomaly_off();
  /* Off, the same backward gives the inf. */
  tg_tensor *y = tg_sum(tg_sqrt(x));
  cr_assert_eq(tg_backward(y, NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert(isinf(tg_test_at(tg_grad(x), 1)));
}

TG_TEST(anomaly, tg_autograd_grad_is_checked_too) {
  tg_tensor *x = tg_from_data(TG_SHAPE(2), (const double[]){0, 1}, f64_grad);
  tg_tensor *y = tg_sum(tg_sqrt(x)), *g = NULL;
  tg_detect_anomaly_begin();
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){y}, NULL, 1,
                                (const tg_tensor *const[]){x}, &g, (tg_backward_options){0}, false),
               TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_autograd_grad: detect anomaly: backward of sqrt", "input 0");
  cr_assert_null(g);
  tg_detect_anomaly_end();
}

/* A composite's inner ops are not judged, only what the caller asked for: log_softmax of a
 * large logit is finite although exp of it alone would overflow. */
TG_TEST(anomaly, only_the_called_op_is_judged) {
  anomaly_on();
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const double[]){1000, 0, -1000}, f64_grad);
  tg_tensor *y = tg_log_softmax(x, 0);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  anomaly_off();
}

/* ---- a custom function ---- */

/* Two outputs: x and 1 / x. Backward returns g0 + g1 * log(x) (NaN for x < 0). */
static tg_status fwd_two(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_clone(in[0]);
  out[1] = tg_reciprocal(in[0]);
  tg_status st = tg_ctx_save_for_backward(ctx, 1, in);
  return st != TG_OK ? st : out[0] && out[1] ? TG_OK : tg_last_error();
}
static tg_status bwd_two(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_add(g[0], tg_mul(g[1], tg_log(tg_ctx_saved(ctx, 0))));
  return gi[0] ? TG_OK : tg_last_error();
}
static const tg_op_desc two_op = {.name = "anomaly_two",
                                  .n_inputs = 1,
                                  .n_outputs = 2,
                                  .forward = {fwd_two, fwd_two},
                                  .backward = bwd_two};

TG_TEST(anomaly, custom_function_forward_and_backward) {
  if (!tg_op_lookup("anomaly_two")) {
    tg_clear_error();
    cr_assert_eq(tg_op_register(&two_op), TG_OK, "%s", tg_last_error_message());
  }
  const tg_op_desc *op = tg_op_lookup("anomaly_two");
  tg_tensor *out[2];
  anomaly_on();
  tg_tensor *zero = tg_from_data(TG_SHAPE(2), (const double[]){1, 0}, f64_grad);
  cr_assert_eq(tg_apply(op, 1, (const tg_tensor *const[]){zero}, 0, NULL, 2, out), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE,
                  "anomaly_two: detect anomaly: forward produced inf in output 1 at [1]");
  cr_assert(out[0] == NULL && out[1] == NULL);
  tg_tensor *neg = tg_from_data(TG_SHAPE(2), (const double[]){2, -1}, f64_grad);
  cr_assert_eq(tg_apply(op, 1, (const tg_tensor *const[]){neg}, 0, NULL, 2, out), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_backward(tg_add(tg_sum(out[0]), tg_sum(out[1])), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE,
                  "tg_backward: detect anomaly: backward of anomaly_two produced nan in the "
                  "gradient of input 0 at [1]");
  cr_assert_null(tg_grad(neg));
  anomaly_off();
}

TG_TEST(anomaly, regions_nest_and_restore) {
  cr_assert_eq(tg_is_anomaly_enabled(), false);
  tg_detect_anomaly_begin();
  tg_detect_anomaly_begin();
  cr_assert_eq(tg_set_detect_anomaly(false), true); /* off inside the inner region */
  tg_detect_anomaly_end();                          /* restores what its begin saw: on */
  cr_assert_eq(tg_is_anomaly_enabled(), true);
  tg_detect_anomaly_end();
  cr_assert_eq(tg_is_anomaly_enabled(), false);
  tg_detect_anomaly_end(); /* unbalanced: a no-op */
  cr_assert_eq(tg_is_anomaly_enabled(), false);
}

static void *reads_mode(void *arg) {
  *(bool *)arg = tg_is_anomaly_enabled();
  return NULL;
}

TG_TEST(anomaly, the_mode_is_per_thread) {
  anomaly_on();
  bool other = true;
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, reads_mode, &other), 0);
  pthread_join(th, NULL);
  cr_assert_eq(other, false);
  anomaly_off();
}

/* The checks under allocation failure: a finite step's results are unchanged, and a step
 * whose backward makes inf reports the anomaly (result 1) or TG_ERR_MEMORY, leaking
 * nothing either way. */
static tg_status finite_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const double[]){0.5, 1, 2}, f64_grad);
  tg_tensor *y = x ? tg_sum(tg_mul(tg_sqrt(x), x)) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = clean(tg_backward(y, NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

static tg_status anomalous_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const double[]){0.5, 0, 2}, f64_grad);
  tg_tensor *y = x ? tg_sum(tg_sqrt(x)) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = tg_backward(y, NULL);
  if (st != TG_ERR_STATE) return st == TG_OK ? TG_ERR_STATE : st;
  cr_assert(strstr(tg_last_error_message(), "detect anomaly"), "%s", tg_last_error_message());
  tg_clear_error();
  out[(*n_out)++] = 1;
  return TG_OK;
}

TG_TEST(anomaly, allocation_failures) {
  anomaly_on();
  sweep("anomaly: finite", finite_step, NULL);
  sweep("anomaly: inf gradient", anomalous_step, NULL);
  anomaly_off();
}
