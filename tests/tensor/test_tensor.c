/* Creation, properties, element access and conversions. */
#include <math.h>

#include "testutil.h"

TG_TEST(tensor, zeros_ones_full_have_contiguous_geometry) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *z = tg_zeros(TG_SHAPE(2, 3, 4), TG_OPTS_DEFAULT);
  tg_assert_sizes(z, 2, 3, 4);
  cr_assert_eq(tg_stride(z, 0), 12);
  cr_assert_eq(tg_stride(z, 1), 4);
  cr_assert_eq(tg_stride(z, -1), 1);
  cr_assert_eq(tg_offset(z), 0);
  cr_assert_eq(tg_numel(z), 24);
  cr_assert_eq(tg_tensor_dtype(z), TG_F32);
  cr_assert_eq(tg_tensor_device(z).type, TG_CPU);
  cr_assert(tg_is_contiguous(z));
  cr_assert_eq(tg_test_at(z, 23), 0.0);
  tg_tensor *o = tg_ones(TG_SHAPE(5), TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_test_at(o, 4), 1.0);
  tg_tensor *f = tg_full(TG_SHAPE(2, 2), -2.5, TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_test_at(f, 3), -2.5);
  tg_tensor *i = tg_full(TG_SHAPE(3), 7, TG_OPTS(.dtype = TG_I64));
  cr_assert_eq(tg_test_at(i, 2), 7.0);
  tg_scope_end(sc);
}

TG_TEST(tensor, zero_dim_and_empty_tensors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *s = tg_full(0, NULL, 3.5, TG_OPTS_DEFAULT);
  cr_assert_eq(tg_ndim(s), 0);
  cr_assert_eq(tg_numel(s), 1);
  double v;
  cr_assert_eq(tg_item(s, &v), TG_OK);
  cr_assert_eq(v, 3.5);
  tg_tensor *e = tg_zeros(TG_SHAPE(0, 3), TG_OPTS_DEFAULT);
  cr_assert_eq(tg_numel(e), 0);
  tg_assert_sizes(e, 0, 3);
  tg_scope_end(sc);
}

TG_TEST(tensor, arange_counts_like_python) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_arange(0, 5, 1, TG_OPTS_DEFAULT);
  tg_assert_sizes(a, 5);
  cr_assert_eq(tg_test_at(a, 4), 4.0);
  tg_tensor *b = tg_arange(1, 2, 0.25, TG_OPTS(.dtype = TG_F64));
  tg_assert_sizes(b, 4);
  cr_assert_eq(tg_test_at(b, 3), 1.75);
  tg_tensor *c = tg_arange(5, 0, -2, TG_OPTS(.dtype = TG_I64));
  tg_assert_sizes(c, 3);
  cr_assert_eq(tg_test_at(c, 2), 1.0);
  tg_tensor *d = tg_arange(3, 3, 1, TG_OPTS_DEFAULT);
  cr_assert_eq(tg_numel(d), 0);
  cr_assert_null(tg_arange(0, 1, 0, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_arange", "step 0");
  tg_scope_end(sc);
}

/* torch.arange refuses bounds on the wrong side for the step's sign; failed before (tg
 * returned an empty tensor). Step 0 and non-finite steps or bounds are refused too. */
TG_TEST(tensor, arange_refuses_bounds_inconsistent_with_the_step) {
  tg_scope sc = tg_scope_begin();
  cr_assert_null(tg_arange(0, 5, -1, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_arange: start 0, end 5, step -1",
                  "inconsistent with the step's sign");
  cr_assert_null(tg_arange(5, 0, 0.5, TG_OPTS(.dtype = TG_F64)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_arange: start 5, end 0, step 0.5", "must not be below");
  cr_assert_eq(tg_numel(tg_arange(0, 0, -1, TG_OPTS_DEFAULT)), 0); /* empty, as in PyTorch */
  cr_assert_eq(tg_numel(tg_arange(0, -0.0, 1, TG_OPTS_DEFAULT)), 0);
  cr_assert_null(tg_arange(0, 5, NAN, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_arange: step nan", "finite, non-zero step");
  cr_assert_null(tg_arange(0, 5, -INFINITY, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_arange: step -inf");
  cr_assert_null(tg_arange(NAN, 5, 1, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_arange: start nan, end 5: need finite bounds");
  cr_assert_null(tg_arange(0, INFINITY, 1, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_arange: start 0, end inf");
  /* A count beyond int64 (end - start overflowing to inf included) is a size error. */
  cr_assert_null(tg_arange(-1.7e308, 1.7e308, 1, TG_OPTS(.dtype = TG_F64)));
  tg_expect_error(TG_ERR_SHAPE, "tg_arange", "too many");
  cr_assert_null(tg_arange(0, 1, 1e-300, TG_OPTS(.dtype = TG_F64)));
  tg_expect_error(TG_ERR_SHAPE, "tg_arange", "too many");
  tg_scope_end(sc);
}

TG_TEST(tensor, from_data_copies_the_array) {
  tg_scope sc = tg_scope_begin();
  double data[6] = {1, 2, 3, 4, 5, 6};
  tg_tensor *t = tg_from_data(TG_SHAPE(2, 3), data, TG_OPTS(.dtype = TG_F64));
  data[0] = 100;
  cr_assert_eq(tg_test_at(t, 0), 1.0);
  double v;
  cr_assert_eq(tg_get(t, (int64_t[]){1, 2}, &v), TG_OK);
  cr_assert_eq(v, 6.0);
  cr_assert_eq(tg_set(t, (int64_t[]){0, 1}, -1.0), TG_OK);
  cr_assert_eq(tg_test_at(t, 1), -1.0);
  int64_t ints[3] = {7, -8, 9};
  tg_tensor *i = tg_from_data(TG_SHAPE(3), ints, TG_OPTS(.dtype = TG_I64));
  cr_assert_eq(tg_test_at(i, 1), -8.0);
  cr_assert_null(tg_from_data(TG_SHAPE(3), NULL, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_from_data", "NULL");
  tg_scope_end(sc);
}

TG_TEST(tensor, like_constructors_follow_dtype_and_sizes) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_ones(TG_SHAPE(2, 5), TG_OPTS(.dtype = TG_F64));
  tg_tensor *z = tg_zeros_like(t);
  tg_assert_sizes(z, 2, 5);
  cr_assert_eq(tg_tensor_dtype(z), TG_F64);
  cr_assert_eq(tg_test_at(tg_full_like(t, 4), 9), 4.0);
  cr_assert_eq(tg_test_at(tg_ones_like(t), 0), 1.0);
  tg_assert_sizes(tg_empty_like(t), 2, 5);
  tg_scope_end(sc);
}

TG_TEST(tensor, to_dtype_converts_and_returns_self_when_equal) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_from_data(TG_SHAPE(3), (float[]){1.5f, -2.25f, 3.0f}, TG_OPTS_DEFAULT);
  tg_tensor *d = tg_to_dtype(t, TG_F64);
  cr_assert_eq(tg_tensor_dtype(d), TG_F64);
  cr_assert_eq(tg_test_at(d, 1), -2.25);
  tg_tensor *i = tg_to_dtype(d, TG_I64);
  cr_assert_eq(tg_test_at(i, 1), -2.0);
  cr_assert_eq(tg_to_dtype(t, TG_F32), t);
  cr_assert_null(tg_to_dtype(t, (tg_dtype)42));
  tg_expect_error(TG_ERR_DTYPE, "tg_to_dtype", "42");
  tg_scope_end(sc);
}

TG_TEST(tensor, item_and_get_report_bad_indices) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  double v;
  cr_assert_eq(tg_item(t, &v), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_item", "[2, 3]");
  cr_assert_eq(tg_get(t, (int64_t[]){2, 0}, &v), TG_ERR_INDEX);
  tg_expect_error(TG_ERR_INDEX, "tg_get", "index 2", "dim 0", "[2, 3]");
  cr_assert_eq(tg_set(t, (int64_t[]){0, -4}, 1.0), TG_ERR_INDEX);
  tg_expect_error(TG_ERR_INDEX, "tg_set", "index -4", "dim 1 of size 3", "valid: -3..2");
  cr_assert_eq(tg_get(t, (int64_t[]){INT64_MIN, 0}, &v), TG_ERR_INDEX);
  tg_expect_error(TG_ERR_INDEX, "tg_get", "index -9223372036854775808");
  tg_scope_end(sc);
}

/* A negative index counts from the end, as in tg_select and PyTorch (t[-1, -2]); failed
 * before (TG_ERR_INDEX). */
TG_TEST(tensor, get_and_set_count_negative_indices_from_the_end) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t =
      tg_from_data(TG_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6}, TG_OPTS(.dtype = TG_F64));
  double v = 0;
  cr_assert_eq(tg_get(t, (int64_t[]){-1, -3}, &v), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(v, 4.0);
  cr_assert_eq(tg_set(t, (int64_t[]){-2, 2}, -7.0), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_test_at(t, 2), -7.0);
  tg_tensor *tt = tg_t(t); /* through the strides of a view */
  cr_assert_eq(tg_get(tt, (int64_t[]){-1, 0}, &v), TG_OK);
  cr_assert_eq(v, -7.0);
  tg_scope_end(sc);
}

TG_TEST(tensor, invalid_creation_arguments_are_errors) {
  tg_scope sc = tg_scope_begin();
  cr_assert_null(tg_zeros(TG_SHAPE(2, -1), TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_SHAPE, "tg_zeros: ", "[2, -1]", "dim 1");
  int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  cr_assert_null(tg_zeros(9, nine, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_SHAPE, "ndim 9");
  cr_assert_null(tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = (tg_dtype)7)));
  tg_expect_error(TG_ERR_DTYPE, "invalid dtype 7");
  cr_assert_null(tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64, .requires_grad = true)));
  tg_expect_error(TG_ERR_DTYPE, "only floating tensors can require grad");
  cr_assert_null(tg_zeros(TG_SHAPE(1ll << 40, 1ll << 40), TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_SHAPE, "too many elements");
  cr_assert_null(tg_zeros_like(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_zeros_like", "NULL");
  tg_scope_end(sc);
}

TG_TEST(tensor, creation_errors_name_the_function_called) {
  tg_scope sc = tg_scope_begin();
  const int64_t bad[2] = {2, -1};
  const double data[2] = {1, 2};
  cr_assert_null(tg_empty(2, bad, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_SHAPE, "tg_empty: ", "[2, -1]");
  cr_assert_null(tg_zeros(2, bad, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_SHAPE, "tg_zeros: ", "[2, -1]");
  cr_assert_null(tg_ones(2, bad, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_SHAPE, "tg_ones: ", "[2, -1]");
  cr_assert_null(tg_full(2, bad, 3.0, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_SHAPE, "tg_full: ", "[2, -1]");
  cr_assert_null(tg_from_data(2, bad, data, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_SHAPE, "tg_from_data: ", "[2, -1]");
  cr_assert_null(tg_from_data(TG_SHAPE(2), data, TG_OPTS(.dtype = (tg_dtype)7)));
  tg_expect_error(TG_ERR_DTYPE, "tg_from_data: ", "invalid dtype 7");
  cr_assert_null(tg_arange(0, 3, 1, TG_OPTS(.dtype = (tg_dtype)7)));
  tg_expect_error(TG_ERR_DTYPE, "tg_arange: ", "invalid dtype 7");
  cr_assert_null(tg_ones(TG_SHAPE(2), TG_OPTS(.device = {(tg_device_type)9, 0})));
  tg_expect_error(TG_ERR_DEVICE, "tg_ones: ", "invalid device type 9");
  cr_assert_null(tg_full(TG_SHAPE(2), 1.0, TG_OPTS(.dtype = TG_I64, .requires_grad = true)));
  tg_expect_error(TG_ERR_DTYPE, "tg_full: ", "only floating tensors can require grad");
  cr_assert_null(tg_from_data(TG_SHAPE(1ll << 40, 1ll << 40), data, TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_SHAPE, "tg_from_data: ", "too many elements");
  tg_tensor *big = tg_expand(tg_zeros(TG_SHAPE(1), TG_OPTS_DEFAULT), TG_SHAPE(1ll << 61));
  cr_assert_not_null(big, "%s", tg_last_error_message());
  { /* the _like variants name themselves: materialising 2^61 elements fails */
    cr_assert_null(tg_zeros_like(big));
    tg_expect_error(TG_ERR_SHAPE, "tg_zeros_like: ", "too many elements");
    cr_assert_null(tg_ones_like(big));
    tg_expect_error(TG_ERR_SHAPE, "tg_ones_like: ");
    cr_assert_null(tg_full_like(big, 2.0));
    tg_expect_error(TG_ERR_SHAPE, "tg_full_like: ");
    cr_assert_null(tg_empty_like(big));
    tg_expect_error(TG_ERR_SHAPE, "tg_empty_like: ");
    cr_assert_null(tg_clone(big));
    tg_expect_error(TG_ERR_SHAPE, "tg_clone: ", "too many elements");
    cr_assert_null(tg_to_dtype(big, TG_F64));
    tg_expect_error(TG_ERR_SHAPE, "tg_to_dtype: ", "too many elements");
  }
  cr_assert_null(tg_randn(2, bad, TG_OPTS_DEFAULT, NULL));
  tg_expect_error(TG_ERR_SHAPE, "tg_randn: ", "[2, -1]");
  cr_assert_null(tg_rand(2, bad, TG_OPTS_DEFAULT, NULL));
  tg_expect_error(TG_ERR_SHAPE, "tg_rand: ", "[2, -1]");
  tg_scope_end(sc);
}

TG_TEST(tensor, cuda_without_cuda_build_is_a_device_error) {
  if (tg_cuda_is_built()) return; /* the emulated/real CUDA suites cover this build */
  tg_scope sc = tg_scope_begin();
  cr_assert_null(tg_zeros(TG_SHAPE(2), TG_OPTS(.device = TG_DEVICE_CUDA(0))));
  tg_expect_error(TG_ERR_DEVICE, "cuda", "without CUDA");
  tg_tensor *t = tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  cr_assert_null(tg_to_device(t, TG_DEVICE_CUDA(0)));
  tg_expect_error(TG_ERR_DEVICE, "tg_to_device");
  cr_assert_eq(tg_cuda_device_count(), 0);
  cr_assert_null(tg_cuda_timer_new());
  tg_expect_error(TG_ERR_DEVICE, "tg_cuda_timer_new", "without CUDA");
  tg_cuda_timer_free(NULL);
  cr_assert_eq(tg_cuda_synchronize(), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "tg_cuda_synchronize");
  void *stream = &stream;
  cr_assert_eq(tg_cuda_stream(0, &stream), TG_ERR_DEVICE);
  cr_assert_null(stream);
  tg_expect_error(TG_ERR_DEVICE, "tg_cuda_stream", "without CUDA");
  tg_scope_end(sc);
}

TG_TEST(tensor, accessor_indexes_strided_views) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_arange(0, 12, 1, TG_OPTS(.dtype = TG_F64));
  tg_tensor *m = tg_t(tg_view(t, TG_SHAPE(3, 4)));
  tg_accessor a;
  cr_assert_eq(tg_accessor_of(m, 2, TG_F64, &a), TG_OK);
  cr_assert_eq(a.sizes[0], 4);
  cr_assert_eq(TG_AT2(a, double, 1, 2), 9.0); /* m[1][2] = t[2][1] */
  cr_assert_eq(tg_accessor_of(m, 3, TG_F64, &a), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_accessor_of", "[4, 3]");
  cr_assert_eq(tg_accessor_of(m, 2, TG_F32, &a), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "float64");
  tg_scope_end(sc);
}
