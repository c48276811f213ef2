/* index_select_rows and index_add_rows: whole rows of a 2-D tensor picked by an I64 index
 * (embedding's forward and backward). Indices were checked by the caller.
 *
 * The gather writes each output row once, so rows run in parallel (the pool). The scatter-add may
 * hit one row many times (repeated indices): threads split the columns instead, and each walks the
 * index in order, so the sums are race-free and the same for any thread count. */
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"

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

/* One pass: the table-side and row-side operands, the index, the row width d. */
typedef struct rows_pass {
  void *out;
  const void *in;
  const int64_t *idx;
  int64_t is, m, d, os0, os1, is0, is1;
} rows_pass;

/* Output rows [i0, i1): out[i] = x[idx[i]]. */
#define TG_CPU_SELECT_ROWS(name, T)                                                                \
  static void name(int64_t i0, int64_t i1, void *ctx) {                                            \
    const rows_pass *p = ctx;                                                                      \
    for (int64_t i = i0; i < i1; i++) {                                                            \
      const T *src = (const T *)p->in + p->idx[i * p->is] * p->is0;                                \
      T *dst = (T *)p->out + i * p->os0;                                                           \
      for (int64_t j = 0; j < p->d; j++) dst[j * p->os1] = src[j * p->is1];                        \
    }                                                                                              \
  }
TG_CPU_SELECT_ROWS(select_rows_f32, float)
TG_CPU_SELECT_ROWS(select_rows_f64, double)

tg_status tg_cpu_index_select_rows(tg_tensor *out, const tg_tensor *x, const tg_tensor *index) {
  tg_status st = check_rows("index_select_rows", x, out, index);
  if (st != TG_OK) return st;
  const int64_t m = out->sizes[0], d = out->sizes[1];
  const int64_t *idx = (const int64_t *)tg_cpu_data(index);
  const int64_t is = index->strides[0];
  rows_pass p = {tg_cpu_data(out), tg_cpu_data(x),  idx,           is,           m, d,
                 out->strides[0],  out->strides[1], x->strides[0], x->strides[1]};
  tg_cpu_parallel_ranges(m, 1, tg_cpu_should_parallelize(m * d, TG_CPU_PARALLEL_MIN),
                         x->dtype == TG_F32 ? select_rows_f32 : select_rows_f64, &p);
  return TG_OK;
}

/* Column blocks [c0, c1) of TG_CPU_INDEX_ADD_COLUMNS: out[idx[i]] += src[i], i in order. */
#define TG_CPU_ADD_ROWS(name, T)                                                                   \
  static void name(int64_t c0, int64_t c1, void *ctx) {                                            \
    const rows_pass *p = ctx;                                                                      \
    const int64_t j0 = c0 * TG_CPU_INDEX_ADD_COLUMNS;                                              \
    const int64_t j1 =                                                                             \
        c1 * TG_CPU_INDEX_ADD_COLUMNS < p->d ? c1 * TG_CPU_INDEX_ADD_COLUMNS : p->d;               \
    for (int64_t i = 0; i < p->m; i++) {                                                           \
      T *dst = (T *)p->out + p->idx[i * p->is] * p->os0;                                           \
      const T *row = (const T *)p->in + i * p->is0;                                                \
      for (int64_t j = j0; j < j1; j++) dst[j * p->os1] += row[j * p->is1];                        \
    }                                                                                              \
  }
TG_CPU_ADD_ROWS(add_rows_f32, float)
TG_CPU_ADD_ROWS(add_rows_f64, double)

tg_status tg_cpu_index_add_rows(tg_tensor *out, const tg_tensor *src, const tg_tensor *index) {
  tg_status st = check_rows("index_add_rows", out, src, index);
  if (st != TG_OK) return st;
  const int64_t m = src->sizes[0], d = src->sizes[1];
  const int64_t *idx = (const int64_t *)tg_cpu_data(index);
  const int64_t is = index->strides[0];
  const int64_t chunks = (d + TG_CPU_INDEX_ADD_COLUMNS - 1) / TG_CPU_INDEX_ADD_COLUMNS;
  rows_pass p = {
      tg_cpu_data(out), tg_cpu_data(src), idx, is, m, d, out->strides[0], out->strides[1],
      src->strides[0],  src->strides[1]};
  tg_cpu_parallel_ranges(chunks, 1, tg_cpu_should_parallelize(m * d, TG_CPU_PARALLEL_MIN),
                         out->dtype == TG_F32 ? add_rows_f32 : add_rows_f64, &p);
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
