#include "testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

tg_scope tg_test_scope;

void tg_test_setup(void) {
  tg_clear_error();
  tg_manual_seed(0);
  tg_test_scope = tg_scope_begin();
}

void tg_test_teardown(void) {
  int depth = tg_scope_depth();
  tg_status st = tg_scope_end(tg_test_scope); /* closes any scope the test left open, too */
  cr_assert_eq(depth, 1, "test left %d scope(s) open", depth - 1);
  cr_assert_eq(st, TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_live_objects(), 0, "test leaked %lld live object(s)",
               (long long)tg_live_objects());
}

void tg_test_expect_error_impl(const char *file, int line, tg_status code, ...) {
  tg_status got = tg_last_error();
  const char *msg = tg_last_error_message();
  cr_assert_eq(got, code, "%s:%d: expected error %s, got %s (%s)", file, line, tg_status_name(code),
               tg_status_name(got), msg);
  va_list ap;
  va_start(ap, code);
  for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
    cr_assert(strstr(msg, s) != NULL, "%s:%d: error message \"%s\" lacks \"%s\"", file, line, msg,
              s);
  va_end(ap);
  tg_clear_error();
}

static double *host_values(const tg_tensor *t, int64_t *n) {
  *n = tg_numel(t);
  tg_scope sc = tg_scope_begin();
  tg_tensor *d = tg_to_dtype(t, TG_F64);
  tg_tensor *h = d ? tg_to_device(d, TG_DEVICE_CPU) : NULL;
  double *out = malloc(sizeof(double) * (size_t)(*n > 0 ? *n : 1));
  cr_assert(h && out, "could not read tensor: %s", tg_last_error_message());
  cr_assert_eq(tg_to_host_array(h, out, sizeof(double) * (size_t)*n), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
  return out;
}

double tg_test_at(const tg_tensor *t, int64_t flat_index) {
  int64_t n;
  double *v = host_values(t, &n);
  cr_assert(flat_index >= 0 && flat_index < n);
  double x = v[flat_index];
  free(v);
  return x;
}

double tg_test_max_abs_diff(const tg_tensor *a, const tg_tensor *b) {
  int64_t na, nb;
  double *va = host_values(a, &na), *vb = host_values(b, &nb);
  cr_assert_eq(na, nb, "numel differs: %lld vs %lld", (long long)na, (long long)nb);
  double m = 0;
  for (int64_t i = 0; i < na; i++) {
    double d = fabs(va[i] - vb[i]);
    if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
  }
  free(va);
  free(vb);
  return m;
}

void tg_test_assert_close_impl(const char *file, int line, const tg_tensor *a, const tg_tensor *b,
                               double rtol, double atol) {
  cr_assert(a && b, "%s:%d: NULL tensor (%s)", file, line, tg_last_error_message());
  cr_assert_eq(tg_ndim(a), tg_ndim(b), "%s:%d: ndim %d vs %d", file, line, tg_ndim(a), tg_ndim(b));
  for (int d = 0; d < tg_ndim(a); d++)
    cr_assert_eq(tg_size(a, d), tg_size(b, d), "%s:%d: size[%d] %lld vs %lld", file, line, d,
                 (long long)tg_size(a, d), (long long)tg_size(b, d));
  int64_t na, nb;
  double *va = host_values(a, &na), *vb = host_values(b, &nb);
  for (int64_t i = 0; i < na; i++) {
    bool both_nan = isnan(va[i]) && isnan(vb[i]);
    bool same_inf = isinf(va[i]) && va[i] == vb[i];
    if (both_nan || same_inf) continue;
    double tol = atol + rtol * fabs(vb[i]);
    if (!(fabs(va[i] - vb[i]) <= tol)) {
      double x = va[i], y = vb[i];
      free(va);
      free(vb);
      cr_assert_fail("%s:%d: element %lld: %.17g vs %.17g (diff %.3g > tol %.3g)", file, line,
                     (long long)i, x, y, fabs(x - y), tol);
    }
  }
  free(va);
  free(vb);
}

void tg_test_assert_sizes_impl(const char *file, int line, const tg_tensor *t, int ndim,
                               const int64_t *sizes) {
  cr_assert(t, "%s:%d: NULL tensor (%s)", file, line, tg_last_error_message());
  cr_assert_eq(tg_ndim(t), ndim, "%s:%d: ndim %d, expected %d", file, line, tg_ndim(t), ndim);
  for (int d = 0; d < ndim; d++)
    cr_assert_eq(tg_size(t, d), sizes[d], "%s:%d: size[%d] is %lld, expected %lld", file, line, d,
                 (long long)tg_size(t, d), (long long)sizes[d]);
}

tg_tensor *tg_test_tensor_of(tg_dtype dtype, int ndim, const int64_t *sizes, const double *values) {
  tg_tensor *t =
      tg_to_dtype(tg_from_data(ndim, sizes, values, (tg_options){.dtype = TG_F64}), dtype);
  cr_assert(t, "%s", tg_last_error_message());
  return t;
}

void tg_test_expect_values(const tg_tensor *t, int64_t n, const double *want, double tol) {
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_numel(t), n);
  int64_t got_n;
  double *got = host_values(t, &got_n);
  for (int64_t i = 0; i < n; i++) {
    if (fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))) continue;
    double g = got[i];
    free(got);
    cr_assert_fail("element %lld: got %.17g, want %.17g", (long long)i, g, want[i]);
  }
  free(got);
}

void tg_test_expect_ieee(const tg_tensor *t, int64_t n, const double *want, double tol) {
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_numel(t), n);
  int64_t got_n;
  double *got = host_values(t, &got_n);
  for (int64_t i = 0; i < n; i++) {
    const double g = got[i], w = want[i];
    const bool same = isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= tol * (1 + fabs(w));
    if (same) continue;
    free(got);
    cr_assert_fail("element %lld: got %.17g, want %.17g", (long long)i, g, w);
  }
  free(got);
}
