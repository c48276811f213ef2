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
#include "ops/samples/samples_internal.h"
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

/* x [m, n] in several layouts, bias [n]; the bench call at a GPT-2 MLP's hidden size. */
int tg__samples_bias_gelu(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define BIAS_GELU(label, x, bias)                                                                  \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  tg__sample_input(&b, s, bias);
  if (r->bench) {
    BIAS_GELU("bench", TG__GRAD(&b, TG__ANY, 1024, 3072), TG__GRAD(&b, TG__ANY, 3072))
    return tg__samples_end(&b);
  }
  BIAS_GELU("2-D", TG__GRAD(&b, TG__ANY, 3, 5), TG__GRAD(&b, TG__ANY, 5))
  BIAS_GELU("transposed x", tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(4, 3)),
            TG__GRAD(&b, TG__ANY, 3))
  BIAS_GELU("stepped bias", TG__GRAD(&b, TG__ANY, 2, 4),
            tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(4)))
  BIAS_GELU("bias without grad", TG__GRAD(&b, TG__ANY, 2, 3), TG__CONST(&b, TG__ANY, 3))
  BIAS_GELU("zero rows", TG__GRAD(&b, TG__ANY, 0, 3), TG__GRAD(&b, TG__ANY, 3))
#undef BIAS_GELU
  return tg__samples_end(&b);
}
