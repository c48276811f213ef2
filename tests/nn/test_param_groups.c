/* Parameter groups (tg/optim.h) for SGD, Adam and AdamW: PyTorch's trajectories with groups
 * (numbers from tests/nn/python/optim_refs.py, torch 2.15, pasted below), inheritance, the
 * lr setters, state dicts and checkpoints of grouped optimizers (resuming gives the steps of
 * the run that never stopped, bit for bit), every error. */
#define _GNU_SOURCE /* mkdtemp */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

#include "test_adamw_problem.h"

/* torch.optim.SGD([{W}, {b, lr 0.05, weight_decay 0}, {c}], lr=0.02, momentum=0.9,
 * weight_decay=1e-3) and torch.optim.Adam([{W}, {b, lr 5e-3, weight_decay 0}, {c}], lr=1e-2,
 * weight_decay=0.1), 10 steps each (tests/nn/python/optim_refs.py) */
/* sgd: 10 steps */
static const double sgd_losses[] = {1.582683662838368,   0.44585684969186978, -1.7285825017282181,
                                    -4.6096723463746541, -7.4306607208754869, -9.4326611407506782,
                                    -10.607219360093243, -11.298522600958021, -11.749213199792502,
                                    -12.077518788152592};
static const double sgd_W[] = {-0.98046682622099179, -0.64479426997162592, -0.32005011699254321,
                               -0.12516895453890456, -1.1326483034201675,  -1.5464367182921972,
                               -1.691814201396318,   -1.4774390906756205,  -1.5796447906027098,
                               -1.4099360671614884,  -1.1186217082018652,  -0.83368101027800601};
static const double sgd_b[] = {0.19528224392821239, 0.68695661469123293, 1.0358754880178709,
                               1.3453234739839854};
static const double sgd_c[] = {-0.43190389571820881, -0.11300814238445928, 0.088129193754719323,
                               0.2033635535465132};
/* adam: 10 steps */
static const double adam_losses[] = {
    1.582683662838368,    1.329011595953951,   1.074043954678672,   0.81796913045361586,
    0.56097326847105422,  0.30323422958071689, 0.04491375251317975, -0.21384927286552491,
    -0.47293756532183506, -0.73223966492980841};
static const double adam_W[] = {-0.049722787428681685, 0.25866262709348498,  0.39828761249669326,
                                0.3036473306516409,    0.019957691345973222, -0.32125753866812551,
                                -0.55846648470466065,  -0.57992391104072361, -0.37502476665768653,
                                -0.041707654736622857, 0.26417662120701102,  0.39891482285521462};
static const double adam_b[] = {0.333898074702137, 0.1300042663150682, -0.2065392238557838,
                                -0.16744419699786661};
static const double adam_c[] = {-0.40145430179964753, -0.19990956102926064, 0.011405478040749584,
                                0.20278555482839181};

static void check_trajectory(problem *p, tg_optimizer *opt, const double *losses, const double *W,
                             const double *b, const double *c) {
  for (int t = 0; t < 10; t++) {
    double loss;
    cr_assert_eq(problem_step(p, opt, &loss), TG_OK, "%s", tg_last_error_message());
    cr_assert(fabs(loss - losses[t]) <= 1e-12 * (1 + fabs(losses[t])),
              "step %d: loss %.17g, torch %.17g", t, loss, losses[t]);
  }
  tg_test_expect_values(p->W, 12, W, 1e-12);
  tg_test_expect_values(p->b, 4, b, 1e-12);
  tg_test_expect_values(p->c, 4, c, 1e-12);
}

TG_TEST(param_groups, sgd_matches_torch) {
  problem p = problem_new(TG_F64);
  tg_optimizer *opt =
      tg_sgd_new(1, &p.W, (tg_sgd_options){.lr = 0.02, .momentum = 0.9, .weight_decay = 1e-3});
  cr_assert_eq(tg_optimizer_add_param_group(
                   opt, 1, &p.b, (tg_param_group_options){.lr = 0.05, .weight_decay = 0}),
               TG_OK);
  cr_assert_eq(tg_optimizer_add_param_group(opt, 1, &p.c, tg_param_group_inherit()), TG_OK);
  check_trajectory(&p, opt, sgd_losses, sgd_W, sgd_b, sgd_c);
  tg_optimizer_free(opt);
  problem_free(&p);
}

TG_TEST(param_groups, adam_matches_torch) {
  problem p = problem_new(TG_F64);
  tg_optimizer *opt = tg_adam_new(1, &p.W, (tg_adam_options){.lr = 1e-2, .weight_decay = 0.1});
  cr_assert_eq(tg_optimizer_add_param_group(
                   opt, 1, &p.b, (tg_param_group_options){.lr = 5e-3, .weight_decay = 0}),
               TG_OK);
  cr_assert_eq(tg_optimizer_add_param_group(opt, 1, &p.c, tg_param_group_inherit()), TG_OK);
  check_trajectory(&p, opt, adam_losses, adam_W, adam_b, adam_c);
  tg_optimizer_free(opt);
  problem_free(&p);
}

/* NAN inherits the constructor's values (PyTorch's defaults), not ones set later; set_lr sets
 * every group; a group may be empty; state names continue the numbering. */
TG_TEST(param_groups, inheritance_setters_and_names) {
  problem p = problem_new(TG_F64);
  tg_optimizer *opt = tg_adam_new(1, &p.W, (tg_adam_options){.lr = 0.1, .weight_decay = 0.5});
  cr_assert_eq(tg_optimizer_num_groups(opt), 1);
  cr_assert_eq(tg_optimizer_set_lr(opt, 0.3), TG_OK);
  cr_assert_eq(tg_optimizer_add_param_group(opt, 0, NULL, tg_param_group_inherit()), TG_OK);
  cr_assert_eq(tg_optimizer_add_param_group(opt, 2, (tg_tensor *[]){p.b, p.c},
                                            (tg_param_group_options){.lr = NAN, .weight_decay = 0}),
               TG_OK);
  cr_assert_eq(tg_optimizer_num_groups(opt), 3);
  cr_assert_eq(tg_optimizer_group_size(opt, 1), 0);
  cr_assert_eq(tg_optimizer_group_size(opt, 2), 2);
  cr_assert_eq(tg_optimizer_group_lr(opt, 0), 0.3);
  cr_assert_eq(tg_optimizer_group_lr(opt, 2), 0.1);
  cr_assert_eq(tg_optimizer_group_weight_decay(opt, 1), 0.5);
  cr_assert_eq(tg_optimizer_group_weight_decay(opt, 2), 0.0);
  cr_assert_eq(tg_optimizer_set_group_lr(opt, 2, 0.25), TG_OK);
  cr_assert_eq(tg_optimizer_group_lr(opt, 2), 0.25);
  cr_assert_eq(tg_optimizer_lr(opt), 0.3);
  cr_assert_eq(tg_optimizer_set_lr(opt, 0.2), TG_OK);
  for (int g = 0; g < 3; g++) cr_assert_eq(tg_optimizer_group_lr(opt, g), 0.2);
  cr_assert_eq(problem_step(&p, opt, NULL), TG_OK);
  tg_tensor_dict *d = tg_optimizer_state_dict(opt);
  cr_assert_not_null(tg_tensor_dict_get(d, "0.exp_avg"));
  cr_assert_not_null(tg_tensor_dict_get(d, "1.exp_avg")); /* b */
  cr_assert_not_null(tg_tensor_dict_get(d, "2.step"));    /* c */
  tg_tensor_dict_free(d);
  tg_optimizer_free(opt);
  problem_free(&p);
}

/* p's parameters set to q's. */
static void copy_params(problem *p, const problem *q) {
  tg_no_grad_begin();
  cr_assert_eq(tg_copy_(p->W, q->W), TG_OK);
  cr_assert_eq(tg_copy_(p->b, q->b), TG_OK);
  cr_assert_eq(tg_copy_(p->c, q->c), TG_OK);
  tg_no_grad_end();
}

static tg_optimizer *grouped(problem *p, int kind) {
  tg_optimizer *opt = kind == 0
                          ? tg_sgd_new(1, &p->W, (tg_sgd_options){.lr = 0.02, .momentum = 0.9})
                      : kind == 1 ? tg_adam_new(1, &p->W, (tg_adam_options){.lr = 1e-2})
                                  : tg_adamw_new(1, &p->W, tg_adamw_defaults());
  cr_assert_eq(tg_optimizer_add_param_group(
                   opt, 1, &p->b, (tg_param_group_options){.lr = 5e-3, .weight_decay = 0}),
               TG_OK);
  cr_assert_eq(tg_optimizer_add_param_group(
                   opt, 1, &p->c, (tg_param_group_options){.lr = NAN, .weight_decay = 0.2}),
               TG_OK);
  return opt;
}

TG_TEST(param_groups, state_dict_resumes_bit_for_bit) {
  for (int kind = 0; kind < 3; kind++) {
    problem a = problem_new(TG_F64), b = problem_new(TG_F64);
    tg_optimizer *oa = grouped(&a, kind);
    for (int t = 0; t < 3; t++) cr_assert_eq(problem_step(&a, oa, NULL), TG_OK);
    tg_tensor_dict *d = tg_optimizer_state_dict(oa);
    copy_params(&b, &a);
    tg_optimizer *ob = grouped(&b, kind);
    cr_assert_eq(tg_optimizer_load_state_dict(ob, d), TG_OK, "%s", tg_last_error_message());
    tg_tensor_dict_free(d);
    for (int t = 0; t < 3; t++) {
      cr_assert_eq(problem_step(&a, oa, NULL), TG_OK);
      cr_assert_eq(problem_step(&b, ob, NULL), TG_OK);
    }
    cr_assert_eq(tg_test_max_abs_diff(a.W, b.W), 0.0, "kind %d", kind);
    cr_assert_eq(tg_test_max_abs_diff(a.b, b.b), 0.0, "kind %d", kind);
    cr_assert_eq(tg_test_max_abs_diff(a.c, b.c), 0.0, "kind %d", kind);
    tg_optimizer_free(oa);
    tg_optimizer_free(ob);
    problem_free(&a);
    problem_free(&b);
  }
}

/* A module over p's tensors: "W", "b", "c". */
static tg_module *module_of(const problem *p) {
  tg_module *m = tg_module_new("m");
  cr_assert_eq(tg_module_register_parameter(m, "W", p->W), TG_OK);
  cr_assert_eq(tg_module_register_parameter(m, "b", p->b), TG_OK);
  cr_assert_eq(tg_module_register_parameter(m, "c", p->c), TG_OK);
  return m;
}

/* tg_adamw_for_decay_split through a checkpoint file and a cosine schedule set back to the
 * saved step: 3 + 3 steps give the 6 steps of the run that never stopped. */
TG_TEST(param_groups, checkpoint_of_a_decay_split_resumes_bit_for_bit) {
  char dir[64], path[128];
  snprintf(dir, sizeof dir, "/tmp/tg_param_groups_XXXXXX");
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/ckpt", dir);
  tg_adamw_options o = tg_adamw_defaults();
  o.lr = 0.02;
  o.weight_decay = 0.3;

  problem a = problem_new(TG_F64), b = problem_new(TG_F64);
  tg_module *ma = module_of(&a), *mb = module_of(&b);
  tg_optimizer *oa = tg_adamw_for_decay_split(ma, o), *ob = tg_adamw_for_decay_split(mb, o);
  cr_assert_eq(tg_optimizer_group_size(oa, 0), 2); /* W, c */
  tg_lr_scheduler *sa = tg_lr_cosine_warmup_new(oa, 2, 6, 0.001);
  tg_lr_scheduler *sb = tg_lr_cosine_warmup_new(ob, 2, 6, 0.001);
  for (int t = 0; t < 3; t++) {
    cr_assert_eq(problem_step(&a, oa, NULL), TG_OK);
    cr_assert_eq(tg_lr_scheduler_step(sa), TG_OK);
  }
  cr_assert_eq(tg_checkpoint_save(path, ma, oa, 3, 0, NULL), TG_OK, "%s", tg_last_error_message());
  int64_t step = 0;
  cr_assert_eq(tg_checkpoint_load(path, mb, ob, &step, 0, NULL), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(step, 3);
  cr_assert_eq(tg_lr_scheduler_set_step(sb, step), TG_OK);
  cr_assert_eq(tg_optimizer_group_lr(ob, 1), tg_optimizer_group_lr(oa, 1));
  for (int t = 0; t < 3; t++) {
    cr_assert_eq(problem_step(&a, oa, NULL), TG_OK);
    cr_assert_eq(tg_lr_scheduler_step(sa), TG_OK);
    cr_assert_eq(problem_step(&b, ob, NULL), TG_OK);
    cr_assert_eq(tg_lr_scheduler_step(sb), TG_OK);
  }
  cr_assert_eq(tg_test_max_abs_diff(a.W, b.W), 0.0);
  cr_assert_eq(tg_test_max_abs_diff(a.b, b.b), 0.0);
  cr_assert_eq(tg_test_max_abs_diff(a.c, b.c), 0.0);
  unlink(path);
  rmdir(dir);
  tg_lr_scheduler_free(sa);
  tg_lr_scheduler_free(sb);
  tg_optimizer_free(oa);
  tg_optimizer_free(ob);
  tg_module_free(ma);
  tg_module_free(mb);
  problem_free(&a);
  problem_free(&b);
}

TG_TEST(param_groups, errors_are_named) {
  problem p = problem_new(TG_F64);
  tg_optimizer *opt = tg_sgd_new(1, &p.W, (tg_sgd_options){.lr = 0.1});
  tg_param_group_options inherit = tg_param_group_inherit();
  cr_assert_eq(tg_optimizer_add_param_group(NULL, 1, &p.b, inherit), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_add_param_group", "opt is NULL");
  cr_assert_eq(tg_optimizer_add_param_group(opt, 1, &p.W, inherit), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_add_param_group", "params[0]",
                  "already in group 0", "one group");
  cr_assert_eq(tg_optimizer_add_param_group(opt, 2, (tg_tensor *[]){p.b, p.b}, inherit),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "params[1] is params[0] again");
  cr_assert_eq(
      tg_optimizer_add_param_group(opt, 1, &p.b, (tg_param_group_options){.weight_decay = NAN}),
      TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "g.lr (0)", "NAN to inherit");
  cr_assert_eq(tg_optimizer_add_param_group(
                   opt, 1, &p.b, (tg_param_group_options){.lr = NAN, .weight_decay = -1}),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "g.weight_decay (-1)");
  cr_assert_eq(tg_optimizer_add_param_group(opt, -1, &p.b, inherit), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "n_params is -1");
  cr_assert_eq(tg_optimizer_add_param_group(opt, 1, NULL, inherit), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "params is NULL");
  cr_assert_eq(tg_optimizer_add_param_group(opt, 1, &p.x, inherit), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "params[0] must be a floating leaf");
  cr_assert_eq(tg_optimizer_add_param_group(opt, 2, (tg_tensor *[]){p.b, NULL}, inherit),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "params[1] is NULL");
  cr_assert_eq(tg_optimizer_num_groups(opt), 1); /* nothing was added */
  cr_assert(isnan(tg_optimizer_group_lr(opt, 1)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_group_lr", "group 1 out of range");
  cr_assert(isnan(tg_optimizer_group_weight_decay(opt, -1)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_group_weight_decay", "group -1");
  cr_assert_eq(tg_optimizer_group_size(NULL, 0), -1);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_group_size", "opt is NULL");
  cr_assert_eq(tg_optimizer_num_groups(NULL), -1);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_num_groups");
  cr_assert_eq(tg_optimizer_set_group_lr(opt, 0, 0), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_set_group_lr", "lr (0)");
  cr_assert_eq(tg_optimizer_set_group_lr(opt, 3, 0.1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "group 3 out of range");
  tg_optimizer_free(opt);

  /* state is kept by name: an index name that a module's parameter already has is refused */
  tg_module *m = tg_module_new("m");
  cr_assert_eq(tg_module_register_parameter(m, "1", p.W), TG_OK);
  opt = tg_sgd_for(m, (tg_sgd_options){.lr = 0.1});
  cr_assert_eq(tg_optimizer_add_param_group(opt, 1, &p.b, inherit), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "a parameter named \"1\" is already in the optimizer");
  tg_optimizer_free(opt);
  tg_module_free(m);
  problem_free(&p);
}
