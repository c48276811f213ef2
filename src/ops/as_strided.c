/* as_strided: a view of explicit geometry over t's storage, and its gradient (PyTorch's
 * as_strided_backward). The offset counts from the start of the storage, as PyTorch's
 * storage_offset does, not from t's first element.
 *
 * Backward: the gradient of each output element is added into the storage element it read
 * (output elements that read the same one, overlapping windows, add up), over a zero buffer
 * spanning what the input and the output reach; the input's gradient is that buffer read
 * through the input's own geometry. The adds are embedding_backward on storage indices
 * (rows of width 1), so the backward is made of differentiable ops: double backward works. */
#include <stdint.h>
#include <string.h>

#include "ops/registry.h"
#include "tensor/checked.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

/* The recorded op keeps its geometry in its integer parameters: 2 + 2 * ndim of them. */
enum { MAX_RECORDED_DIMS = (TG_CTX_MAX_INTS - 2) / 2 };

typedef struct geometry {
  int ndim;
  int64_t sizes[TG_MAX_DIMS], strides[TG_MAX_DIMS];
  int64_t offset; /* in elements, from the storage's start */
} geometry;

static geometry geometry_of(const tg_tensor *t) {
  geometry g = {.ndim = t->ndim, .offset = t->offset};
  memcpy(g.sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
  memcpy(g.strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
  return g;
}

/* g fits t's storage: sizes not negative, element count within int64, every element read
 * inside the storage. An error naming fn otherwise. */
static bool check_geometry(const char *fn, const tg_tensor *t, const geometry *g) {
  for (int d = 0; d < g->ndim; d++)
    if (g->sizes[d] < 0)
      return tg_set_error(TG_ERR_SHAPE, "%s: sizes %s: size of dim %d is negative", fn,
                          tg__dims_str(g->ndim, g->sizes), d),
             false;
  int64_t extent, lo, hi;
  if (tg__extent_ovf(g->ndim, g->sizes, &extent))
    return tg_set_error(TG_ERR_SHAPE, "%s: sizes %s: the number of elements overflows int64", fn,
                        tg__dims_str(g->ndim, g->sizes)),
           false;
  int64_t capacity = (int64_t)(t->storage->nbytes / tg_dtype_size(t->dtype));
  int where = tg__span_check(g->ndim, g->sizes, g->strides, g->offset, capacity, &lo, &hi);
  if (where == TG__SPAN_OVERFLOW)
    return tg_set_error(TG_ERR_INDEX,
                        "%s: sizes %s, strides %s, offset %lld: the elements reached overflow "
                        "int64 (storage of %lld elements)",
                        fn, tg__dims_str(g->ndim, g->sizes), tg__dims_str(g->ndim, g->strides),
                        (long long)g->offset, (long long)capacity),
           false;
  if (where == TG__SPAN_OUTSIDE)
    return tg_set_error(TG_ERR_INDEX,
                        "%s: sizes %s, strides %s, offset %lld reach elements %lld..%lld outside "
                        "the storage of %lld elements (the offset counts from the storage's "
                        "start; t's own offset is %lld)",
                        fn, tg__dims_str(g->ndim, g->sizes), tg__dims_str(g->ndim, g->strides),
                        (long long)g->offset, (long long)lo, (long long)hi, (long long)capacity,
                        (long long)t->offset),
           false;
  return true;
}

static tg_tensor *make_view(const tg_tensor *t, const geometry *g) {
  return tg__scoped(tg__tensor_new(t->storage, g->offset, g->ndim, g->sizes, g->strides, t->dtype));
}

/* ints: ndim, sizes[ndim], strides[ndim], offset. */
static bool params_geometry(const tg_ctx *ctx, geometry *g) {
  static const char *op = "tg_as_strided";
  int n = tg_ctx_num_ints(ctx);
  int64_t ndim = n > 0 ? tg_ctx_int(ctx, 0) : -1;
  if (ndim < 0 || ndim > MAX_RECORDED_DIMS || n != 2 + 2 * ndim)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: takes ndim (0..%d), ndim sizes, ndim strides and an offset as "
                        "integer parameters; %d given (ndim %lld)",
                        op, MAX_RECORDED_DIMS, n, (long long)ndim),
           false;
  g->ndim = (int)ndim;
  for (int d = 0; d < g->ndim; d++) {
    g->sizes[d] = tg_ctx_int(ctx, 1 + d);
    g->strides[d] = tg_ctx_int(ctx, 1 + g->ndim + d);
  }
  g->offset = tg_ctx_int(ctx, 1 + 2 * g->ndim);
  return true;
}

tg_status tg__fwd_as_strided(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  geometry g;
  if (!params_geometry(ctx, &g) || !check_geometry("tg_as_strided", in[0], &g))
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 0)) { /* backward reads the base through its geometry */
    geometry *base = tg__host_malloc(sizeof *base);
    if (!base) return tg_set_error(TG_ERR_MEMORY, "tg_as_strided: out of memory");
    *base = geometry_of(in[0]);
    tg_ctx_set_data(ctx, base, tg__host_free);
  }
  out[0] = make_view(in[0], &g);
  return out[0] ? TG_OK : tg_last_error();
}

/* The lowest and highest storage element a non-empty g reaches. */
static void span(const geometry *g, int64_t *lo, int64_t *hi) {
  *lo = *hi = g->offset;
  for (int d = 0; d < g->ndim; d++) {
    int64_t reach = (g->sizes[d] - 1) * g->strides[d];
    *(reach < 0 ? lo : hi) += reach;
  }
}

/* The storage element (minus lo) of each of g's elements, row-major, as an I64 tensor of g's
 * sizes on device (scope-owned; NULL with the error pending). */
static tg_tensor *storage_indices(const geometry *g, int64_t lo, tg_device device) {
  int64_t numel = tg__numel(g->ndim, g->sizes), index[TG_MAX_DIMS] = {0};
  int64_t *host = (uint64_t)numel <= SIZE_MAX / sizeof *host
                      ? tg__host_malloc(sizeof *host * (size_t)(numel > 0 ? numel : 1))
                      : NULL;
  if (!host) {
    tg_set_error(TG_ERR_MEMORY, "tg_as_strided: backward: out of memory for %lld indices",
                 (long long)numel);
    return NULL;
  }
  for (int64_t k = 0; k < numel; k++) {
    int64_t at = g->offset - lo;
    for (int d = 0; d < g->ndim; d++) at += index[d] * g->strides[d];
    host[k] = at;
    for (int d = g->ndim - 1; d >= 0 && ++index[d] == g->sizes[d]; d--) index[d] = 0;
  }
  tg_tensor *t = tg_from_data(g->ndim, g->sizes, host, (tg_options){TG_I64, device, false});
  tg__host_free(host);
  return t;
}

/* 1 over how many of base's elements sit on each of the n storage elements from lo (1 where
 * none does), as an [n, 1] tensor like g: an input that overlaps itself (an expanded view)
 * shares each storage element's gradient among the elements that read it. */
static tg_tensor *shares(const geometry *base, int64_t lo, int64_t n, const tg_tensor *g) {
  tg_tensor *idx = storage_indices(base, lo, TG_DEVICE_CPU);
  double *count = idx ? tg__host_calloc((size_t)n, sizeof *count) : NULL;
  if (!count) {
    if (idx) tg_set_error(TG_ERR_MEMORY, "tg_as_strided: backward: out of memory");
    return NULL;
  }
  const int64_t *at = tg_data_ptr(idx);
  for (int64_t k = 0; k < tg_numel(idx); k++) count[at[k]] += 1;
  for (int64_t k = 0; k < n; k++) count[k] = count[k] > 0 ? 1 / count[k] : 1;
  tg_tensor *t =
      tg_from_data(2, (const int64_t[]){n, 1}, count, (tg_options){TG_F64, TG_DEVICE_CPU, false});
  tg__host_free(count);
  return t ? tg_to_device(tg_to_dtype(t, g->dtype), g->storage->device) : NULL;
}

/* Whether two of g's elements sit on one storage element (conservative, as tensor.c's). */
static bool overlaps(const geometry *g) {
  tg_tensor probe = {.ndim = g->ndim};
  memcpy(probe.sizes, g->sizes, sizeof(int64_t) * (size_t)g->ndim);
  memcpy(probe.strides, g->strides, sizeof(int64_t) * (size_t)g->ndim);
  return tg__has_internal_overlap(&probe);
}

static tg_tensor *as_strided_backward(const tg_tensor *g, const geometry *out,
                                      const geometry *base) {
  int64_t out_numel = tg__numel(out->ndim, out->sizes);
  if (out_numel == 0 || tg__numel(base->ndim, base->sizes) == 0)
    return tg_zeros(base->ndim, base->sizes, (tg_options){g->dtype, g->storage->device, false});
  int64_t lo, hi, base_lo, base_hi;
  span(out, &lo, &hi);
  span(base, &base_lo, &base_hi);
  lo = base_lo < lo ? base_lo : lo;
  hi = base_hi > hi ? base_hi : hi;
  int64_t n = hi - lo + 1; /* both lie in one storage: no overflow */
  tg_tensor *idx = storage_indices(out, lo, g->storage->device);
  tg_tensor *rows = idx ? tg_reshape(g, 2, (const int64_t[]){out_numel, 1}) : NULL;
  tg_tensor *flat = rows ? tg_reshape(idx, 1, &out_numel) : NULL;
  tg_tensor *sums =
      flat ? tg_apply1_ex(TG__OP(embedding_backward), TG__IN(rows, flat), TG__NO_SC, TG__INTS(n))
           : NULL;
  if (sums && overlaps(base)) sums = tg_mul(sums, shares(base, lo, n, g));
  geometry local = *base;
  local.offset -= lo;
  return sums ? tg_as_strided(tg_view(sums, 1, &n), local.ndim, local.sizes, local.strides,
                              local.offset)
              : NULL;
}

tg_status tg__bwd_as_strided(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  geometry out;
  const geometry *base = tg_ctx_data(ctx);
  if (!params_geometry(ctx, &out) || !base) return tg_last_error();
  gi[0] = as_strided_backward(g[0], &out, base);
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_as_strided(const tg_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                         int64_t offset) {
  static const char *fn = "tg_as_strided";
  if (!tg__check_arg(fn, "t", t)) return NULL;
  if (ndim < 0 || ndim > TG_MAX_DIMS || (ndim > 0 && (!sizes || !strides))) {
    tg_set_error(TG_ERR_SHAPE, "%s: ndim %d is outside 0..%d (or sizes or strides is NULL)", fn,
                 ndim, TG_MAX_DIMS);
    return NULL;
  }
  geometry g = {.ndim = ndim, .offset = offset};
  if (ndim > 0) {
    memcpy(g.sizes, sizes, sizeof(int64_t) * (size_t)ndim);
    memcpy(g.strides, strides, sizeof(int64_t) * (size_t)ndim);
  }
  if (ndim > MAX_RECORDED_DIMS) { /* more than the op's parameters hold: unrecorded only */
    if (t->requires_grad && tg_is_grad_enabled()) {
      tg_set_error(TG_ERR_UNSUPPORTED,
                   "%s: differentiable for at most %d dims (%d asked) and t requires grad (use "
                   "tg_detach or a no-grad region)",
                   fn, MAX_RECORDED_DIMS, ndim);
      return NULL;
    }
    return check_geometry(fn, t, &g) ? make_view(t, &g) : NULL;
  }
  int64_t ints[2 + 2 * MAX_RECORDED_DIMS];
  ints[0] = ndim;
  for (int d = 0; d < ndim; d++) {
    ints[1 + d] = sizes[d];
    ints[1 + ndim + d] = strides[d];
  }
  ints[1 + 2 * ndim] = offset;
  return tg_apply1_ex(TG__OP(as_strided), 1, (const tg_tensor *const[]){t}, TG__NO_SC, 2 + 2 * ndim,
                      ints);
}
