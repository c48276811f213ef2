/* The backward engine's sum of the gradients an output gets from several consumers: added
 * into the first gradient in place when the engine holds the only reference to it, and
 * never into a tensor anyone else can see. */
#include "testutil.h"

static const tg_options f64_grad = {.dtype = TG_F64, .requires_grad = true};

TG_TEST(grad_accumulate, three_consumers_sum_exactly) {
  /* a = 2x feeds three ops: d/da (3a + a*a + a) = 4 + 2a, so dx = 2 (4 + 4x). */
  const double xs[] = {-1.5, 0.25, 3};
  tg_tensor *x = tg_from_data(TG_SHAPE(3), xs, f64_grad);
  tg_tensor *a = tg_mul_scalar(x, 2.0);
  tg_tensor *out = tg_add(tg_add(tg_mul_scalar(a, 3.0), tg_mul(a, a)), a);
  cr_assert_eq(tg_backward(tg_sum(out), NULL), TG_OK, "%s", tg_last_error_message());
  for (int i = 0; i < 3; i++)
    cr_assert_float_eq(tg_test_at(tg_grad(x), i), 2 * (4 + 4 * xs[i]), 1e-12, "element %d", i);
}

/* An identity whose backward hands back `held`, a tensor the test keeps: the gradient of its
 * input is then a tensor someone else holds. */
static tg_tensor *held;
static tg_status keep_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_mul_scalar(in[0], 1.0);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status keep_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx, (void)g;
  gi[0] = held;
  return TG_OK;
}
static const tg_op_desc keep_op = {"test_keep", 1, 1, {keep_forward, NULL}, keep_backward, 0, NULL};

TG_TEST(grad_accumulate, a_gradient_someone_holds_is_not_added_into) {
  tg_tensor *x0 = tg_ones(TG_SHAPE(4), f64_grad);
  tg_tensor *x = tg_mul_scalar(x0, 1.0); /* a node, so its gradients are summed in a slot */
  held = tg_full(TG_SHAPE(4), 5.0, TG_OPTS(.dtype = TG_F64));
  tg_tensor *other = tg_sum(tg_mul_scalar(x, 2.0));
  tg_tensor *kept = tg_sum(tg_apply1(&keep_op, 1, (const tg_tensor *const[]){x}, 0, NULL));
  /* keep's node is the newer: its gradient (held) reaches x's slot first */
  cr_assert_eq(tg_backward(tg_add(kept, other), NULL), TG_OK, "%s", tg_last_error_message());
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(tg_test_at(held, i), 5.0, "held was written: element %d", i);
    cr_assert_float_eq(tg_test_at(tg_grad(x0), i), 7.0, 1e-12, "element %d", i);
  }
}
