/* tg_allclose, tg_max_abs_diff and tg_all_finite on CUDA tensors (copied to the host),
 * against CPU tensors and strided CUDA views; tg_backward_multi with CUDA roots. */
#include <math.h>

#include "cuda_testutil.h"

#include "alloc_sweep.h"

static const tg_options cuda_f64 = {.dtype = TG_F64, .device = TG_CUDA0};

TG_CUDA_TEST(cuda_compare_values, cuda_against_cpu) {
  const double v[] = {1, -2, 3.5, NAN, INFINITY, 0};
  tg_tensor *cpu = tg_from_data(TG_SHAPE(2, 3), v, TG_OPTS(.dtype = TG_F64));
  tg_tensor *gpu = tg_to_device(tg_to_dtype(cpu, TG_F32), TG_CUDA0);
  cr_assert(gpu, "%s", tg_last_error_message());
  cr_assert(!tg_allclose(gpu, cpu, 0, 0), "NaN is close to nothing");
  cr_assert(tg_allclose_ex(gpu, cpu, 0, 0, true));
  cr_assert(tg_allclose_ex(cpu, gpu, 0, 0, true));
  cr_assert(isnan(tg_max_abs_diff(gpu, cpu)));
  cr_assert(!tg_all_finite(gpu));
  /* a strided CUDA view: the first column [1, NaN] and the last [3.5, 0] */
  tg_tensor *first = tg_select(gpu, 1, 0), *last = tg_select(gpu, 1, 2);
  cr_assert(!tg_all_finite(first));
  cr_assert(tg_all_finite(last));
  tg_tensor *want = tg_from_data(TG_SHAPE(2), (const double[]){3, 0.5}, cuda_f64);
  cr_assert_float_eq(tg_max_abs_diff(last, want), 0.5, 0);
  cr_assert(tg_allclose(tg_t(gpu), tg_t(gpu), 0, 0) == false, "NaN on the diagonal's way");
  /* broadcast: a CUDA row against a CPU scalar */
  cr_assert(
      tg_allclose(tg_full(TG_SHAPE(3), 2, cuda_f64), tg_scalar(2, TG_OPTS(.dtype = TG_I64)), 0, 0));
  tg_expect_ok();
}

TG_CUDA_TEST(cuda_compare_values, backward_multi_on_cuda) {
  tg_tensor *x = tg_from_data(TG_SHAPE(2), (const double[]){1, 3},
                              TG_OPTS(.dtype = TG_F64, .device = TG_CUDA0, .requires_grad = true));
  tg_tensor *a = tg_sum(tg_mul(x, x)), *b = tg_mul_scalar(x, 3.0);
  tg_tensor *gb = tg_ones(TG_SHAPE(2), cuda_f64);
  cr_assert_eq(tg_backward_multi(2, (const tg_tensor *const[]){a, b},
                                 (const tg_tensor *const[]){NULL, gb}, (tg_backward_options){0}),
               TG_OK, "%s", tg_last_error_message());
  tg_tensor *want = tg_from_data(TG_SHAPE(2), (const double[]){5, 9}, TG_OPTS(.dtype = TG_F64));
  cr_assert(tg_allclose(tg_grad(x), want, 0, 1e-12), "max |diff| %g",
            tg_max_abs_diff(tg_grad(x), want));
  /* a CPU gradient for a CUDA root is refused, naming the root */
  cr_assert_eq(
      tg_backward_multi(1, (const tg_tensor *const[]){b},
                        (const tg_tensor *const[]){tg_ones(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64))},
                        (tg_backward_options){0}),
      TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "tg_backward_multi", "output 0");
}

/* The sweep: the host copies of CUDA operands. */
static tg_status compare_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *a = tg_full(TG_SHAPE(2, 3), 1.5, cuda_f64);
  tg_tensor *b = a ? tg_full(TG_SHAPE(3), 1, TG_OPTS(.device = TG_CUDA0)) : NULL;
  tg_status st = status_of(b);
  if (st != TG_OK) return st;
  double d = tg_max_abs_diff(tg_t(a), tg_select(a, 1, 0));
  if (d < 0) return tg_last_error();
  bool close = tg_allclose(a, b, 0, 0.5);
  if (!close && tg_last_error() != TG_OK) return tg_last_error();
  bool finite = tg_all_finite(a);
  if (!finite) return tg_last_error();
  out[(*n_out)++] = d;
  out[(*n_out)++] = close;
  return TG_OK;
}

TG_CUDA_TEST(cuda_compare_values, allocation_failures_are_clean) {
  sweep("tg_allclose and friends on cuda:0", compare_step, NULL);
}
