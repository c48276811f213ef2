/* normalize_groups' CPU kernels (src/ops/norm.c; contracts in src/ops/def/norm.def). x is
 * the contiguous [A, R, C, K]; within one a, group g is the contiguous run [g I, (g + 1) I)
 * of the R C K elements, so a group is A runs of I elements. Sums are accumulated in double
 * for both dtypes; groups (or channels) are split among the pool's threads. */
#include <string.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/cpu_vecmath.h"
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

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Four doubles in one vector (GCC's and clang's vector extension), and four elements loaded
 * into one, converted (NORM_LOAD4): the sums below are written with them because GCC 12 at -O3 left
 * the same sums over an array of eight partial sums as scalar code (the batch norm backward's
 * grad_sums was a twelfth of train_cnn's step on Zen 3). A macro loads: a function returning
 * the vector would change the ABI of the baseline clone. */
typedef double norm_v4d __attribute__((vector_size(32)));

#define NORM_LOAD4(p) ((norm_v4d){(double)(p)[0], (double)(p)[1], (double)(p)[2], (double)(p)[3]})

/* Defines the four passes for element type T (suffix S). Within a group the channel changes
 * every K elements, and within a channel's run the group every I: the loops go run by run,
 * so the inner loops have no division and keep their weight, mean and rstd in registers. */
#define NORM_PASSES(T, S)                                                                          \
  /* Sums over n elements in double, eight partial sums (two AVX2 vectors) so the adds do          \
   * not wait on each other: sum(x), sum((x - m)^2), and out = {sum(dy), sum(dy (x - m))}.         \
   * Partial sum k takes the elements i with i % 8 == k, in order. */                              \
  TG_VF_CLONES static double sum_##S(const T *restrict x, int64_t n) {                             \
    norm_v4d a0 = {0}, a1 = {0};                                                                   \
    int64_t i = 0;                                                                                 \
    for (; i + 8 <= n; i += 8) {                                                                   \
      a0 += NORM_LOAD4(x + i);                                                                     \
      a1 += NORM_LOAD4(x + i + 4);                                                                 \
    }                                                                                              \
    for (; i < n; i++) a0[0] += (double)x[i];                                                      \
    return ((a0[0] + a0[1]) + (a0[2] + a0[3])) + ((a1[0] + a1[1]) + (a1[2] + a1[3]));              \
  }                                                                                                \
  TG_VF_CLONES static double sq_dev_##S(const T *restrict x, int64_t n, double m) {                \
    norm_v4d a0 = {0}, a1 = {0};                                                                   \
    int64_t i = 0;                                                                                 \
    for (; i + 8 <= n; i += 8) {                                                                   \
      const norm_v4d d0 = NORM_LOAD4(x + i) - m, d1 = NORM_LOAD4(x + i + 4) - m;                   \
      a0 += d0 * d0;                                                                               \
      a1 += d1 * d1;                                                                               \
    }                                                                                              \
    for (; i < n; i++) a0[0] += ((double)x[i] - m) * ((double)x[i] - m);                           \
    return ((a0[0] + a0[1]) + (a0[2] + a0[3])) + ((a1[0] + a1[1]) + (a1[2] + a1[3]));              \
  }                                                                                                \
  TG_VF_CLONES static void grad_sums_##S(const T *restrict dy, const T *restrict x, int64_t n,     \
                                         double m, double out[2]) {                                \
    norm_v4d d0 = {0}, d1 = {0}, x0 = {0}, x1 = {0};                                               \
    int64_t i = 0;                                                                                 \
    for (; i + 8 <= n; i += 8) {                                                                   \
      const norm_v4d g0 = NORM_LOAD4(dy + i), g1 = NORM_LOAD4(dy + i + 4);                         \
      d0 += g0;                                                                                    \
      d1 += g1;                                                                                    \
      x0 += g0 * (NORM_LOAD4(x + i) - m);                                                          \
      x1 += g1 * (NORM_LOAD4(x + i + 4) - m);                                                      \
    }                                                                                              \
    for (; i < n; i++) {                                                                           \
      d0[0] += (double)dy[i];                                                                      \
      x0[0] += (double)dy[i] * ((double)x[i] - m);                                                 \
    }                                                                                              \
    out[0] += ((d0[0] + d0[1]) + (d0[2] + d0[3])) + ((d1[0] + d1[1]) + (d1[2] + d1[3]));           \
    out[1] += ((x0[0] + x0[1]) + (x0[2] + x0[3])) + ((x1[0] + x1[1]) + (x1[2] + x1[3]));           \
  }                                                                                                \
  /* the inner loops of y and dx over one run of n elements */                                     \
  TG_VF_CLONES static void y_run_##S(T *restrict y, const T *restrict x, int64_t n, T m, T sw,     \
                                     T bc) {                                                       \
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * sw + bc;                                   \
  }                                                                                                \
  TG_VF_CLONES static void dx_run_##S(T *restrict dx, const T *restrict dy, const T *restrict x,   \
                                      int64_t n, double sw, double shift, double m,                \
                                      double slope) {                                              \
    for (int64_t i = 0; i < n; i++)                                                                \
      dx[i] = (T)(sw * (double)dy[i] - shift - ((double)x[i] - m) * slope);                        \
  }                                                                                                \
  /* stats over groups [g0, g1): the mean, then the mean of squared deviations */                  \
  static void stats_##S(int64_t g0, int64_t g1, void *ctx) {                                       \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *x = p->x;                                                                             \
    T *mean = p->out0, *var = p->out1;                                                             \
    const double n = (double)(l.A * l.I);                                                          \
    for (int64_t g = g0; g < g1; g++) {                                                            \
      double sum = 0, sq = 0;                                                                      \
      for (int64_t a = 0; a < l.A; a++) sum += sum_##S(x + a * l.span + g * l.I, l.I);             \
      const double m = sum / n;                                                                    \
      for (int64_t a = 0; a < l.A; a++) {                                                          \
        sq += sq_dev_##S(x + a * l.span + g * l.I, l.I, m);                                        \
      }                                                                                            \
      mean[g] = (T)m;                                                                              \
      var[g] = (T)(sq / n);                                                                        \
    }                                                                                              \
  }                                                                                                \
  /* y over rows [r0, r1) of A G rows of I elements (row = a G + g), channel run by run */         \
  static void apply_##S(int64_t r0, int64_t r1, void *ctx) {                                       \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *x = p->x, *mean = p->mean, *rstd = p->rstd, *w = p->weight, *b = p->bias;             \
    T *y = p->out0;                                                                                \
    for (int64_t row = r0; row < r1; row++) {                                                      \
      const int64_t g = row % l.G, base = (row / l.G) * l.span, end = (g + 1) * l.I;               \
      const T m = mean[g], s = rstd[g];                                                            \
      for (int64_t q = g * l.I; q < end;) {                                                        \
        const int64_t c = (q / l.K) % l.C, stop = min64(end, (q / l.K + 1) * l.K);                 \
        const T sw = s * w[c], bc = b[c];                                                          \
        y_run_##S(y + base + q, x + base + q, stop - q, m, sw, bc);                                \
        q = stop;                                                                                  \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  /* dx over groups [g0, g1): with e = dy w and h = (x - m) s, dx = s / n (n e - sum(e) -          \
   * h sum(e h)) = s w dy - s sum(e) / n - (x - m) s^2 sum(e h) / n */                             \
  static void backward_##S(int64_t g0, int64_t g1, void *ctx) {                                    \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *dy = p->dy, *x = p->x, *mean = p->mean, *rstd = p->rstd, *w = p->weight;              \
    T *dx = p->out0;                                                                               \
    const double n = (double)(l.A * l.I);                                                          \
    for (int64_t g = g0; g < g1; g++) {                                                            \
      const double m = (double)mean[g], s = (double)rstd[g];                                       \
      const int64_t end = (g + 1) * l.I;                                                           \
      double sum_e = 0, sum_eh = 0;                                                                \
      for (int64_t a = 0; a < l.A; a++)                                                            \
        for (int64_t q = g * l.I; q < end;) {                                                      \
          const int64_t c = (q / l.K) % l.C, stop = min64(end, (q / l.K + 1) * l.K);               \
          const int64_t at = a * l.span + q;                                                       \
          double run[2] = {0, 0};                                                                  \
          grad_sums_##S(dy + at, x + at, stop - q, m, run);                                        \
          sum_e += (double)w[c] * run[0];                                                          \
          sum_eh += (double)w[c] * run[1];                                                         \
          q = stop;                                                                                \
        }                                                                                          \
      const double shift = s * sum_e / n, slope = s * s * s * sum_eh / n;                          \
      for (int64_t a = 0; a < l.A; a++)                                                            \
        for (int64_t q = g * l.I; q < end;) {                                                      \
          const int64_t c = (q / l.K) % l.C, stop = min64(end, (q / l.K + 1) * l.K);               \
          const double sw = s * (double)w[c];                                                      \
          const int64_t at = a * l.span + q;                                                       \
          dx_run_##S(dx + at, dy + at, x + at, stop - q, sw, shift, m, slope);                     \
          q = stop;                                                                                \
        }                                                                                          \
    }                                                                                              \
  }                                                                                                \
  /* dweight, dbias over channels [c0, c1): channel c's elements are (a, r, c, k), group run by    \
   * group run */                                                                                  \
  static void affine_grad_##S(int64_t c0, int64_t c1, void *ctx) {                                 \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *dy = p->dy, *x = p->x, *mean = p->mean, *rstd = p->rstd;                              \
    T *dw = p->out0, *db = p->out1;                                                                \
    const int64_t reps = l.C * l.K != 0 ? l.span / (l.C * l.K) : 0;                                \
    for (int64_t c = c0; c < c1; c++) {                                                            \
      double sum_w = 0, sum_b = 0;                                                                 \
      for (int64_t a = 0; a < l.A; a++)                                                            \
        for (int64_t r = 0; r < reps; r++) {                                                       \
          const int64_t end = (r * l.C + c + 1) * l.K;                                             \
          for (int64_t q = (r * l.C + c) * l.K; q < end;) {                                        \
            const int64_t g = q / l.I, stop = min64(end, (g + 1) * l.I), at = a * l.span + q;      \
            double run[2] = {0, 0};                                                                \
            grad_sums_##S(dy + at, x + at, stop - q, (double)mean[g], run);                        \
            sum_w += (double)rstd[g] * run[1];                                                     \
            sum_b += run[0];                                                                       \
            q = stop;                                                                              \
          }                                                                                        \
        }                                                                                          \
      dw[c] = (T)sum_w;                                                                            \
      db[c] = (T)sum_b;                                                                            \
    }                                                                                              \
  }

/* Layer norm's layout: K = 1 and each group a whole number of rows of the C channels, so a
 * group is I / C rows whose elements take the weights in step (element q's channel is
 * q % C). The passes above would go one element per run there; these go a row at a time,
 * with the same arithmetic in the same order (sums in double, element by element along each
 * group or channel), so the results are the same to the bit. */
#define NORM_ROW_PASSES(T, S)                                                                      \
  TG_VF_CLONES static void y_row_##S(T *restrict y, const T *restrict x, int64_t n, T m, T s,      \
                                     const T *restrict w, const T *restrict b) {                   \
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * (s * w[i]) + b[i];                         \
  }                                                                                                \
  static void apply_rows_##S(int64_t r0, int64_t r1, void *ctx) {                                  \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *x = p->x, *mean = p->mean, *rstd = p->rstd, *w = p->weight, *b = p->bias;             \
    T *y = p->out0;                                                                                \
    for (int64_t row = r0; row < r1; row++) {                                                      \
      const int64_t g = row % l.G, base = (row / l.G) * l.span + g * l.I;                          \
      for (int64_t q = 0; q < l.I; q += l.C)                                                       \
        y_row_##S(y + base + q, x + base + q, l.C, mean[g], rstd[g], w, b);                        \
    }                                                                                              \
  }                                                                                                \
  /* sum(e) and sum(e (x - m)) over a row, e = dy w, added element by element */                   \
  TG_VF_CLONES static void e_sums_##S(const T *restrict dy, const T *restrict x,                   \
                                      const T *restrict w, int64_t n, double m, double out[2]) {   \
    double se = out[0], seh = out[1];                                                              \
    for (int64_t i = 0; i < n; i++) {                                                              \
      se += (double)w[i] * (double)dy[i];                                                          \
      seh += (double)w[i] * ((double)dy[i] * ((double)x[i] - m));                                  \
    }                                                                                              \
    out[0] = se;                                                                                   \
    out[1] = seh;                                                                                  \
  }                                                                                                \
  TG_VF_CLONES static void dx_row_##S(T *restrict dx, const T *restrict dy, const T *restrict x,   \
                                      const T *restrict w, int64_t n, double s, double shift,      \
                                      double m, double slope) {                                    \
    for (int64_t i = 0; i < n; i++)                                                                \
      dx[i] = (T)(s * (double)w[i] * (double)dy[i] - shift - ((double)x[i] - m) * slope);          \
  }                                                                                                \
  static void backward_rows_##S(int64_t g0, int64_t g1, void *ctx) {                               \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *dy = p->dy, *x = p->x, *mean = p->mean, *rstd = p->rstd, *w = p->weight;              \
    T *dx = p->out0;                                                                               \
    const double n = (double)(l.A * l.I);                                                          \
    for (int64_t g = g0; g < g1; g++) {                                                            \
      const double m = (double)mean[g], s = (double)rstd[g];                                       \
      double sums[2] = {0, 0};                                                                     \
      for (int64_t a = 0; a < l.A; a++)                                                            \
        for (int64_t q = 0; q < l.I; q += l.C) {                                                   \
          const int64_t at = a * l.span + g * l.I + q;                                             \
          e_sums_##S(dy + at, x + at, w, l.C, m, sums);                                            \
        }                                                                                          \
      const double shift = s * sums[0] / n, slope = s * s * s * sums[1] / n;                       \
      for (int64_t a = 0; a < l.A; a++)                                                            \
        for (int64_t q = 0; q < l.I; q += l.C) {                                                   \
          const int64_t at = a * l.span + g * l.I + q;                                             \
          dx_row_##S(dx + at, dy + at, x + at, w, l.C, s, shift, m, slope);                        \
        }                                                                                          \
    }                                                                                              \
  }                                                                                                \
  /* channels [c0, c1) of one row: dw += rstd dy (x - m), db += dy, in double */                   \
  TG_VF_CLONES static void affine_row_##S(double *restrict sw, double *restrict sb,                \
                                          const T *restrict dy, const T *restrict x, int64_t n,    \
                                          double m, double s) {                                    \
    for (int64_t i = 0; i < n; i++) {                                                              \
      sw[i] += s * ((double)dy[i] * ((double)x[i] - m));                                           \
      sb[i] += (double)dy[i];                                                                      \
    }                                                                                              \
  }                                                                                                \
  static void affine_grad_rows_##S(int64_t c0, int64_t c1, void *ctx) {                            \
    const norm_pass *p = ctx;                                                                      \
    const norm_layout l = p->l;                                                                    \
    const T *dy = p->dy, *x = p->x, *mean = p->mean, *rstd = p->rstd;                              \
    T *dw = p->out0, *db = p->out1;                                                                \
    enum { BLOCK = 256 };                                                                          \
    for (int64_t cb = c0; cb < c1; cb += BLOCK) {                                                  \
      const int64_t n = min64(BLOCK, c1 - cb);                                                     \
      double sw[BLOCK] = {0}, sb[BLOCK] = {0};                                                     \
      for (int64_t a = 0; a < l.A; a++)                                                            \
        for (int64_t q = 0; q < l.span; q += l.C) {                                                \
          const int64_t g = q / l.I, at = a * l.span + q + cb;                                     \
          affine_row_##S(sw, sb, dy + at, x + at, n, (double)mean[g], (double)rstd[g]);            \
        }                                                                                          \
      for (int64_t i = 0; i < n; i++) {                                                            \
        dw[cb + i] = (T)sw[i];                                                                     \
        db[cb + i] = (T)sb[i];                                                                     \
      }                                                                                            \
    }                                                                                              \
  }

NORM_PASSES(float, f32)
NORM_PASSES(double, f64)
NORM_ROW_PASSES(float, f32)
NORM_ROW_PASSES(double, f64)

static bool rows_of_channels(const norm_layout *l) {
  return l->K == 1 && l->C > 0 && l->I % l->C == 0;
}

/* Runs the F32 or F64 form of a pass over n units in ranges of multiples of align, or refuses
 * another dtype. */
static tg_status run_aligned(const char *kernel, tg_dtype dtype, int64_t n, int64_t align,
                             tg_cpu_range_fn f32, tg_cpu_range_fn f64, norm_pass *p) {
  if (dtype != TG_F32 && dtype != TG_F64)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %s (F32, F64 only)", kernel, tg_dtype_name(dtype));
  tg_cpu_parallel_ranges(n, align, worth_threads(&p->l), dtype == TG_F32 ? f32 : f64, p);
  return TG_OK;
}

static tg_status run(const char *kernel, tg_dtype dtype, int64_t n, tg_cpu_range_fn f32,
                     tg_cpu_range_fn f64, norm_pass *p) {
  return run_aligned(kernel, dtype, n, 1, f32, f64, p);
}

/* Channels per range of the row-wise affine gradient: each range walks every row for its
 * channels, so one range per thread reads the longest piece of each row (as the reductions
 * over a strided dim do, cpu_reduce.c). Ranges of C / 8 channels on two threads cost layer
 * norm's weight gradient 6x its one-thread cycles at GPT's [2048, 256] (perf, Zen 3). */
static int64_t channels_per_range(int64_t channels) {
  const int64_t threads = tg_get_num_threads();
  const int64_t per_thread = (channels + threads - 1) / threads;
  return per_thread < 16 ? 16 : (per_thread + 15) / 16 * 16;
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
  const bool rows = rows_of_channels(&p.l);
  return run("normalize_groups.apply", t[1]->dtype, p.l.A * p.l.G,
             rows ? apply_rows_f32 : apply_f32, rows ? apply_rows_f64 : apply_f64, &p);
}

tg_status tg__kernel_normalize_groups_backward_cpu(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.backward", n_tensors, 6);
  norm_pass p = {layout_of(t[2], t[3]), tg_data_ptr(t[0]), NULL,
                 tg_data_ptr(t[1]),     tg_data_ptr(t[2]), tg_data_ptr(t[3]),
                 tg_data_ptr(t[4]),     tg_data_ptr(t[5]), NULL};
  const bool rows = rows_of_channels(&p.l);
  return run("normalize_groups.backward", t[2]->dtype, p.l.G,
             rows ? backward_rows_f32 : backward_f32, rows ? backward_rows_f64 : backward_f64, &p);
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
  const bool rows = rows_of_channels(&p.l);
  return run_aligned("normalize_groups.affine_grad", t[3]->dtype, p.l.C,
                     rows ? channels_per_range(p.l.C) : 1,
                     rows ? affine_grad_rows_f32 : affine_grad_f32,
                     rows ? affine_grad_rows_f64 : affine_grad_f64, &p);
}
