/* cat and stack: values for every dim (negative too), empty pieces and strided pieces,
 * gradients by gradcheck and gradgradcheck in F64, and every error path. */
#include "testutil.h"

static const tg_gradcheck_options quiet = {.quiet = true};

static tg_tensor *range(int64_t start, int64_t n, tg_dtype dtype) {
  return tg_arange((double)start, (double)(start + n), 1, TG_OPTS(.dtype = dtype));
}

static tg_tensor *from(int ndim, const int64_t *sizes, const double *values) {
  return tg_from_data(ndim, sizes, values, TG_OPTS(.dtype = TG_F64));
}

/* ---- cat values ---- */

TG_TEST(shape_ops, cat_along_each_dim) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_view(range(0, 6, TG_F64), TG_SHAPE(2, 3));  /* [[0,1,2],[3,4,5]] */
  tg_tensor *b = tg_view(range(10, 3, TG_F64), TG_SHAPE(1, 3)); /* [[10,11,12]] */
  tg_tensor *rows = tg_cat(2, (const tg_tensor *[]){a, b}, 0);
  cr_assert(rows, "%s", tg_last_error_message());
  tg_assert_sizes(rows, 3, 3);
  tg_assert_close(rows, from(TG_SHAPE(3, 3), (const double[]){0, 1, 2, 3, 4, 5, 10, 11, 12}), 0, 0);
  tg_tensor *c = tg_view(range(20, 4, TG_F64), TG_SHAPE(2, 2));
  tg_tensor *cols = tg_cat(2, (const tg_tensor *[]){a, c}, -1);
  tg_assert_sizes(cols, 2, 5);
  tg_assert_close(cols, from(TG_SHAPE(2, 5), (const double[]){0, 1, 2, 20, 21, 3, 4, 5, 22, 23}), 0,
                  0);
  /* 3-D along the middle dim. */
  tg_tensor *x = tg_view(range(0, 8, TG_F64), TG_SHAPE(2, 2, 2));
  tg_tensor *y = tg_view(range(100, 4, TG_F64), TG_SHAPE(2, 1, 2));
  tg_tensor *mid = tg_cat(2, (const tg_tensor *[]){x, y}, 1);
  tg_assert_sizes(mid, 2, 3, 2);
  tg_assert_close(
      mid, from(TG_SHAPE(2, 3, 2), (const double[]){0, 1, 2, 3, 100, 101, 4, 5, 6, 7, 102, 103}), 0,
      0);
  tg_scope_end(sc);
}

TG_TEST(shape_ops, cat_of_strided_empty_and_single_pieces) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *base = tg_view(range(0, 12, TG_F32), TG_SHAPE(3, 4));
  tg_tensor *tr = tg_t(tg_narrow(base, 1, 0, 3)); /* [3, 3] transposed */
  tg_tensor *sl = tg_slice(base, 0, 1, 3, 1);     /* rows 1..2, offset 4 */
  tg_tensor *sl3 = tg_narrow(sl, 1, 1, 3);        /* [2, 3], offset 5 */
  tg_tensor *empty = tg_empty(TG_SHAPE(0, 3), TG_OPTS_DEFAULT);
  tg_tensor *r = tg_cat(3, (const tg_tensor *[]){tr, empty, sl3}, 0);
  cr_assert(r, "%s", tg_last_error_message());
  tg_assert_sizes(r, 5, 3);
  const float want[] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 5, 6, 7, 9, 10, 11};
  tg_assert_close(r, tg_from_data(TG_SHAPE(5, 3), want, TG_OPTS_DEFAULT), 0, 0);
  /* Every piece empty; one piece: a new tensor with the same values. */
  tg_tensor *none = tg_cat(2, (const tg_tensor *[]){empty, empty}, 0);
  tg_assert_sizes(none, 0, 3);
  tg_tensor *one = tg_cat(1, (const tg_tensor *[]){tr}, 1);
  cr_assert(!tg_shares_storage(one, base));
  tg_assert_close(one, tr, 0, 0);
  /* Integer tensors concatenate too (not differentiable). */
  tg_tensor *ints = tg_cat(2, (const tg_tensor *[]){range(0, 2, TG_I64), range(7, 1, TG_I64)}, 0);
  cr_assert_eq(tg_tensor_dtype(ints), TG_I64);
  cr_assert_eq(tg_test_at(ints, 2), 7.0);
  tg_scope_end(sc);
}

/* ---- stack values ---- */

TG_TEST(shape_ops, stack_along_each_dim) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_view(range(0, 6, TG_F64), TG_SHAPE(2, 3));
  tg_tensor *b = tg_t(tg_view(range(10, 6, TG_F64), TG_SHAPE(3, 2))); /* [[10,12,14],[11,13,15]] */
  const tg_tensor *pair[] = {a, b};
  tg_tensor *s0 = tg_stack(2, pair, 0);
  tg_assert_sizes(s0, 2, 2, 3);
  tg_assert_close(
      s0, from(TG_SHAPE(2, 2, 3), (const double[]){0, 1, 2, 3, 4, 5, 10, 12, 14, 11, 13, 15}), 0,
      0);
  tg_tensor *s1 = tg_stack(2, pair, 1);
  tg_assert_sizes(s1, 2, 2, 3);
  tg_assert_close(
      s1, from(TG_SHAPE(2, 2, 3), (const double[]){0, 1, 2, 10, 12, 14, 3, 4, 5, 11, 13, 15}), 0,
      0);
  tg_tensor *last = tg_stack(2, pair, -1);
  tg_assert_sizes(last, 2, 3, 2);
  tg_assert_close(
      last, from(TG_SHAPE(2, 3, 2), (const double[]){0, 10, 1, 12, 2, 14, 3, 11, 4, 13, 5, 15}), 0,
      0);
  /* 0-dim tensors stack into a vector. */
  tg_tensor *scalars = tg_stack(3,
                                (const tg_tensor *[]){tg_full(0, NULL, 1, TG_OPTS_DEFAULT),
                                                      tg_full(0, NULL, 2, TG_OPTS_DEFAULT),
                                                      tg_full(0, NULL, 3, TG_OPTS_DEFAULT)},
                                0);
  tg_assert_sizes(scalars, 3);
  cr_assert_eq(tg_test_at(scalars, 2), 3.0);
  tg_scope_end(sc);
}

TG_TEST(shape_ops, stack_leaves_only_its_result) {
  tg_tensor *a = tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT), *b = tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  tg_tensor *s = tg_stack(2, (const tg_tensor *[]){a, b}, 1);
  cr_assert(s, "%s", tg_last_error_message());
  tg_assert_sizes(s, 2, 2);
}

/* ---- gradients ---- */

typedef struct join_args {
  tg_tensor *(*join)(int, const tg_tensor *const *, int);
  int dim;
} join_args;

static tg_status fn_join(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const join_args *j = user;
  out[0] = j->join(3, in, j->dim);
  return out[0] ? TG_OK : tg_last_error();
}

static tg_tensor *leaf(tg_tensor *t) {
  cr_assert(t && tg_set_requires_grad(t, true) == TG_OK, "%s", tg_last_error_message());
  return t;
}

static tg_tensor *rand2(int64_t r, int64_t c) {
  return tg_uniform(TG_SHAPE(r, c), -1, 1, TG_OPTS(.dtype = TG_F64), NULL);
}

static void check_grads(join_args *args, tg_tensor **in, const char *what) {
  cr_assert_eq(tg_gradcheck(fn_join, args, 3, in, 1, quiet), TG_OK, "%s: %s", what,
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(fn_join, args, 3, in, 1, quiet), TG_OK, "%s: %s", what,
               tg_last_error_message());
}

TG_TEST(shape_ops, cat_gradcheck_with_strided_pieces) {
  tg_scope sc = tg_scope_begin();
  for (int dim = -2; dim < 2; dim++) {
    bool rows = dim == 0 || dim == -2;
    /* contiguous, transposed, sliced with an offset; sizes differ only along dim. */
    tg_tensor *a = leaf(rows ? rand2(2, 3) : rand2(3, 2));
    tg_tensor *b = leaf(rows ? tg_t(rand2(3, 1)) : tg_t(rand2(1, 3)));
    tg_tensor *c = leaf(rows ? tg_narrow(tg_narrow(rand2(5, 5), 0, 1, 3), 1, 2, 3)
                             : tg_narrow(tg_narrow(rand2(5, 5), 0, 2, 3), 1, 1, 3));
    tg_tensor *in[] = {a, b, c};
    join_args args = {tg_cat, dim};
    check_grads(&args, in, "cat");
  }
  tg_scope_end(sc);
}

TG_TEST(shape_ops, cat_gradcheck_with_a_constant_and_an_empty_piece) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *in[] = {leaf(rand2(2, 3)), rand2(2, 2), leaf(rand2(2, 0))};
  join_args args = {tg_cat, 1};
  check_grads(&args, in, "constant middle piece");
  tg_scope_end(sc);
}

TG_TEST(shape_ops, stack_gradcheck_with_strided_pieces) {
  tg_scope sc = tg_scope_begin();
  for (int dim = -3; dim < 3; dim++) {
    tg_tensor *in[] = {leaf(rand2(2, 3)), leaf(tg_t(rand2(3, 2))),
                       leaf(tg_narrow(tg_narrow(rand2(4, 5), 0, 1, 2), 1, 2, 3))};
    join_args args = {tg_stack, dim};
    check_grads(&args, in, "stack");
  }
  tg_scope_end(sc);
}

TG_TEST(shape_ops, cat_backward_hands_each_piece_its_slice) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *b = tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_cat(2, (const tg_tensor *[]){a, b}, 0);
  cr_assert_str_eq(tg_grad_fn_name(y), "cat");
  tg_tensor *g = range(1, 5, TG_F64);
  cr_assert_eq(tg_backward(y, g), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(a), from(TG_SHAPE(2), (const double[]){1, 2}), 0, 0);
  tg_assert_close(tg_grad(b), from(TG_SHAPE(3), (const double[]){3, 4, 5}), 0, 0);
  tg_scope_end(sc);
}

/* ---- errors ---- */

TG_TEST(shape_ops, cat_errors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *m23 = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_cat(0, (const tg_tensor *[]){m23}, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_cat", "non-empty list", "got 0");
  cr_assert_null(tg_cat(2, NULL, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_cat", "tensors is NULL");
  cr_assert_null(tg_cat(2, (const tg_tensor *[]){m23, NULL}, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_cat", "tensors[1] is NULL");
  cr_assert_null(
      tg_cat(2, (const tg_tensor *[]){m23, tg_ones(TG_SHAPE(2, 4), TG_OPTS_DEFAULT)}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_cat: tensors[1] is [2, 4] but tensors[0] is [2, 3]",
                  "except in dim 0");
  cr_assert_null(
      tg_cat(3, (const tg_tensor *[]){m23, m23, tg_ones(TG_SHAPE(2, 3, 1), TG_OPTS_DEFAULT)}, 1));
  tg_expect_error(TG_ERR_SHAPE, "tg_cat: tensors[2] is [2, 3, 1] but tensors[0] is [2, 3]",
                  "same number of dims");
  /* mixed dtypes promote, as torch.cat; the checks still name the pieces */
  cr_assert_null(
      tg_cat(2, (const tg_tensor *[]){m23, tg_ones(TG_SHAPE(2, 4), TG_OPTS(.dtype = TG_F64))}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_cat: tensors[1] is [2, 4] but tensors[0] is [2, 3]");
  cr_assert_null(tg_cat(2, (const tg_tensor *[]){m23, m23}, 2));
  tg_expect_error(TG_ERR_INDEX, "tg_cat", "dim 2");
  cr_assert_null(tg_cat(2, (const tg_tensor *[]){m23, m23}, -3));
  tg_expect_error(TG_ERR_INDEX, "tg_cat", "dim -3");
  tg_tensor *s = tg_full(0, NULL, 1, TG_OPTS_DEFAULT);
  cr_assert_null(tg_cat(2, (const tg_tensor *[]){s, s}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_cat: tensors[0] is 0-dim");
  /* A NULL from a failed op keeps the first error. */
  cr_assert_null(tg_cat(2, (const tg_tensor *[]){m23, tg_mm(m23, m23)}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_mm");
  tg_scope_end(sc);
}

TG_TEST(shape_ops, stack_errors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *m23 = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_stack(0, (const tg_tensor *[]){m23}, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_stack", "non-empty list");
  cr_assert_null(tg_stack(2, (const tg_tensor *[]){NULL, m23}, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_stack", "tensors[0] is NULL");
  cr_assert_null(
      tg_stack(2, (const tg_tensor *[]){m23, tg_ones(TG_SHAPE(3, 3), TG_OPTS_DEFAULT)}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_stack: tensors[1] is [3, 3] but tensors[0] is [2, 3]",
                  "sizes must be equal");
  cr_assert_null(tg_stack(
      2, (const tg_tensor *[]){m23, tg_zeros(TG_SHAPE(3, 3), TG_OPTS(.dtype = TG_I64))}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_stack: tensors[1] is [3, 3] but tensors[0] is [2, 3]");
  cr_assert_null(tg_stack(2, (const tg_tensor *[]){m23, m23}, 3));
  tg_expect_error(TG_ERR_INDEX, "tg_stack", "dim 3");
  tg_tensor *big = tg_ones(TG_SHAPE(1, 1, 1, 1, 1, 1, 1, 2), TG_OPTS_DEFAULT);
  cr_assert_null(tg_stack(2, (const tg_tensor *[]){big, big}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_stack", "maximum of 8 dims");
  tg_scope_end(sc);
}

TG_TEST(shape_ops, pieces_on_different_devices) {
  if (!tg_cuda_is_available()) cr_skip_test("no CUDA device in this build/machine");
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  tg_tensor *b = tg_to_device(a, TG_DEVICE_CUDA(0));
  cr_assert_null(tg_cat(2, (const tg_tensor *[]){a, b}, 0));
  tg_expect_error(TG_ERR_DEVICE, "tg_cat: tensors[1] is on");
  cr_assert_null(tg_stack(2, (const tg_tensor *[]){a, b}, 0));
  tg_expect_error(TG_ERR_DEVICE, "tg_stack: tensors[1] is on");
  tg_scope_end(sc);
}
