/* sum_dim and max_dim.
 *
 * Both are an iteration over the outputs (x with the reduced dim dropped, beside out),
 * whose row function reduces R = x.sizes[dim] elements per output. Two shapes of row:
 *  - the reduced dim is contiguous (stride 1): each output reduces one contiguous run;
 *  - otherwise (e.g. summing a [B, C] matrix over B, the bias gradient): a chunk of
 *    neighbouring outputs is reduced together, walking x one reduced index at a time, so
 *    the inner loop runs along the outputs' own (usually contiguous) stride and vectorizes.
 *
 * Sums accumulate in double for F32 and F64 alike, in 8 interleaved partial sums for a
 * contiguous run: float inputs lose nothing to accumulation, and the order of additions
 * does not depend on the thread count, so results are reproducible. */
#include "ops/cpu/cpu_internal.h"

/* Outputs reduced together in the strided case: the accumulators live on the stack. */
#define TG_CPU_REDUCE_CHUNK 256

typedef struct reduce_ctx {
  int64_t size;   /* R */
  int64_t stride; /* x's stride along the reduced dim */
} reduce_ctx;

/* ---- sum ---- */

#define TG_CPU_SUM_ROW(NAME, T)                                                                    \
  static void NAME(int64_t n, char *const *p, const int64_t *s, const void *vctx) {                \
    const reduce_ctx *ctx = (const reduce_ctx *)vctx;                                              \
    const int64_t R = ctx->size, rs = ctx->stride;                                                 \
    T *out = (T *)p[0];                                                                            \
    const T *x = (const T *)p[1];                                                                  \
    if (rs == 1) {                                                                                 \
      for (int64_t j = 0; j < n; j++) {                                                            \
        const T *run = x + j * s[1];                                                               \
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                  \
        int64_t r = 0;                                                                             \
        for (; r + 8 <= R; r += 8)                                                                 \
          for (int l = 0; l < 8; l++) acc[l] += (double)run[r + l];                                \
        for (; r < R; r++) acc[r & 7] += (double)run[r];                                           \
        out[j * s[0]] = (T)(((acc[0] + acc[4]) + (acc[1] + acc[5])) +                              \
                            ((acc[2] + acc[6]) + (acc[3] + acc[7])));                              \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    for (int64_t j0 = 0; j0 < n; j0 += TG_CPU_REDUCE_CHUNK) {                                      \
      const int64_t len = n - j0 < TG_CPU_REDUCE_CHUNK ? n - j0 : TG_CPU_REDUCE_CHUNK;             \
      double acc[TG_CPU_REDUCE_CHUNK];                                                             \
      for (int64_t j = 0; j < len; j++) acc[j] = 0;                                                \
      const T *base = x + j0 * s[1];                                                               \
      for (int64_t r = 0; r < R; r++) {                                                            \
        const T *row = base + r * rs;                                                              \
        if (s[1] == 1) {                                                                           \
          for (int64_t j = 0; j < len; j++) acc[j] += (double)row[j];                              \
        } else {                                                                                   \
          for (int64_t j = 0; j < len; j++) acc[j] += (double)row[j * s[1]];                       \
        }                                                                                          \
      }                                                                                            \
      for (int64_t j = 0; j < len; j++) out[(j0 + j) * s[0]] = (T)acc[j];                          \
    }                                                                                              \
  }
TG_CPU_SUM_ROW(sum_row_f32, float)
TG_CPU_SUM_ROW(sum_row_f64, double)

/* ---- max: the first maximum wins, and the first NaN beats everything ---- */

/* Whether v replaces the running best: strictly greater (so ties keep the first index),
 * or a NaN when the best is not yet NaN. */
#define TG_CPU_MAX_TAKES(v, best) ((v) > (best) || ((v) != (v) && (best) == (best)))

#define TG_CPU_MAX_ROW(NAME, T)                                                                    \
  static void NAME(int64_t n, char *const *p, const int64_t *s, const void *vctx) {                \
    const reduce_ctx *ctx = (const reduce_ctx *)vctx;                                              \
    const int64_t R = ctx->size, rs = ctx->stride;                                                 \
    T *values = (T *)p[0];                                                                         \
    int64_t *indices = (int64_t *)p[1];                                                            \
    const T *x = (const T *)p[2];                                                                  \
    if (rs == 1 || n == 1) {                                                                       \
      for (int64_t j = 0; j < n; j++) {                                                            \
        const T *run = x + j * s[2];                                                               \
        T best = run[0];                                                                           \
        int64_t best_r = 0;                                                                        \
        for (int64_t r = 1; r < R && best == best; r++) {                                          \
          const T v = run[r * rs];                                                                 \
          if (TG_CPU_MAX_TAKES(v, best)) {                                                         \
            best = v;                                                                              \
            best_r = r;                                                                            \
          }                                                                                        \
        }                                                                                          \
        values[j * s[0]] = best;                                                                   \
        indices[j * s[1]] = best_r;                                                                \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    for (int64_t j0 = 0; j0 < n; j0 += TG_CPU_REDUCE_CHUNK) {                                      \
      const int64_t len = n - j0 < TG_CPU_REDUCE_CHUNK ? n - j0 : TG_CPU_REDUCE_CHUNK;             \
      T best[TG_CPU_REDUCE_CHUNK];                                                                 \
      int64_t best_r[TG_CPU_REDUCE_CHUNK];                                                         \
      const T *base = x + j0 * s[2];                                                               \
      for (int64_t j = 0; j < len; j++) {                                                          \
        best[j] = base[j * s[2]];                                                                  \
        best_r[j] = 0;                                                                             \
      }                                                                                            \
      for (int64_t r = 1; r < R; r++) {                                                            \
        const T *row = base + r * rs;                                                              \
        for (int64_t j = 0; j < len; j++) {                                                        \
          const T v = row[j * s[2]];                                                               \
          if (TG_CPU_MAX_TAKES(v, best[j])) {                                                      \
            best[j] = v;                                                                           \
            best_r[j] = r;                                                                         \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
      for (int64_t j = 0; j < len; j++) {                                                          \
        values[(j0 + j) * s[0]] = best[j];                                                         \
        indices[(j0 + j) * s[1]] = best_r[j];                                                      \
      }                                                                                            \
    }                                                                                              \
  }
TG_CPU_MAX_ROW(max_row_f32, float)
TG_CPU_MAX_ROW(max_row_f64, double)

/* ---- entry points ---- */

/* Checks the keepdim geometry of a reduction output against x. */
static tg_status check_reduced(const char *op, const char *arg, const tg_tensor *out,
                               const tg_tensor *x, int dim) {
  if (out->ndim != x->ndim)
    return tg_set_error(TG_ERR_SHAPE, "%s: %s has %d dims but x has %d (keepdim form expected)", op,
                        arg, out->ndim, x->ndim);
  for (int d = 0; d < x->ndim; d++) {
    int64_t want = d == dim ? 1 : x->sizes[d];
    if (out->sizes[d] != want)
      return tg_set_error(TG_ERR_SHAPE, "%s: %s dim %d is %lld, expected %lld", op, arg, d,
                          (long long)out->sizes[d], (long long)want);
  }
  return TG_OK;
}

/* Sizes of the outer iteration: x's sizes with dim set to 1 (then dropped by the iter). */
static void outer_sizes(const tg_tensor *x, int dim, int64_t *sizes) {
  for (int d = 0; d < x->ndim; d++) sizes[d] = d == dim ? 1 : x->sizes[d];
}

tg_status tg_cpu_sum_dim(tg_tensor *out, const tg_tensor *x, int dim) {
  if (dim < 0 || dim >= x->ndim)
    return tg_set_error(TG_ERR_INDEX, "sum_dim: dim %d is out of range for %d dims", dim, x->ndim);
  if ((x->dtype != TG_F32 && x->dtype != TG_F64) || out->dtype != x->dtype)
    return tg_set_error(TG_ERR_DTYPE,
                        "sum_dim: dtype %s is not supported (F32, F64 with out's dtype)",
                        tg_dtype_name(x->dtype));
  tg_status st = check_reduced("sum_dim", "out", out, x, dim);
  if (st != TG_OK) return st;
  /* An empty x sums to zeros without a walk: its strides may be anything (as_strided), and
   * the walk over out would form x pointers from them. */
  if (tg_cpu_numel(x) == 0) return tg_cpu_fill(out, 0.0);
  int64_t sizes[TG_MAX_DIMS];
  outer_sizes(x, dim, sizes);
  tg_cpu_operand ops[2] = {tg_cpu_operand_of(out), tg_cpu_operand_of(x)};
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, x->ndim, sizes, 2, ops);
  reduce_ctx ctx = {x->sizes[dim], x->strides[dim]};
  /* An empty reduced dim sums to 0; the row functions handle R == 0. */
  const bool parallel =
      it.numel > 1 && tg_cpu_should_parallelize(tg_cpu_numel(x), TG_CPU_PARALLEL_MIN);
  tg_cpu_iter_run(&it, x->dtype == TG_F32 ? sum_row_f32 : sum_row_f64, &ctx, parallel);
  return TG_OK;
}

tg_status tg_cpu_max_dim(tg_tensor *values, tg_tensor *indices, const tg_tensor *x, int dim) {
  if (dim < 0 || dim >= x->ndim)
    return tg_set_error(TG_ERR_INDEX, "max_dim: dim %d is out of range for %d dims", dim, x->ndim);
  if ((x->dtype != TG_F32 && x->dtype != TG_F64) || values->dtype != x->dtype)
    return tg_set_error(TG_ERR_DTYPE,
                        "max_dim: dtype %s is not supported (F32, F64 with values' dtype)",
                        tg_dtype_name(x->dtype));
  if (indices->dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "max_dim: indices dtype %s is not supported (I64 only)",
                        tg_dtype_name(indices->dtype));
  tg_status st = check_reduced("max_dim", "values", values, x, dim);
  if (st == TG_OK) st = check_reduced("max_dim", "indices", indices, x, dim);
  if (st != TG_OK) return st;
  if (x->sizes[dim] == 0 && tg_cpu_numel(values) > 0)
    return tg_set_error(TG_ERR_SHAPE, "max_dim: cannot take the max over dim %d of size 0", dim);
  int64_t sizes[TG_MAX_DIMS];
  outer_sizes(x, dim, sizes);
  tg_cpu_operand ops[3] = {tg_cpu_operand_of(values), tg_cpu_operand_of(indices),
                           tg_cpu_operand_of(x)};
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, x->ndim, sizes, 3, ops);
  reduce_ctx ctx = {x->sizes[dim], x->strides[dim]};
  const bool parallel =
      it.numel > 1 && tg_cpu_should_parallelize(tg_cpu_numel(x), TG_CPU_PARALLEL_MIN);
  tg_cpu_iter_run(&it, x->dtype == TG_F32 ? max_row_f32 : max_row_f64, &ctx, parallel);
  return TG_OK;
}
