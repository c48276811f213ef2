/* Every primitive of the CUDA backend against its CPU twin (ops/backend.h), called
 * directly, on contiguous, transposed, sliced, stepped and expanded (stride 0) operands,
 * in F32 and F64: |cuda - cpu| <= atol + rtol*|cpu|. */
#include <math.h>

#include "cuda_testutil.h"

static const tg_backend *cpu_be(void) { return &tg_cpu_backend; }
static const tg_backend *cuda_be(void) {
  const tg_backend *be = tg__backend("test", TG_CUDA0);
  cr_assert(be, "no CUDA backend");
  return be;
}

static const tg_dtype floating[] = {TG_F32, TG_F64};

/* An op kernel of the tensors' device, found by name as the op finds it. */
static tg_status row_kernel(const char *name, tg_tensor *out, const tg_tensor *a,
                            const tg_tensor *index) {
  tg_kernel_fn k = tg__kernel("test", name, tg_tensor_device(out));
  cr_assert(k, "%s", tg_last_error_message());
  return k(3, (tg_tensor *const[]){out, (tg_tensor *)a, (tg_tensor *)index});
}

/* An output twin in a layout, prefilled with NaN (I64: a value no input has, since NaN does
 * not convert to int64) so a missed element shows. */
static tg_twin out_matrix(tg_layout layout, int64_t rows, int64_t cols, tg_dtype dtype) {
  tg_twin t = tg_twin_matrix(layout, rows, cols, dtype, 99, false);
  double missed = dtype == TG_I64 ? -777777 : NAN;
  cr_assert_eq(tg_fill_(t.cpu, missed), TG_OK);
  cr_assert_eq(tg_fill_(t.cuda, missed), TG_OK);
  return t;
}

static void check(tg_status cpu_st, tg_status cuda_st) {
  cr_assert_eq(cpu_st, TG_OK, "cpu: %s", tg_last_error_message());
  cr_assert_eq(cuda_st, TG_OK, "cuda: %s", tg_last_error_message());
}

TG_CUDA_TEST(cuda_backend, fill_every_dtype_and_layout) {
  const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};
  for (int d = 0; d < 3; d++)
    for (int l = 0; l < TG_L_NUM_OUTPUT; l++) {
      tg_twin o = out_matrix((tg_layout)l, 5, 7, dtypes[d]);
      check(cpu_be()->fill(o.cpu, -2.75), cuda_be()->fill(o.cuda, -2.75));
      tg_assert_twin_close(o, 0, 0);
    }
}

TG_CUDA_TEST(cuda_backend, copy_converts_dtypes_over_layouts) {
  const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};
  for (int from = 0; from < 3; from++)
    for (int to = 0; to < 3; to++)
      for (int ls = 0; ls < TG_L_NUM; ls++)
        for (int lo = 0; lo < TG_L_NUM_OUTPUT; lo++) {
          tg_twin src = tg_twin_matrix((tg_layout)ls, 4, 6, dtypes[from], ls, false);
          tg_twin out = out_matrix((tg_layout)lo, 4, 6, dtypes[to]);
          check(cpu_be()->copy(out.cpu, src.cpu), cuda_be()->copy(out.cuda, src.cuda));
          tg_assert_twin_close(out, 0, 0);
        }
}

TG_CUDA_TEST(cuda_backend, unary_every_kind) {
  /* Every kind runs: with these scalars and input domain, else a = b = 0 on inputs of
   * both signs (so a new kind is covered without an entry here). */
  struct {
    double a, b;
    bool positive;
  } args[TG_NUM_UNARY] = {
      [TG_UNARY_LOG] = {0, 0, true},
      [TG_UNARY_SQRT] = {0, 0, true},
      [TG_UNARY_ELU] = {1.3, 0, false},
      [TG_UNARY_POW] = {2.5, 0, true},
      [TG_UNARY_AFFINE] = {-1.5, 0.25, false},
      [TG_UNARY_RECIPROCAL] = {0, 0, true},
      [TG_UNARY_MUL_SCALAR] = {-1.5, 0, false},
      [TG_UNARY_DIV_SCALAR] = {-1.5, 0, false},
  };
  for (int c = 0; c < TG_NUM_UNARY; c++)
    for (int d = 0; d < 2; d++)
      for (int lx = 0; lx < TG_L_NUM; lx++) {
        tg_layout lo = (tg_layout)(lx % TG_L_NUM_OUTPUT);
        tg_twin x = tg_twin_matrix((tg_layout)lx, 6, 5, floating[d], c, args[c].positive);
        tg_twin o = out_matrix(lo, 6, 5, floating[d]);
        check(cpu_be()->unary((tg_unary_kind)c, args[c].a, args[c].b, o.cpu, x.cpu),
              cuda_be()->unary((tg_unary_kind)c, args[c].a, args[c].b, o.cuda, x.cuda));
        tg_assert_twin_close(o, TG_RTOL(floating[d]), TG_ATOL(floating[d]));
      }
}

TG_CUDA_TEST(cuda_backend, unary_in_place) {
  for (int d = 0; d < 2; d++) {
    tg_twin x = tg_twin_matrix(TG_L_TRANSPOSED, 4, 9, floating[d], 3, false);
    check(cpu_be()->unary(TG_UNARY_SIGMOID, 0, 0, x.cpu, x.cpu),
          cuda_be()->unary(TG_UNARY_SIGMOID, 0, 0, x.cuda, x.cuda));
    tg_assert_twin_close(x, TG_RTOL(floating[d]), TG_ATOL(floating[d]));
  }
}

TG_CUDA_TEST(cuda_backend, unary_is_stable_for_large_inputs) {
  const double big[] = {-1e4, -50, 0, 50, 1e4};
  for (int d = 0; d < 2; d++) {
    tg_tensor *h = tg_to_dtype(tg_from_data(1, (const int64_t[]){5}, big, TG_OPTS(.dtype = TG_F64)),
                               floating[d]);
    tg_tensor *x = tg_to_device(h, TG_CUDA0);
    const tg_unary_kind kinds[] = {TG_UNARY_SIGMOID, TG_UNARY_TANH, TG_UNARY_ELU};
    for (int k = 0; k < 3; k++) {
      tg_tensor *o = tg_empty_like(x);
      cr_assert_eq(cuda_be()->unary(kinds[k], 1.0, 0, o, x), TG_OK, "%s", tg_last_error_message());
      for (int i = 0; i < 5; i++) cr_assert(!isnan(tg_test_at(o, i)), "kind %d element %d", k, i);
    }
  }
}

TG_CUDA_TEST(cuda_backend, binary_every_kind_with_broadcasting) {
  /* Every kind of src/ops/def/binary.def. */
  static const tg_binary_kind kinds[] = {
#define TG_BINARY_KIND(KIND, name) TG_BINARY_##KIND,
#include "ops/def/binary.def"
  };
  _Static_assert(sizeof kinds / sizeof kinds[0] == TG_NUM_BINARY, "one entry per binary kind");
  for (int k = 0; k < TG_NUM_BINARY; k++)
    for (int d = 0; d < 2; d++)
      for (int la = 0; la < TG_L_NUM; la++)
        for (int lb = 0; lb < TG_L_NUM; lb++) {
          tg_scope sc = tg_scope_begin();
          tg_dtype dt = floating[d];
          tg_twin a = tg_twin_matrix((tg_layout)la, 5, 4, dt, 1, false);
          /* b == a in some elements, so EQ and GE see ties. */
          tg_twin b = lb == la ? a : tg_twin_matrix((tg_layout)lb, 5, 4, dt, 2, true);
          tg_twin o = out_matrix((tg_layout)((la + lb) % TG_L_NUM_OUTPUT), 5, 4, dt);
          check(cpu_be()->binary(kinds[k], 0.75, o.cpu, a.cpu, b.cpu),
                cuda_be()->binary(kinds[k], 0.75, o.cuda, a.cuda, b.cuda));
          tg_assert_twin_close(o, TG_RTOL(dt), TG_ATOL(dt));
          tg_scope_end(sc);
        }
}

/* where: every (cond dtype, value dtype) pair, cond with zeros (int64 values truncated from
 * the test values; a float cond copied from them into a layout), a and b over the layouts. */
TG_CUDA_TEST(cuda_backend, where_every_dtype_pair_and_layout) {
  static const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};
  for (int dc = 0; dc < 3; dc++)
    for (int dv = 0; dv < 3; dv++)
      for (int lc = 0; lc < TG_L_NUM; lc++)
        for (int la = 0; la < TG_L_NUM; la++) {
          tg_scope sc = tg_scope_begin();
          tg_twin cond = tg_twin_matrix((tg_layout)lc, 5, 4, TG_I64, 3, false);
          if (dtypes[dc] != TG_I64) {
            tg_twin ints = cond;
            cond = out_matrix((tg_layout)(lc % TG_L_NUM_OUTPUT), 5, 4, dtypes[dc]);
            check(cpu_be()->copy(cond.cpu, ints.cpu), cuda_be()->copy(cond.cuda, ints.cuda));
          }
          tg_twin a = tg_twin_matrix((tg_layout)la, 5, 4, dtypes[dv], 1, false);
          tg_twin b = tg_twin_matrix((tg_layout)((la + lc) % TG_L_NUM), 5, 4, dtypes[dv], 2, true);
          tg_twin o = out_matrix((tg_layout)((la + lc) % TG_L_NUM_OUTPUT), 5, 4, dtypes[dv]);
          check(cpu_be()->where(o.cpu, cond.cpu, a.cpu, b.cpu),
                cuda_be()->where(o.cuda, cond.cuda, a.cuda, b.cuda));
          tg_assert_twin_close(o, 0, 0);
          tg_scope_end(sc);
        }
}

/* A [4, 5, 6] operand: contiguous, permuted, sliced, or expanded along one dim. */
static tg_twin cube(int layout, tg_dtype dtype) {
  const int64_t sizes[3] = {4, 5, 6};
  switch (layout) {
  case 0:
    return tg_twin_view(tg_twin_values(120, dtype, 5, false), 3, sizes, (const int64_t[]){30, 6, 1},
                        0);
  case 1: /* dims stored in the order 2, 0, 1 */
    return tg_twin_view(tg_twin_values(120, dtype, 6, false), 3, sizes, (const int64_t[]){5, 1, 20},
                        0);
  case 2: /* a window of a [6, 7, 8] block */
    return tg_twin_view(tg_twin_values(336, dtype, 7, false), 3, sizes, (const int64_t[]){56, 8, 1},
                        9);
  default: /* expanded along dim 1 */
    return tg_twin_view(tg_twin_values(24, dtype, 8, false), 3, sizes, (const int64_t[]){6, 0, 1},
                        0);
  }
}

static tg_twin reduced_out(const int64_t *sizes, int dim, tg_dtype dtype, bool transposed) {
  int64_t s[3] = {sizes[0], sizes[1], sizes[2]};
  s[dim] = 1;
  int64_t n = s[0] * s[1] * s[2];
  /* transposed: the kept dims in reverse storage order */
  const int64_t strides[3] = {transposed ? 1 : s[1] * s[2], transposed ? s[0] : s[2],
                              transposed ? s[0] * s[1] : 1};
  tg_twin o = tg_twin_view(tg_twin_values(n, dtype, 0, false), 3, s, strides, 0);
  tg_fill_(o.cpu, NAN);
  tg_fill_(o.cuda, NAN);
  return o;
}

TG_CUDA_TEST(cuda_backend, sum_dim_over_every_dim_and_layout) {
  for (int d = 0; d < 2; d++)
    for (int layout = 0; layout < 4; layout++)
      for (int dim = 0; dim < 3; dim++)
        for (int t = 0; t < 2; t++) {
          tg_dtype dt = floating[d];
          tg_twin x = cube(layout, dt);
          tg_twin o = reduced_out(tg_sizes(x.cpu), dim, dt, t == 1);
          check(cpu_be()->reduce(TG_REDUCE_SUM, o.cpu, NULL, x.cpu, dim),
                cuda_be()->reduce(TG_REDUCE_SUM, o.cuda, NULL, x.cuda, dim));
          tg_assert_twin_close(o, 10 * TG_RTOL(dt), 10 * TG_ATOL(dt));
        }
}

TG_CUDA_TEST(cuda_backend, sum_dim_edge_shapes) {
  /* [K] -> [1] (a dot with ones), [1, K], [K, 1], and an empty reduced dim (zeros). */
  const int64_t shapes[][2] = {{1, 257}, {257, 1}, {1, 1}, {3, 0}, {0, 3}};
  for (int d = 0; d < 2; d++) {
    tg_dtype dt = floating[d];
    tg_twin v = tg_twin_values(300, dt, 4, false);
    tg_twin x1 = tg_twin_view(v, 1, (const int64_t[]){300}, (const int64_t[]){1}, 0);
    tg_twin o1 = tg_twin_view(tg_twin_values(1, dt, 0, false), 1, (const int64_t[]){1},
                              (const int64_t[]){1}, 0);
    check(cpu_be()->reduce(TG_REDUCE_SUM, o1.cpu, NULL, x1.cpu, 0),
          cuda_be()->reduce(TG_REDUCE_SUM, o1.cuda, NULL, x1.cuda, 0));
    tg_assert_twin_close(o1, 1e-5, 1e-5);
    for (int s = 0; s < 5; s++)
      for (int dim = 0; dim < 2; dim++) {
        const int64_t *sz = shapes[s];
        tg_twin x = tg_twin_view(v, 2, sz, (const int64_t[]){sz[1], 1}, 0);
        int64_t os[2] = {sz[0], sz[1]};
        os[dim] = 1;
        tg_twin o = tg_twin_view(tg_twin_values(os[0] * os[1] + 1, dt, 0, false), 2, os,
                                 (const int64_t[]){os[1], 1}, 0);
        check(cpu_be()->reduce(TG_REDUCE_SUM, o.cpu, NULL, x.cpu, dim),
              cuda_be()->reduce(TG_REDUCE_SUM, o.cuda, NULL, x.cuda, dim));
        tg_assert_twin_close(o, 1e-5, 1e-5);
      }
  }
}

/* Layouts cuBLAS cannot read in place, on each side of the kernel / dense-copy choice. */
TG_CUDA_TEST(cuda_backend, sum_dim_without_a_gemv_layout) {
  const struct {
    int ndim;
    int64_t sizes[3], strides[3];
    int dim;
  } cases[] = {
      {2, {3, 100}, {0, 1}, 1},        /* few long rows, expanded: made dense */
      {3, {5, 40, 6}, {240, 6, 1}, 1}, /* kept dims that do not collapse: made dense */
      {2, {3000, 40}, {0, 1}, 1},      /* many rows: the kernel */
      {3, {5, 9, 6}, {54, 6, 1}, 1},   /* short rows: the kernel */
  };
  for (int d = 0; d < 2; d++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      tg_scope sc = tg_scope_begin();
      tg_dtype dt = floating[d];
      const int ndim = cases[c].ndim, dim = cases[c].dim;
      int64_t n = 1, os[3];
      for (int k = 0; k < ndim; k++) {
        n += (cases[c].sizes[k] - 1) * cases[c].strides[k];
        os[k] = k == dim ? 1 : cases[c].sizes[k];
      }
      tg_twin x =
          tg_twin_view(tg_twin_values(n, dt, 3, false), ndim, cases[c].sizes, cases[c].strides, 0);
      tg_twin o = {tg_empty(ndim, os, TG_OPTS(.dtype = dt)),
                   tg_empty(ndim, os, TG_OPTS(.dtype = dt, .device = TG_CUDA0))};
      check(cpu_be()->reduce(TG_REDUCE_SUM, o.cpu, NULL, x.cpu, dim),
            cuda_be()->reduce(TG_REDUCE_SUM, o.cuda, NULL, x.cuda, dim));
      tg_assert_twin_close(o, 1e-5, 1e-4);
      tg_scope_end(sc);
    }
}

TG_CUDA_TEST(cuda_backend, max_dim_ties_and_nan) {
  static const tg_reduce_kind selects[] = {TG_REDUCE_MAX, TG_REDUCE_MIN};
  /* rows: ties (first wins), a NaN in the middle, all equal, a -inf */
  const double v[4][5] = {
      {1, 3, 3, 2, 0}, {1, NAN, 5, NAN, 2}, {7, 7, 7, 7, 7}, {-INFINITY, -1, -2, -3, -4}};
  for (int d = 0; d < 2; d++) {
    tg_dtype dt = floating[d];
    tg_tensor *h =
        tg_to_dtype(tg_from_data(2, (const int64_t[]){4, 5}, v, TG_OPTS(.dtype = TG_F64)), dt);
    tg_twin x = {h, tg_to_device(h, TG_CUDA0)};
    for (int dim = 0; dim < 2; dim++) {
      int64_t os[2] = {4, 5};
      os[dim] = 1;
      tg_twin val = {tg_empty(2, os, TG_OPTS(.dtype = dt)),
                     tg_empty(2, os, TG_OPTS(.dtype = dt, .device = TG_CUDA0))};
      tg_twin idx = {tg_empty(2, os, TG_OPTS(.dtype = TG_I64)),
                     tg_empty(2, os, TG_OPTS(.dtype = TG_I64, .device = TG_CUDA0))};
      for (int k = 0; k < 2; k++) { /* every select kind */
        check(cpu_be()->reduce(selects[k], val.cpu, idx.cpu, x.cpu, dim),
              cuda_be()->reduce(selects[k], val.cuda, idx.cuda, x.cuda, dim));
        tg_assert_twin_close(val, 0, 0);
        tg_assert_twin_close(idx, 0, 0);
      }
    }
    /* and over strided layouts */
    for (int layout = 0; layout < 4; layout++)
      for (int dim = 0; dim < 3; dim++) {
        tg_twin c = cube(layout, dt);
        tg_twin val = reduced_out(tg_sizes(c.cpu), dim, dt, layout % 2);
        int64_t os[3] = {4, 5, 6};
        os[dim] = 1;
        tg_twin idx = {tg_empty(3, os, TG_OPTS(.dtype = TG_I64)),
                       tg_empty(3, os, TG_OPTS(.dtype = TG_I64, .device = TG_CUDA0))};
        for (int k = 0; k < 2; k++) {
          check(cpu_be()->reduce(selects[k], val.cpu, idx.cpu, c.cpu, dim),
                cuda_be()->reduce(selects[k], val.cuda, idx.cuda, c.cuda, dim));
          tg_assert_twin_close(val, 0, 0);
          tg_assert_twin_close(idx, 0, 0);
        }
      }
  }
}

/* Few long rows go through per-chunk maxima: ties and NaNs across chunks keep the rules. */
TG_CUDA_TEST(cuda_backend, max_dim_over_long_rows) {
  static double v[3][1000];
  for (int i = 0; i < 1000; i++) v[0][i] = v[1][i] = v[2][i] = tg_test_value(i, 4, false);
  v[0][300] = v[0][700] = 10;                  /* a tie across chunks: the first wins */
  v[1][100] = 10, v[1][600] = v[1][900] = NAN; /* the first NaN wins */
  for (int d = 0; d < 2; d++)
    for (int transposed = 0; transposed < 2; transposed++) {
      tg_scope sc = tg_scope_begin();
      tg_dtype dt = floating[d];
      tg_tensor *h = tg_to_dtype(tg_from_data(TG_SHAPE(3, 1000), v, TG_OPTS(.dtype = TG_F64)), dt);
      if (transposed) h = tg_t(tg_contiguous(tg_t(h)));
      tg_twin x = {h, tg_to_device(h, TG_CUDA0)};
      if (transposed) x.cuda = tg_t(tg_contiguous(tg_t(x.cuda)));
      tg_twin val = {tg_empty(TG_SHAPE(3, 1), TG_OPTS(.dtype = dt)),
                     tg_empty(TG_SHAPE(3, 1), TG_OPTS(.dtype = dt, .device = TG_CUDA0))};
      tg_twin idx = {tg_empty(TG_SHAPE(3, 1), TG_OPTS(.dtype = TG_I64)),
                     tg_empty(TG_SHAPE(3, 1), TG_OPTS(.dtype = TG_I64, .device = TG_CUDA0))};
      check(cpu_be()->reduce(TG_REDUCE_MAX, val.cpu, idx.cpu, x.cpu, 1),
            cuda_be()->reduce(TG_REDUCE_MAX, val.cuda, idx.cuda, x.cuda, 1));
      tg_assert_twin_close(val, 0, 0);
      tg_assert_twin_close(idx, 0, 0);
      cr_assert_eq(tg_test_at(idx.cuda, 0), 300);
      cr_assert_eq(tg_test_at(idx.cuda, 1), 600);
      tg_scope_end(sc);
    }
}

TG_CUDA_TEST(cuda_backend, gemm_every_operand_layout) {
  const int64_t m = 5, k = 7, n = 3;
  for (int d = 0; d < 2; d++)
    for (int la = 0; la < TG_L_NUM; la++)
      for (int lb = 0; lb < TG_L_NUM; lb++)
        for (int lo = 0; lo < TG_L_NUM_OUTPUT; lo++)
          for (int beta_i = 0; beta_i < 2; beta_i++) {
            tg_scope sc = tg_scope_begin();
            tg_dtype dt = floating[d];
            double beta = beta_i ? 0.5 : 0.0; /* beta 0: out's NaNs must not leak */
            tg_twin a = tg_twin_matrix((tg_layout)la, m, k, dt, 1, false);
            tg_twin b = tg_twin_matrix((tg_layout)lb, k, n, dt, 2, false);
            tg_twin o = beta_i ? tg_twin_matrix((tg_layout)lo, m, n, dt, 3, false)
                               : out_matrix((tg_layout)lo, m, n, dt);
            check(cpu_be()->gemm(o.cpu, a.cpu, b.cpu, 1.5, beta),
                  cuda_be()->gemm(o.cuda, a.cuda, b.cuda, 1.5, beta));
            cr_assert(tg_test_max_abs_diff(o.cuda, o.cpu) <= (dt == TG_F64 ? 1e-12 : 1e-4),
                      "a %s, b %s, out %s, beta %g", tg_layout_name((tg_layout)la),
                      tg_layout_name((tg_layout)lb), tg_layout_name((tg_layout)lo), beta);
            tg_scope_end(sc);
          }
}

TG_CUDA_TEST(cuda_backend, gemm_vectors_and_empty_inner_dim) {
  const int64_t shapes[][3] = {{1, 9, 1}, {1, 9, 4}, {4, 9, 1}, {6, 1, 5}, {3, 0, 4}};
  for (int d = 0; d < 2; d++)
    for (int s = 0; s < 5; s++)
      for (int beta_i = 0; beta_i < 2; beta_i++) {
        tg_dtype dt = floating[d];
        int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
        tg_twin a = tg_twin_matrix(TG_L_TRANSPOSED, m, k, dt, 1, false);
        tg_twin b = tg_twin_matrix(TG_L_CONTIGUOUS, k, n, dt, 2, false);
        tg_twin o = beta_i ? tg_twin_matrix(TG_L_CONTIGUOUS, m, n, dt, 3, false)
                           : out_matrix(TG_L_SLICED, m, n, dt);
        check(cpu_be()->gemm(o.cpu, a.cpu, b.cpu, -1.0, beta_i ? 2.0 : 0.0),
              cuda_be()->gemm(o.cuda, a.cuda, b.cuda, -1.0, beta_i ? 2.0 : 0.0));
        tg_assert_twin_close(o, 1e-5, 1e-5);
      }
}

TG_CUDA_TEST(cuda_backend, gather_and_scatter_add_rows) {
  const int64_t index_values[6] = {3, 0, 3, 1, 2, 0};
  for (int d = 0; d < 2; d++)
    for (int lx = 0; lx < TG_L_NUM_OUTPUT; lx++) {
      tg_dtype dt = floating[d];
      tg_tensor *ih = tg_from_data(1, (const int64_t[]){6}, index_values, TG_OPTS(.dtype = TG_I64));
      tg_twin idx = {ih, tg_to_device(ih, TG_CUDA0)};
      tg_twin x = tg_twin_matrix((tg_layout)lx, 6, 4, dt, 1, false);
      tg_twin g = tg_twin_view(tg_twin_values(12, dt, 0, false), 1, (const int64_t[]){6},
                               (const int64_t[]){2}, 1);
      check(row_kernel("cross_entropy.gather_rows", g.cpu, x.cpu, idx.cpu),
            row_kernel("cross_entropy.gather_rows", g.cuda, x.cuda, idx.cuda));
      tg_assert_twin_close(g, 0, 0);
      check(row_kernel("cross_entropy.scatter_add_rows", x.cpu, g.cpu, idx.cpu),
            row_kernel("cross_entropy.scatter_add_rows", x.cuda, g.cuda, idx.cuda));
      tg_assert_twin_close(x, TG_RTOL(dt), TG_ATOL(dt));
    }
}

TG_CUDA_TEST(cuda_backend, random_fills_match_the_cpu) {
  for (int d = 0; d < 2; d++)
    for (int l = 0; l < 2; l++) {
      tg_dtype dt = floating[d];
      tg_twin u = out_matrix(l ? TG_L_TRANSPOSED : TG_L_CONTIGUOUS, 7, 13, dt);
      check(cpu_be()->uniform(u.cpu, 1234, 5, -2.0, 3.0),
            cuda_be()->uniform(u.cuda, 1234, 5, -2.0, 3.0));
      /* Philox and the scaling are integer and exact arithmetic: bit-identical. */
      tg_assert_twin_close(u, 0, 0);
      tg_twin g = out_matrix(l ? TG_L_STEPPED : TG_L_CONTIGUOUS, 7, 13, dt);
      check(cpu_be()->normal(g.cpu, 99, 3, 1.0, 0.5), cuda_be()->normal(g.cuda, 99, 3, 1.0, 0.5));
      /* Normals go through log/sin/cos: libm and CUDA may differ in the last bit. */
      tg_assert_twin_close(g, 10 * TG_RTOL(dt), 10 * TG_ATOL(dt));
    }
}

TG_CUDA_TEST(cuda_backend, rejects_tensors_on_other_devices) {
  tg_tensor *c = tg_zeros(TG_SHAPE(3), TG_OPTS(.device = TG_CUDA0));
  tg_tensor *h = tg_zeros(TG_SHAPE(3), TG_OPTS_DEFAULT);
  cr_assert_eq(cuda_be()->copy(c, h), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "cuda.copy", "cpu:0");
  cr_assert_eq(cuda_be()->binary(TG_BINARY_ADD, 1, c, c, h), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "cuda.binary");
}

/* A select kind without indices, or a kind past the list, is refused, not run. */
TG_CUDA_TEST(cuda_backend, reduce_rejects_bad_kinds_and_missing_indices) {
  tg_tensor *x = tg_zeros(TG_SHAPE(3, 4), TG_OPTS(.device = TG_CUDA0));
  tg_tensor *v = tg_zeros(TG_SHAPE(3, 1), TG_OPTS(.device = TG_CUDA0));
  cr_assert_eq(cuda_be()->reduce(TG_REDUCE_MIN, v, NULL, x, 1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "cuda.reduce: min_dim needs indices");
  cr_assert_eq(cuda_be()->reduce(TG_NUM_REDUCE, v, NULL, x, 1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "cuda.reduce: unknown reduction kind");
}
