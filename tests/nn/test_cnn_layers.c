/* The convolution and pooling layers (torch.nn.Conv1d, Conv2d, MaxPool2d, AvgPool2d,
 * AdaptiveAvgPool2d): PyTorch's parameter names and default init, forward equal to the op,
 * train and eval alike, constructor errors naming the argument, a Sequential CNN's state
 * round trip, and an allocation-failure sweep over building, forward and backward. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};
static const tg_max_pool2d_options max_defaults; /* zeroed: PyTorch's defaults */
static const tg_avg_pool2d_options avg_defaults;

static void expect_names(tg_module *m, int n, const char *const *names) {
  cr_assert_eq(tg_module_num_parameters(m) + tg_module_num_buffers(m), n);
  tg_tensor_dict *state = tg_module_state_dict(m);
  cr_assert_not_null(state, "%s", tg_last_error_message());
  for (int i = 0; i < n; i++)
    cr_assert_not_null(tg_tensor_dict_get(state, names[i]), "no entry %s", names[i]);
  tg_tensor_dict_free(state);
}

/* ---- Conv2d, Conv1d ---- */

TG_TEST(cnn_layers, conv2d_names_shapes_and_forward) {
  tg_generator *g = tg_generator_new(1);
  tg_conv2d_opts o = {.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2};
  tg_conv2d_layer *c = tg_conv2d_layer_new(4, 6, (const int64_t[]){3, 2}, &o, true, f64, g);
  cr_assert_not_null(c, "%s", tg_last_error_message());
  tg_module *m = tg_conv2d_layer_module(c);
  cr_assert_str_eq(tg_module_type(m), "conv2d");
  expect_names(m, 2, (const char *const[]){"weight", "bias"});
  cr_assert(tg_module_find(m, "weight") == tg_conv2d_layer_weight(c));
  tg_assert_sizes(tg_conv2d_layer_weight(c), 6, 2, 3, 2);
  tg_assert_sizes(tg_conv2d_layer_bias(c), 6);
  cr_assert(tg_requires_grad(tg_conv2d_layer_weight(c)) && tg_is_leaf(tg_conv2d_layer_bias(c)));
  tg_tensor *x = tg_randn(TG_SHAPE(2, 4, 7, 6), f64, g);
  tg_tensor *want = tg_conv2d(x, tg_conv2d_layer_weight(c), tg_conv2d_layer_bias(c), &o);
  tg_assert_close(tg_module_forward(m, x), want, 0, 0);
  tg_module_train(m, false); /* the same in evaluation */
  tg_assert_close(tg_module_forward(m, x), want, 0, 0);
  /* unbatched, as the op */
  tg_tensor *x3 = tg_select(x, 0, 1);
  tg_assert_close(tg_module_forward(m, x3), tg_select(want, 0, 1), 0, 0);
  /* gradients reach both parameters */
  cr_assert_eq(tg_backward(tg_sum(tg_module_forward(m, x)), NULL), TG_OK);
  cr_assert_not_null(tg_grad(tg_conv2d_layer_weight(c)));
  cr_assert_not_null(tg_grad(tg_conv2d_layer_bias(c)));
  /* the op's shape errors come through */
  cr_assert_null(tg_module_forward(m, tg_zeros(TG_SHAPE(2, 3, 7, 6), f64)));
  cr_assert_neq(tg_last_error(), TG_OK);
  cr_assert(strstr(tg_last_error_message(), "tg_conv2d") != NULL, "%s", tg_last_error_message());
  tg_clear_error();
  tg_conv2d_layer_free(c);
  tg_generator_free(g);
}

TG_TEST(cnn_layers, conv2d_padding_same_valid_and_no_bias) {
  tg_conv2d_opts same = {.padding_mode = TG_CONV_PADDING_SAME, .dilation = {2, 1}};
  tg_conv2d_layer *c = tg_conv2d_layer_new(3, 5, (const int64_t[]){3, 4}, &same, false, f64, NULL);
  cr_assert_not_null(c, "%s", tg_last_error_message());
  cr_assert_null(tg_conv2d_layer_bias(c));
  expect_names(tg_conv2d_layer_module(c), 1, (const char *const[]){"weight"});
  tg_tensor *x = tg_randn(TG_SHAPE(2, 3, 8, 9), f64, NULL);
  tg_tensor *y = tg_module_forward(tg_conv2d_layer_module(c), x);
  tg_assert_sizes(y, 2, 5, 8, 9);
  tg_assert_close(y, tg_conv2d(x, tg_conv2d_layer_weight(c), NULL, &same), 0, 0);
  tg_conv2d_layer_free(c);
  tg_conv2d_opts valid = {.padding_mode = TG_CONV_PADDING_VALID};
  c = tg_conv2d_layer_new(3, 5, (const int64_t[]){3, 4}, &valid, true, f64, NULL);
  tg_assert_sizes(tg_module_forward(tg_conv2d_layer_module(c), x), 2, 5, 6, 6);
  tg_conv2d_layer_free(c);
  c = tg_conv2d_layer_new(3, 5, (const int64_t[]){1, 1}, NULL, true, f64, NULL); /* defaults */
  tg_assert_sizes(tg_module_forward(tg_conv2d_layer_module(c), x), 2, 5, 8, 9);
  tg_conv2d_layer_free(c);
}

TG_TEST(cnn_layers, conv1d_names_shapes_and_forward) {
  tg_generator *g = tg_generator_new(2);
  tg_conv1d_opts o = {.stride = 2, .padding = 1, .dilation = 2, .groups = 3};
  tg_conv1d_layer *c = tg_conv1d_layer_new(3, 6, 3, &o, true, f64, g);
  cr_assert_not_null(c, "%s", tg_last_error_message());
  tg_module *m = tg_conv1d_layer_module(c);
  cr_assert_str_eq(tg_module_type(m), "conv1d");
  expect_names(m, 2, (const char *const[]){"weight", "bias"});
  tg_assert_sizes(tg_conv1d_layer_weight(c), 6, 1, 3);
  tg_assert_sizes(tg_conv1d_layer_bias(c), 6);
  tg_tensor *x = tg_randn(TG_SHAPE(4, 3, 11), f64, g);
  tg_assert_close(tg_module_forward(m, x),
                  tg_conv1d(x, tg_conv1d_layer_weight(c), tg_conv1d_layer_bias(c), &o), 0, 0);
  tg_conv1d_opts same = {.padding_mode = TG_CONV_PADDING_SAME};
  tg_conv1d_layer *s = tg_conv1d_layer_new(3, 2, 4, &same, false, f64, g);
  cr_assert_null(tg_conv1d_layer_bias(s));
  tg_assert_sizes(tg_module_forward(tg_conv1d_layer_module(s), x), 4, 2, 11);
  tg_conv1d_layer_free(s);
  tg_conv1d_layer_free(c);
  tg_generator_free(g);
}

/* max |t|, the mean and the variance of t's elements (F64) */
static void moments(const tg_tensor *t, double *max_abs, double *mean, double *var) {
  int64_t n = tg_numel(t);
  double *v = malloc(sizeof(double) * (size_t)n);
  cr_assert_eq(tg_to_host_array(t, v, sizeof(double) * (size_t)n), TG_OK);
  double s = 0, s2 = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    s += v[i];
    s2 += v[i] * v[i];
    m = fmax(m, fabs(v[i]));
  }
  free(v);
  *max_abs = m;
  *mean = s / (double)n;
  *var = s2 / (double)n - *mean * *mean;
}

/* weight ~ kaiming_uniform(a = sqrt(5)) = uniform(+-gain * sqrt(3 / fan_in)) with
 * gain = sqrt(2 / (1 + 5)); bias ~ uniform(+-1 / sqrt(fan_in)): torch.nn.Conv2d's
 * reset_parameters, fan_in = in / groups * kh * kw. */
static void expect_uniform(const tg_tensor *t, double bound) {
  double max_abs, mean, var;
  moments(t, &max_abs, &mean, &var);
  double n = (double)tg_numel(t), sd = bound / sqrt(3.0);
  cr_assert_leq(max_abs, bound, "max %.17g beyond the bound %.17g", max_abs, bound);
  cr_assert_geq(max_abs, bound * (1 - 20 / n), "max %.17g far below the bound %.17g", max_abs,
                bound);
  cr_assert_leq(fabs(mean), 5 * sd / sqrt(n), "mean %g for a bound %g", mean, bound);
  cr_assert_leq(fabs(var / (sd * sd) - 1), 5 * sqrt(0.8 / n), "variance %g, want %g", var, sd * sd);
}

TG_TEST(cnn_layers, conv_default_init_is_torchs) {
  tg_generator *g = tg_generator_new(3);
  tg_conv2d_opts groups = {.groups = 4};
  tg_conv2d_layer *c = tg_conv2d_layer_new(32, 64, (const int64_t[]){3, 5}, &groups, true, f64, g);
  double fan_in = 32 / 4 * 3 * 5;
  expect_uniform(tg_conv2d_layer_weight(c), sqrt(2.0 / 6.0) * sqrt(3.0 / fan_in));
  tg_conv1d_layer *c1 = tg_conv1d_layer_new(40, 4000, 3, NULL, true, f64, g);
  expect_uniform(tg_conv1d_layer_weight(c1), 1 / sqrt(120.0));
  expect_uniform(tg_conv1d_layer_bias(c1), 1 / sqrt(120.0));
  tg_conv1d_layer_free(c1);
  /* the draws are init's, in PyTorch's order: the weight, then the bias */
  tg_generator *g2 = tg_generator_new(9), *g3 = tg_generator_new(9);
  tg_conv2d_opts two = {.groups = 2};
  tg_conv2d_layer *d = tg_conv2d_layer_new(8, 2, (const int64_t[]){2, 2}, &two, true, f64, g2);
  tg_tensor *w = tg_zeros(TG_SHAPE(2, 4, 2, 2), f64), *b = tg_zeros(TG_SHAPE(2), f64);
  cr_assert_eq(tg_init_kaiming_uniform_(w, sqrt(5.0), TG_FAN_IN, TG_NL_LEAKY_RELU, g3), TG_OK);
  cr_assert_eq(tg_init_uniform_(b, -1 / sqrt(16.0), 1 / sqrt(16.0), g3), TG_OK);
  tg_assert_close(tg_conv2d_layer_weight(d), w, 0, 0);
  tg_assert_close(tg_conv2d_layer_bias(d), b, 0, 0);
  tg_conv2d_layer_free(d);
  tg_conv2d_layer_free(c);
  tg_generator_free(g3);
  tg_generator_free(g2);
  tg_generator_free(g);
}

TG_TEST(cnn_layers, conv_bias_bound_of_a_large_layer) {
  tg_conv2d_layer *c = tg_conv2d_layer_new(2, 6000, (const int64_t[]){2, 3}, NULL, true, f64, NULL);
  expect_uniform(tg_conv2d_layer_bias(c), 1 / sqrt(12.0));
  expect_uniform(tg_conv2d_layer_weight(c), 1 / sqrt(12.0));
  tg_conv2d_layer_free(c);
}

TG_TEST(cnn_layers, conv_constructor_errors) {
  const int64_t k3[2] = {3, 3};
  cr_assert_null(tg_conv2d_layer_new(0, 4, k3, NULL, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new", "in_channels (0)");
  cr_assert_null(tg_conv2d_layer_new(4, -1, k3, NULL, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new", "out_channels (-1)");
  cr_assert_null(tg_conv2d_layer_new(4, 4, (const int64_t[]){3, 0}, NULL, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new", "kernel_size[1] (0) must be >= 1");
  cr_assert_null(tg_conv2d_layer_new(4, 4, NULL, NULL, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new", "kernel_size is NULL");
  cr_assert_null(
      tg_conv2d_layer_new(4, 4, k3, &(tg_conv2d_opts){.stride = {1, -2}}, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new", "stride[1] (-2)");
  cr_assert_null(
      tg_conv2d_layer_new(4, 4, k3, &(tg_conv2d_opts){.padding = {-1, 0}}, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new", "padding[0] (-1)");
  cr_assert_null(
      tg_conv2d_layer_new(4, 4, k3, &(tg_conv2d_opts){.dilation = {-1, 1}}, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new", "dilation[0] (-1)");
  cr_assert_null(tg_conv2d_layer_new(4, 6, k3, &(tg_conv2d_opts){.groups = 4}, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new",
                  "groups (4) must divide in_channels (4) and out_channels (6)");
  cr_assert_null(tg_conv2d_layer_new(4, 4, k3, &(tg_conv2d_opts){.groups = -2}, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new", "groups (-2)");
  cr_assert_null(tg_conv2d_layer_new(
      4, 4, k3, &(tg_conv2d_opts){.stride = {1, 2}, .padding_mode = TG_CONV_PADDING_SAME}, true,
      f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new", "padding \"same\"",
                  "strided convolutions", "stride[1] 2");
  cr_assert_null(
      tg_conv2d_layer_new(4, 4, k3, &(tg_conv2d_opts){.padding_mode = 7}, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_layer_new", "padding_mode (7)");
  cr_assert_null(tg_conv2d_layer_new(4, 4, k3, NULL, true, TG_OPTS(.dtype = TG_I64), NULL));
  tg_expect_error(TG_ERR_DTYPE, "tg_conv2d_layer_new", "dtype int64 is not floating");
  cr_assert_null(tg_conv1d_layer_new(4, 4, 0, NULL, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv1d_layer_new", "kernel_size (0) must be >= 1");
  cr_assert_null(tg_conv1d_layer_new(3, 4, 2, &(tg_conv1d_opts){.groups = 2}, true, f64, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv1d_layer_new", "groups (2) must divide in_channels (3)");
  cr_assert_null(tg_conv1d_layer_new(
      3, 4, 2, &(tg_conv1d_opts){.stride = 3, .padding_mode = TG_CONV_PADDING_SAME}, true, f64,
      NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv1d_layer_new", "stride 3");
  /* freeing a layer that belongs to a parent is refused */
  tg_conv2d_layer *c = tg_conv2d_layer_new(1, 1, k3, NULL, true, f64, NULL);
  tg_module *seq = tg_sequential_new();
  cr_assert_eq(tg_sequential_append(seq, tg_conv2d_layer_module(c), NULL), TG_OK);
  tg_conv2d_layer_free(c);
  tg_expect_error(TG_ERR_STATE, "tg_conv2d_layer_free", "belongs to a sequential module");
  tg_module_free(seq);
}

/* ---- the pooling layers ---- */

TG_TEST(cnn_layers, pools_forward_equal_the_ops) {
  tg_tensor *x = tg_randn(TG_SHAPE(2, 3, 9, 8), f64, NULL);
  const int64_t k[2] = {3, 2};
  tg_max_pool2d_options mo = {
      .stride = {2, 1}, .padding = {1, 1}, .dilation = {1, 2}, .ceil_mode = true};
  tg_avg_pool2d_options ao = {.padding = {1, 0}, .ceil_mode = true, .exclude_padding = true};
  struct {
    tg_module *m;
    const char *type;
    tg_tensor *want;
  } cases[] = {
      {tg_max_pool2d_layer_new(k, mo), "max_pool2d", tg_max_pool2d(x, k, mo)},
      {tg_max_pool2d_layer_new(k, max_defaults), "max_pool2d", tg_max_pool2d(x, k, max_defaults)},
      {tg_avg_pool2d_layer_new(k, ao), "avg_pool2d", tg_avg_pool2d(x, k, ao)},
      {tg_avg_pool2d_layer_new(k, (tg_avg_pool2d_options){.divisor_override = 5}), "avg_pool2d",
       tg_avg_pool2d(x, k, (tg_avg_pool2d_options){.divisor_override = 5})},
      {tg_adaptive_avg_pool2d_layer_new((const int64_t[]){4, 3}), "adaptive_avg_pool2d",
       tg_adaptive_avg_pool2d(x, (const int64_t[]){4, 3})},
      {tg_adaptive_avg_pool2d_layer_new((const int64_t[]){-1, 2}), "adaptive_avg_pool2d",
       tg_adaptive_avg_pool2d(x, (const int64_t[]){9, 2})},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cr_assert_not_null(cases[i].m, "%s", tg_last_error_message());
    cr_assert_str_eq(tg_module_type(cases[i].m), cases[i].type);
    cr_assert_eq(tg_module_num_parameters(cases[i].m) + tg_module_num_buffers(cases[i].m), 0);
    tg_assert_close(tg_module_forward(cases[i].m, x), cases[i].want, 0, 0);
    tg_module_train(cases[i].m, false);
    tg_assert_close(tg_module_forward(cases[i].m, x), cases[i].want, 0, 0);
    tg_module_free(cases[i].m);
  }
  /* the adaptive pool's -1 follows each input */
  tg_module *a = tg_adaptive_avg_pool2d_layer_new((const int64_t[]){1, -1});
  tg_assert_sizes(tg_module_forward(a, tg_zeros(TG_SHAPE(3, 5, 7), f64)), 3, 1, 7);
  tg_module_free(a);
}

TG_TEST(cnn_layers, pool_constructor_errors) {
  cr_assert_null(tg_max_pool2d_layer_new((const int64_t[]){0, 2}, max_defaults));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d_layer_new", "kernel_size[0] (0) must be >= 1");
  cr_assert_null(tg_max_pool2d_layer_new(NULL, max_defaults));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d_layer_new", "kernel_size is NULL");
  cr_assert_null(
      tg_max_pool2d_layer_new((const int64_t[]){2, 2}, (tg_max_pool2d_options){.stride = {-1, 1}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d_layer_new", "stride[0] (-1)");
  cr_assert_null(
      tg_max_pool2d_layer_new((const int64_t[]){2, 2}, (tg_max_pool2d_options){.stride = {0, 1}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d_layer_new", "stride {0, 1} has one 0");
  cr_assert_null(tg_max_pool2d_layer_new((const int64_t[]){2, 2},
                                         (tg_max_pool2d_options){.dilation = {2, 0}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d_layer_new", "dilation {2, 0} has one 0");
  cr_assert_null(
      tg_max_pool2d_layer_new((const int64_t[]){3, 3}, (tg_max_pool2d_options){.padding = {0, 2}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d_layer_new", "padding[1] (2)",
                  "at most half the kernel size (3)");
  cr_assert_null(tg_avg_pool2d_layer_new((const int64_t[]){2, 2},
                                         (tg_avg_pool2d_options){.padding = {-1, 0}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_avg_pool2d_layer_new", "padding[0] (-1)");
  cr_assert_null(tg_avg_pool2d_layer_new((const int64_t[]){2, 2},
                                         (tg_avg_pool2d_options){.divisor_override = -3}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_avg_pool2d_layer_new", "divisor_override (-3)");
  cr_assert_null(tg_adaptive_avg_pool2d_layer_new((const int64_t[]){2, -2}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adaptive_avg_pool2d_layer_new", "output_size[1] (-2)");
  cr_assert_null(tg_adaptive_avg_pool2d_layer_new(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adaptive_avg_pool2d_layer_new", "output_size is NULL");
  /* what depends on the input is the op's error, named by the Sequential */
  tg_module *seq = tg_sequential_new();
  cr_assert_eq(tg_sequential_append(
                   seq, tg_max_pool2d_layer_new((const int64_t[]){5, 5}, max_defaults), NULL),
               TG_OK);
  cr_assert_null(tg_module_forward(seq, tg_zeros(TG_SHAPE(1, 1, 3, 3), f64)));
  cr_assert(strstr(tg_last_error_message(), "sequential child \"0\" (max_pool2d): tg_max_pool2d") !=
                NULL,
            "%s", tg_last_error_message());
  tg_clear_error();
  tg_module_free(seq);
}

/* ---- a CNN in a Sequential ---- */

/* Conv2d(2, 4, 3, padding 1) -> ReLU -> MaxPool2d(2) -> Conv1d-free tail: AvgPool2d(2) ->
 * AdaptiveAvgPool2d(1, 1) -> Flatten -> Linear(4, 3); NULL (no assertion) on failure. */
static tg_module *small_cnn(tg_generator *g) {
  tg_module *seq = tg_sequential_new();
  tg_status st = seq ? TG_OK : tg_last_error();
  for (int i = 0; st == TG_OK && i < 7; i++) {
    tg_module *child = i == 0   ? tg_conv2d_layer_module(tg_conv2d_layer_new(
                                      2, 4, (const int64_t[]){3, 3},
                                      &(tg_conv2d_opts){.padding = {1, 1}}, true, f64, g))
                       : i == 1 ? tg_relu_layer_new()
                       : i == 2 ? tg_max_pool2d_layer_new((const int64_t[]){2, 2}, max_defaults)
                       : i == 3 ? tg_avg_pool2d_layer_new((const int64_t[]){2, 2}, avg_defaults)
                       : i == 4 ? tg_adaptive_avg_pool2d_layer_new((const int64_t[]){1, 1})
                       : i == 5 ? tg_flatten_layer_new(1, -1)
                                : tg_linear_module(tg_linear_new(4, 3, true, f64, g));
    st = child ? tg_sequential_append(seq, child, NULL) : tg_last_error();
    if (st != TG_OK) tg_module_free(child);
  }
  if (st != TG_OK) {
    tg_module_free(seq);
    return NULL;
  }
  return seq;
}

TG_TEST(cnn_layers, sequential_cnn_state_round_trip) {
  tg_generator *g = tg_generator_new(5);
  tg_module *a = small_cnn(g), *b = small_cnn(g);
  cr_assert(a && b, "%s", tg_last_error_message());
  expect_names(a, 4, (const char *const[]){"0.weight", "0.bias", "6.weight", "6.bias"});
  const char *path = "test_cnn_layers_state.safetensors";
  cr_assert_eq(tg_module_save(a, path), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_module_load(b, path, true, NULL), TG_OK, "%s", tg_last_error_message());
  remove(path);
  tg_tensor *x = tg_randn(TG_SHAPE(3, 2, 8, 8), f64, g);
  tg_tensor *y = tg_module_forward(b, x);
  tg_assert_sizes(y, 3, 3);
  tg_assert_close(y, tg_module_forward(a, x), 0, 0);
  /* moving to the CPU (the device it is on) keeps every tensor object */
  tg_tensor *w = tg_module_find(b, "0.weight");
  cr_assert_eq(tg_module_to_device(b, TG_DEVICE_CPU), TG_OK);
  cr_assert(tg_module_find(b, "0.weight") == w);
  tg_module_free(a);
  tg_module_free(b);
  tg_generator_free(g);
}

/* ---- allocation failures ---- */

static tg_status cnn_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_generator *g = tg_generator_new(3);
  tg_module *seq = g ? small_cnn(g) : NULL;
  tg_status st = status_of(seq);
  tg_module *c1 = NULL;
  if (st == TG_OK) {
    c1 = tg_conv1d_layer_module(
        tg_conv1d_layer_new(2, 2, 3, &(tg_conv1d_opts){.groups = 2}, true, f64, g));
    st = status_of(c1);
  }
  tg_tensor *x = st == TG_OK ? tg_randn(TG_SHAPE(2, 2, 6, 6), f64, g) : NULL;
  tg_tensor *y = x ? tg_module_forward(seq, x) : NULL;
  if (st == TG_OK) st = status_of(y);
  tg_tensor *z = st == TG_OK ? tg_module_forward(c1, tg_select(x, 2, 0)) : NULL;
  if (st == TG_OK) st = status_of(z);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = append(z, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_add(tg_sum(y), tg_sum(z)), NULL));
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(seq); i++)
    st = append(tg_grad(tg_module_parameter(seq, i, NULL)), out, n_out);
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(c1); i++)
    st = append(tg_grad(tg_module_parameter(c1, i, NULL)), out, n_out);
  tg_module_free(c1);
  tg_module_free(seq);
  tg_generator_free(g);
  return st;
}

TG_TEST(cnn_layers, alloc_failure_conv_and_pools) {
  cr_assert_gt(sweep("Conv2d, pools, Conv1d: build, forward, backward", cnn_step, NULL).failed, 0);
}
