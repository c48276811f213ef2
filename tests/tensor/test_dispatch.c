/* The dtype dispatch macros. */
#include "testutil.h"

static tg_status sum_elements(const tg_tensor *t, double *out) {
  *out = 0;
  TG_DISPATCH_FLOATING_TYPES(tg_tensor_dtype(t), "sum_elements", {
    const scalar_t *p = tg_data_ptr(t);
    for (int64_t i = 0; i < tg_numel(t); i++) *out += (double)p[i];
  });
  return TG_OK;
}

static tg_status element_size(tg_dtype dtype, size_t *out) {
  TG_DISPATCH_ALL_TYPES(dtype, "element_size", { *out = sizeof(scalar_t); });
  return TG_OK;
}

TG_TEST(dispatch, floating_types_define_scalar_t) {
  tg_scope sc = tg_scope_begin();
  double s;
  cr_assert_eq(sum_elements(tg_ones(TG_SHAPE(4), TG_OPTS_DEFAULT), &s), TG_OK);
  cr_assert_eq(s, 4.0);
  cr_assert_eq(sum_elements(tg_full(TG_SHAPE(3), 0.5, TG_OPTS(.dtype = TG_F64)), &s), TG_OK);
  cr_assert_eq(s, 1.5);
  tg_scope_end(sc);
}

TG_TEST(dispatch, unsupported_dtype_is_an_error_naming_the_op) {
  tg_scope sc = tg_scope_begin();
  double s;
  cr_assert_eq(sum_elements(tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64)), &s), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "sum_elements", "int64", "F32, F64 only");
  tg_scope_end(sc);
}

TG_TEST(dispatch, all_types_cover_int64) {
  size_t n = 0;
  cr_assert_eq(element_size(TG_I64, &n), TG_OK);
  cr_assert_eq(n, 8);
  cr_assert_eq(element_size(TG_F32, &n), TG_OK);
  cr_assert_eq(n, 4);
  cr_assert_eq(element_size((tg_dtype)9, &n), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "element_size");
}
