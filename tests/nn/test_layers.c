/* nn layers as modules: the generic forward (tg_module_forward, tg_module_set_forward),
 * Sequential (order, PyTorch's state dict names, ownership), Flatten and the activations,
 * errors and an allocation-failure sweep over building, forward and backward. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};

static tg_module *linear(int64_t in, int64_t out, tg_generator *gen) {
  tg_linear *l = tg_linear_new(in, out, true, f64, gen);
  cr_assert_not_null(l, "%s", tg_last_error_message());
  return tg_linear_module(l);
}

static void push(tg_module *seq, tg_module *child, const char *name) {
  cr_assert_not_null(child, "%s", tg_last_error_message());
  cr_assert_eq(tg_sequential_append(seq, child, name), TG_OK, "%s", tg_last_error_message());
}

/* ---- the generic forward ---- */

TG_TEST(layers, forward_of_linear_and_embedding) {
  tg_generator *g = tg_generator_new(1);
  tg_linear *l = tg_linear_new(4, 3, true, f64, g);
  tg_embedding_layer *e = tg_embedding_layer_new(10, 2, f64, g);
  tg_tensor *x = tg_randn(TG_SHAPE(5, 4), f64, g);
  tg_assert_close(tg_module_forward(tg_linear_module(l), x), tg_linear_forward(l, x), 0, 0);
  tg_tensor *idx = tg_test_tensor_of(TG_I64, TG_SHAPE(2, 2), (const double[]){1, 9, 0, 1});
  tg_tensor *y = tg_module_forward(tg_embedding_layer_module(e), idx);
  tg_assert_sizes(y, 2, 2, 2);
  tg_assert_close(y, tg_embedding_layer_forward(e, idx), 0, 0);
  /* the layer's own checks come through */
  cr_assert_null(tg_module_forward(tg_linear_module(l), tg_randn(TG_SHAPE(5, 3), f64, g)));
  tg_expect_error(TG_ERR_SHAPE, "tg_linear_forward", "x is [5, 3]", "[batch, 4]");
  tg_linear_free(l);
  tg_embedding_layer_free(e);
  tg_generator_free(g);
}

TG_TEST(layers, forward_unsupported_and_bad_arguments) {
  tg_lltm_cell *cell = tg_lltm_cell_new(2, 3, f64, NULL);
  tg_tensor *x = tg_zeros(TG_SHAPE(1, 2), f64);
  cr_assert_null(tg_module_forward(tg_lltm_cell_module(cell), x));
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_module_forward", "a lltm_cell module has no one-tensor",
                  "takes other arguments");
  tg_module *model = tg_module_new("charlm");
  cr_assert_null(tg_module_forward(model, x));
  tg_expect_error(TG_ERR_UNSUPPORTED, "a charlm module", "tg_module_set_forward");
  cr_assert_null(tg_module_forward(NULL, x));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_forward", "m is NULL");
  cr_assert_null(tg_module_forward(model, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_forward", "x is NULL");
  tg_module_free(model);
  tg_lltm_cell_free(cell);
}

/* A layer of one's own: y = x * scale (a parameter), counting calls in user. */
static tg_tensor *scale_forward(tg_module *m, const tg_tensor *x, void *user) {
  (*(int *)user)++;
  return tg_mul(x, tg_module_find(m, "scale"));
}

static tg_tensor *null_forward(tg_module *m, const tg_tensor *x, void *user) {
  (void)m, (void)x, (void)user;
  return NULL;
}

TG_TEST(layers, set_forward_on_a_module_of_ones_own) {
  int calls = 0;
  tg_module *m = tg_module_new("scaler");
  cr_assert_eq(tg_module_register_parameter(m, "scale", tg_full(TG_SHAPE(1), 3.0, f64)), TG_OK);
  cr_assert_eq(tg_module_set_forward(m, scale_forward, &calls), TG_OK);
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(2), (const double[]){1, -2});
  tg_test_expect_values(tg_module_forward(m, x), 2, (const double[]){3, -6}, 0);
  cr_assert_eq(calls, 1);
  /* in a Sequential, where it is a child like any layer */
  tg_module *seq = tg_sequential_new();
  push(seq, m, NULL);
  push(seq, tg_relu_layer_new(), NULL);
  tg_test_expect_values(tg_module_forward(seq, x), 2, (const double[]){3, 0}, 0);
  cr_assert_eq(calls, 2);
  /* a forward that fails without saying why is reported, not passed on as a bare NULL */
  cr_assert_eq(tg_module_set_forward(m, null_forward, NULL), TG_OK);
  cr_assert_null(tg_module_forward(m, x));
  tg_expect_error(TG_ERR_STATE, "the forward of the scaler module returned NULL without an error");
  cr_assert_eq(tg_module_set_forward(m, NULL, NULL), TG_OK); /* removed */
  cr_assert_null(tg_module_forward(m, x));
  tg_expect_error(TG_ERR_UNSUPPORTED, "a scaler module");
  /* built-in layers keep their own */
  tg_linear *l = tg_linear_new(2, 2, false, f64, NULL);
  cr_assert_eq(tg_module_set_forward(tg_linear_module(l), scale_forward, &calls), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_set_forward", "a linear module is a built-in layer");
  cr_assert_eq(tg_module_set_forward(NULL, scale_forward, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "m is NULL");
  tg_linear_free(l);
  tg_module_free(seq);
}

/* ---- Sequential ---- */

TG_TEST(layers, sequential_runs_children_in_order_with_torch_names) {
  tg_generator *g = tg_generator_new(4);
  tg_module *seq = tg_sequential_new();
  cr_assert_str_eq(tg_module_type(seq), "sequential");
  push(seq, linear(4, 8, g), NULL);
  push(seq, tg_relu_layer_new(), NULL);
  push(seq, linear(8, 3, g), NULL);
  push(seq, tg_tanh_layer_new(), NULL);
  static const char *const names[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
  cr_assert_eq(tg_module_num_parameters(seq), 4);
  for (int i = 0; i < 4; i++) {
    const char *name;
    tg_module_parameter(seq, i, &name);
    cr_assert_str_eq(name, names[i]);
  }
  const char *child_name;
  cr_assert_str_eq(tg_module_type(tg_module_child_at(seq, 1, &child_name)), "relu");
  cr_assert_str_eq(child_name, "1");
  /* forward = the children by hand, in order; gradients reach every parameter */
  tg_tensor *x = tg_randn(TG_SHAPE(5, 4), f64, g);
  tg_tensor *y = tg_module_forward(seq, x);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_tensor *h = tg_relu(
      tg_addmm(tg_module_find(seq, "0.bias"), x, tg_t(tg_module_find(seq, "0.weight")), 1, 1));
  tg_tensor *want = tg_tanh(
      tg_addmm(tg_module_find(seq, "2.bias"), h, tg_t(tg_module_find(seq, "2.weight")), 1, 1));
  tg_assert_close(y, want, 0, 0);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK);
  for (int i = 0; i < 4; i++) cr_assert_not_null(tg_grad(tg_module_parameter(seq, i, NULL)));
  tg_module_free(seq);
  tg_generator_free(g);
}

TG_TEST(layers, sequential_names_nesting_and_modes) {
  tg_module *inner = tg_sequential_new();
  push(inner, tg_sigmoid_layer_new(), "act");
  push(inner, linear(2, 2, NULL), NULL); /* the position: "1" */
  tg_module *seq = tg_sequential_new();
  push(seq, linear(3, 2, NULL), "fc");
  push(seq, inner, NULL);
  static const char *const names[] = {"fc.weight", "fc.bias", "1.1.weight", "1.1.bias"};
  for (int i = 0; i < 4; i++) {
    const char *name;
    tg_module_parameter(seq, i, &name);
    cr_assert_str_eq(name, names[i]);
  }
  tg_module_train(seq, false);
  cr_assert(!tg_module_is_training(tg_module_child(inner, "act")));
  tg_module_train(seq, true);
  cr_assert(tg_module_is_training(tg_module_child(inner, "1")));
  tg_assert_sizes(tg_module_forward(seq, tg_zeros(TG_SHAPE(4, 3), f64)), 4, 2);
  tg_module_free(seq);
}

TG_TEST(layers, empty_sequential_returns_its_input) {
  tg_module *seq = tg_sequential_new();
  tg_tensor *x = tg_randn(TG_SHAPE(2, 3), f64, NULL);
  tg_tensor *y = tg_module_forward(seq, x);
  cr_assert_eq(y, x); /* torch.nn.Sequential() returns the input itself */
  tg_module_free(seq);
}

TG_TEST(layers, sequential_errors) {
  tg_module *seq = tg_sequential_new();
  push(seq, tg_relu_layer_new(), NULL);
  /* a child without a one-tensor forward: refused, still the caller's */
  tg_lltm_cell *cell = tg_lltm_cell_new(2, 2, f64, NULL);
  cr_assert_eq(tg_sequential_append(seq, tg_lltm_cell_module(cell), NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sequential_append", "child 1 (a lltm_cell module)",
                  "no one-tensor forward");
  tg_lltm_cell_free(cell);
  tg_module *plain = tg_module_new("model");
  cr_assert_eq(tg_sequential_append(seq, plain, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "a model module");
  /* appending to what is not a Sequential */
  tg_module *loose = tg_relu_layer_new();
  cr_assert_eq(tg_sequential_append(plain, loose, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sequential_append", "seq is a model module");
  tg_module_free(loose);
  cr_assert_eq(tg_sequential_append(NULL, plain, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "seq is NULL");
  cr_assert_eq(tg_sequential_append(seq, NULL, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "child is NULL");
  /* names: taken, bad; a child with a parent already */
  tg_module *relu = tg_relu_layer_new();
  cr_assert_eq(tg_sequential_append(seq, relu, "0"), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sequential_append",
                  "already has a child module named \"0\"");
  cr_assert_eq(tg_sequential_append(seq, relu, "a.b"), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "has '.'");
  tg_module *other = tg_sequential_new();
  push(other, relu, NULL);
  cr_assert_eq(tg_sequential_append(seq, relu, NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "already belongs to a sequential module");
  /* a child's error names its position and type */
  push(seq, linear(3, 2, NULL), NULL);
  cr_assert_null(tg_module_forward(seq, tg_zeros(TG_SHAPE(2, 5), f64)));
  tg_expect_error(TG_ERR_SHAPE, "sequential child \"1\" (linear): tg_linear_forward",
                  "x is [2, 5]");
  tg_module_free(other);
  tg_module_free(plain);
  tg_module_free(seq);
}

TG_TEST(layers, sequential_state_round_trip) {
  tg_generator *g = tg_generator_new(8);
  tg_module *a = tg_sequential_new(), *b = tg_sequential_new();
  for (int k = 0; k < 2; k++) {
    tg_module *s = k ? b : a;
    push(s, tg_flatten_layer_new(1, -1), NULL);
    push(s, linear(6, 4, g), NULL);
    push(s, tg_relu_layer_new(), NULL);
    push(s, linear(4, 2, g), NULL);
  }
  const char *path = "test_layers_state.safetensors";
  cr_assert_eq(tg_module_save(a, path), TG_OK, "%s", tg_last_error_message());
  tg_load_report r;
  cr_assert_eq(tg_module_load(b, path, true, &r), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(r.n_loaded, 4);
  tg_tensor *x = tg_randn(TG_SHAPE(3, 2, 3), f64, g);
  tg_assert_close(tg_module_forward(b, x), tg_module_forward(a, x), 0, 0);
  cr_assert_not_null(tg_module_find(b, "3.bias"));
  remove(path);
  tg_module_free(a);
  tg_module_free(b);
  tg_generator_free(g);
}

/* ---- Flatten and the activations ---- */

static void expect_flatten(int start, int end, int ndim, const int64_t *sizes, int want_ndim,
                           const int64_t *want) {
  tg_module *f = tg_flatten_layer_new(start, end);
  cr_assert_str_eq(tg_module_type(f), "flatten");
  tg_tensor *x = tg_randn(ndim, sizes, f64, NULL);
  tg_tensor *y = tg_module_forward(f, x);
  cr_assert_not_null(y, "(%d, %d): %s", start, end, tg_last_error_message());
  tg_test_assert_sizes_impl(__FILE__, __LINE__, y, want_ndim, want);
  tg_assert_close(tg_reshape(y, ndim, sizes), x, 0, 0); /* the same elements, in order */
  tg_module_free(f);
}

TG_TEST(layers, flatten_shapes_like_torch) {
  expect_flatten(1, -1, TG_SHAPE(2, 3, 4, 5), TG_SHAPE(2, 60)); /* torch.nn.Flatten() */
  expect_flatten(0, -1, TG_SHAPE(2, 3, 4, 5), TG_SHAPE(120));
  expect_flatten(1, 2, TG_SHAPE(2, 3, 4, 5), TG_SHAPE(2, 12, 5));
  expect_flatten(-3, -2, TG_SHAPE(2, 3, 4, 5), TG_SHAPE(2, 12, 5));
  expect_flatten(2, 2, TG_SHAPE(2, 3, 4), TG_SHAPE(2, 3, 4));
  expect_flatten(1, -1, TG_SHAPE(0, 3, 4), TG_SHAPE(0, 12));
  expect_flatten(1, -1, TG_SHAPE(2, 1), TG_SHAPE(2, 1));
  expect_flatten(0, -1, 0, NULL, TG_SHAPE(1)); /* torch.flatten of a 0-dim tensor: [1] */
  expect_flatten(-1, 0, 0, NULL, TG_SHAPE(1));
}

TG_TEST(layers, flatten_non_contiguous_and_backward) {
  tg_module *f = tg_flatten_layer_new(1, -1);
  tg_tensor *base =
      tg_randn(TG_SHAPE(3, 2, 4), TG_OPTS(.dtype = TG_F64, .requires_grad = true), NULL);
  tg_tensor *x = tg_transpose(base, 0, 2); /* [4, 2, 3], not contiguous */
  tg_tensor *y = tg_module_forward(f, x);
  tg_assert_sizes(y, 4, 6);
  tg_assert_close(y, tg_reshape(tg_contiguous(x), TG_SHAPE(4, 6)), 0, 0);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(y, y)), NULL), TG_OK);
  tg_assert_close(tg_grad(base), tg_mul_scalar(base, 2), 0, 0);
  tg_module_free(f);
}

TG_TEST(layers, flatten_errors) {
  tg_module *f = tg_flatten_layer_new(1, -1);
  cr_assert_null(tg_module_forward(f, tg_zeros(TG_SHAPE(4), f64)));
  tg_expect_error(TG_ERR_INDEX, "flatten", "start_dim 1 is out of range for a 1-dim tensor");
  tg_module_free(f);
  f = tg_flatten_layer_new(0, 3);
  cr_assert_null(tg_module_forward(f, tg_zeros(TG_SHAPE(4, 2), f64)));
  tg_expect_error(TG_ERR_INDEX, "end_dim 3 is out of range for a 2-dim tensor");
  tg_module_free(f);
  f = tg_flatten_layer_new(-1, 0);
  cr_assert_null(tg_module_forward(f, tg_zeros(TG_SHAPE(4, 2), f64)));
  tg_expect_error(TG_ERR_ARGUMENT, "flatten", "start_dim -1 comes after end_dim 0", "[4, 2]");
  tg_module_free(f);
}

TG_TEST(layers, activations) {
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(4), (const double[]){-2, -0.0, 0.5, 3});
  struct {
    tg_module *m;
    const char *type;
    tg_tensor *want;
  } cases[] = {{tg_relu_layer_new(), "relu", tg_relu(x)},
               {tg_tanh_layer_new(), "tanh", tg_tanh(x)},
               {tg_sigmoid_layer_new(), "sigmoid", tg_sigmoid(x)}};
  for (int i = 0; i < 3; i++) {
    cr_assert_str_eq(tg_module_type(cases[i].m), cases[i].type);
    cr_assert_eq(tg_module_num_parameters(cases[i].m), 0);
    tg_module_train(cases[i].m, false); /* the same in evaluation */
    tg_assert_close(tg_module_forward(cases[i].m, x), cases[i].want, 0, 0);
    tg_module_free(cases[i].m);
  }
}

/* ---- allocation failures ---- */

static tg_status mlp_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_generator *g = tg_generator_new(3);
  tg_module *seq = g ? tg_sequential_new() : NULL;
  tg_status st = status_of(seq);
  for (int i = 0; st == TG_OK && i < 5; i++) {
    tg_module *child = i == 0   ? tg_flatten_layer_new(1, -1)
                       : i == 1 ? tg_linear_module(tg_linear_new(6, 4, true, f64, g))
                       : i == 2 ? tg_relu_layer_new()
                       : i == 3 ? tg_linear_module(tg_linear_new(4, 2, true, f64, g))
                                : tg_sigmoid_layer_new();
    st = status_of(child);
    if (st == TG_OK) st = clean(tg_sequential_append(seq, child, NULL));
    if (st != TG_OK) tg_module_free(child); /* still ours when the append failed */
  }
  tg_tensor *x = st == TG_OK ? tg_randn(TG_SHAPE(3, 2, 3), f64, g) : NULL;
  tg_tensor *y = x ? tg_module_forward(seq, x) : NULL;
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(y), NULL));
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(seq); i++)
    st = append(tg_grad(tg_module_parameter(seq, i, NULL)), out, n_out);
  tg_module_free(seq);
  tg_generator_free(g);
  return st;
}

TG_TEST(layers, alloc_failure_sequential_mlp) {
  cr_assert_gt(sweep("Sequential MLP: build, forward, backward", mlp_step, NULL).failed, 0);
}
