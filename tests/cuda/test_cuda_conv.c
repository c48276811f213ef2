/* The convolution family (tg/conv.h) on CUDA against the CPU: forward, backward and double
 * backward of conv2d, conv1d, conv_transpose2d, unfold and fold over strides, padding
 * ("same" included), dilation, groups and a transposed input, F32 and F64. On CUDA the ops
 * run on the device's drivers: im2col is the strided copy kernel, the products cuBLAS. */
#include "cuda_testutil.h"

/* Which front end, with its options. */
typedef struct conv_call {
  const char *label;
  int op; /* 0 conv2d, 1 conv1d, 2 conv_transpose2d, 3 unfold, 4 fold */
  int n_inputs;
  int ndim[3];
  int64_t sizes[3][4];
  tg_conv2d_opts conv;
  tg_conv1d_opts conv1;
  tg_conv_transpose2d_opts transpose;
  tg_fold_opts fold;
  int64_t fold_h, fold_w;
} conv_call;

static const conv_call calls[] = {
    {"conv2d groups, stride, dilation",
     0,
     3,
     {4, 4, 1},
     {{2, 4, 7, 6}, {6, 2, 3, 2}, {6}},
     .conv = {.groups = 2, .stride = {2, 1}, .dilation = {1, 2}, .padding = {1, 1}}},
    {"conv2d same, even kernel",
     0,
     2,
     {4, 4},
     {{1, 3, 5, 5}, {2, 3, 2, 4}},
     .conv = {.padding_mode = TG_CONV_PADDING_SAME, .dilation = {2, 1}}},
    {"conv1d", 1, 3, {3, 3, 1}, {{2, 2, 9}, {4, 2, 3}, {4}}, .conv1 = {.stride = 2, .padding = 1}},
    {"conv_transpose2d",
     2,
     3,
     {4, 4, 1},
     {{2, 4, 3, 4}, {4, 3, 3, 2}, {6}},
     .transpose = {.groups = 2, .stride = {2, 2}, .padding = {1, 0}, .output_padding = {1, 1}}},
    {"unfold", 3, 1, {4}, {{2, 3, 5, 4}}, .fold = {.kernel_size = {2, 3}, .padding = {1, 1}}},
    {"fold",
     4,
     1,
     {3},
     {{2, 12, 9}},
     .fold = {.kernel_size = {2, 2}, .stride = {1, 2}},
     .fold_h = 4,
     .fold_w = 6},
};

static tg_tensor *call(const conv_call *c, tg_tensor *const *in) {
  switch (c->op) {
  case 0:
    return tg_conv2d(in[0], in[1], c->n_inputs > 2 ? in[2] : NULL, &c->conv);
  case 1:
    return tg_conv1d(in[0], in[1], c->n_inputs > 2 ? in[2] : NULL, &c->conv1);
  case 2:
    return tg_conv_transpose2d(in[0], in[1], c->n_inputs > 2 ? in[2] : NULL, &c->transpose);
  case 3:
    return tg_unfold(in[0], &c->fold);
  default:
    return tg_fold(in[0], c->fold_h, c->fold_w, &c->fold);
  }
}

/* results: y, each input's gradient of sum(y * up), and each input's gradient of
 * sum(grad(in[0])^2) (double backward; NULL where it does not depend on the input). */
static int run(const conv_call *c, tg_tensor *const *in, tg_tensor *up, tg_tensor **results) {
  for (int i = 0; i < c->n_inputs; i++)
    cr_assert_eq(tg_set_requires_grad(in[i], true), TG_OK, "%s", tg_last_error_message());
  tg_tensor *y = call(c, in);
  cr_assert_not_null(y, "%s: %s", c->label, tg_last_error_message());
  tg_tensor *grads[3], *second[3];
  const tg_tensor *root = tg_sum(tg_mul(y, up));
  cr_assert_eq(tg_autograd_grad(1, &root, NULL, c->n_inputs, (const tg_tensor *const *)in, grads,
                                (tg_backward_options){.create_graph = true}, false),
               TG_OK, "%s: %s", c->label, tg_last_error_message());
  int n = 0;
  results[n++] = y;
  for (int i = 0; i < c->n_inputs; i++) results[n++] = grads[i];
  /* a linear op's gradient does not depend on its inputs (unfold, fold: no second
   * derivative); a bilinear op's depends on some of them (the others come back NULL) */
  if (!tg_requires_grad(grads[0])) return n;
  root = tg_sum(tg_mul(grads[0], grads[0]));
  cr_assert_eq(tg_autograd_grad(1, &root, NULL, c->n_inputs, (const tg_tensor *const *)in, second,
                                (tg_backward_options){0}, true),
               TG_OK, "%s: %s", c->label, tg_last_error_message());
  for (int i = 0; i < c->n_inputs; i++) results[n++] = second[i];
  return n;
}

TG_CUDA_TEST(cuda_conv, matches_the_cpu_forward_backward_and_double_backward) {
  tg_generator *gen = tg_generator_new(21);
  const tg_dtype floating[] = {TG_F32, TG_F64};
  for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++)
    for (int d = 0; d < 2; d++) {
      const conv_call *c = &calls[k];
      tg_scope sc = tg_scope_begin();
      tg_tensor *cpu_in[3], *gpu_in[3];
      for (int i = 0; i < c->n_inputs; i++) {
        tg_tensor *t = tg_to_dtype(tg_randn(c->ndim[i], c->sizes[i], TG_OPTS(.dtype = TG_F64), gen),
                                   floating[d]);
        cpu_in[i] = tg_detach(t);
        gpu_in[i] = tg_to_device(t, TG_CUDA0);
        cr_assert_not_null(gpu_in[i], "%s", tg_last_error_message());
      }
      tg_tensor *probe;
      tg_no_grad_begin();
      probe = call(c, cpu_in);
      tg_no_grad_end();
      cr_assert_not_null(probe, "%s", tg_last_error_message());
      tg_tensor *up = tg_to_dtype(
          tg_randn(tg_ndim(probe), tg_sizes(probe), TG_OPTS(.dtype = TG_F64), gen), floating[d]);
      tg_tensor *cpu[7], *gpu[7];
      const int n = run(c, cpu_in, up, cpu);
      run(c, gpu_in, tg_to_device(up, TG_CUDA0), gpu);
      cr_log_info("%s, %s", c->label, tg_dtype_name(floating[d]));
      for (int r = 0; r < n; r++) {
        cr_assert_eq(gpu[r] == NULL, cpu[r] == NULL, "%s: result %d", c->label, r);
        if (!gpu[r]) continue;
        cr_assert_eq(tg_tensor_device(gpu[r]).type, TG_CUDA);
        tg_assert_close(gpu[r], cpu[r], TG_RTOL(floating[d]) * 10, TG_ATOL(floating[d]) * 10);
      }
      tg_scope_end(sc);
    }
  tg_generator_free(gen);
}

TG_CUDA_TEST(cuda_conv, refuses_operands_on_two_devices) {
  tg_tensor *x = tg_to_device(tg_zeros(TG_SHAPE(1, 2, 4, 4), TG_OPTS(.dtype = TG_F32)), TG_CUDA0);
  tg_tensor *w = tg_zeros(TG_SHAPE(2, 2, 3, 3), TG_OPTS(.dtype = TG_F32));
  cr_assert_null(tg_conv2d(x, w, NULL, NULL));
  tg_expect_error(TG_ERR_DEVICE, "tg_conv2d", "w");
}
