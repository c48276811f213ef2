/* tg_backward_multi: one backward pass from several roots, each with its upstream gradient,
 * equals backward of sum(roots[j] * grads[j]). */
#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};
static const tg_options f64_grad = {.dtype = TG_F64, .requires_grad = true};

/* x, w leaves; y1 = sum(x * w) (a scalar), y2 = exp(x) * w (a vector): they share x and w. */
typedef struct graph {
  tg_tensor *x, *w, *y1, *y2, *g2;
} graph;

static graph make_graph(void) {
  const double xs[] = {0.5, -1.25, 2}, ws[] = {1.5, 0.25, -3}, gs[] = {0.3, -2, 1.1};
  graph g;
  g.x = tg_from_data(TG_SHAPE(3), xs, f64_grad);
  g.w = tg_from_data(TG_SHAPE(3), ws, f64_grad);
  g.y1 = tg_sum(tg_mul(g.x, g.w));
  g.y2 = tg_mul(tg_exp(g.x), g.w);
  g.g2 = tg_from_data(TG_SHAPE(3), gs, f64);
  cr_assert(g.y2 && g.g2, "%s", tg_last_error_message());
  return g;
}

static void expect_equal(const tg_tensor *a, const tg_tensor *b) {
  cr_assert(a && b, "missing gradient");
  cr_assert(tg_allclose(a, b, 1e-13, 1e-13), "max |diff| %g", tg_max_abs_diff(a, b));
}

static void zero_grads(graph *g) {
  cr_assert_eq(tg_zero_grad(g->x), TG_OK);
  cr_assert_eq(tg_zero_grad(g->w), TG_OK);
}

TG_TEST(backward_multi, equals_the_sum_trick) {
  graph g = make_graph();
  const tg_tensor *roots[] = {g.y1, g.y2}, *grads[] = {NULL, g.g2};
  cr_assert_eq(tg_backward_multi(2, roots, grads, (tg_backward_options){.retain_graph = true}),
               TG_OK, "%s", tg_last_error_message());
  tg_tensor *gx = tg_clone(tg_grad(g.x)), *gw = tg_clone(tg_grad(g.w));
  zero_grads(&g);
  /* y1 + sum(y2 * g2) */
  tg_tensor *total = tg_add(g.y1, tg_sum(tg_mul(g.y2, g.g2)));
  cr_assert_eq(tg_backward(total, NULL), TG_OK, "%s", tg_last_error_message());
  expect_equal(gx, tg_grad(g.x));
  expect_equal(gw, tg_grad(g.w));
}

TG_TEST(backward_multi, equals_separate_backward_calls) {
  graph g = make_graph();
  const tg_tensor *roots[] = {g.y1, g.y2}, *grads[] = {NULL, g.g2};
  cr_assert_eq(tg_backward_multi(2, roots, grads, (tg_backward_options){.retain_graph = true}),
               TG_OK, "%s", tg_last_error_message());
  tg_tensor *gx = tg_clone(tg_grad(g.x)), *gw = tg_clone(tg_grad(g.w));
  zero_grads(&g);
  tg_backward_options keep = {.retain_graph = true};
  cr_assert_eq(tg_backward_ex(g.y1, NULL, keep), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward_ex(g.y2, g.g2, keep), TG_OK, "%s", tg_last_error_message());
  expect_equal(gx, tg_grad(g.x));
  expect_equal(gw, tg_grad(g.w));
}

TG_TEST(backward_multi, hand_checked_and_graph_freed_after) {
  graph g = make_graph();
  const tg_tensor *roots[] = {g.y1, g.y2};
  const tg_tensor *grads[] = {tg_scalar(2.0, f64), g.g2};
  cr_assert_eq(tg_backward_multi(2, roots, grads, (tg_backward_options){0}), TG_OK, "%s",
               tg_last_error_message());
  /* d/dx (2 sum(x w) + sum(exp(x) w g2)) = 2 w + exp(x) w g2; d/dw = 2 x + exp(x) g2 */
  const double xs[] = {0.5, -1.25, 2}, ws[] = {1.5, 0.25, -3}, gs[] = {0.3, -2, 1.1};
  for (int i = 0; i < 3; i++) {
    cr_assert_float_eq(tg_test_at(tg_grad(g.x), i), 2 * ws[i] + exp(xs[i]) * ws[i] * gs[i], 1e-12);
    cr_assert_float_eq(tg_test_at(tg_grad(g.w), i), 2 * xs[i] + exp(xs[i]) * gs[i], 1e-12);
  }
  /* Without retain_graph the shared graph's saved tensors are gone. */
  cr_assert_eq(tg_backward(g.y1, NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_backward", "second time");
}

TG_TEST(backward_multi, roots_sharing_a_subgraph_count_it_once_per_root) {
  tg_tensor *x = tg_from_data(TG_SHAPE(2), (const double[]){1, 3}, f64_grad);
  tg_tensor *h = tg_mul(x, x); /* shared: h = x^2 */
  tg_tensor *a = tg_sum(h), *b = tg_sum(tg_mul_scalar(h, 3.0));
  const tg_tensor *roots[] = {a, b, a}; /* a twice: counted twice, as in torch */
  cr_assert_eq(tg_backward_multi(3, roots, NULL, (tg_backward_options){0}), TG_OK, "%s",
               tg_last_error_message());
  /* d/dx (2 sum(x^2) + 3 sum(x^2)) = 10 x */
  tg_test_expect_values(tg_grad(x), 2, (const double[]){10, 30}, 1e-12);
}

TG_TEST(backward_multi, a_leaf_root_gets_its_grad_added) {
  tg_tensor *x = tg_from_data(TG_SHAPE(2), (const double[]){1, 2}, f64_grad);
  tg_tensor *y = tg_sum(tg_mul(x, x));
  tg_tensor *gx = tg_from_data(TG_SHAPE(2), (const double[]){10, 20}, f64);
  const tg_tensor *roots[] = {y, x}, *grads[] = {NULL, gx};
  cr_assert_eq(tg_backward_multi(2, roots, grads, (tg_backward_options){0}), TG_OK, "%s",
               tg_last_error_message());
  /* 2x from y, plus the leaf root's own gradient */
  tg_test_expect_values(tg_grad(x), 2, (const double[]){12, 24}, 1e-12);
  /* A one-element leaf root alone: grad += 1 */
  tg_tensor *s = tg_scalar(4.0, f64_grad);
  cr_assert_eq(tg_backward_multi(1, (const tg_tensor *const[]){s}, NULL, (tg_backward_options){0}),
               TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward_multi(1, (const tg_tensor *const[]){s}, NULL, (tg_backward_options){0}),
               TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(s), 1, (const double[]){2}, 0);
}

TG_TEST(backward_multi, create_graph_gives_differentiable_grads) {
  tg_tensor *x = tg_from_data(TG_SHAPE(2), (const double[]){1, 2}, f64_grad);
  tg_tensor *a = tg_sum(tg_mul(tg_mul(x, x), x)), *b = tg_sum(tg_mul(x, x));
  cr_assert_eq(tg_backward_multi(2, (const tg_tensor *const[]){a, b}, NULL,
                                 (tg_backward_options){.create_graph = true}),
               TG_OK, "%s", tg_last_error_message());
  /* grad = 3x^2 + 2x; its derivative summed: 6x + 2 */
  tg_tensor *gsum = tg_sum(tg_grad(x));
  tg_tensor *dx = NULL;
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){gsum}, NULL, 1,
                                (const tg_tensor *const[]){x}, &dx, (tg_backward_options){0},
                                false),
               TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(dx, 2, (const double[]){8, 14}, 1e-12);
  cr_assert_eq(tg_set_grad(x, NULL), TG_OK); /* x.grad's graph holds x: break the cycle */
}

TG_TEST(backward_multi, bad_counts_and_null_entries) {
  graph g = make_graph();
  const tg_tensor *roots[] = {g.y1, NULL};
  cr_assert_eq(tg_backward_multi(0, roots, NULL, (tg_backward_options){0}), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_backward_multi: need at least one root (got 0");
  cr_assert_eq(tg_backward_multi(-3, roots, NULL, (tg_backward_options){0}), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_backward_multi", "got -3");
  cr_assert_eq(tg_backward_multi(1, NULL, NULL, (tg_backward_options){0}), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_backward_multi", "roots NULL");
  cr_assert_eq(tg_backward_multi(2, roots, NULL, (tg_backward_options){0}), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_backward_multi: root 1 is NULL");
  /* A NULL root from a failed op keeps that op's error. */
  tg_tensor *failed = tg_add(g.x, tg_ones(TG_SHAPE(4), f64));
  roots[1] = failed;
  cr_assert_eq(tg_backward_multi(2, roots, NULL, (tg_backward_options){0}), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_add");
  cr_assert_null(tg_grad(g.x), "nothing ran");
}

TG_TEST(backward_multi, checks_each_root_naming_it) {
  graph g = make_graph();
  tg_backward_options none = {0};
  /* A non-scalar root needs a gradient. */
  const tg_tensor *roots[] = {g.y1, g.y2};
  cr_assert_eq(tg_backward_multi(2, roots, NULL, none), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_backward_multi",
                  "implicitly created only for one-element outputs, output 1 is [3]");
  cr_assert_eq(tg_backward_multi(2, roots, (const tg_tensor *const[]){NULL, NULL}, none),
               TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "output 1 is [3]");
  /* Its gradient's shape, dtype and the root's requires_grad are checked. */
  const tg_tensor *bad_shape[] = {NULL, tg_ones(TG_SHAPE(4), f64)};
  cr_assert_eq(tg_backward_multi(2, roots, bad_shape, none), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_backward_multi: grad [4] does not match output 1 [3]");
  const tg_tensor *bad_dtype[] = {NULL, tg_ones(TG_SHAPE(3), TG_OPTS(.dtype = TG_F32))};
  cr_assert_eq(tg_backward_multi(2, roots, bad_dtype, none), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_backward_multi", "grad is float32", "output 1");
  const tg_tensor *plain[] = {g.y1, g.g2};
  cr_assert_eq(tg_backward_multi(2, plain, (const tg_tensor *const[]){NULL, g.g2}, none),
               TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_backward_multi: output 1 [3] does not require grad");
  cr_assert_null(tg_grad(g.x), "nothing ran");
  cr_assert_null(tg_grad(g.w), "nothing ran");
  /* The graph is intact: a good call works. */
  cr_assert_eq(tg_backward_multi(2, roots, (const tg_tensor *const[]){NULL, g.g2}, none), TG_OK,
               "%s", tg_last_error_message());
}

/* The sweep: two roots over a shared graph, the gradients as results. */
static tg_status multi_step(void *user, double *out, int *n_out) {
  (void)user;
  const double xs[] = {0.5, -1.25, 2};
  tg_tensor *x = tg_from_data(TG_SHAPE(3), xs, f64_grad);
  tg_tensor *h = x ? tg_exp(x) : NULL;
  tg_tensor *a = h ? tg_sum(tg_mul(h, x)) : NULL;
  tg_tensor *b = a ? tg_mul_scalar(h, 2.0) : NULL;
  tg_tensor *gb = b ? tg_full(TG_SHAPE(3), 0.5, f64) : NULL;
  tg_status st = status_of(gb);
  if (st == TG_OK)
    st = clean(tg_backward_multi(3, (const tg_tensor *const[]){a, b, x},
                                 (const tg_tensor *const[]){NULL, gb, gb},
                                 (tg_backward_options){0}));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(backward_multi, allocation_failures_are_clean) {
  sweep("tg_backward_multi", multi_step, NULL);
}

TG_TEST(backward_multi, rejects_no_roots_and_null_roots) {
  tg_tensor *x = tg_from_data(TG_SHAPE(2), (const double[]){1, 2}, f64_grad);
  tg_tensor *y = tg_sum(x);
  cr_assert(y, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward_multi(0, (const tg_tensor *const[]){y}, NULL, (tg_backward_options){0}),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_backward_multi: need at least one root (got 0");
  cr_assert_eq(tg_backward_multi(1, NULL, NULL, (tg_backward_options){0}), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "roots NULL");
  cr_assert_eq(
      tg_backward_multi(2, (const tg_tensor *const[]){y, NULL}, NULL, (tg_backward_options){0}),
      TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_backward_multi: root 1 is NULL");
  /* A NULL root from a failed call keeps that call's error. */
  cr_assert_null(tg_reshape(x, 1, (const int64_t[]){3}));
  cr_assert_eq(
      tg_backward_multi(1, (const tg_tensor *const[]){NULL}, NULL, (tg_backward_options){0}),
      TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_reshape");
  cr_assert_null(tg_grad(x));
}
