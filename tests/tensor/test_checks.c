/* The argument-check vocabulary (src/tensor/check.h): each check's code and exact message,
 * the success path (true, nothing recorded, message arguments not evaluated), the rotating
 * sizes formatter, and for each kind of check an error from a real public function. */
#include <stdint.h>

#include "tensor/check.h"
#include "testutil.h"
#include "tg/nn.h"

/* Asserts the pending error is exactly code and message, then clears it. */
#define expect_exact(code, message)                                                                \
  do {                                                                                             \
    cr_assert_eq(tg_last_error(), (code), "got %s (%s)", tg_status_name(tg_last_error()),          \
                 tg_last_error_message());                                                         \
    cr_assert_str_eq(tg_last_error_message(), (message));                                          \
    tg_clear_error();                                                                              \
  } while (0)

static tg_tensor *f32(int ndim, const int64_t *sizes) {
  return tg_zeros(ndim, sizes, TG_OPTS_DEFAULT);
}

/* ---- each check ---- */

TG_TEST(checks, arg) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = f32(TG_SHAPE(2));
  cr_assert(tg__check_arg("tg_fn", "x", x));
  tg_expect_ok();
  cr_assert_not(tg__check_arg("tg_fn", "x", NULL));
  expect_exact(TG_ERR_ARGUMENT, "tg_fn: x is NULL");
  /* A NULL that came from a failed call keeps that call's error. */
  tg_set_error(TG_ERR_SHAPE, "tg_inner: bad sizes");
  cr_assert_not(tg__check_arg("tg_fn", "x", NULL));
  expect_exact(TG_ERR_SHAPE, "tg_inner: bad sizes");
  tg_scope_end(sc);
}

TG_TEST(checks, floating) {
  tg_scope sc = tg_scope_begin();
  cr_assert(tg__check_floating("tg_fn", "x", f32(TG_SHAPE(2))));
  cr_assert(tg__check_floating("tg_fn", "x", tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64))));
  tg_expect_ok();
  cr_assert_not(tg__check_floating("tg_fn", "x", tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64))));
  expect_exact(TG_ERR_DTYPE, "tg_fn: x is int64; expected float32 or float64");
  tg_scope_end(sc);
}

TG_TEST(checks, alike_dtype) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = f32(TG_SHAPE(2)), *b = f32(TG_SHAPE(3, 4));
  cr_assert(tg__check_alike("tg_fn", "b", b, "a", a)); /* sizes do not matter */
  tg_expect_ok();
  tg_tensor *d = tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64));
  cr_assert_not(tg__check_alike("tg_fn", "b", d, "a", a));
  expect_exact(TG_ERR_DTYPE, "tg_fn: b is float64 but a is float32");
  tg_scope_end(sc);
}

TG_TEST(checks, alike_device) {
  if (!tg_cuda_is_available()) cr_skip_test("no CUDA device in this build/machine");
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = f32(TG_SHAPE(2)), *g = tg_to_device(a, TG_DEVICE_CUDA(0));
  cr_assert_not(tg__check_alike("tg_fn", "b", g, "a", a));
  expect_exact(TG_ERR_DEVICE, "tg_fn: b is on cuda:0 but a is on cpu:0");
  tg_tensor *i = tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64, .device = TG_DEVICE_CUDA(0)));
  cr_assert(tg__check_same_device("tg_fn", "target", i, "b", g)); /* dtypes may differ */
  cr_assert_not(tg__check_same_device("tg_fn", "target", i, "a", a));
  expect_exact(TG_ERR_DEVICE, "tg_fn: target is on cuda:0 but a is on cpu:0");
  tg_scope_end(sc);
}

TG_TEST(checks, same_device) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = f32(TG_SHAPE(2)), *i = tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_I64));
  cr_assert(tg__check_same_device("tg_fn", "target", i, "a", a));
  tg_expect_ok();
  tg_scope_end(sc);
}

TG_TEST(checks, same_sizes) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = f32(TG_SHAPE(2, 3)), *b = f32(TG_SHAPE(2, 3));
  cr_assert(tg__check_same_sizes("tg_fn", "b", b, "a", a));
  tg_expect_ok();
  cr_assert_not(tg__check_same_sizes("tg_fn", "b", f32(TG_SHAPE(3, 2)), "a", a));
  expect_exact(TG_ERR_SHAPE, "tg_fn: b is [3, 2] but a is [2, 3]: sizes must be equal");
  cr_assert_not(tg__check_same_sizes("tg_fn", "b", f32(TG_SHAPE(2, 3, 1)), "a", a));
  expect_exact(TG_ERR_SHAPE, "tg_fn: b is [2, 3, 1] but a is [2, 3]: sizes must be equal");
  cr_assert_not(tg__check_same_sizes("tg_fn", "b", f32(0, NULL), "a", a));
  expect_exact(TG_ERR_SHAPE, "tg_fn: b is [] but a is [2, 3]: sizes must be equal");
  tg_scope_end(sc);
}

TG_TEST(checks, ndim) {
  tg_scope sc = tg_scope_begin();
  cr_assert(tg__check_ndim("tg_fn", "m", f32(TG_SHAPE(2, 3)), 2));
  tg_expect_ok();
  cr_assert_not(tg__check_ndim("tg_fn", "m", f32(TG_SHAPE(2, 3, 4)), 2));
  expect_exact(TG_ERR_SHAPE, "tg_fn: m must be 2-D, got [2, 3, 4]");
  tg_scope_end(sc);
}

static int evaluated;
static int count(void) { return ++evaluated; }

TG_TEST(checks, condition) {
  evaluated = 0;
  cr_assert(tg__check(1 + 1 == 2, TG_ERR_INDEX, "tg_fn", "call %d", count()));
  cr_assert_eq(evaluated, 0, "the message's arguments are evaluated only on failure");
  tg_expect_ok();
  cr_assert_not(tg__check(1 + 1 == 3, TG_ERR_INDEX, "tg_fn", "index %d of %s", count(), "x"));
  cr_assert_eq(evaluated, 1);
  expect_exact(TG_ERR_INDEX, "tg_fn: index 1 of x");
  cr_assert_not(tg__fail(TG_ERR_STATE, "tg_fn", "no arguments"));
  expect_exact(TG_ERR_STATE, "tg_fn: no arguments");
}

/* ---- the sizes formatter ---- */

TG_TEST(checks, sizes_str_rotates) {
  const char *s[TG__SIZES_STR_SLOTS];
  for (int i = 0; i < TG__SIZES_STR_SLOTS; i++) s[i] = tg__dims_str(1, (const int64_t[]){i});
  /* Every text of the last TG__SIZES_STR_SLOTS calls is still intact (one message's worth). */
  for (int i = 0; i < TG__SIZES_STR_SLOTS; i++) {
    char want[8];
    snprintf(want, sizeof want, "[%d]", i);
    cr_assert_str_eq(s[i], want);
  }
  /* The next call reuses the oldest buffer. */
  const char *again = tg__dims_str(2, (const int64_t[]){7, 8});
  cr_assert_eq(again, s[0]);
  cr_assert_str_eq(s[0], "[7, 8]");
  cr_assert_str_eq(s[1], "[1]");
  cr_assert_str_eq(tg__dims_str(0, NULL), "[]");
}

TG_TEST(checks, sizes_str_widest) {
  int64_t sizes[TG_MAX_DIMS];
  for (int d = 0; d < TG_MAX_DIMS; d++) sizes[d] = d % 2 ? INT64_MAX : INT64_MIN;
  const char *s = tg__dims_str(TG_MAX_DIMS, sizes);
  /* Not cut: it ends with the last size and the bracket. */
  cr_assert_eq(s[0], '[');
  size_t n = strlen(s);
  cr_assert(n > 20 && strcmp(s + n - 20, "9223372036854775807]") == 0, "%s", s);
  tg_scope sc = tg_scope_begin();
  cr_assert_str_eq(tg__sizes_str(f32(TG_SHAPE(4, 0, 2))), "[4, 0, 2]");
  tg_scope_end(sc);
}

/* ---- each kind of check, seen from a public function ---- */

TG_TEST(checks, from_real_ops) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *m43 = f32(TG_SHAPE(4, 3)), *v3 = f32(TG_SHAPE(3));
  /* arg */
  cr_assert_null(tg_mm(NULL, m43));
  expect_exact(TG_ERR_ARGUMENT, "tg_mm: a is NULL");
  /* floating */
  cr_assert_null(tg_mm(tg_zeros(TG_SHAPE(3, 4), TG_OPTS(.dtype = TG_I64)), m43));
  expect_exact(TG_ERR_DTYPE, "tg_mm: a is int64; expected float32 or float64");
  /* alike */
  cr_assert_null(tg_mm(m43, tg_zeros(TG_SHAPE(3, 2), TG_OPTS(.dtype = TG_F64))));
  expect_exact(TG_ERR_DTYPE, "tg_mm: b is float64 but a is float32");
  /* same sizes */
  cr_assert_null(tg_mse_loss(m43, f32(TG_SHAPE(3, 4))));
  expect_exact(TG_ERR_SHAPE,
               "tg_mse_loss: input is [4, 3] but target is [3, 4]: sizes must be equal");
  /* ndim */
  cr_assert_null(tg_mm(v3, m43));
  expect_exact(TG_ERR_SHAPE, "tg_mm: a must be 2-D, got [3]");
  /* a condition: tg_mm(x, x) names tg_mm's own parameters */
  cr_assert_null(tg_mm(m43, m43));
  expect_exact(TG_ERR_SHAPE, "tg_mm: a is [4, 3] but b is [4, 3]: inner sizes differ");
  /* a list element is named as the parameter's entry */
  cr_assert_null(tg_cat(2, (const tg_tensor *[]){m43, f32(TG_SHAPE(4, 3, 1))}, 0));
  expect_exact(TG_ERR_SHAPE, "tg_cat: tensors[1] is [4, 3, 1] but tensors[0] is [4, 3]: all need "
                             "the same number of dims");
  /* a module names itself, not the op it runs */
  tg_linear *lin = tg_linear_new(3, 2, true, TG_OPTS_DEFAULT, NULL);
  cr_assert_null(tg_linear_forward(lin, tg_zeros(TG_SHAPE(4, 3), TG_OPTS(.dtype = TG_F64))));
  expect_exact(TG_ERR_DTYPE, "tg_linear_forward: x is float64 but m's weight is float32");
  tg_linear_free(lin);
  tg_scope_end(sc);
}
