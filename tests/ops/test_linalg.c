/* mm, addmm, matmul: values against hand-checked results and a naive triple loop for every
 * operand layout (contiguous, transposed, sliced with an offset, expanded), gradients by
 * gradcheck and gradgradcheck in F64, and every error path. */
#include <math.h>

#include "testutil.h"

static const tg_gradcheck_options quiet = {.quiet = true};

/* ---- operands ---- */

typedef enum layout { CONTIGUOUS, TRANSPOSED, SLICED, NUM_LAYOUTS } layout;
static const char *const layout_names[] = {"contiguous", "transposed", "sliced"};

/* A [rows, cols] tensor of values in [-2, 2) laid out as asked: contiguous, the transpose
 * of a contiguous [cols, rows], or a window at an offset inside a larger matrix. */
static tg_tensor *matrix(int64_t rows, int64_t cols, layout l, tg_dtype dtype) {
  tg_options o = {.dtype = dtype};
  switch (l) {
  case TRANSPOSED:
    return tg_t(tg_uniform(TG_SHAPE(cols, rows), -2, 2, o, NULL));
  case SLICED:
    return tg_narrow(
        tg_narrow(tg_uniform(TG_SHAPE(rows + 3, cols + 2), -2, 2, o, NULL), 0, 2, rows), 1, 1,
        cols);
  default:
    return tg_uniform(TG_SHAPE(rows, cols), -2, 2, o, NULL);
  }
}

/* The same, as an F64 leaf that requires grad (views of a base that does not). */
static tg_tensor *leaf(int64_t rows, int64_t cols, layout l) {
  tg_tensor *t = matrix(rows, cols, l, TG_F64);
  cr_assert(t && tg_set_requires_grad(t, true) == TG_OK, "%s", tg_last_error_message());
  return t;
}

static tg_tensor *from2(int64_t rows, int64_t cols, const double *values) {
  return tg_from_data(TG_SHAPE(rows, cols), values, TG_OPTS(.dtype = TG_F64));
}

static double at2(const tg_tensor *t, int64_t i, int64_t j) {
  double v;
  cr_assert_eq(tg_get(t, (const int64_t[]){i, j}, &v), TG_OK, "%s", tg_last_error_message());
  return v;
}

/* beta * input + alpha * a @ b by three loops over tg_get (input broadcast; NULL = none). */
static tg_tensor *naive_addmm(const tg_tensor *input, const tg_tensor *a, const tg_tensor *b,
                              double beta, double alpha) {
  int64_t m = tg_size(a, 0), k = tg_size(a, 1), n = tg_size(b, 1);
  tg_tensor *bias = input ? tg_expand(input, TG_SHAPE(m, n)) : NULL;
  tg_tensor *out = tg_zeros(TG_SHAPE(m, n), TG_OPTS(.dtype = TG_F64));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t p = 0; p < k; p++) acc += at2(a, i, p) * at2(b, p, j);
      double v = alpha * acc + (bias ? beta * at2(bias, i, j) : 0);
      cr_assert_eq(tg_set(out, (const int64_t[]){i, j}, v), TG_OK);
    }
  return out;
}

static void check_grads(tg_gradcheck_fn fn, void *user, int n, tg_tensor **in, const char *what) {
  cr_assert_eq(tg_gradcheck(fn, user, n, in, 1, quiet), TG_OK, "%s: %s", what,
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(fn, user, n, in, 1, quiet), TG_OK, "%s: %s", what,
               tg_last_error_message());
}

/* ---- values ---- */

/* A product that overflows is inf as in PyTorch, never NaN, on every layout and in both
 * dtypes ([[1e300, 1e300]] @ [[1e300], [1e300]] in F64, 1e30 in F32), small and large. */
TG_TEST(linalg, mm_overflow_is_inf) {
  const int64_t dims[][3] = {{1, 2, 1}, {2, 2, 2}, {3, 5, 7}, {16, 32, 16}, {70, 300, 90}};
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < 5; i++) {
      tg_scope sc = tg_scope_begin();
      tg_options o = TG_OPTS(.dtype = d ? TG_F64 : TG_F32);
      const double big = d ? 1e300 : 1e30;
      const int64_t m = dims[i][0], k = dims[i][1], n = dims[i][2];
      tg_tensor *a = tg_full(TG_SHAPE(m, k), big, o), *b = tg_full(TG_SHAPE(k, n), big, o);
      tg_tensor *at = tg_t(tg_full(TG_SHAPE(k, m), big, o));
      tg_tensor *bt = tg_t(tg_full(TG_SHAPE(n, k), big, o));
      tg_tensor *products[] = {tg_mm(a, b), tg_mm(at, bt), tg_mm(a, bt),
                               tg_addmm(tg_zeros(TG_SHAPE(m, n), o), at, b, 1, 1)};
      for (int p = 0; p < 4; p++) {
        cr_assert(products[p], "%s", tg_last_error_message());
        for (int64_t e = 0; e < m * n; e++)
          cr_assert_eq(tg_test_at(products[p], e), INFINITY, "%s %lldx%lldx%lld product %d",
                       d ? "F64" : "F32", (long long)m, (long long)k, (long long)n, p);
      }
      tg_scope_end(sc);
    }
}

/* addmm as BLAS and PyTorch: alpha 0 ignores mat1 @ mat2 (inf and NaN in them included),
 * beta 0 ignores input; the gradients are PyTorch's (beta * g, and the products times
 * alpha, so alpha 0 gives 0 * product: NaN where the product is not finite). Values from
 * torch.addmm on these inputs. */
TG_TEST(linalg, addmm_alpha_or_beta_zero_ignores_its_term) {
  const double input_v[] = {1, NAN, INFINITY, 2}, m1_v[] = {INFINITY, NAN, 1, 2},
               m2_v[] = {1, 2, 3, INFINITY};
  typedef struct {
    double beta, alpha, y[4], g_input[4], g_m1[4], g_m2[4];
  } addmm_case;
  const addmm_case cases[] = {
      {1, 0, {1, NAN, INFINITY, 2}, {1, 1, 1, 1}, {0, NAN, 0, NAN}, {NAN, NAN, NAN, NAN}},
      {2, 0, {2, NAN, INFINITY, 4}, {2, 2, 2, 2}, {0, NAN, 0, NAN}, {NAN, NAN, NAN, NAN}},
      {0, 0, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, NAN, 0, NAN}, {NAN, NAN, NAN, NAN}},
      {0,
       1,
       {NAN, NAN, 7, INFINITY},
       {0, 0, 0, 0},
       {3, INFINITY, 3, INFINITY},
       {INFINITY, INFINITY, NAN, NAN}},
      {0,
       2,
       {NAN, NAN, 14, INFINITY},
       {0, 0, 0, 0},
       {6, INFINITY, 6, INFINITY},
       {INFINITY, INFINITY, NAN, NAN}},
  };
  for (int d = 0; d < 2; d++)
    for (int c = 0; c < 5; c++) {
      tg_scope sc = tg_scope_begin();
      const tg_dtype dt = d ? TG_F64 : TG_F32;
      tg_tensor *input = tg_test_tensor_of(dt, TG_SHAPE(2, 2), input_v);
      tg_tensor *m1 = tg_test_tensor_of(dt, TG_SHAPE(2, 2), m1_v);
      tg_tensor *m2 = tg_test_tensor_of(dt, TG_SHAPE(2, 2), m2_v);
      tg_tensor *leaves[] = {input, m1, m2};
      for (int l = 0; l < 3; l++) cr_assert_eq(tg_set_requires_grad(leaves[l], true), TG_OK);
      tg_tensor *y = tg_addmm(input, m1, m2, cases[c].beta, cases[c].alpha);
      tg_test_expect_ieee(y, 4, cases[c].y, 0);
      cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
      tg_test_expect_ieee(tg_grad(input), 4, cases[c].g_input, 0);
      tg_test_expect_ieee(tg_grad(m1), 4, cases[c].g_m1, 0);
      tg_test_expect_ieee(tg_grad(m2), 4, cases[c].g_m2, 0);
      tg_scope_end(sc);
    }
}

/* An inner size of 0 gives zeros (mm, matmul), and beta * input in addmm, as in PyTorch. */
TG_TEST(linalg, empty_inner_size_gives_zeros) {
  tg_scope sc = tg_scope_begin();
  tg_options o = TG_OPTS(.dtype = TG_F64);
  tg_tensor *a = tg_ones(TG_SHAPE(2, 0), o), *b = tg_ones(TG_SHAPE(0, 3), o);
  tg_test_expect_ieee(tg_mm(a, b), 6, (const double[]){0, 0, 0, 0, 0, 0}, 0);
  tg_test_expect_ieee(tg_matmul(a, b), 6, (const double[]){0, 0, 0, 0, 0, 0}, 0);
  tg_test_expect_ieee(tg_matmul(tg_ones(TG_SHAPE(0), o), tg_ones(TG_SHAPE(0), o)), 1,
                      (const double[]){0}, 0);
  tg_tensor *nan = tg_full(TG_SHAPE(2, 3), NAN, o);
  tg_test_expect_ieee(tg_addmm(nan, a, b, 0, 1), 6, (const double[]){0, 0, 0, 0, 0, 0}, 0);
  tg_test_expect_ieee(tg_addmm(tg_ones(TG_SHAPE(2, 3), o), a, b, 2, 3), 6,
                      (const double[]){2, 2, 2, 2, 2, 2}, 0);
  tg_scope_end(sc);
}

TG_TEST(linalg, mm_by_hand) {
  tg_scope sc = tg_scope_begin();
  const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12}, want[] = {58, 64, 139, 154};
  for (int dt = 0; dt < 2; dt++) {
    tg_dtype dtype = dt ? TG_F32 : TG_F64;
    tg_tensor *c = tg_mm(tg_to_dtype(from2(2, 3, a), dtype), tg_to_dtype(from2(3, 2, b), dtype));
    cr_assert(c, "%s", tg_last_error_message());
    tg_assert_sizes(c, 2, 2);
    cr_assert_eq(tg_tensor_dtype(c), dtype);
    tg_assert_close(c, from2(2, 2, want), 0, 0);
  }
  tg_scope_end(sc);
}

TG_TEST(linalg, mm_every_operand_layout_matches_the_naive_loop) {
  tg_scope sc = tg_scope_begin();
  for (int dt = 0; dt < 2; dt++) {
    tg_dtype dtype = dt ? TG_F32 : TG_F64;
    double tol = dtype == TG_F32 ? 1e-5 : 1e-12;
    for (int la = 0; la < NUM_LAYOUTS; la++)
      for (int lb = 0; lb < NUM_LAYOUTS; lb++) {
        tg_tensor *a = matrix(5, 7, (layout)la, dtype), *b = matrix(7, 3, (layout)lb, dtype);
        tg_tensor *c = tg_mm(a, b);
        cr_assert(c, "%s x %s: %s", layout_names[la], layout_names[lb], tg_last_error_message());
        tg_assert_close(c, naive_addmm(NULL, a, b, 0, 1), tol, tol);
      }
  }
  tg_scope_end(sc);
}

TG_TEST(linalg, mm_with_expanded_and_vector_shaped_operands) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *row = matrix(1, 4, CONTIGUOUS, TG_F64);
  tg_tensor *a = tg_expand(row, TG_SHAPE(3, 4)); /* stride 0 rows */
  tg_tensor *b = matrix(4, 2, TRANSPOSED, TG_F64);
  tg_assert_close(tg_mm(a, b), naive_addmm(NULL, a, b, 0, 1), 1e-12, 1e-12);
  /* [1, k] @ [k, 1] and [m, 1] @ [1, n]: size-1 dims whose strides are arbitrary. */
  tg_tensor *col = matrix(4, 1, SLICED, TG_F64);
  tg_assert_close(tg_mm(row, col), naive_addmm(NULL, row, col, 0, 1), 1e-12, 1e-12);
  tg_tensor *outer = tg_mm(col, tg_t(col));
  tg_assert_sizes(outer, 4, 4);
  tg_assert_close(outer, naive_addmm(NULL, col, tg_t(col), 0, 1), 1e-12, 1e-12);
  tg_scope_end(sc);
}

TG_TEST(linalg, mm_with_empty_dims) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *c = tg_mm(tg_ones(TG_SHAPE(2, 0), TG_OPTS(.dtype = TG_F64)),
                       tg_ones(TG_SHAPE(0, 3), TG_OPTS(.dtype = TG_F64)));
  tg_assert_sizes(c, 2, 3);
  tg_assert_close(c, tg_zeros(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F64)), 0, 0);
  tg_tensor *e =
      tg_mm(tg_ones(TG_SHAPE(0, 4), TG_OPTS_DEFAULT), tg_ones(TG_SHAPE(4, 3), TG_OPTS_DEFAULT));
  tg_assert_sizes(e, 0, 3);
  /* k == 0 in addmm leaves beta * input. */
  tg_tensor *in = tg_full(TG_SHAPE(3), 2.0, TG_OPTS(.dtype = TG_F64));
  tg_tensor *r = tg_addmm(in, tg_ones(TG_SHAPE(2, 0), TG_OPTS(.dtype = TG_F64)),
                          tg_ones(TG_SHAPE(0, 3), TG_OPTS(.dtype = TG_F64)), 0.5, 3);
  tg_assert_close(r, tg_ones(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F64)), 0, 0);
  tg_scope_end(sc);
}

TG_TEST(linalg, addmm_by_hand_with_beta_and_alpha) {
  tg_scope sc = tg_scope_begin();
  const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12}, in[] = {1, -1, 2, 10};
  /* 0.5 * in + 2 * [[58, 64], [139, 154]] */
  const double want[] = {116.5, 127.5, 279, 313};
  tg_tensor *r = tg_addmm(from2(2, 2, in), from2(2, 3, a), from2(3, 2, b), 0.5, 2);
  cr_assert(r, "%s", tg_last_error_message());
  tg_assert_close(r, from2(2, 2, want), 0, 1e-12);
  cr_assert_null(tg_grad_fn_name(r), "no input requires grad, so nothing is recorded");
  tg_scope_end(sc);
}

TG_TEST(linalg, addmm_broadcasts_input_in_every_shape) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = matrix(4, 5, SLICED, TG_F64), *b = matrix(5, 3, TRANSPOSED, TG_F64);
  tg_tensor *inputs[] = {
      matrix(4, 3, TRANSPOSED, TG_F64),                                  /* [m, n], strided */
      tg_uniform(TG_SHAPE(3), -1, 1, TG_OPTS(.dtype = TG_F64), NULL),    /* [n] bias */
      tg_uniform(TG_SHAPE(1, 3), -1, 1, TG_OPTS(.dtype = TG_F64), NULL), /* [1, n] */
      tg_uniform(TG_SHAPE(4, 1), -1, 1, TG_OPTS(.dtype = TG_F64), NULL), /* [m, 1] */
      tg_full(TG_SHAPE(1), 0.25, TG_OPTS(.dtype = TG_F64)),              /* [1] */
      tg_full(0, NULL, -3.0, TG_OPTS(.dtype = TG_F64)),                  /* 0-dim */
  };
  for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
    tg_tensor *r = tg_addmm(inputs[i], a, b, 0.75, -1.5);
    cr_assert(r, "input %zu: %s", i, tg_last_error_message());
    tg_assert_sizes(r, 4, 3);
    tg_assert_close(r, naive_addmm(inputs[i], a, b, 0.75, -1.5), 1e-12, 1e-12);
  }
  tg_scope_end(sc);
}

TG_TEST(linalg, addmm_with_beta_zero_ignores_nan_in_input) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = matrix(2, 3, CONTIGUOUS, TG_F32), *b = matrix(3, 4, CONTIGUOUS, TG_F32);
  tg_tensor *nan_in = tg_full(TG_SHAPE(4), NAN, TG_OPTS_DEFAULT);
  tg_tensor *r = tg_addmm(nan_in, a, b, 0, 2);
  cr_assert(r, "%s", tg_last_error_message());
  tg_assert_close(r, tg_mul_scalar(tg_mm(a, b), 2), 1e-6, 1e-6);
  /* With beta != 0 the NaN does reach the output. */
  cr_assert(isnan(tg_test_at(tg_addmm(nan_in, a, b, 1, 2), 0)));
  tg_scope_end(sc);
}

TG_TEST(linalg, matmul_of_1d_and_2d_operands) {
  tg_scope sc = tg_scope_begin();
  const double v[] = {1, 2, 3}, w[] = {4, 5, 6}, m[] = {1, 2, 3, 4, 5, 6};
  tg_tensor *x = tg_from_data(TG_SHAPE(3), v, TG_OPTS(.dtype = TG_F64));
  tg_tensor *y = tg_from_data(TG_SHAPE(3), w, TG_OPTS(.dtype = TG_F64));
  tg_tensor *a = from2(2, 3, m); /* [[1,2,3],[4,5,6]] */
  tg_tensor *dot = tg_matmul(x, y);
  cr_assert(dot, "%s", tg_last_error_message());
  cr_assert_eq(tg_ndim(dot), 0);
  cr_assert_eq(tg_test_at(dot, 0), 32.0);
  tg_tensor *mv = tg_matmul(a, x); /* [14, 32] */
  tg_assert_sizes(mv, 2);
  cr_assert_eq(tg_test_at(mv, 0), 14.0);
  cr_assert_eq(tg_test_at(mv, 1), 32.0);
  tg_tensor *vm =
      tg_matmul(tg_from_data(TG_SHAPE(2), (const double[]){1, -1}, TG_OPTS(.dtype = TG_F64)), a);
  tg_assert_sizes(vm, 3); /* [-3, -3, -3] */
  for (int j = 0; j < 3; j++) cr_assert_eq(tg_test_at(vm, j), -3.0);
  tg_tensor *mm = tg_matmul(a, tg_t(a));
  tg_assert_sizes(mm, 2, 2);
  tg_assert_close(mm, naive_addmm(NULL, a, tg_t(a), 0, 1), 0, 0);
  tg_scope_end(sc);
}

TG_TEST(linalg, matmul_leaves_only_its_result) {
  /* The row/column views it makes are released inside; only the result reaches the scope. */
  tg_tensor *x = tg_ones(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64));
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F64));
  tg_tensor *r = tg_matmul(a, x);
  cr_assert(r, "%s", tg_last_error_message());
  cr_assert_eq(tg_test_at(r, 1), 3.0);
}

/* ---- gradients ---- */

static tg_status fn_mm(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = tg_mm(in[0], in[1]);
  return out[0] ? TG_OK : tg_last_error();
}

typedef struct addmm_args {
  double beta, alpha;
} addmm_args;

static tg_status fn_addmm(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const addmm_args *s = user;
  out[0] = tg_addmm(in[0], in[1], in[2], s->beta, s->alpha);
  return out[0] ? TG_OK : tg_last_error();
}

static tg_status fn_matmul(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = tg_matmul(in[0], in[1]);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(linalg, mm_gradcheck_every_layout) {
  tg_scope sc = tg_scope_begin();
  for (int la = 0; la < NUM_LAYOUTS; la++)
    for (int lb = 0; lb < NUM_LAYOUTS; lb++) {
      tg_tensor *in[] = {leaf(3, 4, (layout)la), leaf(4, 2, (layout)lb)};
      check_grads(fn_mm, NULL, 2, in, layout_names[la]);
    }
  tg_scope_end(sc);
}

TG_TEST(linalg, mm_gradcheck_with_one_operand_constant) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = leaf(3, 4, SLICED), *b = matrix(4, 2, TRANSPOSED, TG_F64);
  tg_tensor *in[] = {a, b};
  check_grads(fn_mm, NULL, 2, in, "mat2 constant");
  tg_tensor *in2[] = {matrix(3, 4, TRANSPOSED, TG_F64), leaf(4, 2, CONTIGUOUS)};
  check_grads(fn_mm, NULL, 2, in2, "mat1 constant");
  tg_scope_end(sc);
}

TG_TEST(linalg, addmm_gradcheck_with_broadcast_inputs) {
  tg_scope sc = tg_scope_begin();
  addmm_args args[] = {{1, 1}, {0.5, -1.5}, {0, 2}};
  for (size_t s = 0; s < sizeof args / sizeof *args; s++) {
    tg_tensor *biases[] = {leaf(3, 2, TRANSPOSED), leaf(1, 2, SLICED), leaf(3, 1, CONTIGUOUS)};
    tg_tensor *vector =
        tg_uniform(TG_SHAPE(2), -1, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true), NULL);
    tg_tensor *scalar = tg_full(0, NULL, 0.5, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
    for (int i = 0; i < 5; i++) {
      tg_tensor *in[] = {i < 3    ? biases[i]
                         : i == 3 ? vector
                                  : scalar,
                         leaf(3, 4, (layout)(i % 3)), leaf(4, 2, (layout)((i + 1) % 3))};
      check_grads(fn_addmm, &args[s], 3, in, "addmm");
    }
  }
  tg_scope_end(sc);
}

TG_TEST(linalg, matmul_gradcheck_for_1d_operands) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *v =
      tg_uniform(TG_SHAPE(4), -1, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true), NULL);
  tg_tensor *w = tg_select(matrix(4, 3, SLICED, TG_F64), 1, 1); /* stride 5, offset */
  cr_assert(w && tg_set_requires_grad(w, true) == TG_OK, "%s", tg_last_error_message());
  tg_tensor *m = leaf(4, 3, TRANSPOSED);
  tg_tensor *dot[] = {v, w}, *vm[] = {w, m}, *mv[] = {tg_t(m), v}, *mm[] = {leaf(2, 4, SLICED), m};
  check_grads(fn_matmul, NULL, 2, dot, "dot");
  check_grads(fn_matmul, NULL, 2, vm, "vector @ matrix");
  check_grads(fn_matmul, NULL, 2, mv, "matrix @ vector");
  check_grads(fn_matmul, NULL, 2, mm, "matrix @ matrix");
  tg_scope_end(sc);
}

TG_TEST(linalg, backward_accumulates_known_gradients) {
  tg_scope sc = tg_scope_begin();
  /* y = sum(addmm(bias, a, b)); d bias = m per column ([n] bias), d a = rowsum(b) per column. */
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *b = tg_full(TG_SHAPE(3, 4), 2.0, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *bias = tg_zeros(TG_SHAPE(4), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_addmm(bias, a, b, 3, 1);
  cr_assert_str_eq(tg_grad_fn_name(y), "addmm");
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(bias), tg_full(TG_SHAPE(4), 6.0, TG_OPTS(.dtype = TG_F64)), 0, 0);
  tg_assert_close(tg_grad(a), tg_full(TG_SHAPE(2, 3), 8.0, TG_OPTS(.dtype = TG_F64)), 0, 0);
  tg_assert_close(tg_grad(b), tg_full(TG_SHAPE(3, 4), 2.0, TG_OPTS(.dtype = TG_F64)), 0, 0);
  tg_scope_end(sc);
}

TG_TEST(linalg, only_the_operands_a_gradient_needs_are_saved) {
  tg_scope sc = tg_scope_begin();
  /* d mat1 needs mat2 only: writing mat1 after forward is fine, writing mat2 is caught. */
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *b = tg_ones(TG_SHAPE(3, 2), TG_OPTS(.dtype = TG_F64));
  tg_tensor *y = tg_mm(a, b);
  tg_no_grad_begin();
  cr_assert_eq(tg_fill_(a, 5.0), TG_OK);
  tg_no_grad_end();
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(a), tg_full(TG_SHAPE(2, 3), 2.0, TG_OPTS(.dtype = TG_F64)), 0, 0);
  tg_tensor *y2 = tg_mm(a, b);
  cr_assert_eq(tg_fill_(b, 3.0), TG_OK);
  cr_assert_neq(tg_backward(tg_sum(y2), NULL), TG_OK);
  tg_expect_error(TG_ERR_STATE, "mm", "modified by an in-place operation");
  tg_scope_end(sc);
}

/* ---- errors ---- */

TG_TEST(linalg, mm_errors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *m23 = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  tg_tensor *m34 = tg_ones(TG_SHAPE(3, 4), TG_OPTS_DEFAULT);
  cr_assert_null(tg_mm(tg_ones(TG_SHAPE(2, 3, 4), TG_OPTS_DEFAULT), m34));
  tg_expect_error(TG_ERR_SHAPE, "tg_mm: a must be 2-D, got [2, 3, 4]");
  cr_assert_null(tg_mm(m23, tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_SHAPE, "tg_mm: b must be 2-D, got [3]");
  cr_assert_null(tg_mm(m23, m23));
  tg_expect_error(TG_ERR_SHAPE, "tg_mm: a is [2, 3] but b is [2, 3]: inner sizes differ");
  cr_assert_null(tg_mm(m23, tg_ones(TG_SHAPE(3, 4), TG_OPTS(.dtype = TG_F64))));
  tg_expect_error(TG_ERR_DTYPE, "tg_mm: b is float64 but a is float32");
  cr_assert_null(tg_mm(tg_zeros(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_I64)), m34));
  tg_expect_error(TG_ERR_DTYPE, "tg_mm: a is int64; expected float32 or float64");
  cr_assert_null(tg_mm(m23, tg_zeros(TG_SHAPE(3, 4), TG_OPTS(.dtype = TG_I64))));
  tg_expect_error(TG_ERR_DTYPE, "tg_mm: b is int64 but a is float32");
  cr_assert_null(tg_mm(NULL, m34));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_mm: a is NULL");
  /* NULL from a failed op keeps the first error. */
  cr_assert_null(tg_mm(tg_mm(m23, m23), m34));
  tg_expect_error(TG_ERR_SHAPE, "inner sizes differ");
  tg_scope_end(sc);
}

TG_TEST(linalg, addmm_errors) {
  tg_scope sc = tg_scope_begin();
  tg_options f32 = TG_OPTS_DEFAULT;
  tg_tensor *a = tg_ones(TG_SHAPE(16, 160), f32), *b = tg_ones(TG_SHAPE(150, 384), f32);
  tg_tensor *bias = tg_ones(TG_SHAPE(384), f32);
  cr_assert_null(tg_addmm(bias, a, b, 1, 1));
  tg_expect_error(TG_ERR_SHAPE,
                  "tg_addmm: mat1 is [16, 160] but mat2 is [150, 384]: inner sizes differ");
  tg_tensor *m23 = tg_ones(TG_SHAPE(2, 3), f32), *m34 = tg_ones(TG_SHAPE(3, 4), f32);
  cr_assert_null(tg_addmm(tg_ones(TG_SHAPE(3), f32), m23, m34, 1, 1));
  tg_expect_error(TG_ERR_SHAPE, "tg_addmm", "input is [3]", "[2, 4]", "does not broadcast");
  cr_assert_null(tg_addmm(tg_ones(TG_SHAPE(1, 2, 4), f32), m23, m34, 1, 1));
  tg_expect_error(TG_ERR_SHAPE, "tg_addmm", "input is [1, 2, 4]");
  cr_assert_null(tg_addmm(tg_ones(TG_SHAPE(4), TG_OPTS(.dtype = TG_F64)), m23, m34, 1, 1));
  tg_expect_error(TG_ERR_DTYPE, "tg_addmm: input is float64 but mat1 is float32");
  cr_assert_null(tg_addmm(tg_zeros(TG_SHAPE(4), TG_OPTS(.dtype = TG_I64)), m23, m34, 1, 1));
  tg_expect_error(TG_ERR_DTYPE, "tg_addmm", "input", "int64");
  cr_assert_null(tg_addmm(tg_ones(TG_SHAPE(4), f32), tg_ones(TG_SHAPE(2), f32), m34, 1, 1));
  tg_expect_error(TG_ERR_SHAPE, "tg_addmm: mat1 must be 2-D, got [2]");
  cr_assert_null(tg_addmm(NULL, m23, m34, 1, 1));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_addmm", "input is NULL");
  tg_scope_end(sc);
}

TG_TEST(linalg, matmul_errors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *v3 = tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT),
            *m23 = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_matmul(tg_ones(0, NULL, TG_OPTS_DEFAULT), v3));
  tg_expect_error(TG_ERR_SHAPE, "tg_matmul", "a is []", "at least 1 dim");
  /* batched operands are tg_matmul's now (tests/ops/test_bmm.c); a wrong inner size of one: */
  cr_assert_null(tg_matmul(tg_ones(TG_SHAPE(2, 2, 3), TG_OPTS_DEFAULT), m23));
  tg_expect_error(TG_ERR_SHAPE, "tg_matmul: a is [2, 2, 3] but b is [2, 3]: inner sizes differ");
  cr_assert_null(tg_matmul(v3, m23));
  tg_expect_error(TG_ERR_SHAPE, "tg_matmul: a is [3] but b is [2, 3]: inner sizes differ");
  cr_assert_null(tg_matmul(m23, tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT)));
  tg_expect_error(TG_ERR_SHAPE, "tg_matmul: a is [2, 3] but b is [2]: inner sizes differ");
  cr_assert_null(tg_matmul(m23, tg_ones(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64))));
  tg_expect_error(TG_ERR_DTYPE, "tg_matmul: b is float64 but a is float32");
  cr_assert_null(tg_matmul(tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_I64)), v3));
  tg_expect_error(TG_ERR_DTYPE, "tg_matmul: a is int64; expected float32 or float64");
  cr_assert_null(tg_matmul(m23, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_matmul", "b is NULL");
  tg_scope_end(sc);
}

TG_TEST(linalg, operands_on_different_devices) {
  if (!tg_cuda_is_available()) cr_skip_test("no CUDA device in this build/machine");
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  tg_tensor *b = tg_to_device(tg_ones(TG_SHAPE(3, 4), TG_OPTS_DEFAULT), TG_DEVICE_CUDA(0));
  cr_assert_null(tg_mm(a, b));
  tg_expect_error(TG_ERR_DEVICE, "tg_mm: b is on");
  cr_assert_null(tg_addmm(tg_to_device(tg_ones(TG_SHAPE(4), TG_OPTS_DEFAULT), TG_DEVICE_CUDA(0)), a,
                          tg_ones(TG_SHAPE(3, 4), TG_OPTS_DEFAULT), 1, 1));
  tg_expect_error(TG_ERR_DEVICE, "tg_addmm: input is on");
  cr_assert_null(tg_matmul(a, tg_select(b, 1, 0)));
  tg_expect_error(TG_ERR_DEVICE, "tg_matmul: b is on");
  tg_scope_end(sc);
}

TG_TEST(linalg, gradient_of_a_transposed_operand_comes_back_in_its_layout) {
  tg_scope sc = tg_scope_begin();
  tg_options f64 = {.dtype = TG_F64, .requires_grad = true};
  tg_tensor *w = tg_randn(TG_SHAPE(3, 4), f64, NULL); /* used as w^T, like nn.Linear */
  tg_tensor *x = tg_randn(TG_SHAPE(2, 4), f64, NULL);
  tg_tensor *y = tg_mm(x, tg_t(w));
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK);
  cr_assert(tg_is_contiguous(tg_grad(w)));
  /* d w[i][j] = sum over rows of x[:, j] (g is all ones) */
  for (int j = 0; j < 4; j++) {
    double want = tg_test_at(x, j) + tg_test_at(x, 4 + j);
    for (int i = 0; i < 3; i++) cr_assert_float_eq(tg_test_at(tg_grad(w), i * 4 + j), want, 1e-12);
  }
  tg_scope_end(sc);
}

/* An operand expanded (stride 0) past any storage's size must be copied for BLIS, and that
 * copy cannot exist: a clean TG_ERR_MEMORY, not an overflowed size or a crash. */
TG_TEST(linalg, mm_of_operands_too_large_to_copy) {
  const int64_t k = (int64_t)1 << 62;
  tg_tensor *one = tg_ones(TG_SHAPE(1, 1), TG_OPTS_DEFAULT);
  tg_tensor *a = tg_expand(one, TG_SHAPE(1, k));
  tg_tensor *b = tg_expand(one, TG_SHAPE(k, 1));
  cr_assert(a && b, "%s", tg_last_error_message());
  cr_assert_null(tg_mm(a, b));
  tg_expect_error(TG_ERR_MEMORY, "tg_mm: ", "contiguous copy of an operand");
}
