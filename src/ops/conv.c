/* conv2d, conv_transpose2d and conv2d_weight: three bilinear ops over one geometry
 * (ops/conv_internal.h), each the others' derivative:
 *
 *   conv2d(x, w)           = w  @ im2col(x)            (per group, per chunk of images)
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

/* ---- the forwards ----
 * Each runs over chunks of images: a chunk's columns are one GEMM operand
 * [C * kh * kw, images * out_h * out_w] per group, so small images still make GEMMs large
 * enough to thread well, and the columns buffer stays near COLUMNS_BUDGET bytes (in cache
 * while im2col writes it and the GEMM reads it) however large the batch. */
#define COLUMNS_BUDGET ((int64_t)4 << 20)

/* Images per chunk: as many as fit the budget, at least one. */
static int64_t images_per_chunk(int64_t n, int64_t column_elements, size_t elsize) {
  const int64_t per_image = column_elements * (int64_t)elsize;
  const int64_t fit = per_image > 0 ? COLUMNS_BUDGET / per_image : n;
  return fit < 1 ? 1 : fit > n ? n : fit;
}

/* A buffer for [rows, cols] matrices, with a row more behind them: BLIS's small-matrix
 * kernels may read one leading dimension past an operand, and the CPU's GEMM copies an
 * operand that lacks the room (cpu_gemm.c), as a whole chunk's would (rows of more than
 * 16 KiB). */
static tg_tensor *chunk_buffer(int64_t rows, int64_t cols, tg_options options) {
  return tg_empty(1, (const int64_t[]){(rows + 1) * cols}, options);
}

/* A contiguous [rows, cols] matrix at the start of buffer (which holds at least that many). */
static tg_tensor *front(const tg_tensor *buffer, int64_t rows, int64_t cols) {
  return matrix(buffer, rows, cols, cols, 1, 0);
}

/* The columns' grid row width (tg__conv_im2col_into): out_w, or with stride_w 1 the padded
 * width, so that im2col and col2im move whole rows, where the GEMMs' extra columns cost at
 * most a quarter more (the rows of a 7 x 7 image stay as they are). */
static int64_t grid_width(const tg__conv_geometry *g) {
  const int64_t wp = tg__conv_padded_w(g);
  return g->stride_w == 1 && (wp - g->out_w) * 4 <= g->out_w ? wp : g->out_w;
}

/* A chunk matrix [rows, m * grid] seen as [m, rows, grid]: how the images' planes lie in it. */
static tg_tensor *by_image(const tg_tensor *mat, int64_t m, int64_t grid) {
  const int64_t rows = mat->sizes[0];
  return tg_as_strided(mat, 3, (const int64_t[]){m, rows, grid},
                       (const int64_t[]){grid, m * grid, 1}, tg_offset(mat));
}

/* The images [m, rows, out_h, out_w] in a chunk matrix [rows, m * out_h * grid_w], or (past)
 * the columns beyond out_w of its grid rows [m, rows, out_h, grid_w - out_w]. */
static tg_tensor *chunk_images(const tg_tensor *mat, int64_t m, const tg__conv_geometry *g,
                               int64_t grid_w, bool past) {
  const int64_t grid = g->out_h * grid_w;
  return tg_as_strided(
      mat, 4, (const int64_t[]){m, mat->sizes[0], g->out_h, past ? grid_w - g->out_w : g->out_w},
      (const int64_t[]){grid, m * grid, grid_w, 1}, tg_offset(mat) + (past ? g->out_w : 0));
}

/* The chunk matrix [c, m * out_h * grid_w] of images [b0, b0 + m) of contiguous t [n, c, out_h,
 * out_w]: t's own for one image on the plain grid, else packed into buffer (a wide grid's
 * extra columns zero: the GEMMs read them). */
static tg_tensor *chunk_matrix(const tg_backend *be, const tg_tensor *t, const tg_tensor *buffer,
                               int64_t b0, int64_t m, const tg__conv_geometry *g, int64_t grid_w) {
  const int64_t c = t->sizes[1], grid = g->out_h * grid_w;
  if (m == 1 && grid_w == g->out_w) return matrix(t, c, grid, grid, 1, b0 * c * grid);
  tg_tensor *mat = front(buffer, c, m * grid),
            *dst = mat ? chunk_images(mat, m, g, grid_w, false) : NULL,
            *src = dst ? tg_narrow(t, 0, b0, m) : NULL;
  if (!src || be->copy(dst, src) != TG_OK) return NULL;
  tg_tensor *past = grid_w > g->out_w ? chunk_images(mat, m, g, grid_w, true) : NULL;
  return grid_w == g->out_w || (past && be->fill(past, 0.0) == TG_OK) ? mat : NULL;
}

/* Group k of a matrix: its k-th share of rows (dim 0) or columns (dim 1). */
static tg_tensor *group_of(const tg_tensor *t, int dim, int64_t k, int64_t groups) {
  const int64_t share = t->sizes[dim] / groups;
  return tg_narrow(t, dim, k * share, share);
}

/* out = a @ b (+ beta out) per group: out's rows, a's along a_dim, b's along b_dim. */
static bool grouped_gemm(const tg_backend *be, tg_tensor *out, const tg_tensor *a, int a_dim,
                         const tg_tensor *b, int b_dim, int64_t groups, double beta) {
  if (groups == 1) return be->gemm(out, a, b, 1.0, beta) == TG_OK;
  for (int64_t k = 0; k < groups; k++) {
    tg_tensor *ok = group_of(out, 0, k, groups), *ak = ok ? group_of(a, a_dim, k, groups) : NULL,
              *bk = ak ? group_of(b, b_dim, k, groups) : NULL;
    if (!bk || be->gemm(ok, ak, bk, 1.0, beta) != TG_OK) return false;
  }
  return true;
}

/* ---- the device's own convolution ---- */

typedef enum device_conv { DEVICE_CONV_DONE, DEVICE_CONV_DECLINED, DEVICE_CONV_FAILED } device_conv;

/* Runs kernel (a TG_OP_FAST_KERNEL conv2d.* line) on contiguous x, w, y and the geometry,
 * where x's device has it and it takes the call; it writes the one its name says. */
static device_conv device_convolution(const char *kernel, const tg_tensor *x, const tg_tensor *w,
                                      const tg_tensor *y, const tg__conv_geometry *g) {
  tg_kernel_fn fn = tg__fast_kernel(kernel, x->storage->device);
  if (!fn) return DEVICE_CONV_DECLINED;
  tg_scope sc = tg_scope_begin();
  /* the struct's 13 ints, in the ops' order (conv_internal.h), as tg__conv_geometry_of reads
   * them */
  tg_tensor *geometry = tg_from_data(1, (const int64_t[]){TG__CONV_NUM_INTS}, &g->stride_h,
                                     (tg_options){.dtype = TG_I64});
  tg_tensor *xc = geometry ? tg_contiguous(x) : NULL, *wc = xc ? tg_contiguous(w) : NULL,
            *yc = wc ? tg_contiguous(y) : NULL;
  /* the output is one of the three, fresh and contiguous: contiguous() returned it itself */
  tg_status st = yc ? fn(4, (tg_tensor *const[]){xc, wc, yc, geometry}) : tg_last_error();
  tg_scope_end(sc);
  return st == TG_OK                ? DEVICE_CONV_DONE
         : st == TG_ERR_UNSUPPORTED ? DEVICE_CONV_DECLINED
                                    : DEVICE_CONV_FAILED;
}

/* y [n, c_out, out_h, out_w] = w @ im2col(x), one GEMM per chunk of images and group. */
static tg_tensor *conv2d_forward(const char *op, const tg_tensor *x, const tg_tensor *w,
                                 const tg__conv_geometry *g) {
  const tg_backend *be = tg__backend(op, x->storage->device);
  const int64_t n = x->sizes[0], c_out = w->sizes[0], groups = g->groups,
                depth = w->sizes[1] * g->kernel_h * g->kernel_w, grid_w = grid_width(g),
                grid = g->out_h * grid_w;
  tg_tensor *y =
      be ? tg_empty(4, (const int64_t[]){n, c_out, g->out_h, g->out_w}, options_of(x)) : NULL;
  if (!y || tg_numel(y) == 0) return y;
  if (depth == 0) return be->fill(y, 0.0) == TG_OK ? y : NULL;
  const device_conv own = device_convolution("conv2d.forward", x, w, y, g);
  if (own != DEVICE_CONV_DECLINED) return own == DEVICE_CONV_DONE ? y : NULL;
  const int64_t rows = groups * depth,
                chunk = images_per_chunk(n, rows * grid, tg_dtype_size(y->dtype));
  const bool direct = chunk == 1 && grid_w == g->out_w; /* the GEMM writes y itself */
  tg_tensor *wc = tg_contiguous(w);
  tg_tensor *cols = wc ? chunk_buffer(rows, chunk * grid, options_of(x)) : NULL;
  tg_tensor *staged = cols && !direct ? chunk_buffer(c_out, chunk * grid, options_of(x)) : cols;
  if (!staged) return NULL;
  for (int64_t b0 = 0; b0 < n; b0 += chunk) {
    const int64_t m = n - b0 < chunk ? n - b0 : chunk;
    tg_scope views = tg_scope_begin();
    tg_tensor *ck = front(cols, rows, m * grid), *cv = ck ? by_image(ck, m, grid) : NULL,
              *xs = cv ? tg_narrow(x, 0, b0, m) : NULL;
    tg_tensor *out = xs ? (direct ? matrix(y, c_out, grid, grid, 1, b0 * c_out * grid)
                                  : front(staged, c_out, m * grid))
                        : NULL;
    tg_tensor *wm = out ? front(wc, c_out, depth) : NULL;
    bool ok = wm && tg__conv_im2col_into(op, xs, g, cv, grid_w, false) &&
              grouped_gemm(be, out, wm, 0, ck, 0, groups, 0.0);
    if (ok && !direct) {
      tg_tensor *dst = tg_narrow(y, 0, b0, m),
                *src = dst ? chunk_images(out, m, g, grid_w, false) : NULL;
      ok = src && be->copy(dst, src) == TG_OK;
    }
    tg_scope_end(views);
    if (!ok) return NULL;
  }
  return y;
}

/* x [n, groups * w.sizes[1], h, w] = col2im(w^T @ y), per chunk of images and group. */
static tg_tensor *conv_transpose2d_forward(const char *op, const tg_tensor *y, const tg_tensor *w,
                                           const tg__conv_geometry *g) {
  const tg_backend *be = tg__backend(op, y->storage->device);
  const int64_t n = y->sizes[0], c_out = w->sizes[0], groups = g->groups,
                depth = w->sizes[1] * g->kernel_h * g->kernel_w, grid_w = grid_width(g),
                grid = g->out_h * grid_w;
  tg_tensor *x =
      be ? tg_empty(4, (const int64_t[]){n, groups * w->sizes[1], g->h, g->w}, options_of(y))
         : NULL;
  if (!x || tg_numel(x) == 0) return x;
  if (c_out == 0 || grid == 0) return be->fill(x, 0.0) == TG_OK ? x : NULL;
  const device_conv own = device_convolution("conv2d.backward_data", x, w, y, g);
  if (own != DEVICE_CONV_DECLINED) return own == DEVICE_CONV_DONE ? x : NULL;
  const int64_t rows = groups * depth,
                chunk = images_per_chunk(n, rows * grid, tg_dtype_size(x->dtype));
  /* w^T [depth, c_out] packed: a row-major left operand runs BLIS's faster kernels (up to
   * 1.2x measured at these shapes) */
  tg_tensor *yc = tg_contiguous(y),
            *w_t =
                yc ? tg_contiguous(tg_t(tg_reshape(w, 2, (const int64_t[]){c_out, depth}))) : NULL;
  tg_tensor *cols = w_t ? chunk_buffer(rows, chunk * grid, options_of(y)) : NULL;
  tg_tensor *staged = cols ? chunk_buffer(c_out, chunk * grid, options_of(y)) : NULL;
  if (!staged) return NULL;
  for (int64_t b0 = 0; b0 < n; b0 += chunk) {
    const int64_t m = n - b0 < chunk ? n - b0 : chunk;
    tg_scope views = tg_scope_begin();
    tg_tensor *yk = chunk_matrix(be, yc, staged, b0, m, g, grid_w);
    tg_tensor *ck = yk ? front(cols, rows, m * grid) : NULL;
    tg_tensor *wt = ck ? front(w_t, depth, c_out) : NULL;
    tg_tensor *cv = wt ? by_image(ck, m, grid) : NULL, *xs = cv ? tg_narrow(x, 0, b0, m) : NULL;
    const bool ok = xs && grouped_gemm(be, ck, wt, 1, yk, 0, groups, 0.0) &&
                    tg__conv_col2im_into(op, cv, g, xs, grid_w);
    tg_scope_end(views);
    if (!ok) return NULL;
  }
  return x;
}

/* The chunk's y as [m * out_h * grid_w, c_out] (row-major y^T, a wide grid's extra rows zero)
 * in buffer. */
static tg_tensor *chunk_matrix_t(const tg_backend *be, const tg_tensor *y, const tg_tensor *buffer,
                                 int64_t b0, int64_t m, const tg__conv_geometry *g,
                                 int64_t grid_w) {
  const int64_t c = y->sizes[1], oh = g->out_h, ow = g->out_w;
  tg_tensor *mat = front(buffer, m * oh * grid_w, c);
  tg_tensor *dst =
      mat ? tg_as_strided(mat, 4, (const int64_t[]){m, c, oh, ow},
                          (const int64_t[]){oh * grid_w * c, 1, grid_w * c, c}, tg_offset(mat))
          : NULL;
  tg_tensor *src = dst ? tg_narrow(y, 0, b0, m) : NULL;
  if (!src || be->copy(dst, src) != TG_OK) return NULL;
  if (grid_w == ow) return mat;
  tg_tensor *past = tg_as_strided(mat, 3, (const int64_t[]){m * oh, grid_w - ow, c},
                                  (const int64_t[]){grid_w * c, c, 1}, tg_offset(mat) + ow * c);
  return past && be->fill(past, 0.0) == TG_OK ? mat : NULL;
}

/* w [c_out, c_in / groups, kh, kw] = sum over the batch of y @ im2col(x)^T, per group,
 * accumulated chunk by chunk as its transpose im2col(x) @ y^T [depth, c_out / groups] per
 * group: the grid (the contraction) is contiguous in the columns and in y, and BLIS runs
 * cols @ y^T (y^T packed, 1/9 of the columns' size or less) 1.2x to 3.8x faster than
 * y @ cols^T at the bench's shapes. */
static tg_tensor *conv2d_weight_forward(const char *op, const tg_tensor *x, const tg_tensor *y,
                                        const tg__conv_geometry *g) {
  const tg_backend *be = tg__backend(op, x->storage->device);
  const int64_t n = x->sizes[0], c_out = y->sizes[1], groups = g->groups,
                per_group = c_out / groups, c_in = x->sizes[1] / groups,
                depth = c_in * g->kernel_h * g->kernel_w, grid_w = grid_width(g),
                grid = g->out_h * grid_w;
  tg_tensor *dw =
      be ? tg_empty(4, (const int64_t[]){c_out, c_in, g->kernel_h, g->kernel_w}, options_of(x))
         : NULL;
  if (!dw || tg_numel(dw) == 0) return dw;
  if (n * grid == 0) return be->fill(dw, 0.0) == TG_OK ? dw : NULL;
  const device_conv own = device_convolution("conv2d.backward_weights", x, dw, y, g);
  if (own != DEVICE_CONV_DECLINED) return own == DEVICE_CONV_DONE ? dw : NULL;
  const int64_t rows = groups * depth,
                chunk = images_per_chunk(n, rows * grid, tg_dtype_size(dw->dtype));
  tg_tensor *cols = chunk_buffer(rows, chunk * grid, options_of(x));
  tg_tensor *y_t = cols ? chunk_buffer(chunk * grid, c_out, options_of(x)) : NULL;
  tg_tensor *dw_t = y_t ? chunk_buffer(rows, per_group, options_of(x)) : NULL;
  tg_tensor *acc = dw_t ? front(dw_t, rows, per_group) : NULL;
  if (!acc) return NULL;
  for (int64_t b0 = 0; b0 < n; b0 += chunk) {
    const int64_t m = n - b0 < chunk ? n - b0 : chunk;
    tg_scope views = tg_scope_begin();
    tg_tensor *yk = chunk_matrix_t(be, y, y_t, b0, m, g, grid_w);
    tg_tensor *ck = yk ? front(cols, rows, m * grid) : NULL,
              *cv = ck ? by_image(ck, m, grid) : NULL, *xs = cv ? tg_narrow(x, 0, b0, m) : NULL;
    const bool ok = xs && tg__conv_im2col_into(op, xs, g, cv, grid_w, true) &&
                    grouped_gemm(be, acc, ck, 0, yk, 1, groups, b0 > 0 ? 1.0 : 0.0);
    tg_scope_end(views);
    if (!ok) return NULL;
  }
  /* dw[k * per_group + o, d] = acc[k * depth + d, o] */
  tg_tensor *dst = tg_as_strided(dw, 3, (const int64_t[]){groups, per_group, depth},
                                 (const int64_t[]){per_group * depth, depth, 1}, tg_offset(dw));
  tg_tensor *src =
      dst ? tg_as_strided(acc, 3, (const int64_t[]){groups, per_group, depth},
                          (const int64_t[]){depth * per_group, 1, per_group}, tg_offset(acc))
          : NULL;
  return src && be->copy(dst, src) == TG_OK ? dw : NULL;
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
  /* Both gradients read grad's elements packed (the columns' GEMMs, a device's own
   * convolution): one packed copy for both where it has gaps (sum's backward expands one
   * value over the whole output), instead of one each. */
  const tg_tensor *gy = grad[0];
  if (tg_ctx_needs_input_grad(ctx, 0) && tg_ctx_needs_input_grad(ctx, 1) && !tg_is_contiguous(gy) &&
      !(gy = tg_contiguous(gy)))
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 0) &&
      !(gi[0] = tg__conv_transpose2d_apply(gy, saved_input(ctx, 1), &g)))
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1) &&
      !(gi[1] = tg__conv2d_weight_apply(saved_input(ctx, 0), gy, &g)))
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
