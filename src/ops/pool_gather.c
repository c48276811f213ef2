/* pool_gather and pool_scatter: the linear map every average pooling and padding runs (the
 * format of a window map: src/ops/def/pool.def) and its adjoint. Each is the other's gradient,
 * so the pooling ops built on them are differentiable to any order (max pooling's backward is
 * pool_scatter over its indices).
 *
 * As embedding's pair (src/ops/embedding.c): the registered forwards check what tg_apply may
 * pass (the map's entries read on the host); the pooling ops and the backwards apply unchecked
 * copies of the descriptors, since the maps they pass were built by tg. */
#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/pool_internal.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/device_names.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

/* x's leading dims with last as the last: the sizes of a [*, L] <-> [*, M] result. */
static void sizes_with_last(const tg_tensor *x, int64_t last, int64_t *sizes) {
  for (int d = 0; d < x->ndim - 1; d++) sizes[d] = x->sizes[d];
  sizes[x->ndim - 1] = last;
}

static int64_t planes_of(const tg_tensor *x) { return tg__numel(x->ndim - 1, x->sizes); }

/* Runs kernel over out [P, a] and in [P, b] (2-D contiguous views of the ones given), the map
 * and the divisor made contiguous. */
static tg_status run_kernel(const char *fn, const char *name, tg_tensor *out, const tg_tensor *in,
                            const tg_tensor *map, const tg_tensor *divisor) {
  tg_kernel_fn kernel = tg__kernel(fn, name, out->storage->device);
  const int64_t p = planes_of(out);
  tg_tensor *in2 =
      kernel ? tg_reshape(tg_contiguous(in), 2, (const int64_t[]){p, in->sizes[in->ndim - 1]})
             : NULL;
  tg_tensor *out2 = in2 ? tg_view(out, 2, (const int64_t[]){p, out->sizes[out->ndim - 1]}) : NULL;
  tg_tensor *m = out2 ? tg_contiguous(map) : NULL;
  tg_tensor *d = m && divisor ? tg_contiguous(divisor) : NULL;
  if (!m || (divisor && !d)) return tg_last_error();
  return kernel(4, (tg_tensor *const[]){out2, in2, m, d});
}

tg_status tg__pool_gather_into(const char *fn, const char *kernel, tg_tensor *out,
                               const tg_tensor *x, const tg_tensor *map, const tg_tensor *divisor) {
  return run_kernel(fn, kernel, out, x, map, divisor);
}

/* The optional divisor: input 2 when given. */
static const tg_tensor *divisor_of(const tg_ctx *ctx, const tg_tensor *const *in) {
  return tg_ctx_num_inputs(ctx) > 2 ? in[2] : NULL;
}

static tg_status gather_unchecked(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *x = in[0], *map = in[1];
  int64_t sizes[TG_MAX_DIMS];
  sizes_with_last(x, map->sizes[1], sizes);
  tg_tensor *o = tg_empty(x->ndim, sizes, (tg_options){x->dtype, x->storage->device, false});
  if (!o ||
      tg__pool_gather_into("tg_pool_gather", "pool_gather.window_sum", o, x, map,
                           divisor_of(ctx, in)) != TG_OK ||
      tg_ctx_save_for_backward(ctx, tg_ctx_num_inputs(ctx) - 1, in + 1) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

static tg_status scatter_unchecked(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *grad = in[0];
  int64_t sizes[TG_MAX_DIMS];
  sizes_with_last(grad, tg_ctx_int(ctx, 0), sizes);
  tg_tensor *o =
      tg_zeros(grad->ndim, sizes, (tg_options){grad->dtype, grad->storage->device, false});
  if (!o ||
      run_kernel("tg_pool_scatter", "pool_scatter.window_scatter", o, grad, in[1],
                 divisor_of(ctx, in)) != TG_OK ||
      tg_ctx_save_for_backward(ctx, tg_ctx_num_inputs(ctx) - 1, in + 1) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

static const tg_op_desc unchecked_gather = {
    .name = "pool_gather",
    .n_inputs = -1,
    .n_outputs = 1,
    .forward = TG__ON_EVERY_DEVICE(gather_unchecked),
    .backward = tg__bwd_pool_gather,
    .flags = TG__OP_BUILTIN,
};
static const tg_op_desc unchecked_scatter = {
    .name = "pool_scatter",
    .n_inputs = -1,
    .n_outputs = 1,
    .forward = TG__ON_EVERY_DEVICE(scatter_unchecked),
    .backward = tg__bwd_pool_scatter,
    .flags = TG__OP_BUILTIN,
};

tg_tensor *tg__pool_gather(const tg_tensor *x, const tg_tensor *map, const tg_tensor *divisor) {
  return tg_apply1(&unchecked_gather, divisor ? 3 : 2, (const tg_tensor *const[]){x, map, divisor},
                   TG__NO_SC);
}

tg_tensor *tg__pool_scatter(const tg_tensor *grad, const tg_tensor *map, const tg_tensor *divisor,
                            int64_t L) {
  return tg_apply1_ex(&unchecked_scatter, divisor ? 3 : 2,
                      (const tg_tensor *const[]){grad, map, divisor}, TG__NO_SC, TG__INTS(L));
}

/* The saved map and divisor (NULL when the call had none); false with the error pending. */
static bool saved_map(tg_ctx *ctx, tg_tensor **map, tg_tensor **divisor) {
  *map = tg_ctx_saved(ctx, 0);
  *divisor = *map && tg_ctx_num_saved(ctx) > 1 ? tg_ctx_saved(ctx, 1) : NULL;
  return *map && (tg_ctx_num_saved(ctx) < 2 || *divisor);
}

/* d x = the gradient scattered back through the map. */
tg_status tg__bwd_pool_gather(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_tensor *map, *divisor;
  const int64_t L = tg_ctx_input_sizes(ctx, 0)[tg_ctx_input_ndim(ctx, 0) - 1];
  gi[0] = saved_map(ctx, &map, &divisor) ? tg__pool_scatter(g[0], map, divisor, L) : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}

/* d grad = the upstream gradient gathered through the map again. */
tg_status tg__bwd_pool_scatter(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_tensor *map, *divisor;
  gi[0] = saved_map(ctx, &map, &divisor) ? tg__pool_gather(g[0], map, divisor) : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}

/* ---- the registered forwards: what tg_apply may pass, checked ---- */

/* Every entry of map in [-1, L), read on the host (a device without data has none to read). */
static bool check_entries(const char *fn, const tg_tensor *map, int64_t L) {
  if (!tg__device_type_has_data(map->storage->device.type)) return true;
  const int64_t n = tg__numel(map->ndim, map->sizes);
  int64_t *host = tg__host_malloc(sizeof *host * (size_t)(n > 0 ? n : 1));
  if (!host)
    return tg__fail(TG_ERR_MEMORY, fn, "out of memory reading the map's %lld entries",
                    (long long)n);
  bool ok = tg_to_host_array(map, host, sizeof *host * (size_t)n) == TG_OK;
  for (int64_t k = 0; ok && k < n; k++)
    ok = tg__check(host[k] >= -1 && host[k] < L, TG_ERR_INDEX, fn,
                   "map entry %lld is %lld, outside [-1, %lld) (-1: no element)", (long long)k,
                   (long long)host[k], (long long)L);
  tg__host_free(host);
  return ok;
}

/* x [*, L] (or grad [*, M]) against map [1 or P, M, K] and divisor [M] (NULL: none); 2 or 3
 * inputs, counted before in[1] and in[2] are read (a call with one input passes an array of
 * one: ASan caught the read past it). */
static bool check_operands(const char *fn, const char *arg, const tg_ctx *ctx,
                           const tg_tensor *const *in, int64_t M_from_t) {
  if (!tg__check(tg_ctx_num_inputs(ctx) == 2 || tg_ctx_num_inputs(ctx) == 3, TG_ERR_ARGUMENT, fn,
                 "takes 2 or 3 inputs (%s, map, divisor), %d given", arg, tg_ctx_num_inputs(ctx)))
    return false;
  const tg_tensor *t = in[0], *map = in[1], *divisor = divisor_of(ctx, in);
  if (!tg__check_floating(fn, arg, t) ||
      !tg__check(t->ndim >= 1, TG_ERR_SHAPE, fn, "%s must have at least 1 dim", arg) ||
      !tg__check_same_device(fn, "map", map, arg, t) ||
      !tg__check(map->dtype == TG_I64, TG_ERR_DTYPE, fn, "map is %s; it must be int64",
                 tg_dtype_name(map->dtype)) ||
      (divisor && !tg__check_alike(fn, "divisor", divisor, arg, t)))
    return false;
  const int64_t p = planes_of(t);
  return tg__check(map->ndim == 3 && (map->sizes[0] == 1 || map->sizes[0] == p) &&
                       (M_from_t < 0 || map->sizes[1] == M_from_t),
                   TG_ERR_SHAPE, fn, "map is %s; %s is %s, so map must be [1 or %lld, %s, K]",
                   tg__sizes_str(map), arg, tg__sizes_str(t), (long long)p,
                   M_from_t < 0 ? "M" : tg__dims_str(1, &M_from_t)) &&
         tg__check(!divisor || (divisor->ndim == 1 && divisor->sizes[0] == map->sizes[1]),
                   TG_ERR_SHAPE, fn, "divisor is %s; the map is %s, so divisor must be [%lld]",
                   tg__sizes_str(divisor), tg__sizes_str(map), (long long)map->sizes[1]);
}

tg_status tg__fwd_pool_gather(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *fn = "tg_pool_gather";
  if (!check_operands(fn, "x", ctx, in, -1) ||
      !check_entries(fn, in[1], in[0]->sizes[in[0]->ndim - 1]))
    return tg_last_error();
  return gather_unchecked(ctx, in, out);
}

tg_status tg__fwd_pool_scatter(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *fn = "tg_pool_scatter";
  const int64_t L = tg_ctx_int(ctx, 0);
  if (!tg__check(tg_ctx_num_ints(ctx) == 1, TG_ERR_ARGUMENT, fn,
                 "takes 1 integer parameter (L, the input planes' size), %d given",
                 tg_ctx_num_ints(ctx)) ||
      !tg__check(L >= 0, TG_ERR_ARGUMENT, fn, "L = %lld is negative", (long long)L) ||
      !tg__check(in[0]->ndim >= 1, TG_ERR_SHAPE, fn, "grad must have at least 1 dim") ||
      !check_operands(fn, "grad", ctx, in, in[0]->sizes[in[0]->ndim - 1]) ||
      !check_entries(fn, in[1], L))
    return tg_last_error();
  return scatter_unchecked(ctx, in, out);
}
