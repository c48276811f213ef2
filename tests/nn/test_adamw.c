/* AdamW (tg/optim.h): PyTorch's trajectory with weight decay and parameter groups (numbers
 * from tests/nn/python/optim_refs.py, torch 2.15, pasted below so this runs without torch),
 * the decoupled decay's order, the decay / no-decay split, gradient accumulation over
 * micro-batches, every option error, allocation-failure sweeps. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"
#include "test_adamw_problem.h"

/* torch.optim.AdamW([{W}, {b, lr 5e-3, weight_decay 0}, {c}], lr=1e-2, betas=(0.9, 0.95),
 * eps=1e-8, weight_decay=0.1), 20 steps (tests/nn/python/optim_refs.py) */
static const double adamw_losses[] = {
    1.582683662838368,    1.3278778197951173,   1.0720017121267773,   0.81526046722918222,
    0.55785692530222353,  0.29998548268219499,  0.041822818842627334, -0.21648256214238276,
    -0.47481348088868197, -0.73306747250821613, -0.99112284584614652, -1.2488123882829751,
    -1.5059210657808455,  -1.7621987192432362,  -2.017374057410029,   -2.2711647885820354,
    -2.5232842028147546,  -2.7734455968303631,  -3.0213655554237171,  -3.2667666419226693};
static const double adamw_W[] = {-0.1475852309504698,  0.15404860096738096,   0.28960729071359459,
                                 0.1966067372614089,   -0.079390367142953486, -0.41440169291936918,
                                 -0.64801324767104473, -0.66918882560441473,  -0.46664156799185846,
                                 -0.14040536054445241, 0.15841747777157833,   0.29035016696622779};
static const double adamw_b[] = {0.30265670575021381, 0.1782909289053036, -0.15580662260287467,
                                 -0.11690256304989043};
static const double adamw_c[] = {-0.49520240832000012, -0.29638698682376546, -0.032250861183718289,
                                 0.11371558068683454};

static tg_adamw_options ref_options(void) {
  tg_adamw_options o = tg_adamw_defaults();
  o.lr = 1e-2;
  o.beta2 = 0.95;
  o.weight_decay = 0.1;
  return o;
}

/* The reference's three groups over p. */
static tg_optimizer *ref_optimizer(const problem *p) {
  tg_optimizer *opt = tg_adamw_new(1, &p->W, ref_options());
  cr_assert_not_null(opt, "%s", tg_last_error_message());
  cr_assert_eq(tg_optimizer_add_param_group(
                   opt, 1, &p->b, (tg_param_group_options){.lr = 5e-3, .weight_decay = 0}),
               TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_optimizer_add_param_group(opt, 1, &p->c, tg_param_group_inherit()), TG_OK);
  return opt;
}

static void trajectory(tg_dtype dtype, double tol) {
  problem p = problem_new(dtype);
  tg_optimizer *opt = ref_optimizer(&p);
  for (int t = 0; t < 20; t++) {
    double loss;
    cr_assert_eq(problem_step(&p, opt, &loss), TG_OK, "%s", tg_last_error_message());
    cr_assert(fabs(loss - adamw_losses[t]) <= tol * (1 + fabs(adamw_losses[t])),
              "step %d: loss %.17g, torch %.17g", t, loss, adamw_losses[t]);
  }
  tg_test_expect_values(p.W, 12, adamw_W, tol);
  tg_test_expect_values(p.b, 4, adamw_b, tol);
  tg_test_expect_values(p.c, 4, adamw_c, tol);
  tg_optimizer_free(opt);
  problem_free(&p);
}

TG_TEST(adamw, matches_torch_with_groups_f64) { trajectory(TG_F64, 1e-12); }
TG_TEST(adamw, matches_torch_with_groups_f32) { trajectory(TG_F32, 2e-5); }

TG_TEST(adamw, defaults_are_pytorchs) {
  tg_adamw_options o = tg_adamw_defaults();
  cr_assert(o.lr == 1e-3 && o.beta1 == 0.9 && o.beta2 == 0.999 && o.eps == 1e-8 &&
            o.weight_decay == 1e-2);
}

/* With a zero gradient Adam's part moves nothing, so each step only decays: p * (1 - lr *
 * wd)^t. Adam's L2 term would instead move p by about lr per step. */
TG_TEST(adamw, decay_is_decoupled_from_the_gradient) {
  double v[3] = {1.0, -2.0, 0.5};
  tg_tensor *p = tg_retain(tg_test_tensor_of(TG_F64, TG_SHAPE(3), v));
  tg_set_requires_grad(p, true);
  tg_adamw_options o = tg_adamw_defaults();
  o.lr = 0.1;
  o.weight_decay = 0.5;
  tg_optimizer *opt = tg_adamw_new(1, &p, o);
  for (int t = 0; t < 3; t++) {
    tg_scope s = tg_scope_begin();
    tg_optimizer_zero_grad(opt);
    cr_assert_eq(tg_backward(tg_sum(tg_mul_scalar(p, 0.0)), NULL), TG_OK);
    cr_assert_eq(tg_optimizer_step(opt), TG_OK);
    tg_scope_end(s);
  }
  double f = pow(1 - 0.1 * 0.5, 3), want[3] = {1.0 * f, -2.0 * f, 0.5 * f};
  tg_test_expect_values(p, 3, want, 1e-15);
  tg_optimizer_free(opt);
  tg_release(p);
}

/* model: "lin" Linear(3 -> 4) and "norm" LayerNorm([4]), F64. */
static tg_module *split_model(void) {
  tg_generator *gen = tg_generator_new(3);
  tg_module *m = tg_module_new("model");
  tg_linear *lin = tg_linear_new(3, 4, true, TG_OPTS(.dtype = TG_F64), gen);
  tg_module *norm =
      tg_layer_norm_layer_new(1, (const int64_t[]){4}, 1e-5, true, TG_OPTS(.dtype = TG_F64));
  cr_assert(m && lin && norm, "%s", tg_last_error_message());
  cr_assert_eq(tg_module_add_child(m, "lin", tg_linear_module(lin)), TG_OK);
  cr_assert_eq(tg_module_add_child(m, "norm", norm), TG_OK);
  tg_generator_free(gen);
  return m;
}

TG_TEST(adamw, decay_split_puts_matrices_in_group_0) {
  tg_module *m = split_model();
  tg_adamw_options o = tg_adamw_defaults();
  o.weight_decay = 0.1;
  tg_optimizer *opt = tg_adamw_for_decay_split(m, o);
  cr_assert_not_null(opt, "%s", tg_last_error_message());
  cr_assert_eq(tg_optimizer_num_groups(opt), 2);
  cr_assert_eq(tg_optimizer_group_size(opt, 0), 1); /* lin.weight */
  cr_assert_eq(tg_optimizer_group_size(opt, 1), 3); /* lin.bias, norm.weight, norm.bias */
  cr_assert_eq(tg_optimizer_group_weight_decay(opt, 0), 0.1);
  cr_assert_eq(tg_optimizer_group_weight_decay(opt, 1), 0.0);
  cr_assert_eq(tg_optimizer_group_lr(opt, 1), o.lr);

  /* the state is by dotted name; the no-decay group's parameters only move by Adam */
  tg_scope s = tg_scope_begin();
  tg_tensor *x = tg_randn(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *bias = tg_module_find(m, "norm.bias");
  tg_tensor *before = tg_clone(bias);
  tg_tensor *h = tg_module_forward(tg_module_child(m, "lin"), x);
  tg_tensor *y = tg_module_forward(tg_module_child(m, "norm"), h);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(y, tg_tanh(y))), NULL), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_optimizer_step(opt), TG_OK);
  tg_tensor_dict *d = tg_optimizer_state_dict(opt);
  cr_assert_not_null(tg_tensor_dict_get(d, "lin.weight.exp_avg"));
  cr_assert_not_null(tg_tensor_dict_get(d, "norm.weight.exp_avg_sq"));
  tg_tensor_dict_free(d);
  /* first Adam step: the update is lr * sign(g) (|m| / sqrt(v) = 1), nothing more */
  tg_tensor *moved = tg_abs(tg_sub(bias, before));
  for (int i = 0; i < 4; i++) {
    double dm = tg_test_at(moved, i);
    cr_assert(dm == 0 || fabs(dm - o.lr) < 1e-9, "norm.bias[%d] moved by %.17g", i, dm);
  }
  tg_scope_end(s);
  tg_optimizer_free(opt);
  tg_module_free(m);
}

/* Micro-batches: the gradient of a mean loss over 5 rows equals the sum of the gradients of
 * the 5 one-row losses, each divided by K = 5, to rounding; so does the AdamW step after. */
TG_TEST(adamw, gradient_accumulation_equals_the_full_batch) {
  problem full = problem_new(TG_F64), micro = problem_new(TG_F64);
  tg_optimizer *a = tg_adamw_new(2, (tg_tensor *[]){full.W, full.b}, ref_options());
  tg_optimizer *b = tg_adamw_new(2, (tg_tensor *[]){micro.W, micro.b}, ref_options());
  for (int step = 0; step < 3; step++) {
    tg_scope s = tg_scope_begin();
    tg_optimizer_zero_grad(a);
    tg_optimizer_zero_grad(b);
    cr_assert_eq(tg_backward(tg_div_scalar(problem_fit(&full, 0, 5), 5), NULL), TG_OK);
    const int K = 5;
    for (int k = 0; k < K; k++) { /* each micro-batch's mean loss (1 row), over K */
      tg_tensor *loss = tg_div_scalar(problem_fit(&micro, k, 1), 1);
      cr_assert_eq(tg_backward(tg_div_scalar(loss, K), NULL), TG_OK);
    }
    tg_assert_close(tg_grad(micro.W), tg_grad(full.W), 0, 1e-12);
    tg_assert_close(tg_grad(micro.b), tg_grad(full.b), 0, 1e-12);
    cr_assert_eq(tg_optimizer_step(a), TG_OK);
    cr_assert_eq(tg_optimizer_step(b), TG_OK);
    tg_assert_close(micro.W, full.W, 0, 1e-12);
    tg_assert_close(micro.b, full.b, 0, 1e-12);
    tg_scope_end(s);
  }
  tg_optimizer_free(a);
  tg_optimizer_free(b);
  problem_free(&full);
  problem_free(&micro);
}

static void expect_bad_options(tg_adamw_options o, const char *what) {
  problem p = problem_new(TG_F64);
  cr_assert_null(tg_adamw_new(1, &p.W, o));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adamw_new", what, "tg_adamw_defaults");
  problem_free(&p);
}

TG_TEST(adamw, bad_options_are_named) {
  tg_adamw_options o = tg_adamw_defaults();
  o.lr = 0;
  expect_bad_options(o, "lr must be");
  o.lr = -1e-3;
  expect_bad_options(o, "lr must be");
  o = tg_adamw_defaults();
  o.lr = INFINITY;
  expect_bad_options(o, "lr must be");
  o = tg_adamw_defaults();
  o.beta1 = 1;
  expect_bad_options(o, "beta1");
  o = tg_adamw_defaults();
  o.beta2 = -0.1;
  expect_bad_options(o, "beta2");
  o = tg_adamw_defaults();
  o.beta2 = NAN;
  expect_bad_options(o, "beta2");
  o = tg_adamw_defaults();
  o.eps = -1e-8;
  expect_bad_options(o, "eps");
  o = tg_adamw_defaults();
  o.weight_decay = -0.1;
  expect_bad_options(o, "weight_decay");
  /* beta1 0 and eps 0 are allowed, as PyTorch's */
  problem p = problem_new(TG_F64);
  o = tg_adamw_defaults();
  o.beta1 = 0;
  o.eps = 0;
  tg_optimizer *opt = tg_adamw_new(1, &p.W, o);
  cr_assert_not_null(opt, "%s", tg_last_error_message());
  tg_optimizer_free(opt);
  cr_assert_null(tg_adamw_new(0, &p.W, tg_adamw_defaults()));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adamw_new", "n_params is 0");
  cr_assert_null(tg_adamw_new(1, &p.x, tg_adamw_defaults()));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adamw_new", "params[0]", "requires grad");
  cr_assert_null(tg_adamw_for(NULL, tg_adamw_defaults()));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adamw_for", "m is NULL");
  cr_assert_null(tg_adamw_for_decay_split(NULL, tg_adamw_defaults()));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adamw_for_decay_split", "m is NULL");
  tg_module *empty = tg_module_new("empty");
  cr_assert_null(tg_adamw_for_decay_split(empty, tg_adamw_defaults()));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adamw_for_decay_split", "no parameters");
  o = tg_adamw_defaults();
  o.eps = -1;
  cr_assert_null(tg_adamw_for_decay_split(empty, o)); /* the module is checked first */
  tg_expect_error(TG_ERR_ARGUMENT, "no parameters");
  tg_module_free(empty);
  problem_free(&p);
}

/* ---- allocation-failure sweeps ---- */

/* Three groups, two steps, state_dict and a load into a second optimizer. */
static tg_status groups_step(void *user, double *out, int *n_out) {
  (void)user;
  problem p = problem_new(TG_F64);
  tg_optimizer *opt = problem_ok(&p) ? tg_adamw_new(1, &p.W, ref_options()) : NULL, *other = NULL;
  tg_status st = status_of(opt);
  if (st == TG_OK)
    st = clean(tg_optimizer_add_param_group(
        opt, 1, &p.b, (tg_param_group_options){.lr = 5e-3, .weight_decay = 0}));
  if (st == TG_OK) st = clean(tg_optimizer_add_param_group(opt, 1, &p.c, tg_param_group_inherit()));
  for (int t = 0; t < 2 && st == TG_OK; t++) st = clean(problem_step(&p, opt, NULL));
  tg_tensor_dict *d = st == TG_OK ? tg_optimizer_state_dict(opt) : NULL;
  if (st == TG_OK) st = status_of(d);
  if (st == TG_OK) st = status_of(other = tg_adamw_new(1, &p.W, ref_options()));
  if (st == TG_OK)
    st = clean(tg_optimizer_add_param_group(other, 2, (tg_tensor *[]){p.b, p.c},
                                            tg_param_group_inherit()));
  if (st == TG_OK) st = clean(tg_optimizer_load_state_dict(other, d));
  if (st == TG_OK) st = clean(problem_step(&p, other, NULL));
  if (st == TG_OK) st = append(p.W, out, n_out);
  if (st == TG_OK) st = append(p.b, out, n_out);
  if (st == TG_OK) st = append(p.c, out, n_out);
  tg_tensor_dict_free(d);
  tg_optimizer_free(other);
  tg_optimizer_free(opt);
  problem_free(&p);
  return st;
}

TG_TEST(adamw, alloc_sweep_groups_step_and_state) {
  cr_assert_gt(sweep("AdamW with groups", groups_step, NULL).failed, 0);
}

static tg_status split_step(void *user, double *out, int *n_out) {
  (void)user;
  problem p = problem_new(TG_F64);
  tg_module *m = problem_ok(&p) ? tg_module_new("m") : NULL;
  tg_status st = status_of(m);
  if (st == TG_OK) st = clean(tg_module_register_parameter(m, "W", p.W));
  if (st == TG_OK) st = clean(tg_module_register_parameter(m, "b", p.b));
  if (st == TG_OK) st = clean(tg_module_register_parameter(m, "c", p.c));
  tg_optimizer *opt = st == TG_OK ? tg_adamw_for_decay_split(m, ref_options()) : NULL;
  if (st == TG_OK) st = status_of(opt);
  if (st == TG_OK) st = clean(problem_step(&p, opt, NULL));
  if (st == TG_OK) st = append(p.W, out, n_out);
  if (st == TG_OK) st = append(p.b, out, n_out);
  tg_optimizer_free(opt);
  tg_module_free(m);
  problem_free(&p);
  return st;
}

TG_TEST(adamw, alloc_sweep_decay_split) {
  cr_assert_gt(sweep("AdamW decay split", split_step, NULL).failed, 0);
}
