/* The CPU's own convolution (src/ops/cpu/conv_onednn.c, oneDNN where found): F32 conv2d,
 * conv_transpose2d and both gradients agree with tg's im2col + GEMM path over every option;
 * the kernels decline (TG_ERR_UNSUPPORTED, nothing recorded) what oneDNN does not take and
 * the generic path then runs it; every tg allocation it makes can fail cleanly. Skips
 * visibly where oneDNN is absent (Debian's libdnnl-dev: scripts/deps.sh installs it). */
#define _GNU_SOURCE /* setenv */
#include <stdlib.h>

#include "testutil.h"

#include "alloc_sweep.h"
#include "ops/backend.h"
#include "ops/cpu/conv_onednn.h"
#include "ops/cpu/conv_winograd.h"

/* oneDNN's own passes: Winograd's, which the choice may run instead at 3x3 windows, are
 * tests/ops/test_conv_winograd.c's. */
static void winograd_off(void) {
  cr_assert_eq(setenv("TG_CONV_WINOGRAD", "off", 1), 0);
  tg__cpu_conv_winograd_reset();
}

TestSuite(conv_onednn, .init = winograd_off);

static const tg_options f32 = {.dtype = TG_F32};

static void need_onednn(void) {
  if (!tg__cpu_conv_onednn_available())
    cr_skip_test("SKIP: oneDNN not loaded (needs libdnnl.so.2 and a tg built with libdnnl-dev's "
                 "headers; a sanitized build loads it only where TG_ONEDNN_LIBRARY names it)");
}

typedef struct conv_case {
  int64_t n, c_in, c_out, h, w, kh, kw;
  tg_conv2d_opts opts;
} conv_case;

/* y, dx, dw and db of sum(y * dy) for one case, on the engine in use. */
typedef struct results {
  tg_tensor *y, *dx, *dw, *db;
} results;

static results run_case(const conv_case *k, tg_tensor *x, tg_tensor *w, tg_tensor *b,
                        tg_tensor *dy_seed) {
  tg_tensor *xl = tg_detach(x), *wl = tg_detach(w), *bl = tg_detach(b);
  cr_assert_eq(tg_set_requires_grad(xl, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(wl, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(bl, true), TG_OK);
  tg_tensor *y = tg_conv2d(xl, wl, bl, &k->opts);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_tensor *dy = tg_narrow(tg_flatten(dy_seed), 0, 0, tg_numel(y));
  cr_assert_eq(tg_backward(tg_sum(tg_mul(y, tg_reshape(dy, tg_ndim(y), tg_sizes(y)))), NULL), TG_OK,
               "%s", tg_last_error_message());
  return (results){tg_detach(y), tg_grad(xl), tg_grad(wl), tg_grad(bl)};
}

/* |a - b| <= tol * (1 + max |b|), elementwise over the tensor. */
static void assert_close(const char *what, int i, const tg_tensor *a, const tg_tensor *b) {
  cr_assert(a && b && tg_ndim(a) == tg_ndim(b) && tg_numel(a) == tg_numel(b),
            "case %d %s: sizes differ", i, what);
  double scale = 0, err = 0;
  cr_assert_eq(tg_item(tg_max(tg_abs(b)), &scale), TG_OK);
  cr_assert_eq(tg_item(tg_max(tg_abs(tg_sub(a, b))), &err), TG_OK);
  cr_assert_leq(err, 2e-5 * (1 + scale), "case %d %s: max error %g (scale %g)", i, what, err,
                scale);
}

TG_TEST(conv_onednn, agrees_with_im2col_over_every_option) {
  need_onednn();
  const conv_case cases[] = {
      {2, 3, 4, 7, 6, 3, 3, {.padding = {1, 1}}},
      {1, 8, 8, 9, 9, 3, 3, {.stride = {2, 2}, .padding = {1, 1}}},
      {2, 4, 6, 8, 7, 3, 2, {.dilation = {2, 1}, .padding = {2, 0}}},
      {3, 4, 4, 6, 6, 3, 3, {.groups = 2, .padding = {1, 1}}},
      {2, 6, 6, 5, 5, 3, 3, {.groups = 6, .padding = {1, 1}}}, /* depthwise */
      {2, 16, 8, 5, 5, 1, 1, {.groups = 1}},                   /* 1x1 */
      {1, 3, 5, 10, 8, 5, 3, {.stride = {2, 1}, .padding = {2, 1}}},
      {2, 4, 4, 7, 7, 3, 3, {.padding_mode = TG_CONV_PADDING_SAME}},
      {2, 4, 4, 6, 6, 4, 4, {.padding_mode = TG_CONV_PADDING_SAME}}, /* uneven "same" split */
      {1, 32, 16, 14, 14, 3, 3, {.padding = {1, 1}}},
      {5, 4, 6, 6, 6, 3, 3, {.padding = {1, 1}}}, /* 5 images in 3 parts on 3 threads */
  };
  /* One thread: one oneDNN call; more: the batch split over tg's pool (conv_onednn.c), the
   * weight gradient summed over the parts. Every case on 1, 2 and 3 threads. */
  const int n_cases = (int)(sizeof cases / sizeof cases[0]), thread_counts[] = {1, 2, 3};
  tg_generator *gen = tg_generator_new(7);
  for (int i = 0; i < 3 * n_cases; i++) {
    tg_set_num_threads(thread_counts[i / n_cases]);
    tg_scope sc = tg_scope_begin();
    const conv_case *k = &cases[i % n_cases];
    const int64_t groups = k->opts.groups ? k->opts.groups : 1;
    tg_tensor *x = tg_randn(TG_SHAPE(k->n, k->c_in, k->h, k->w), f32, gen);
    tg_tensor *w = tg_randn(TG_SHAPE(k->c_out, k->c_in / groups, k->kh, k->kw), f32, gen);
    tg_tensor *b = tg_randn(TG_SHAPE(k->c_out), f32, gen);
    tg_tensor *dy = tg_randn(TG_SHAPE(k->n * k->c_out * k->h * k->w), f32, gen);
    const int64_t runs_before = tg__cpu_conv_onednn_runs();
    const results own = run_case(k, x, w, b, dy);
    cr_assert_eq(tg__cpu_conv_onednn_runs() - runs_before, 3,
                 "case %d: oneDNN ran %lld of the forward, dx and dw", i,
                 (long long)(tg__cpu_conv_onednn_runs() - runs_before));
    tg__cpu_conv_onednn_enable(false);
    const results generic = run_case(k, x, w, b, dy);
    tg__cpu_conv_onednn_enable(true);
    assert_close("y", i, own.y, generic.y);
    assert_close("dx", i, own.dx, generic.dx);
    assert_close("dw", i, own.dw, generic.dw);
    assert_close("db", i, own.db, generic.db);
    /* the transposed convolution (conv2d's adjoint in x: backward_data) as its own op */
    const tg_conv_transpose2d_opts topts = {
        .groups = groups,
        .stride = {k->opts.stride[0] ? k->opts.stride[0] : 1,
                   k->opts.stride[1] ? k->opts.stride[1] : 1},
        .dilation = {k->opts.dilation[0] ? k->opts.dilation[0] : 1,
                     k->opts.dilation[1] ? k->opts.dilation[1] : 1}};
    const int64_t runs_mid = tg__cpu_conv_onednn_runs();
    tg_tensor *t_own = tg_conv_transpose2d(own.y, w, NULL, &topts);
    cr_assert_eq(tg__cpu_conv_onednn_runs() - runs_mid, 1, "case %d: the transposed conv", i);
    tg__cpu_conv_onednn_enable(false);
    tg_tensor *t_generic = tg_conv_transpose2d(own.y, w, NULL, &topts);
    tg__cpu_conv_onednn_enable(true);
    cr_assert(t_own && t_generic, "case %d: %s", i, tg_last_error_message());
    assert_close("conv_transpose2d", i, t_own, t_generic);
    tg_scope_end(sc);
  }
  tg_set_num_threads(0);
  tg_generator_free(gen);
}

/* Calls a kernel by name with x, w, y and the geometry ints. */
static tg_status call_kernel(const char *name, tg_tensor *x, tg_tensor *w, tg_tensor *y,
                             const int64_t *ints) {
  tg_kernel_fn fn = tg__fast_kernel(name, TG_DEVICE_CPU);
  cr_assert_not_null(fn, "the CPU has no kernel %s", name);
  tg_tensor *g = tg_from_data(1, (const int64_t[]){13}, ints, (tg_options){.dtype = TG_I64});
  return fn(4, (tg_tensor *const[]){x, w, y, g});
}

TG_TEST(conv_onednn, declines_what_it_does_not_take_and_the_generic_path_runs_it) {
  need_onednn();
  /* stride 1, padding 1, 3x3 over a 5x5 image: 13 ints in conv_internal.h's order */
  const int64_t plain[13] = {1, 1, 1, 1, 1, 1, 1, 5, 5, 5, 5, 3, 3};
  tg_tensor *x = tg_ones(TG_SHAPE(1, 2, 5, 5), f32), *w = tg_ones(TG_SHAPE(3, 2, 3, 3), f32);
  tg_tensor *y = tg_zeros(TG_SHAPE(1, 3, 5, 5), f32);
  cr_assert_eq(call_kernel("conv2d.forward", x, w, y, plain), TG_OK, "%s", tg_last_error_message());
  double centre;
  cr_assert_eq(
      tg_item(tg_select(tg_select(tg_select(tg_select(y, 0, 0), 0, 0), 0, 2), 0, 2), &centre),
      TG_OK);
  cr_assert_eq(centre, 18.0, "a window of 2 channels x 9 ones sums to 18, got %g", centre);

  const tg_options f64 = {.dtype = TG_F64};
  tg_tensor *x64 = tg_ones(TG_SHAPE(1, 2, 5, 5), f64), *w64 = tg_ones(TG_SHAPE(3, 2, 3, 3), f64),
            *y64 = tg_zeros(TG_SHAPE(1, 3, 5, 5), f64);
  struct {
    const char *why;
    tg_tensor *x, *w, *y;
    int64_t ints[13];
  } declined[] = {
      {"F64", x64, w64, y64, {1, 1, 1, 1, 1, 1, 1, 5, 5, 5, 5, 3, 3}},
      {"non-contiguous x", tg_transpose(x, 2, 3), w, y, {1, 1, 1, 1, 1, 1, 1, 5, 5, 5, 5, 3, 3}},
      /* 2x2 windows at stride 2 over 5 rows stop at row 4: a negative trailing padding */
      {"windows short of the image's end",
       x,
       tg_ones(TG_SHAPE(3, 2, 2, 2), f32),
       tg_zeros(TG_SHAPE(1, 3, 2, 2), f32),
       {2, 2, 0, 0, 1, 1, 1, 5, 5, 2, 2, 2, 2}},
      {"an empty batch",
       tg_zeros(TG_SHAPE(0, 2, 5, 5), f32),
       w,
       tg_zeros(TG_SHAPE(0, 3, 5, 5), f32),
       {1, 1, 1, 1, 1, 1, 1, 5, 5, 5, 5, 3, 3}},
  };
  const char *const kernels[] = {"conv2d.forward", "conv2d.backward_data",
                                 "conv2d.backward_weights"};
  for (size_t i = 0; i < sizeof declined / sizeof declined[0]; i++)
    for (int k = 0; k < 3; k++) {
      cr_assert_eq(
          call_kernel(kernels[k], declined[i].x, declined[i].w, declined[i].y, declined[i].ints),
          TG_ERR_UNSUPPORTED, "%s: %s was not declined", kernels[k], declined[i].why);
      cr_assert_eq(tg_last_error(), TG_OK, "%s: declining %s recorded an error: %s", kernels[k],
                   declined[i].why, tg_last_error_message());
    }
  /* ... and the op runs each on its generic path: the short windows' conv, for one */
  tg_tensor *short_windows =
      tg_conv2d(x, tg_ones(TG_SHAPE(3, 2, 2, 2), f32), NULL, &(tg_conv2d_opts){.stride = {2, 2}});
  cr_assert_not_null(short_windows, "%s", tg_last_error_message());
  cr_assert_eq(tg_item(tg_sum(short_windows), &centre), TG_OK);
  cr_assert_eq(centre, 3 * 4 * 8.0, "every output is 2 channels x 4 ones: %g", centre);
  /* operands that do not fit the geometry are an error naming them, never a read past them */
  tg_tensor *short_x = tg_ones(TG_SHAPE(1, 2, 4, 5), f32),
            *big_y = tg_zeros(TG_SHAPE(2, 3, 5, 5), f32);
  for (int k = 0; k < 3; k++) {
    cr_assert_eq(call_kernel(kernels[k], short_x, w, y, plain), TG_ERR_SHAPE, "%s", kernels[k]);
    cr_assert(strstr(tg_last_error_message(), "do not fit the geometry"), "%s",
              tg_last_error_message());
    tg_clear_error();
    cr_assert_eq(call_kernel(kernels[k], x, w, big_y, plain), TG_ERR_SHAPE, "%s", kernels[k]);
    tg_clear_error();
    cr_assert_eq(call_kernel(kernels[k], x, tg_ones(TG_SHAPE(3, 1, 3, 3), f32), y, plain),
                 TG_ERR_SHAPE, "%s: w's channels against groups 1", kernels[k]);
    tg_clear_error();
  }
  /* a wrong number of tensors is an error, as for any kernel */
  tg_kernel_fn fn = tg__fast_kernel("conv2d.forward", TG_DEVICE_CPU);
  cr_assert_eq(fn(3, (tg_tensor *const[]){x, w, y}), TG_ERR_ARGUMENT);
  tg_clear_error();
}

TG_TEST(conv_onednn, names_itself_and_can_be_switched_off) {
  need_onednn();
  cr_assert(strncmp(tg_conv_engine(), "oneDNN 2.", 9) == 0, "tg_conv_engine() = %s",
            tg_conv_engine());
  tg__cpu_conv_onednn_enable(false);
  cr_assert_str_eq(tg_conv_engine(), "im2col + GEMM");
  tg__cpu_conv_onednn_enable(true);
}

/* The sweep's step: an F32 conv2d with bias, its three gradients and a transposed conv. */
static tg_status onednn_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *r = tg_arange(0, 2 * 4 * 6 * 6, 1, f32);
  tg_tensor *x = r ? tg_reshape(tg_tanh(tg_mul_scalar(r, 0.37)), TG_SHAPE(2, 4, 6, 6)) : NULL;
  tg_tensor *q = x ? tg_arange(0, 4 * 2 * 3 * 3, 1, f32) : NULL;
  tg_tensor *w =
      q ? tg_reshape(tg_tanh(tg_add_scalar(tg_mul_scalar(q, -0.21), 3)), TG_SHAPE(4, 2, 3, 3))
        : NULL;
  tg_tensor *b = w ? tg_full(TG_SHAPE(4), 0.25, f32) : NULL;
  x = b ? tg_detach(x) : NULL;
  w = x ? tg_detach(w) : NULL;
  tg_status st = status_of(w);
  if (st == TG_OK) st = clean(tg_set_requires_grad(x, true));
  if (st == TG_OK) st = clean(tg_set_requires_grad(w, true));
  if (st == TG_OK) st = clean(tg_set_requires_grad(b, true));
  tg_tensor *y =
      st == TG_OK ? tg_conv2d(x, w, b, &(tg_conv2d_opts){.groups = 2, .padding = {1, 1}}) : NULL;
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  if (st == TG_OK) st = append(tg_grad(w), out, n_out);
  if (st == TG_OK) st = append(tg_grad(b), out, n_out);
  return st;
}

TG_TEST(conv_onednn, allocation_failures) {
  need_onednn();
  sweep("conv2d on oneDNN, forward and backward", onednn_step, NULL);
}
