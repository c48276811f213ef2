/* In-place binary and scalar pointwise ops, and the front-end step every in-place op
 * shares (the unary ones are generated in pointwise_unary.c). Everything is validated before
 * anything is written (a failed call leaves its target untouched), the inputs by the forward
 * itself, since tg_apply may run it directly; forward writes input 0, bumps its version and
 * returns it, and tg_apply moves the target's history onto the new node.
 *
 * Backward is the base op's (ops.def: TG_OP_INPLACE_OF) and never reads the overwritten
 * value: each op saves what it needs before writing (b), uses the output where it
 * suffices, or gets a copy of the old value as an extra input made on the tape by the
 * front end (mul_ when b needs its gradient; unary ops whose list entry saves IN), so
 * double backward works too.
 * Everything is saved before the write, the output included (then dated after it): saving
 * allocates, and a call that fails must leave its target as it was. */
#include <stdbool.h>

#include "autograd/node.h"
#include "ops/broadcast.h"
#include "ops/pointwise_internal.h"
#include "ops/promotion.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tg/ops.h"

/* ---- forward ---- */

static tg_status finish(tg_tensor *target, tg_tensor **out) {
  tg__bump_version(target);
  out[0] = target;
  return TG_OK;
}

/* a = a (op) b. A b that overlaps a differently (e.g. a row of a, or its transpose) is
 * copied first, so the write cannot change the elements still to be read. (The front end
 * already did so on the tape; this covers a direct tg_apply.) */
static tg_status binary_inplace(const char *op, tg_binary_kind kind, double alpha,
                                const tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *a = (tg_tensor *)in[0];
  const tg_tensor *b = in[1];
  if (tg__needs_staging(a, b) && !(b = tg_clone(b))) return tg_last_error();
  tg_status st = tg__binary_into(op, kind, alpha, a, a, b);
  return st != TG_OK ? st : finish(a, out);
}

/* x = kind(x; a, b) (the scalar ops: their backward reads nothing saved). */
static tg_status scalar_inplace(const char *op, tg_unary_kind kind, double a, double b,
                                const tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = (tg_tensor *)in[0];
  if (!tg__check_inplace_target(op, "a", x) || !tg__check_int_scalar(op, "a", x, "the scalar", a) ||
      !tg__check_int_scalar(op, "a", x, "the scalar", b))
    return tg_last_error();
  tg_status st = tg__unary_into(op, kind, a, b, x, x);
  return st != TG_OK ? st : finish(x, out);
}

/* Saves operand b (input 1). When b is the target itself, the saved reference would be held
 * by the node that becomes the target's grad_fn: a cycle. A detached alias keeps the same
 * storage and version, so backward still sees that the write changed it (and fails). */
static tg_status save_operand(tg_ctx *ctx, const tg_tensor *const *in) {
  const tg_tensor *b = in[1] == in[0] ? tg_detach(in[1]) : in[1];
  return b ? tg_ctx_save_for_backward(ctx, 1, &b) : tg_last_error();
}

/* The inputs as tg__binary_inplace_call passes them: a, b that broadcasts to a, and maybe a's
 * old value. Checked here, since tg_apply may run the op directly (the front end checks only
 * what it needs before the call). */
static bool check_binary_inplace(const tg_ctx *ctx, const char *op, const tg_tensor *const *in) {
  const int n = tg_ctx_num_inputs(ctx);
  if (!tg__check(n == 2 || n == 3, TG_ERR_ARGUMENT, op,
                 "takes a, b and optionally a's old value: %d inputs given", n))
    return false;
  const tg_tensor *a = in[0], *b = in[1];
  return tg__check_inplace_target(op, "a", a) && tg__check_binary_operands(op, "a", a, "b", b) &&
         tg__check_broadcasts_to(op, "b", b->ndim, b->sizes, "a", a->ndim, a->sizes) &&
         (n == 2 || (tg__check_alike(op, "inputs[2]", in[2], "a", a) &&
                     tg__check_same_sizes(op, "inputs[2]", in[2], "a", a)));
}

tg_status tg__binary_inplace_forward(tg_ctx *ctx, const char *op, tg_binary_kind kind, double alpha,
                                     int need, const tg_tensor *const *in, tg_tensor **out) {
  if (!check_binary_inplace(ctx, op, in)) return tg_last_error();
  if (need & TG__SAVE_A && tg_ctx_num_inputs(ctx) < 3)
    return tg_set_error(TG_ERR_STATE, "%s: a gradient needs a's old value but it was not given",
                        op);
  tg_status st = need & TG__SAVE_B ? save_operand(ctx, in) : TG_OK;
  if (st == TG_OK && need & TG__SAVE_A) st = tg_ctx_save_for_backward(ctx, 1, &in[2]);
  if (st == TG_OK && need & TG__SAVE_OUT) st = tg_ctx_save_for_backward(ctx, 1, &in[0]);
  if (st == TG_OK) st = binary_inplace(op, kind, alpha, in, out);
  if (st == TG_OK && need & TG__SAVE_OUT) tg__ctx_saved_target_written(ctx);
  return st;
}

tg_status tg__fwd_add_scalar_(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return scalar_inplace("tg_add_scalar_", TG_UNARY_AFFINE, 1.0, tg_ctx_scalar(ctx, 0), in, out);
}

tg_status tg__fwd_mul_scalar_(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return scalar_inplace("tg_mul_scalar_", TG_UNARY_MUL_SCALAR, tg_ctx_scalar(ctx, 0), 0.0, in, out);
}

/* ---- front ends ---- */

/* Runs desc on (target[, other][, a copy of target's value before the write]) inside a
 * scope of its own, so the copies die with the call unless the tape keeps them. An other
 * that overlaps the target differently (tg__needs_staging) is read through a copy made on
 * the tape: the op then sees the values other had before the write, and its gradient flows
 * back through the copy to other (so to the target's old value when other is a view of it). */
static tg_status run_inplace(const tg_op_desc *desc, tg_tensor *target, const tg_tensor *other,
                             bool with_old, int n_scalars, const double *scalars) {
  tg_scope s = tg_scope_begin();
  tg_tensor *old = with_old ? tg_clone(target) : NULL;
  const tg_tensor *source = other && tg__needs_staging(target, other) ? tg_clone(other) : other;
  const tg_tensor *inputs[3] = {target, source};
  int n = other ? 2 : 1;
  if (old) inputs[n++] = old;
  tg_tensor *out = NULL;
  tg_status st = (with_old && !old) || (other && !source)
                     ? tg_last_error()
                     : tg_apply(desc, n, inputs, n_scalars, scalars, 1, &out);
  tg_scope_end(s);
  return st;
}

/* Whether the op will be recorded with a backward that needs t's value before the write:
 * the front end then passes a copy of it, made on the tape. */
static bool wants_old_value(bool backward_needs_it) {
  return backward_needs_it && tg_is_grad_enabled();
}

tg_status tg__binary_inplace_call(const char *op, tg_binary_kind kind, const tg_op_desc *desc,
                                  tg_tensor *a, const tg_tensor *b, bool a_for_a, bool a_for_b,
                                  int n_scalars, const double *scalars) {
  if (!tg__check_inplace_target(op, "a", a) || !tg__check_arg(op, "b", b) ||
      !tg__check_same_device(op, "b", b, "a", a))
    return tg_last_error(); /* the op checks that b broadcasts to a */
  tg_dtype result = tg__result_type(a, b);
  if (kind == TG_BINARY_DIV && result == TG_I64) result = TG_F32; /* true division */
  if (!tg__check_inplace_cast(op, "a", a, result) ||
      (n_scalars > 0 && !tg__check_int_scalar(op, "a", a, "alpha", scalars[0])))
    return tg_last_error();
  bool need_old = wants_old_value((a_for_a && a->requires_grad) || (a_for_b && b->requires_grad));
  if (b->dtype == a->dtype) return run_inplace(desc, a, b, need_old, n_scalars, scalars);
  /* b is cast to a's dtype on the tape (its gradient comes back in its own dtype), so the op
   * computes in a's dtype: PyTorch computes an F32 target with an F64 operand in F64 and
   * rounds once (docs/dtypes.md). */
  tg_scope s = tg_scope_begin();
  const tg_tensor *cast = tg_to_dtype(b, a->dtype);
  tg_status st = cast ? run_inplace(desc, a, cast, need_old, n_scalars, scalars) : tg_last_error();
  tg_scope_end(s);
  return st;
}

tg_status tg_add_scaled_(tg_tensor *a, const tg_tensor *b, double alpha) {
  return tg__binary_inplace_call("tg_add_scaled_", TG_BINARY_ADD, TG__OP(add_), a, b, false, false,
                                 TG__SC(alpha));
}

tg_status tg__unary_inplace_call(const char *op, const tg_op_desc *desc, tg_tensor *x,
                                 bool with_old, int n_scalars, const double *scalars) {
  if (!tg__check_inplace_target(op, "x", x)) return tg_last_error();
  return run_inplace(desc, x, NULL, wants_old_value(with_old && x->requires_grad), n_scalars,
                     scalars);
}

tg_status tg_add_scalar_(tg_tensor *a, double s) {
  if (!tg__check_arg("tg_add_scalar_", "a", a) ||
      !tg__check_int_scalar("tg_add_scalar_", "a", a, "s", s))
    return tg_last_error();
  return tg__unary_inplace_call("tg_add_scalar_", TG__OP(add_scalar_), a, false, TG__SC(s));
}
tg_status tg_mul_scalar_(tg_tensor *a, double s) {
  if (!tg__check_arg("tg_mul_scalar_", "a", a) ||
      !tg__check_int_scalar("tg_mul_scalar_", "a", a, "s", s))
    return tg_last_error();
  return tg__unary_inplace_call("tg_mul_scalar_", TG__OP(mul_scalar_), a, false, TG__SC(s));
}
