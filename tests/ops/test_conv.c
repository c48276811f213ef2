/* The convolution family (tg/conv.h): conv2d, conv1d, conv_transpose2d, unfold and fold
 * against plain loops written here, over every option (stride, padding with "same" and
 * "valid", dilation, groups, bias, output_padding, unbatched inputs); gradcheck and
 * gradgradcheck of the front ends and tg_op_check of the five registered ops; edges (empty
 * batch, non-contiguous operands, meta); every refused input's error; an allocation-failure
 * sweep over forward and backward. CPU against emulated CUDA: tests/cuda/test_cuda_conv.c. */
#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};

static tg_tensor *randn(tg_generator *gen, tg_dtype dt, int ndim, const int64_t *sizes) {
  return tg_randn(ndim, sizes, (tg_options){.dtype = dt}, gen);
}

/* t's elements as doubles, row-major (caller frees). */
static double *host(const tg_tensor *t) {
  const int64_t n = tg_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  tg_tensor *c = tg_contiguous(tg_to_dtype(t, TG_F64));
  cr_assert_not_null(c, "%s", tg_last_error_message());
  cr_assert_eq(tg_to_host_array(c, v, sizeof(double) * (size_t)n), TG_OK);
  return v;
}

/* ---- loop references (F64, batched 4-D, explicit before/after padding) ---- */

typedef struct geometry {
  int64_t n, c_in, c_out, h, w, kh, kw, sh, sw, ph, pw, dh, dw, groups, oh, ow;
} geometry;

/* y[b, o, r, s] = bias[o] + sum w[o, c, i, j] x[b, g*cg + c, r*sh + i*dh - ph, s*sw + j*dw - pw] */
static void ref_conv2d(const geometry *g, const double *x, const double *w, const double *bias,
                       double *y) {
  const int64_t cg = g->c_in / g->groups, og = g->c_out / g->groups;
  for (int64_t b = 0; b < g->n; b++)
    for (int64_t o = 0; o < g->c_out; o++)
      for (int64_t r = 0; r < g->oh; r++)
        for (int64_t s = 0; s < g->ow; s++) {
          double acc = bias ? bias[o] : 0.0;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t i = 0; i < g->kh; i++)
              for (int64_t j = 0; j < g->kw; j++) {
                const int64_t row = r * g->sh + i * g->dh - g->ph,
                              col = s * g->sw + j * g->dw - g->pw, ch = (o / og) * cg + c;
                if (row < 0 || row >= g->h || col < 0 || col >= g->w) continue;
                acc += w[((o * cg + c) * g->kh + i) * g->kw + j] *
                       x[((b * g->c_in + ch) * g->h + row) * g->w + col];
              }
          y[((b * g->c_out + o) * g->oh + r) * g->ow + s] = acc;
        }
}

/* The transposed convolution, scattering: x [n, c_in, oh, ow] (the conv's grid), w
 * [c_in, c_out/groups, kh, kw], y [n, c_out, h, w] (the conv's image). */
static void ref_conv_transpose2d(const geometry *g, const double *x, const double *w,
                                 const double *bias, double *y) {
  const int64_t ig = g->c_in / g->groups, og = g->c_out / g->groups;
  for (int64_t e = 0; e < g->n * g->c_out * g->h * g->w; e++)
    y[e] = bias ? bias[(e / (g->h * g->w)) % g->c_out] : 0.0;
  for (int64_t b = 0; b < g->n; b++)
    for (int64_t c = 0; c < g->c_in; c++)
      for (int64_t r = 0; r < g->oh; r++)
        for (int64_t s = 0; s < g->ow; s++)
          for (int64_t o = 0; o < og; o++)
            for (int64_t i = 0; i < g->kh; i++)
              for (int64_t j = 0; j < g->kw; j++) {
                const int64_t row = r * g->sh + i * g->dh - g->ph,
                              col = s * g->sw + j * g->dw - g->pw, oc = (c / ig) * og + o;
                if (row < 0 || row >= g->h || col < 0 || col >= g->w) continue;
                y[((b * g->c_out + oc) * g->h + row) * g->w + col] +=
                    w[((c * og + o) * g->kh + i) * g->kw + j] *
                    x[((b * g->c_in + c) * g->oh + r) * g->ow + s];
              }
}

/* unfold: cols[b, (c*kh + i)*kw + j, r*ow + s] = x[b, c, row, col] (0 in the padding). */
static void ref_unfold(const geometry *g, const double *x, double *cols) {
  const int64_t taps = g->kh * g->kw, grid = g->oh * g->ow;
  for (int64_t b = 0; b < g->n; b++)
    for (int64_t c = 0; c < g->c_in; c++)
      for (int64_t t = 0; t < taps; t++)
        for (int64_t p = 0; p < grid; p++) {
          const int64_t row = (p / g->ow) * g->sh + (t / g->kw) * g->dh - g->ph,
                        col = (p % g->ow) * g->sw + (t % g->kw) * g->dw - g->pw;
          const bool in = row >= 0 && row < g->h && col >= 0 && col < g->w;
          cols[((b * g->c_in + c) * taps + t) * grid + p] =
              in ? x[((b * g->c_in + c) * g->h + row) * g->w + col] : 0.0;
        }
}

static void ref_fold(const geometry *g, const double *cols, double *x) {
  const int64_t taps = g->kh * g->kw, grid = g->oh * g->ow;
  memset(x, 0, sizeof(double) * (size_t)(g->n * g->c_in * g->h * g->w));
  for (int64_t b = 0; b < g->n; b++)
    for (int64_t c = 0; c < g->c_in; c++)
      for (int64_t t = 0; t < taps; t++)
        for (int64_t p = 0; p < grid; p++) {
          const int64_t row = (p / g->ow) * g->sh + (t / g->kw) * g->dh - g->ph,
                        col = (p % g->ow) * g->sw + (t % g->kw) * g->dw - g->pw;
          if (row >= 0 && row < g->h && col >= 0 && col < g->w)
            x[((b * g->c_in + c) * g->h + row) * g->w + col] +=
                cols[((b * g->c_in + c) * taps + t) * grid + p];
        }
}

static int64_t windows(int64_t padded, int64_t k, int64_t d, int64_t s) {
  return padded < d * (k - 1) + 1 ? 0 : (padded - d * (k - 1) - 1) / s + 1;
}

/* ---- conv2d / conv1d values ---- */

typedef struct conv_case {
  int64_t n, c_in, c_out, h, w, kh, kw;
  tg_conv2d_opts opts;
  bool bias, unbatched, transposed_x;
} conv_case;

static const conv_case conv_cases[] = {
    {2, 3, 4, 6, 5, 3, 3, {.groups = 1}, true, false, false},
    {1, 2, 2, 7, 6, 3, 2, {.stride = {2, 3}, .padding = {1, 2}}, true, false, false},
    {2, 2, 3, 7, 7, 3, 3, {.dilation = {2, 1}, .padding = {2, 0}}, false, false, true},
    {1, 4, 6, 5, 5, 3, 3, {.groups = 2, .stride = {2, 1}}, true, false, false},
    {1, 3, 3, 6, 6, 2, 3, {.groups = 3, .padding = {1, 1}}, true, true, false},
    /* "same" with an even kernel and dilation: an uneven split, the odd unit after */
    {2,
     2,
     2,
     5,
     6,
     4,
     2,
     {.padding_mode = TG_CONV_PADDING_SAME, .dilation = {1, 3}},
     true,
     false,
     true},
    {1,
     2,
     2,
     5,
     6,
     3,
     3,
     {.padding_mode = TG_CONV_PADDING_VALID, .padding = {5, 5}},
     false,
     true,
     false},
    {0, 2, 3, 4, 4, 3, 3, {.padding = {1, 1}}, true, false, false},
};

static geometry conv_geometry(const conv_case *c) {
  const tg_conv2d_opts *o = &c->opts;
  geometry g = {c->n,
                c->c_in,
                c->c_out,
                c->h,
                c->w,
                c->kh,
                c->kw,
                o->stride[0] ? o->stride[0] : 1,
                o->stride[1] ? o->stride[1] : 1,
                o->padding[0],
                o->padding[1],
                o->dilation[0] ? o->dilation[0] : 1,
                o->dilation[1] ? o->dilation[1] : 1,
                o->groups ? o->groups : 1,
                0,
                0};
  int64_t after_h = g.ph, after_w = g.pw;
  if (o->padding_mode != TG_CONV_PADDING_EXPLICIT) {
    const bool same = o->padding_mode == TG_CONV_PADDING_SAME;
    const int64_t th = same ? g.dh * (g.kh - 1) : 0, tw = same ? g.dw * (g.kw - 1) : 0;
    g.ph = th / 2, after_h = th - g.ph, g.pw = tw / 2, after_w = tw - g.pw;
  }
  g.oh = windows(g.h + g.ph + after_h, g.kh, g.dh, g.sh);
  g.ow = windows(g.w + g.pw + after_w, g.kw, g.dw, g.sw);
  return g;
}

TG_TEST(conv, conv2d_matches_a_loop_over_every_option) {
  tg_generator *gen = tg_generator_new(11);
  for (size_t k = 0; k < sizeof conv_cases / sizeof conv_cases[0]; k++)
    for (int d = 0; d < 2; d++) {
      const conv_case *c = &conv_cases[k];
      const tg_dtype dt = d ? TG_F64 : TG_F32;
      const double tol = d ? 1e-12 : 1e-5;
      const geometry g = conv_geometry(c);
      tg_scope sc = tg_scope_begin();
      tg_tensor *x = c->transposed_x
                         ? tg_transpose(randn(gen, dt, TG_SHAPE(c->n, c->c_in, c->w, c->h)), 2, 3)
                         : randn(gen, dt, TG_SHAPE(c->n, c->c_in, c->h, c->w));
      tg_tensor *w = randn(gen, dt, TG_SHAPE(c->c_out, c->c_in / g.groups, c->kh, c->kw));
      tg_tensor *b = c->bias ? randn(gen, dt, TG_SHAPE(c->c_out)) : NULL;
      double *xv = host(x), *wv = host(w), *bv = b ? host(b) : NULL;
      double *want = malloc(sizeof(double) * (size_t)(g.n * g.c_out * g.oh * g.ow + 1));
      ref_conv2d(&g, xv, wv, bv, want);
      tg_tensor *y = tg_conv2d(c->unbatched ? tg_squeeze(x, 0) : x, w, b, &c->opts);
      cr_assert_not_null(y, "case %zu: %s", k, tg_last_error_message());
      if (c->unbatched)
        tg_assert_sizes(y, c->c_out, g.oh, g.ow);
      else
        tg_assert_sizes(y, c->n, c->c_out, g.oh, g.ow);
      tg_test_expect_values(y, g.n * g.c_out * g.oh * g.ow, want, tol);
      free(xv), free(wv), free(bv), free(want);
      tg_scope_end(sc);
    }
  tg_generator_free(gen);
}

TG_TEST(conv, conv1d_is_conv2d_over_one_dim_with_same_padding_by_hand) {
  /* PyTorch: conv1d(arange(5), ones(4), padding="same") = [3, 6, 10, 9, 7]: of the 3 units
   * of padding, 1 goes before and 2 after */
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(1, 1, 5), (const double[]){0, 1, 2, 3, 4});
  tg_tensor *w = tg_ones(TG_SHAPE(1, 1, 4), f64);
  tg_tensor *y = tg_conv1d(x, w, NULL, &(tg_conv1d_opts){.padding_mode = TG_CONV_PADDING_SAME});
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_test_expect_values(y, 5, (const double[]){3, 6, 10, 9, 7}, 0);
  /* stride 2, padding 1, dilation 2, groups 2, bias, unbatched: against conv2d on [.., 1, L] */
  tg_generator *gen = tg_generator_new(5);
  tg_tensor *xs = randn(gen, TG_F64, TG_SHAPE(4, 9)), *ws = randn(gen, TG_F64, TG_SHAPE(6, 2, 3));
  tg_tensor *bs = randn(gen, TG_F64, TG_SHAPE(6));
  tg_tensor *y1 = tg_conv1d(
      xs, ws, bs, &(tg_conv1d_opts){.stride = 2, .padding = 1, .dilation = 2, .groups = 2});
  tg_tensor *y2 = tg_conv2d(
      tg_unsqueeze(xs, 1), tg_unsqueeze(ws, 2), bs,
      &(tg_conv2d_opts){.stride = {1, 2}, .padding = {0, 1}, .dilation = {1, 2}, .groups = 2});
  cr_assert_not_null(y1, "%s", tg_last_error_message());
  cr_assert_not_null(y2, "%s", tg_last_error_message());
  tg_assert_sizes(y1, 6, 4);
  tg_assert_close(y1, tg_squeeze(y2, 1), 0, 1e-14);
  tg_generator_free(gen);
}

/* ---- conv_transpose2d values ---- */

typedef struct transpose_case {
  int64_t n, c_in, c_out, h, w, kh, kw; /* h, w: the input's */
  tg_conv_transpose2d_opts opts;
  bool bias;
} transpose_case;

static const transpose_case transpose_cases[] = {
    {2, 3, 2, 3, 4, 3, 3, {.groups = 1}, true},
    {1, 2, 3, 3, 3, 3, 2, {.stride = {2, 3}, .padding = {1, 0}, .output_padding = {1, 2}}, true},
    {1, 4, 6, 3, 2, 2, 3, {.groups = 2, .dilation = {2, 1}, .padding = {1, 1}}, false},
    /* output_padding below the dilation with stride 1 (PyTorch allows either) */
    {1, 2, 2, 3, 3, 3, 3, {.dilation = {2, 2}, .output_padding = {1, 1}}, true},
    {0, 2, 2, 3, 3, 2, 2, {.stride = {2, 2}}, true},
};

TG_TEST(conv, conv_transpose2d_matches_a_loop_over_every_option) {
  tg_generator *gen = tg_generator_new(12);
  for (size_t k = 0; k < sizeof transpose_cases / sizeof transpose_cases[0]; k++)
    for (int d = 0; d < 2; d++) {
      const transpose_case *c = &transpose_cases[k];
      const tg_conv_transpose2d_opts *o = &c->opts;
      const tg_dtype dt = d ? TG_F64 : TG_F32;
      const int64_t groups = o->groups ? o->groups : 1;
      geometry g = {c->n,
                    c->c_in,
                    c->c_out,
                    0,
                    0,
                    c->kh,
                    c->kw,
                    o->stride[0] ? o->stride[0] : 1,
                    o->stride[1] ? o->stride[1] : 1,
                    o->padding[0],
                    o->padding[1],
                    o->dilation[0] ? o->dilation[0] : 1,
                    o->dilation[1] ? o->dilation[1] : 1,
                    groups,
                    c->h,
                    c->w};
      g.h = (c->h - 1) * g.sh - 2 * g.ph + g.dh * (g.kh - 1) + o->output_padding[0] + 1;
      g.w = (c->w - 1) * g.sw - 2 * g.pw + g.dw * (g.kw - 1) + o->output_padding[1] + 1;
      tg_scope sc = tg_scope_begin();
      tg_tensor *x = randn(gen, dt, TG_SHAPE(c->n, c->c_in, c->h, c->w));
      tg_tensor *w = randn(gen, dt, TG_SHAPE(c->c_in, c->c_out / groups, c->kh, c->kw));
      tg_tensor *b = c->bias ? randn(gen, dt, TG_SHAPE(c->c_out)) : NULL;
      double *xv = host(x), *wv = host(w), *bv = b ? host(b) : NULL;
      double *want = malloc(sizeof(double) * (size_t)(g.n * g.c_out * g.h * g.w + 1));
      ref_conv_transpose2d(&g, xv, wv, bv, want);
      tg_tensor *y = tg_conv_transpose2d(x, w, b, o);
      cr_assert_not_null(y, "case %zu: %s", k, tg_last_error_message());
      tg_assert_sizes(y, c->n, c->c_out, g.h, g.w);
      tg_test_expect_values(y, g.n * g.c_out * g.h * g.w, want, d ? 1e-12 : 1e-5);
      free(xv), free(wv), free(bv), free(want);
      tg_scope_end(sc);
    }
  tg_generator_free(gen);
}

/* ---- unfold / fold values, and their adjointness ---- */

TG_TEST(conv, unfold_and_fold_match_loops_and_are_adjoint) {
  tg_generator *gen = tg_generator_new(13);
  const tg_fold_opts cases[] = {
      {.kernel_size = {2, 3}},
      {.kernel_size = {3, 2}, .stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}},
      {.kernel_size = {1, 1}, .stride = {3, 2}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const tg_fold_opts *o = &cases[k];
    geometry g = {2,
                  3,
                  3,
                  5,
                  6,
                  o->kernel_size[0],
                  o->kernel_size[1],
                  o->stride[0] ? o->stride[0] : 1,
                  o->stride[1] ? o->stride[1] : 1,
                  o->padding[0],
                  o->padding[1],
                  o->dilation[0] ? o->dilation[0] : 1,
                  o->dilation[1] ? o->dilation[1] : 1,
                  1,
                  0,
                  0};
    g.oh = windows(g.h + 2 * g.ph, g.kh, g.dh, g.sh);
    g.ow = windows(g.w + 2 * g.pw, g.kw, g.dw, g.sw);
    tg_scope sc = tg_scope_begin();
    tg_tensor *x = randn(gen, TG_F64, TG_SHAPE(g.n, g.c_in, g.h, g.w));
    tg_tensor *c = randn(gen, TG_F64, TG_SHAPE(g.n, g.c_in * g.kh * g.kw, g.oh * g.ow));
    double *xv = host(x), *cv = host(c);
    const int64_t n_cols = tg_numel(c), n_x = tg_numel(x);
    double *want_cols = malloc(sizeof(double) * (size_t)n_cols),
           *want_x = malloc(sizeof(double) * (size_t)n_x);
    ref_unfold(&g, xv, want_cols);
    ref_fold(&g, cv, want_x);
    tg_tensor *u = tg_unfold(x, o), *f = tg_fold(c, g.h, g.w, o);
    cr_assert_not_null(u, "%s", tg_last_error_message());
    cr_assert_not_null(f, "%s", tg_last_error_message());
    tg_test_expect_values(u, n_cols, want_cols, 1e-15);
    tg_test_expect_values(f, n_x, want_x, 1e-13);
    /* <unfold(x), c> = <x, fold(c)> */
    const double lhs = tg_test_at(tg_sum(tg_mul(u, c)), 0),
                 rhs = tg_test_at(tg_sum(tg_mul(x, f)), 0);
    cr_assert_float_eq(lhs, rhs, 1e-11, "%g vs %g", lhs, rhs);
    /* unbatched forms */
    tg_assert_close(tg_unfold(tg_select(x, 0, 1), o), tg_select(u, 0, 1), 0, 0);
    tg_assert_close(tg_fold(tg_select(c, 0, 0), g.h, g.w, o), tg_select(f, 0, 0), 0, 0);
    free(xv), free(cv), free(want_cols), free(want_x);
    tg_scope_end(sc);
  }
  tg_generator_free(gen);
}

/* ---- gradients ---- */

typedef struct front_end {
  int which; /* 0 conv2d, 1 conv1d, 2 conv_transpose2d, 3 unfold, 4 fold */
  tg_conv2d_opts conv;
  tg_conv1d_opts conv1;
  tg_conv_transpose2d_opts transpose;
  tg_fold_opts fold;
  int64_t fold_h, fold_w;
} front_end;

static tg_status call_front_end(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const front_end *f = user;
  switch (f->which) {
  case 0:
    out[0] = tg_conv2d(in[0], in[1], in[2], &f->conv);
    break;
  case 1:
    out[0] = tg_conv1d(in[0], in[1], in[2], &f->conv1);
    break;
  case 2:
    out[0] = tg_conv_transpose2d(in[0], in[1], in[2], &f->transpose);
    break;
  case 3:
    out[0] = tg_unfold(in[0], &f->fold);
    break;
  default:
    out[0] = tg_fold(in[0], f->fold_h, f->fold_w, &f->fold);
    break;
  }
  return out[0] ? TG_OK : tg_last_error();
}

static void check_grads(front_end *f, int n, tg_tensor *const *in) {
  for (int i = 0; i < n; i++) cr_assert_eq(tg_set_requires_grad(in[i], true), TG_OK);
  tg_gradcheck_options opts = {.quiet = true};
  cr_assert_eq(tg_gradcheck(call_front_end, f, n, in, 1, opts), TG_OK, "op %d: %s", f->which,
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(call_front_end, f, n, in, 1, opts), TG_OK, "op %d: %s", f->which,
               tg_last_error_message());
}

TG_TEST(conv, front_ends_pass_gradcheck_and_gradgradcheck) {
  tg_generator *gen = tg_generator_new(14);
  tg_scope sc = tg_scope_begin();
  front_end f = {.which = 0,
                 .conv = {.stride = {2, 1}, .dilation = {1, 2}, .groups = 2, .padding = {1, 0}}};
  check_grads(&f, 3,
              (tg_tensor *const[]){tg_transpose(randn(gen, TG_F64, TG_SHAPE(2, 4, 5, 5)), 2, 3),
                                   randn(gen, TG_F64, TG_SHAPE(4, 2, 2, 2)),
                                   randn(gen, TG_F64, TG_SHAPE(4))});
  f = (front_end){.which = 0, .conv = {.padding_mode = TG_CONV_PADDING_SAME, .dilation = {2, 1}}};
  check_grads(&f, 3,
              (tg_tensor *const[]){randn(gen, TG_F64, TG_SHAPE(1, 2, 4, 5)),
                                   randn(gen, TG_F64, TG_SHAPE(2, 2, 2, 4)),
                                   randn(gen, TG_F64, TG_SHAPE(2))});
  f = (front_end){.which = 1, .conv1 = {.stride = 2, .padding = 2, .groups = 3}};
  check_grads(&f, 3,
              (tg_tensor *const[]){randn(gen, TG_F64, TG_SHAPE(2, 3, 7)),
                                   randn(gen, TG_F64, TG_SHAPE(3, 1, 3)),
                                   randn(gen, TG_F64, TG_SHAPE(3))});
  f = (front_end){.which = 2,
                  .transpose = {.stride = {2, 2},
                                .padding = {1, 0},
                                .output_padding = {1, 0},
                                .groups = 2,
                                .dilation = {1, 2}}};
  check_grads(&f, 3,
              (tg_tensor *const[]){randn(gen, TG_F64, TG_SHAPE(1, 4, 3, 2)),
                                   randn(gen, TG_F64, TG_SHAPE(4, 1, 2, 3)),
                                   randn(gen, TG_F64, TG_SHAPE(2))});
  /* the fills other than zeros: padded by tg_pad or wrapped around, then convolved */
  f = (front_end){.which = 0, .conv = {.padding = {1, 2}, .fill = TG_CONV_FILL_REFLECT}};
  check_grads(&f, 3,
              (tg_tensor *const[]){randn(gen, TG_F64, TG_SHAPE(1, 2, 3, 4)),
                                   randn(gen, TG_F64, TG_SHAPE(2, 2, 2, 3)),
                                   randn(gen, TG_F64, TG_SHAPE(2))});
  f = (front_end){.which = 0,
                  .conv = {.padding_mode = TG_CONV_PADDING_SAME, .fill = TG_CONV_FILL_CIRCULAR}};
  check_grads(&f, 3,
              (tg_tensor *const[]){randn(gen, TG_F64, TG_SHAPE(2, 1, 3, 3)),
                                   randn(gen, TG_F64, TG_SHAPE(2, 1, 3, 2)),
                                   randn(gen, TG_F64, TG_SHAPE(2))});
  f = (front_end){.which = 1, .conv1 = {.padding = 2, .fill = TG_CONV_FILL_REPLICATE}};
  check_grads(&f, 3,
              (tg_tensor *const[]){randn(gen, TG_F64, TG_SHAPE(2, 5)),
                                   randn(gen, TG_F64, TG_SHAPE(3, 2, 2)),
                                   randn(gen, TG_F64, TG_SHAPE(3))});
  f = (front_end){.which = 3, .fold = {.kernel_size = {2, 2}, .stride = {1, 2}, .padding = {1, 0}}};
  check_grads(&f, 1, (tg_tensor *const[]){randn(gen, TG_F64, TG_SHAPE(1, 2, 3, 4))});
  f.which = 4, f.fold_h = 3, f.fold_w = 4;
  check_grads(&f, 1, (tg_tensor *const[]){randn(gen, TG_F64, TG_SHAPE(1, 8, 8))});
  tg_scope_end(sc);
  tg_generator_free(gen);
}

TG_TEST(conv, registered_ops_pass_their_opinfo_checks) {
  const char *const names[] = {"conv2d", "conv_transpose2d", "conv2d_weight", "unfold", "fold"};
  for (int i = 0; i < 5; i++) {
    const tg_op_desc *op = tg_op_lookup(names[i]);
    cr_assert_not_null(op, "%s", names[i]);
    tg_op_check_options opts = {.gradcheck = {.quiet = true}};
    cr_assert_eq(tg_op_check(op, opts), TG_OK, "%s: %s", names[i], tg_last_error_message());
  }
}

TG_TEST(conv, backward_keeps_only_the_inputs_and_gives_the_composed_gradients) {
  /* conv2d = w @ unfold(x) composed from tg ops: same values and gradients */
  tg_generator *gen = tg_generator_new(15);
  tg_tensor *x = randn(gen, TG_F64, TG_SHAPE(2, 3, 5, 4)),
            *w = randn(gen, TG_F64, TG_SHAPE(4, 3, 2, 2));
  tg_tensor *x2 = tg_detach(x), *w2 = tg_detach(w);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(tg_set_requires_grad(i ? x2 : x, true), TG_OK);
    cr_assert_eq(tg_set_requires_grad(i ? w2 : w, true), TG_OK);
  }
  tg_tensor *y = tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.padding = {1, 0}});
  const tg_fold_opts fo = {.kernel_size = {2, 2}, .padding = {1, 0}};
  tg_tensor *cols = tg_unfold(x2, &fo); /* [2, 12, 6 * 3] */
  tg_tensor *y2 = tg_reshape(
      tg_matmul(tg_reshape(w2, TG_SHAPE(4, 12)),
                tg_reshape(tg_permute(cols, 3, (const int[]){1, 0, 2}), TG_SHAPE(12, 36))),
      TG_SHAPE(4, 2, 6, 3));
  y2 = tg_permute(y2, 4, (const int[]){1, 0, 2, 3});
  tg_assert_close(y, y2, 1e-12, 1e-12);
  tg_tensor *g = randn(gen, TG_F64, TG_SHAPE(2, 4, 6, 3));
  cr_assert_eq(tg_backward(y, g), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(y2, g), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(x), tg_grad(x2), 1e-12, 1e-12);
  tg_assert_close(tg_grad(w), tg_grad(w2), 1e-12, 1e-12);
  tg_generator_free(gen);
}

TG_TEST(conv, chunks_of_images_agree_with_one_image_at_a_time) {
  /* The ops pack a few images' columns into one GEMM operand of about 4 MiB: here 144 rows
   * x 40 * 40 windows of F64 (1.8 MiB per image) make chunks of 2, so a batch of 5 ends in a
   * chunk of 1. Values, dx and dw against each image alone (a chunk of its own), with
   * groups and a strided dy. */
  tg_generator *gen = tg_generator_new(17);
  const int64_t n = 5;
  tg_tensor *x = randn(gen, TG_F64, TG_SHAPE(n, 16, 40, 40)),
            *w = randn(gen, TG_F64, TG_SHAPE(8, 8, 3, 3));
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(w, true), TG_OK);
  const tg_conv2d_opts opts = {.padding = {1, 1}, .groups = 2};
  tg_tensor *y = tg_conv2d(x, w, NULL, &opts);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_tensor *dy = tg_transpose(randn(gen, TG_F64, TG_SHAPE(n, 8, 40, 40)), 2, 3);
  cr_assert_eq(tg_backward(y, dy), TG_OK, "%s", tg_last_error_message());
  tg_tensor *dw_sum = tg_zeros(TG_SHAPE(8, 8, 3, 3), f64);
  for (int64_t b = 0; b < n; b++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *xb = tg_detach(tg_narrow(x, 0, b, 1)), *wb = tg_detach(w);
    cr_assert_eq(tg_set_requires_grad(xb, true), TG_OK);
    cr_assert_eq(tg_set_requires_grad(wb, true), TG_OK);
    tg_tensor *yb = tg_conv2d(xb, wb, NULL, &opts);
    tg_assert_close(tg_narrow(y, 0, b, 1), yb, 1e-12, 1e-12);
    cr_assert_eq(tg_backward(yb, tg_narrow(dy, 0, b, 1)), TG_OK, "%s", tg_last_error_message());
    tg_assert_close(tg_narrow(tg_grad(x), 0, b, 1), tg_grad(xb), 1e-12, 1e-12);
    cr_assert_eq(tg_add_(dw_sum, tg_grad(wb)), TG_OK);
    tg_scope_end(sc);
  }
  tg_assert_close(tg_grad(w), dw_sum, 1e-10, 1e-10);
  tg_generator_free(gen);
}

/* y, dx and dw of conv2d(x, w) against the composition w @ unfold(x), which moves its columns
 * window by window; NaN and infinities where the composition has them. */
static void expect_composed_conv(tg_tensor *x, tg_tensor *w, const tg_conv2d_opts *opts,
                                 tg_generator *gen) {
  const int64_t n = tg_size(x, 0), c_out = tg_size(w, 0), kh = tg_size(w, 2), kw = tg_size(w, 3);
  tg_tensor *xs[2] = {tg_detach(x), tg_detach(x)}, *ws[2] = {tg_detach(w), tg_detach(w)}, *ys[2];
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(tg_set_requires_grad(xs[i], true), TG_OK);
    cr_assert_eq(tg_set_requires_grad(ws[i], true), TG_OK);
  }
  ys[0] = tg_conv2d(xs[0], ws[0], NULL, opts);
  cr_assert_not_null(ys[0], "%s", tg_last_error_message());
  const tg_fold_opts fo = {.kernel_size = {kh, kw},
                           .stride = {opts->stride[0], opts->stride[1]},
                           .padding = {opts->padding[0], opts->padding[1]},
                           .dilation = {opts->dilation[0], opts->dilation[1]}};
  tg_tensor *cols = tg_unfold(xs[1], &fo); /* [n, c * kh * kw, oh * ow] */
  const int64_t oh = tg_size(ys[0], 2), ow = tg_size(ys[0], 3), depth = tg_size(cols, 1);
  tg_tensor *prod =
      tg_matmul(tg_reshape(ws[1], TG_SHAPE(c_out, depth)),
                tg_reshape(tg_permute(cols, 3, (const int[]){1, 0, 2}), TG_SHAPE(depth, -1)));
  ys[1] = tg_permute(tg_reshape(prod, TG_SHAPE(c_out, n, oh, ow)), 4, (const int[]){1, 0, 2, 3});
  cr_assert_not_null(ys[1], "%s", tg_last_error_message());
  tg_tensor *dy = tg_randn(tg_ndim(ys[0]), tg_sizes(ys[0]), f64, gen);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(tg_backward(ys[i], dy), TG_OK, "%s", tg_last_error_message());
  const tg_tensor *got[3] = {ys[0], tg_grad(xs[0]), tg_grad(ws[0])},
                  *want[3] = {ys[1], tg_grad(xs[1]), tg_grad(ws[1])};
  for (int k = 0; k < 3; k++) {
    double *v = host(want[k]);
    tg_test_expect_ieee(got[k], tg_numel(want[k]), v, 1e-12);
    free(v);
  }
}

TG_TEST(conv, wide_grids_agree_with_the_unfold_composition) {
  /* stride_w 1 and images wide enough: the columns run on past each row of windows, to the
   * padded width (ops/conv_internal.h), and those extra columns must add nothing: not to y,
   * not to dx, not to dw, not even 0 * inf. */
  tg_generator *gen = tg_generator_new(19);
  const struct {
    int64_t n, c_in, c_out, h, w, kh, kw;
    tg_conv2d_opts opts;
  } cases[] = {
      {3, 3, 4, 6, 24, 3, 3, {.stride = {2, 1}, .padding = {1, 1}, .dilation = {1, 2}}},
      {2, 2, 3, 5, 20, 2, 4, {.padding = {0, 2}}},
      {2, 2, 2, 4, 16, 3, 3, {.padding = {1, 1}}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *x = randn(gen, TG_F64, TG_SHAPE(cases[k].n, cases[k].c_in, cases[k].h, cases[k].w));
    tg_tensor *w =
        randn(gen, TG_F64, TG_SHAPE(cases[k].c_out, cases[k].c_in, cases[k].kh, cases[k].kw));
    expect_composed_conv(x, w, &cases[k].opts, gen);
    /* an infinity at a row's start and a NaN at another's end: the extra columns read both */
    tg_tensor *bad = tg_contiguous(x);
    double *v = host(bad);
    v[0] = INFINITY;
    v[2 * cases[k].w - 1] = NAN;
    tg_tensor *x_bad = tg_test_tensor_of(TG_F64, tg_ndim(bad), tg_sizes(bad), v);
    free(v);
    expect_composed_conv(x_bad, w, &cases[k].opts, gen);
    tg_scope_end(sc);
  }
  tg_generator_free(gen);
}

TG_TEST(conv, keeps_only_its_inputs_for_backward_never_the_columns) {
  /* the unfolded columns are 9x the input here; backward recomputes them */
  const tg_options f32 = {.dtype = TG_F32};
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 4, 8, 8), f32), *w = tg_zeros(TG_SHAPE(6, 4, 3, 3), f32);
  tg_tensor *b = tg_zeros(TG_SHAPE(6), f32);
  cr_assert_eq(tg_set_requires_grad(w, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(b, true), TG_OK);
  const tg_conv2d_opts pad = {.padding = {1, 1}};
  tg_tensor *y = tg_conv2d(x, w, b, &pad);
  /* only w needs a gradient: x is kept (dw reads it), w is not */
  cr_assert_eq(tg_graph_saved_bytes(1, (const tg_tensor *const[]){y}, 0, NULL), 2 * 4 * 8 * 8 * 4);
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  y = tg_conv2d(x, w, b, &pad);
  cr_assert_eq(tg_graph_saved_bytes(1, (const tg_tensor *const[]){y}, 0, NULL),
               (2 * 4 * 8 * 8 + 6 * 4 * 3 * 3) * 4);
}

/* ---- edges ---- */

TG_TEST(conv, edges_empty_batch_non_finite_values_and_meta) {
  /* an empty batch: empty outputs, zero weight gradients */
  tg_tensor *x = tg_zeros(TG_SHAPE(0, 2, 4, 4), f64), *w = tg_ones(TG_SHAPE(3, 2, 3, 3), f64);
  cr_assert_eq(tg_set_requires_grad(w, true), TG_OK);
  tg_tensor *y = tg_conv2d(x, w, NULL, NULL);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_assert_sizes(y, 0, 3, 2, 2);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_test_at(tg_sum(tg_abs(tg_grad(w))), 0), 0.0);
  tg_assert_sizes(tg_unfold(x, &(tg_fold_opts){.kernel_size = {3, 3}}), 0, 18, 4);
  /* inf and NaN reach only the outputs whose windows read them */
  const double v[9] = {1, 2, 3, 4, INFINITY, 6, 7, 8, NAN};
  tg_tensor *xi = tg_test_tensor_of(TG_F64, TG_SHAPE(1, 1, 3, 3), v);
  tg_tensor *yi = tg_conv2d(xi, tg_ones(TG_SHAPE(1, 1, 1, 2), f64), NULL, NULL);
  tg_test_expect_ieee(yi, 6, (const double[]){3, 5, 4 + INFINITY, INFINITY, 15, NAN}, 0);
  /* a -0 input gives +0, as PyTorch's GEMM-based convolution does (the sum starts at +0) */
  tg_tensor *z = tg_conv2d(tg_test_tensor_of(TG_F64, TG_SHAPE(1, 1, 1, 1), (const double[]){-0.0}),
                           tg_ones(TG_SHAPE(1, 1, 1, 1), f64), NULL, NULL);
  cr_assert(!signbit(tg_test_at(z, 0)));
  /* meta: sizes only */
  const tg_options meta = {.device = TG_DEVICE_META};
  tg_tensor *ym =
      tg_conv2d(tg_zeros(TG_SHAPE(2, 4, 9, 9), meta), tg_zeros(TG_SHAPE(8, 2, 3, 3), meta),
                tg_zeros(TG_SHAPE(8), meta), &(tg_conv2d_opts){.groups = 2, .stride = {2, 2}});
  cr_assert_not_null(ym, "%s", tg_last_error_message());
  tg_assert_sizes(ym, 2, 8, 4, 4);
}

/* ---- errors ---- */

TG_TEST(conv, refuses_bad_inputs_naming_them) {
  const tg_options f32 = {.dtype = TG_F32};
  tg_tensor *x = tg_zeros(TG_SHAPE(1, 4, 5, 5), f32), *w = tg_zeros(TG_SHAPE(6, 2, 3, 3), f32);
  const tg_conv2d_opts g2 = {.groups = 2};
  cr_assert_not_null(tg_conv2d(x, w, NULL, &g2));
  cr_assert_null(tg_conv2d(x, w, NULL, NULL)); /* channel mismatch */
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d", "x is [1, 4, 5, 5] with 4 channels", "expects 2");
  cr_assert_null(tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.groups = 4}));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d", "groups = 4 does not divide", "[6, 2, 3, 3]");
  cr_assert_null(tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.groups = 2, .fill = 4}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d", "fill 4 is not a tg_conv_padding_fill");
  cr_assert_null(tg_conv2d(
      x, w, NULL, &(tg_conv2d_opts){.groups = 2, .padding = {5, 0}, .fill = TG_CONV_FILL_REFLECT}));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d", "fill \"reflect\" pads dim 2 by 5 and 5",
                  "size above the padding");
  cr_assert_null(
      tg_conv2d(x, w, NULL,
                &(tg_conv2d_opts){.groups = 2, .padding = {0, 6}, .fill = TG_CONV_FILL_CIRCULAR}));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d", "fill \"circular\" pads dim 3 by 6 and 6",
                  "at least the padding");
  cr_assert_null(tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.groups = -1}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d", "groups = -1");
  cr_assert_null(tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.groups = 2, .stride = {1, -2}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d", "stride = -2 (w) is out of range [1, 2147483648)");
  cr_assert_null(tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.groups = 2, .dilation = {-1, 1}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d", "dilation = -1 (h)");
  cr_assert_null(tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.groups = 2, .padding = {0, -1}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d", "padding = -1 (w)");
  /* sizes past 2^31 would overflow the output-size arithmetic: refused before it */
  cr_assert_null(tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.groups = 2, .padding = {INT64_MAX, 0}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d",
                  "padding = 9223372036854775807 (h) is out of range");
  cr_assert_null(tg_conv2d(
      x, w, NULL,
      &(tg_conv2d_opts){.groups = 2, .padding_mode = TG_CONV_PADDING_SAME, .stride = {2, 1}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d", "\"same\" is not supported for strided");
  cr_assert_null(tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.groups = 2, .padding_mode = 7}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d", "padding_mode 7");
  cr_assert_null(tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.groups = 2, .dilation = {3, 1}}));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d", "padded input size 5 along dim 2",
                  "dilated kernel's 7");
  cr_assert_null(tg_conv2d(tg_zeros(TG_SHAPE(1, 4, 2, 5), f32), w, NULL, &g2));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d", "padded input size 2", "kernel's 3");
  cr_assert_null(tg_conv2d(x, w, tg_zeros(TG_SHAPE(5), f32), &g2));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d", "bias is [5]", "must be [6]");
  cr_assert_null(tg_conv2d(x, w, tg_zeros(TG_SHAPE(6), f64), &g2));
  tg_expect_error(TG_ERR_DTYPE, "tg_conv2d", "bias");
  cr_assert_null(tg_conv2d(x, tg_zeros(TG_SHAPE(6, 2, 3, 3), f64), NULL, &g2));
  tg_expect_error(TG_ERR_DTYPE, "tg_conv2d", "w");
  cr_assert_null(tg_conv2d(
      x, tg_zeros(TG_SHAPE(6, 2, 3, 3), (tg_options){.device = TG_DEVICE_META}), NULL, &g2));
  tg_expect_error(TG_ERR_DEVICE, "tg_conv2d", "w");
  cr_assert_null(tg_conv2d(tg_zeros(TG_SHAPE(1, 4, 5, 5), (tg_options){.dtype = TG_I64}),
                           tg_zeros(TG_SHAPE(6, 2, 3, 3), (tg_options){.dtype = TG_I64}), NULL,
                           &g2));
  tg_expect_error(TG_ERR_DTYPE, "tg_conv2d", "x");
  cr_assert_null(tg_conv2d(tg_zeros(TG_SHAPE(4, 5), f32), w, NULL, &g2));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d", "x must be 4-D", "[4, 5]");
  cr_assert_null(tg_conv2d(x, tg_zeros(TG_SHAPE(6, 2, 3), f32), NULL, &g2));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d", "w must be 4-D", "[6, 2, 3]");
  cr_assert_null(tg_conv2d(NULL, w, NULL, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d", "x");
  /* conv1d names itself */
  cr_assert_null(
      tg_conv1d(tg_zeros(TG_SHAPE(1, 3, 2), f32), tg_zeros(TG_SHAPE(2, 3, 3), f32), NULL, NULL));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv1d", "padded input size 2");
  /* conv_transpose2d */
  tg_tensor *xt = tg_zeros(TG_SHAPE(1, 4, 3, 3), f32), *wt = tg_zeros(TG_SHAPE(4, 1, 3, 3), f32);
  cr_assert_null(tg_conv_transpose2d(xt, tg_zeros(TG_SHAPE(3, 1, 3, 3), f32), NULL, NULL));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv_transpose2d", "w.sizes[0] must be C_in");
  cr_assert_null(tg_conv_transpose2d(xt, wt, NULL, &(tg_conv_transpose2d_opts){.groups = 3}));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv_transpose2d", "groups = 3 does not divide C_in = 4");
  cr_assert_null(
      tg_conv_transpose2d(xt, wt, NULL, &(tg_conv_transpose2d_opts){.output_padding = {1, 0}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv_transpose2d", "output_padding = 1 must be smaller");
  cr_assert_null(tg_conv_transpose2d(tg_zeros(TG_SHAPE(1, 4, 1, 1), f32), wt, NULL,
                                     &(tg_conv_transpose2d_opts){.padding = {2, 2}}));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv_transpose2d", "output size per channel would be -1 x -1");
  cr_assert_null(tg_conv_transpose2d(xt, wt, tg_zeros(TG_SHAPE(4), f32), NULL));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv_transpose2d", "bias is [4]", "must be [1]");
  /* unfold / fold */
  cr_assert_null(tg_unfold(x, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_unfold", "kernel_size = 0 (h)");
  cr_assert_null(tg_unfold(x, &(tg_fold_opts){.kernel_size = {6, 2}}));
  tg_expect_error(TG_ERR_SHAPE, "tg_unfold", "0 x 4 sliding blocks");
  cr_assert_null(
      tg_fold(tg_zeros(TG_SHAPE(1, 7, 9), f32), 4, 4, &(tg_fold_opts){.kernel_size = {2, 2}}));
  tg_expect_error(TG_ERR_SHAPE, "tg_fold", "[1, 7, 9]", "divisible by the kernel's 2 x 2 taps");
  cr_assert_null(
      tg_fold(tg_zeros(TG_SHAPE(1, 8, 8), f32), 4, 4, &(tg_fold_opts){.kernel_size = {2, 2}}));
  tg_expect_error(TG_ERR_SHAPE, "tg_fold", "3 x 3 = 9 sliding blocks");
  cr_assert_null(
      tg_fold(tg_zeros(TG_SHAPE(1, 8, 9), f32), 0, 4, &(tg_fold_opts){.kernel_size = {2, 2}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_fold", "output size = 0 (h)");
}

TG_TEST(conv, registered_ops_check_what_tg_apply_hands_them) {
  const tg_options f64o = f64;
  const tg_op_desc *conv = tg_op_lookup("conv2d");
  tg_tensor *x = tg_zeros(TG_SHAPE(1, 2, 4, 4), f64o), *w = tg_zeros(TG_SHAPE(2, 2, 3, 3), f64o);
  /* stride 0 (the front ends read 0 as the default 1; the op itself refuses it) */
  const int64_t ints[13] = {0, 1, 0, 0, 1, 1, 1, 4, 4, 2, 2, 3, 3};
  tg_tensor *out = NULL;
  cr_assert_neq(tg_apply_ex(conv, 2, (const tg_tensor *const[]){x, w}, 0, NULL, 13, ints, 1, &out),
                TG_OK);
  tg_expect_error(TG_ERR_ARGUMENT, "conv2d", "stride_h = 0 is out of range");
  cr_assert_neq(tg_apply_ex(conv, 2, (const tg_tensor *const[]){x, w}, 0, NULL, 3, ints, 1, &out),
                TG_OK);
  tg_expect_error(TG_ERR_ARGUMENT, "conv2d", "takes 13 integer parameters", "3 given");
  const int64_t good[13] = {1, 1, 0, 0, 1, 1, 1, 4, 5, 2, 2, 3, 3};
  cr_assert_neq(tg_apply_ex(conv, 2, (const tg_tensor *const[]){x, w}, 0, NULL, 13, good, 1, &out),
                TG_OK);
  tg_expect_error(TG_ERR_SHAPE, "conv2d", "x is [1, 2, 4, 4]", "image is 4 x 5");
  const tg_op_desc *fold = tg_op_lookup("fold");
  const int64_t fold_ints[13] = {1, 1, 0, 0, 1, 1, 2, 4, 4, 2, 2, 3, 3};
  cr_assert_neq(tg_apply_ex(fold, 1, (const tg_tensor *const[]){tg_zeros(TG_SHAPE(1, 9, 4), f64o)},
                            0, NULL, 13, fold_ints, 1, &out),
                TG_OK);
  tg_expect_error(TG_ERR_ARGUMENT, "fold", "groups = 2");
}

/* ---- allocation failures: every one of conv2d's allocations, forward and backward ---- */

static tg_status conv_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_arange(0, 2 * 2 * 4 * 3, 1, f64);
  tg_tensor *xr = x ? tg_reshape(tg_mul_scalar(x, 0.1), TG_SHAPE(2, 2, 4, 3)) : NULL;
  tg_tensor *leaf = xr ? tg_detach(xr) : NULL;
  tg_tensor *w = leaf ? tg_full(TG_SHAPE(2, 1, 2, 2), 0.5, f64) : NULL;
  tg_tensor *b = w ? tg_full(TG_SHAPE(2), -1, f64) : NULL;
  tg_status st = status_of(b);
  if (st == TG_OK) st = clean(tg_set_requires_grad(leaf, true));
  if (st == TG_OK) st = clean(tg_set_requires_grad(w, true));
  if (st == TG_OK) st = clean(tg_set_requires_grad(b, true));
  tg_tensor *y = st == TG_OK ? tg_conv2d(tg_transpose(leaf, 2, 3), w, b,
                                         &(tg_conv2d_opts){.groups = 2, .padding = {1, 0}})
                             : NULL;
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(leaf), out, n_out);
  if (st == TG_OK) st = append(tg_grad(w), out, n_out);
  if (st == TG_OK) st = append(tg_grad(b), out, n_out);
  tg_tensor *t =
      st == TG_OK ? tg_conv_transpose2d(y, w, NULL,
                                        &(tg_conv_transpose2d_opts){.groups = 2, .stride = {2, 1}})
                  : NULL;
  if (st == TG_OK) st = append(t, out, n_out);
  tg_tensor *f = st == TG_OK ? tg_fold(tg_unfold(leaf, &(tg_fold_opts){.kernel_size = {2, 2}}), 4,
                                       3, &(tg_fold_opts){.kernel_size = {2, 2}})
                             : NULL;
  if (st == TG_OK) st = append(f, out, n_out);
  return st;
}

TG_TEST(conv, allocation_failures) { sweep("conv family forward and backward", conv_step, NULL); }
