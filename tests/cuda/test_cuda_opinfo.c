/* tg's OpInfo on CUDA: every op with a CUDA kernel agrees with its CPU twin on every sample
 * (forward in F32 and F64, gradients in F64: tg_op_check's CUDA pass), and that pass catches
 * a CUDA kernel or backward that disagrees, naming op, sample and check. */
#include "cuda_testutil.h"
#include "opinfo_cases.h"
#include "ops/registry.h"

#include "alloc_sweep.h"

/* The CPU checks run in test_opinfo; gradgradcheck is left out here to keep this quick. */
static const tg_op_check_options cuda_check = {.gradcheck = {.quiet = true},
                                               .skip_gradgradcheck = true};

TG_CUDA_TEST(cuda_opinfo, every_op_with_a_cuda_kernel_agrees_with_the_cpu) {
  int checked = 0;
  for (int i = 0; i < tg_op_count(); i++) {
    const tg_op_desc *op = tg_op_at(i);
    if (!op->forward[TG_CUDA] || !op->sample_inputs) continue;
    tg_status st = tg_op_check(op, cuda_check);
    cr_expect_eq(st, TG_OK, "%s", tg_last_error_message());
    tg_clear_error();
    checked++;
  }
  cr_expect_geq(checked, TG_NUM_BUILTIN_OPS);
}

/* ---- a custom op y = x^2 whose CUDA side can be made wrong ---- */

static double cuda_forward_factor = 1.0, cuda_backward_factor = 2.0;

static bool on_cuda(const tg_tensor *t) { return tg_tensor_device(t).type == TG_CUDA; }

static tg_status fwd_square(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_mul(in[0], in[0]);
  if (out[0] && on_cuda(in[0]) && cuda_forward_factor != 1.0)
    out[0] = tg_mul_scalar(out[0], cuda_forward_factor);
  return out[0] && tg_ctx_save_for_backward(ctx, 1, in) == TG_OK ? TG_OK : tg_last_error();
}

static tg_status bwd_square(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *x = tg_ctx_saved(ctx, 0);
  double factor = x && on_cuda(x) ? cuda_backward_factor : 2.0;
  gi[0] = tg_mul(g[0], tg_mul_scalar(x, factor));
  return gi[0] ? TG_OK : tg_last_error();
}

static int square_samples(const tg_sample_request *r, tg_sample *out) {
  /* The values are drawn on the CPU and copied, so both devices get the same ones. */
  tg_tensor *x = tg_rand(TG_SHAPE(2, 3), (tg_options){.dtype = r->dtype}, r->gen);
  x = tg_to_device(x, r->device);
  if (!x || tg_set_requires_grad(x, true) != TG_OK) return -1;
  out[0] = (tg_sample){.label = "2-D", .n_inputs = 1, .inputs = {x}};
  return 1;
}

static const tg_op_desc *register_square(const char *name, tg_sample_fn samples) {
  tg_op_desc desc = {.name = name,
                     .n_inputs = 1,
                     .n_outputs = 1,
                     .forward = {fwd_square, fwd_square},
                     .backward = bwd_square,
                     .sample_inputs = samples};
  cr_assert_eq(tg_op_register(&desc), TG_OK, "%s", tg_last_error_message());
  return tg_op_lookup(name);
}

TG_CUDA_TEST(cuda_opinfo, a_cuda_kernel_that_disagrees_is_caught) {
  const tg_op_desc *op = register_square("test_cuda_square_fwd", square_samples);
  cr_expect_eq(tg_op_check(op, cuda_check), TG_OK, "%s", tg_last_error_message());
  cuda_forward_factor = 1.01;
  tg_status st = tg_op_check(op, cuda_check);
  cr_expect_eq(st, TG_ERR_GRADCHECK);
  tg_expect_error(
      TG_ERR_GRADCHECK,
      "tg_op_check: op 'test_cuda_square_fwd' sample 0 (2-D): cuda f32 forward: output 0", "CPU",
      "CUDA");
  /* Without the CUDA pass the op is fine. */
  tg_op_check_options cpu_only = cuda_check;
  cpu_only.skip_cuda = true;
  cr_expect_eq(tg_op_check(op, cpu_only), TG_OK, "%s", tg_last_error_message());
  cuda_forward_factor = 1.0;
}

TG_CUDA_TEST(cuda_opinfo, a_cuda_backward_that_disagrees_is_caught) {
  const tg_op_desc *op = register_square("test_cuda_square_bwd", square_samples);
  cuda_backward_factor = 2.02;
  tg_status st = tg_op_check(op, cuda_check);
  cuda_backward_factor = 2.0;
  cr_expect_eq(st, TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK,
                  "tg_op_check: op 'test_cuda_square_bwd' sample 0 (2-D): cuda f64 backward: "
                  "gradient of input 0");
}

/* The built-in sample functions hold the same values on both devices. */
TG_CUDA_TEST(cuda_opinfo, samples_hold_the_same_values_on_both_devices) {
  const tg_op_desc *op = tg_op_lookup("lltm");
  tg_generator *a = tg_generator_new(5), *b = tg_generator_new(5);
  tg_sample cpu[TG_SAMPLE_MAX], cuda[TG_SAMPLE_MAX];
  int n = op->sample_inputs(&(tg_sample_request){.dtype = TG_F32, .gen = a}, cpu);
  int m =
      op->sample_inputs(&(tg_sample_request){.dtype = TG_F32, .device = TG_CUDA0, .gen = b}, cuda);
  cr_assert_eq(n, m);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < cpu[i].n_inputs; k++) {
      cr_expect(tg_device_equal(tg_tensor_device(cuda[i].inputs[k]), TG_CUDA0));
      tg_assert_close(cuda[i].inputs[k], cpu[i].inputs[k], 0.0, 0.0);
    }
  tg_generator_free(a);
  tg_generator_free(b);
}

/* Sample functions that do not give both devices the same samples. */
static int differ_by_device(const tg_sample_request *r, tg_sample *out) {
  double v = r->device.type == TG_CUDA ? 2.0 : 1.0;
  tg_tensor *x = tg_full(TG_SHAPE(2), v, (tg_options){r->dtype, r->device, true});
  out[0] = (tg_sample){.label = "values", .n_inputs = 1, .inputs = {x}};
  return x ? 1 : -1;
}
static int fail_on_cuda(const tg_sample_request *r, tg_sample *out) {
  if (r->device.type == TG_CUDA) return tg_set_error(TG_ERR_DEVICE, "no samples here"), -1;
  return differ_by_device(r, out);
}
static int count_by_device(const tg_sample_request *r, tg_sample *out) {
  int n = differ_by_device(&(tg_sample_request){.dtype = r->dtype, .gen = r->gen}, out);
  if (n == 1 && r->device.type == TG_CUDA) out[1] = out[0], n = 2;
  for (int i = 0; i < n; i++) out[i].inputs[0] = tg_to_device(out[i].inputs[0], r->device);
  return n;
}

TG_CUDA_TEST(cuda_opinfo, samples_that_differ_between_devices_are_errors) {
  const bad_samples_case cases[] = {
      {"test_cuda_differ",
       differ_by_device,
       TG_ERR_GRADCHECK,
       {"sample 0 (values): cuda f32 sample inputs differ", "input 0"}},
      {"test_cuda_fail",
       fail_on_cuda,
       TG_ERR_DEVICE,
       {"sample_inputs (float32, cuda)", "no samples here"}},
      {"test_cuda_count",
       count_by_device,
       TG_ERR_GRADCHECK,
       {"1 samples on the CPU but 2", "float32"}},
  };
  expect_bad_samples_refused(cases, sizeof cases / sizeof cases[0], register_square, cuda_check);
}

/* ---- allocation failure in the CUDA pass ---- */

static tg_status check_op(void *user, double *out, int *n_out) {
  (void)out, (void)n_out;
  return tg_op_check(user, cuda_check);
}

TG_CUDA_TEST(cuda_opinfo, allocation_failure_is_an_error) {
  sweep_result r = sweep("tg_op_check on CUDA", check_op,
                         (void *)register_square("test_cuda_square_sweep", square_samples));
  cr_expect_gt(r.failed, 0);
}
