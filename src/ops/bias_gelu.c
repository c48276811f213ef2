/* bias_gelu: y = gelu(x + bias) with GELU's tanh form, the worked example of a fused op
 * (docs/adding-a-fused-op.md). The composed form, tg_gelu-free, is four tg ops and three
 * temporaries each way; fused, one device kernel each way: the forward reads x and bias once
 * and writes y, the backward writes dx in one pass and sums it over rows for dbias.
 *
 * Its list entry and kernel lines are in src/ops/def/pointwise.def; the kernels are
 * src/ops/cpu/bias_gelu_cpu.c and src/ops/cuda/bias_gelu.cu. */
#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

static const char *const api = "bias_gelu";

static tg_status check_inputs(const tg_tensor *x, const tg_tensor *bias) {
  if (!tg__check_floating(api, "x", x) ||
      !tg__check(x->ndim == 2, TG_ERR_SHAPE, api, "x must be 2-D [m, n], got %s",
                 tg__sizes_str(x)) ||
      !tg__check_alike(api, "bias", bias, "x", x) ||
      !tg__check(bias->ndim == 1 && bias->sizes[0] == x->sizes[1], TG_ERR_SHAPE, api,
                 "bias is %s; x is %s, so bias must be [%lld]", tg__sizes_str(bias),
                 tg__sizes_str(x), (long long)x->sizes[1]))
    return tg_last_error();
  return TG_OK;
}

tg_status tg__fwd_bias_gelu(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_status st = check_inputs(in[0], in[1]);
  if (st != TG_OK) return st;
  const tg_device device = in[0]->storage->device;
  tg_kernel_fn forward = tg__kernel(api, "bias_gelu.forward", device);
  /* The kernels take contiguous tensors: a copy only where the caller's is not. */
  tg_tensor *x = forward ? tg_contiguous(in[0]) : NULL;
  tg_tensor *bias = x ? tg_contiguous(in[1]) : NULL;
  tg_tensor *y = bias ? tg_empty(2, x->sizes, (tg_options){x->dtype, device, false}) : NULL;
  if (!y || forward(3, (tg_tensor *const[]){y, x, bias}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 2, (const tg_tensor *const[]){x, bias}) != TG_OK)
    return tg_last_error();
  out[0] = y;
  return TG_OK;
}

/* dx = g * gelu'(x + bias) in one pass; dbias = dx summed over the rows. */
tg_status tg__bwd_bias_gelu(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *x = tg_ctx_saved(ctx, 0), *bias = tg_ctx_saved(ctx, 1);
  if (!x || !bias) return tg_last_error();
  tg_kernel_fn backward = tg__kernel(api, "bias_gelu.backward", x->storage->device);
  tg_tensor *grad = backward ? tg_contiguous(g[0]) : NULL;
  tg_tensor *dx =
      grad ? tg_empty(2, x->sizes, (tg_options){x->dtype, x->storage->device, false}) : NULL;
  if (!dx || backward(4, (tg_tensor *const[]){dx, grad, x, bias}) != TG_OK) return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 0)) gi[0] = dx;
  if (tg_ctx_needs_input_grad(ctx, 1) && !(gi[1] = tg_sum_dim(dx, 0, false)))
    return tg_last_error();
  return TG_OK;
}

/* ---- sample inputs (tg's OpInfo), written with the public API ---- */

/* Values drawn on the CPU in F64 and then converted, so every device and dtype gets the same
 * ones; made with grad off, so a transposed or stepped view is a leaf that can require grad. */
static tg_tensor *sample_input(const tg_sample_request *r, int64_t rows, int64_t cols,
                               bool transposed, bool stepped, bool grad) {
  const int64_t sizes[2] = {transposed ? cols : rows, transposed ? rows
                                                      : stepped  ? 2 * cols
                                                                 : cols};
  const int ndim = rows < 0 ? 1 : 2;
  tg_tensor *t =
      tg_randn(ndim, ndim == 1 ? sizes + 1 : sizes, (tg_options){.dtype = TG_F64}, r->gen);
  if (t && transposed) t = tg_t(t);
  if (t && stepped) t = tg_slice(t, ndim - 1, 0, sizes[1], 2);
  if (t) t = tg_to_dtype(t, r->dtype);
  if (t) t = tg_to_device(t, r->device);
  if (t && grad && tg_set_requires_grad(t, true) != TG_OK) return NULL;
  return t;
}

/* x [m, n] in several layouts, bias [n]; the bench call at a GPT-2 MLP's hidden size. */
int tg__samples_bias_gelu(const tg_sample_request *r, tg_sample *out) {
  struct {
    const char *label;
    int64_t m, n;
    bool x_transposed, bias_stepped, bias_grad;
  } const cases[] = {
      {"2-D", 3, 5, false, false, true},         {"transposed x", 3, 4, true, false, true},
      {"stepped bias", 2, 4, false, true, true}, {"bias without grad", 2, 3, false, false, false},
      {"zero rows", 0, 3, false, false, true},
  };
  const int count = r->bench ? 1 : (int)(sizeof cases / sizeof cases[0]);
  tg_no_grad_begin();
  int made = 0;
  for (; made < count; made++) {
    const int64_t m = r->bench ? 1024 : cases[made].m, n = r->bench ? 3072 : cases[made].n;
    tg_tensor *x = sample_input(r, m, n, !r->bench && cases[made].x_transposed, false, true);
    tg_tensor *bias = x ? sample_input(r, -1, n, false, !r->bench && cases[made].bias_stepped,
                                       r->bench || cases[made].bias_grad)
                        : NULL;
    if (!bias) break;
    out[made] = (tg_sample){
        .label = r->bench ? "bench" : cases[made].label, .n_inputs = 2, .inputs = {x, bias}};
  }
  tg_no_grad_end();
  return made == count ? count : -1;
}
