/* conv2d, conv_transpose2d and conv2d_weight: three bilinear ops over one geometry
 * (ops/conv_internal.h), each the others' derivative:
 *
 *   conv2d(x, w)           = w  @ im2col(x)            (per group, per batch element)
 *   conv_transpose2d(y, w) = col2im(w^T @ y)           (conv2d's adjoint in x)
 *   conv2d_weight(x, y)    = sum_n y @ im2col(x)^T     (conv2d's adjoint in w)
 *
 * so each backward is two calls of the others, recorded on the tape like any op: double
 * backward (and any order) works, and the forward keeps only its two inputs for backward,
 * never the columns. The products run on the device's GEMM (the drivers' gemm: tg's CPU
 * engines, cuBLAS on CUDA), the columns are ops/conv_columns.c's. Bias, "same" padding and
 * the public options are the front ends' (src/ops/conv_api.c). */
#include "ops/backend.h"
#include "ops/conv_internal.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/tensor_ops.h"

/* A 2-D view [rows, cols] of contiguous t with the given strides, offset elements into it. */
static tg_tensor *matrix(const tg_tensor *t, int64_t rows, int64_t cols, int64_t row_stride,
                         int64_t col_stride, int64_t offset) {
  return tg_as_strided(t, 2, (const int64_t[]){rows, cols},
                       (const int64_t[]){row_stride, col_stride}, tg_offset(t) + offset);
}

static tg_options options_of(const tg_tensor *t) {
  return (tg_options){t->dtype, t->storage->device, false};
}

/* ---- checks (the ops are reachable through tg_apply with anything) ---- */

static bool check_4d(const char *op, const char *arg, const tg_tensor *t, const char *layout) {
  return tg__check_floating(op, arg, t) &&
         tg__check(t->ndim == 4, TG_ERR_SHAPE, op, "%s must be 4-D %s, got %s", arg, layout,
                   tg__sizes_str(t));
}

/* t's dims [2, 4) hold rows x cols. */
static bool check_spatial(const char *op, const char *arg, const tg_tensor *t, int64_t rows,
                          int64_t cols, const char *what) {
  return tg__check(t->sizes[2] == rows && t->sizes[3] == cols, TG_ERR_SHAPE, op,
                   "%s is %s but the geometry's %s is %lld x %lld", arg, tg__sizes_str(t), what,
                   (long long)rows, (long long)cols);
}

static bool check_divisible(const char *op, const char *arg, const tg_tensor *t, int dim,
                            int64_t groups) {
  return tg__check(t->sizes[dim] % groups == 0, TG_ERR_SHAPE, op,
                   "%s is %s: its dim %d is not divisible by groups = %lld", arg, tg__sizes_str(t),
                   dim, (long long)groups);
}

/* The weight [c_out, c_in / groups, kh, kw] against the geometry; c_in as the image has it. */
static bool check_weight(const char *op, const char *arg, const tg_tensor *w, const tg_tensor *ref,
                         const char *ref_arg, const tg__conv_geometry *g) {
  return check_4d(op, arg, w, "[c_out, c_in / groups, kh, kw]") &&
         tg__check_alike(op, arg, w, ref_arg, ref) &&
         check_spatial(op, arg, w, g->kernel_h, g->kernel_w, "kernel") &&
         check_divisible(op, arg, w, 0, g->groups);
}

static bool check_image(const char *op, const char *arg, const tg_tensor *x,
                        const tg__conv_geometry *g) {
  return check_4d(op, arg, x, "[n, c, h, w]") && check_spatial(op, arg, x, g->h, g->w, "image");
}

static bool check_grid(const char *op, const char *arg, const tg_tensor *y,
                       const tg__conv_geometry *g) {
  return check_4d(op, arg, y, "[n, c, out_h, out_w]") &&
         check_spatial(op, arg, y, g->out_h, g->out_w, "output grid");
}

static bool check_channels(const char *op, const char *arg, const tg_tensor *t, int64_t want,
                           const char *why) {
  return tg__check(t->sizes[1] == want, TG_ERR_SHAPE, op, "%s is %s: expected %lld channels (%s)",
                   arg, tg__sizes_str(t), (long long)want, why);
}

static bool check_batch(const char *op, const tg_tensor *x, const tg_tensor *y) {
  return tg__check(x->sizes[0] == y->sizes[0], TG_ERR_SHAPE, op,
                   "x is %s but y is %s: batch sizes differ", tg__sizes_str(x), tg__sizes_str(y));
}

/* ---- the forwards ---- */

/* y [n, c_out, out_h, out_w] = w @ im2col(x), one GEMM per batch element and group. */
static tg_tensor *conv2d_forward(const char *op, const tg_tensor *x, const tg_tensor *w,
                                 const tg__conv_geometry *g) {
  const tg_backend *be = tg__backend(op, x->storage->device);
  const int64_t n = x->sizes[0], c_out = w->sizes[0], groups = g->groups,
                per_group = c_out / groups, depth = w->sizes[1] * g->kernel_h * g->kernel_w,
                grid = g->out_h * g->out_w;
  tg_tensor *y =
      be ? tg_empty(4, (const int64_t[]){n, c_out, g->out_h, g->out_w}, options_of(x)) : NULL;
  if (!y || tg_numel(y) == 0) return y;
  if (depth == 0) return be->fill(y, 0.0) == TG_OK ? y : NULL;
  tg_tensor *cols = tg__conv_im2col(op, x, g), *wc = cols ? tg_contiguous(w) : NULL;
  if (!wc) return NULL;
  for (int64_t b = 0; b < n; b++) {
    tg_scope views = tg_scope_begin();
    for (int64_t k = 0; k < groups; k++) {
      tg_tensor *out = matrix(y, per_group, grid, grid, 1, (b * c_out + k * per_group) * grid);
      tg_tensor *wk = matrix(wc, per_group, depth, depth, 1, k * per_group * depth);
      tg_tensor *ck = matrix(cols, depth, grid, grid, 1, (b * groups + k) * depth * grid);
      if (!out || !wk || !ck || be->gemm(out, wk, ck, 1.0, 0.0) != TG_OK) {
        tg_scope_end(views);
        return NULL;
      }
    }
    tg_scope_end(views);
  }
  return y;
}

/* x [n, groups * w.sizes[1], h, w] = col2im(w^T @ y). */
static tg_tensor *conv_transpose2d_forward(const char *op, const tg_tensor *y, const tg_tensor *w,
                                           const tg__conv_geometry *g) {
  const tg_backend *be = tg__backend(op, y->storage->device);
  const int64_t n = y->sizes[0], c_out = w->sizes[0], groups = g->groups,
                per_group = c_out / groups, depth = w->sizes[1] * g->kernel_h * g->kernel_w,
                grid = g->out_h * g->out_w;
  tg_tensor *cols =
      be ? tg_empty(3, (const int64_t[]){n, groups * depth, grid}, options_of(y)) : NULL;
  if (!cols) return NULL;
  if (tg_numel(cols) > 0 && per_group == 0 && be->fill(cols, 0.0) != TG_OK) return NULL;
  if (tg_numel(cols) > 0 && per_group > 0) {
    tg_tensor *yc = tg_contiguous(y), *wc = yc ? tg_contiguous(w) : NULL;
    if (!wc) return NULL;
    for (int64_t b = 0; b < n; b++) {
      tg_scope views = tg_scope_begin();
      for (int64_t k = 0; k < groups; k++) {
        tg_tensor *out = matrix(cols, depth, grid, grid, 1, (b * groups + k) * depth * grid);
        tg_tensor *wk_t = matrix(wc, depth, per_group, 1, depth, k * per_group * depth);
        tg_tensor *yk = matrix(yc, per_group, grid, grid, 1, (b * c_out + k * per_group) * grid);
        if (!out || !wk_t || !yk || be->gemm(out, wk_t, yk, 1.0, 0.0) != TG_OK) {
          tg_scope_end(views);
          return NULL;
        }
      }
      tg_scope_end(views);
    }
  }
  return tg__conv_col2im(op, cols, groups * w->sizes[1], g);
}

/* w [c_out, c_in / groups, kh, kw] = sum over the batch of y @ im2col(x)^T, per group. */
static tg_tensor *conv2d_weight_forward(const char *op, const tg_tensor *x, const tg_tensor *y,
                                        const tg__conv_geometry *g) {
  const tg_backend *be = tg__backend(op, x->storage->device);
  const int64_t n = x->sizes[0], c_out = y->sizes[1], groups = g->groups,
                per_group = c_out / groups, c_in = x->sizes[1] / groups,
                depth = c_in * g->kernel_h * g->kernel_w, grid = g->out_h * g->out_w;
  tg_tensor *dw =
      be ? tg_empty(4, (const int64_t[]){c_out, c_in, g->kernel_h, g->kernel_w}, options_of(x))
         : NULL;
  if (!dw || tg_numel(dw) == 0) return dw;
  if (n * grid == 0) return be->fill(dw, 0.0) == TG_OK ? dw : NULL;
  tg_tensor *cols = tg__conv_im2col(op, x, g), *yc = cols ? tg_contiguous(y) : NULL;
  if (!yc) return NULL;
  for (int64_t k = 0; k < groups; k++) {
    tg_scope views = tg_scope_begin();
    tg_tensor *out = matrix(dw, per_group, depth, depth, 1, k * per_group * depth);
    for (int64_t b = 0; b < n; b++) {
      tg_tensor *yk = matrix(yc, per_group, grid, grid, 1, (b * c_out + k * per_group) * grid);
      tg_tensor *ck_t = matrix(cols, grid, depth, 1, grid, (b * groups + k) * depth * grid);
      if (!out || !yk || !ck_t || be->gemm(out, yk, ck_t, 1.0, b > 0 ? 1.0 : 0.0) != TG_OK) {
        tg_scope_end(views);
        return NULL;
      }
    }
    tg_scope_end(views);
  }
  return dw;
}

/* ---- the ops: checks, forward, what backward keeps ---- */

/* ctx int slots after the geometry: where each input was saved (-1: not saved). */
enum { SAVED_SLOT_OF_INPUT0 = TG__CONV_NUM_INTS, SAVED_SLOT_OF_INPUT1 };

/* Saves input i only when the other input's gradient needs it (bilinear ops). */
static tg_status save_inputs(tg_ctx *ctx, const tg_tensor *a, const tg_tensor *b) {
  int slot = 0;
  const tg_tensor *inputs[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    const bool needed = tg_ctx_needs_input_grad(ctx, 1 - i);
    if (tg_ctx_set_int(ctx, SAVED_SLOT_OF_INPUT0 + i, needed ? slot : -1) != TG_OK ||
        (needed && tg_ctx_save_for_backward(ctx, 1, &inputs[i]) != TG_OK))
      return tg_last_error();
    slot += needed;
  }
  return TG_OK;
}

static tg_tensor *saved_input(tg_ctx *ctx, int i) {
  return tg_ctx_saved(ctx, (int)tg_ctx_int(ctx, SAVED_SLOT_OF_INPUT0 + i));
}

static tg_status finish(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor *result,
                        tg_tensor **out) {
  if (!result || save_inputs(ctx, in[0], in[1]) != TG_OK) return tg_last_error();
  out[0] = result;
  return TG_OK;
}

/* inputs: x [n, c_in, h, w], w [c_out, c_in / groups, kh, kw]; ints: the geometry. */
tg_status tg__fwd_conv2d(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *const op = "conv2d";
  tg__conv_geometry g;
  const tg_tensor *x = in[0], *w = in[1];
  if (!tg__conv_geometry_of(op, ctx, &g) || !check_image(op, "x", x, &g) ||
      !check_weight(op, "w", w, x, "x", &g) ||
      !check_channels(op, "x", x, w->sizes[1] * g.groups, "w.sizes[1] * groups"))
    return tg_last_error();
  return finish(ctx, in, conv2d_forward(op, x, w, &g), out);
}

tg_status tg__bwd_conv2d(tg_ctx *ctx, const tg_tensor *const *grad, tg_tensor **gi) {
  const tg__conv_geometry g = tg__conv_geometry_saved(ctx);
  if (tg_ctx_needs_input_grad(ctx, 0) &&
      !(gi[0] = tg__conv_transpose2d_apply(grad[0], saved_input(ctx, 1), &g)))
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1) &&
      !(gi[1] = tg__conv2d_weight_apply(saved_input(ctx, 0), grad[0], &g)))
    return tg_last_error();
  return TG_OK;
}

/* inputs: y [n, c_out, out_h, out_w], w [c_out, c_in / groups, kh, kw]; ints: the geometry;
 * output [n, c_in, h, w]. */
tg_status tg__fwd_conv_transpose2d(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *const op = "conv_transpose2d";
  tg__conv_geometry g;
  const tg_tensor *y = in[0], *w = in[1];
  if (!tg__conv_geometry_of(op, ctx, &g) || !check_grid(op, "y", y, &g) ||
      !check_weight(op, "w", w, y, "y", &g) ||
      !check_channels(op, "y", y, w->sizes[0], "w.sizes[0]"))
    return tg_last_error();
  return finish(ctx, in, conv_transpose2d_forward(op, y, w, &g), out);
}

tg_status tg__bwd_conv_transpose2d(tg_ctx *ctx, const tg_tensor *const *grad, tg_tensor **gi) {
  const tg__conv_geometry g = tg__conv_geometry_saved(ctx);
  if (tg_ctx_needs_input_grad(ctx, 0) &&
      !(gi[0] = tg__conv2d_apply(grad[0], saved_input(ctx, 1), &g)))
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1) &&
      !(gi[1] = tg__conv2d_weight_apply(grad[0], saved_input(ctx, 0), &g)))
    return tg_last_error();
  return TG_OK;
}

/* inputs: x [n, c_in, h, w], y [n, c_out, out_h, out_w]; ints: the geometry; output the
 * weight's gradient [c_out, c_in / groups, kh, kw]. */
tg_status tg__fwd_conv2d_weight(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *const op = "conv2d_weight";
  tg__conv_geometry g;
  const tg_tensor *x = in[0], *y = in[1];
  if (!tg__conv_geometry_of(op, ctx, &g) || !check_image(op, "x", x, &g) ||
      !check_grid(op, "y", y, &g) || !tg__check_alike(op, "y", y, "x", x) ||
      !check_batch(op, x, y) || !check_divisible(op, "x", x, 1, g.groups) ||
      !check_divisible(op, "y", y, 1, g.groups))
    return tg_last_error();
  return finish(ctx, in, conv2d_weight_forward(op, x, y, &g), out);
}

tg_status tg__bwd_conv2d_weight(tg_ctx *ctx, const tg_tensor *const *grad, tg_tensor **gi) {
  const tg__conv_geometry g = tg__conv_geometry_saved(ctx);
  if (tg_ctx_needs_input_grad(ctx, 0) &&
      !(gi[0] = tg__conv_transpose2d_apply(saved_input(ctx, 1), grad[0], &g)))
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1) &&
      !(gi[1] = tg__conv2d_apply(saved_input(ctx, 0), grad[0], &g)))
    return tg_last_error();
  return TG_OK;
}

tg_tensor *tg__conv2d_apply(const tg_tensor *x, const tg_tensor *w, const tg__conv_geometry *g) {
  return x && w ? tg_apply1_ex(TG__OP(conv2d), TG__IN(x, w), TG__NO_SC, TG__CONV_INTS(*g)) : NULL;
}

tg_tensor *tg__conv_transpose2d_apply(const tg_tensor *y, const tg_tensor *w,
                                      const tg__conv_geometry *g) {
  return y && w ? tg_apply1_ex(TG__OP(conv_transpose2d), TG__IN(y, w), TG__NO_SC, TG__CONV_INTS(*g))
                : NULL;
}

tg_tensor *tg__conv2d_weight_apply(const tg_tensor *x, const tg_tensor *y,
                                   const tg__conv_geometry *g) {
  return x && y ? tg_apply1_ex(TG__OP(conv2d_weight), TG__IN(x, y), TG__NO_SC, TG__CONV_INTS(*g))
                : NULL;
}
