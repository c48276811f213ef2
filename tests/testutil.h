/* Shared test helpers: fixtures that prove nothing leaked, error assertions, comparisons. */
#ifndef TG_TESTUTIL_H
#define TG_TESTUTIL_H

#include <criterion/criterion.h>
#include <string.h>

#include "tg/tg.h"

/* Clears the error state and opens tg_test_scope, which owns what the test body creates
 * outside scopes of its own; at the end closes it and checks that no tensor, storage or
 * node is alive, that no scope was left open inside it and that no error is pending unless
 * the test cleared it. */
extern tg_scope tg_test_scope;
void tg_test_setup(void);
void tg_test_teardown(void);

/* The leak check runs at the end of the test body: Criterion ignores failed assertions in
 * a .fini hook. */
#define TG_TEST(suite, name, ...)                                                                  \
  static void tg_test_body_##suite##_##name(void);                                                 \
  Test(suite, name, .init = tg_test_setup, ##__VA_ARGS__) {                                        \
    tg_test_body_##suite##_##name();                                                               \
    tg_test_teardown();                                                                            \
  }                                                                                                \
  static void tg_test_body_##suite##_##name(void)

/* Asserts that the pending error has `code` and that its message contains every given
 * substring (NULL-terminated list), then clears it. */
void tg_test_expect_error_impl(const char *file, int line, tg_status code, ...);
#define tg_expect_error(code, ...)                                                                 \
  tg_test_expect_error_impl(__FILE__, __LINE__, (code), ##__VA_ARGS__, (const char *)NULL)

/* Asserts no error is pending. */
#define tg_expect_ok()                                                                             \
  cr_assert_eq(tg_last_error(), TG_OK, "unexpected error: %s", tg_last_error_message())

/* Max |a - b| over all elements (tensors of equal sizes, any device/dtype/strides). */
double tg_test_max_abs_diff(const tg_tensor *a, const tg_tensor *b);
/* Asserts |a-b| <= atol + rtol*|b| elementwise; reports the first bad element. */
void tg_test_assert_close_impl(const char *file, int line, const tg_tensor *a, const tg_tensor *b,
                               double rtol, double atol);
#define tg_assert_close(a, b, rtol, atol)                                                          \
  tg_test_assert_close_impl(__FILE__, __LINE__, (a), (b), (rtol), (atol))
/* Asserts the tensor's sizes equal the given ones. */
void tg_test_assert_sizes_impl(const char *file, int line, const tg_tensor *t, int ndim,
                               const int64_t *sizes);
#define tg_assert_sizes(t, ...)                                                                    \
  tg_test_assert_sizes_impl(__FILE__, __LINE__, (t), TG_SHAPE(__VA_ARGS__))

/* A tensor of dtype holding the given values (row-major); asserts on failure. */
tg_tensor *tg_test_tensor_of(tg_dtype dtype, int ndim, const int64_t *sizes, const double *values);
/* Asserts t has n elements equal to want within tol * (1 + |want|). */
void tg_test_expect_values(const tg_tensor *t, int64_t n, const double *want, double tol);

/* As tg_test_expect_values, and NaN must match NaN, an infinity the same infinity. */
void tg_test_expect_ieee(const tg_tensor *t, int64_t n, const double *want, double tol);

/* Element of t at a flat logical (row-major) position, as double. */
double tg_test_at(const tg_tensor *t, int64_t flat_index);

#endif
