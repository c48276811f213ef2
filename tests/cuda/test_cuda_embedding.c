/* tg_embedding on CUDA against the CPU: forward and backward (repeated indices meeting in
 * the atomic scatter-add) over weight layouts and index shapes, F32 and F64; errors. */
#include "cuda_testutil.h"

/* indices [rows, cols] of (7 k + 3) % bound on both devices, transposed when asked. */
static tg_twin twin_indices(int64_t rows, int64_t cols, int64_t bound, bool transposed) {
  int64_t v[64];
  cr_assert(rows * cols <= 64);
  for (int64_t k = 0; k < rows * cols; k++) v[k] = (7 * k + 3) % bound;
  tg_tensor *t = transposed ? tg_from_data(TG_SHAPE(cols, rows), v, TG_OPTS(.dtype = TG_I64))
                            : tg_from_data(TG_SHAPE(rows, cols), v, TG_OPTS(.dtype = TG_I64));
  if (transposed) t = tg_t(t);
  tg_twin tw = {t, tg_to_device(t, TG_CUDA0)};
  cr_assert(tw.cpu && tw.cuda, "%s", tg_last_error_message());
  return tw;
}

/* results[0] = emb(weight, indices), results[1] = d sum(out * upstream) / d weight. */
static void run(tg_tensor *weight, tg_tensor *indices, tg_tensor **results) {
  cr_assert_eq(tg_set_requires_grad(weight, true), TG_OK, "%s", tg_last_error_message());
  tg_tensor *out = tg_embedding(weight, indices);
  cr_assert(out, "%s", tg_last_error_message());
  int64_t n = tg_numel(out);
  double v[256];
  cr_assert(n <= 256);
  for (int64_t k = 0; k < n; k++) v[k] = tg_test_value(k, 77, false);
  tg_tensor *up = tg_from_data(tg_ndim(out), tg_sizes(out), v, TG_OPTS(.dtype = TG_F64));
  up = tg_to_device(tg_to_dtype(up, tg_tensor_dtype(out)), tg_tensor_device(out));
  cr_assert_eq(tg_backward(out, up), TG_OK, "%s", tg_last_error_message());
  results[0] = out;
  results[1] = tg_grad(weight);
  cr_assert_not_null(results[1]);
}

TG_CUDA_TEST(cuda_embedding, matches_the_cpu_forward_and_backward) {
  const tg_dtype floating[] = {TG_F32, TG_F64};
  for (int d = 0; d < 2; d++)
    for (int l = 0; l < TG_L_NUM_OUTPUT; l++)
      for (int ix = 0; ix < 3; ix++) {
        tg_scope sc = tg_scope_begin();
        tg_twin w = tg_twin_matrix((tg_layout)l, 5, 4, floating[d], 3, false);
        /* many repeats (16 lookups of 5 rows), transposed, and one 0-dim index */
        tg_twin idx = ix < 2 ? twin_indices(4, 4, 5, ix == 1) : twin_indices(1, 1, 5, false);
        if (ix == 2) idx = (tg_twin){tg_reshape(idx.cpu, 0, NULL), tg_reshape(idx.cuda, 0, NULL)};
        tg_tensor *cpu[2], *gpu[2];
        run(w.cpu, idx.cpu, cpu);
        run(w.cuda, idx.cuda, gpu);
        cr_log_info("%s weight %s, indices %d", tg_dtype_name(floating[d]),
                    tg_layout_name((tg_layout)l), ix);
        for (int r = 0; r < 2; r++) {
          cr_assert_eq(tg_tensor_device(gpu[r]).type, TG_CUDA);
          tg_assert_close(gpu[r], cpu[r], TG_RTOL(floating[d]), TG_ATOL(floating[d]));
        }
        tg_scope_end(sc);
      }
}

TG_CUDA_TEST(cuda_embedding, zero_size_indices) {
  tg_twin w = tg_twin_matrix(TG_L_CONTIGUOUS, 3, 2, TG_F64, 1, false);
  tg_tensor *none = tg_to_device(tg_empty(TG_SHAPE(0, 2), TG_OPTS(.dtype = TG_I64)), TG_CUDA0);
  tg_tensor *gpu[2];
  run(w.cuda, none, gpu);
  tg_assert_sizes(gpu[0], 0, 2, 2);
  tg_assert_close(gpu[1], tg_zeros(TG_SHAPE(3, 2), TG_OPTS(.dtype = TG_F64)), 0, 0);
}

TG_CUDA_TEST(cuda_embedding, errors) {
  tg_twin w = tg_twin_matrix(TG_L_CONTIGUOUS, 3, 2, TG_F32, 1, false);
  tg_twin idx = twin_indices(2, 2, 3, false);
  cr_assert_null(tg_embedding(w.cuda, idx.cpu));
  tg_expect_error(TG_ERR_DEVICE, "tg_embedding", "indices is on cpu");
  tg_tensor *bad = tg_to_device(
      tg_from_data(TG_SHAPE(2), (const int64_t[]){1, 3}, TG_OPTS(.dtype = TG_I64)), TG_CUDA0);
  cr_assert_null(tg_embedding(w.cuda, bad));
  tg_expect_error(TG_ERR_INDEX, "tg_embedding: indices[1] = 3", "[0, 3)");
}
