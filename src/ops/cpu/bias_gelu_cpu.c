/* bias_gelu's CPU kernels (src/ops/bias_gelu.c; lines in src/ops/def/pointwise.def): one
 * pass over contiguous [m, n] rows, rows split among threads when there are enough. */
#include <math.h>

#include "ops/cpu/cpu_internal.h"
#include "tg/dispatch.h"

/* GELU's tanh form: gelu(z) = z/2 (1 + tanh(k (z + c z^3))), k = sqrt(2/pi), c = 0.044715. */
#define GELU_K 0.7978845608028654
#define GELU_C 0.044715

#define BIAS_GELU_ROWS(T, TANH, body)                                                              \
  do {                                                                                             \
    const int64_t m = x->sizes[0], n = x->sizes[1];                                                \
    const bool parallel =                                                                          \
        tg_cpu_should_parallelize(m * n, TG_CPU_PARALLEL_MIN_TRANSCENDENTAL) && m > 1;             \
    _Pragma("omp parallel for schedule(static) if (parallel)") for (int64_t i = 0; i < m; i++) {   \
      for (int64_t j = 0; j < n; j++) {                                                            \
        const T z = xp[i * n + j] + bp[j];                                                         \
        const T th = TANH((T)GELU_K * (z + (T)GELU_C * z * z * z));                                \
        body;                                                                                      \
      }                                                                                            \
    }                                                                                              \
  } while (0)

tg_status tg__kernel_bias_gelu_forward_cpu(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("bias_gelu.forward", n_tensors, 3);
  const tg_tensor *x = t[1];
  if (tg_tensor_dtype(x) == TG_F32) {
    float *yp = tg_data_ptr(t[0]);
    const float *xp = tg_data_ptr(x), *bp = tg_data_ptr(t[2]);
    BIAS_GELU_ROWS(float, tanhf, yp[i * n + j] = 0.5f * z * (1.0f + th));
    return TG_OK;
  }
  if (tg_tensor_dtype(x) == TG_F64) {
    double *yp = tg_data_ptr(t[0]);
    const double *xp = tg_data_ptr(x), *bp = tg_data_ptr(t[2]);
    BIAS_GELU_ROWS(double, tanh, yp[i * n + j] = 0.5 * z * (1.0 + th));
    return TG_OK;
  }
  return tg_set_error(TG_ERR_DTYPE, "bias_gelu.forward: dtype %s (F32, F64 only)",
                      tg_dtype_name(tg_tensor_dtype(x)));
}

/* d gelu / dz = (1 + th)/2 + z/2 (1 - th^2) k (1 + 3 c z^2), th = tanh(k (z + c z^3)). */
tg_status tg__kernel_bias_gelu_backward_cpu(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("bias_gelu.backward", n_tensors, 4);
  const tg_tensor *x = t[2];
  if (tg_tensor_dtype(x) == TG_F32) {
    float *dp = tg_data_ptr(t[0]);
    const float *gp = tg_data_ptr(t[1]), *xp = tg_data_ptr(x), *bp = tg_data_ptr(t[3]);
    BIAS_GELU_ROWS(float, tanhf,
                   dp[i * n + j] = gp[i * n + j] * (0.5f * (1.0f + th) +
                                                    0.5f * z * (1.0f - th * th) * (float)GELU_K *
                                                        (1.0f + 3.0f * (float)GELU_C * z * z)));
    return TG_OK;
  }
  if (tg_tensor_dtype(x) == TG_F64) {
    double *dp = tg_data_ptr(t[0]);
    const double *gp = tg_data_ptr(t[1]), *xp = tg_data_ptr(x), *bp = tg_data_ptr(t[3]);
    BIAS_GELU_ROWS(double, tanh,
                   dp[i * n + j] =
                       gp[i * n + j] * (0.5 * (1.0 + th) + 0.5 * z * (1.0 - th * th) * GELU_K *
                                                               (1.0 + 3.0 * GELU_C * z * z)));
    return TG_OK;
  }
  return tg_set_error(TG_ERR_DTYPE, "bias_gelu.backward: dtype %s (F32, F64 only)",
                      tg_dtype_name(tg_tensor_dtype(x)));
}
