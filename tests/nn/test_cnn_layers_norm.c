/* The normalization layers and Dropout (torch.nn.BatchNorm1d, BatchNorm2d, LayerNorm,
 * GroupNorm, Dropout): PyTorch's names, defaults and buffers, training against evaluation,
 * the running statistics' updates (momentum, PyTorch's None, track_running_stats off), a
 * seeded Dropout repeating, constructor errors naming the argument, and an allocation-failure
 * sweep over a CNN's training and evaluation steps. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};

static void expect_entries(tg_module *m, int n_params, int n, const char *const *names) {
  cr_assert_eq(tg_module_num_parameters(m), n_params);
  cr_assert_eq(tg_module_num_parameters(m) + tg_module_num_buffers(m), n);
  tg_tensor_dict *state = tg_module_state_dict(m);
  cr_assert_eq(tg_tensor_dict_size(state), n);
  for (int i = 0; i < n; i++) /* in torch's order: parameters, then buffers */
    cr_assert_str_eq(tg_tensor_dict_name(state, i), names[i]);
  tg_tensor_dict_free(state);
}

static double item(const tg_tensor *t) {
  double v;
  cr_assert_eq(tg_item(t, &v), TG_OK, "%s", tg_last_error_message());
  return v;
}

/* x's per-channel mean: over every dim of [N, C, H, W] but 1 */
static tg_tensor *channel_mean(const tg_tensor *x) {
  return tg_mean_dim(tg_mean_dim(tg_mean_dim(x, 3, false), 2, false), 0, false);
}

/* ---- BatchNorm ---- */

TG_TEST(cnn_layers_norm, batch_norm2d_entries_and_defaults) {
  tg_module *b = tg_batch_norm2d_layer_new(3, 1e-5, 0.1, true, true, f64);
  cr_assert_not_null(b, "%s", tg_last_error_message());
  cr_assert_str_eq(tg_module_type(b), "batch_norm2d");
  expect_entries(b, 2, 5,
                 (const char *const[]){"weight", "bias", "running_mean", "running_var",
                                       "num_batches_tracked"});
  tg_test_expect_values(tg_module_find(b, "weight"), 3, (const double[]){1, 1, 1}, 0);
  tg_test_expect_values(tg_module_find(b, "bias"), 3, (const double[]){0, 0, 0}, 0);
  tg_test_expect_values(tg_module_find(b, "running_mean"), 3, (const double[]){0, 0, 0}, 0);
  tg_test_expect_values(tg_module_find(b, "running_var"), 3, (const double[]){1, 1, 1}, 0);
  tg_tensor *count = tg_module_find(b, "num_batches_tracked");
  cr_assert_eq(tg_tensor_dtype(count), TG_I64);
  cr_assert_eq(tg_ndim(count), 0);
  cr_assert_eq(item(count), 0);
  cr_assert(tg_requires_grad(tg_module_find(b, "weight")));
  cr_assert(!tg_requires_grad(tg_module_find(b, "running_mean")));
  cr_assert_eq(tg_tensor_dtype(tg_module_find(b, "running_var")), TG_F64);
  tg_module_free(b);
  /* without affine: buffers only; without running stats: parameters only; neither: nothing */
  b = tg_batch_norm1d_layer_new(3, 1e-5, 0.1, false, true, f64);
  cr_assert_str_eq(tg_module_type(b), "batch_norm1d");
  expect_entries(b, 0, 3,
                 (const char *const[]){"running_mean", "running_var", "num_batches_tracked"});
  tg_module_free(b);
  b = tg_batch_norm2d_layer_new(3, 1e-5, 0.1, true, false, f64);
  expect_entries(b, 2, 2, (const char *const[]){"weight", "bias"});
  tg_module_free(b);
  b = tg_batch_norm2d_layer_new(3, 1e-5, 0.1, false, false, f64);
  expect_entries(b, 0, 0, NULL);
  tg_module_free(b);
}

TG_TEST(cnn_layers_norm, batch_norm2d_training_updates_running_stats) {
  tg_generator *g = tg_generator_new(1);
  tg_module *b = tg_batch_norm2d_layer_new(3, 1e-3, 0.25, true, true, f64);
  tg_tensor *w = tg_module_find(b, "weight"), *bias = tg_module_find(b, "bias");
  cr_assert_eq(tg_init_uniform_(w, 0.5, 1.5, g), TG_OK);
  cr_assert_eq(tg_init_uniform_(bias, -1, 1, g), TG_OK);
  tg_tensor *rm = tg_module_find(b, "running_mean"), *rv = tg_module_find(b, "running_var");
  tg_tensor *want_rm = tg_zeros(TG_SHAPE(3), f64), *want_rv = tg_ones(TG_SHAPE(3), f64);
  for (int step = 1; step <= 2; step++) {
    tg_tensor *x = tg_add_scalar(tg_randn(TG_SHAPE(4, 3, 5, 2), f64, g), step);
    tg_tensor *y = tg_module_forward(b, x);
    cr_assert_not_null(y, "%s", tg_last_error_message());
    /* normalized by the batch: the op in training without running statistics */
    tg_assert_close(y,
                    tg_batch_norm(x, NULL, NULL, w, bias,
                                  (tg_batch_norm_options){.training = true, .eps = 1e-3}),
                    0, 0);
    int dims[3] = {0, 2, 3};
    want_rm = tg_add(tg_mul_scalar(want_rm, 0.75), tg_mul_scalar(channel_mean(x), 0.25));
    want_rv = tg_add(tg_mul_scalar(want_rv, 0.75),
                     tg_mul_scalar(tg_var(x, 3, dims, 1, false), 0.25)); /* unbiased */
    tg_assert_close(rm, want_rm, 1e-13, 1e-15);
    tg_assert_close(rv, want_rv, 1e-13, 1e-15);
    cr_assert_eq(item(tg_module_find(b, "num_batches_tracked")), step);
  }
  /* evaluation: the running statistics, which stay as they are */
  tg_module_train(b, false);
  tg_tensor *x = tg_randn(TG_SHAPE(2, 3, 4, 4), f64, g);
  tg_tensor *rm0 = tg_clone(rm), *rv0 = tg_clone(rv);
  tg_tensor *y = tg_module_forward(b, x);
  tg_tensor *shape = tg_reshape(rm, TG_SHAPE(1, 3, 1, 1));
  tg_tensor *want =
      tg_add(tg_mul(tg_div(tg_sub(x, shape),
                           tg_sqrt(tg_add_scalar(tg_reshape(rv, TG_SHAPE(1, 3, 1, 1)), 1e-3))),
                    tg_reshape(w, TG_SHAPE(1, 3, 1, 1))),
             tg_reshape(bias, TG_SHAPE(1, 3, 1, 1)));
  tg_assert_close(y, want, 1e-13, 1e-14);
  tg_assert_close(rm, rm0, 0, 0);
  tg_assert_close(rv, rv0, 0, 0);
  cr_assert_eq(item(tg_module_find(b, "num_batches_tracked")), 2);
  /* gradients reach the affine parameters in both modes */
  cr_assert_eq(tg_backward(tg_sum(tg_mul(y, y)), NULL), TG_OK);
  cr_assert_not_null(tg_grad(w));
  cr_assert_not_null(tg_grad(bias));
  tg_module_free(b);
  tg_generator_free(g);
}

TG_TEST(cnn_layers_norm, batch_norm_cumulative_zero_momentum_and_no_running_stats) {
  tg_generator *g = tg_generator_new(2);
  tg_tensor *x1 = tg_randn(TG_SHAPE(5, 2), f64, g);
  tg_tensor *x2 = tg_add_scalar(tg_randn(TG_SHAPE(5, 2), f64, g), 3);
  /* PyTorch's momentum=None: the running mean is the average of the batch means */
  tg_module *b = tg_batch_norm1d_layer_new(2, 1e-5, TG_BATCH_NORM_CUMULATIVE, true, true, f64);
  cr_assert_not_null(tg_module_forward(b, x1));
  cr_assert_not_null(tg_module_forward(b, x2));
  tg_tensor *avg = tg_mul_scalar(tg_add(tg_mean_dim(x1, 0, false), tg_mean_dim(x2, 0, false)), 0.5);
  tg_assert_close(tg_module_find(b, "running_mean"), avg, 1e-14, 1e-15);
  tg_module_train(b, false); /* evaluation uses them, with no momentum involved */
  cr_assert_not_null(tg_module_forward(b, x1), "%s", tg_last_error_message());
  tg_module_free(b);
  /* momentum 0 is zero, not the default: the statistics stay, the batches are counted */
  b = tg_batch_norm1d_layer_new(2, 0, 0, true, true, f64);
  cr_assert_not_null(tg_module_forward(b, x2));
  tg_test_expect_values(tg_module_find(b, "running_mean"), 2, (const double[]){0, 0}, 0);
  cr_assert_eq(item(tg_module_find(b, "num_batches_tracked")), 1);
  /* eps 0 is zero too */
  tg_assert_close(tg_module_forward(b, x1),
                  tg_batch_norm(x1, NULL, NULL, NULL, NULL,
                                (tg_batch_norm_options){.training = true, .eps = TG_NORM_ZERO}),
                  0, 0);
  tg_module_free(b);
  /* without running statistics the batch's are used in evaluation as well */
  b = tg_batch_norm1d_layer_new(2, 1e-5, 0.1, true, false, f64);
  tg_tensor *x3 = tg_randn(TG_SHAPE(4, 2, 3), f64, g); /* [N, C, L] */
  tg_tensor *y_train = tg_module_forward(b, x3);
  tg_module_train(b, false);
  tg_assert_close(tg_module_forward(b, x3), y_train, 0, 0);
  tg_module_free(b);
  tg_generator_free(g);
}

TG_TEST(cnn_layers_norm, batch_norm_input_errors_change_nothing) {
  tg_module *b2 = tg_batch_norm2d_layer_new(3, 1e-5, 0.1, true, true, f64);
  cr_assert_null(tg_module_forward(b2, tg_zeros(TG_SHAPE(3, 4, 4), f64)));
  tg_expect_error(TG_ERR_SHAPE, "batch_norm2d", "expected 4D input (got 3D input");
  tg_module *b1 = tg_batch_norm1d_layer_new(3, 1e-5, 0.1, true, true, f64);
  cr_assert_null(tg_module_forward(b1, tg_zeros(TG_SHAPE(2, 3, 4, 4), f64)));
  tg_expect_error(TG_ERR_SHAPE, "batch_norm1d", "expected 2D or 3D input (got 4D input");
  /* one value per channel in training: refused by the op; no buffer changes */
  cr_assert_null(tg_module_forward(b2, tg_ones(TG_SHAPE(1, 3, 1, 1), f64)));
  cr_assert_eq(tg_last_error(), TG_ERR_SHAPE);
  tg_clear_error();
  cr_assert_eq(item(tg_module_find(b2, "num_batches_tracked")), 0);
  tg_test_expect_values(tg_module_find(b2, "running_var"), 3, (const double[]){1, 1, 1}, 0);
  /* the wrong number of channels: the op's error */
  cr_assert_null(tg_module_forward(b2, tg_ones(TG_SHAPE(2, 4, 2, 2), f64)));
  cr_assert_neq(tg_last_error(), TG_OK);
  tg_clear_error();
  cr_assert_eq(item(tg_module_find(b2, "num_batches_tracked")), 0);
  tg_module_free(b1);
  tg_module_free(b2);
}

TG_TEST(cnn_layers_norm, batch_norm_state_round_trip) {
  tg_generator *g = tg_generator_new(3);
  tg_module *a = tg_batch_norm2d_layer_new(2, 1e-5, 0.1, true, true, f64);
  tg_module *b = tg_batch_norm2d_layer_new(2, 1e-5, 0.1, true, true, f64);
  cr_assert_not_null(tg_module_forward(a, tg_randn(TG_SHAPE(3, 2, 2, 2), f64, g)));
  const char *path = "test_cnn_layers_norm_state.safetensors";
  cr_assert_eq(tg_module_save(a, path), TG_OK, "%s", tg_last_error_message());
  tg_load_report r;
  cr_assert_eq(tg_module_load(b, path, true, &r), TG_OK, "%s", tg_last_error_message());
  remove(path);
  cr_assert_eq(r.n_loaded, 5);
  cr_assert_eq(item(tg_module_find(b, "num_batches_tracked")), 1);
  tg_assert_close(tg_module_find(b, "running_mean"), tg_module_find(a, "running_mean"), 0, 0);
  tg_module_train(a, false);
  tg_module_train(b, false);
  tg_tensor *x = tg_randn(TG_SHAPE(2, 2, 3, 3), f64, g);
  tg_assert_close(tg_module_forward(b, x), tg_module_forward(a, x), 0, 0);
  tg_module_free(a);
  tg_module_free(b);
  tg_generator_free(g);
}

/* ---- LayerNorm, GroupNorm ---- */

TG_TEST(cnn_layers_norm, layer_norm_and_group_norm) {
  tg_generator *g = tg_generator_new(4);
  tg_tensor *x = tg_randn(TG_SHAPE(2, 6, 3, 4), f64, g);
  const int64_t shape[2] = {3, 4};
  tg_module *l = tg_layer_norm_layer_new(2, shape, 1e-4, true, f64);
  cr_assert_str_eq(tg_module_type(l), "layer_norm");
  expect_entries(l, 2, 2, (const char *const[]){"weight", "bias"});
  tg_assert_sizes(tg_module_find(l, "weight"), 3, 4);
  cr_assert_eq(tg_init_uniform_(tg_module_find(l, "weight"), 0, 1, g), TG_OK);
  tg_tensor *want = tg_layer_norm(x, 2, shape, tg_module_find(l, "weight"),
                                  tg_module_find(l, "bias"), (tg_layer_norm_options){.eps = 1e-4});
  tg_assert_close(tg_module_forward(l, x), want, 0, 0);
  tg_module_train(l, false);
  tg_assert_close(tg_module_forward(l, x), want, 0, 0);
  tg_module_free(l);
  l = tg_layer_norm_layer_new(1, (const int64_t[]){4}, 0, false, f64);
  expect_entries(l, 0, 0, NULL);
  tg_assert_close(tg_module_forward(l, x),
                  tg_layer_norm(x, 1, (const int64_t[]){4}, NULL, NULL,
                                (tg_layer_norm_options){.eps = TG_NORM_ZERO}),
                  0, 0);
  tg_module_free(l);

  tg_module *gn = tg_group_norm_layer_new(3, 6, 1e-5, true, f64);
  cr_assert_str_eq(tg_module_type(gn), "group_norm");
  expect_entries(gn, 2, 2, (const char *const[]){"weight", "bias"});
  tg_test_expect_values(tg_module_find(gn, "weight"), 6, (const double[]){1, 1, 1, 1, 1, 1}, 0);
  tg_test_expect_values(tg_module_find(gn, "bias"), 6, (const double[]){0, 0, 0, 0, 0, 0}, 0);
  cr_assert_eq(tg_init_uniform_(tg_module_find(gn, "bias"), -1, 1, g), TG_OK);
  want = tg_group_norm(x, 3, tg_module_find(gn, "weight"), tg_module_find(gn, "bias"),
                       (tg_group_norm_options){.eps = 1e-5});
  tg_assert_close(tg_module_forward(gn, x), want, 0, 0);
  tg_module_train(gn, false);
  tg_assert_close(tg_module_forward(gn, x), want, 0, 0);
  tg_module_free(gn);
  gn = tg_group_norm_layer_new(2, 6, 1e-5, false, f64);
  expect_entries(gn, 0, 0, NULL);
  tg_assert_close(tg_module_forward(gn, x),
                  tg_group_norm(x, 2, NULL, NULL, (tg_group_norm_options){.eps = 1e-5}), 0, 0);
  tg_module_free(gn);
  tg_generator_free(g);
}

/* ---- Dropout ---- */

TG_TEST(cnn_layers_norm, dropout_train_eval_and_seeded) {
  tg_tensor *x = tg_randn(TG_SHAPE(8, 50), f64, NULL);
  tg_generator *g1 = tg_generator_new(11), *g2 = tg_generator_new(11), *g3 = tg_generator_new(11);
  tg_module *d1 = tg_dropout_layer_new(0.3, g1), *d2 = tg_dropout_layer_new(0.3, g2);
  cr_assert_str_eq(tg_module_type(d1), "dropout");
  cr_assert_eq(tg_module_num_parameters(d1) + tg_module_num_buffers(d1), 0);
  tg_tensor *y1 = tg_module_forward(d1, x);
  /* the generator given at construction: a run seeded the same drops the same elements */
  tg_assert_close(tg_module_forward(d2, x), y1, 0, 0);
  tg_assert_close(y1, tg_dropout(x, 0.3, true, g3), 0, 0);
  int64_t zeros = 0;
  for (int64_t i = 0; i < 400; i++) {
    double y = tg_test_at(y1, i), v = tg_test_at(x, i);
    if (y == 0)
      zeros++;
    else
      cr_assert_float_eq(y, v / 0.7, 1e-12);
  }
  cr_assert(zeros > 60 && zeros < 180, "%lld of 400 dropped at p = 0.3", (long long)zeros);
  /* the next call draws a new mask */
  cr_assert_gt(tg_test_max_abs_diff(tg_module_forward(d1, x), y1), 0);
  /* evaluation: the input */
  tg_module_train(d1, false);
  tg_assert_close(tg_module_forward(d1, x), x, 0, 0);
  tg_module_free(d1);
  tg_module_free(d2);
  /* p = 0 keeps everything, p = 1 drops everything; NULL: the default generator */
  tg_module *d0 = tg_dropout_layer_new(0, NULL), *dall = tg_dropout_layer_new(1, NULL);
  tg_assert_close(tg_module_forward(d0, x), x, 0, 0);
  tg_assert_close(tg_module_forward(dall, x), tg_zeros(TG_SHAPE(8, 50), f64), 0, 0);
  tg_module_free(d0);
  tg_module_free(dall);
  tg_generator_free(g1);
  tg_generator_free(g2);
  tg_generator_free(g3);
}

/* ---- constructor errors ---- */

TG_TEST(cnn_layers_norm, constructor_errors) {
  cr_assert_null(tg_batch_norm2d_layer_new(0, 1e-5, 0.1, true, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_batch_norm2d_layer_new", "num_features (0) must be >= 1");
  cr_assert_null(tg_batch_norm1d_layer_new(2, -1e-5, 0.1, true, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_batch_norm1d_layer_new", "eps (-1e-05)");
  cr_assert_null(tg_batch_norm1d_layer_new(2, NAN, 0.1, true, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_batch_norm1d_layer_new", "eps (nan)");
  cr_assert_null(tg_batch_norm2d_layer_new(2, 1e-5, 1.5, true, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_batch_norm2d_layer_new", "momentum (1.5) must be in [0, 1]",
                  "TG_BATCH_NORM_CUMULATIVE");
  cr_assert_null(tg_batch_norm2d_layer_new(2, 1e-5, NAN, true, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "momentum (nan)");
  cr_assert_null(tg_batch_norm2d_layer_new(2, 1e-5, 0.1, true, true, TG_OPTS(.dtype = TG_I64)));
  tg_expect_error(TG_ERR_DTYPE, "tg_batch_norm2d_layer_new", "dtype int64 is not floating");
  cr_assert_null(tg_layer_norm_layer_new(0, (const int64_t[]){3}, 1e-5, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_layer_norm_layer_new", "n_normalized (0)");
  cr_assert_null(tg_layer_norm_layer_new(2, NULL, 1e-5, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_layer_norm_layer_new", "normalized_shape is NULL");
  cr_assert_null(tg_layer_norm_layer_new(2, (const int64_t[]){3, 0}, 1e-5, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_layer_norm_layer_new", "normalized_shape[1] (0)");
  cr_assert_null(tg_layer_norm_layer_new(1, (const int64_t[]){3}, INFINITY, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_layer_norm_layer_new", "eps (inf)");
  cr_assert_null(tg_group_norm_layer_new(4, 6, 1e-5, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_group_norm_layer_new",
                  "num_channels (6) must be divisible by num_groups (4)");
  cr_assert_null(tg_group_norm_layer_new(0, 6, 1e-5, true, f64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_group_norm_layer_new", "num_groups (0)");
  cr_assert_null(tg_dropout_layer_new(1.5, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_dropout_layer_new", "p (1.5)", "[0, 1]");
  cr_assert_null(tg_dropout_layer_new(-0.1, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_dropout_layer_new", "p (-0.1)");
  cr_assert_null(tg_dropout_layer_new(NAN, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_dropout_layer_new", "p (nan)");
}

/* ---- allocation failures ---- */

/* Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d -> GroupNorm -> LayerNorm -> Flatten -> Dropout
 * -> Linear -> BatchNorm1d: a training step (forward, backward) and an evaluation forward. */
static tg_status cnn_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_generator *g = tg_generator_new(3);
  tg_module *seq = g ? tg_sequential_new() : NULL;
  tg_status st = status_of(seq);
  for (int i = 0; st == TG_OK && i < 10; i++) {
    tg_module *child =
        i == 0   ? tg_conv2d_layer_module(tg_conv2d_layer_new(2, 4, (const int64_t[]){3, 3},
                                                              &(tg_conv2d_opts){.padding = {1, 1}},
                                                              true, f64, g))
        : i == 1 ? tg_batch_norm2d_layer_new(4, 1e-5, 0.1, true, true, f64)
        : i == 2 ? tg_relu_layer_new()
        : i == 3 ? tg_max_pool2d_layer_new((const int64_t[]){2, 2},
                                           (tg_max_pool2d_options){.ceil_mode = false})
        : i == 4 ? tg_group_norm_layer_new(2, 4, 1e-5, true, f64)
        : i == 5 ? tg_layer_norm_layer_new(2, (const int64_t[]){2, 2}, 1e-5, true, f64)
        : i == 6 ? tg_flatten_layer_new(1, -1)
        : i == 7 ? tg_dropout_layer_new(0.25, g)
        : i == 8 ? tg_linear_module(tg_linear_new(16, 3, true, f64, g))
                 : tg_batch_norm1d_layer_new(3, 1e-5, TG_BATCH_NORM_CUMULATIVE, true, true, f64);
    st = status_of(child);
    if (st == TG_OK) st = clean(tg_sequential_append(seq, child, NULL));
    if (st != TG_OK) tg_module_free(child);
  }
  tg_tensor *x = st == TG_OK ? tg_randn(TG_SHAPE(3, 2, 4, 4), f64, g) : NULL;
  tg_tensor *y = x ? tg_module_forward(seq, x) : NULL;
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(seq); i++)
    st = append(tg_grad(tg_module_parameter(seq, i, NULL)), out, n_out);
  for (int i = 0; st == TG_OK && i < tg_module_num_buffers(seq); i++)
    st = append(tg_module_buffer(seq, i, NULL), out, n_out);
  if (st == TG_OK) tg_module_train(seq, false);
  tg_tensor *z = st == TG_OK ? tg_module_forward(seq, x) : NULL;
  if (st == TG_OK) st = status_of(z);
  if (st == TG_OK) st = append(z, out, n_out);
  tg_module_free(seq);
  tg_generator_free(g);
  return st;
}

TG_TEST(cnn_layers_norm, alloc_failure_cnn_train_and_eval) {
  cr_assert_gt(sweep("CNN with norms and dropout: train step, eval forward", cnn_step, NULL).failed,
               0);
}
