/* conv2d_batch_norm on CUDA against the CPU: forward, running statistics and the gradients of
 * x, w, weight and bias, both formulas, F32 and F64, a strided x; eval mode; an empty-free
 * edge (a 1 x 1 output grid). The kernels run in the emulated CI. */
#include <math.h>

#include "cuda_testutil.h"
#include "tg/conv_bn.h"

/* n test values of the given sizes on both devices, requiring grad (leaves on each). */
static tg_twin leaf_twin(int ndim, const int64_t *sizes, tg_dtype dtype, int salt, bool positive) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= sizes[d];
  tg_twin flat = tg_twin_values(n, dtype, salt, positive);
  tg_twin t = {tg_detach(tg_reshape(flat.cpu, ndim, sizes)),
               tg_detach(tg_reshape(flat.cuda, ndim, sizes))};
  cr_assert(t.cpu && t.cuda, "%s", tg_last_error_message());
  cr_assert_eq(tg_set_requires_grad(t.cpu, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(t.cuda, true), TG_OK);
  return t;
}

static void check_twin(const tg_tensor *cuda, const tg_tensor *cpu, tg_dtype dt, double scale) {
  cr_assert(cuda && cpu, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_device(cuda).type, TG_CUDA);
  tg_assert_close(tg_to_device(cuda, TG_DEVICE_CPU), cpu, TG_RTOL(dt) * scale, TG_ATOL(dt) * scale);
}

TG_CUDA_TEST(cuda_conv_bn, training_matches_the_cpu) {
  const tg_dtype dts[2] = {TG_F32, TG_F64};
  const tg_conv2d_opts convs[2] = {{.padding = {1, 1}}, {.stride = {2, 1}, .groups = 2}};
  for (int d = 0; d < 2; d++)
    for (int k = 0; k < 2; k++) {
      tg_scope sc = tg_scope_begin();
      const tg_dtype dt = dts[d];
      const tg_conv_bn_formula formula = k ? TG_CONV_BN_REFERENCE : TG_CONV_BN_PYTORCH;
      /* x stored [2, 4, 6, 5] and viewed transposed: [2, 4, 5, 6], strided */
      tg_twin x = leaf_twin(TG_SHAPE(2, 4, 6, 5), dt, 1, false);
      tg_twin xt = {tg_transpose(x.cpu, 2, 3), tg_transpose(x.cuda, 2, 3)};
      tg_twin w = leaf_twin(TG_SHAPE(6, 4 / (k ? 2 : 1), 3, 3), dt, 2, false);
      tg_twin gamma = leaf_twin(TG_SHAPE(6), dt, 3, true),
              beta = leaf_twin(TG_SHAPE(6), dt, 4, false);
      tg_twin rm = tg_twin_values(6, dt, 5, false), rv = tg_twin_values(6, dt, 6, true);
      const tg_conv_bn_options opts = {.training = true, .formula = formula, .momentum = 0.3};
      tg_tensor *cpu =
          tg_conv2d_batch_norm(xt.cpu, w.cpu, gamma.cpu, beta.cpu, rm.cpu, rv.cpu, &convs[k], opts);
      tg_tensor *gpu = tg_conv2d_batch_norm(xt.cuda, w.cuda, gamma.cuda, beta.cuda, rm.cuda,
                                            rv.cuda, &convs[k], opts);
      check_twin(gpu, cpu, dt, 10);
      check_twin(rm.cuda, rm.cpu, dt, 10);
      check_twin(rv.cuda, rv.cpu, dt, 10);
      tg_generator *gen = tg_generator_new(11);
      tg_tensor *g = tg_randn(tg_ndim(cpu), tg_sizes(cpu), (tg_options){.dtype = dt}, gen);
      tg_generator_free(gen);
      cr_assert_eq(tg_backward(cpu, g), TG_OK, "%s", tg_last_error_message());
      cr_assert_eq(tg_backward(gpu, tg_to_device(g, TG_CUDA0)), TG_OK, "%s",
                   tg_last_error_message());
      check_twin(tg_grad(x.cuda), tg_grad(x.cpu), dt, 100);
      check_twin(tg_grad(w.cuda), tg_grad(w.cpu), dt, 100);
      check_twin(tg_grad(gamma.cuda), tg_grad(gamma.cpu), dt, 100);
      check_twin(tg_grad(beta.cuda), tg_grad(beta.cpu), dt, 100);
      tg_scope_end(sc);
    }
}

TG_CUDA_TEST(cuda_conv_bn, eval_and_a_one_by_one_grid) {
  tg_twin x = leaf_twin(TG_SHAPE(3, 2, 3, 3), TG_F64, 7, false);
  tg_twin w = leaf_twin(TG_SHAPE(4, 2, 3, 3), TG_F64, 8, false);
  tg_twin rm = tg_twin_values(4, TG_F64, 9, false), rv = tg_twin_values(4, TG_F64, 10, true);
  /* a 1 x 1 grid: 3 values per channel */
  const tg_conv_bn_options train = {.training = true};
  tg_tensor *cpu = tg_conv2d_batch_norm(x.cpu, w.cpu, NULL, NULL, rm.cpu, rv.cpu, NULL, train);
  tg_tensor *gpu = tg_conv2d_batch_norm(x.cuda, w.cuda, NULL, NULL, rm.cuda, rv.cuda, NULL, train);
  check_twin(gpu, cpu, TG_F64, 10);
  check_twin(rv.cuda, rv.cpu, TG_F64, 10);
  cpu =
      tg_conv2d_batch_norm(x.cpu, w.cpu, NULL, NULL, rm.cpu, rv.cpu, NULL, (tg_conv_bn_options){0});
  gpu = tg_conv2d_batch_norm(x.cuda, w.cuda, NULL, NULL, rm.cuda, rv.cuda, NULL,
                             (tg_conv_bn_options){0});
  check_twin(gpu, cpu, TG_F64, 10);
}
