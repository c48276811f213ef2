/* Gradient destinations (src/autograd/grad_destination.h): a backward may add a leaf's
 * gradient straight into its .grad. When it is offered, what it gives (the same .grad as
 * accumulating through the engine), and the misuse the engine refuses. */
#include "autograd/grad_destination.h"
#include "testutil.h"

/* ---- a test op: y = 2x, whose backward takes x's destination when offered ---- */

static int offered, returned_too;

static tg_status fwd_double(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_mul_scalar(in[0], 2.0);
  return out[0] ? TG_OK : tg_last_error();
}

static tg_status bwd_double(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gin) {
  tg_tensor *into = tg__ctx_grad_destination(ctx, 0);
  tg_tensor *d = tg_mul_scalar(g[0], 2.0);
  if (!d) return tg_last_error();
  if (!into) {
    gin[0] = d;
    return TG_OK;
  }
  offered++;
  cr_assert_null(tg__ctx_grad_destination(ctx, 0), "handed out twice");
  tg_status st = tg_add_(into, d);
  if (returned_too) gin[0] = d; /* misuse: counted twice */
  return st;
}

static const tg_op_desc double_op = {"double_into_grad", 1, 1,   {fwd_double, NULL},
                                     bwd_double,         0, NULL};

static tg_tensor *double_of(tg_tensor *x) {
  tg_tensor *y = NULL;
  cr_assert_eq(tg_apply(&double_op, 1, (const tg_tensor *const[]){x}, 0, NULL, 1, &y), TG_OK, "%s",
               tg_last_error_message());
  return y;
}

static tg_tensor *leaf(void) {
  tg_tensor *x = tg_test_tensor_of(TG_F64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  return x;
}

TG_TEST(grad_destination, offered_once_grad_exists) {
  tg_tensor *x = leaf();
  offered = 0;
  cr_assert_eq(tg_backward(tg_sum(double_of(x)), NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(offered, 0, "no .grad yet: nothing to add into");
  tg_test_expect_values(tg_grad(x), 3, (double[]){2, 2, 2}, 0);
  const uint64_t before = tg_version(tg_grad(x));
  cr_assert_eq(tg_backward(tg_sum(double_of(x)), NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(offered, 1);
  tg_test_expect_values(tg_grad(x), 3, (double[]){4, 4, 4}, 0);
  cr_assert_gt(tg_version(tg_grad(x)), before, "the .grad changed in place: its version moves");
}

TG_TEST(grad_destination, not_offered_to_autograd_grad_or_create_graph) {
  tg_tensor *x = leaf();
  cr_assert_eq(tg_backward(tg_sum(double_of(x)), NULL), TG_OK);
  offered = 0;
  const tg_tensor *root[1] = {tg_sum(double_of(x))};
  tg_tensor *g = NULL;
  cr_assert_eq(tg_autograd_grad(1, root, NULL, 1, (const tg_tensor *const[]){x}, &g,
                                (tg_backward_options){0}, false),
               TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(g, 3, (double[]){2, 2, 2}, 0);
  tg_test_expect_values(tg_grad(x), 3, (double[]){2, 2, 2}, 0); /* untouched */
  cr_assert_eq(
      tg_backward_ex(tg_sum(double_of(x)), NULL, (tg_backward_options){.create_graph = true}),
      TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(offered, 0);
  tg_test_expect_values(tg_grad(x), 3, (double[]){4, 4, 4}, 0);
}

TG_TEST(grad_destination, not_offered_for_non_leaf_or_grad_free_input) {
  tg_tensor *x = leaf();
  cr_assert_eq(tg_backward(tg_sum(double_of(x)), NULL), TG_OK);
  offered = 0;
  /* The op's input is a non-leaf (x * 1): the engine owns that gradient. */
  cr_assert_eq(tg_backward(tg_sum(double_of(tg_mul_scalar(x, 1.0))), NULL), TG_OK);
  cr_assert_eq(offered, 0);
  tg_test_expect_values(tg_grad(x), 3, (double[]){4, 4, 4}, 0);
}

TG_TEST(grad_destination, taking_and_returning_is_an_error) {
  tg_tensor *x = leaf();
  cr_assert_eq(tg_backward(tg_sum(double_of(x)), NULL), TG_OK);
  returned_too = 1;
  cr_assert_neq(tg_backward(tg_sum(double_of(x)), NULL), TG_OK);
  returned_too = 0;
  tg_expect_error(TG_ERR_STATE, "tg_backward", "double_into_grad",
                  "added input 0's gradient into its .grad and also returned one");
  /* The lock was given back: the next backward accumulates again. */
  offered = 0;
  cr_assert_eq(tg_backward(tg_sum(double_of(x)), NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(offered, 1);
}

TG_TEST(grad_destination, outside_backward_nothing) {
  tg_tensor *x = leaf();
  cr_assert_null(tg__ctx_grad_destination(NULL, 0));
  (void)x;
}

/* The fused LLTM adds d_weights into weights.grad: the same .grad as the composed cell's,
 * over several accumulating backward calls, F64. */
TG_TEST(grad_destination, fused_lltm_accumulates_weights_grad) {
  const tg_options o = {.dtype = TG_F64};
  tg_manual_seed(3);
  tg_tensor *in[5] = {
      tg_uniform(TG_SHAPE(4, 5), -1, 1, o, NULL), tg_uniform(TG_SHAPE(9, 8), -0.5, 0.5, o, NULL),
      tg_uniform(TG_SHAPE(9), -0.5, 0.5, o, NULL), tg_uniform(TG_SHAPE(4, 3), -1, 1, o, NULL),
      tg_uniform(TG_SHAPE(4, 3), -1, 1, o, NULL)};
  tg_tensor *w2 = tg_clone(in[1]);
  cr_assert_eq(tg_set_requires_grad(in[1], true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(w2, true), TG_OK);
  for (int step = 0; step < 3; step++) {
    tg_tensor *h, *c, *h2, *c2;
    cr_assert_eq(tg_lltm(in[0], in[1], in[2], in[3], in[4], &h, &c), TG_OK);
    cr_assert_eq(tg_lltm_composed(in[0], w2, in[2], in[3], in[4], &h2, &c2), TG_OK);
    cr_assert_eq(tg_backward(tg_add(tg_sum(h), tg_sum(c)), NULL), TG_OK, "%s",
                 tg_last_error_message());
    cr_assert_eq(tg_backward(tg_add(tg_sum(h2), tg_sum(c2)), NULL), TG_OK, "%s",
                 tg_last_error_message());
    tg_assert_close(tg_grad(in[1]), tg_grad(w2), 1e-12, 1e-12);
  }
}
