/* Per-tensor autograd state: requires_grad, .grad, grad_fn, detach. */
#include "grad_arith.h"
#include "grad_lock.h"
#include "node.h"

/* A getter's t: NULL, or live (the lifetime checker aborts on a freed one). */
static inline bool given(const char *fn, const tg_tensor *t) {
  if (t) tg__lifetime_verify(fn, "t", t);
  return t != NULL;
}

bool tg_requires_grad(const tg_tensor *t) {
  return given("tg_requires_grad", t) && t->requires_grad;
}

bool tg_is_leaf(const tg_tensor *t) { return given("tg_is_leaf", t) && !t->grad_fn; }

tg_status tg_set_requires_grad(tg_tensor *t, bool requires_grad) {
  if (!tg__check_arg("tg_set_requires_grad", "t", t)) return tg_last_error();
  if (t->grad_fn)
    return tg_set_error(TG_ERR_STATE,
                        "tg_set_requires_grad: t is the output of %s, not a leaf; use tg_detach",
                        t->grad_fn->ctx.op->name);
  if (requires_grad && !tg_dtype_is_floating(t->dtype))
    return tg_set_error(TG_ERR_DTYPE,
                        "tg_set_requires_grad: only floating tensors can require grad, not %s",
                        tg_dtype_name(t->dtype));
  t->requires_grad = requires_grad;
  return TG_OK;
}

/* .grad is read, swapped and zeroed under the same lock backward accumulates under. */
tg_tensor *tg_grad(const tg_tensor *t) {
  if (!given("tg_grad", t)) return NULL;
  tg__grad_lock(t);
  tg_tensor *g = t->grad;
  tg__grad_unlock(t);
  return g;
}

tg_status tg_set_grad(tg_tensor *t, const tg_tensor *grad) {
  if (!tg__check_arg("tg_set_grad", "t", t)) return tg_last_error();
  if (grad && (!tg__check_same_sizes("tg_set_grad", "grad", grad, "t", t) ||
               !tg__check_alike("tg_set_grad", "grad", grad, "t", t)))
    return tg_last_error();
  tg_retain(grad);
  tg__grad_lock(t);
  tg_tensor *old = t->grad;
  t->grad = (tg_tensor *)grad;
  tg__grad_unlock(t);
  tg_release(old); /* outside the lock: it may free a graph */
  return TG_OK;
}

tg_status tg_zero_grad(tg_tensor *t) {
  if (!tg__check_arg("tg_zero_grad", "t", t)) return tg_last_error();
  tg_tensor *drop = NULL;
  tg_status st = TG_OK;
  tg__grad_lock(t);
  if (t->grad && t->grad->grad_fn) { /* a graph-carrying grad from create_graph: drop it */
    drop = t->grad;
    t->grad = NULL;
  } else if (t->grad) {
    st = tg__grad_arith()->fill("tg_zero_grad", t->grad, 0.0);
    if (st == TG_OK) tg__bump_version(t->grad);
  }
  tg__grad_unlock(t);
  tg_release(drop); /* outside the lock: it may free a graph */
  return st;
}

const char *tg_grad_fn_name(const tg_tensor *t) {
  return given("tg_grad_fn_name", t) && t->grad_fn ? t->grad_fn->ctx.op->name : NULL;
}

tg_tensor *tg_detach(const tg_tensor *t) {
  if (!tg__check_arg("tg_detach", "t", t)) return NULL;
  return tg__scoped(tg__alias_raw(t));
}
