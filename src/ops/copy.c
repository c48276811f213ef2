/* Copies, fills, element access and dtype/device conversion. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/registry.h"
#include "tensor/checked.h"
#include "tensor/internal_assert.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

/* Moves nbytes between the host and a device, or between devices of one type, through the
 * device side's backend (the CPU backend for host to host). */
static tg_status move_bytes(const char *op, void *dst, tg_device dd, const void *src, tg_device sd,
                            size_t nbytes) {
  const tg_device_ops *dev = tg__device(op, dd.type != TG_CPU ? dd : sd);
  return dev ? dev->copy_bytes(op, dst, dd, src, sd, nbytes) : tg_last_error();
}

tg_tensor *tg__host_contiguous(const char *op, const tg_tensor *t) {
  tg_tensor *h = tg__empty_op(op, t->ndim, t->sizes, t->dtype, TG_DEVICE_CPU);
  if (!h) return NULL;
  tg_status st;
  if (t->storage->device.type == TG_CPU) {
    st = tg__backend(op, TG_DEVICE_CPU)->copy(h, t); /* the CPU is always built */
  } else {
    const tg_backend *be = tg__backend(op, t->storage->device);
    tg_tensor *dense =
        be ? tg__empty_op(op, t->ndim, t->sizes, t->dtype, t->storage->device) : NULL;
    st = dense ? be->copy(dense, t) : tg_last_error();
    if (st == TG_OK)
      st = move_bytes(op, h->storage->data, TG_DEVICE_CPU, tg_data_ptr(dense), t->storage->device,
                      h->storage->nbytes);
    tg_release(dense);
  }
  if (st != TG_OK) {
    tg_release(h);
    return NULL;
  }
  return h;
}

/* dst = src where both have equal sizes; devices may differ; dtypes may differ. */
static tg_status copy_same_sizes(const char *op, tg_tensor *dst, const tg_tensor *src) {
  tg_device dd = dst->storage->device, sd = src->storage->device;
  if (tg_device_equal(dd, sd)) {
    const tg_backend *be = tg__backend(op, dd);
    return be ? be->copy(dst, src) : tg_last_error();
  }
  /* Across devices: convert on the source side, move one dense buffer, scatter on arrival.
   * A device without drivers (tg/device.h) can still send a dense tensor of the target's
   * dtype and receive into a dense one: moving bytes is all it needs. */
  tg_tensor *staged = NULL, *dense = NULL;
  tg_status st = TG_OK;
  const tg_device_ops *src_dev = tg__device(op, sd), *dst_dev = tg__device(op, dd);
  if (!src_dev || !dst_dev) return tg_last_error();
  bool direct = tg_is_contiguous(dst) && !tg__has_internal_overlap(dst);
  if (!src_dev->drivers && !(tg_is_contiguous(src) && src->dtype == dst->dtype))
    return tg_set_error(TG_ERR_UNSUPPORTED,
                        "%s: device %s has no drivers to make a dense %s copy of a %s tensor "
                        "with strides %s",
                        op, src_dev->name, tg_dtype_name(dst->dtype), tg_dtype_name(src->dtype),
                        tg__dims_str(src->ndim, src->strides));
  if (!direct && !dst_dev->drivers)
    return tg_set_error(TG_ERR_UNSUPPORTED,
                        "%s: device %s has no drivers to scatter into a "
                        "non-contiguous destination",
                        op, dst_dev->name);
  if (src_dev->drivers) {
    staged = tg__empty_op(op, src->ndim, src->sizes, dst->dtype, sd);
    if (!staged || src_dev->drivers->copy(staged, src) != TG_OK) goto fail;
  } else {
    staged = tg_retain(src);
  }
  dense = direct ? tg_retain(dst) : tg__empty_op(op, dst->ndim, dst->sizes, dst->dtype, dd);
  if (!dense) goto fail;
  st = move_bytes(op, tg_data_ptr(dense), dd, tg_data_ptr(staged), sd,
                  (size_t)tg__numel(dst->ndim, dst->sizes) * tg_dtype_size(dst->dtype));
  if (st == TG_OK && !direct) st = dst_dev->drivers->copy(dst, dense);
  tg_release(staged);
  tg_release(dense);
  return st;
fail:
  tg_release(staged);
  tg_release(dense);
  return tg_last_error();
}

static bool broadcastable_to(const tg_tensor *src, const tg_tensor *dst) {
  if (src->ndim > dst->ndim) return false;
  for (int d = 0; d < src->ndim; d++) {
    int64_t s = src->sizes[src->ndim - 1 - d], t = dst->sizes[dst->ndim - 1 - d];
    if (s != t && s != 1) return false;
  }
  return true;
}

/* src broadcast to dst's sizes with stride-0 dims, without touching the tape. */
static tg_tensor *broadcast_view(const tg_tensor *src, const tg_tensor *dst) {
  tg_tensor *view =
      tg__tensor_new(src->storage, src->offset, dst->ndim, dst->sizes, NULL, src->dtype);
  if (!view) return NULL;
  int lead = dst->ndim - src->ndim;
  for (int d = 0; d < dst->ndim; d++) {
    int s = d - lead;
    view->strides[d] = s < 0 || (src->sizes[s] == 1 && dst->sizes[d] != 1) ? 0 : src->strides[s];
  }
  return view;
}

/* The checks every copy needs, the forward's too (tg_apply may run it directly). */
static bool check_copy(const tg_tensor *dst, const tg_tensor *src) {
  if (!tg__check_arg("tg_copy_", "dst", dst) || !tg__check_arg("tg_copy_", "src", src))
    return false;
  if (!broadcastable_to(src, dst))
    return tg_set_error(TG_ERR_SHAPE, "tg_copy_: src %s does not broadcast to dst %s",
                        tg__sizes_str(src), tg__sizes_str(dst)),
           false;
  if (tg__has_internal_overlap(dst))
    return tg_set_error(TG_ERR_ARGUMENT,
                        "tg_copy_: dst %s has overlapping elements (an expanded view)",
                        tg__sizes_str(dst)),
           false;
  return true;
}

/* dst = src broadcast and converted, off the tape; bumps dst's version. */
static tg_status copy_values(tg_tensor *dst, const tg_tensor *src) {
  tg_tensor *view = broadcast_view(src, dst), *staged = NULL;
  if (view && tg__needs_staging(dst, view)) {
    /* src overlaps dst differently (its transpose, a shifted window): read it whole into a
     * temporary first, so no element is overwritten before it is read. */
    staged = tg__empty_op("tg_copy_", src->ndim, src->sizes, src->dtype, src->storage->device);
    tg_status st = staged ? copy_same_sizes("tg_copy_", staged, src) : tg_last_error();
    tg_release(view);
    view = st == TG_OK ? broadcast_view(staged, dst) : NULL;
  }
  tg_status st = view ? copy_same_sizes("tg_copy_", dst, view) : tg_last_error();
  tg_release(view);
  tg_release(staged);
  if (st == TG_OK) tg__bump_version(dst);
  return st;
}

/* The recorded copy (inputs: dst, src on dst's device): writes dst and returns it. */
tg_status tg__fwd_copy_(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  tg_tensor *dst = (tg_tensor *)in[0];
  if (!check_copy(dst, in[1])) return tg_last_error();
  tg_status st = copy_values(dst, in[1]);
  if (st == TG_OK) out[0] = dst;
  return st;
}

/* As PyTorch's CopyBackwards: dst's old value was overwritten, so its gradient is 0; src's
 * is g summed back over the broadcast dims, in src's dtype. */
tg_status tg__bwd_copy_(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (tg_ctx_needs_input_grad(ctx, 0) && !(gi[0] = tg_zeros_like(g[0]))) return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1)) {
    tg_tensor *summed = tg_sum_to_size(g[0], tg_ctx_input_ndim(ctx, 1), tg_ctx_input_sizes(ctx, 1));
    gi[1] = summed ? tg_to_dtype(summed, tg_ctx_input_dtype(ctx, 1)) : NULL;
    if (!gi[1]) return tg_last_error();
  }
  return TG_OK;
}

tg_status tg_copy_(tg_tensor *dst, const tg_tensor *src) {
  if (!check_copy(dst, src)) return tg_last_error();
  /* Recorded as PyTorch records it: when src requires grad or dst has history (an integer
   * dst takes no gradient, so its copy is not recorded). */
  bool record = tg_is_grad_enabled() && tg_dtype_is_floating(dst->dtype) &&
                (dst->requires_grad || src->requires_grad);
  if (!record) return copy_values(dst, src);
  /* A recorded op runs on one device: src moves to dst's on the tape first. */
  tg_scope scope = tg_scope_begin();
  const tg_tensor *from = tg_device_equal(src->storage->device, dst->storage->device)
                              ? src
                              : tg_to_device(src, dst->storage->device);
  tg_tensor *out = NULL;
  tg_status st =
      from ? tg_apply(TG__OP(copy_), 2, (const tg_tensor *const[]){dst, from}, 0, NULL, 1, &out)
           : tg_last_error();
  tg_scope_end(scope);
  return st;
}

tg_status tg_fill_(tg_tensor *t, double value) {
  if (!tg__check_arg("tg_fill_", "t", t)) return tg_last_error();
  if (tg_is_grad_enabled() && t->requires_grad)
    return tg_set_error(TG_ERR_UNSUPPORTED,
                        "tg_fill_: t requires grad; fill it inside tg_no_grad_begin/end");
  if (!tg__check_value_fits("tg_fill_", "value", t->dtype, value)) return tg_last_error();
  const tg_backend *be = tg__backend("tg_fill_", t->storage->device);
  if (!be) return tg_last_error();
  tg_status st = be->fill(t, value);
  if (st == TG_OK) tg__bump_version(t);
  return st;
}

tg_status tg_zero_(tg_tensor *t) { return tg_fill_(t, 0.0); }

/* ---- contiguous / clone ---- */

tg_status tg__fwd_clone(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  const tg_tensor *t = in[0];
  tg_tensor *o = tg__empty_op("tg_clone", t->ndim, t->sizes, t->dtype, t->storage->device);
  const tg_backend *be = o ? tg__backend("tg_clone", t->storage->device) : NULL;
  if (!be || be->copy(o, t) != TG_OK) {
    tg_release(o);
    return tg_last_error();
  }
  out[0] = tg__scoped(o);
  return TG_OK;
}

tg_status tg__bwd_clone(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  gi[0] = (tg_tensor *)g[0];
  return TG_OK;
}

tg_tensor *tg_clone(const tg_tensor *t) {
  return tg_apply1(TG__OP(clone), 1, (const tg_tensor *const[]){t}, 0, NULL);
}

tg_tensor *tg_contiguous(const tg_tensor *t) {
  if (!tg__check_arg("tg_contiguous", "t", t)) return NULL;
  if (tg_is_contiguous(t)) return tg__scoped(tg_retain(t));
  return tg_clone(t);
}

/* ---- dtype / device ---- */

tg_status tg__fwd_to_dtype(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *t = in[0];
  tg_dtype dtype = (tg_dtype)tg_ctx_int(ctx, 0);
  tg_tensor *o = tg__empty_op("tg_to_dtype", t->ndim, t->sizes, dtype, t->storage->device);
  const tg_backend *be = o ? tg__backend("tg_to_dtype", t->storage->device) : NULL;
  if (!be || be->copy(o, t) != TG_OK) {
    tg_release(o);
    return tg_last_error();
  }
  out[0] = tg__scoped(o);
  return TG_OK;
}

tg_status tg__bwd_to_dtype(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_to_dtype(g[0], tg_ctx_input_dtype(ctx, 0));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_to_dtype(const tg_tensor *t, tg_dtype dtype) {
  if (!tg__check_arg("tg_to_dtype", "t", t)) return NULL;
  if ((unsigned)dtype >= TG_NUM_DTYPES) {
    tg_set_error(TG_ERR_DTYPE, "tg_to_dtype: invalid dtype %d", (int)dtype);
    return NULL;
  }
  if (dtype == t->dtype) return tg__scoped(tg_retain(t));
  return tg_apply1_ex(TG__OP(to_dtype), 1, (const tg_tensor *const[]){t}, TG__NO_SC,
                      TG__INTS(dtype));
}

tg_status tg__fwd_to_device(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *t = in[0];
  const int64_t type = tg_ctx_int(ctx, 0), index = tg_ctx_int(ctx, 1);
  /* Checked here too: tg_apply_ex may run the op directly with any ints. */
  if (type < 0 || type >= TG_NUM_DEVICE_TYPES || index < INT_MIN || index > INT_MAX)
    return tg_set_error(TG_ERR_DEVICE, "tg_to_device: invalid device type %lld, index %lld",
                        (long long)type, (long long)index);
  tg_device device = {(tg_device_type)type, (int)index};
  if (!tg__device_ready("tg_to_device", device)) return tg_last_error();
  tg_tensor *o = tg__empty_op("tg_to_device", t->ndim, t->sizes, t->dtype, device);
  if (!o || copy_same_sizes("tg_to_device", o, t) != TG_OK) {
    tg_release(o);
    return tg_last_error();
  }
  out[0] = tg__scoped(o);
  return TG_OK;
}

tg_status tg__bwd_to_device(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_to_device(g[0], tg_ctx_input_device(ctx, 0));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_to_device(const tg_tensor *t, tg_device device) {
  if (!tg__check_arg("tg_to_device", "t", t)) return NULL;
  if ((unsigned)device.type >= TG_NUM_DEVICE_TYPES) {
    tg_set_error(TG_ERR_DEVICE, "tg_to_device: invalid device type %d", (int)device.type);
    return NULL;
  }
  if (!tg__device_ready("tg_to_device", device)) return NULL;
  if (tg_device_equal(device, t->storage->device)) return tg__scoped(tg_retain(t));
  /* The forward runs with the tensor's device kernel table; both slots point at it. */
  tg_tensor *out = NULL;
  const tg_op_desc *op = TG__OP(to_device);
  tg_apply_ex(op, 1, (const tg_tensor *const[]){t}, TG__NO_SC, TG__INTS(device.type, device.index),
              1, &out);
  return out;
}

/* ---- element access ---- */

static bool check_index(const char *op, const tg_tensor *t, const int64_t *index, int64_t *flat) {
  if (t->ndim > 0 && !index)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: index is NULL for a %d-dim tensor", op, t->ndim),
           false;
  int64_t off = t->offset;
  for (int d = 0; d < t->ndim; d++) {
    /* A negative index counts from the end, as tg_select's and PyTorch's do. */
    int64_t i = index[d] < 0 ? index[d] + t->sizes[d] : index[d];
    if (i < 0 || i >= t->sizes[d]) {
      return tg_set_error(TG_ERR_INDEX,
                          "%s: index %lld is out of range for dim %d of size %lld (tensor %s; "
                          "valid: -%lld..%lld)",
                          op, (long long)index[d], d, (long long)t->sizes[d], tg__sizes_str(t),
                          (long long)t->sizes[d], (long long)t->sizes[d] - 1),
             false;
    }
    off += i * t->strides[d];
  }
  *flat = off;
  return true;
}

static double load(tg_dtype dtype, const void *p) {
  switch (dtype) {
  case TG_F32:
    return *(const float *)p;
  case TG_F64:
    return *(const double *)p;
  default:
    TG_INTERNAL_ASSERT(dtype == TG_I64); /* every entry point validated the dtype */
    return (double)*(const int64_t *)p;
  }
}

static void store(tg_dtype dtype, void *p, double v) {
  switch (dtype) {
  case TG_F32:
    *(float *)p = (float)v;
    break;
  case TG_F64:
    *(double *)p = v;
    break;
  default:
    TG_INTERNAL_ASSERT(dtype == TG_I64); /* every entry point validated the dtype */
    *(int64_t *)p = tg__f64_to_i64(v);
    break; /* a plain cast of NaN is undefined */
  }
}

tg_status tg_get(const tg_tensor *t, const int64_t *index, double *out) {
  if (!tg__check_arg("tg_get", "t", t)) return tg_last_error();
  if (!out) return tg_set_error(TG_ERR_ARGUMENT, "tg_get: out is NULL");
  int64_t flat;
  if (!check_index("tg_get", t, index, &flat)) return tg_last_error();
  size_t es = tg_dtype_size(t->dtype);
  char *p = (char *)t->storage->data + flat * (int64_t)es;
  if (t->storage->device.type == TG_CPU) {
    *out = load(t->dtype, p);
    return TG_OK;
  }
  char buf[8];
  tg_status st = move_bytes("tg_get", buf, TG_DEVICE_CPU, p, t->storage->device, es);
  if (st == TG_OK) *out = load(t->dtype, buf);
  return st;
}

tg_status tg_set(tg_tensor *t, const int64_t *index, double value) {
  if (!tg__check_arg("tg_set", "t", t)) return tg_last_error();
  if (tg_is_grad_enabled() && t->requires_grad)
    return tg_set_error(TG_ERR_UNSUPPORTED,
                        "tg_set: t requires grad; set elements inside tg_no_grad_begin/end");
  int64_t flat;
  if (!check_index("tg_set", t, index, &flat)) return tg_last_error();
  if (!tg__check_value_fits("tg_set", "value", t->dtype, value)) return tg_last_error();
  size_t es = tg_dtype_size(t->dtype);
  char *p = (char *)t->storage->data + flat * (int64_t)es;
  tg_status st = TG_OK;
  if (t->storage->device.type == TG_CPU) {
    store(t->dtype, p, value);
  } else {
    char buf[8];
    store(t->dtype, buf, value);
    st = move_bytes("tg_set", p, t->storage->device, buf, TG_DEVICE_CPU, es);
  }
  if (st == TG_OK) tg__bump_version(t);
  return st;
}

tg_status tg_item(const tg_tensor *t, double *out) {
  if (!tg__check_arg("tg_item", "t", t)) return tg_last_error();
  if (tg__numel(t->ndim, t->sizes) != 1) {
    return tg_set_error(TG_ERR_SHAPE, "tg_item: t is %s; only a one-element tensor has an item",
                        tg__sizes_str(t));
  }
  int64_t zeros[TG_MAX_DIMS] = {0};
  return tg_get(t, zeros, out);
}

tg_status tg_to_host_array(const tg_tensor *t, void *out, size_t out_bytes) {
  if (!tg__check_arg("tg_to_host_array", "t", t)) return tg_last_error();
  size_t need = (size_t)tg__numel(t->ndim, t->sizes) * tg_dtype_size(t->dtype);
  if (!out || out_bytes < need)
    return tg_set_error(TG_ERR_ARGUMENT, "tg_to_host_array: out holds %zu bytes, need %zu",
                        out ? out_bytes : 0, need);
  tg_tensor *h = tg__host_contiguous("tg_to_host_array", t);
  if (!h) return tg_last_error();
  if (need) memcpy(out, h->storage->data, need);
  tg_release(h);
  return TG_OK;
}
