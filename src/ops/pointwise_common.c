/* Argument checks and kernel calls shared by the pointwise ops. */
#include "ops/broadcast.h"
#include "ops/pointwise_internal.h"

bool tg__check_binary_operands(const char *op, const char *a_name, const tg_tensor *a,
                               const char *b_name, const tg_tensor *b) {
  return tg__check_arg(op, a_name, a) && tg__check_arg(op, b_name, b) &&
         tg__check_alike(op, a_name, a, b_name, b);
}

bool tg__check_inplace_target(const char *op, const char *arg, const tg_tensor *t) {
  return tg__check_arg(op, arg, t) &&
         tg__check(!tg__has_internal_overlap(t), TG_ERR_ARGUMENT, op,
                   "%s %s has overlapping elements (an expanded view); clone it first", arg,
                   tg__sizes_str(t));
}

tg_status tg__unary_into(const char *op, tg_unary_kind kind, double a, double b, tg_tensor *out,
                         const tg_tensor *x) {
  const tg_backend *be = tg__backend(op, out->storage->device);
  return be ? be->unary(kind, a, b, out, x) : tg_last_error();
}

tg_tensor *tg__unary_new(const char *op, tg_unary_kind kind, double a, double b,
                         const tg_tensor *x) {
  tg_tensor *out = tg_empty(x->ndim, x->sizes, (tg_options){x->dtype, x->storage->device, false});
  if (!out || tg__unary_into(op, kind, a, b, out, x) != TG_OK) return NULL;
  return out;
}

/* A new reference to t when it already has out's sizes, else to a broadcast view of it. */
static tg_tensor *broadcast_to_out(const tg_tensor *t, const tg_tensor *out) {
  return tg__same_sizes(t, out) ? tg_retain(t) : tg__broadcast_view(t, out->ndim, out->sizes);
}

tg_status tg__binary_into(const char *op, tg_binary_kind kind, double alpha, tg_tensor *out,
                          const tg_tensor *a, const tg_tensor *b) {
  const tg_backend *be = tg__backend(op, out->storage->device);
  if (!be) return tg_last_error();
  tg_tensor *ea = broadcast_to_out(a, out), *eb = ea ? broadcast_to_out(b, out) : NULL;
  tg_status st = eb ? be->binary(kind, alpha, out, ea, eb) : tg_last_error();
  tg_release(ea);
  tg_release(eb);
  return st;
}

tg_status tg__where_into(const char *op, tg_tensor *out, const tg_tensor *cond, const tg_tensor *a,
                         const tg_tensor *b) {
  const tg_backend *be = tg__backend(op, out->storage->device);
  if (!be) return tg_last_error();
  tg_tensor *ec = broadcast_to_out(cond, out), *ea = ec ? broadcast_to_out(a, out) : NULL;
  tg_tensor *eb = ea ? broadcast_to_out(b, out) : NULL;
  tg_status st = eb ? be->where(out, ec, ea, eb) : tg_last_error();
  tg_release(ec);
  tg_release(ea);
  tg_release(eb);
  return st;
}
