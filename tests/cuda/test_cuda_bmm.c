/* Batched matmul on CUDA (issue 25) against the CPU: bmm.gemm's strided-batched cuBLAS call
 * over contiguous batches, transposed matrices, stride-0 broadcast batch dims, batch dims
 * that do not merge (a loop of calls), operands cuBLAS cannot read (copied first), k = 0 and
 * empty batches; forward and backward; tril / masked_fill on the device; an injected cuBLAS
 * failure. */
#include "cuda_testutil.h"

/* Both devices' [n] test values viewed as sizes / strides (NULL: contiguous). */
static tg_twin twin_of(int ndim, const int64_t *sizes, const int64_t *strides, int salt,
                       tg_dtype dtype) {
  int64_t span = 1, numel = 1;
  for (int d = 0; d < ndim; d++) {
    span += (sizes[d] - 1) * (strides ? strides[d] : 1);
    numel *= sizes[d];
  }
  if (!strides) span = numel;
  tg_twin base = tg_twin_values(span > 0 ? span : 1, dtype, salt, false);
  if (!strides) {
    tg_twin t = {tg_reshape(tg_narrow(base.cpu, 0, 0, span), ndim, sizes),
                 tg_reshape(tg_narrow(base.cuda, 0, 0, span), ndim, sizes)};
    cr_assert(t.cpu && t.cuda, "%s", tg_last_error_message());
    return t;
  }
  return tg_twin_view(base, ndim, sizes, strides, 0);
}

/* y = matmul(a, b) and the gradients of sum(y * w) on one device. */
static void run(tg_tensor *a, tg_tensor *b, tg_tensor **results) {
  tg_tensor *la = tg_detach(a), *lb = tg_detach(b);
  cr_assert_eq(tg_set_requires_grad(la, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(lb, true), TG_OK);
  tg_tensor *y = tg_matmul(la, lb);
  cr_assert(y, "%s", tg_last_error_message());
  tg_tensor *w = tg_tanh(
      tg_reshape(tg_arange(0, (double)tg_numel(y), 1,
                           TG_OPTS(.dtype = tg_tensor_dtype(y), .device = tg_tensor_device(y))),
                 tg_ndim(y), tg_sizes(y)));
  cr_assert_eq(tg_backward(tg_sum(tg_mul(y, w)), NULL), TG_OK, "%s", tg_last_error_message());
  results[0] = y;
  results[1] = tg_grad(la);
  results[2] = tg_grad(lb);
}

typedef struct bmm_case {
  const char *what;
  int na;
  int64_t a[4], as[4];
  int nb;
  int64_t b[4], bs[4];
} bmm_case;

static const bmm_case cases[] = {
    {"contiguous batch", 3, {4, 3, 5}, {0}, 3, {4, 5, 2}, {0}},
    {"GPT scores, k transposed", 4, {2, 3, 6, 4}, {0}, 4, {2, 3, 4, 6}, {72, 24, 1, 4}},
    {"broadcast batch (stride 0)", 4, {2, 1, 3, 4}, {0}, 3, {3, 4, 2}, {0}},
    {"batch dims that do not merge", 4, {2, 3, 2, 4}, {48, 8, 4, 1}, 4, {2, 3, 4, 2}, {0}},
    {"stepped (copied for cuBLAS)", 3, {2, 3, 4}, {24, 8, 2}, 3, {2, 4, 3}, {0}},
    {"2-D @ 3-D", 2, {3, 4}, {0}, 3, {2, 4, 5}, {0}},
    {"1-D @ 3-D", 1, {4}, {0}, 3, {2, 4, 3}, {0}},
    {"3-D @ 1-D", 3, {2, 3, 4}, {0}, 1, {4}, {0}},
    {"k = 0", 3, {2, 3, 0}, {0}, 3, {2, 0, 4}, {0}},
    {"empty batch", 3, {0, 3, 4}, {0}, 3, {0, 4, 2}, {0}},
};

TG_CUDA_TEST(cuda_bmm, matches_the_cpu_forward_and_backward) {
  const tg_dtype floating[] = {TG_F32, TG_F64};
  for (int d = 0; d < 2; d++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      tg_scope sc = tg_scope_begin();
      const bmm_case *k = &cases[c];
      tg_twin a = twin_of(k->na, k->a, k->as[0] ? k->as : NULL, 1, floating[d]);
      tg_twin b = twin_of(k->nb, k->b, k->bs[0] ? k->bs : NULL, 2, floating[d]);
      tg_tensor *cpu[3], *gpu[3];
      run(a.cpu, b.cpu, cpu);
      run(a.cuda, b.cuda, gpu);
      cr_log_info("%s %s", tg_dtype_name(floating[d]), k->what);
      for (int r = 0; r < 3; r++) {
        cr_assert_eq(tg_tensor_device(gpu[r]).type, TG_CUDA, "%s", k->what);
        tg_assert_close(gpu[r], cpu[r], TG_RTOL(floating[d]), TG_ATOL(floating[d]));
      }
      tg_scope_end(sc);
    }
}

/* bmm through the public 3-D entry, and the causal-mask ops on the device. */
TG_CUDA_TEST(cuda_bmm, bmm_tril_and_masked_fill) {
  tg_twin a = twin_of(3, (const int64_t[]){3, 4, 5}, NULL, 3, TG_F32);
  tg_twin b = twin_of(3, (const int64_t[]){3, 5, 4}, NULL, 4, TG_F32);
  tg_tensor *y = tg_bmm(a.cuda, b.cuda);
  tg_assert_close(y, tg_bmm(a.cpu, b.cpu), 1e-5, 1e-6);
  tg_tensor *tri = tg_tril(y, 0), *tri_cpu = tg_tril(tg_bmm(a.cpu, b.cpu), 0);
  tg_assert_close(tri, tri_cpu, 1e-5, 1e-6);
  tg_assert_close(tg_triu(y, 1), tg_triu(tg_bmm(a.cpu, b.cpu), 1), 1e-5, 1e-6);
  tg_tensor *mask = tg_triu(tg_ones(TG_SHAPE(4, 4), TG_OPTS(.device = TG_CUDA0)), 1);
  tg_tensor *mask_cpu = tg_triu(tg_ones(TG_SHAPE(4, 4), TG_OPTS_DEFAULT), 1);
  tg_assert_close(tg_masked_fill(y, mask, -1e9),
                  tg_masked_fill(tg_bmm(a.cpu, b.cpu), mask_cpu, -1e9), 1e-5, 1e-6);
}

#ifdef TG_CUDA_EMULATION
/* A failing cuBLAS call is TG_ERR_DEVICE naming the batched gemm, nothing leaked. */
TG_CUDA_TEST(cuda_bmm, cublas_failure_is_reported) {
  tg_twin a = twin_of(3, (const int64_t[]){2, 3, 4}, NULL, 5, TG_F64);
  tg_twin b = twin_of(3, (const int64_t[]){2, 4, 3}, NULL, 6, TG_F64);
  tg_emu_fail_blas(1);
  cr_assert_null(tg_bmm(a.cuda, b.cuda));
  tg_expect_error(TG_ERR_DEVICE, "cublasDgemmStridedBatched");
  tg_emu_fail_blas(0);
  cr_assert(tg_bmm(a.cuda, b.cuda), "%s", tg_last_error_message());
}
#endif

/* ---- allocation failures: every host allocation of a batched step on cuda:0 ---- */
#include "alloc_sweep.h"

static tg_status cuda_bmm_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *q =
      tg_arange(0, 24, 1, TG_OPTS(.dtype = TG_F64, .device = TG_CUDA0, .requires_grad = true));
  tg_tensor *k =
      tg_arange(0, 16, 1, TG_OPTS(.dtype = TG_F64, .device = TG_CUDA0, .requires_grad = true));
  tg_tensor *lq = q ? tg_reshape(q, TG_SHAPE(2, 3, 4)) : NULL;
  tg_tensor *lk = k ? tg_reshape(k, TG_SHAPE(2, 2, 4)) : NULL;
  tg_status st = status_of(lk);
  tg_tensor *s = st == TG_OK ? tg_matmul(lq, tg_transpose(lk, 1, 2)) : NULL;
  tg_tensor *y =
      s ? tg_masked_fill(s, tg_triu(tg_ones(TG_SHAPE(3, 2), TG_OPTS(.device = TG_CUDA0)), 1), 0)
        : NULL;
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(q), out, n_out);
  if (st == TG_OK) st = append(tg_grad(k), out, n_out);
  return st;
}

TG_CUDA_TEST(cuda_bmm, allocation_failures) {
  sweep("batched matmul step on cuda:0", cuda_bmm_step, NULL);
}
