/* The Conv2dBatchNorm2d layer (tg/conv_bn_layer.h): torch's state names, PyTorch's
 * initialization, forward equal to the fused op, running statistics and num_batches_tracked in
 * training, the running statistics in evaluation, bad arguments, and an allocation-failure
 * sweep over building, forward and backward. */
#include <math.h>

#include "testutil.h"
#include "tg/conv_bn_layer.h"

#include "alloc_sweep.h"

static double item(const tg_tensor *t) {
  double v = NAN;
  cr_assert_eq(tg_item(t, &v), TG_OK, "%s", tg_last_error_message());
  return v;
}

static tg_conv2d_bn *layer(tg_dtype dt, uint64_t seed) {
  tg_generator *gen = tg_generator_new(seed);
  tg_conv2d_bn *l = tg_conv2d_bn_new(3, 4, 3, &(tg_conv2d_opts){.padding = {1, 1}},
                                     (tg_conv_bn_options){0}, (tg_options){.dtype = dt}, gen);
  tg_generator_free(gen);
  cr_assert_not_null(l, "%s", tg_last_error_message());
  return l;
}

TG_TEST(conv_bn_layer, has_torch_state_names_and_init) {
  tg_conv2d_bn *l = layer(TG_F32, 1);
  tg_module *m = tg_conv2d_bn_module(l);
  tg_tensor_dict *state = tg_module_state_dict(m);
  cr_assert_not_null(state, "%s", tg_last_error_message());
  const char *names[] = {"conv.weight",     "bn.weight",      "bn.bias",
                         "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"};
  cr_assert_eq(tg_tensor_dict_size(state), 6);
  for (int i = 0; i < 6; i++)
    cr_assert_not_null(tg_tensor_dict_get(state, names[i]), "no %s", names[i]);
  tg_tensor_dict_free(state);
  cr_assert_eq(tg_module_num_parameters(m), 3); /* conv.weight, bn.weight, bn.bias */
  tg_tensor *w = tg_module_find(m, "conv.weight");
  tg_assert_sizes(w, 4, 3, 3, 3);
  /* kaiming_uniform(a = sqrt(5)): bound 1 / sqrt(fan_in = 27) */
  cr_assert_leq(item(tg_max(tg_abs(w))), 1 / sqrt(27.0) + 1e-7);
  tg_test_expect_values(tg_module_find(m, "bn.weight"), 4, (const double[]){1, 1, 1, 1}, 0);
  tg_test_expect_values(tg_module_find(m, "bn.running_var"), 4, (const double[]){1, 1, 1, 1}, 0);
  tg_tensor *count = tg_module_find(m, "bn.num_batches_tracked");
  cr_assert_eq(tg_tensor_dtype(count), TG_I64);
  cr_assert_eq(tg_ndim(count), 0);
  tg_conv2d_bn_free(l);
}

TG_TEST(conv_bn_layer, trains_and_evaluates) {
  tg_conv2d_bn *l = layer(TG_F64, 2);
  tg_module *m = tg_conv2d_bn_module(l);
  tg_generator *gen = tg_generator_new(3);
  tg_tensor *x = tg_randn(TG_SHAPE(2, 3, 5, 5), (tg_options){.dtype = TG_F64}, gen);
  tg_generator_free(gen);
  tg_tensor *rm = tg_zeros(TG_SHAPE(4), (tg_options){.dtype = TG_F64});
  tg_tensor *rv = tg_ones(TG_SHAPE(4), (tg_options){.dtype = TG_F64});
  const tg_conv2d_opts conv = {.padding = {1, 1}};
  tg_tensor *want = tg_conv2d_batch_norm(x, tg_module_find(m, "conv.weight"), NULL, NULL, rm, rv,
                                         &conv, (tg_conv_bn_options){.training = true});
  tg_tensor *y = tg_module_forward(m, x);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_assert_close(y, want, 1e-14, 1e-14);
  tg_assert_close(tg_module_find(m, "bn.running_mean"), rm, 1e-15, 1e-15);
  tg_assert_close(tg_module_find(m, "bn.running_var"), rv, 1e-15, 1e-15);
  cr_assert_eq(item(tg_module_find(m, "bn.num_batches_tracked")), 1);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(tg_mul(y, y), y)), NULL), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_not_null(tg_grad(tg_module_find(m, "conv.weight")));
  cr_assert_not_null(tg_grad(tg_module_find(m, "bn.bias")));
  /* eval: the running statistics, nothing updated */
  tg_module_train(m, false);
  want = tg_conv2d_batch_norm(x, tg_module_find(m, "conv.weight"), NULL, NULL, rm, rv, &conv,
                              (tg_conv_bn_options){0});
  y = tg_conv2d_bn_forward(l, x);
  tg_assert_close(y, want, 1e-14, 1e-14);
  cr_assert_eq(item(tg_module_find(m, "bn.num_batches_tracked")), 1);
  tg_conv2d_bn_free(l);
}

TG_TEST(conv_bn_layer, bad_arguments) {
  tg_options f32 = {.dtype = TG_F32};
  cr_assert_null(tg_conv2d_bn_new(0, 4, 3, NULL, (tg_conv_bn_options){0}, f32, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_bn_new", "in_channels (0)");
  cr_assert_null(tg_conv2d_bn_new(3, 4, 3, &(tg_conv2d_opts){.groups = 2}, (tg_conv_bn_options){0},
                                  f32, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "groups (2) must divide");
  cr_assert_null(tg_conv2d_bn_new(3, 4, 3, NULL, (tg_conv_bn_options){0},
                                  (tg_options){.dtype = TG_I64}, NULL));
  tg_expect_error(TG_ERR_DTYPE, "tg_conv2d_bn_new", "not floating");
  cr_assert_null(tg_conv2d_bn_new(3, 4, 3, NULL, (tg_conv_bn_options){.formula = 9}, f32, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "formula 9");
  cr_assert_null(tg_conv2d_bn_forward(NULL, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_bn_forward", "m is NULL");
  tg_conv2d_bn *l = layer(TG_F32, 4);
  cr_assert_null(
      tg_conv2d_bn_forward(l, tg_zeros(TG_SHAPE(2, 5, 4, 4), (tg_options){.dtype = TG_F32})));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d_bn_forward", "[2, 5, 4, 4]");
  tg_conv2d_bn_free(l);
}

static tg_status layer_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_generator *gen = tg_generator_new(5);
  tg_conv2d_bn *l = gen ? tg_conv2d_bn_new(1, 2, 2, NULL, (tg_conv_bn_options){0},
                                           (tg_options){.dtype = TG_F64}, gen)
                        : NULL;
  tg_generator_free(gen);
  tg_status st = status_of(l);
  tg_module *m = tg_conv2d_bn_module(l);
  tg_tensor *x = st == TG_OK
                     ? tg_from_data(TG_SHAPE(2, 1, 2, 3),
                                    (const double[]){3, -1, 4, 1, -5, 9, 2, 6, -5, 3, 5, -8},
                                    TG_OPTS(.dtype = TG_F64))
                     : NULL;
  tg_tensor *y = x ? tg_module_forward(m, x) : NULL;
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = append(tg_module_find(m, "bn.running_var"), out, n_out);
  if (st == TG_OK) st = append(tg_module_find(m, "bn.num_batches_tracked"), out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(tg_mul(y, y), y)), NULL));
  if (st == TG_OK) st = append(tg_grad(tg_module_find(m, "conv.weight")), out, n_out);
  tg_conv2d_bn_free(l);
  return st;
}

TG_TEST(conv_bn_layer, allocation_failures) {
  sweep("Conv2dBatchNorm2d build, forward, backward", layer_step, NULL);
}
