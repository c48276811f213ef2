/* Training tools on CUDA (tg/optim.h): tg_clip_grad_norm over CUDA gradients, and over CPU
 * and CUDA ones together, gives the CPU's norm and clipped gradients; AdamW with parameter
 * groups trains on the device as on the CPU. */
#include <math.h>

#include "cuda_testutil.h"

/* Leaves of sizes {3,4}, {5}, {2,3} on `device` with gradients of fixed values (the third
 * on `third`): NULL-free or the test fails. */
static void make_params(tg_dtype dtype, tg_device device, tg_device third, tg_tensor **p) {
  const int64_t sizes[3][2] = {{3, 4}, {5, 1}, {2, 3}};
  for (int i = 0; i < 3; i++) {
    tg_scope s = tg_scope_begin();
    tg_options o = {.dtype = dtype, .device = i == 2 ? third : device};
    tg_tensor *t = tg_zeros(2, sizes[i], o);
    cr_assert_not_null(t, "%s", tg_last_error_message());
    p[i] = tg_retain(t);
    tg_set_requires_grad(p[i], true);
    tg_tensor *g = tg_mul_scalar(
        tg_tanh(tg_arange(-2.0 + i, -2.0 + i + 0.5 * (double)(sizes[i][0] * sizes[i][1]), 0.5, o)),
        2.0);
    cr_assert_eq(tg_backward(tg_sum(tg_mul(p[i], tg_reshape(g, 2, sizes[i]))), NULL), TG_OK, "%s",
                 tg_last_error_message());
    tg_scope_end(s);
  }
}

static void check_clip(tg_dtype dtype, tg_device third) {
  const double norms[3] = {2.0, INFINITY, 3.0};
  for (int k = 0; k < 3; k++) {
    tg_tensor *cpu[3], *dev[3];
    make_params(dtype, TG_DEVICE_CPU, TG_DEVICE_CPU, cpu);
    make_params(dtype, TG_CUDA0, third, dev);
    double a, b;
    cr_assert_eq(tg_clip_grad_norm(3, cpu, 1.0, norms[k], &a), TG_OK);
    cr_assert_eq(tg_clip_grad_norm(3, dev, 1.0, norms[k], &b), TG_OK, "%s",
                 tg_last_error_message());
    cr_assert(fabs(a - b) <= TG_RTOL(dtype) * a, "norm %g: CPU %.17g, CUDA %.17g", norms[k], a, b);
    for (int i = 0; i < 3; i++) {
      cr_assert(tg_device_equal(tg_tensor_device(tg_grad(dev[i])), tg_tensor_device(dev[i])));
      tg_assert_close(tg_grad(dev[i]), tg_grad(cpu[i]), TG_RTOL(dtype), TG_ATOL(dtype));
    }
    for (int i = 0; i < 3; i++) {
      tg_release(cpu[i]);
      tg_release(dev[i]);
    }
  }
}

TG_CUDA_TEST(cuda_optim, clip_grad_norm_on_the_device) {
  check_clip(TG_F64, TG_CUDA0);
  check_clip(TG_F32, TG_CUDA0);
}

TG_CUDA_TEST(cuda_optim, clip_grad_norm_across_devices) {
  check_clip(TG_F64, TG_DEVICE_CPU);
  check_clip(TG_F32, TG_DEVICE_CPU);
}

TG_CUDA_TEST(cuda_optim, adamw_groups_train_as_on_the_cpu) {
  tg_tensor *cpu[3], *dev[3];
  make_params(TG_F64, TG_DEVICE_CPU, TG_DEVICE_CPU, cpu);
  make_params(TG_F64, TG_CUDA0, TG_CUDA0, dev);
  tg_optimizer *opt[2];
  tg_tensor **ps[2] = {cpu, dev};
  for (int d = 0; d < 2; d++) {
    tg_adamw_options o = tg_adamw_defaults();
    o.lr = 0.05;
    o.weight_decay = 0.2;
    opt[d] = tg_adamw_new(1, ps[d], o);
    cr_assert_eq(tg_optimizer_add_param_group(
                     opt[d], 2, ps[d] + 1, (tg_param_group_options){.lr = 0.01, .weight_decay = 0}),
                 TG_OK, "%s", tg_last_error_message());
    for (int t = 0; t < 4; t++) cr_assert_eq(tg_optimizer_step(opt[d]), TG_OK);
  }
  for (int i = 0; i < 3; i++) tg_assert_close(dev[i], cpu[i], 1e-12, 1e-12);
  for (int d = 0; d < 2; d++) {
    tg_optimizer_free(opt[d]);
    for (int i = 0; i < 3; i++) tg_release(ps[d][i]);
  }
}

/* adam.step on the device refuses operands it would read past (the CPU's: test_adam_fused.c). */
TG_CUDA_TEST(cuda_optim, adam_kernel_refuses_other_sizes_and_gaps) {
  tg_kernel_fn step = tg_device_ops_of(TG_CUDA)->kernel("adam.step");
  cr_assert_not_null(step);
  const tg_options f32 = {.dtype = TG_F32, .device = TG_CUDA0};
  tg_tensor *p = tg_zeros(TG_SHAPE(4, 3), f32), *m = tg_zeros(TG_SHAPE(4, 3), f32);
  tg_tensor *params = tg_zeros(TG_SHAPE(7), (tg_options){.dtype = TG_F64});
  cr_assert_eq(step(5, (tg_tensor *const[]){p, p, m, tg_zeros(TG_SHAPE(5), f32), params}),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "adam.step", "tensor 3 must be contiguous", "12 elements");
  cr_assert_eq(step(5, (tg_tensor *const[]){p, p, tg_transpose(m, 0, 1), m, params}),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "adam.step", "tensor 2 must be contiguous");
}
