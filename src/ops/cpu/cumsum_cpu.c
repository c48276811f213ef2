/* cumsum's CPU kernels (src/ops/cumsum.c; lines in src/ops/def/pointwise_extra.def): prefix
 * sums along dim 1 of contiguous [outer, n, inner]. F32 sums in double, as PyTorch's CPU
 * cumsum does; I64 wraps (in uint64_t). The lines (outer x blocks of inner) are split among
 * the pool's threads when there are enough elements. */
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"

/* inner columns summed together: a row of partial sums that stays in L1 */
enum { BLOCK = 256 };

typedef struct scan_job {
  void *out;
  const void *x;
  int64_t n, inner, blocks;
  bool reverse;
} scan_job;

/* Jobs [j0, j1): job j is outer index j / blocks, columns of block j % blocks. ACC: the type
 * the sums run in; FROM / TO convert between it and T. */
#define SCAN_ROWS(name, T, ACC, TO)                                                                \
  static void name(int64_t j0, int64_t j1, void *ctx) {                                            \
    const scan_job *job = ctx;                                                                     \
    const int64_t n = job->n, inner = job->inner;                                                  \
    for (int64_t j = j0; j < j1; j++) {                                                            \
      const int64_t o = j / job->blocks, c0 = (j % job->blocks) * BLOCK;                           \
      const int64_t width = inner - c0 < BLOCK ? inner - c0 : BLOCK;                               \
      ACC acc[BLOCK];                                                                              \
      for (int64_t c = 0; c < width; c++) acc[c] = 0;                                              \
      const T *x = (const T *)job->x + o * n * inner + c0;                                         \
      T *out = (T *)job->out + o * n * inner + c0;                                                 \
      for (int64_t k = 0; k < n; k++) {                                                            \
        const int64_t i = job->reverse ? n - 1 - k : k;                                            \
        for (int64_t c = 0; c < width; c++) {                                                      \
          acc[c] += (ACC)x[i * inner + c];                                                         \
          out[i * inner + c] = TO(acc[c]);                                                         \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }
#define AS_F32(v) (float)(v)
#define AS_F64(v) (v)
#define AS_I64(v) (int64_t)(v)
SCAN_ROWS(scan_f32, float, double, AS_F32)
SCAN_ROWS(scan_f64, double, double, AS_F64)
SCAN_ROWS(scan_i64, int64_t, uint64_t, AS_I64)

static tg_status scan(const char *name, int n_tensors, tg_tensor *const *t, bool reverse) {
  TG__KERNEL_ARITY(name, n_tensors, 2);
  const tg_tensor *out = t[0], *x = t[1];
  const tg_dtype dtype = tg_tensor_dtype(x);
  if (tg_tensor_dtype(out) != dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: out is %s but x %s", name,
                        tg_dtype_name(tg_tensor_dtype(out)), tg_dtype_name(dtype));
  const int64_t *sizes = x->sizes;
  scan_job job = {tg_data_ptr(t[0]),
                  tg_data_ptr(x),
                  sizes[1],
                  sizes[2],
                  (sizes[2] + BLOCK - 1) / BLOCK,
                  reverse};
  tg_cpu_range_fn rows = dtype == TG_F32   ? scan_f32
                         : dtype == TG_F64 ? scan_f64
                         : dtype == TG_I64 ? scan_i64
                                           : NULL;
  if (!rows)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %s (F32, F64, I64 only)", name,
                        tg_dtype_name(dtype));
  const int64_t jobs = sizes[0] * job.blocks;
  if (jobs > 0 && job.n > 0)
    tg_cpu_parallel_ranges(
        jobs, 1, jobs > 1 && tg_cpu_should_parallelize(jobs * job.n * 2, TG_CPU_PARALLEL_MIN), rows,
        &job);
  return TG_OK;
}

tg_status tg__kernel_cumsum_scan_cpu(int n_tensors, tg_tensor *const *t) {
  return scan("cumsum.scan", n_tensors, t, false);
}

tg_status tg__kernel_cumsum_reverse_scan_cpu(int n_tensors, tg_tensor *const *t) {
  return scan("cumsum.reverse_scan", n_tensors, t, true);
}
