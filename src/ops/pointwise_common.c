/* Argument checks and kernel calls shared by the pointwise ops. */
#include "ops/broadcast.h"
#include "ops/pointwise_internal.h"

bool tg__check_floating(const char *op, const char *arg, const tg_tensor *t) {
  if (t->dtype == TG_F32 || t->dtype == TG_F64) return true;
  tg_set_error(TG_ERR_DTYPE, "%s: %s is %s; expected float32 or float64", op, arg,
               tg_dtype_name(t->dtype));
  return false;
}

bool tg__check_binary_operands(const char *op, const char *a_name, const tg_tensor *a,
                               const char *b_name, const tg_tensor *b) {
  if (!tg__check_arg(op, a_name, a) || !tg__check_arg(op, b_name, b)) return false;
  if (!tg__check_floating(op, a_name, a) || !tg__check_floating(op, b_name, b)) return false;
  if (a->dtype != b->dtype) {
    tg_set_error(TG_ERR_DTYPE, "%s: %s is %s but %s is %s", op, a_name, tg_dtype_name(a->dtype),
                 b_name, tg_dtype_name(b->dtype));
    return false;
  }
  tg_device da = a->storage->device, db = b->storage->device;
  if (!tg_device_equal(da, db)) {
    tg_set_error(TG_ERR_DEVICE, "%s: %s is on %s:%d but %s is on %s:%d", op, a_name,
                 tg_device_type_name(da.type), da.index, b_name, tg_device_type_name(db.type),
                 db.index);
    return false;
  }
  return true;
}

bool tg__check_inplace_target(const char *op, const char *arg, const tg_tensor *t) {
  if (!tg__check_arg(op, arg, t) || !tg__check_floating(op, arg, t)) return false;
  if (tg__has_internal_overlap(t)) {
    char buf[160];
    tg_set_error(TG_ERR_ARGUMENT,
                 "%s: %s %s has overlapping elements (an expanded view); clone it first", op, arg,
                 tg_format_sizes(buf, sizeof buf, t->ndim, t->sizes));
    return false;
  }
  return true;
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
  bool same = t->ndim == out->ndim;
  for (int d = 0; same && d < t->ndim; d++) same = t->sizes[d] == out->sizes[d];
  return same ? tg_retain(t) : tg__broadcast_view(t, out->ndim, out->sizes);
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
