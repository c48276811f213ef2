/* fill and copy (with dtype conversion) for F32, F64 and I64. */
#include <string.h>

#include "ops/cpu/cpu_internal.h"
#include "tensor/checked.h"

/* A value converted to TO: to int64 through tg__f64_to_i64, since a C cast of NaN or of a
 * float out of int64's range is undefined; otherwise a plain cast. */
#define TG_CPU_CONVERT(TO, x)                                                                      \
  _Generic((TO)0, int64_t : tg__f64_to_i64((double)(x)), default : (TO)(x))

/* ---- fill ---- */

#define TG_CPU_FILL_ROW(NAME, T)                                                                   \
  static void NAME(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                 \
    const T v = TG_CPU_CONVERT(T, ((const tg_cpu_scalars *)ctx)->a);                               \
    T *out = (T *)p[0];                                                                            \
    if (s[0] == 1) {                                                                               \
      for (int64_t i = 0; i < n; i++) out[i] = v;                                                  \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) out[i * s[0]] = v;                                           \
    }                                                                                              \
  }
TG_CPU_FILL_ROW(fill_row_f32, float)
TG_CPU_FILL_ROW(fill_row_f64, double)
TG_CPU_FILL_ROW(fill_row_i64, int64_t)

static tg_cpu_row_fn fill_row(tg_dtype dtype) {
  switch (dtype) {
  case TG_F32:
    return fill_row_f32;
  case TG_F64:
    return fill_row_f64;
  case TG_I64:
    return fill_row_i64;
  default:
    return NULL;
  }
}

tg_status tg_cpu_fill(tg_tensor *out, double value) {
  tg_cpu_row_fn fn = fill_row(out->dtype);
  if (!fn)
    return tg_set_error(TG_ERR_DTYPE, "fill: dtype %s is not supported", tg_dtype_name(out->dtype));
  tg_cpu_operand op = tg_cpu_operand_of(out);
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, out->ndim, out->sizes, 1, &op);
  tg_cpu_scalars sc = {value, 0};
  tg_cpu_iter_run(&it, fn, &sc, tg_cpu_should_parallelize(it.numel, TG_CPU_PARALLEL_MIN));
  return TG_OK;
}

/* ---- copy: one row function per (destination, source) dtype pair ---- */

#define TG_CPU_COPY_ROW(NAME, TO, FROM)                                                            \
  static void NAME(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                 \
    (void)ctx;                                                                                     \
    TO *out = (TO *)p[0];                                                                          \
    const FROM *in = (const FROM *)p[1];                                                           \
    if (s[0] == 1 && s[1] == 1) {                                                                  \
      for (int64_t i = 0; i < n; i++) out[i] = TG_CPU_CONVERT(TO, in[i]);                          \
    } else if (s[1] == 0) {                                                                        \
      const TO v = TG_CPU_CONVERT(TO, in[0]);                                                      \
      for (int64_t i = 0; i < n; i++) out[i * s[0]] = v;                                           \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) out[i * s[0]] = TG_CPU_CONVERT(TO, in[i * s[1]]);            \
    }                                                                                              \
  }

/* Same dtype: contiguous rows are a memmove (src may be out itself). */
#define TG_CPU_COPY_SAME_ROW(NAME, T)                                                              \
  static void NAME(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                 \
    (void)ctx;                                                                                     \
    T *out = (T *)p[0];                                                                            \
    const T *in = (const T *)p[1];                                                                 \
    if (s[0] == 1 && s[1] == 1) {                                                                  \
      if ((const void *)out != (const void *)in) memmove(out, in, (size_t)n * sizeof(T));          \
    } else if (s[1] == 0) {                                                                        \
      const T v = in[0];                                                                           \
      for (int64_t i = 0; i < n; i++) out[i * s[0]] = v;                                           \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) out[i * s[0]] = in[i * s[1]];                                \
    }                                                                                              \
  }

TG_CPU_COPY_SAME_ROW(copy_row_f32_f32, float)
TG_CPU_COPY_ROW(copy_row_f32_f64, float, double)
TG_CPU_COPY_ROW(copy_row_f32_i64, float, int64_t)
TG_CPU_COPY_ROW(copy_row_f64_f32, double, float)
TG_CPU_COPY_SAME_ROW(copy_row_f64_f64, double)
TG_CPU_COPY_ROW(copy_row_f64_i64, double, int64_t)
TG_CPU_COPY_ROW(copy_row_i64_f32, int64_t, float)
TG_CPU_COPY_ROW(copy_row_i64_f64, int64_t, double)
TG_CPU_COPY_SAME_ROW(copy_row_i64_i64, int64_t)

/* [destination][source] */
static const tg_cpu_row_fn copy_rows[TG_NUM_DTYPES][TG_NUM_DTYPES] = {
    [TG_F32] =
        {[TG_F32] = copy_row_f32_f32, [TG_F64] = copy_row_f32_f64, [TG_I64] = copy_row_f32_i64},
    [TG_F64] =
        {[TG_F32] = copy_row_f64_f32, [TG_F64] = copy_row_f64_f64, [TG_I64] = copy_row_f64_i64},
    [TG_I64] =
        {[TG_F32] = copy_row_i64_f32, [TG_F64] = copy_row_i64_f64, [TG_I64] = copy_row_i64_i64},
};

static bool dtype_known(tg_dtype d) { return (unsigned)d < (unsigned)TG_NUM_DTYPES; }

tg_status tg_cpu_copy(tg_tensor *out, const tg_tensor *src) {
  if (!dtype_known(out->dtype) || !dtype_known(src->dtype) || !copy_rows[out->dtype][src->dtype])
    return tg_set_error(TG_ERR_DTYPE, "copy: dtype %s to %s is not supported",
                        tg_dtype_name(src->dtype), tg_dtype_name(out->dtype));
  /* src has out's sizes, or fewer leading dims (it broadcasts on the left): align it. */
  if (src->ndim > out->ndim)
    return tg_set_error(TG_ERR_SHAPE, "copy: source has %d dims but destination %d", src->ndim,
                        out->ndim);
  int64_t src_strides[TG_MAX_DIMS];
  const int lead = out->ndim - src->ndim;
  for (int d = 0; d < out->ndim; d++) {
    if (d < lead) {
      src_strides[d] = 0;
    } else {
      int64_t size = src->sizes[d - lead];
      if (size != out->sizes[d] && size != 1)
        return tg_set_error(TG_ERR_SHAPE, "copy: source dim %d is %lld but destination's is %lld",
                            d - lead, (long long)size, (long long)out->sizes[d]);
      src_strides[d] = size == out->sizes[d] ? src->strides[d - lead] : 0;
    }
  }
  tg_cpu_operand ops[2] = {tg_cpu_operand_of(out), tg_cpu_operand_of(src)};
  ops[1].strides = src_strides;
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, out->ndim, out->sizes, 2, ops);
  tg_cpu_iter_run(&it, copy_rows[out->dtype][src->dtype], NULL,
                  tg_cpu_should_parallelize(it.numel, TG_CPU_PARALLEL_MIN));
  return TG_OK;
}
