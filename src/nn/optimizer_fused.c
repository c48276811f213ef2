/* Adam's and AdamW's step as one pass per parameter on its device (the kernel adam.step,
 * src/ops/def/optim.def) instead of a chain of whole-tensor ops whose results all stay alive
 * until the step ends: at GPT-2 small (124 M parameters) that chain was half of a training
 * step and most of its peak memory (7.4 of 15 s, 1 thread, Zen 3). The kernel's arithmetic is the
 * chain's, so both give the same bits; it writes in place and allocates nothing, so the step stays
 * all or nothing (tg_optimizer_step checks every parameter before writing any). */
#include "nn/optimizer_fused.h"

#include "ops/adam_math.h"
#include "ops/backend.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

/* t is the only reference to its memory: nobody (a state dict the user kept, a view) sees a
 * write into it. */
static bool unshared(const tg_tensor *t) {
  return atomic_load(&t->refcount) == 1 && atomic_load(&t->storage->refcount) == 1;
}

/* b is a contiguous tensor of a's dtype, device and sizes. */
static bool same_layout(const tg_tensor *a, const tg_tensor *b) {
  return tg__is_alike(b, a) && tg__same_sizes(b, a) && tg_is_contiguous(b);
}

tg_kernel_fn tg__adam_fused_kernel(const tg_optimizer *opt, int i, const tg_tensor *g) {
  const tg_tensor *p = opt->params[i], *m = opt->state1[i], *v = opt->state2[i];
  if (!tg__opt_adam_like(opt->kind) || !m || !v || (p->dtype != TG_F32 && p->dtype != TG_F64) ||
      !tg_is_contiguous(p) || !same_layout(p, g) || !same_layout(p, m) || !same_layout(p, v) ||
      !unshared(m) || !unshared(v) || g->storage == p->storage)
    return NULL;
  tg_status saved = tg_last_error();
  tg_kernel_fn k = tg__kernel("tg_optimizer_step", "adam.step", p->storage->device);
  if (!k && saved == TG_OK) tg_clear_error(); /* a device without it: the composed update */
  return k;
}

tg_tensor *tg__adam_fused_params(void) {
  return tg_zeros(TG_SHAPE(TG_ADAM_NUM_PARAMS), (tg_options){.dtype = TG_F64});
}

tg_status tg__adam_fused_run(tg_optimizer *opt, int i, tg_kernel_fn kernel, tg_tensor *params) {
  const optimizer_group *grp = &opt->groups[opt->group_of[i]];
  double *p = tg_data_ptr(params);
  p[TG_ADAM_LR] = grp->lr;
  p[TG_ADAM_BETA1] = opt->adam.beta1;
  p[TG_ADAM_BETA2] = opt->adam.beta2;
  p[TG_ADAM_EPS] = opt->adam.eps;
  p[TG_ADAM_WEIGHT_DECAY] = grp->weight_decay;
  p[TG_ADAM_DECOUPLED] = opt->kind == OPT_ADAMW;
  p[TG_ADAM_STEP] = (double)(opt->steps[i] + 1);
  tg_tensor *param = opt->params[i];
  return kernel(
      5, (tg_tensor *const[]){param, tg_grad(param), opt->state1[i], opt->state2[i], params});
}
