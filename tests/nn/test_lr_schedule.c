/* Learning-rate schedules (tg/optim.h) over an optimizer with two groups (lr 0.1 and 0.02):
 * torch.optim.lr_scheduler.StepLR(step_size=3, gamma=0.5) and LambdaLR(0.9 ** s) from
 * torch 2.15, and karpathy/llm.c's / nanoGPT's cosine with warmup (3 warmup steps, 10 in all,
 * min_lr 0.01) from Python's floats (tests/nn/python/optim_refs.py prints them); the step
 * counting, jumping to a step, the optimizer's use of the lr, every error. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const double step_lrs[][2] = {{0.10000000000000001, 0.02},
                                     {0.10000000000000001, 0.02},
                                     {0.10000000000000001, 0.02},
                                     {0.050000000000000003, 0.01},
                                     {0.050000000000000003, 0.01},
                                     {0.050000000000000003, 0.01},
                                     {0.025000000000000001, 0.0050000000000000001},
                                     {0.025000000000000001, 0.0050000000000000001},
                                     {0.025000000000000001, 0.0050000000000000001},
                                     {0.012500000000000001, 0.0025000000000000001}};
static const double lambda_lrs[][2] = {{0.10000000000000001, 0.02},
                                       {0.090000000000000011, 0.018000000000000002},
                                       {0.081000000000000016, 0.016200000000000003},
                                       {0.072900000000000006, 0.014580000000000003},
                                       {0.065610000000000002, 0.013122},
                                       {0.059049000000000011, 0.011809800000000002},
                                       {0.053144100000000007, 0.010628820000000001},
                                       {0.047829690000000008, 0.0095659380000000013},
                                       {0.04304672100000001, 0.0086093442000000023},
                                       {0.038742048900000013, 0.0077484097800000016}};
static const double cosine_lrs[][2] = {{0.033333333333333333, 0.0066666666666666671},
                                       {0.066666666666666666, 0.013333333333333334},
                                       {0.10000000000000002, 0.02},
                                       {0.10000000000000001, 0.02},
                                       {0.095543599055608858, 0.019504844339512096},
                                       {0.083057041083643021, 0.018117449009293671},
                                       {0.065013442028034149, 0.016112604669781573},
                                       {0.044986557971965858, 0.013887395330218429},
                                       {0.026942958916356993, 0.011882550990706333},
                                       {0.014456400944391143, 0.010495155660487905},
                                       {0.01, 0.01},
                                       {0.01, 0.01}};

typedef struct fixture {
  tg_tensor *p, *q;
  tg_optimizer *opt;
} fixture;

static fixture fixture_new(void) {
  fixture f;
  tg_scope s = tg_scope_begin();
  f.p = tg_retain(tg_zeros(TG_SHAPE(1), TG_OPTS(.dtype = TG_F64)));
  f.q = tg_retain(tg_zeros(TG_SHAPE(1), TG_OPTS(.dtype = TG_F64)));
  tg_scope_end(s);
  tg_set_requires_grad(f.p, true);
  tg_set_requires_grad(f.q, true);
  f.opt = tg_sgd_new(1, &f.p, (tg_sgd_options){.lr = 0.1});
  cr_assert_eq(tg_optimizer_add_param_group(
                   f.opt, 1, &f.q, (tg_param_group_options){.lr = 0.02, .weight_decay = NAN}),
               TG_OK);
  return f;
}

static void fixture_free(fixture *f) {
  tg_optimizer_free(f->opt);
  tg_release(f->p);
  tg_release(f->q);
}

/* The lrs of steps 0..n-1 (PyTorch's get_last_lr after construction, then after each step). */
static void expect_lrs(tg_lr_scheduler *s, const fixture *f, const double (*want)[2], int n) {
  cr_assert_not_null(s, "%s", tg_last_error_message());
  for (int t = 0; t < n; t++) {
    if (t > 0) cr_assert_eq(tg_lr_scheduler_step(s), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_lr_scheduler_get_step(s), t);
    for (int g = 0; g < 2; g++) {
      double lr = tg_optimizer_group_lr(f->opt, g);
      cr_assert(fabs(lr - want[t][g]) <= 1e-15 * want[t][g],
                "step %d, group %d: lr %.17g, want %.17g", t, g, lr, want[t][g]);
    }
    cr_assert_eq(tg_lr_scheduler_last_lr(s), tg_optimizer_group_lr(f->opt, 0));
  }
}

TG_TEST(lr_schedule, step_matches_torch_steplr) {
  fixture f = fixture_new();
  tg_lr_scheduler *s = tg_lr_step_new(f.opt, 3, 0.5);
  expect_lrs(s, &f, step_lrs, 10);
  tg_lr_scheduler_free(s);
  fixture_free(&f);
}

static double decay(int64_t step, void *user) { return pow(*(const double *)user, (double)step); }

TG_TEST(lr_schedule, lambda_matches_torch_lambdalr) {
  fixture f = fixture_new();
  double base = 0.9;
  tg_lr_scheduler *s = tg_lr_lambda_new(f.opt, decay, &base);
  expect_lrs(s, &f, lambda_lrs, 10);
  tg_lr_scheduler_free(s);
  fixture_free(&f);
}

TG_TEST(lr_schedule, cosine_warmup_is_llmc_get_lr) {
  fixture f = fixture_new();
  tg_lr_scheduler *s = tg_lr_cosine_warmup_new(f.opt, 3, 10, 0.01);
  expect_lrs(s, &f, cosine_lrs, 12); /* past total_steps: min_lr */
  /* jumping back and forth gives the same lrs */
  cr_assert_eq(tg_lr_scheduler_set_step(s, 4), TG_OK);
  cr_assert_eq(tg_optimizer_group_lr(f.opt, 1), cosine_lrs[4][1]);
  cr_assert_eq(tg_lr_scheduler_set_step(s, 0), TG_OK);
  cr_assert_eq(tg_lr_scheduler_last_lr(s), cosine_lrs[0][0]);
  tg_lr_scheduler_free(s);
  /* no warmup: step 0 has the base lr; min_lr 0 reaches 0 at total_steps */
  tg_optimizer_set_lr(f.opt, 0.1);
  s = tg_lr_cosine_warmup_new(f.opt, 0, 4, 0.0);
  cr_assert_eq(tg_lr_scheduler_last_lr(s), 0.1);
  for (int t = 0; t < 4; t++) tg_lr_scheduler_step(s);
  cr_assert_eq(tg_lr_scheduler_last_lr(s), 0.0);
  tg_lr_scheduler_free(s);
  fixture_free(&f);
}

/* The optimizer's step uses the lr the scheduler set: SGD moves p by lr * grad. */
TG_TEST(lr_schedule, the_optimizer_uses_the_scheduled_lr) {
  fixture f = fixture_new();
  tg_lr_scheduler *s = tg_lr_step_new(f.opt, 1, 0.5);
  double moved[3];
  for (int t = 0; t < 3; t++) {
    tg_scope sc = tg_scope_begin();
    double before = tg_test_at(f.p, 0);
    tg_optimizer_zero_grad(f.opt);
    cr_assert_eq(tg_backward(tg_sum(f.p), NULL), TG_OK);
    cr_assert_eq(tg_optimizer_step(f.opt), TG_OK);
    moved[t] = before - tg_test_at(f.p, 0);
    cr_assert_eq(tg_lr_scheduler_step(s), TG_OK);
    tg_scope_end(sc);
  }
  const double want[3] = {0.1, 0.05, 0.025};
  for (int t = 0; t < 3; t++)
    cr_assert(fabs(moved[t] - want[t]) < 1e-15, "step %d moved %.17g", t, moved[t]);
  tg_lr_scheduler_free(s);
  fixture_free(&f);
}

static double bad_factor(int64_t step, void *user) {
  (void)user;
  return step == 2 ? NAN : step == 3 ? -1.0 : 1.0;
}

TG_TEST(lr_schedule, errors_are_named) {
  fixture f = fixture_new();
  cr_assert_null(tg_lr_step_new(NULL, 1, 0.5));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lr_step_new", "opt is NULL");
  cr_assert_null(tg_lr_step_new(f.opt, 0, 0.5));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lr_step_new", "step_size (0)");
  cr_assert_null(tg_lr_step_new(f.opt, 2, 0.0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lr_step_new", "gamma (0)");
  cr_assert_null(tg_lr_step_new(f.opt, 2, INFINITY));
  tg_expect_error(TG_ERR_ARGUMENT, "gamma (inf)");
  cr_assert_null(tg_lr_cosine_warmup_new(f.opt, -1, 10, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lr_cosine_warmup_new", "warmup_steps (-1)");
  cr_assert_null(tg_lr_cosine_warmup_new(f.opt, 5, 4, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "total_steps (4)", "warmup_steps (5)");
  cr_assert_null(tg_lr_cosine_warmup_new(f.opt, 0, 0, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "total_steps (0)");
  cr_assert_null(tg_lr_cosine_warmup_new(f.opt, 1, 10, -0.1));
  tg_expect_error(TG_ERR_ARGUMENT, "min_lr (-0.1)");
  cr_assert_null(tg_lr_cosine_warmup_new(f.opt, 1, 10, 0.05));
  tg_expect_error(TG_ERR_ARGUMENT, "min_lr (0.05)", "group 1's lr (0.02)");
  cr_assert_null(tg_lr_lambda_new(f.opt, NULL, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lr_lambda_new", "fn is NULL");
  cr_assert_eq(tg_lr_scheduler_step(NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lr_scheduler_step", "NULL");
  cr_assert(isnan(tg_lr_scheduler_last_lr(NULL)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lr_scheduler_last_lr");
  cr_assert_eq(tg_lr_scheduler_get_step(NULL), -1);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lr_scheduler_get_step");

  /* a bad factor fails its step and changes no lr */
  tg_lr_scheduler *s = tg_lr_lambda_new(f.opt, bad_factor, NULL);
  cr_assert_eq(tg_lr_scheduler_step(s), TG_OK);
  cr_assert_eq(tg_lr_scheduler_step(s), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lr_scheduler_step", "returned nan at step 2");
  cr_assert_eq(tg_lr_scheduler_get_step(s), 1);
  cr_assert_eq(tg_optimizer_group_lr(f.opt, 1), 0.02);
  cr_assert_eq(tg_lr_scheduler_set_step(s, 3), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lr_scheduler_set_step", "returned -1 at step 3");
  cr_assert_eq(tg_lr_scheduler_set_step(s, -1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "step (-1)");
  tg_lr_scheduler_free(s);

  /* a group added after the scheduler was made */
  s = tg_lr_step_new(f.opt, 1, 0.5);
  tg_scope sc = tg_scope_begin();
  tg_tensor *r = tg_zeros(TG_SHAPE(1), TG_OPTS(.dtype = TG_F64));
  tg_set_requires_grad(r, true);
  cr_assert_eq(tg_optimizer_add_param_group(f.opt, 1, &r, tg_param_group_inherit()), TG_OK);
  tg_scope_end(sc);
  cr_assert_eq(tg_lr_scheduler_step(s), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "has 3 parameter groups but had 2");
  tg_lr_scheduler_free(s);
  tg_lr_scheduler_free(NULL);
  fixture_free(&f);
}

static tg_status schedule_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_scope sc = tg_scope_begin();
  tg_tensor *p = tg_zeros(TG_SHAPE(1), TG_OPTS(.dtype = TG_F64));
  tg_status st = status_of(p);
  if (st == TG_OK) st = clean(tg_set_requires_grad(p, true));
  tg_optimizer *opt = st == TG_OK ? tg_sgd_new(1, &p, (tg_sgd_options){.lr = 0.1}) : NULL;
  if (st == TG_OK) st = status_of(opt);
  tg_lr_scheduler *s = st == TG_OK ? tg_lr_cosine_warmup_new(opt, 2, 5, 0.01) : NULL;
  if (st == TG_OK) st = status_of(s);
  for (int t = 0; t < 3 && st == TG_OK; t++) st = clean(tg_lr_scheduler_step(s));
  if (st == TG_OK) out[(*n_out)++] = tg_optimizer_lr(opt);
  tg_lr_scheduler_free(s);
  tg_optimizer_free(opt);
  tg_scope_end(sc);
  return st;
}

TG_TEST(lr_schedule, alloc_sweep) {
  cr_assert_gt(sweep("cosine schedule", schedule_step, NULL).failed, 0);
}
