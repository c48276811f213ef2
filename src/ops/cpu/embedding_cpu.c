/* index_select_rows and index_add_rows: whole rows of a 2-D tensor picked by an I64 index
 * (embedding's forward and backward). Indices were checked by the caller.
 *
 * The gather writes each output row once, so rows run in parallel. The scatter-add may hit
 * one row many times (repeated indices): threads split the columns instead, and each walks
 * the index in order, so the sums are race-free and the same for any thread count. */
#include "ops/cpu/cpu_internal.h"

/* Columns per task of the scatter-add: a cache line of doubles and then some. */
#define TG_CPU_INDEX_ADD_COLUMNS 64

static tg_status check_rows(const char *op, const tg_tensor *table, const tg_tensor *rows,
                            const tg_tensor *index) {
  if ((table->dtype != TG_F32 && table->dtype != TG_F64) || rows->dtype != table->dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtypes %s and %s are not supported (F32 or F64, equal)",
                        op, tg_dtype_name(table->dtype), tg_dtype_name(rows->dtype));
  if (index->dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: index dtype %s is not supported (I64 only)", op,
                        tg_dtype_name(index->dtype));
  if (table->ndim != 2 || rows->ndim != 2 || index->ndim != 1 ||
      rows->sizes[0] != index->sizes[0] || rows->sizes[1] != table->sizes[1])
    return tg_set_error(TG_ERR_SHAPE, "%s: expected a table [n, d], rows [m, d] and an index [m]",
                        op);
  return TG_OK;
}

#define TG_CPU_SELECT_ROWS(T)                                                                      \
  do {                                                                                             \
    T *o = (T *)tg_cpu_data(out);                                                                  \
    const T *xs = (const T *)tg_cpu_data(x);                                                       \
    const int64_t os0 = out->strides[0], os1 = out->strides[1];                                    \
    const int64_t xs0 = x->strides[0], xs1 = x->strides[1];                                        \
    _Pragma("omp parallel for schedule(static) if (parallel)") for (int64_t i = 0; i < m; i++) {   \
      const T *src = xs + idx[i * is] * xs0;                                                       \
      T *dst = o + i * os0;                                                                        \
      for (int64_t j = 0; j < d; j++) dst[j * os1] = src[j * xs1];                                 \
    }                                                                                              \
  } while (0)

tg_status tg_cpu_index_select_rows(tg_tensor *out, const tg_tensor *x, const tg_tensor *index) {
  tg_status st = check_rows("index_select_rows", x, out, index);
  if (st != TG_OK) return st;
  const int64_t m = out->sizes[0], d = out->sizes[1];
  const int64_t *idx = (const int64_t *)tg_cpu_data(index);
  const int64_t is = index->strides[0];
  const bool parallel = tg_cpu_should_parallelize(m * d, TG_CPU_PARALLEL_MIN) && m > 1;
  if (x->dtype == TG_F32)
    TG_CPU_SELECT_ROWS(float);
  else
    TG_CPU_SELECT_ROWS(double);
  return TG_OK;
}

#define TG_CPU_ADD_ROWS(T)                                                                         \
  do {                                                                                             \
    T *o = (T *)tg_cpu_data(out);                                                                  \
    const T *ss = (const T *)tg_cpu_data(src);                                                     \
    const int64_t os0 = out->strides[0], os1 = out->strides[1];                                    \
    const int64_t ss0 = src->strides[0], ss1 = src->strides[1];                                    \
    _Pragma("omp parallel for schedule(static) if (parallel)") for (int64_t c = 0; c < chunks;     \
                                                                    c++) {                         \
      const int64_t j0 = c * TG_CPU_INDEX_ADD_COLUMNS;                                             \
      const int64_t j1 = j0 + TG_CPU_INDEX_ADD_COLUMNS < d ? j0 + TG_CPU_INDEX_ADD_COLUMNS : d;    \
      for (int64_t i = 0; i < m; i++) {                                                            \
        T *dst = o + idx[i * is] * os0;                                                            \
        const T *row = ss + i * ss0;                                                               \
        for (int64_t j = j0; j < j1; j++) dst[j * os1] += row[j * ss1];                            \
      }                                                                                            \
    }                                                                                              \
  } while (0)

tg_status tg_cpu_index_add_rows(tg_tensor *out, const tg_tensor *src, const tg_tensor *index) {
  tg_status st = check_rows("index_add_rows", out, src, index);
  if (st != TG_OK) return st;
  const int64_t m = src->sizes[0], d = src->sizes[1];
  const int64_t *idx = (const int64_t *)tg_cpu_data(index);
  const int64_t is = index->strides[0];
  const int64_t chunks = (d + TG_CPU_INDEX_ADD_COLUMNS - 1) / TG_CPU_INDEX_ADD_COLUMNS;
  const bool parallel = tg_cpu_should_parallelize(m * d, TG_CPU_PARALLEL_MIN) && chunks > 1;
  if (out->dtype == TG_F32)
    TG_CPU_ADD_ROWS(float);
  else
    TG_CPU_ADD_ROWS(double);
  return TG_OK;
}

/* ---- as embedding's kernels (TG_OP_KERNEL lines in src/ops/def/embedding.def) ---- */
tg_status tg__kernel_embedding_index_select_rows_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("embedding.index_select_rows", n, 3);
  return tg_cpu_index_select_rows(t[0], t[1], t[2]);
}
tg_status tg__kernel_embedding_backward_index_add_rows_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("embedding_backward.index_add_rows", n, 3);
  return tg_cpu_index_add_rows(t[0], t[1], t[2]);
}
