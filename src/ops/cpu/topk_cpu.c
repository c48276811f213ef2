/* topk's CPU kernels (src/ops/def/index.def): each row of x [R, N] selected by the shared
 * heap of src/ops/topk_row.h into its row of values / indices [R, k]; rows in parallel. */
#include <math.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"
#include "ops/topk_row.h"

#define NO_NAN(a) ((void)(a), false)
TG_TOPK_ROW_DEFINE(largest_f32, float, 1, isnan)
TG_TOPK_ROW_DEFINE(largest_f64, double, 1, isnan)
TG_TOPK_ROW_DEFINE(largest_i64, int64_t, 1, NO_NAN)
TG_TOPK_ROW_DEFINE(smallest_f32, float, 0, isnan)
TG_TOPK_ROW_DEFINE(smallest_f64, double, 0, isnan)
TG_TOPK_ROW_DEFINE(smallest_i64, int64_t, 0, NO_NAN)

typedef struct topk_pass {
  char *values;
  int64_t *indices;
  const char *x;
  int64_t n, k, vs0, vs1, is0, is1, xs0, xs1;
} topk_pass;

#define TG_CPU_TOPK_ROWS(name, T, row)                                                             \
  static void name(int64_t r0, int64_t r1, void *ctx) {                                            \
    const topk_pass *p = ctx;                                                                      \
    for (int64_t r = r0; r < r1; r++)                                                              \
      row((const T *)p->x + r * p->xs0, p->xs1, p->n, p->k, (T *)p->values + r * p->vs0, p->vs1,   \
          p->indices + r * p->is0, p->is1);                                                        \
  }
TG_CPU_TOPK_ROWS(rows_largest_f32, float, largest_f32)
TG_CPU_TOPK_ROWS(rows_largest_f64, double, largest_f64)
TG_CPU_TOPK_ROWS(rows_largest_i64, int64_t, largest_i64)
TG_CPU_TOPK_ROWS(rows_smallest_f32, float, smallest_f32)
TG_CPU_TOPK_ROWS(rows_smallest_f64, double, smallest_f64)
TG_CPU_TOPK_ROWS(rows_smallest_i64, int64_t, smallest_i64)

static tg_status topk_rows(const char *op, bool largest, tg_tensor *values, tg_tensor *indices,
                           const tg_tensor *x) {
  if (values->dtype != x->dtype || indices->dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: values %s, indices %s for x %s (x's dtype and I64)", op,
                        tg_dtype_name(values->dtype), tg_dtype_name(indices->dtype),
                        tg_dtype_name(x->dtype));
  if (x->ndim != 2 || values->ndim != 2 || indices->ndim != 2 ||
      !tg__dims_equal(2, values->sizes, 2, indices->sizes) || values->sizes[0] != x->sizes[0] ||
      values->sizes[1] > x->sizes[1])
    return tg_set_error(TG_ERR_SHAPE,
                        "%s: expected values [R, k], indices [R, k], x [R, N], k <= N", op);
  topk_pass p = {tg_cpu_data(values), (int64_t *)tg_cpu_data(indices),
                 tg_cpu_data(x),      x->sizes[1],
                 values->sizes[1],    values->strides[0],
                 values->strides[1],  indices->strides[0],
                 indices->strides[1], x->strides[0],
                 x->strides[1]};
  const int64_t rows = x->sizes[0];
  if (rows * p.k == 0) return TG_OK;
  const int di = x->dtype == TG_F32 ? 0 : x->dtype == TG_F64 ? 1 : 2;
  static const tg_cpu_range_fn fns[2][3] = {
      {rows_smallest_f32, rows_smallest_f64, rows_smallest_i64},
      {rows_largest_f32, rows_largest_f64, rows_largest_i64}};
  tg_cpu_parallel_ranges(rows, 1, tg_cpu_should_parallelize(rows * p.n, TG_CPU_PARALLEL_MIN),
                         fns[largest][di], &p);
  return TG_OK;
}

tg_status tg__kernel_topk_largest_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("topk.largest", n, 3);
  return topk_rows("topk.largest", true, t[0], t[1], t[2]);
}

tg_status tg__kernel_topk_smallest_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("topk.smallest", n, 3);
  return topk_rows("topk.smallest", false, t[0], t[1], t[2]);
}
