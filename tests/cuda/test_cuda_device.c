/* The CUDA device as a whole: lazy initialisation, device count, clean errors when CUDA
 * is asked for but no device exists, an index is out of range or one op mixes devices,
 * and CUDA/cuBLAS failures reported as tg errors. The situations a machine cannot be put
 * in on demand (no driver, two devices, failing launches) use the emulation's controls. */
#include "cuda_testutil.h"

TG_CUDA_TEST(cuda_device, is_built_and_counts_devices) {
  cr_assert(tg_cuda_is_built());
  cr_assert(tg_cuda_is_available());
  cr_assert_geq(tg_cuda_device_count(), 1);
  cr_assert_eq(tg_cuda_synchronize(), TG_OK, "%s", tg_last_error_message());
}

/* Extensions launch their kernels on tg's stream: one per device, the same on every call. */
TG_CUDA_TEST(cuda_device, stream_for_extension_kernels) {
  void *first = NULL, *again = NULL;
  cr_assert_eq(tg_cuda_stream(0, &first), TG_OK, "%s", tg_last_error_message());
  cr_assert_not_null(first);
  cr_assert_eq(tg_cuda_stream(0, &again), TG_OK);
  cr_assert_eq(first, again);
  again = &again;
  cr_assert_eq(tg_cuda_stream(tg_cuda_device_count(), &again), TG_ERR_DEVICE);
  cr_assert_null(again, "a failed call leaves *stream NULL");
  tg_expect_error(TG_ERR_DEVICE, "tg_cuda_stream", "does not exist");
  cr_assert_eq(tg_cuda_stream(0, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_cuda_stream", "stream is NULL");
}

TG_CUDA_TEST(cuda_device, index_out_of_range_is_an_error) {
  int n = tg_cuda_device_count();
  cr_assert_null(tg_zeros(TG_SHAPE(2), TG_OPTS(.device = TG_DEVICE_CUDA(n))));
  tg_expect_error(TG_ERR_DEVICE, "does not exist");
  tg_tensor *h = tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT);
  cr_assert_null(tg_to_device(h, TG_DEVICE_CUDA(-1)));
  tg_expect_error(TG_ERR_DEVICE, "cuda:-1");
}

static tg_status fwd_first(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

TG_CUDA_TEST(cuda_device, ops_mixing_cpu_and_cuda_are_errors) {
  tg_tensor *c = tg_ones(TG_SHAPE(2, 3), TG_OPTS(.device = TG_CUDA0));
  tg_tensor *h = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_add(c, h));
  tg_expect_error(TG_ERR_DEVICE);
  cr_assert_null(tg_mm(h, tg_t(c)));
  tg_expect_error(TG_ERR_DEVICE);
  cr_assert_neq(tg_add_(c, h), TG_OK);
  tg_expect_error(TG_ERR_DEVICE);
  /* the failed in-place op left its target as it was */
  tg_assert_close(c, h, 0, 0);
  /* tg_apply itself refuses a user op's inputs on two devices, naming both */
  static const tg_op_desc pair_op = {"test_pair", 2, 1, {fwd_first, fwd_first}, NULL, 0, NULL};
  cr_assert_null(tg_apply1(&pair_op, 2, (const tg_tensor *const[]){c, h}, 0, NULL));
  tg_expect_error(TG_ERR_DEVICE, "test_pair: inputs[1] is on cpu:0 but inputs[0] is on cuda:0");
}

/* A backward that hands back a CPU gradient for a CUDA input. */
static tg_status fwd_identity(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status bwd_to_cpu(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  gi[0] = tg_to_device(g[0], TG_DEVICE_CPU);
  return gi[0] ? TG_OK : tg_last_error();
}

TG_CUDA_TEST(cuda_device, backward_gradients_on_the_wrong_device_are_device_errors) {
  static const tg_op_desc to_cpu_op = {"test_grad_to_cpu", 1, 1,   {fwd_identity, fwd_identity},
                                       bwd_to_cpu,         0, NULL};
  tg_tensor *x =
      tg_ones(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64, .device = TG_CUDA0, .requires_grad = true));
  tg_tensor *y = tg_mul_scalar(x, 2);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(y, tg_ones(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64))), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "tg_backward: ", "grad is on cpu:0", "output 0 is on cuda:0");
  tg_tensor *z = tg_apply1(&to_cpu_op, 1, (const tg_tensor *const[]){x}, 0, NULL);
  cr_assert_not_null(z, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(tg_sum(z), NULL), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "tg_backward: ", "test_grad_to_cpu", "on cpu:0", "input 0",
                  "expected cuda:0");
  cr_assert_null(tg_grad(x));
}

TG_CUDA_TEST(cuda_device, generic_ops_run_on_cuda) {
  tg_twin a = tg_twin_matrix(TG_L_TRANSPOSED, 4, 3, TG_F64, 1, false);
  tg_twin b = tg_twin_matrix(TG_L_EXPAND_ROW, 4, 3, TG_F64, 2, true);
  tg_twin w = tg_twin_matrix(TG_L_CONTIGUOUS, 3, 5, TG_F64, 3, false);
  tg_tensor *gpu =
      tg_sum_dim(tg_tanh(tg_mm(tg_div(tg_add(a.cuda, b.cuda), b.cuda), w.cuda)), 1, false);
  tg_tensor *cpu = tg_sum_dim(tg_tanh(tg_mm(tg_div(tg_add(a.cpu, b.cpu), b.cpu), w.cpu)), 1, false);
  cr_assert(gpu && cpu, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_device(gpu).type, TG_CUDA);
  tg_assert_close(gpu, cpu, 1e-12, 1e-12);
}

/* Runs on every machine: with the real runtime and no GPU (or no driver: then
 * cudaGetDeviceCount fails) this is the clean-error path, with one it is a smoke test. */
TG_TEST(cuda_device_any, no_device_is_a_clean_error_not_a_crash) {
  cr_assert(tg_cuda_is_built());
  int n = tg_cuda_device_count();
  cr_assert_geq(n, 0);
  cr_assert_eq(tg_cuda_is_available(), n > 0);
  tg_tensor *t = tg_zeros(TG_SHAPE(3), TG_OPTS(.device = TG_CUDA0));
  if (n > 0) {
    cr_assert(t, "%s", tg_last_error_message());
    return;
  }
  cr_assert_null(t);
  tg_expect_error(TG_ERR_DEVICE, "no CUDA device is available");
  cr_assert_eq(tg_cuda_synchronize(), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE);
}

#ifdef TG_CUDA_EMULATION

/* These tests change what the (emulated) driver reports before tg's first CUDA use, which
 * is also the proof that nothing initialises CUDA earlier (at load time, or in Criterion's
 * parent process: every test runs in a fresh process). */

TG_TEST(cuda_device_emu, initialisation_is_lazy) {
  tg_emu_set_device_count(3);
  cr_assert_eq(tg_cuda_device_count(), 3);
  tg_emu_set_device_count(1); /* read once: later changes are not seen */
  cr_assert_eq(tg_cuda_device_count(), 3);
}

TG_TEST(cuda_device_emu, toolkit_without_driver_means_no_device) {
  tg_emu_set_driver_missing(true);
  cr_assert(tg_cuda_is_built());
  cr_assert_eq(tg_cuda_device_count(), 0);
  cr_assert(!tg_cuda_is_available());
  cr_assert_null(tg_zeros(TG_SHAPE(2), TG_OPTS(.device = TG_CUDA0)));
  tg_expect_error(TG_ERR_DEVICE, "tg_zeros: ", "cuda:0", "no CUDA device is available",
                  "driver version is insufficient");
  tg_tensor *h = tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT);
  cr_assert_null(tg_to_device(h, TG_CUDA0));
  tg_expect_error(TG_ERR_DEVICE, "tg_to_device");
  cr_assert_eq(tg_cuda_synchronize(), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "tg_cuda_synchronize");
  tg_cuda_memory_stats stats;
  cr_assert_eq(tg_cuda_memory_stats_get(&stats), TG_OK);
  cr_assert_eq(stats.driver_allocs, 0);
}

TG_TEST(cuda_device_emu, no_gpu_means_no_device) {
  tg_emu_set_device_count(0);
  cr_assert_eq(tg_cuda_device_count(), 0);
  cr_assert_null(tg_ones(TG_SHAPE(2), TG_OPTS(.device = TG_CUDA0)));
  tg_expect_error(TG_ERR_DEVICE, "no CUDA-capable device");
}

TG_TEST(cuda_device_emu, two_devices) {
  tg_emu_set_device_count(2);
  tg_scope sc = tg_scope_begin();
  tg_tensor *h = tg_arange(0, 6, 1, TG_OPTS(.dtype = TG_F64));
  tg_tensor *c0 = tg_to_device(h, TG_CUDA0), *c1 = tg_to_device(h, TG_DEVICE_CUDA(1));
  cr_assert(c0 && c1, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_device(c1).index, 1);
  /* ops on device 1, and copies between the devices */
  tg_tensor *e1 = tg_exp(c1);
  cr_assert(e1 && tg_tensor_device(e1).index == 1, "%s", tg_last_error_message());
  tg_tensor *e0 = tg_to_device(e1, TG_CUDA0);
  cr_assert(e0 && tg_tensor_device(e0).index == 0, "%s", tg_last_error_message());
  tg_assert_close(e0, tg_exp(h), 1e-15, 0);
  /* one op on both devices is an error */
  cr_assert_null(tg_add(c0, c1));
  tg_expect_error(TG_ERR_DEVICE);
  cr_assert_eq(tg_cuda_synchronize(), TG_OK);
  tg_scope_end(sc);
}

TG_TEST(cuda_device_emu, failed_launch_is_a_device_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *c = tg_ones(TG_SHAPE(4), TG_OPTS(.device = TG_CUDA0));
  cr_assert(c, "%s", tg_last_error_message());
  tg_emu_fail_launches(1);
  cr_assert_null(tg_exp(c));
  tg_expect_error(TG_ERR_DEVICE, "kernel launch failed", "unspecified launch failure");
  /* the runtime's error was consumed: the next op works */
  cr_assert_not_null(tg_exp(c), "%s", tg_last_error_message());
  tg_emu_fail_launches(1);
  cr_assert_neq(tg_exp_(c), TG_OK);
  tg_expect_error(TG_ERR_DEVICE);
  tg_assert_close(c, tg_ones(TG_SHAPE(4), TG_OPTS_DEFAULT), 0, 0);
  tg_scope_end(sc);
}

TG_TEST(cuda_device_emu, failed_cublas_call_is_a_device_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(3, 3), TG_OPTS(.device = TG_CUDA0));
  tg_emu_fail_blas(1);
  cr_assert_null(tg_mm(a, a));
  tg_expect_error(TG_ERR_DEVICE, "cublasSgemm failed");
  tg_emu_fail_blas(1);
  cr_assert_null(tg_sum_dim(a, 0, false));
  tg_expect_error(TG_ERR_DEVICE, "cublasSgemv failed");
  cr_assert_not_null(tg_mm(a, a), "%s", tg_last_error_message());
  tg_scope_end(sc);
}

#endif
