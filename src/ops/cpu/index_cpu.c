/* The CPU kernels of gather, scatter_add, index_select and index_add (src/ops/def/index.def):
 * F32, F64 and I64, any strides. Indices were checked by the op.
 *
 * gather / scatter_add run over "rows": the batch positions *B of [*B, M], each with its M
 * picks along the last dim. A row's writes stay in its own part of out (the batch of out is
 * not overlapping), so rows run in parallel (the pool) and the scatter's repeated indices add
 * up within one row in m order: the same sums for any thread count.
 * index_select / index_add run over [A, M, K]: the select's rows (a, m) in parallel; the add
 * splits (a, column blocks) among threads and walks m in order inside each, for the same
 * reason. */
#include <string.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"

/* Columns per task of index_add: a cache line of doubles and then some. */
#define TG_CPU_INDEX_ADD_COLUMNS 64

/* ---- gather / scatter_add along the last dim of [*B, M] ---- */

typedef struct along_pass {
  char *out;
  const char *in;     /* gather: x [*B, N]; scatter: src [*B, M] */
  const int64_t *idx; /* [*B, M] */
  int nb;             /* batch dims */
  int64_t bsizes[TG_MAX_DIMS];
  int64_t os[TG_MAX_DIMS], ins[TG_MAX_DIMS],
      is[TG_MAX_DIMS]; /* strides, in elements; [nb]: last dim */
  int64_t M;
} along_pass;

/* Element offsets of row r's start in out, in and idx. */
static void row_offsets(const along_pass *p, int64_t r, int64_t *o, int64_t *in, int64_t *ix) {
  *o = *in = *ix = 0;
  for (int d = p->nb - 1; d >= 0; d--) {
    const int64_t pos = r % p->bsizes[d];
    r /= p->bsizes[d];
    *o += pos * p->os[d];
    *in += pos * p->ins[d];
    *ix += pos * p->is[d];
  }
}

/* Steps pos (the row's batch position) and the offsets to the next row. */
static void next_row(const along_pass *p, int64_t *pos, int64_t *o, int64_t *in, int64_t *ix) {
  for (int d = p->nb - 1; d >= 0; d--) {
    *o += p->os[d];
    *in += p->ins[d];
    *ix += p->is[d];
    if (++pos[d] < p->bsizes[d]) return;
    *o -= pos[d] * p->os[d];
    *in -= pos[d] * p->ins[d];
    *ix -= pos[d] * p->is[d];
    pos[d] = 0;
  }
}

static void row_position(const along_pass *p, int64_t r, int64_t *pos) {
  for (int d = p->nb - 1; d >= 0; d--) {
    pos[d] = r % p->bsizes[d];
    r /= p->bsizes[d];
  }
}

/* Rows [r0, r1): STEP(dst, src, i) for each pick m, with i its index entry. */
#define TG_CPU_ALONG(name, T, STEP)                                                                \
  static void name(int64_t r0, int64_t r1, void *ctx) {                                            \
    const along_pass *p = ctx;                                                                     \
    int64_t pos[TG_MAX_DIMS], o, in, ix;                                                           \
    row_position(p, r0, pos);                                                                      \
    row_offsets(p, r0, &o, &in, &ix);                                                              \
    const int64_t ol = p->os[p->nb], il = p->ins[p->nb], xl = p->is[p->nb];                        \
    for (int64_t r = r0; r < r1; r++) {                                                            \
      T *out = (T *)p->out + o;                                                                    \
      const T *src = (const T *)p->in + in;                                                        \
      const int64_t *idx = p->idx + ix;                                                            \
      for (int64_t m = 0; m < p->M; m++) STEP;                                                     \
      next_row(p, pos, &o, &in, &ix);                                                              \
    }                                                                                              \
  }
#define GATHER_STEP out[m * ol] = src[idx[m * xl] * il]
#define SCATTER_STEP out[idx[m * xl] * ol] += src[m * il]
/* int64 adds wrap (as PyTorch's), through unsigned arithmetic to stay defined */
#define SCATTER_STEP_I64                                                                           \
  out[idx[m * xl] * ol] = (int64_t)((uint64_t)out[idx[m * xl] * ol] + (uint64_t)src[m * il])
TG_CPU_ALONG(gather_f32, float, GATHER_STEP)
TG_CPU_ALONG(gather_f64, double, GATHER_STEP)
TG_CPU_ALONG(gather_i64, int64_t, GATHER_STEP)
TG_CPU_ALONG(scatter_f32, float, SCATTER_STEP)
TG_CPU_ALONG(scatter_f64, double, SCATTER_STEP)
TG_CPU_ALONG(scatter_i64, int64_t, SCATTER_STEP_I64)

static tg_status check_dtypes(const char *op, const tg_tensor *a, const tg_tensor *b,
                              const tg_tensor *index) {
  if (a->dtype != b->dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtypes %s and %s differ", op, tg_dtype_name(a->dtype),
                        tg_dtype_name(b->dtype));
  if (index->dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: index dtype %s is not supported (I64 only)", op,
                        tg_dtype_name(index->dtype));
  return TG_OK;
}

/* out (the side written), in, index: one ndim >= 1, equal batch sizes, index's last dim
 * in's (scatter) or out's (gather). */
static tg_status along_last(const char *op, bool scatter, tg_tensor *out, const tg_tensor *in,
                            const tg_tensor *index) {
  tg_status st = check_dtypes(op, out, in, index);
  if (st != TG_OK) return st;
  const int nd = index->ndim;
  const tg_tensor *picks = scatter ? in : out; /* of index's sizes */
  if (nd < 1 || out->ndim != nd || in->ndim != nd ||
      !tg__dims_equal(nd, picks->sizes, nd, index->sizes) ||
      !tg__dims_equal(nd - 1, out->sizes, nd - 1, in->sizes))
    return tg_set_error(TG_ERR_SHAPE, "%s: expected [*B, N], [*B, M] and an index [*B, M]", op);
  along_pass p = {.out = tg_cpu_data(out),
                  .in = tg_cpu_data(in),
                  .idx = (const int64_t *)tg_cpu_data(index),
                  .nb = nd - 1,
                  .M = index->sizes[nd - 1]};
  for (int d = 0; d < nd; d++) {
    if (d < nd - 1) p.bsizes[d] = index->sizes[d];
    p.os[d] = out->strides[d];
    p.ins[d] = in->strides[d];
    p.is[d] = index->strides[d];
  }
  const int64_t rows = tg__numel(nd - 1, index->sizes);
  if (rows * p.M == 0) return TG_OK;
  tg_cpu_range_fn fn = out->dtype == TG_F32   ? (scatter ? scatter_f32 : gather_f32)
                       : out->dtype == TG_F64 ? (scatter ? scatter_f64 : gather_f64)
                                              : (scatter ? scatter_i64 : gather_i64);
  tg_cpu_parallel_ranges(rows, 1, tg_cpu_should_parallelize(rows * p.M, TG_CPU_PARALLEL_MIN), fn,
                         &p);
  return TG_OK;
}

tg_status tg__kernel_gather_along_last_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("gather.along_last", n, 3);
  return along_last("gather.along_last", false, t[0], t[1], t[2]);
}

tg_status tg__kernel_scatter_add_along_last_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("scatter_add.along_last", n, 3);
  return along_last("scatter_add.along_last", true, t[0], t[1], t[2]);
}

/* ---- index_select / index_add over [A, M, K] ---- */

typedef struct rows3_pass {
  char *out;
  const char *in;
  const int64_t *idx;
  int64_t is, A, M, K, chunks;
  int64_t o0, o1, o2, i0, i1, i2; /* strides of out and in */
} rows3_pass;

/* Rows (a, m) of out [A, M, K] in [r0, r1): out[a, m, :] = x[a, idx[m], :]. */
#define TG_CPU_SELECT3(name, T)                                                                    \
  static void name(int64_t r0, int64_t r1, void *ctx) {                                            \
    const rows3_pass *p = ctx;                                                                     \
    for (int64_t r = r0; r < r1; r++) {                                                            \
      const int64_t a = r / p->M, m = r % p->M;                                                    \
      T *dst = (T *)p->out + a * p->o0 + m * p->o1;                                                \
      const T *src = (const T *)p->in + a * p->i0 + p->idx[m * p->is] * p->i1;                     \
      if (p->o2 == 1 && p->i2 == 1)                                                                \
        memcpy(dst, src, sizeof(T) * (size_t)p->K);                                                \
      else                                                                                         \
        for (int64_t k = 0; k < p->K; k++) dst[k * p->o2] = src[k * p->i2];                        \
    }                                                                                              \
  }
TG_CPU_SELECT3(select3_f32, float)
TG_CPU_SELECT3(select3_f64, double)
TG_CPU_SELECT3(select3_i64, int64_t)

/* Tasks (a, column block) in [t0, t1): out[a, idx[m], cols] += src[a, m, cols], m in order. */
#define TG_CPU_ADD3(name, T, ADD)                                                                  \
  static void name(int64_t t0, int64_t t1, void *ctx) {                                            \
    const rows3_pass *p = ctx;                                                                     \
    for (int64_t t = t0; t < t1; t++) {                                                            \
      const int64_t a = t / p->chunks, c = t % p->chunks;                                          \
      const int64_t k0 = c * TG_CPU_INDEX_ADD_COLUMNS;                                             \
      const int64_t k1 =                                                                           \
          k0 + TG_CPU_INDEX_ADD_COLUMNS < p->K ? k0 + TG_CPU_INDEX_ADD_COLUMNS : p->K;             \
      for (int64_t m = 0; m < p->M; m++) {                                                         \
        T *dst = (T *)p->out + a * p->o0 + p->idx[m * p->is] * p->o1;                              \
        const T *src = (const T *)p->in + a * p->i0 + m * p->i1;                                   \
        for (int64_t k = k0; k < k1; k++) ADD(dst[k * p->o2], src[k * p->i2]);                     \
      }                                                                                            \
    }                                                                                              \
  }
#define ADD_FLOAT(d, s) d += s
#define ADD_I64(d, s) d = (int64_t)((uint64_t)(d) + (uint64_t)(s))
TG_CPU_ADD3(add3_f32, float, ADD_FLOAT)
TG_CPU_ADD3(add3_f64, double, ADD_FLOAT)
TG_CPU_ADD3(add3_i64, int64_t, ADD_I64)

/* table [A, N, K] (select's x, add's out), rows [A, M, K] (select's out, add's src), index [M] */
static tg_status rows3(const char *op, bool add, tg_tensor *table, tg_tensor *rows,
                       const tg_tensor *index) {
  tg_status st = check_dtypes(op, table, rows, index);
  if (st != TG_OK) return st;
  if (table->ndim != 3 || rows->ndim != 3 || index->ndim != 1 ||
      rows->sizes[0] != table->sizes[0] || rows->sizes[2] != table->sizes[2] ||
      rows->sizes[1] != index->sizes[0])
    return tg_set_error(TG_ERR_SHAPE, "%s: expected [A, N, K], [A, M, K] and an index [M]", op);
  tg_tensor *out = add ? table : rows;
  const tg_tensor *in = add ? rows : table;
  rows3_pass p = {.out = tg_cpu_data(out),
                  .in = tg_cpu_data(in),
                  .idx = (const int64_t *)tg_cpu_data(index),
                  .is = index->strides[0],
                  .A = rows->sizes[0],
                  .M = rows->sizes[1],
                  .K = rows->sizes[2],
                  .o0 = out->strides[0],
                  .o1 = out->strides[1],
                  .o2 = out->strides[2],
                  .i0 = in->strides[0],
                  .i1 = in->strides[1],
                  .i2 = in->strides[2]};
  if (p.A * p.M * p.K == 0) return TG_OK;
  const bool parallel = tg_cpu_should_parallelize(p.A * p.M * p.K, TG_CPU_PARALLEL_MIN);
  const tg_dtype dt = table->dtype;
  if (!add) {
    tg_cpu_parallel_ranges(p.A * p.M, 1, parallel,
                           dt == TG_F32   ? select3_f32
                           : dt == TG_F64 ? select3_f64
                                          : select3_i64,
                           &p);
    return TG_OK;
  }
  p.chunks = (p.K + TG_CPU_INDEX_ADD_COLUMNS - 1) / TG_CPU_INDEX_ADD_COLUMNS;
  tg_cpu_parallel_ranges(p.A * p.chunks, 1, parallel,
                         dt == TG_F32   ? add3_f32
                         : dt == TG_F64 ? add3_f64
                                        : add3_i64,
                         &p);
  return TG_OK;
}

tg_status tg__kernel_index_select_rows_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("index_select.rows", n, 3);
  return rows3("index_select.rows", false, t[1], t[0], t[2]);
}

tg_status tg__kernel_index_add_rows_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("index_add.rows", n, 3);
  return rows3("index_add.rows", true, t[0], t[1], t[2]);
}
