/* The indexing ops of tg/index.h on CUDA against the CPU: gather, scatter_add, index_select
 * and index_add forward and backward over x's layouts, with repeated indices meeting in the
 * atomic adds; topk with ties and NaN (the same order on both devices: one shared selection);
 * argmax and one_hot; an index out of range refused before any kernel runs. */
#include <math.h>

#include "cuda_testutil.h"

#include "tg/index.h"

/* indices of sizes (7 k + 3) % bound on both devices, transposed when asked (2-D). */
static tg_twin twin_indices(int ndim, const int64_t *sizes, int64_t bound, bool transposed) {
  int64_t v[256];
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= sizes[d];
  cr_assert(n <= 256);
  for (int64_t k = 0; k < n; k++) v[k] = (7 * k + 3) % bound;
  tg_tensor *t;
  if (transposed) {
    t = tg_from_data(TG_SHAPE(sizes[1], sizes[0]), v, TG_OPTS(.dtype = TG_I64));
    t = tg_t(t);
  } else {
    t = tg_from_data(ndim, sizes, v, TG_OPTS(.dtype = TG_I64));
  }
  tg_twin tw = {t, tg_to_device(t, TG_CUDA0)};
  cr_assert(tw.cpu && tw.cuda, "%s", tg_last_error_message());
  return tw;
}

/* An upstream gradient of test values shaped like out. */
static tg_tensor *upstream(const tg_tensor *out) {
  const int64_t n = tg_numel(out);
  double v[512];
  cr_assert(n <= 512);
  for (int64_t k = 0; k < n; k++) v[k] = tg_test_value(k, 77, false);
  tg_tensor *up = tg_from_data(tg_ndim(out), tg_sizes(out), v, TG_OPTS(.dtype = TG_F64));
  return tg_to_device(tg_to_dtype(up, tg_tensor_dtype(out)), tg_tensor_device(out));
}

typedef enum { GATHER, SCATTER_ADD, INDEX_SELECT, INDEX_ADD, TOPK } which_op;

/* out = op(x, ...), then backward: results[0] the output, [1] x's gradient, [2] src's. */
static void run(which_op op, tg_tensor *x, tg_tensor *index, tg_tensor *src, int dim,
                tg_tensor **results) {
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK, "%s", tg_last_error_message());
  if (src) cr_assert_eq(tg_set_requires_grad(src, true), TG_OK, "%s", tg_last_error_message());
  tg_tensor *out = NULL, *idx = NULL;
  switch (op) {
  case GATHER:
    out = tg_gather(x, dim, index);
    break;
  case SCATTER_ADD:
    out = tg_scatter_add(x, dim, index, src);
    break;
  case INDEX_SELECT:
    out = tg_index_select(x, dim, index);
    break;
  case INDEX_ADD:
    out = tg_index_add(x, dim, index, src, -1.5);
    break;
  case TOPK:
    cr_assert_eq(tg_topk(x, 2, dim, true, true, &out, &idx), TG_OK);
    break;
  }
  cr_assert(out, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(out, upstream(out)), TG_OK, "%s", tg_last_error_message());
  results[0] = out;
  results[1] = tg_grad(x);
  results[2] = src ? tg_grad(src) : idx;
  cr_assert_not_null(results[1]);
}

static void expect_same(which_op op, tg_twin x, tg_twin index, tg_twin src, int dim, tg_dtype dt) {
  tg_tensor *cpu[3], *gpu[3];
  run(op, x.cpu, index.cpu, src.cpu, dim, cpu);
  run(op, x.cuda, index.cuda, src.cuda, dim, gpu);
  for (int r = 0; r < 3; r++) {
    if (!cpu[r]) continue;
    cr_assert_eq(tg_tensor_device(gpu[r]).type, TG_CUDA);
    tg_assert_close(gpu[r], cpu[r], TG_RTOL(dt), TG_ATOL(dt));
  }
}

TG_CUDA_TEST(cuda_index, gather_and_scatter_add_match_the_cpu) {
  const tg_dtype floating[] = {TG_F32, TG_F64};
  for (int d = 0; d < 2; d++)
    for (int l = 0; l < TG_L_NUM_OUTPUT; l++)
      for (int dim = 0; dim < 2; dim++) {
        tg_scope sc = tg_scope_begin();
        cr_log_info("%s x %s, dim %d", tg_dtype_name(floating[d]), tg_layout_name((tg_layout)l),
                    dim);
        tg_twin x = tg_twin_matrix((tg_layout)l, 5, 4, floating[d], 3, false);
        /* 3 x 7 picks from 4 or 5 places: repeats, and an index larger than x along dim */
        const int64_t gsizes[2] = {dim ? 5 : 7, dim ? 7 : 4};
        tg_twin gi = twin_indices(2, gsizes, dim ? 4 : 5, false);
        expect_same(GATHER, x, gi, (tg_twin){NULL, NULL}, dim, floating[d]);
        tg_twin x2 = tg_twin_matrix((tg_layout)l, 5, 4, floating[d], 4, false);
        const int64_t ssizes[2] = {3, 3};
        tg_twin si = twin_indices(2, ssizes, dim ? 4 : 5, l == TG_L_TRANSPOSED);
        tg_twin src = tg_twin_matrix(TG_L_CONTIGUOUS, 4, 3, floating[d], 5, false);
        expect_same(SCATTER_ADD, x2, si, src, dim, floating[d]);
        tg_scope_end(sc);
      }
}

TG_CUDA_TEST(cuda_index, index_select_index_add_and_topk_match_the_cpu) {
  const tg_dtype floating[] = {TG_F32, TG_F64};
  for (int d = 0; d < 2; d++)
    for (int l = 0; l < TG_L_NUM_OUTPUT; l++)
      for (int dim = 0; dim < 2; dim++) {
        tg_scope sc = tg_scope_begin();
        cr_log_info("%s x %s, dim %d", tg_dtype_name(floating[d]), tg_layout_name((tg_layout)l),
                    dim);
        tg_twin x = tg_twin_matrix((tg_layout)l, 5, 4, floating[d], 3, false);
        const int64_t n_idx[1] = {9};
        tg_twin idx = twin_indices(1, n_idx, dim ? 4 : 5, false);
        expect_same(INDEX_SELECT, x, idx, (tg_twin){NULL, NULL}, dim, floating[d]);
        tg_twin x2 = tg_twin_matrix((tg_layout)l, 5, 4, floating[d], 4, false);
        tg_twin src = dim ? tg_twin_matrix(TG_L_TRANSPOSED, 5, 9, floating[d], 5, false)
                          : tg_twin_matrix(TG_L_CONTIGUOUS, 9, 4, floating[d], 5, false);
        expect_same(INDEX_ADD, x2, idx, src, dim, floating[d]);
        tg_twin x3 = tg_twin_matrix((tg_layout)l, 5, 4, floating[d], 6, false);
        expect_same(TOPK, x3, (tg_twin){NULL, NULL}, (tg_twin){NULL, NULL}, dim, floating[d]);
        tg_scope_end(sc);
      }
}

TG_CUDA_TEST(cuda_index, topk_ties_and_nan_in_the_cpu_order) {
  const double v[] = {1, 3, NAN, 3, -0.0, 0.0, 3, NAN, 2, 1};
  tg_tensor *cpu = tg_from_data(TG_SHAPE(2, 5), v, TG_OPTS(.dtype = TG_F64));
  tg_tensor *gpu = tg_to_device(cpu, TG_CUDA0);
  for (int largest = 0; largest < 2; largest++)
    for (int64_t k = 0; k <= 5; k++) {
      tg_tensor *cv, *ci, *gv, *gix;
      cr_assert_eq(tg_topk(cpu, k, 1, largest, true, &cv, &ci), TG_OK);
      cr_assert_eq(tg_topk(gpu, k, 1, largest, true, &gv, &gix), TG_OK, "%s",
                   tg_last_error_message());
      tg_assert_close(gix, ci, 0, 0);
      tg_assert_close(gv, cv, 0, 0); /* NaN matches NaN */
    }
}

TG_CUDA_TEST(cuda_index, argmax_one_hot_and_int64) {
  const double v[] = {1, 7, 7, 2, NAN, 0};
  tg_tensor *cpu = tg_from_data(TG_SHAPE(2, 3), v, TG_OPTS(.dtype = TG_F64));
  tg_tensor *gpu = tg_to_device(cpu, TG_CUDA0);
  tg_assert_close(tg_argmax(gpu, 1, false), tg_argmax(cpu, 1, false), 0, 0);
  tg_assert_close(tg_argmin(gpu, TG_ALL_DIMS, true), tg_argmin(cpu, TG_ALL_DIMS, true), 0, 0);
  const int64_t sizes[2] = {2, 3};
  tg_twin labels = twin_indices(2, sizes, 4, true);
  tg_tensor *oh = tg_one_hot(labels.cuda, -1);
  cr_assert(oh, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_device(oh).type, TG_CUDA);
  tg_assert_close(oh, tg_one_hot(labels.cpu, -1), 0, 0);
  /* I64 gather and index_add on the device */
  tg_tensor *xi = tg_to_dtype(cpu, TG_I64);
  tg_tensor *xg = tg_to_device(xi, TG_CUDA0);
  tg_tensor *row = tg_from_data(TG_SHAPE(3), (const int64_t[]){1, 1, 0}, TG_OPTS(.dtype = TG_I64));
  tg_tensor *rg = tg_to_device(row, TG_CUDA0);
  tg_assert_close(tg_index_add(xg, 0, rg, tg_index_select(xg, 0, rg), 1),
                  tg_index_add(xi, 0, row, tg_index_select(xi, 0, row), 1), 0, 0);
}

TG_CUDA_TEST(cuda_index, an_index_out_of_range_is_refused) {
  tg_tensor *x = tg_to_device(tg_zeros(TG_SHAPE(3, 4), TG_OPTS(.dtype = TG_F64)), TG_CUDA0);
  tg_tensor *bad = tg_to_device(
      tg_from_data(TG_SHAPE(1, 2), (const int64_t[]){0, 4}, TG_OPTS(.dtype = TG_I64)), TG_CUDA0);
  cr_assert_null(tg_gather(x, 1, bad));
  tg_expect_error(TG_ERR_INDEX, "tg_gather: index[0, 1] = 4 is outside dim 1 of x [0, 4)");
  cr_assert_null(tg_index_select(x, 0, tg_reshape(bad, TG_SHAPE(2))));
  tg_expect_error(TG_ERR_INDEX, "tg_index_select: index[1] = 4 is outside dim 0 of x [0, 3)");
  tg_tensor *cpu_index =
      tg_from_data(TG_SHAPE(1, 1), (const int64_t[]){0}, TG_OPTS(.dtype = TG_I64));
  cr_assert_null(tg_gather(x, 1, cpu_index));
  tg_expect_error(TG_ERR_DEVICE, "tg_gather");
}
