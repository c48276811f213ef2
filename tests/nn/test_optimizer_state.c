/* Optimizers over modules (tg/nn.h): parameter names kept for the state, per-parameter
 * steps, the learning rate, state dicts and loading them (resuming is bit-identical to the
 * run that never stopped), every load error, allocation-failure sweeps. */
#include <string.h>

#include "testutil.h"

#include "alloc_sweep.h"

/* model: "lin" (Linear 3 -> 2) and "extra" (a plain module with parameter "e" [2], used by
 * the loss only from step 2 on: its state starts later). */
static tg_module *model_new(uint64_t seed) {
  tg_generator *gen = tg_generator_new(seed);
  tg_module *m = gen ? tg_module_new("model") : NULL;
  tg_linear *lin = m ? tg_linear_new(3, 2, true, TG_OPTS(.dtype = TG_F64), gen) : NULL;
  tg_module *extra = lin ? tg_module_new("extra") : NULL;
  tg_status st = extra ? TG_OK : tg_last_error();
  tg_scope s = tg_scope_begin();
  tg_tensor *e = st == TG_OK ? tg_randn(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64), gen) : NULL;
  if (st == TG_OK) st = e ? tg_module_register_parameter(extra, "e", e) : tg_last_error();
  if (st == TG_OK) st = tg_module_add_child(m, "lin", tg_linear_module(lin));
  if (st == TG_OK) lin = NULL;
  if (st == TG_OK) st = tg_module_add_child(m, "extra", extra);
  if (st == TG_OK) extra = NULL;
  tg_scope_end(s);
  tg_linear_free(lin);
  tg_module_free(extra);
  tg_generator_free(gen);
  if (st != TG_OK) {
    tg_module_free(m);
    return NULL;
  }
  return m;
}

/* One training step t: zero_grad, loss, backward, step. */
static tg_status train_step(tg_module *m, tg_optimizer *opt, int t) {
  tg_scope s = tg_scope_begin();
  tg_generator *gen = tg_generator_new(1000 + (uint64_t)t);
  tg_tensor *x = gen ? tg_randn(TG_SHAPE(4, 3), TG_OPTS(.dtype = TG_F64), gen) : NULL;
  tg_tensor *y = x ? tg_randn(TG_SHAPE(4, 2), TG_OPTS(.dtype = TG_F64), gen) : NULL;
  tg_generator_free(gen);
  tg_module *lin = tg_module_child(m, "lin");
  tg_tensor *w = tg_module_find(lin, "weight"), *b = tg_module_find(lin, "bias");
  tg_tensor *d = y ? tg_sub(tg_add(tg_mm(x, tg_t(w)), b), y) : NULL;
  tg_tensor *loss = tg_sum(tg_mul(d, d));
  if (t >= 2) {
    tg_tensor *e = tg_module_find(m, "extra.e");
    loss = tg_add(loss, tg_sum(tg_mul(e, e)));
  }
  tg_status st = loss ? tg_optimizer_zero_grad(opt) : tg_last_error();
  if (st == TG_OK) st = tg_backward(loss, NULL);
  if (st == TG_OK) st = tg_optimizer_step(opt);
  tg_scope_end(s);
  return st;
}

typedef enum { ADAM, SGD_MOMENTUM, SGD_NESTEROV } opt_kind;

static tg_optimizer *opt_for(tg_module *m, opt_kind k) {
  switch (k) {
  case ADAM:
    return tg_adam_for(m, (tg_adam_options){.lr = 0.05, .weight_decay = 0.01});
  case SGD_MOMENTUM:
    return tg_sgd_for(m, (tg_sgd_options){.lr = 0.01, .momentum = 0.9, .dampening = 0.1});
  default:
    return tg_sgd_for(m, (tg_sgd_options){.lr = 0.01, .momentum = 0.9, .nesterov = true});
  }
}

static void assert_same_params(tg_module *a, tg_module *b) {
  for (int i = 0; i < tg_module_num_parameters(a); i++) {
    const char *name;
    tg_tensor *p = tg_module_parameter(a, i, &name);
    cr_assert_eq(tg_test_max_abs_diff(p, tg_module_find(b, name)), 0.0, "%s differs", name);
  }
}

static void assert_same_dicts(const tg_tensor_dict *a, const tg_tensor_dict *b) {
  cr_assert_eq(tg_tensor_dict_size(a), tg_tensor_dict_size(b));
  for (int i = 0; i < tg_tensor_dict_size(a); i++) {
    const char *name = tg_tensor_dict_name(a, i);
    cr_assert_str_eq(name, tg_tensor_dict_name(b, i));
    cr_assert_eq(tg_test_max_abs_diff(tg_tensor_dict_at(a, i), tg_tensor_dict_at(b, i)), 0.0,
                 "%s differs", name);
  }
}

/* A deep copy: what a file would give back. */
static tg_tensor_dict *copy_dict(const tg_tensor_dict *d) {
  tg_tensor_dict *c = tg_tensor_dict_new();
  for (int i = 0; i < tg_tensor_dict_size(d); i++)
    tg_tensor_dict_set(c, tg_tensor_dict_name(d, i), tg_clone(tg_tensor_dict_at(d, i)));
  return c;
}

/* The same of a dict the caller made, which it frees. */
static tg_tensor_dict *copy_of_new(tg_tensor_dict *d) {
  tg_tensor_dict *c = copy_dict(d);
  tg_tensor_dict_free(d);
  return c;
}

TG_TEST(optimizer_state, resume_is_bit_identical) {
  for (opt_kind k = ADAM; k <= SGD_NESTEROV; k++) {
    tg_module *m = model_new(1);
    tg_optimizer *opt = opt_for(m, k);
    for (int t = 0; t < 3; t++) cr_assert_eq(train_step(m, opt, t), TG_OK);
    /* save, and restore into a fresh model (another init) and a fresh optimizer */
    tg_tensor_dict *ms = copy_of_new(tg_module_state_dict(m));
    tg_tensor_dict *os = copy_of_new(tg_optimizer_state_dict(opt));
    tg_module *m2 = model_new(2);
    tg_optimizer *opt2 = opt_for(m2, k);
    cr_assert_eq(tg_module_load_state_dict(m2, ms, true, NULL), TG_OK);
    cr_assert_eq(tg_optimizer_load_state_dict(opt2, os), TG_OK, "%s", tg_last_error_message());
    for (int t = 3; t < 7; t++) {
      cr_assert_eq(train_step(m, opt, t), TG_OK);
      cr_assert_eq(train_step(m2, opt2, t), TG_OK);
    }
    assert_same_params(m, m2);
    tg_tensor_dict *s1 = tg_optimizer_state_dict(opt), *s2 = tg_optimizer_state_dict(opt2);
    assert_same_dicts(s1, s2);
    tg_tensor_dict_free(s1);
    tg_tensor_dict_free(s2);
    tg_tensor_dict_free(ms);
    tg_tensor_dict_free(os);
    tg_optimizer_free(opt);
    tg_optimizer_free(opt2);
    tg_module_free(m);
    tg_module_free(m2);
  }
}

TG_TEST(optimizer_state, adam_names_and_per_parameter_steps) {
  tg_module *m = model_new(1);
  tg_optimizer *opt = opt_for(m, ADAM);
  tg_tensor_dict *d = tg_optimizer_state_dict(opt);
  cr_assert_eq(tg_tensor_dict_size(d), 0); /* nothing before the first step */
  tg_tensor_dict_free(d);
  for (int t = 0; t < 3; t++) cr_assert_eq(train_step(m, opt, t), TG_OK);
  d = tg_optimizer_state_dict(opt);
  static const char *const names[] = {
      "lin.weight.exp_avg", "lin.weight.exp_avg_sq", "lin.weight.step",
      "lin.bias.exp_avg",   "lin.bias.exp_avg_sq",   "lin.bias.step",
      "extra.e.exp_avg",    "extra.e.exp_avg_sq",    "extra.e.step"};
  cr_assert_eq(tg_tensor_dict_size(d), 9);
  for (int i = 0; i < 9; i++) cr_assert_str_eq(tg_tensor_dict_name(d, i), names[i]);
  tg_tensor *step = tg_tensor_dict_get(d, "lin.weight.step");
  cr_assert_eq(tg_ndim(step), 0);
  cr_assert_eq(tg_tensor_dtype(step), TG_F64);
  cr_assert_eq(tg_test_at(step, 0), 3.0);
  cr_assert_eq(tg_test_at(tg_tensor_dict_get(d, "extra.e.step"), 0), 1.0); /* grads from t=2 */
  tg_assert_sizes(tg_tensor_dict_get(d, "lin.weight.exp_avg"), 2, 3);
  tg_tensor_dict_free(d);
  tg_optimizer_free(opt);
  tg_module_free(m);
}

TG_TEST(optimizer_state, index_names_for_arrays) {
  tg_tensor *p[2] = {tg_zeros(TG_SHAPE(2), TG_OPTS(.requires_grad = true)),
                     tg_zeros(TG_SHAPE(3), TG_OPTS(.requires_grad = true))};
  tg_optimizer *opt = tg_sgd_new(2, p, (tg_sgd_options){.lr = 0.1, .momentum = 0.5});
  tg_set_grad(p[1], tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT));
  cr_assert_eq(tg_optimizer_step(opt), TG_OK);
  tg_tensor_dict *d = tg_optimizer_state_dict(opt);
  cr_assert_eq(tg_tensor_dict_size(d), 1); /* p[0] had no gradient: no state */
  cr_assert_str_eq(tg_tensor_dict_name(d, 0), "1.momentum_buffer");
  tg_tensor_dict_free(d);
  tg_optimizer_free(opt);
  tg_tensor *q[1] = {tg_zeros(TG_SHAPE(2), TG_OPTS(.requires_grad = true))};
  opt = tg_adam_new(1, q, (tg_adam_options){0});
  tg_set_grad(q[0], tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT));
  cr_assert_eq(tg_optimizer_step(opt), TG_OK);
  d = tg_optimizer_state_dict(opt);
  cr_assert_str_eq(tg_tensor_dict_name(d, 0), "0.exp_avg");
  tg_tensor_dict_free(d);
  tg_optimizer_free(opt);
}

TG_TEST(optimizer_state, learning_rate) {
  tg_module *m = model_new(1);
  tg_optimizer *adam = tg_adam_for(m, (tg_adam_options){0});
  cr_assert_eq(tg_optimizer_lr(adam), 1e-3);
  cr_assert_eq(tg_optimizer_set_lr(adam, 0.5), TG_OK);
  cr_assert_eq(tg_optimizer_lr(adam), 0.5);
  tg_optimizer *sgd = tg_sgd_for(m, (tg_sgd_options){.lr = 0.1});
  cr_assert_eq(tg_optimizer_lr(sgd), 0.1);
  cr_assert_eq(tg_optimizer_set_lr(sgd, 0), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_set_lr", "lr (0)");
  cr_assert_eq(tg_optimizer_set_lr(sgd, INFINITY), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "finite");
  cr_assert_eq(tg_optimizer_set_lr(sgd, NAN), TG_ERR_ARGUMENT);
  tg_clear_error();
  cr_assert_eq(tg_optimizer_lr(sgd), 0.1);
  /* a halved lr halves plain SGD's update */
  tg_tensor *w = tg_module_find(m, "lin.weight");
  tg_tensor *before = tg_clone(w);
  tg_set_grad(w, tg_ones_like(w));
  cr_assert_eq(tg_optimizer_set_lr(sgd, 0.05), TG_OK);
  cr_assert_eq(tg_optimizer_step(sgd), TG_OK);
  tg_assert_close(tg_sub(before, w), tg_full_like(w, 0.05), 0, 1e-15);
  cr_assert_eq(tg_optimizer_lr(NULL), 0.0);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_lr", "opt is NULL");
  cr_assert_eq(tg_optimizer_set_lr(NULL, 1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_set_lr", "opt is NULL");
  tg_optimizer_free(adam);
  tg_optimizer_free(sgd);
  tg_module_free(m);
}

TG_TEST(optimizer_state, for_errors) {
  cr_assert_null(tg_adam_for(NULL, (tg_adam_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adam_for", "m is NULL");
  tg_module *empty = tg_module_new("empty");
  cr_assert_null(tg_sgd_for(empty, (tg_sgd_options){.lr = 1}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sgd_for", "the empty module has no parameters");
  tg_module *m = model_new(1);
  cr_assert_null(tg_sgd_for(m, (tg_sgd_options){.lr = -1}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sgd_new", "lr (-1)");
  tg_module_free(empty);
  tg_module_free(m);
}

TG_TEST(optimizer_state, loading_replaces_the_state_whole) {
  tg_module *m = model_new(1), *m2 = model_new(1);
  tg_optimizer *opt = opt_for(m, ADAM), *opt2 = opt_for(m2, ADAM);
  for (int t = 0; t < 3; t++) cr_assert_eq(train_step(m, opt, t), TG_OK);
  /* an empty state: opt starts over, like the fresh opt2 on the same parameters */
  tg_tensor_dict *empty = tg_tensor_dict_new();
  cr_assert_eq(tg_optimizer_load_state_dict(opt, empty), TG_OK);
  tg_tensor_dict *d = tg_optimizer_state_dict(opt);
  cr_assert_eq(tg_tensor_dict_size(d), 0);
  tg_tensor_dict_free(d);
  tg_tensor_dict *ms = tg_module_state_dict(m);
  cr_assert_eq(tg_module_load_state_dict(m2, ms, true, NULL), TG_OK);
  tg_tensor_dict_free(ms);
  cr_assert_eq(train_step(m, opt, 5), TG_OK);
  cr_assert_eq(train_step(m2, opt2, 5), TG_OK);
  assert_same_params(m, m2);
  /* the loaded tensors are copies: changing the dict later changes nothing */
  d = copy_of_new(tg_optimizer_state_dict(opt));
  cr_assert_eq(tg_optimizer_load_state_dict(opt2, d), TG_OK);
  tg_zero_(tg_tensor_dict_get(d, "lin.weight.exp_avg"));
  tg_tensor_dict *got = tg_optimizer_state_dict(opt2), *want = tg_optimizer_state_dict(opt);
  assert_same_dicts(got, want);
  tg_tensor_dict_free(got);
  tg_tensor_dict_free(want);
  tg_tensor_dict_free(d);
  tg_tensor_dict_free(empty);
  tg_optimizer_free(opt);
  tg_optimizer_free(opt2);
  tg_module_free(m);
  tg_module_free(m2);
}

/* Loads d into opt, expecting the error; the state must be as it was. */
static void expect_load_error(tg_optimizer *opt, const tg_tensor_dict *d, tg_status code,
                              const char *f1, const char *f2) {
  tg_tensor_dict *before = copy_of_new(tg_optimizer_state_dict(opt));
  cr_assert_eq(tg_optimizer_load_state_dict(opt, d), code, "%s", tg_last_error_message());
  tg_expect_error(code, "tg_optimizer_load_state_dict", f1, f2);
  tg_tensor_dict *after = tg_optimizer_state_dict(opt);
  assert_same_dicts(before, after);
  tg_tensor_dict_free(before);
  tg_tensor_dict_free(after);
}

TG_TEST(optimizer_state, load_errors) {
  tg_module *m = model_new(1);
  tg_optimizer *adam = opt_for(m, ADAM);
  for (int t = 0; t < 3; t++) cr_assert_eq(train_step(m, adam, t), TG_OK);
  tg_tensor_dict *good = copy_of_new(tg_optimizer_state_dict(adam));
  tg_options f64 = {.dtype = TG_F64};

  tg_tensor_dict *d = copy_dict(good);
  tg_tensor_dict_set(d, "lin.weight.momentum_buffer", tg_zeros(TG_SHAPE(2, 3), f64));
  expect_load_error(adam, d, TG_ERR_ARGUMENT, "\"lin.weight.momentum_buffer\" is not state",
                    "Adam optimizer");
  tg_tensor_dict_free(d);
  d = copy_dict(good);
  tg_tensor_dict_set(d, "nothing.exp_avg", tg_zeros(TG_SHAPE(2, 3), f64));
  expect_load_error(adam, d, TG_ERR_ARGUMENT, "\"nothing.exp_avg\"", "exp_avg_sq or .step");
  tg_tensor_dict_free(d);
  d = copy_dict(good);
  tg_tensor_dict_set(d, "lin.bias.exp_avg", tg_zeros(TG_SHAPE(3), f64));
  expect_load_error(adam, d, TG_ERR_SHAPE, "\"lin.bias.exp_avg\" is [3]",
                    "parameter \"lin.bias\" is [2]");
  tg_tensor_dict_free(d);
  d = copy_dict(good);
  tg_tensor_dict_set(d, "lin.bias.exp_avg_sq", tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT));
  expect_load_error(adam, d, TG_ERR_DTYPE, "\"lin.bias.exp_avg_sq\" is float32", "is float64");
  tg_tensor_dict_free(d);
  static const struct {
    double value;
    const char *fragment;
  } bad_steps[] = {{0, "is 0"}, {2.5, "is 2.5"}, {-1, "is -1"}, {NAN, "nan"}, {1e300, "1e+300"}};
  for (size_t i = 0; i < sizeof bad_steps / sizeof bad_steps[0]; i++) {
    d = copy_dict(good);
    tg_tensor_dict_set(d, "extra.e.step", tg_full(0, NULL, bad_steps[i].value, f64));
    expect_load_error(adam, d, TG_ERR_ARGUMENT, bad_steps[i].fragment, "whole number >= 1");
    tg_tensor_dict_free(d);
  }
  d = copy_dict(good);
  tg_tensor_dict_set(d, "extra.e.step", tg_full(TG_SHAPE(1), 2, f64));
  expect_load_error(adam, d, TG_ERR_SHAPE, "\"extra.e.step\" is [1]", "0-dim");
  tg_tensor_dict_free(d);
  /* Adam's three come together */
  d = tg_tensor_dict_new();
  for (int i = 0; i < tg_tensor_dict_size(good); i++)
    if (strcmp(tg_tensor_dict_name(good, i), "lin.bias.exp_avg_sq"))
      tg_tensor_dict_set(d, tg_tensor_dict_name(good, i), tg_tensor_dict_at(good, i));
  expect_load_error(adam, d, TG_ERR_ARGUMENT, "parameter \"lin.bias\"",
                    "without \"lin.bias.exp_avg_sq\"");
  tg_tensor_dict_free(d);
  cr_assert_eq(tg_optimizer_load_state_dict(adam, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "state is NULL");
  cr_assert_eq(tg_optimizer_load_state_dict(NULL, good), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "opt is NULL");
  cr_assert_null(tg_optimizer_state_dict(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_state_dict", "opt is NULL");

  /* SGD: momentum buffers only, and none without momentum */
  tg_optimizer *sgd = opt_for(m, SGD_MOMENTUM);
  expect_load_error(sgd, good, TG_ERR_ARGUMENT, "\"lin.weight.exp_avg\" is not state",
                    "<param>.momentum_buffer");
  tg_optimizer *plain = tg_sgd_for(m, (tg_sgd_options){.lr = 0.1});
  d = tg_tensor_dict_new();
  tg_tensor_dict_set(d, "lin.bias.momentum_buffer", tg_zeros(TG_SHAPE(2), f64));
  expect_load_error(plain, d, TG_ERR_ARGUMENT, "SGD without momentum has no state",
                    "\"lin.bias.momentum_buffer\"");
  cr_assert_eq(tg_optimizer_load_state_dict(sgd, d), TG_OK);
  tg_tensor_dict_free(d);
  d = tg_optimizer_state_dict(sgd);
  cr_assert_eq(tg_tensor_dict_size(d), 1);
  tg_tensor_dict_free(d);

  tg_tensor_dict_free(good);
  tg_optimizer_free(adam);
  tg_optimizer_free(sgd);
  tg_optimizer_free(plain);
  tg_module_free(m);
}

/* ---- allocation failures ---- */

static tg_status resume_step(void *user, double *out, int *n_out) {
  opt_kind k = *(const opt_kind *)user;
  tg_module *m = model_new(1);
  tg_optimizer *opt = m ? opt_for(m, k) : NULL;
  tg_status st = status_of(opt);
  for (int t = 0; t < 3 && st == TG_OK; t++) st = clean(train_step(m, opt, t));
  tg_tensor_dict *d = st == TG_OK ? tg_optimizer_state_dict(opt) : NULL;
  if (st == TG_OK) st = status_of(d);
  tg_module *m2 = st == TG_OK ? model_new(1) : NULL;
  tg_optimizer *opt2 = m2 ? opt_for(m2, k) : NULL;
  if (st == TG_OK) st = status_of(opt2);
  if (st == TG_OK) st = clean(tg_optimizer_load_state_dict(opt2, d));
  tg_tensor_dict *d2 = st == TG_OK ? tg_optimizer_state_dict(opt2) : NULL;
  if (st == TG_OK) st = status_of(d2);
  for (int i = 0; st == TG_OK && i < tg_tensor_dict_size(d2); i++)
    st = append(tg_tensor_dict_at(d2, i), out, n_out);
  tg_tensor_dict_free(d);
  tg_tensor_dict_free(d2);
  tg_optimizer_free(opt);
  tg_optimizer_free(opt2);
  tg_module_free(m);
  tg_module_free(m2);
  return st;
}

TG_TEST(optimizer_state, alloc_failure_state_dict_and_load) {
  opt_kind k = ADAM;
  cr_assert_gt(sweep("Adam state_dict and load", resume_step, &k).failed, 0);
  k = SGD_MOMENTUM;
  cr_assert_gt(sweep("SGD state_dict and load", resume_step, &k).failed, 0);
}

/* A failed load leaves the optimizer as it was: checked under every allocation failure. */
static tg_status failed_load_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_module *m = model_new(1);
  tg_optimizer *opt = m ? opt_for(m, ADAM) : NULL;
  tg_status st = status_of(opt);
  for (int t = 0; t < 2 && st == TG_OK; t++) st = clean(train_step(m, opt, t));
  tg_tensor_dict *empty = st == TG_OK ? tg_tensor_dict_new() : NULL;
  if (st == TG_OK) st = status_of(empty);
  tg_status load = st == TG_OK ? clean(tg_optimizer_load_state_dict(opt, empty)) : st;
  tg_tensor_dict *d = st == TG_OK ? tg_optimizer_state_dict(opt) : NULL;
  if (st == TG_OK) st = status_of(d);
  if (st == TG_OK) {
    /* all of the state, or (the load succeeded) none of it */
    cr_assert_eq(tg_tensor_dict_size(d), load == TG_OK ? 0 : 6);
    out[(*n_out)++] = 0;
    st = load;
  }
  tg_tensor_dict_free(d);
  tg_tensor_dict_free(empty);
  tg_optimizer_free(opt);
  tg_module_free(m);
  return st;
}

TG_TEST(optimizer_state, alloc_failure_failed_load_changes_nothing) {
  sweep("a failing Adam load", failed_load_step, NULL);
}
