/* nn: the LLTM cell and Linear modules (init, parameters, forward, ownership) and the SGD
 * and Adam optimizers (torch.optim's update rules checked by hand), errors included. */
#include <math.h>

#include "testutil.h"

static double max_abs(const tg_tensor *t) {
  tg_tensor *zero = tg_zeros_like(t);
  return tg_test_max_abs_diff(t, zero);
}

/* ---- the LLTM cell ---- */

TG_TEST(nn, lltm_cell_parameters_and_init) {
  tg_generator *gen = tg_generator_new(3);
  tg_lltm_cell *cell = tg_lltm_cell_new(32, 128, TG_OPTS_DEFAULT, gen);
  tg_generator_free(gen);
  cr_assert_not_null(cell, "%s", tg_last_error_message());
  tg_scope sc = tg_scope_begin();
  tg_tensor *w = tg_lltm_cell_weights(cell), *b = tg_lltm_cell_bias(cell);
  tg_assert_sizes(w, 384, 160);
  tg_assert_sizes(b, 384);
  cr_assert_eq(tg_lltm_cell_input_features(cell), 32);
  cr_assert_eq(tg_lltm_cell_state_size(cell), 128);
  for (int k = 0; k < 2; k++) {
    tg_tensor *p = k ? b : w;
    cr_assert(tg_requires_grad(p) && tg_is_leaf(p));
    cr_assert_eq(tg_tensor_dtype(p), TG_F32);
    /* uniform(-1/sqrt(S), 1/sqrt(S)): inside the bound and spread over most of it */
    double m = max_abs(p);
    cr_assert(m <= 1.0 / sqrt(128.0) && m > 0.9 / sqrt(128.0), "max |p| = %g", m);
  }
  tg_tensor *params[3] = {NULL, NULL, NULL};
  cr_assert_eq(tg_lltm_cell_parameters(cell, params, 3), 2);
  cr_assert(params[0] == w && params[1] == b && params[2] == NULL);
  cr_assert_eq(tg_lltm_cell_parameters(cell, params, 1), 2);
  cr_assert_eq(tg_lltm_cell_parameters(cell, NULL, 0), 2);
  tg_scope_end(sc);
  tg_lltm_cell_free(cell);
  tg_lltm_cell_free(NULL);
}

TG_TEST(nn, lltm_cell_same_seed_same_parameters) {
  tg_generator *g1 = tg_generator_new(9), *g2 = tg_generator_new(9);
  tg_lltm_cell *a = tg_lltm_cell_new(3, 4, TG_OPTS(.dtype = TG_F64), g1);
  tg_lltm_cell *b = tg_lltm_cell_new(3, 4, TG_OPTS(.dtype = TG_F64), g2);
  tg_generator_free(g1);
  tg_generator_free(g2);
  tg_scope sc = tg_scope_begin();
  tg_assert_close(tg_lltm_cell_weights(a), tg_lltm_cell_weights(b), 0, 0);
  tg_assert_close(tg_lltm_cell_bias(a), tg_lltm_cell_bias(b), 0, 0);
  tg_scope_end(sc);
  tg_lltm_cell_free(a);
  tg_lltm_cell_free(b);
}

TG_TEST(nn, lltm_cell_forward_both_paths) {
  tg_lltm_cell *cell = tg_lltm_cell_new(5, 7, TG_OPTS(.dtype = TG_F64), NULL);
  cr_assert_not_null(cell);
  tg_scope sc = tg_scope_begin();
  tg_options o = {.dtype = TG_F64};
  tg_tensor *x = tg_randn(TG_SHAPE(3, 5), o, NULL), *h = tg_randn(TG_SHAPE(3, 7), o, NULL);
  tg_tensor *c = tg_randn(TG_SHAPE(3, 7), o, NULL);
  tg_tensor *fh, *fc, *ch, *cc;
  cr_assert_eq(tg_lltm_cell_forward(cell, TG_LLTM_FUSED, x, h, c, &fh, &fc), TG_OK);
  cr_assert_eq(tg_lltm_cell_forward(cell, TG_LLTM_COMPOSED, x, h, c, &ch, &cc), TG_OK);
  tg_assert_sizes(fh, 3, 7);
  tg_assert_close(fh, ch, 1e-12, 1e-14);
  tg_assert_close(fc, cc, 1e-12, 1e-14);
  cr_assert_str_eq(tg_grad_fn_name(fh), "lltm");
  /* Gradients reach the module's parameters, equal through both paths. */
  cr_assert_eq(tg_backward(tg_add(tg_sum(fh), tg_sum(fc)), NULL), TG_OK);
  tg_tensor *gw = tg_clone(tg_grad(tg_lltm_cell_weights(cell)));
  tg_tensor *gb = tg_clone(tg_grad(tg_lltm_cell_bias(cell)));
  tg_set_grad(tg_lltm_cell_weights(cell), NULL);
  tg_set_grad(tg_lltm_cell_bias(cell), NULL);
  cr_assert_eq(tg_backward(tg_add(tg_sum(ch), tg_sum(cc)), NULL), TG_OK);
  tg_assert_close(gw, tg_grad(tg_lltm_cell_weights(cell)), 1e-12, 1e-14);
  tg_assert_close(gb, tg_grad(tg_lltm_cell_bias(cell)), 1e-12, 1e-14);
  tg_scope_end(sc);
  tg_lltm_cell_free(cell); /* the gradients go with the parameters */
}

TG_TEST(nn, lltm_cell_errors) {
  cr_assert_null(tg_lltm_cell_new(0, 4, TG_OPTS_DEFAULT, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm_cell_new", "input_features (0)");
  cr_assert_null(tg_lltm_cell_new(3, -1, TG_OPTS_DEFAULT, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm_cell_new", "state_size (-1)");
  cr_assert_null(tg_lltm_cell_new(3, 4, TG_OPTS(.dtype = TG_I64), NULL));
  tg_expect_error(TG_ERR_DTYPE, "tg_lltm_cell_new", "int64");

  tg_lltm_cell *cell = tg_lltm_cell_new(3, 4, TG_OPTS_DEFAULT, NULL);
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 3), TG_OPTS_DEFAULT),
            *h = tg_zeros(TG_SHAPE(2, 4), TG_OPTS_DEFAULT);
  tg_tensor *nh = (tg_tensor *)1, *nc = (tg_tensor *)1;
  cr_assert_eq(tg_lltm_cell_forward(cell, (tg_lltm_impl)7, x, h, h, &nh, &nc), TG_ERR_ARGUMENT);
  cr_assert(nh == NULL && nc == NULL);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm_cell_forward", "impl 7");
  cr_assert_eq(tg_lltm_cell_forward(NULL, TG_LLTM_FUSED, x, h, h, &nh, &nc), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm_cell_forward: cell is NULL");
  /* A wrong input is named against the cell; the op's own checks name the module first. */
  cr_assert_eq(tg_lltm_cell_forward(cell, TG_LLTM_FUSED, h, h, h, &nh, &nc), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE,
                  "tg_lltm_cell_forward: input is [2, 4] but the cell takes [batch, 3]");
  cr_assert_eq(tg_lltm_cell_forward(cell, TG_LLTM_COMPOSED, x, x, h, &nh, &nc), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_lltm_cell_forward: tg_lltm_composed: ", "old_h");
  cr_assert_eq(tg_lltm_cell_forward(cell, TG_LLTM_FUSED, x, h, h, &nh, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm_cell_forward: tg_lltm: ", "new_h and new_cell");
  tg_scope_end(sc);
  tg_lltm_cell_free(cell);
}

/* ---- Linear ---- */

TG_TEST(nn, linear_forward_and_parameters) {
  tg_linear *m = tg_linear_new(4, 3, true, TG_OPTS(.dtype = TG_F64), NULL);
  tg_linear *nob = tg_linear_new(4, 3, false, TG_OPTS(.dtype = TG_F64), NULL);
  cr_assert(m && nob, "%s", tg_last_error_message());
  tg_scope sc = tg_scope_begin();
  tg_assert_sizes(tg_linear_weight(m), 3, 4);
  tg_assert_sizes(tg_linear_bias(m), 3);
  cr_assert_null(tg_linear_bias(nob));
  cr_assert(max_abs(tg_linear_weight(m)) <= 0.5); /* 1/sqrt(4) */
  tg_tensor *params[2];
  cr_assert_eq(tg_linear_parameters(m, params, 2), 2);
  cr_assert(params[0] == tg_linear_weight(m) && params[1] == tg_linear_bias(m));
  cr_assert_eq(tg_linear_parameters(nob, params, 2), 1);

  tg_tensor *x = tg_randn(TG_SHAPE(5, 4), TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *y = tg_linear_forward(m, x);
  tg_tensor *want = tg_add(tg_matmul(x, tg_t(tg_linear_weight(m))), tg_linear_bias(m));
  tg_assert_close(y, want, 1e-14, 1e-14);
  tg_assert_close(tg_linear_forward(nob, x), tg_matmul(x, tg_t(tg_linear_weight(nob))), 1e-14,
                  1e-14);
  cr_assert_null(tg_linear_forward(m, tg_zeros(TG_SHAPE(5, 3), TG_OPTS(.dtype = TG_F64))));
  tg_expect_error(TG_ERR_SHAPE, "tg_linear_forward", "x is [5, 3]", "[batch, 4]");
  cr_assert_null(tg_linear_forward(m, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_linear_forward", "x is NULL");
  /* dtype and device are the module's errors too, not the inner tg_addmm's. */
  cr_assert_null(tg_linear_forward(m, tg_zeros(TG_SHAPE(5, 4), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_DTYPE, "tg_linear_forward: x is float32 but m's weight is float64");
  cr_assert_null(tg_linear_forward(m, tg_zeros(TG_SHAPE(5, 4), TG_OPTS(.dtype = TG_I64))));
  tg_expect_error(TG_ERR_DTYPE, "tg_linear_forward: x is int64; expected float32 or float64");
  tg_scope_end(sc);
  tg_linear_free(m);
  tg_linear_free(nob);
  cr_assert_null(tg_linear_new(0, 3, true, TG_OPTS_DEFAULT, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_linear_new", "in_features (0)");
}

/* ---- optimizers ---- */

/* A one-element F64 parameter with value p and gradient g. */
static tg_tensor *param_with_grad(double p, double g) {
  tg_tensor *t = tg_full(TG_SHAPE(1), p, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  cr_assert_eq(tg_set_grad(t, tg_full(TG_SHAPE(1), g, TG_OPTS(.dtype = TG_F64))), TG_OK);
  return t;
}

static double value(const tg_tensor *t) {
  double v;
  cr_assert_eq(tg_item(t, &v), TG_OK);
  return v;
}

TG_TEST(nn, sgd_plain_momentum_nesterov_weight_decay) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *p[4] = {param_with_grad(1.0, 0.5), param_with_grad(1.0, 0.5),
                     param_with_grad(1.0, 0.5), param_with_grad(1.0, 0.5)};
  tg_optimizer *plain = tg_sgd_new(1, &p[0], (tg_sgd_options){.lr = 0.1});
  tg_optimizer *mom =
      tg_sgd_new(1, &p[1], (tg_sgd_options){.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  tg_optimizer *nest =
      tg_sgd_new(1, &p[2], (tg_sgd_options){.lr = 0.1, .momentum = 0.9, .nesterov = true});
  tg_optimizer *wd = tg_sgd_new(1, &p[3], (tg_sgd_options){.lr = 0.1, .weight_decay = 0.2});
  cr_assert(plain && mom && nest && wd, "%s", tg_last_error_message());
  for (int step = 0; step < 2; step++) {
    tg_optimizer *all[4] = {plain, mom, nest, wd};
    for (int k = 0; k < 4; k++) cr_assert_eq(tg_optimizer_step(all[k]), TG_OK);
  }
  /* torch.optim.SGD by hand, g = 0.5 both steps:
   * plain: 1 - 0.05 - 0.05 = 0.9
   * momentum 0.9, dampening 0.5: buf1 = g = 0.5, p = 0.95; buf2 = 0.45 + 0.25 = 0.7, p = 0.88
   * nesterov: buf1 = 0.5, step g + 0.9*0.5 = 0.95 -> 0.905; buf2 = 0.45 + 0.5 = 0.95,
   *   step 0.5 + 0.855 = 1.355 -> 0.7695
   * weight decay 0.2: g1 = 0.5 + 0.2 = 0.7 -> 0.93; g2 = 0.5 + 0.186 = 0.686 -> 0.8614 */
  cr_assert_float_eq(value(p[0]), 0.9, 1e-14);
  cr_assert_float_eq(value(p[1]), 0.88, 1e-14);
  cr_assert_float_eq(value(p[2]), 0.7695, 1e-14);
  cr_assert_float_eq(value(p[3]), 0.8614, 1e-14);
  cr_assert(!tg_requires_grad(tg_grad(p[0])));
  /* zero_grad keeps the buffer, zeroed */
  cr_assert_eq(tg_optimizer_zero_grad(plain), TG_OK);
  cr_assert_float_eq(value(tg_grad(p[0])), 0.0, 0);
  tg_optimizer_free(plain);
  tg_optimizer_free(mom);
  tg_optimizer_free(nest);
  tg_optimizer_free(wd);
  tg_optimizer_free(NULL);
  tg_scope_end(sc);
}

TG_TEST(nn, adam_matches_the_formula) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *p = param_with_grad(1.0, 0.5);
  tg_tensor *idle = tg_full(TG_SHAPE(2), 3.0, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_optimizer *adam = tg_adam_new(2, (tg_tensor *const[]){p, idle},
                                   (tg_adam_options){.lr = 0.01, .weight_decay = 0.1});
  cr_assert_not_null(adam, "%s", tg_last_error_message());
  double m = 0, v = 0, x = 1.0;
  for (int t = 1; t <= 3; t++) {
    double g = 0.5 + 0.1 * x;
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    double mhat = m / (1 - pow(0.9, t)), vhat = v / (1 - pow(0.999, t));
    x -= 0.01 * mhat / (sqrt(vhat) + 1e-8);
    cr_assert_eq(tg_optimizer_step(adam), TG_OK, "%s", tg_last_error_message());
    cr_assert_float_eq(value(p), x, 1e-13, "step %d: %.17g vs %.17g", t, value(p), x);
  }
  /* a parameter without a gradient is left alone */
  cr_assert_float_eq(tg_test_at(idle, 1), 3.0, 0);
  tg_optimizer_free(adam);
  tg_scope_end(sc);
}

TG_TEST(nn, optimizer_errors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *p = param_with_grad(1.0, 0.5);
  tg_tensor *plain = tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT);
  tg_tensor *nonleaf = tg_mul_scalar(p, 2.0);
  cr_assert_null(tg_sgd_new(1, &p, (tg_sgd_options){.lr = 0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sgd_new", "lr (0)");
  cr_assert_null(tg_sgd_new(1, &p, (tg_sgd_options){.lr = 0.1, .nesterov = true}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sgd_new", "nesterov");
  cr_assert_null(tg_sgd_new(1, &plain, (tg_sgd_options){.lr = 0.1}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sgd_new: params[0] must be", "requires grad");
  cr_assert_null(tg_sgd_new(1, &nonleaf, (tg_sgd_options){.lr = 0.1}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sgd_new", "leaf");
  cr_assert_null(tg_sgd_new(0, NULL, (tg_sgd_options){.lr = 0.1}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sgd_new", "at least one");
  /* a NULL list is named as such, not as a count (was "needs at least one parameter (got 2)") */
  cr_assert_null(tg_adam_new(2, NULL, (tg_adam_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adam_new: params is NULL (n_params is 2)");
  cr_assert_null(tg_sgd_new(-1, &p, (tg_sgd_options){.lr = 0.1}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sgd_new: needs at least one parameter (n_params is -1)");
  cr_assert_null(tg_adam_new(2, (tg_tensor *const[]){p, NULL}, (tg_adam_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adam_new: params[1] is NULL");
  cr_assert_null(tg_adam_new(1, &p, (tg_adam_options){.beta1 = 1.5}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adam_new", "betas");
  cr_assert_eq(tg_optimizer_step(NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_step");
  cr_assert_eq(tg_optimizer_zero_grad(NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_zero_grad");
  tg_scope_end(sc);
}

TG_TEST(nn, step_after_forward_invalidates_the_graph) {
  /* The update is an in-place write: a graph that saved the parameter refuses to run. */
  tg_lltm_cell *cell = tg_lltm_cell_new(2, 3, TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *params[2];
  tg_lltm_cell_parameters(cell, params, 2);
  tg_optimizer *sgd = tg_sgd_new(2, params, (tg_sgd_options){.lr = 0.1});
  tg_scope sc = tg_scope_begin();
  tg_options o = {.dtype = TG_F64, .requires_grad = true};
  tg_tensor *x = tg_randn(TG_SHAPE(2, 2), o, NULL), *h = tg_randn(TG_SHAPE(2, 3), o, NULL);
  tg_tensor *nh, *nc;
  cr_assert_eq(tg_lltm_cell_forward(cell, TG_LLTM_COMPOSED, x, h, h, &nh, &nc), TG_OK);
  tg_tensor *loss = tg_sum(nh);
  cr_assert_eq(tg_backward_ex(loss, NULL, (tg_backward_options){.retain_graph = true}), TG_OK);
  cr_assert_eq(tg_optimizer_step(sgd), TG_OK);
  cr_assert_neq(tg_backward(loss, NULL), TG_OK);
  tg_expect_error(TG_ERR_STATE, "modified by an in-place operation");
  tg_scope_end(sc);
  tg_optimizer_free(sgd);
  tg_lltm_cell_free(cell);
}

/* ---- training end to end ---- */

/* An LLTM cell and a Linear read-out learn to map a fixed batch to fixed targets: the loss
 * falls by a large factor with either optimizer and either LLTM path. */
static double train(tg_lltm_impl impl, bool adam) {
  tg_generator *gen = tg_generator_new(5);
  tg_lltm_cell *cell = tg_lltm_cell_new(4, 8, TG_OPTS(.dtype = TG_F64), gen);
  tg_linear *head = tg_linear_new(8, 2, true, TG_OPTS(.dtype = TG_F64), gen);
  tg_tensor *params[4];
  tg_lltm_cell_parameters(cell, params, 2);
  tg_linear_parameters(head, params + 2, 2);
  tg_optimizer *opt = adam ? tg_adam_new(4, params, (tg_adam_options){.lr = 0.05})
                           : tg_sgd_new(4, params, (tg_sgd_options){.lr = 0.2, .momentum = 0.9});
  tg_options o = {.dtype = TG_F64};
  tg_tensor *x = tg_randn(TG_SHAPE(6, 4), o, gen); /* tg_test_scope's */
  tg_tensor *h = tg_zeros(TG_SHAPE(6, 8), o);
  tg_tensor *target = tg_uniform(TG_SHAPE(6, 2), -0.5, 0.5, o, gen);
  tg_generator_free(gen);
  double first = 0, last = 0;
  for (int step = 0; step < 150; step++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *nh, *nc;
    cr_assert_eq(tg_lltm_cell_forward(cell, impl, x, h, h, &nh, &nc), TG_OK);
    tg_tensor *loss = tg_mse_loss(tg_linear_forward(head, nh), target);
    cr_assert_not_null(loss, "%s", tg_last_error_message());
    last = value(loss);
    if (step == 0) first = last;
    cr_assert_eq(tg_backward(loss, NULL), TG_OK);
    cr_assert_eq(tg_optimizer_step(opt), TG_OK);
    cr_assert_eq(tg_optimizer_zero_grad(opt), TG_OK);
    tg_scope_end(sc);
  }
  tg_optimizer_free(opt);
  tg_linear_free(head);
  tg_lltm_cell_free(cell);
  return last / first;
}

TG_TEST(nn, training_reduces_the_loss) {
  cr_assert_lt(train(TG_LLTM_FUSED, true), 0.05);
  cr_assert_lt(train(TG_LLTM_COMPOSED, true), 0.05);
  cr_assert_lt(train(TG_LLTM_FUSED, false), 0.05);
}
