/* gather_rows and scatter_add_rows: one element per row of a 2-D tensor, chosen by an I64
 * index (the picking step of nll_loss and its backward). Indices were checked by the
 * caller. Each row touches its own element, so rows run in parallel (the pool) without races. */
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"

static tg_status check_index(const char *op, const tg_tensor *index, int64_t rows) {
  if (index->dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: index dtype %s is not supported (I64 only)", op,
                        tg_dtype_name(index->dtype));
  if (index->ndim != 1 || index->sizes[0] != rows)
    return tg_set_error(TG_ERR_SHAPE, "%s: index must be 1-D with %lld elements", op,
                        (long long)rows);
  return TG_OK;
}

/* One pass over rows: out, x (or src), the index and their strides. */
typedef struct rows_pass {
  void *out;
  const void *x;
  const int64_t *idx;
  int64_t is, os0, os1, xs0, xs1;
} rows_pass;

/* Rows [i0, i1): out[i] = x[i, idx[i]]. */
#define TG_CPU_GATHER(name, T)                                                                     \
  static void name(int64_t i0, int64_t i1, void *ctx) {                                            \
    const rows_pass *p = ctx;                                                                      \
    T *o = p->out;                                                                                 \
    const T *xs = p->x;                                                                            \
    for (int64_t i = i0; i < i1; i++) o[i * p->os0] = xs[i * p->xs0 + p->idx[i * p->is] * p->xs1]; \
  }
TG_CPU_GATHER(gather_f32, float)
TG_CPU_GATHER(gather_f64, double)

tg_status tg_cpu_gather_rows(tg_tensor *out, const tg_tensor *x, const tg_tensor *index) {
  if ((x->dtype != TG_F32 && x->dtype != TG_F64) || out->dtype != x->dtype)
    return tg_set_error(TG_ERR_DTYPE,
                        "gather_rows: dtype %s is not supported (F32, F64 with out's dtype)",
                        tg_dtype_name(x->dtype));
  if (x->ndim != 2 || out->ndim != 1 || out->sizes[0] != x->sizes[0])
    return tg_set_error(TG_ERR_SHAPE, "gather_rows: expected x [n, c] and out [n]");
  const int64_t n = x->sizes[0];
  tg_status st = check_index("gather_rows", index, n);
  if (st != TG_OK) return st;
  const int64_t *idx = (const int64_t *)tg_cpu_data(index);
  const int64_t is = index->strides[0];
  rows_pass p = {tg_cpu_data(out), tg_cpu_data(x), idx, is, out->strides[0], 0,
                 x->strides[0],    x->strides[1]};
  tg_cpu_parallel_ranges(n, 16, tg_cpu_should_parallelize(n, TG_CPU_PARALLEL_MIN),
                         x->dtype == TG_F32 ? gather_f32 : gather_f64, &p);
  return TG_OK;
}

/* Rows [i0, i1): out[i, idx[i]] += src[i]. */
#define TG_CPU_SCATTER_ADD(name, T)                                                                \
  static void name(int64_t i0, int64_t i1, void *ctx) {                                            \
    const rows_pass *p = ctx;                                                                      \
    T *o = p->out;                                                                                 \
    const T *ss = p->x;                                                                            \
    for (int64_t i = i0; i < i1; i++)                                                              \
      o[i * p->os0 + p->idx[i * p->is] * p->os1] += ss[i * p->xs0];                                \
  }
TG_CPU_SCATTER_ADD(scatter_add_f32, float)
TG_CPU_SCATTER_ADD(scatter_add_f64, double)

tg_status tg_cpu_scatter_add_rows(tg_tensor *out, const tg_tensor *src, const tg_tensor *index) {
  if ((out->dtype != TG_F32 && out->dtype != TG_F64) || src->dtype != out->dtype)
    return tg_set_error(TG_ERR_DTYPE,
                        "scatter_add_rows: dtype %s is not supported (F32, F64 with out's dtype)",
                        tg_dtype_name(src->dtype != out->dtype ? src->dtype : out->dtype));
  if (out->ndim != 2 || src->ndim != 1 || src->sizes[0] != out->sizes[0])
    return tg_set_error(TG_ERR_SHAPE, "scatter_add_rows: expected out [n, c] and src [n]");
  const int64_t n = out->sizes[0];
  tg_status st = check_index("scatter_add_rows", index, n);
  if (st != TG_OK) return st;
  const int64_t *idx = (const int64_t *)tg_cpu_data(index);
  const int64_t is = index->strides[0];
  rows_pass p = {tg_cpu_data(out), tg_cpu_data(src), idx, is, out->strides[0],
                 out->strides[1],  src->strides[0],  0};
  tg_cpu_parallel_ranges(n, 1, tg_cpu_should_parallelize(n, TG_CPU_PARALLEL_MIN),
                         out->dtype == TG_F32 ? scatter_add_f32 : scatter_add_f64, &p);
  return TG_OK;
}

/* ---- as cross-entropy's kernels (TG_OP_KERNEL lines in src/ops/def/loss.def) ---- */
tg_status tg__kernel_cross_entropy_gather_rows_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("cross_entropy.gather_rows", n, 3);
  return tg_cpu_gather_rows(t[0], t[1], t[2]);
}
tg_status tg__kernel_cross_entropy_scatter_add_rows_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("cross_entropy.scatter_add_rows", n, 3);
  return tg_cpu_scatter_add_rows(t[0], t[1], t[2]);
}
