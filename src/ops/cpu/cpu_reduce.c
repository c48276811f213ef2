/* The backend's reduce: every kind of ops/def/reduction.def over one dim, for F32, F64 and I64.
 *
 * Every kind is an iteration over the outputs (x with the reduced dim dropped, beside out),
 * whose row function reduces R = x.sizes[dim] elements per output. Two shapes of row:
 *  - the reduced dim is contiguous (stride 1): each output reduces one contiguous run;
 *  - otherwise (e.g. summing a [B, C] matrix over B, the bias gradient): a chunk of
 *    neighbouring outputs is reduced together, walking x one reduced index at a time, so
 *    the inner loop runs along the outputs' own (usually contiguous) stride and vectorizes.
 *
 * Sums accumulate in double for F32 and F64 alike (I64 in uint64_t: wrap-around, as PyTorch's
 * int64 sum, without signed overflow), in 8 interleaved partial sums for a
 * contiguous run: float inputs lose nothing to accumulation, and the order of additions
 * does not depend on the thread count, so results are reproducible. */
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/cpu_vecmath.h"

/* Outputs reduced together in the strided case: the accumulators live on the stack. */
#define TG_CPU_REDUCE_CHUNK 256

typedef struct reduce_ctx {
  int64_t size;   /* R */
  int64_t stride; /* x's stride along the reduced dim */
} reduce_ctx;

/* ---- sum ---- */

#define TG_CPU_SUM_ROW(NAME, T, ACC)                                                               \
  static void NAME(int64_t n, char *const *p, const int64_t *s, const void *vctx) {                \
    const reduce_ctx *ctx = (const reduce_ctx *)vctx;                                              \
    const int64_t R = ctx->size, rs = ctx->stride;                                                 \
    T *out = (T *)p[0];                                                                            \
    const T *x = (const T *)p[1];                                                                  \
    if (rs == 1) {                                                                                 \
      for (int64_t j = 0; j < n; j++) {                                                            \
        const T *run = x + j * s[1];                                                               \
        ACC acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                     \
        int64_t r = 0;                                                                             \
        for (; r + 8 <= R; r += 8)                                                                 \
          for (int l = 0; l < 8; l++) acc[l] += (ACC)run[r + l];                                   \
        for (; r < R; r++) acc[r & 7] += (ACC)run[r];                                              \
        out[j * s[0]] = (T)(((acc[0] + acc[4]) + (acc[1] + acc[5])) +                              \
                            ((acc[2] + acc[6]) + (acc[3] + acc[7])));                              \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    for (int64_t j0 = 0; j0 < n; j0 += TG_CPU_REDUCE_CHUNK) {                                      \
      const int64_t len = n - j0 < TG_CPU_REDUCE_CHUNK ? n - j0 : TG_CPU_REDUCE_CHUNK;             \
      ACC acc[TG_CPU_REDUCE_CHUNK];                                                                \
      for (int64_t j = 0; j < len; j++) acc[j] = 0;                                                \
      const T *base = x + j0 * s[1];                                                               \
      for (int64_t r = 0; r < R; r++) {                                                            \
        const T *row = base + r * rs;                                                              \
        if (s[1] == 1) {                                                                           \
          for (int64_t j = 0; j < len; j++) acc[j] += (ACC)row[j];                                 \
        } else {                                                                                   \
          for (int64_t j = 0; j < len; j++) acc[j] += (ACC)row[j * s[1]];                          \
        }                                                                                          \
      }                                                                                            \
      for (int64_t j = 0; j < len; j++) out[(j0 + j) * s[0]] = (T)acc[j];                          \
    }                                                                                              \
  }

/* ---- select (max, min): the first best wins, and the first NaN beats everything ---- */

/* NAME##_takes: whether v replaces the running best: the kind's strict `better` (so ties
 * keep the first index), or a NaN when the best is not yet NaN. */
/* A long contiguous run goes in two passes: the best value and whether any is NaN, with 16
 * independent running bests (which vectorize), then the first index holding a NaN, else the
 * first holding a value equal to the best (-0 and +0 are equal, as under `better`, so the
 * first of them wins either way). The one-pass loop below, a compare and a branch per
 * element, took 57 ms to argmax [1024, 50257] F32, six times a sum's time. */
#define TG_CPU_SELECT_SCAN_MIN 64
#define TG_CPU_SELECT_ROW(NAME, T, better)                                                         \
  static inline bool NAME##_takes(T v, T best) { return (better) || (v != v && best == best); }    \
  /* Reduced index 0 of such outputs: a loop, not memcpy and memset (which GCC expands to          \
   * rep movs and rep stos: ~30 cycles to start, for the 16 outputs a pooling row has). */         \
  TG_VF_CLONES static void NAME##_chunk_first(int64_t len, const T *restrict row,                  \
                                              T *restrict values, int64_t *restrict at) {          \
    for (int64_t j = 0; j < len; j++) {                                                            \
      values[j] = row[j];                                                                          \
      at[j] = 0;                                                                                   \
    }                                                                                              \
  }                                                                                                \
  /* One reduced index r over len neighbouring outputs whose inputs are contiguous: without        \
   * branches, so that it vectorizes (a branch per element mispredicts on random data: the         \
   * 2x2 pooling of a small CNN spent 9 ns per output here). */                                    \
  TG_VF_CLONES static void NAME##_chunk_step(int64_t len, const T *restrict row, int64_t r,        \
                                             T *restrict values, int64_t *restrict at) {           \
    for (int64_t j = 0; j < len; j++) {                                                            \
      const T v = row[j], best = values[j];                                                        \
      const bool take = (better) | ((v != v) & (best == best));                                    \
      values[j] = take ? v : best;                                                                 \
      at[j] = take ? r : at[j];                                                                    \
    }                                                                                              \
  }                                                                                                \
  TG_VF_CLONES static int64_t NAME##_scan(const T *restrict run, int64_t R) {                      \
    T acc[16];                                                                                     \
    int32_t nan[16];                                                                               \
    for (int k = 0; k < 16; k++) acc[k] = run[0], nan[k] = 0;                                      \
    int64_t r = 0;                                                                                 \
    /* not unrolled: GCC 12 at -O3 unrolls the lanes into scalars and vectorizes nothing */        \
    for (; r + 16 <= R; r += 16) {                                                                 \
      _Pragma("GCC unroll 1") for (int k = 0; k < 16; k++) {                                       \
        const T v = run[r + k], best = acc[k];                                                     \
        acc[k] = (better) ? v : best;                                                              \
      }                                                                                            \
      _Pragma("GCC unroll 1") for (int k = 0; k < 16; k++) nan[k] |= run[r + k] != run[r + k];     \
    }                                                                                              \
    for (; r < R; r++) {                                                                           \
      const T v = run[r], best = acc[0];                                                           \
      acc[0] = (better) ? v : best;                                                                \
      nan[0] |= v != v;                                                                            \
    }                                                                                              \
    int32_t any_nan = run[0] != run[0];                                                            \
    T top = acc[0];                                                                                \
    for (int k = 0; k < 16; k++) {                                                                 \
      const T v = acc[k], best = top;                                                              \
      top = (better) ? v : best;                                                                   \
      any_nan |= nan[k];                                                                           \
    }                                                                                              \
    int64_t i = 0;                                                                                 \
    if (any_nan)                                                                                   \
      while (run[i] == run[i]) i++;                                                                \
    else                                                                                           \
      while (!(run[i] == top)) i++;                                                                \
    return i;                                                                                      \
  }                                                                                                \
  static void NAME(int64_t n, char *const *p, const int64_t *s, const void *vctx) {                \
    const reduce_ctx *ctx = (const reduce_ctx *)vctx;                                              \
    const int64_t R = ctx->size, rs = ctx->stride;                                                 \
    T *values = (T *)p[0];                                                                         \
    int64_t *indices = (int64_t *)p[1];                                                            \
    const T *x = (const T *)p[2];                                                                  \
    if (rs == 1 && R >= TG_CPU_SELECT_SCAN_MIN) {                                                  \
      for (int64_t j = 0; j < n; j++) {                                                            \
        const T *run = x + j * s[2];                                                               \
        const int64_t best_r = NAME##_scan(run, R);                                                \
        values[j * s[0]] = run[best_r];                                                            \
        indices[j * s[1]] = best_r;                                                                \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    if (rs == 1 || n == 1) {                                                                       \
      for (int64_t j = 0; j < n; j++) {                                                            \
        const T *run = x + j * s[2];                                                               \
        T best = run[0];                                                                           \
        int64_t best_r = 0;                                                                        \
        for (int64_t r = 1; r < R && best == best; r++) {                                          \
          const T v = run[r * rs];                                                                 \
          if (NAME##_takes(v, best)) {                                                             \
            best = v;                                                                              \
            best_r = r;                                                                            \
          }                                                                                        \
        }                                                                                          \
        values[j * s[0]] = best;                                                                   \
        indices[j * s[1]] = best_r;                                                                \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    /* All three unit-stride (a contiguous x reduced over an outer dim): in place. */              \
    const bool direct = s[0] == 1 && s[1] == 1 && s[2] == 1;                                       \
    for (int64_t j0 = 0; j0 < n; j0 += TG_CPU_REDUCE_CHUNK) {                                      \
      const int64_t len = n - j0 < TG_CPU_REDUCE_CHUNK ? n - j0 : TG_CPU_REDUCE_CHUNK;             \
      T chunk_v[TG_CPU_REDUCE_CHUNK];                                                              \
      int64_t chunk_r[TG_CPU_REDUCE_CHUNK];                                                        \
      T *best = direct ? values + j0 : chunk_v;                                                    \
      int64_t *best_r = direct ? indices + j0 : chunk_r;                                           \
      const T *base = x + j0 * s[2];                                                               \
      if (s[2] == 1)                                                                               \
        NAME##_chunk_first(len, base, best, best_r);                                               \
      else                                                                                         \
        for (int64_t j = 0; j < len; j++) {                                                        \
          best[j] = base[j * s[2]];                                                                \
          best_r[j] = 0;                                                                           \
        }                                                                                          \
      for (int64_t r = 1; r < R; r++) {                                                            \
        const T *row = base + r * rs;                                                              \
        if (s[2] == 1)                                                                             \
          NAME##_chunk_step(len, row, r, best, best_r);                                            \
        else                                                                                       \
          for (int64_t j = 0; j < len; j++) {                                                      \
            const T v = row[j * s[2]];                                                             \
            if (NAME##_takes(v, best[j])) {                                                        \
              best[j] = v;                                                                         \
              best_r[j] = r;                                                                       \
            }                                                                                      \
          }                                                                                        \
      }                                                                                            \
      for (int64_t j = 0; !direct && j < len; j++) {                                               \
        values[(j0 + j) * s[0]] = best[j];                                                         \
        indices[(j0 + j) * s[1]] = best_r[j];                                                      \
      }                                                                                            \
    }                                                                                              \
  }

/* The rows of every kind, and the table the entry point dispatches on. */
#define TG_REDUCE_SUM(KIND, name, grad)                                                            \
  TG_CPU_SUM_ROW(name##_row_f32, float, double)                                                    \
  TG_CPU_SUM_ROW(name##_row_f64, double, double) TG_CPU_SUM_ROW(name##_row_i64, int64_t, uint64_t)
#define TG_REDUCE_SELECT(KIND, name, better, grad)                                                 \
  TG_CPU_SELECT_ROW(name##_row_f32, float, better)                                                 \
  TG_CPU_SELECT_ROW(name##_row_f64, double, better)                                                \
  TG_CPU_SELECT_ROW(name##_row_i64, int64_t, better)
#define TG_REDUCE_SCALED(name, KIND, scale, grad)
#include "ops/def/reduction.def"

typedef struct reduce_kind_info {
  const char *name;                  /* in errors: "sum_dim: ..." */
  const char *what;                  /* "sum" */
  bool select;                       /* writes indices too */
  tg_cpu_row_fn rows[TG_NUM_DTYPES]; /* F32, F64, I64 (the enum's order) */
} reduce_kind_info;

#define TG_CPU_REDUCE_SELECTS_SUM false
#define TG_CPU_REDUCE_SELECTS_SELECT true
static const reduce_kind_info kinds[TG_NUM_REDUCE] = {
#define TG_REDUCE_KIND(KIND, name, how)                                                            \
  [TG_REDUCE_##                                                                                    \
      KIND] = {#name "_dim",                                                                       \
               #name,                                                                              \
               TG_CPU_REDUCE_SELECTS_##how,                                                        \
               {[TG_F32] = name##_row_f32, [TG_F64] = name##_row_f64, [TG_I64] = name##_row_i64}},
#include "ops/def/reduction.def"
};

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

/* Outputs per range of a parallel reduction. Over a strided dim each range walks every row
 * of x for its outputs, so a range should read as long a piece of each row as it can: one
 * range per thread (the outputs split in contiguous parts, 16-aligned). Measured with
 * parallel_thresholds on the 2-core Zen 3 guest, sum over dim 0 of [n / 256, 256], 1-thread
 * time over 2-thread time: ranges of 16 outputs 0.3 at [16384, 256], of 64 outputs 0.57-1.11
 * from 4096 to 4M elements. */
static int64_t reduce_align(const reduce_ctx *ctx, int64_t outputs) {
  if (ctx->stride == 1) return 16;
  const int64_t threads = tg_get_num_threads();
  const int64_t per_thread = (outputs + threads - 1) / threads;
  return per_thread < 16 ? 16 : (per_thread + 15) / 16 * 16;
}

/* Sums: an empty x sums to zeros without a walk (its strides may be anything, as_strided,
 * and the walk over out would form x pointers from them); the row functions handle an
 * empty reduced dim (R == 0). */
static tg_status sum_dim(const reduce_kind_info *k, tg_tensor *out, const tg_tensor *x, int dim) {
  tg_status st = check_reduced(k->name, "out", out, x, dim);
  if (st != TG_OK) return st;
  if (tg_cpu_numel(x) == 0) return tg_cpu_fill(out, 0.0);
  int64_t sizes[TG_MAX_DIMS];
  outer_sizes(x, dim, sizes);
  tg_cpu_operand ops[2] = {tg_cpu_operand_of(out), tg_cpu_operand_of(x)};
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, x->ndim, sizes, 2, ops);
  reduce_ctx ctx = {x->sizes[dim], x->strides[dim]};
  const bool parallel =
      it.numel > 1 && tg_cpu_should_parallelize(tg_cpu_numel(x), TG_CPU_PARALLEL_MIN_REDUCE);
  tg_cpu_iter_run_aligned(&it, k->rows[x->dtype], &ctx, parallel, reduce_align(&ctx, it.numel));
  return TG_OK;
}

static tg_status select_dim(const reduce_kind_info *k, tg_tensor *values, tg_tensor *indices,
                            const tg_tensor *x, int dim) {
  if (!indices) return tg_set_error(TG_ERR_ARGUMENT, "%s: needs indices", k->name);
  if (indices->dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: indices dtype %s is not supported (I64 only)", k->name,
                        tg_dtype_name(indices->dtype));
  tg_status st = check_reduced(k->name, "values", values, x, dim);
  if (st == TG_OK) st = check_reduced(k->name, "indices", indices, x, dim);
  if (st != TG_OK) return st;
  if (x->sizes[dim] == 0 && tg_cpu_numel(values) > 0)
    return tg_set_error(TG_ERR_SHAPE, "%s: cannot take the %s over dim %d of size 0", k->name,
                        k->what, dim);
  int64_t sizes[TG_MAX_DIMS];
  outer_sizes(x, dim, sizes);
  tg_cpu_operand ops[3] = {tg_cpu_operand_of(values), tg_cpu_operand_of(indices),
                           tg_cpu_operand_of(x)};
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, x->ndim, sizes, 3, ops);
  reduce_ctx ctx = {x->sizes[dim], x->strides[dim]};
  const bool parallel =
      it.numel > 1 && tg_cpu_should_parallelize(tg_cpu_numel(x), TG_CPU_PARALLEL_MIN_REDUCE);
  tg_cpu_iter_run_aligned(&it, k->rows[x->dtype], &ctx, parallel, reduce_align(&ctx, it.numel));
  return TG_OK;
}

tg_status tg_cpu_reduce(int kind, tg_tensor *values, tg_tensor *indices, const tg_tensor *x,
                        int dim) {
  if ((unsigned)kind >= TG_NUM_REDUCE)
    return tg_set_error(TG_ERR_ARGUMENT, "reduce: unknown kind %d", (int)kind);
  const reduce_kind_info *k = &kinds[kind];
  if (dim < 0 || dim >= x->ndim)
    return tg_set_error(TG_ERR_INDEX, "%s: dim %d is out of range for %d dims", k->name, dim,
                        x->ndim);
  if ((unsigned)x->dtype >= TG_NUM_DTYPES || values->dtype != x->dtype)
    return tg_set_error(TG_ERR_DTYPE,
                        "%s: dtype %s is not supported (F32, F64, I64 with the values' dtype)",
                        k->name, tg_dtype_name(x->dtype));
  return k->select ? select_dim(k, values, indices, x, dim) : sum_dim(k, values, x, dim);
}
