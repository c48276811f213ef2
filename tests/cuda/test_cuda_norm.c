/* The normalization family on CUDA against the CPU (include/tg/norm.h): batch_norm (train,
 * with running statistics, and eval), layer_norm and group_norm forward and backward through
 * normalize_groups' CUDA kernels (src/ops/cuda/norm.cu), F32 and F64; var and std; and
 * dropout's mask, the same on both devices for a seed. */
#include "cuda_testutil.h"

#include "tg/norm.h"

static tg_tensor *on(const tg_tensor *t, bool cuda) {
  return cuda ? tg_to_device(t, TG_CUDA0) : tg_clone(t);
}

/* results: y, dx, dweight, dbias (and for batch_norm the running stats) on one device. */
static int run(int which, tg_dtype dt, bool cuda, tg_tensor **results) {
  tg_generator *gen = tg_generator_new(11);
  const int64_t xs[3][4] = {{4, 3, 2, 5}, {3, 4, 6, 1}, {2, 6, 3, 2}};
  const int64_t c = which == 1 ? 6 : xs[which][1];
  tg_tensor *x =
      on(tg_to_dtype(tg_randn(4, xs[which], (tg_options){.dtype = TG_F64}, gen), dt), cuda);
  tg_tensor *w = on(tg_to_dtype(tg_randn(1, &c, (tg_options){.dtype = TG_F64}, gen), dt), cuda);
  tg_tensor *b = on(tg_to_dtype(tg_randn(1, &c, (tg_options){.dtype = TG_F64}, gen), dt), cuda);
  tg_tensor *up =
      on(tg_to_dtype(tg_randn(4, xs[which], (tg_options){.dtype = TG_F64}, gen), dt), cuda);
  tg_tensor *rm = on(tg_zeros(1, &c, (tg_options){.dtype = dt}), cuda);
  tg_tensor *rv = on(tg_ones(1, &c, (tg_options){.dtype = dt}), cuda);
  tg_generator_free(gen);
  cr_assert(x && w && b && up && rm && rv, "%s", tg_last_error_message());
  tg_set_requires_grad(x, true), tg_set_requires_grad(w, true), tg_set_requires_grad(b, true);
  tg_tensor *y =
      which == 0 ? tg_batch_norm(x, rm, rv, w, b, (tg_batch_norm_options){.training = true})
      : which == 1
          ? tg_layer_norm(x, 2, (const int64_t[]){6, 1}, tg_reshape(w, 2, (const int64_t[]){6, 1}),
                          tg_reshape(b, 2, (const int64_t[]){6, 1}), (tg_layer_norm_options){0})
          : tg_group_norm(x, 3, w, b, (tg_group_norm_options){0});
  cr_assert_not_null(y, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(y, up), TG_OK, "%s", tg_last_error_message());
  results[0] = y, results[1] = tg_grad(x), results[2] = tg_grad(w), results[3] = tg_grad(b);
  results[4] = rm, results[5] = rv;
  return which == 0 ? 6 : 4;
}

TG_CUDA_TEST(cuda_norm, batch_layer_group_norm_match_the_cpu_forward_and_backward) {
  const tg_dtype floating[] = {TG_F32, TG_F64};
  for (int d = 0; d < 2; d++)
    for (int which = 0; which < 3; which++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *cpu[6], *gpu[6];
      const int n = run(which, floating[d], false, cpu);
      run(which, floating[d], true, gpu);
      for (int r = 0; r < n; r++) {
        cr_assert_eq(tg_tensor_device(gpu[r]).type, TG_CUDA, "%d %d", which, r);
        tg_assert_close(gpu[r], cpu[r], TG_RTOL(floating[d]) * 10, TG_ATOL(floating[d]) * 10);
      }
      tg_scope_end(sc);
    }
}

TG_CUDA_TEST(cuda_norm, eval_var_std_match_the_cpu) {
  tg_generator *gen = tg_generator_new(12);
  tg_tensor *x = tg_randn(TG_SHAPE(3, 2, 4), (tg_options){.dtype = TG_F64}, gen);
  tg_tensor *rm =
      tg_from_data(TG_SHAPE(2), (const double[]){0.5, -1}, (tg_options){.dtype = TG_F64});
  tg_tensor *rv =
      tg_from_data(TG_SHAPE(2), (const double[]){2, 0.5}, (tg_options){.dtype = TG_F64});
  tg_tensor *gx = tg_to_device(x, TG_CUDA0);
  tg_tensor *y = tg_batch_norm(x, rm, rv, NULL, NULL, (tg_batch_norm_options){0});
  tg_tensor *gy = tg_batch_norm(gx, tg_to_device(rm, TG_CUDA0), tg_to_device(rv, TG_CUDA0), NULL,
                                NULL, (tg_batch_norm_options){0});
  cr_assert_not_null(gy, "%s", tg_last_error_message());
  tg_assert_close(gy, y, 1e-12, 1e-12);
  tg_assert_close(tg_var(gx, 2, (const int[]){0, 2}, 1, true),
                  tg_var(x, 2, (const int[]){0, 2}, 1, true), 1e-12, 1e-12);
  tg_assert_close(tg_std(gx, 0, NULL, 0, false), tg_std(x, 0, NULL, 0, false), 1e-12, 1e-12);
  tg_generator_free(gen);
}

TG_CUDA_TEST(cuda_norm, dropout_draws_the_same_mask_on_both_devices) {
  tg_tensor *x = tg_ones(TG_SHAPE(7, 9), (tg_options){.dtype = TG_F32});
  tg_generator *a = tg_generator_new(5), *b = tg_generator_new(5);
  tg_tensor *y = tg_dropout(x, 0.25, true, a);
  tg_tensor *gy = tg_dropout(tg_to_device(x, TG_CUDA0), 0.25, true, b);
  cr_assert_not_null(gy, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_device(gy).type, TG_CUDA);
  tg_assert_close(gy, y, 0, 0);
  tg_generator_free(a);
  tg_generator_free(b);
}

/* Groups and channels longer than one piece of the CUDA kernels' two-launch sums (2048). */
static void large_case(int which, bool cuda, tg_tensor **r) {
  tg_generator *gen = tg_generator_new(13);
  const int64_t xs[3][3] = {{3, 2, 4500}, {2, 1, 5000}, {2, 4, 4100}};
  const int64_t c = which == 1 ? 5000 : xs[which][1];
  tg_tensor *x = on(tg_randn(3, xs[which], (tg_options){.dtype = TG_F64}, gen), cuda);
  tg_tensor *w = on(tg_randn(1, &c, (tg_options){.dtype = TG_F64}, gen), cuda);
  tg_tensor *up = on(tg_randn(3, xs[which], (tg_options){.dtype = TG_F64}, gen), cuda);
  tg_generator_free(gen);
  tg_set_requires_grad(x, true), tg_set_requires_grad(w, true);
  tg_tensor *y = which == 0
                     ? tg_batch_norm(x, NULL, NULL, w, w, (tg_batch_norm_options){.training = true})
                 : which == 1 ? tg_layer_norm(x, 1, &c, w, w, (tg_layer_norm_options){0})
                              : tg_group_norm(x, 2, w, w, (tg_group_norm_options){0});
  cr_assert_not_null(y, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(y, up), TG_OK, "%s", tg_last_error_message());
  r[0] = y, r[1] = tg_grad(x), r[2] = tg_grad(w);
}

TG_CUDA_TEST(cuda_norm, groups_and_channels_longer_than_a_piece) {
  for (int which = 0; which < 3; which++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *cpu[3], *gpu[3];
    large_case(which, false, cpu);
    large_case(which, true, gpu);
    for (int r = 0; r < 3; r++) tg_assert_close(gpu[r], cpu[r], 1e-10, 1e-10);
    tg_scope_end(sc);
  }
}
