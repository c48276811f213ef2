/* Sample inputs of the in-place ops (TG_OP_INPLACE_OF in ops.def): those of the base op
 * whose result keeps input 0's sizes and dtype, since an in-place op writes its result into
 * input 0 (b broadcasts to a, never a to b). tg_op_check runs them on a clone of input 0. */
#include "testing/samples/samples_internal.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"

/* Whether the base op's result of sample s fits into its input 0: runs the forward. */
static bool fits_input0(const tg_op_desc *base, const tg_sample *s, bool *fits) {
  int n_out = s->n_outputs > 0 ? s->n_outputs : base->n_outputs;
  tg_tensor *outs[TG_SAMPLE_MAX_INPUTS] = {NULL};
  if (n_out <= 0 || n_out > TG_SAMPLE_MAX_INPUTS || s->n_inputs < 1) {
    *fits = false;
    return true;
  }
  tg_scope scope = tg_scope_begin();
  tg_no_grad_begin();
  tg_status st = tg_apply_ex(base, s->n_inputs, (const tg_tensor *const *)s->inputs, s->n_scalars,
                             s->scalars, s->n_ints, s->ints, n_out, outs);
  tg_no_grad_end();
  const tg_tensor *x = s->inputs[0];
  *fits = st == TG_OK && outs[0]->dtype == x->dtype &&
          tg__dims_equal(outs[0]->ndim, outs[0]->sizes, x->ndim, x->sizes);
  tg_scope_end(scope);
  return st == TG_OK;
}

int tg__samples_inplace(const tg_op_desc *base, const tg_sample_request *req, tg_sample *out) {
  if (!base->sample_inputs)
    return tg_set_error(TG_ERR_UNSUPPORTED, "sample inputs: base op '%s' has none", base->name), -1;
  int n = base->sample_inputs(req, out);
  if (n < 0) return -1;
  int kept = 0;
  for (int i = 0; i < n; i++) {
    bool fits;
    if (!fits_input0(base, &out[i], &fits)) return -1;
    if (fits) out[kept++] = out[i];
  }
  if (kept == 0)
    return tg_set_error(TG_ERR_SHAPE,
                        "sample inputs: no sample of '%s' has a result of input 0's sizes",
                        base->name),
           -1;
  return kept;
}

#define TG_OP(name, nin, nout, flags)
#define TG_OP_NOGRAD(name, nin, nout, flags)
#define TG_OP_INPLACE_OF(name, base, nin, nout, flags)                                             \
  int tg__samples_##name(const tg_sample_request *r, tg_sample *out) {                             \
    return tg__samples_inplace(TG__OP(base), r, out);                                              \
  }
#include "ops/ops.def"
#undef TG_OP
#undef TG_OP_NOGRAD
#undef TG_OP_INPLACE_OF
