/* bias_gelu's CPU kernels (src/ops/bias_gelu.c; lines in src/ops/def/pointwise.def): one
 * pass over contiguous [m, n] rows, rows split among the pool's threads when there are enough. */
#include <math.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"
#include "tg/dispatch.h"

/* GELU's tanh form: gelu(z) = z/2 (1 + tanh(k (z + c z^3))), k = sqrt(2/pi), c = 0.044715. */
#define GELU_K 0.7978845608028654
#define GELU_C 0.044715

/* The operands of a pass over rows [m, n]: out = f(g, x + b). */
typedef struct gelu_rows {
  void *out;
  const void *g, *x, *b;
  int64_t n;
} gelu_rows;

/* Defines name(i0, i1, ctx): rows [i0, i1) of a pass (a tg_cpu_range_fn). */
#define BIAS_GELU_ROWS(name, T, TANH, body)                                                        \
  static void name(int64_t i0, int64_t i1, void *ctx) {                                            \
    const gelu_rows *r = ctx;                                                                      \
    T *out = r->out;                                                                               \
    const T *gp = r->g, *xp = r->x, *bp = r->b;                                                    \
    const int64_t n = r->n;                                                                        \
    (void)gp;                                                                                      \
    for (int64_t i = i0; i < i1; i++) {                                                            \
      for (int64_t j = 0; j < n; j++) {                                                            \
        const T z = xp[i * n + j] + bp[j];                                                         \
        const T th = TANH((T)GELU_K * (z + (T)GELU_C * z * z * z));                                \
        body;                                                                                      \
      }                                                                                            \
    }                                                                                              \
  }

BIAS_GELU_ROWS(forward_rows_f32, float, tanhf, out[i * n + j] = 0.5f * z * (1.0f + th))
BIAS_GELU_ROWS(forward_rows_f64, double, tanh, out[i * n + j] = 0.5 * z * (1.0 + th))
/* d gelu / dz = (1 + th)/2 + z/2 (1 - th^2) k (1 + 3 c z^2), th = tanh(k (z + c z^3)). */
BIAS_GELU_ROWS(backward_rows_f32, float, tanhf,
               out[i * n + j] = gp[i * n + j] *
                                (0.5f * (1.0f + th) + 0.5f * z * (1.0f - th * th) * (float)GELU_K *
                                                          (1.0f + 3.0f * (float)GELU_C * z * z)))
BIAS_GELU_ROWS(backward_rows_f64, double, tanh,
               out[i * n + j] = gp[i * n + j] *
                                (0.5 * (1.0 + th) +
                                 0.5 * z * (1.0 - th * th) * GELU_K * (1.0 + 3.0 * GELU_C * z * z)))

/* Rows split among the pool's threads when there are enough elements. */
static void run_rows(const tg_tensor *x, tg_cpu_range_fn rows, gelu_rows *r) {
  const int64_t m = x->sizes[0], n = x->sizes[1];
  r->n = n;
  tg_cpu_parallel_ranges(m, 1, tg_cpu_should_parallelize(m * n, TG_CPU_PARALLEL_MIN_TRANSCENDENTAL),
                         rows, r);
}

tg_status tg__kernel_bias_gelu_forward_cpu(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("bias_gelu.forward", n_tensors, 3);
  const tg_tensor *x = t[1];
  gelu_rows r = {tg_data_ptr(t[0]), NULL, tg_data_ptr(x), tg_data_ptr(t[2]), 0};
  if (tg_tensor_dtype(x) == TG_F32) {
    run_rows(x, forward_rows_f32, &r);
    return TG_OK;
  }
  if (tg_tensor_dtype(x) == TG_F64) {
    run_rows(x, forward_rows_f64, &r);
    return TG_OK;
  }
  return tg_set_error(TG_ERR_DTYPE, "bias_gelu.forward: dtype %s (F32, F64 only)",
                      tg_dtype_name(tg_tensor_dtype(x)));
}

tg_status tg__kernel_bias_gelu_backward_cpu(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("bias_gelu.backward", n_tensors, 4);
  const tg_tensor *x = t[2];
  gelu_rows r = {tg_data_ptr(t[0]), tg_data_ptr(t[1]), tg_data_ptr(x), tg_data_ptr(t[3]), 0};
  if (tg_tensor_dtype(x) == TG_F32) {
    run_rows(x, backward_rows_f32, &r);
    return TG_OK;
  }
  if (tg_tensor_dtype(x) == TG_F64) {
    run_rows(x, backward_rows_f64, &r);
    return TG_OK;
  }
  return tg_set_error(TG_ERR_DTYPE, "bias_gelu.backward: dtype %s (F32, F64 only)",
                      tg_dtype_name(tg_tensor_dtype(x)));
}
