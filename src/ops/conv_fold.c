/* unfold and fold (torch.nn.functional's): im2col and col2im as ops, each the other's
 * adjoint, so each backward is one call of the other and every order of derivative works.
 * The movements are ops/conv_columns.c's; the public front ends are in conv_api.c. */
#include "ops/conv_internal.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"

static bool check_ungrouped(const char *op, const tg__conv_geometry *g) {
  return tg__check(g->groups == 1, TG_ERR_ARGUMENT, op, "groups = %lld; only 1 applies here",
                   (long long)g->groups);
}

/* input x [n, c, h, w]; ints: the geometry; output [n, c * kh * kw, out_h * out_w]. */
tg_status tg__fwd_unfold(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *const op = "unfold";
  tg__conv_geometry g;
  const tg_tensor *x = in[0];
  if (!tg__conv_geometry_of(op, ctx, &g) || !check_ungrouped(op, &g) ||
      !tg__check_floating(op, "x", x) ||
      !tg__check(x->ndim == 4 && x->sizes[2] == g.h && x->sizes[3] == g.w, TG_ERR_SHAPE, op,
                 "x is %s; the geometry's image is [n, c, %lld, %lld]", tg__sizes_str(x),
                 (long long)g.h, (long long)g.w) ||
      !(out[0] = tg__conv_im2col(op, x, &g)))
    return tg_last_error();
  return TG_OK;
}

tg_status tg__bwd_unfold(tg_ctx *ctx, const tg_tensor *const *grad, tg_tensor **gi) {
  const tg__conv_geometry g = tg__conv_geometry_saved(ctx);
  return (gi[0] = tg__fold_apply(grad[0], &g)) ? TG_OK : tg_last_error();
}

/* input cols [n, c * kh * kw, out_h * out_w]; ints: the geometry; output [n, c, h, w]. */
tg_status tg__fwd_fold(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *const op = "fold";
  tg__conv_geometry g;
  const tg_tensor *cols = in[0];
  if (!tg__conv_geometry_of(op, ctx, &g) || !check_ungrouped(op, &g) ||
      !tg__check_floating(op, "cols", cols))
    return tg_last_error();
  const int64_t taps = g.kernel_h * g.kernel_w, grid = g.out_h * g.out_w;
  if (!tg__check(cols->ndim == 3 && cols->sizes[1] % taps == 0 && cols->sizes[2] == grid,
                 TG_ERR_SHAPE, op,
                 "cols is %s; the geometry needs [n, c * %lld, %lld] (%lld kernel taps, %lld x "
                 "%lld windows)",
                 tg__sizes_str(cols), (long long)taps, (long long)grid, (long long)taps,
                 (long long)g.out_h, (long long)g.out_w))
    return tg_last_error();
  tg_tensor *packed = tg_contiguous(cols);
  if (!packed || !(out[0] = tg__conv_col2im(op, packed, cols->sizes[1] / taps, &g)))
    return tg_last_error();
  return TG_OK;
}

tg_status tg__bwd_fold(tg_ctx *ctx, const tg_tensor *const *grad, tg_tensor **gi) {
  const tg__conv_geometry g = tg__conv_geometry_saved(ctx);
  return (gi[0] = tg__unfold_apply(grad[0], &g)) ? TG_OK : tg_last_error();
}

tg_tensor *tg__unfold_apply(const tg_tensor *x, const tg__conv_geometry *g) {
  return x ? tg_apply1_ex(TG__OP(unfold), TG__IN(x), TG__NO_SC, TG__CONV_INTS(*g)) : NULL;
}

tg_tensor *tg__fold_apply(const tg_tensor *cols, const tg__conv_geometry *g) {
  return cols ? tg_apply1_ex(TG__OP(fold), TG__IN(cols), TG__NO_SC, TG__CONV_INTS(*g)) : NULL;
}
