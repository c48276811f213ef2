/* Winograd's F(2x2, 3x3) for the CPU's F32 conv2d (src/ops/cpu/conv_winograd.c) and the
 * per-shape choice between it and oneDNN (conv_winograd_choice.c): each pass agrees with
 * float64 over odd and even sizes, images shorter than a tile and every padding it takes; an
 * infinity or NaN in what a pass reads declines it (the direct sum keeps inf where the
 * transforms would make NaN); what it does not take is never run on it; a shape's first call
 * settles it, later calls give the same bits, deterministic mode and TG_CONV_WINOGRAD=off never
 * run it; every allocation it makes can fail cleanly. Skips visibly without oneDNN (the
 * choice weighs Winograd against it). */
#define _GNU_SOURCE /* setenv */
#include <stdlib.h>

#include "testutil.h"

#include "alloc_sweep.h"
#include "ops/cpu/conv_onednn.h"
#include "ops/cpu/conv_winograd.h"

static const tg_options f32 = {.dtype = TG_F32}, f64 = {.dtype = TG_F64};

static void need_onednn(void) {
  if (!tg__cpu_conv_onednn_available())
    cr_skip_test("SKIP: oneDNN not loaded (needs libdnnl.so.2 and a tg built with libdnnl-dev's "
                 "headers; a sanitized build loads it only where TG_ONEDNN_LIBRARY names it)");
}

static void set_mode(const char *mode) {
  if (mode)
    cr_assert_eq(setenv("TG_CONV_WINOGRAD", mode, 1), 0);
  else
    unsetenv("TG_CONV_WINOGRAD");
  tg__cpu_conv_winograd_reset();
}

static void teardown(void) {
  set_mode(NULL);
  tg_set_deterministic(false);
}

TestSuite(conv_winograd, .fini = teardown);

/* The 13 ints of a stride-1 3x3 convolution of an h x w image with padding (ph, pw) before it
 * and as much after (as "same" would for 1). */
static void geometry(int64_t h, int64_t w, int64_t ph, int64_t pw, int64_t g[13]) {
  const int64_t v[13] = {1, 1, ph, pw, 1, 1, 1, h, w, h + 2 * ph - 2, w + 2 * pw - 2, 3, 3};
  memcpy(g, v, sizeof v);
}

/* |a - b| <= 1e-5 * (1 + max |b|) * sqrt(terms) over the tensor, b in F64. */
static void assert_close(const char *what, const tg_tensor *a, const tg_tensor *b, double terms) {
  double scale = 0, err = 0;
  cr_assert_eq(tg_item(tg_max(tg_abs(b)), &scale), TG_OK);
  cr_assert_eq(tg_item(tg_max(tg_abs(tg_sub(tg_to_dtype(a, TG_F64), b))), &err), TG_OK);
  cr_assert_leq(err, 1e-5 * (1 + scale) * sqrt(terms), "%s: max error %g (scale %g)", what, err,
                scale);
}

/* Each pass straight on Winograd against float64 autograd of conv2d. */
static void check_case(int64_t n, int64_t c_in, int64_t c_out, int64_t h, int64_t w, int64_t ph,
                       int64_t pw) {
  tg_scope sc = tg_scope_begin();
  tg_manual_seed((uint64_t)(n * 1000 + c_in * 100 + h * 10 + w + ph * 7 + pw * 3));
  int64_t g[13];
  geometry(h, w, ph, pw, g);
  const int64_t oh = g[9], ow = g[10];
  tg_tensor *x = tg_randn(TG_SHAPE(n, c_in, h, w), f32, NULL);
  tg_tensor *wt = tg_randn(TG_SHAPE(c_out, c_in, 3, 3), f32, NULL);
  tg_tensor *dy = tg_randn(TG_SHAPE(n, c_out, oh, ow), f32, NULL);
  /* float64 reference */
  tg_tensor *x64 = tg_to_dtype(x, TG_F64), *w64 = tg_to_dtype(wt, TG_F64);
  cr_assert_eq(tg_set_requires_grad(x64, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(w64, true), TG_OK);
  tg_tensor *y64 = tg_conv2d(x64, w64, NULL, &(tg_conv2d_opts){.padding = {ph, pw}});
  cr_assert_not_null(y64, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(y64, tg_to_dtype(dy, TG_F64)), TG_OK, "%s", tg_last_error_message());
  /* the three passes; outputs start as NaN so that an element not written shows */
  tg_tensor *y = tg_full(TG_SHAPE(n, c_out, oh, ow), NAN, f32);
  tg_tensor *dx = tg_full(TG_SHAPE(n, c_in, h, w), NAN, f32);
  tg_tensor *dw = tg_full(TG_SHAPE(c_out, c_in, 3, 3), NAN, f32);
  tg_tensor *fwd[3] = {x, wt, y}, *bwd_data[3] = {dx, wt, dy}, *bwd_w[3] = {x, dw, dy};
  cr_assert(tg__cpu_conv_winograd_applies(fwd, g));
  cr_assert_eq(tg__cpu_conv_winograd(0, fwd, g), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg__cpu_conv_winograd(1, bwd_data, g), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg__cpu_conv_winograd(2, bwd_w, g), TG_OK, "%s", tg_last_error_message());
  char what[128];
  snprintf(what, sizeof what, "%lldx%lldx%lld %lldx%lld pad %lld,%lld", (long long)n,
           (long long)c_in, (long long)c_out, (long long)h, (long long)w, (long long)ph,
           (long long)pw);
  assert_close(what, y, y64, (double)(c_in * 9));
  assert_close(what, dx, tg_grad(x64), (double)(c_out * 9));
  assert_close(what, dw, tg_grad(w64), (double)(n * oh * ow));
  tg_scope_end(sc);
}

TG_TEST(conv_winograd, each_pass_agrees_with_float64) {
  check_case(2, 3, 4, 7, 6, 1, 1); /* odd rows: a half tile at the bottom */
  check_case(1, 5, 2, 6, 9, 0, 0); /* no padding, odd columns */
  check_case(3, 2, 3, 5, 5, 2, 2); /* padding 2: the outputs past the image */
  check_case(1, 1, 1, 3, 3, 0, 0); /* one output */
  check_case(2, 4, 3, 3, 8, 1, 0); /* rows shorter than a tile, uneven padding */
  check_case(1, 3, 3, 2, 2, 1, 2); /* an image smaller than the window */
  check_case(4, 16, 24, 14, 14, 1, 1);
  check_case(2, 40, 8, 10, 11, 1, 1); /* more channels in than out */
}

/* Enough images that a pass runs in more than one group (4 MiB of transforms each). */
TG_TEST(conv_winograd, image_groups_add_up) { check_case(12, 64, 64, 28, 28, 1, 1); }

TG_TEST(conv_winograd, takes_only_what_it_computes) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_SHAPE(1, 2, 6, 6), f32), *w = tg_zeros(TG_SHAPE(2, 2, 3, 3), f32);
  tg_tensor *y = tg_zeros(TG_SHAPE(1, 2, 6, 6), f32);
  tg_tensor *t[3] = {x, w, y};
  int64_t g[13];
  geometry(6, 6, 1, 1, g);
  cr_assert(tg__cpu_conv_winograd_applies(t, g));
  const struct {
    int index;
    int64_t value;
  } other[] = {{0, 2}, {1, 2}, {2, 3}, {4, 2}, {5, 2}, {6, 2}, {11, 5}, {12, 1}};
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    int64_t h[13];
    memcpy(h, g, sizeof h);
    h[other[i].index] = other[i].value;
    cr_assert(!tg__cpu_conv_winograd_applies(t, h), "geometry int %d = %lld", other[i].index,
              (long long)other[i].value);
  }
  tg_tensor *x64 = tg_zeros(TG_SHAPE(1, 2, 6, 6), f64);
  cr_assert(!tg__cpu_conv_winograd_applies((tg_tensor *[]){x64, w, y}, g), "F64");
  int64_t wide[13];
  geometry(1, 5000, 1, 1, wide);
  cr_assert(!tg__cpu_conv_winograd_applies(t, wide), "rows past its row buffers");
  tg_scope_end(sc);
}

/* An infinity in an operand a pass reads: declined, nothing written, nothing recorded; through
 * conv2d with Winograd on, the direct result (inf, not the NaN the transforms would make). */
TG_TEST(conv_winograd, an_infinity_or_nan_declines_it) {
  need_onednn();
  tg_scope sc = tg_scope_begin();
  int64_t g[13];
  geometry(4, 4, 1, 1, g);
  tg_tensor *x = tg_full(TG_SHAPE(1, 1, 4, 4), 1.0, f32),
            *w = tg_full(TG_SHAPE(1, 1, 3, 3), 1.0, f32);
  tg_tensor *y = tg_full(TG_SHAPE(1, 1, 4, 4), 7.0, f32);
  const float bad[2] = {INFINITY, NAN};
  for (int b = 0; b < 2; b++) {
    ((float *)tg_data_ptr(x))[5] = bad[b];
    cr_assert_eq(tg__cpu_conv_winograd(0, (tg_tensor *[]){x, w, y}, g), TG_ERR_UNSUPPORTED);
    cr_assert_eq(tg_last_error(), TG_OK);
    double v = 0;
    cr_assert_eq(tg_get(y, (int64_t[]){0, 0, 0, 0}, &v), TG_OK);
    cr_assert_eq(v, 7.0, "declined, yet wrote");
  }
  ((float *)tg_data_ptr(x))[5] = INFINITY;
  set_mode("on");
  const int64_t runs = tg__cpu_conv_winograd_runs();
  tg_tensor *out = tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.padding = {1, 1}});
  cr_assert_not_null(out, "%s", tg_last_error_message());
  cr_assert_eq(tg__cpu_conv_winograd_runs(), runs);
  double corner = 0, far = 0;
  cr_assert_eq(tg_get(out, (int64_t[]){0, 0, 0, 0}, &corner), TG_OK);
  cr_assert_eq(tg_get(out, (int64_t[]){0, 0, 3, 3}, &far), TG_OK);
  cr_assert(isinf(corner) && corner > 0, "the window over the infinity: %g", corner);
  cr_assert_eq(far, 4.0, "a window away from it: %g", far); /* four ones inside the image */
  tg_scope_end(sc);
}

/* conv2d and both gradients of one shape through the public op: y, dx, dw. */
static void conv_once(const tg_tensor *x, const tg_tensor *w, tg_tensor **y, tg_tensor **dx,
                      tg_tensor **dw) {
  tg_tensor *xl = tg_detach(x), *wl = tg_detach(w);
  cr_assert_eq(tg_set_requires_grad(xl, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(wl, true), TG_OK);
  *y = tg_conv2d(xl, wl, NULL, &(tg_conv2d_opts){.padding = {1, 1}});
  cr_assert_not_null(*y, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(tg_sum(tg_mul(*y, *y)), NULL), TG_OK, "%s", tg_last_error_message());
  *dx = tg_grad(xl), *dw = tg_grad(wl);
}

static bool same_bits(const tg_tensor *a, const tg_tensor *b) {
  return memcmp(tg_data_ptr(a), tg_data_ptr(b), (size_t)tg_numel(a) * sizeof(float)) == 0;
}

/* A shape's first call settles it; from then on its results are the same to the bit (the first
 * call's included: it ends on the settled method). */
TG_TEST(conv_winograd, a_shape_gives_the_same_bits_from_its_first_call) {
  need_onednn();
  set_mode(NULL);
  tg_scope sc = tg_scope_begin();
  tg_manual_seed(9);
  tg_tensor *x = tg_randn(TG_SHAPE(2, 32, 12, 12), f32, NULL);
  tg_tensor *w = tg_randn(TG_SHAPE(32, 32, 3, 3), f32, NULL);
  tg_tensor *y0, *dx0, *dw0;
  conv_once(x, w, &y0, &dx0, &dw0);
  for (int call = 0; call < 4; call++) {
    tg_tensor *y, *dx, *dw;
    conv_once(x, w, &y, &dx, &dw);
    cr_assert(same_bits(y0, y) && same_bits(dx0, dx) && same_bits(dw0, dw), "call %d", call);
  }
  tg_scope_end(sc);
}

/* Where results must not depend on timing, and where the user said so: never run. */
static void never_runs(void) {
  tg_scope sc = tg_scope_begin();
  tg_manual_seed(4);
  tg_tensor *x = tg_randn(TG_SHAPE(2, 16, 10, 10), f32, NULL);
  tg_tensor *w = tg_randn(TG_SHAPE(16, 16, 3, 3), f32, NULL);
  const int64_t runs = tg__cpu_conv_winograd_runs();
  tg_tensor *y, *dx, *dw;
  conv_once(x, w, &y, &dx, &dw);
  cr_assert_eq(tg__cpu_conv_winograd_runs(), runs);
  tg_scope_end(sc);
}

TG_TEST(conv_winograd, deterministic_mode_never_runs_it) {
  need_onednn();
  set_mode("on");
  tg_set_deterministic(true);
  cr_assert(!strstr(tg_conv_engine(), "Winograd"), "%s", tg_conv_engine());
  never_runs();
}

TG_TEST(conv_winograd, tg_conv_winograd_off_never_runs_it) {
  need_onednn();
  set_mode("off");
  cr_assert(!strstr(tg_conv_engine(), "Winograd"), "%s", tg_conv_engine());
  never_runs();
}

TG_TEST(conv_winograd, tg_conv_engine_names_it) {
  need_onednn();
  set_mode(NULL);
  cr_assert(strncmp(tg_conv_engine(), "oneDNN 2.", 9) == 0 &&
                strstr(tg_conv_engine(), ", Winograd F(2x2,3x3) where faster"),
            "%s", tg_conv_engine());
}

/* TG_CONV_WINOGRAD=on runs every pass of a shape it takes on it. */
TG_TEST(conv_winograd, on_runs_every_pass) {
  need_onednn();
  set_mode("on");
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(1, 4, 6, 6), f32), *w = tg_ones(TG_SHAPE(4, 4, 3, 3), f32);
  const int64_t runs = tg__cpu_conv_winograd_runs();
  tg_tensor *y, *dx, *dw;
  conv_once(x, w, &y, &dx, &dw);
  cr_assert_eq(tg__cpu_conv_winograd_runs(), runs + 3, "forward, backward_data, backward_weights");
  double center = 0;
  cr_assert_eq(tg_get(y, (int64_t[]){0, 0, 2, 2}, &center), TG_OK);
  cr_assert_eq(center, 36.0); /* 4 channels x 9 taps of ones: exact in the transforms too */
  tg_scope_end(sc);
}

/* The sweep's step: conv2d of 3x3 windows and both gradients, Winograd on. */
static tg_status winograd_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *r = tg_arange(0, 2 * 4 * 6 * 6, 1, f32);
  tg_tensor *x = r ? tg_reshape(tg_tanh(tg_mul_scalar(r, 0.37)), TG_SHAPE(2, 4, 6, 6)) : NULL;
  tg_tensor *q = x ? tg_arange(0, 4 * 4 * 3 * 3, 1, f32) : NULL;
  tg_tensor *w =
      q ? tg_reshape(tg_tanh(tg_add_scalar(tg_mul_scalar(q, -0.21), 3)), TG_SHAPE(4, 4, 3, 3))
        : NULL;
  x = w ? tg_detach(x) : NULL;
  w = x ? tg_detach(w) : NULL;
  tg_status st = status_of(w);
  if (st == TG_OK) st = clean(tg_set_requires_grad(x, true));
  if (st == TG_OK) st = clean(tg_set_requires_grad(w, true));
  tg_tensor *y = st == TG_OK ? tg_conv2d(x, w, NULL, &(tg_conv2d_opts){.padding = {1, 1}}) : NULL;
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  if (st == TG_OK) st = append(tg_grad(w), out, n_out);
  return st;
}

TG_TEST(conv_winograd, allocation_failures) {
  need_onednn();
  set_mode("on");
  const int64_t runs = tg__cpu_conv_winograd_runs();
  sweep("conv2d on Winograd, forward and backward", winograd_step, NULL);
  cr_assert_gt(tg__cpu_conv_winograd_runs(), runs, "the sweep ran Winograd");
}
