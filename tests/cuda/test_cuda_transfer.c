/* Host <-> device transfers and device tensors through the public API: round trips are
 * bit-exact, views of either side transfer by value, element access and printing copy
 * through the host, creation works on CUDA. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testutil.h"

static const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};

/* Awkward values: signed zero, infinities, NaN, denormals, extremes. */
static tg_tensor *awkward(tg_dtype dtype) {
  const double v[12] = {0.0,       -0.0,    INFINITY, -INFINITY, NAN,   1e-310,
                        -4.9e-324, 1.4e-45, 3.4e38,   1.0 / 3.0, -7.25, 123456789.0};
  tg_tensor *t = tg_from_data(2, (const int64_t[]){3, 4}, v, TG_OPTS(.dtype = TG_F64));
  if (dtype == TG_I64) {
    const int64_t iv[12] = {0, -1, 1, INT64_MAX, INT64_MIN, 42, -42, 7, 8, 9, 10, 11};
    t = tg_from_data(2, (const int64_t[]){3, 4}, iv, TG_OPTS(.dtype = TG_I64));
  }
  return tg_to_dtype(t, dtype);
}

/* Views for the printing test: transposed, offset and stepped, expanded (stride 0). */
static tg_tensor *view_transposed(const tg_tensor *t) { return tg_transpose(t, 1, 2); }
static tg_tensor *view_stepped(const tg_tensor *t) { return tg_slice(t, 2, 1, 4, 2); }
static tg_tensor *view_expanded(const tg_tensor *t) {
  return tg_expand(tg_select(t, 0, 1), 3, (const int64_t[]){2, 3, 4});
}

static void assert_same_bits(const tg_tensor *a, const tg_tensor *b) {
  size_t n = (size_t)tg_numel(a) * tg_dtype_size(tg_tensor_dtype(a));
  cr_assert_eq(tg_numel(a), tg_numel(b));
  cr_assert_eq(tg_tensor_dtype(a), tg_tensor_dtype(b));
  char ha[1024], hb[1024];
  cr_assert(n <= sizeof ha);
  cr_assert_eq(tg_to_host_array(a, ha, sizeof ha), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_to_host_array(b, hb, sizeof hb), TG_OK, "%s", tg_last_error_message());
  cr_assert(memcmp(ha, hb, n) == 0, "bits differ");
}

TG_CUDA_TEST(cuda_transfer, round_trip_is_bit_exact) {
  for (int d = 0; d < 3; d++) {
    tg_tensor *h = awkward(dtypes[d]);
    tg_tensor *c = tg_to_device(h, TG_CUDA0);
    cr_assert(c, "%s", tg_last_error_message());
    cr_assert_eq(tg_tensor_device(c).type, TG_CUDA);
    cr_assert(!tg_shares_storage(c, h));
    tg_tensor *back = tg_to_device(c, TG_DEVICE_CPU);
    cr_assert_eq(tg_tensor_device(back).type, TG_CPU);
    assert_same_bits(back, h);
    /* a device-to-device clone keeps the bits too */
    assert_same_bits(tg_clone(c), h);
  }
}

TG_CUDA_TEST(cuda_transfer, to_device_of_same_device_is_the_tensor) {
  tg_tensor *c = tg_ones(TG_SHAPE(2, 2), TG_OPTS(.device = TG_CUDA0));
  tg_tensor *same = tg_to_device(c, TG_CUDA0);
  cr_assert(tg_shares_storage(c, same));
}

TG_CUDA_TEST(cuda_transfer, strided_views_cross_both_ways) {
  for (int d = 0; d < 3; d++)
    for (int l = 0; l < TG_L_NUM; l++) {
      tg_scope sc = tg_scope_begin();
      tg_twin m = tg_twin_matrix((tg_layout)l, 5, 3, dtypes[d], l, false);
      /* CPU view -> CUDA, and CUDA view -> CPU, equal the contiguous values */
      tg_tensor *up = tg_to_device(m.cpu, TG_CUDA0), *down = tg_to_device(m.cuda, TG_DEVICE_CPU);
      cr_assert(up && down, "%s", tg_last_error_message());
      cr_assert(tg_is_contiguous(up) && tg_is_contiguous(down));
      assert_same_bits(up, m.cpu);
      assert_same_bits(down, m.cpu);
      tg_scope_end(sc);
    }
}

TG_CUDA_TEST(cuda_transfer, copy_across_devices_converts_and_broadcasts) {
  for (int from = 0; from < 3; from++)
    for (int to = 0; to < 3; to++) {
      tg_scope sc = tg_scope_begin();
      tg_twin src = tg_twin_matrix(TG_L_EXPAND_ROW, 4, 6, dtypes[from], 1, false);
      tg_twin dst = tg_twin_matrix(TG_L_TRANSPOSED, 4, 6, dtypes[to], 2, false);
      cr_assert_eq(tg_copy_(dst.cuda, src.cpu), TG_OK, "%s", tg_last_error_message());
      cr_assert_eq(tg_copy_(dst.cpu, src.cpu), TG_OK, "%s", tg_last_error_message());
      tg_assert_twin_close(dst, 0, 0);
      tg_tensor *back = tg_zeros(TG_SHAPE(4, 6), TG_OPTS(.dtype = dtypes[from]));
      cr_assert_eq(tg_copy_(back, dst.cuda), TG_OK, "%s", tg_last_error_message());
      tg_assert_close(back, dst.cpu, 0, 0);
      tg_scope_end(sc);
    }
}

TG_CUDA_TEST(cuda_transfer, element_access_and_item) {
  tg_tensor *c = tg_arange(0, 12, 1, TG_OPTS(.dtype = TG_F64, .device = TG_CUDA0));
  tg_tensor *m = tg_view(c, TG_SHAPE(3, 4));
  double v = 0;
  cr_assert_eq(tg_get(m, (const int64_t[]){2, 1}, &v), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(v, 9.0);
  cr_assert_eq(tg_set(m, (const int64_t[]){0, 3}, -5.5), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_test_at(c, 3), -5.5);
  tg_tensor *s = tg_sum(c);
  cr_assert(s, "%s", tg_last_error_message());
  cr_assert_eq(tg_item(s, &v), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(v, 66.0 - 3.0 - 5.5);
}

TG_CUDA_TEST(cuda_transfer, printing_a_device_tensor) {
  tg_tensor *c = tg_full(TG_SHAPE(2, 2), 1.5, TG_OPTS(.device = TG_CUDA0));
  char *s = tg_to_string(tg_t(c));
  cr_assert(s, "%s", tg_last_error_message());
  cr_assert(strstr(s, "1.5") && strstr(s, "cuda:0"), "%s", s);
  free(s);
}

/* Printing reads the device storage's span itself (no op runs): strided, offset and
 * expanded views print as their host twins do, bar the device suffix. */
TG_CUDA_TEST(cuda_transfer, printing_device_views_matches_the_host) {
  tg_tensor *h = tg_view(tg_arange(0, 24, 1, TG_OPTS(.dtype = TG_F64)), TG_SHAPE(2, 3, 4));
  tg_tensor *c = tg_to_device(h, TG_CUDA0);
  cr_assert(c, "%s", tg_last_error_message());
  tg_tensor *(*const views[])(const tg_tensor *) = {view_transposed, view_stepped, view_expanded};
  for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
    char *hs = tg_to_string(views[v](h)), *cs = tg_to_string(views[v](c));
    cr_assert(hs && cs, "%s", tg_last_error_message());
    const char *tag = ", device=cuda:0";
    char *suffix = strstr(cs, tag);
    cr_assert(suffix, "%s", cs);
    memmove(suffix, suffix + strlen(tag), strlen(suffix + strlen(tag)) + 1);
    cr_assert_str_eq(cs, hs);
    free(hs);
    free(cs);
  }
}

TG_CUDA_TEST(cuda_transfer, creation_on_cuda_matches_cpu) {
  const tg_dtype fl[] = {TG_F32, TG_F64};
  for (int d = 0; d < 2; d++) {
    tg_options on_cpu = TG_OPTS(.dtype = fl[d]),
               on_gpu = TG_OPTS(.dtype = fl[d], .device = TG_CUDA0);
    tg_assert_close(tg_zeros(TG_SHAPE(3, 5), on_gpu), tg_zeros(TG_SHAPE(3, 5), on_cpu), 0, 0);
    tg_assert_close(tg_ones(TG_SHAPE(3, 5), on_gpu), tg_ones(TG_SHAPE(3, 5), on_cpu), 0, 0);
    tg_assert_close(tg_full(TG_SHAPE(7), -2.5, on_gpu), tg_full(TG_SHAPE(7), -2.5, on_cpu), 0, 0);
    tg_assert_close(tg_arange(-3, 4, 0.5, on_gpu), tg_arange(-3, 4, 0.5, on_cpu), 0, 0);
    tg_manual_seed(7);
    tg_tensor *ru = tg_rand(TG_SHAPE(33), on_gpu, NULL);
    tg_tensor *rn = tg_randn(TG_SHAPE(33), on_gpu, NULL);
    tg_manual_seed(7);
    tg_assert_close(ru, tg_rand(TG_SHAPE(33), on_cpu, NULL), 0, 0);
    tg_assert_close(rn, tg_randn(TG_SHAPE(33), on_cpu, NULL), 1e-5, 1e-6);
  }
}

TG_CUDA_TEST(cuda_transfer, empty_and_scalar_tensors) {
  tg_tensor *e = tg_zeros(TG_SHAPE(0, 3), TG_OPTS(.device = TG_CUDA0));
  cr_assert(e, "%s", tg_last_error_message());
  tg_tensor *eh = tg_to_device(e, TG_DEVICE_CPU);
  cr_assert(eh && tg_numel(eh) == 0, "%s", tg_last_error_message());
  tg_tensor *s = tg_full(0, NULL, 4.0, TG_OPTS(.device = TG_CUDA0));
  double v = 0;
  cr_assert_eq(tg_item(s, &v), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(v, 4.0);
}
