/* Buffers (tg/module.h): state that is saved but not trained. A layer written the way
 * docs/modules.md describes, a running mean kept as buffers like BatchNorm's running
 * statistics, checks that buffers follow the train/eval flag, are no parameters (counts,
 * lists, optimizers leave them alone), and are saved and restored by state files and
 * checkpoints. */
#include <math.h>
#include <stdio.h>

#include "testutil.h"

static const tg_options f64 = {.dtype = TG_F64};

/* ---- a layer with buffers: y = x - mean, where mean is the batch's in training (and
 * running_mean <- 0.9 running_mean + 0.1 batch mean) and running_mean in evaluation ---- */

static tg_tensor *centre_forward(tg_module *m, const tg_tensor *x, void *user) {
  (void)user;
  tg_tensor *running = tg_module_find(m, "running_mean");
  if (!tg_module_is_training(m)) return tg_sub(x, running);
  tg_scope s = tg_scope_begin();
  tg_tensor *mean = tg_mean_dim(x, 0, false);
  tg_status st = mean ? TG_OK : tg_last_error();
  /* the running statistics change in place, outside the tape, as torch's batch_norm does */
  tg_no_grad_begin();
  if (st == TG_OK) st = tg_mul_scalar_(running, 0.9);
  if (st == TG_OK) st = tg_add_scaled_(running, mean, 0.1);
  if (st == TG_OK) st = tg_add_scalar_(tg_module_find(m, "num_batches_tracked"), 1);
  tg_no_grad_end();
  tg_tensor *y = st == TG_OK ? tg_scope_escape(s, tg_sub(x, mean)) : NULL;
  tg_scope_end(s);
  return y;
}

static tg_module *centre_new(int64_t features) {
  tg_module *m = tg_module_new("centre");
  cr_assert_not_null(m);
  cr_assert_eq(tg_module_register_buffer(m, "running_mean", tg_zeros(TG_SHAPE(features), f64)),
               TG_OK);
  cr_assert_eq(tg_module_register_buffer(m, "num_batches_tracked",
                                         tg_zeros(0, NULL, TG_OPTS(.dtype = TG_I64))),
               TG_OK);
  cr_assert_eq(tg_module_set_forward(m, centre_forward, NULL), TG_OK);
  return m;
}

/* Linear(3, 2) -> centre(2), as a Sequential: "0.weight", "0.bias", buffers
 * "1.running_mean", "1.num_batches_tracked". */
static tg_module *model_new(uint64_t seed) {
  tg_generator *g = tg_generator_new(seed);
  tg_module *seq = tg_sequential_new();
  cr_assert_eq(tg_sequential_append(seq, tg_linear_module(tg_linear_new(3, 2, true, f64, g)), NULL),
               TG_OK);
  cr_assert_eq(tg_sequential_append(seq, centre_new(2), NULL), TG_OK);
  tg_generator_free(g);
  return seq;
}

static double value(const tg_tensor *t, int64_t i) { return tg_test_at(t, i); }

TG_TEST(buffers, follow_the_train_eval_flag) {
  tg_module *m = model_new(1);
  tg_tensor *x = tg_randn(TG_SHAPE(4, 3), f64, NULL);
  tg_tensor *running = tg_module_find(m, "1.running_mean");
  tg_tensor *h = tg_module_forward(tg_module_child(m, "0"), x);
  tg_tensor *y = tg_module_forward(m, x);
  tg_assert_close(y, tg_sub(h, tg_mean_dim(h, 0, false)), 0, 1e-15);
  tg_assert_close(running, tg_mul_scalar(tg_mean_dim(h, 0, false), 0.1), 1e-15, 1e-15);
  cr_assert_eq(value(tg_module_find(m, "1.num_batches_tracked"), 0), 1);
  cr_assert(!tg_requires_grad(running) && tg_is_leaf(running));
  tg_tensor *kept = tg_clone(running);
  tg_module_train(m, false);
  tg_assert_close(tg_module_forward(m, x), tg_sub(h, kept), 0, 0);
  tg_assert_close(running, kept, 0, 0); /* evaluation leaves the statistics alone */
  cr_assert_eq(value(tg_module_find(m, "1.num_batches_tracked"), 0), 1);
  tg_module_free(m);
}

TG_TEST(buffers, are_not_parameters_and_optimizers_leave_them_alone) {
  tg_module *m = model_new(2);
  cr_assert_eq(tg_module_num_parameters(m), 2);
  cr_assert_eq(tg_module_parameters(m, NULL, 0), 2);
  cr_assert_eq(tg_module_parameter_count(m), 3 * 2 + 2);
  cr_assert_eq(tg_module_num_buffers(m), 2);
  const char *name;
  tg_module_buffer(m, 0, &name);
  cr_assert_str_eq(name, "1.running_mean");
  tg_module_buffer(m, 1, &name);
  cr_assert_str_eq(name, "1.num_batches_tracked");
  tg_module_forward(m, tg_randn(TG_SHAPE(4, 3), f64, NULL)); /* running_mean non-zero */
  tg_tensor *before = tg_clone(tg_module_find(m, "1.running_mean"));
  tg_optimizer *opts[2] = {tg_sgd_for(m, (tg_sgd_options){.lr = 0.5, .momentum = 0.9}),
                           tg_adam_for(m, (tg_adam_options){.lr = 0.5, .weight_decay = 0.1})};
  for (int k = 0; k < 2; k++) {
    cr_assert_not_null(opts[k], "%s", tg_last_error_message());
    tg_module_train(m, false);
    tg_scope s = tg_scope_begin();
    cr_assert_eq(tg_backward(tg_sum(tg_module_forward(m, tg_ones(TG_SHAPE(4, 3), f64))), NULL),
                 TG_OK);
    cr_assert_eq(tg_optimizer_step(opts[k]), TG_OK);
    cr_assert_eq(tg_optimizer_zero_grad(opts[k]), TG_OK);
    cr_assert_eq(tg_module_zero_grad(m), TG_OK);
    tg_scope_end(s);
    tg_assert_close(tg_module_find(m, "1.running_mean"), before, 0, 0);
    cr_assert_null(tg_grad(tg_module_find(m, "1.running_mean")));
    /* the optimizer's state names only parameters */
    tg_tensor_dict *d = tg_optimizer_state_dict(opts[k]);
    cr_assert_gt(tg_tensor_dict_size(d), 0);
    for (int i = 0; i < tg_tensor_dict_size(d); i++)
      cr_assert(strncmp(tg_tensor_dict_name(d, i), "0.", 2) == 0, "%s", tg_tensor_dict_name(d, i));
    tg_tensor_dict_free(d);
    tg_optimizer_free(opts[k]);
  }
  tg_module_free(m);
}

TG_TEST(buffers, saved_and_loaded_by_state_files) {
  const char *path = "test_buffers_state.safetensors";
  tg_module *a = model_new(3), *b = model_new(4);
  for (int i = 0; i < 3; i++) tg_module_forward(a, tg_randn(TG_SHAPE(4, 3), f64, NULL));
  cr_assert_eq(tg_module_save(a, path), TG_OK, "%s", tg_last_error_message());
  /* in the file with their dtypes: what torch's BatchNorm state dicts hold too */
  tg_tensor_dict *file = tg_safetensors_load(path);
  cr_assert_not_null(file);
  cr_assert_eq(tg_tensor_dict_size(file), 4);
  cr_assert_eq(tg_tensor_dtype(tg_tensor_dict_get(file, "1.running_mean")), TG_F64);
  tg_tensor *count = tg_tensor_dict_get(file, "1.num_batches_tracked");
  cr_assert(count && tg_tensor_dtype(count) == TG_I64 && tg_ndim(count) == 0);
  cr_assert_eq(value(count, 0), 3);
  tg_load_report r;
  cr_assert_eq(tg_module_load(b, path, true, &r), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(r.n_loaded, 4);
  tg_assert_close(tg_module_find(b, "1.running_mean"), tg_module_find(a, "1.running_mean"), 0, 0);
  cr_assert_eq(value(tg_module_find(b, "1.num_batches_tracked"), 0), 3);
  /* a state without the buffers: a strict load names them and changes nothing */
  tg_tensor_dict *params_only = tg_tensor_dict_new();
  cr_assert_eq(tg_tensor_dict_set(params_only, "0.weight", tg_tensor_dict_get(file, "0.weight")),
               TG_OK);
  cr_assert_eq(tg_tensor_dict_set(params_only, "0.bias", tg_tensor_dict_get(file, "0.bias")),
               TG_OK);
  tg_module *c = model_new(5);
  tg_tensor *w = tg_clone(tg_module_find(c, "0.weight"));
  cr_assert_eq(tg_module_load_state_dict(c, params_only, true, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "missing: 1.running_mean, 1.num_batches_tracked");
  tg_assert_close(tg_module_find(c, "0.weight"), w, 0, 0);
  cr_assert_eq(tg_module_load_state_dict(c, params_only, false, &r), TG_OK);
  cr_assert(r.n_loaded == 2 && r.n_missing == 2);
  tg_tensor_dict_free(params_only);
  tg_tensor_dict_free(file);
  remove(path);
  tg_module_free(a);
  tg_module_free(b);
  tg_module_free(c);
}

TG_TEST(buffers, saved_and_restored_by_checkpoints) {
  const char *path = "test_buffers.ckpt";
  tg_module *m = model_new(6);
  tg_optimizer *opt = tg_sgd_for(m, (tg_sgd_options){.lr = 0.1, .momentum = 0.5});
  tg_scope s = tg_scope_begin();
  cr_assert_eq(tg_backward(tg_sum(tg_module_forward(m, tg_randn(TG_SHAPE(4, 3), f64, NULL))), NULL),
               TG_OK);
  cr_assert_eq(tg_optimizer_step(opt), TG_OK);
  tg_scope_end(s);
  tg_tensor *saved = tg_clone(tg_module_find(m, "1.running_mean"));
  cr_assert_eq(tg_checkpoint_save(path, m, opt, 1, 0, NULL), TG_OK, "%s", tg_last_error_message());
  tg_tensor_dict *file = tg_safetensors_load(path);
  cr_assert_not_null(tg_tensor_dict_get(file, "model.1.running_mean"));
  cr_assert_not_null(tg_tensor_dict_get(file, "model.1.num_batches_tracked"));
  cr_assert_null(tg_tensor_dict_get(file, "optim.1.running_mean.momentum_buffer"));
  tg_tensor_dict_free(file);
  /* more training moves the statistics; loading the checkpoint brings them back */
  tg_module_forward(m, tg_randn(TG_SHAPE(4, 3), f64, NULL));
  cr_assert_eq(value(tg_module_find(m, "1.num_batches_tracked"), 0), 2);
  int64_t step = 0;
  cr_assert_eq(tg_checkpoint_load(path, m, opt, &step, 0, NULL), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(step, 1);
  tg_assert_close(tg_module_find(m, "1.running_mean"), saved, 0, 0);
  cr_assert_eq(value(tg_module_find(m, "1.num_batches_tracked"), 0), 1);
  remove(path);
  tg_optimizer_free(opt);
  tg_module_free(m);
}

/* ---- moving (tests/cuda/test_cuda_nn_module.c moves to a CUDA device) ---- */

TG_TEST(buffers, move_to_the_same_device_changes_nothing) {
  tg_module *m = model_new(7);
  tg_tensor *w = tg_module_find(m, "0.weight"), *running = tg_module_find(m, "1.running_mean");
  tg_tensor *w_before = tg_clone(w);
  cr_assert_eq(tg_module_to_device(m, TG_DEVICE_CPU), TG_OK);
  cr_assert(tg_module_find(m, "0.weight") == w && tg_module_find(m, "1.running_mean") == running);
  tg_assert_close(w, w_before, 0, 0);
  cr_assert_eq(tg_module_to_device(NULL, TG_DEVICE_CPU), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_to_device", "m is NULL");
  tg_module_free(m);
}

TG_TEST(buffers, a_failed_move_changes_nothing) {
  tg_module *m = model_new(8);
  tg_tensor *w = tg_clone(tg_module_find(m, "0.weight"));
  /* a device this build cannot reach (or, with CUDA, one that does not exist) */
  cr_assert_neq(tg_module_to_device(m, TG_DEVICE_CUDA(63)), TG_OK);
  cr_assert(strstr(tg_last_error_message(), "tg_module_to_device: parameter \"0.weight\"") != NULL,
            "%s", tg_last_error_message());
  tg_clear_error();
  cr_assert(tg_device_equal(tg_tensor_device(tg_module_find(m, "1.running_mean")), TG_DEVICE_CPU));
  tg_assert_close(tg_module_find(m, "0.weight"), w, 0, 0);
  /* only leaves move: a buffer made by an op is refused before anything is copied */
  tg_module *odd = tg_module_new("odd");
  tg_tensor *p = tg_ones(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  cr_assert_eq(tg_module_register_buffer(odd, "twice", tg_mul_scalar(p, 2)), TG_OK);
  cr_assert_eq(tg_module_to_device(odd, TG_DEVICE_CPU), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_module_to_device", "buffer \"twice\" is the output of an op");
  tg_module_free(odd);
  tg_module_free(m);
}
