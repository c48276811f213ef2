/* max_pool2d, avg_pool2d, adaptive_avg_pool2d and pad on CUDA against the CPU: forward (values
 * and max pooling's indices exactly, NaN, ties and -0 included), backward (overlapping windows
 * meeting in the atomic scatter) and double backward, F32 and F64, on strided inputs. */
#include <math.h>

#include "cuda_testutil.h"

enum { N_OPS = 6 };

/* Op k of the list on x: max (values), max's indices, avg, adaptive, reflect pad, constant. */
static tg_tensor *apply(int k, const tg_tensor *x) {
  const int64_t k3[2] = {3, 3}, k2[2] = {2, 2}, out[2] = {3, 4};
  tg_tensor *v = NULL, *i = NULL;
  switch (k) {
  case 0:
  case 1:
    if (tg_max_pool2d_with_indices(
            x, k3, (tg_max_pool2d_options){.stride = {2, 1}, .padding = {1, 1}, .ceil_mode = true},
            &v, &i) != TG_OK)
      return NULL;
    return k == 0 ? v : i;
  case 2:
    return tg_avg_pool2d(
        x, k3,
        (tg_avg_pool2d_options){
            .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true, .exclude_padding = true});
  case 3:
    return tg_adaptive_avg_pool2d(x, out);
  case 4:
    return tg_pad(x, 4, (const int64_t[]){2, -1, 1, 3}, (tg_pad_options){.mode = TG_PAD_REFLECT});
  default:
    return tg_max_pool2d(tg_pad(x, 2, (const int64_t[]){1, 1}, (tg_pad_options){.value = -0.0}), k2,
                         (tg_max_pool2d_options){.stride = {1, 1}});
  }
}

/* x [2, 3, 5, 6] transposed in its last two dims, with ties, NaN and -0 among its values. */
static tg_twin input(tg_dtype dtype) {
  double v[180];
  for (int k = 0; k < 180; k++) v[k] = (double)((k * 37) % 11) - 5.0; /* ties */
  v[7] = NAN, v[50] = -0.0, v[51] = 0.0, v[90] = -INFINITY;
  tg_tensor *t = tg_from_data(TG_SHAPE(2, 3, 6, 5), v, TG_OPTS(.dtype = TG_F64));
  t = tg_transpose(tg_to_dtype(t, dtype), 2, 3);
  tg_twin tw = {t, tg_to_device(t, TG_CUDA0)};
  cr_assert(tw.cpu && tw.cuda, "%s", tg_last_error_message());
  return tw;
}

TG_CUDA_TEST(cuda_pool, forward_matches_the_cpu_exactly) {
  const tg_dtype dts[2] = {TG_F32, TG_F64};
  for (int d = 0; d < 2; d++)
    for (int k = 0; k < N_OPS; k++) {
      tg_scope sc = tg_scope_begin();
      tg_twin x = input(dts[d]);
      tg_tensor *cpu = apply(k, x.cpu), *gpu = apply(k, x.cuda);
      cr_assert(cpu && gpu, "op %d: %s", k, tg_last_error_message());
      cr_assert_eq(tg_tensor_device(gpu).type, TG_CUDA);
      tg_tensor *host = tg_to_device(gpu, TG_DEVICE_CPU);
      cr_assert_eq(tg_ndim(host), tg_ndim(cpu));
      for (int64_t e = 0; e < tg_numel(cpu); e++) {
        const double a = tg_test_at(cpu, e), b = tg_test_at(host, e);
        cr_assert((isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b)),
                  "%s op %d element %lld: cpu %g, cuda %g", tg_dtype_name(dts[d]), k, (long long)e,
                  a, b);
      }
      tg_scope_end(sc);
    }
}

/* d sum(f(x) * up) / dx, recorded (create_graph) for the double backward, which
 * differentiates it with respect to up (*up_out): the backward ops' own backwards. */
static void grads(int k, tg_tensor *x, tg_tensor **g1, tg_tensor **up_out) {
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  tg_tensor *y = apply(k, x);
  cr_assert(y, "%s", tg_last_error_message());
  tg_tensor *up = tg_tanh(tg_add_scalar(
      tg_mul_scalar(tg_arange(0, (double)tg_numel(y), 1, TG_OPTS(.dtype = TG_F64)), 0.37), -3));
  up = tg_to_device(tg_to_dtype(tg_reshape(up, tg_ndim(y), tg_sizes(y)), tg_tensor_dtype(y)),
                    tg_tensor_device(y));
  cr_assert_eq(tg_set_requires_grad(up, true), TG_OK, "%s", tg_last_error_message());
  *up_out = up;
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){y}, (const tg_tensor *const[]){up}, 1,
                                (const tg_tensor *const[]){x}, g1,
                                (tg_backward_options){.create_graph = true}, false),
               TG_OK, "%s", tg_last_error_message());
}

TG_CUDA_TEST(cuda_pool, backward_matches_the_cpu) {
  for (int k = 0; k < N_OPS; k++) {
    if (k == 1) continue; /* indices: not differentiable */
    tg_scope sc = tg_scope_begin();
    /* distinct finite values, so the maxima are the same elements on both devices */
    tg_tensor *base = tg_randn(TG_SHAPE(2, 3, 5, 6), TG_OPTS(.dtype = TG_F64), NULL);
    tg_tensor *xc = tg_detach(base), *xg = tg_to_device(base, TG_CUDA0);
    tg_tensor *c1, *g1, *uc, *ug;
    grads(k, xc, &c1, &uc);
    grads(k, xg, &g1, &ug);
    tg_assert_close(g1, c1, 1e-12, 1e-12);
    /* double backward: the gradient of sum(g1^2) with respect to up, through the backward ops */
    tg_tensor *dc = NULL, *dg = NULL;
    cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(tg_mul(c1, c1))}, NULL, 1,
                                  (const tg_tensor *const[]){uc}, &dc, (tg_backward_options){0},
                                  false),
                 TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(tg_mul(g1, g1))}, NULL, 1,
                                  (const tg_tensor *const[]){ug}, &dg, (tg_backward_options){0},
                                  false),
                 TG_OK, "%s", tg_last_error_message());
    tg_assert_close(dg, dc, 1e-12, 1e-12);
    tg_scope_end(sc);
  }
}

TG_CUDA_TEST(cuda_pool, empty_batch) {
  tg_tensor *x = tg_to_device(tg_zeros(TG_SHAPE(0, 3, 5, 6), TG_OPTS(.dtype = TG_F32)), TG_CUDA0);
  for (int k = 0; k < N_OPS; k++) {
    tg_tensor *y = apply(k, x);
    cr_assert(y, "op %d: %s", k, tg_last_error_message());
    cr_assert_eq(tg_numel(y), 0);
  }
}
