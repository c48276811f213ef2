#include "cuda_testutil.h"

#include <math.h>
#include <stdlib.h>

void tg_cuda_test_begin(void) {
  if (tg_cuda_device_count() == 0) cr_skip_test("no CUDA device");
}

void tg_cuda_test_end(void) {
  tg_test_teardown(); /* closes tg_test_scope, the scope the body ran in */
  tg_cuda_memory_stats stats;
  cr_assert_eq(tg_cuda_memory_stats_get(&stats), TG_OK);
  cr_assert_eq(stats.bytes_in_use, 0, "test left %zu bytes of device memory in use",
               stats.bytes_in_use);
}

double tg_test_value(int64_t i, int salt, bool positive) {
  double v = 3.0 * sin(0.37 * (double)i + 1.3 * salt);
  return positive ? fabs(v) + 0.25 : v;
}

tg_twin tg_twin_values(int64_t n, tg_dtype dtype, int salt, bool positive) {
  double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = tg_test_value(i, salt, positive);
  /* (An empty tensor through tg_empty: tg_from_data memcpy's into a NULL buffer then.) */
  tg_tensor *d = n ? tg_from_data(1, (const int64_t[]){n}, v, TG_OPTS(.dtype = TG_F64))
                   : tg_empty(1, (const int64_t[]){0}, TG_OPTS(.dtype = TG_F64));
  free(v);
  tg_twin t = {tg_to_dtype(d, dtype), NULL};
  t.cuda = tg_to_device(t.cpu, TG_CUDA0);
  cr_assert(t.cpu && t.cuda, "%s", tg_last_error_message());
  return t;
}

tg_twin tg_twin_view(tg_twin base, int ndim, const int64_t *sizes, const int64_t *strides,
                     int64_t offset) {
  tg_twin t = {tg_as_strided(base.cpu, ndim, sizes, strides, offset),
               tg_as_strided(base.cuda, ndim, sizes, strides, offset)};
  cr_assert(t.cpu && t.cuda, "%s", tg_last_error_message());
  return t;
}

const char *tg_layout_name(tg_layout layout) {
  static const char *names[TG_L_NUM] = {"contiguous", "transposed", "sliced",    "stepped",
                                        "expand_row", "expand_col", "expand_all"};
  return names[layout];
}

tg_twin tg_twin_matrix(tg_layout layout, int64_t rows, int64_t cols, tg_dtype dtype, int salt,
                       bool positive) {
  int64_t r = rows, c = cols, n, s0, s1, off = 0;
  switch (layout) {
  case TG_L_CONTIGUOUS:
    n = r * c, s0 = c, s1 = 1;
    break;
  case TG_L_TRANSPOSED:
    n = r * c, s0 = 1, s1 = r;
    break;
  case TG_L_SLICED:
    off = 3, n = 3 + r * (c + 2), s0 = c + 2, s1 = 1;
    break;
  case TG_L_STEPPED:
    off = 1, n = 1 + 2 * r * c, s0 = 2 * c, s1 = 2;
    break;
  case TG_L_EXPAND_ROW:
    n = c, s0 = 0, s1 = 1;
    break;
  case TG_L_EXPAND_COL:
    n = r, s0 = 1, s1 = 0;
    break;
  default:
    n = 1, s0 = 0, s1 = 0;
    break;
  }
  tg_twin base = tg_twin_values(n, dtype, salt, positive);
  return tg_twin_view(base, 2, (const int64_t[]){r, c}, (const int64_t[]){s0, s1}, off);
}
