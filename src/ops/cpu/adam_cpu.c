/* adam.step on the CPU (src/ops/def/optim.def): one pass over contiguous param, grad and
 * moments, split among the pool's threads when there are enough elements. */
#include "ops/adam_math.h"
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/cpu_vecmath.h"
#include "ops/cpu/thread_pool.h"
#include "tg/dispatch.h"

typedef struct adam_pass {
  tg_adam_scalars s;
  void *p, *m, *v;
  const void *g;
} adam_pass;

/* The scalars copied out of ctx and restrict pointers let the loop vectorize (with sqrtf
 * free of errno: CMakeLists.txt compiles tg with -fno-math-errno). Vector square
 * roots and divisions round as the scalar ones do, and C11 mode contracts no multiply-add,
 * so each clone gives the composed update's bits (tests/nn/test_adam_fused.c). GPT-2
 * small's AdamW step over 124M parameters was 17% of its training step, scalar. */
#define ADAM_RANGE(name, T, suffix, ATTR)                                                          \
  ATTR static void name(int64_t i0, int64_t i1, void *ctx) {                                       \
    const adam_pass *a = ctx;                                                                      \
    const tg_adam_scalars s = a->s;                                                                \
    T *restrict p = a->p, *restrict m = a->m, *restrict v = a->v;                                  \
    const T *restrict g = a->g;                                                                    \
    for (int64_t i = i0; i < i1; i++) tg_adam_element_##suffix(&s, &p[i], g[i], &m[i], &v[i]);     \
  }
ADAM_RANGE(range_f32, float, f32, TG_VF_CLONES)
ADAM_RANGE(range_f64, double, f64, )

tg_status tg__kernel_adam_step_cpu(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("adam.step", n_tensors, 5);
  const tg_tensor *params = t[4];
  if (tg_tensor_dtype(params) != TG_F64 || tg_numel(params) != TG_ADAM_NUM_PARAMS)
    return tg_set_error(TG_ERR_ARGUMENT, "adam.step: params must be F64 [%d]",
                        (int)TG_ADAM_NUM_PARAMS);
  const tg_dtype dtype = tg_tensor_dtype(t[0]);
  if (dtype != TG_F32 && dtype != TG_F64)
    return tg_set_error(TG_ERR_DTYPE, "adam.step: dtype %s (F32, F64 only)", tg_dtype_name(dtype));
  for (int k = 0; k < 4; k++) /* the kernel reads each as param's flat elements */
    if (tg_tensor_dtype(t[k]) != dtype || tg_numel(t[k]) != tg_numel(t[0]) ||
        !tg_is_contiguous(t[k]))
      return tg_set_error(TG_ERR_ARGUMENT,
                          "adam.step: tensor %d must be contiguous %s with %lld elements, as "
                          "param; got %s with %lld",
                          k, tg_dtype_name(dtype), (long long)tg_numel(t[0]),
                          tg_dtype_name(tg_tensor_dtype(t[k])), (long long)tg_numel(t[k]));
  adam_pass a = {tg_adam_scalars_read(tg_data_ptr(params)), tg_data_ptr(t[0]), tg_data_ptr(t[2]),
                 tg_data_ptr(t[3]), tg_data_ptr(t[1])};
  const int64_t n = tg_numel(t[0]);
  tg_cpu_parallel_ranges(n, 16, tg_cpu_should_parallelize(n, TG_CPU_PARALLEL_MIN),
                         dtype == TG_F32 ? range_f32 : range_f64, &a);
  return TG_OK;
}
