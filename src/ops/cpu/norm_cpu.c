/* normalize_groups' CPU kernels (src/ops/norm.c; contracts in src/ops/def/norm.def). x is
 * the contiguous [A, R, C, K]; within one a, group g is the contiguous run [g I, (g + 1) I)
 * of the R C K elements, so a group is A runs of I elements. Sums are accumulated in double
 * for both dtypes; groups (or channels) are split among the pool's threads. */
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"

/* The sizes a pass needs, read from the tensors' shapes. */
typedef struct norm_layout {
  int64_t A, C, K, G, I, span; /* span = R C K, the elements of one a */
} norm_layout;

typedef struct norm_pass {
  norm_layout l;
  void *out0, *out1;
  const void *dy, *x, *mean, *rstd, *weight, *bias;
} norm_pass;

static norm_layout layout_of(const tg_tensor *x, const tg_tensor *groups) {
  norm_layout l = {x->sizes[0], x->sizes[2], x->sizes[3], groups->sizes[0], 0, 0};
  l.span = x->sizes[1] * l.C * l.K;
  l.I = l.G ? l.span / l.G : 0;
  return l;
}

static bool worth_threads(const norm_layout *l) {
  return tg_cpu_should_parallelize(l->A * l->span, TG_CPU_PARALLEL_MIN_REDUCE);
}

/* Defines the four passes for element type T (suffix S). */
#define NORM_PASSES(T, S)                                                                          \
  /* stats over groups [g0, g1): mean, then the mean of squared deviations */                      \
  static void stats_##S(int64_t g0, int64_t g1, void *ctx) {                                       \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *x = p->x;                                                                             \
    T *mean = p->out0, *var = p->out1;                                                             \
    const double n = (double)(l.A * l.I);                                                          \
    for (int64_t g = g0; g < g1; g++) {                                                            \
      double sum = 0, sq = 0;                                                                      \
      for (int64_t a = 0; a < l.A; a++) {                                                          \
        const T *run = x + a * l.span + g * l.I;                                                   \
        for (int64_t i = 0; i < l.I; i++) sum += (double)run[i];                                   \
      }                                                                                            \
      const double m = sum / n;                                                                    \
      for (int64_t a = 0; a < l.A; a++) {                                                          \
        const T *run = x + a * l.span + g * l.I;                                                   \
        for (int64_t i = 0; i < l.I; i++) {                                                        \
          const double d = (double)run[i] - m;                                                     \
          sq += d * d;                                                                             \
        }                                                                                          \
      }                                                                                            \
      mean[g] = (T)m;                                                                              \
      var[g] = (T)(sq / n);                                                                        \
    }                                                                                              \
  }                                                                                                \
  /* apply over rows [r0, r1) of A G rows of I elements (row = a G + g) */                         \
  static void apply_##S(int64_t r0, int64_t r1, void *ctx) {                                       \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *x = p->x, *mean = p->mean, *rstd = p->rstd, *w = p->weight, *b = p->bias;             \
    T *y = p->out0;                                                                                \
    for (int64_t row = r0; row < r1; row++) {                                                      \
      const int64_t g = row % l.G, base = (row / l.G) * l.span + g * l.I;                          \
      const T m = mean[g], s = rstd[g];                                                            \
      for (int64_t i = 0; i < l.I; i++) {                                                          \
        const int64_t c = ((g * l.I + i) / l.K) % l.C;                                             \
        y[base + i] = (x[base + i] - m) * s * w[c] + b[c];                                         \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  /* dx over groups [g0, g1): the two sums of the closed form, then dx */                          \
  static void backward_##S(int64_t g0, int64_t g1, void *ctx) {                                    \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *dy = p->dy, *x = p->x, *mean = p->mean, *rstd = p->rstd, *w = p->weight;              \
    T *dx = p->out0;                                                                               \
    const double n = (double)(l.A * l.I);                                                          \
    for (int64_t g = g0; g < g1; g++) {                                                            \
      const double m = (double)mean[g], s = (double)rstd[g];                                       \
      double sum_e = 0, sum_eh = 0;                                                                \
      for (int64_t a = 0; a < l.A; a++) {                                                          \
        const int64_t base = a * l.span + g * l.I;                                                 \
        for (int64_t i = 0; i < l.I; i++) {                                                        \
          const double e = (double)dy[base + i] * (double)w[((g * l.I + i) / l.K) % l.C];          \
          sum_e += e;                                                                              \
          sum_eh += e * ((double)x[base + i] - m) * s;                                             \
        }                                                                                          \
      }                                                                                            \
      for (int64_t a = 0; a < l.A; a++) {                                                          \
        const int64_t base = a * l.span + g * l.I;                                                 \
        for (int64_t i = 0; i < l.I; i++) {                                                        \
          const double e = (double)dy[base + i] * (double)w[((g * l.I + i) / l.K) % l.C];          \
          const double h = ((double)x[base + i] - m) * s;                                          \
          dx[base + i] = (T)(s / n * (n * e - sum_e - h * sum_eh));                                \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  /* dweight, dbias over channels [c0, c1): channel c's elements are (a, r, c, k) */               \
  static void affine_grad_##S(int64_t c0, int64_t c1, void *ctx) {                                 \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *dy = p->dy, *x = p->x, *mean = p->mean, *rstd = p->rstd;                              \
    T *dw = p->out0, *db = p->out1;                                                                \
    const int64_t reps = l.C * l.K != 0 ? l.span / (l.C * l.K) : 0;                                \
    for (int64_t c = c0; c < c1; c++) {                                                            \
      double sum_w = 0, sum_b = 0;                                                                 \
      for (int64_t a = 0; a < l.A; a++) {                                                          \
        for (int64_t r = 0; r < reps; r++) {                                                       \
          const int64_t at = (r * l.C + c) * l.K;                                                  \
          for (int64_t k = 0; k < l.K; k++) {                                                      \
            const int64_t g = (at + k) / l.I, e = a * l.span + at + k;                             \
            const double d = (double)dy[e];                                                        \
            sum_w += d * ((double)x[e] - (double)mean[g]) * (double)rstd[g];                       \
            sum_b += d;                                                                            \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
      dw[c] = (T)sum_w;                                                                            \
      db[c] = (T)sum_b;                                                                            \
    }                                                                                              \
  }

NORM_PASSES(float, f32)
NORM_PASSES(double, f64)

/* Runs the F32 or F64 form of a pass over n units, or refuses another dtype. */
static tg_status run(const char *kernel, tg_dtype dtype, int64_t n, tg_cpu_range_fn f32,
                     tg_cpu_range_fn f64, norm_pass *p) {
  if (dtype != TG_F32 && dtype != TG_F64)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %s (F32, F64 only)", kernel, tg_dtype_name(dtype));
  tg_cpu_parallel_ranges(n, 1, worth_threads(&p->l), dtype == TG_F32 ? f32 : f64, p);
  return TG_OK;
}

tg_status tg__kernel_normalize_groups_stats_cpu(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.stats", n_tensors, 3);
  norm_pass p = {layout_of(t[2], t[0]),
                 tg_data_ptr(t[0]),
                 tg_data_ptr(t[1]),
                 NULL,
                 tg_data_ptr(t[2]),
                 NULL,
                 NULL,
                 NULL,
                 NULL};
  return run("normalize_groups.stats", t[2]->dtype, p.l.G, stats_f32, stats_f64, &p);
}

tg_status tg__kernel_normalize_groups_apply_cpu(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.apply", n_tensors, 6);
  norm_pass p = {layout_of(t[1], t[2]),
                 tg_data_ptr(t[0]),
                 NULL,
                 NULL,
                 tg_data_ptr(t[1]),
                 tg_data_ptr(t[2]),
                 tg_data_ptr(t[3]),
                 tg_data_ptr(t[4]),
                 tg_data_ptr(t[5])};
  return run("normalize_groups.apply", t[1]->dtype, p.l.A * p.l.G, apply_f32, apply_f64, &p);
}

tg_status tg__kernel_normalize_groups_backward_cpu(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.backward", n_tensors, 6);
  norm_pass p = {layout_of(t[2], t[3]), tg_data_ptr(t[0]), NULL,
                 tg_data_ptr(t[1]),     tg_data_ptr(t[2]), tg_data_ptr(t[3]),
                 tg_data_ptr(t[4]),     tg_data_ptr(t[5]), NULL};
  return run("normalize_groups.backward", t[2]->dtype, p.l.G, backward_f32, backward_f64, &p);
}

tg_status tg__kernel_normalize_groups_affine_grad_cpu(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.affine_grad", n_tensors, 6);
  norm_pass p = {layout_of(t[3], t[4]),
                 tg_data_ptr(t[0]),
                 tg_data_ptr(t[1]),
                 tg_data_ptr(t[2]),
                 tg_data_ptr(t[3]),
                 tg_data_ptr(t[4]),
                 tg_data_ptr(t[5]),
                 NULL,
                 NULL};
  return run("normalize_groups.affine_grad", t[3]->dtype, p.l.C, affine_grad_f32, affine_grad_f64,
             &p);
}
