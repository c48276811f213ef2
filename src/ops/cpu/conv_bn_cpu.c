/* conv2d_batch_norm's CPU kernels (src/ops/conv_bn.c; lines in src/ops/def/conv_bn.def), over
 * contiguous planes [n, c, l] and [c] vectors. The per-channel sums split the channels among
 * the pool's threads (each channel summed by one thread, in one order: the same bits at any
 * thread count) and accumulate in double; the pointwise passes split the n * c planes. */
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"
#include "tg/dispatch.h"

/* The operands of one pass: planes [n, c, l], up to three [c] vectors, up to two outputs. */
typedef struct channel_pass {
  void *out0, *out1;
  const void *p0, *p1;      /* planes [n, c, l] */
  const void *v0, *v1, *v2; /* [c] */
  int64_t n, c, l;
} channel_pass;

/* Channels [c0, c1): mean and sum of squared deviations, two passes. */
#define STATS(name, T)                                                                             \
  static void name(int64_t c0, int64_t c1, void *ctx) {                                            \
    const channel_pass *p = ctx;                                                                   \
    const T *y = p->p0;                                                                            \
    T *mean = p->out0, *m2 = p->out1;                                                              \
    const double count = (double)(p->n * p->l);                                                    \
    for (int64_t ch = c0; ch < c1; ch++) {                                                         \
      double sum = 0, sq = 0;                                                                      \
      for (int64_t b = 0; b < p->n; b++) {                                                         \
        const T *row = y + (b * p->c + ch) * p->l;                                                 \
        for (int64_t i = 0; i < p->l; i++) sum += row[i];                                          \
      }                                                                                            \
      const double m = sum / count;                                                                \
      for (int64_t b = 0; b < p->n; b++) {                                                         \
        const T *row = y + (b * p->c + ch) * p->l;                                                 \
        for (int64_t i = 0; i < p->l; i++) sq += ((double)row[i] - m) * ((double)row[i] - m);      \
      }                                                                                            \
      mean[ch] = (T)m;                                                                             \
      m2[ch] = (T)sq;                                                                              \
    }                                                                                              \
  }

/* Channels [c0, c1): s1 = sum grad, s2 = sum grad * (y - mean). */
#define SUMS(name, T)                                                                              \
  static void name(int64_t c0, int64_t c1, void *ctx) {                                            \
    const channel_pass *p = ctx;                                                                   \
    const T *grad = p->p0, *y = p->p1, *mean = p->v0;                                              \
    T *s1 = p->out0, *s2 = p->out1;                                                                \
    for (int64_t ch = c0; ch < c1; ch++) {                                                         \
      double a = 0, b2 = 0;                                                                        \
      const double m = mean[ch];                                                                   \
      for (int64_t b = 0; b < p->n; b++) {                                                         \
        const int64_t at = (b * p->c + ch) * p->l;                                                 \
        for (int64_t i = 0; i < p->l; i++) {                                                       \
          a += grad[at + i];                                                                       \
          b2 += (double)grad[at + i] * ((double)y[at + i] - m);                                    \
        }                                                                                          \
      }                                                                                            \
      s1[ch] = (T)a;                                                                               \
      s2[ch] = (T)b2;                                                                              \
    }                                                                                              \
  }

/* Planes [q0, q1) of the n * c: out = y * a[c] + b[c]. */
#define AFFINE(name, T)                                                                            \
  static void name(int64_t q0, int64_t q1, void *ctx) {                                            \
    const channel_pass *p = ctx;                                                                   \
    const T *y = p->p0, *a = p->v0, *b = p->v1;                                                    \
    T *out = p->out0;                                                                              \
    for (int64_t q = q0; q < q1; q++) {                                                            \
      const int64_t ch = q % p->c;                                                                 \
      const T ac = a[ch], bc = b[ch];                                                              \
      for (int64_t i = q * p->l; i < (q + 1) * p->l; i++) out[i] = y[i] * ac + bc;                 \
    }                                                                                              \
  }

/* Planes [q0, q1): dy = grad * k1[c] + y * k2[c] + k3[c]. */
#define APPLY(name, T)                                                                             \
  static void name(int64_t q0, int64_t q1, void *ctx) {                                            \
    const channel_pass *p = ctx;                                                                   \
    const T *grad = p->p0, *y = p->p1, *k1 = p->v0, *k2 = p->v1, *k3 = p->v2;                      \
    T *dy = p->out0;                                                                               \
    for (int64_t q = q0; q < q1; q++) {                                                            \
      const int64_t ch = q % p->c;                                                                 \
      const T a = k1[ch], b = k2[ch], c = k3[ch];                                                  \
      for (int64_t i = q * p->l; i < (q + 1) * p->l; i++) dy[i] = grad[i] * a + y[i] * b + c;      \
    }                                                                                              \
  }

STATS(stats_f32, float)
STATS(stats_f64, double)
SUMS(sums_f32, float)
SUMS(sums_f64, double)
AFFINE(affine_f32, float)
AFFINE(affine_f64, double)
APPLY(apply_f32, float)
APPLY(apply_f64, double)

/* Runs the F32 or F64 range function over channels (per_channel) or planes. */
static tg_status run(const char *kernel, const tg_tensor *planes, channel_pass *p,
                     tg_cpu_range_fn f32, tg_cpu_range_fn f64, bool per_channel) {
  const tg_dtype dtype = tg_tensor_dtype(planes);
  if (dtype != TG_F32 && dtype != TG_F64)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %s (F32, F64 only)", kernel, tg_dtype_name(dtype));
  p->n = tg_size(planes, 0);
  p->c = tg_size(planes, 1);
  p->l = tg_size(planes, 2);
  const int64_t ranges = per_channel ? p->c : p->n * p->c;
  tg_cpu_parallel_ranges(ranges, 1,
                         tg_cpu_should_parallelize(p->n * p->c * p->l, TG_CPU_PARALLEL_MIN_REDUCE),
                         dtype == TG_F32 ? f32 : f64, p);
  return TG_OK;
}

tg_status tg__kernel_conv2d_batch_norm_channel_stats_cpu(int n_tensors, tg_tensor *const *t) {
  static const char *const kernel = "conv2d_batch_norm.channel_stats";
  TG__KERNEL_ARITY(kernel, n_tensors, 3);
  channel_pass p = {.out0 = tg_data_ptr(t[0]), .out1 = tg_data_ptr(t[1]), .p0 = tg_data_ptr(t[2])};
  return run(kernel, t[2], &p, stats_f32, stats_f64, true);
}

tg_status tg__kernel_conv2d_batch_norm_channel_affine_cpu(int n_tensors, tg_tensor *const *t) {
  static const char *const kernel = "conv2d_batch_norm.channel_affine";
  TG__KERNEL_ARITY(kernel, n_tensors, 4);
  channel_pass p = {.out0 = tg_data_ptr(t[0]),
                    .p0 = tg_data_ptr(t[1]),
                    .v0 = tg_data_ptr(t[2]),
                    .v1 = tg_data_ptr(t[3])};
  return run(kernel, t[1], &p, affine_f32, affine_f64, false);
}

tg_status tg__kernel_conv2d_batch_norm_backward_sums_cpu(int n_tensors, tg_tensor *const *t) {
  static const char *const kernel = "conv2d_batch_norm.backward_sums";
  TG__KERNEL_ARITY(kernel, n_tensors, 5);
  channel_pass p = {.out0 = tg_data_ptr(t[0]),
                    .out1 = tg_data_ptr(t[1]),
                    .p0 = tg_data_ptr(t[2]),
                    .p1 = tg_data_ptr(t[3]),
                    .v0 = tg_data_ptr(t[4])};
  return run(kernel, t[2], &p, sums_f32, sums_f64, true);
}

tg_status tg__kernel_conv2d_batch_norm_backward_apply_cpu(int n_tensors, tg_tensor *const *t) {
  static const char *const kernel = "conv2d_batch_norm.backward_apply";
  TG__KERNEL_ARITY(kernel, n_tensors, 6);
  channel_pass p = {.out0 = tg_data_ptr(t[0]),
                    .p0 = tg_data_ptr(t[1]),
                    .p1 = tg_data_ptr(t[2]),
                    .v0 = tg_data_ptr(t[3]),
                    .v1 = tg_data_ptr(t[4]),
                    .v2 = tg_data_ptr(t[5])};
  return run(kernel, t[1], &p, apply_f32, apply_f64, false);
}
