/* Views share storage and never copy: geometry of every view and of views of views. */
#include "testutil.h"

static tg_tensor *range(int64_t n) { return tg_arange(0, (double)n, 1, TG_OPTS(.dtype = TG_F64)); }

static void assert_geometry(const tg_tensor *t, int ndim, const int64_t *sizes,
                            const int64_t *strides, int64_t offset) {
  tg_test_assert_sizes_impl(__FILE__, __LINE__, t, ndim, sizes);
  for (int d = 0; d < ndim; d++)
    cr_assert_eq(tg_stride(t, d), strides[d], "stride[%d] is %lld, expected %lld", d,
                 (long long)tg_stride(t, d), (long long)strides[d]);
  cr_assert_eq(tg_offset(t), offset, "offset %lld, expected %lld", (long long)tg_offset(t),
               (long long)offset);
}
#define GEOM(t, sizes, strides, offset)                                                            \
  assert_geometry((t), (int)(sizeof((int64_t[])sizes) / sizeof(int64_t)), (int64_t[])sizes,        \
                  (int64_t[])strides, (offset))
#define L(...)                                                                                     \
  { __VA_ARGS__ }

TG_TEST(views, view_and_reshape_share_storage) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = range(24);
  tg_tensor *v = tg_view(t, TG_SHAPE(2, 3, 4));
  GEOM(v, L(2, 3, 4), L(12, 4, 1), 0);
  cr_assert(tg_shares_storage(t, v));
  tg_tensor *w = tg_view(v, TG_SHAPE(6, -1));
  GEOM(w, L(6, 4), L(4, 1), 0);
  tg_tensor *r = tg_reshape(v, TG_SHAPE(-1));
  cr_assert(tg_shares_storage(t, r));
  cr_assert_eq(tg_test_at(r, 23), 23.0);
  tg_scope_end(sc);
}

TG_TEST(views, transpose_and_permute_swap_strides) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(range(24), TG_SHAPE(2, 3, 4));
  tg_tensor *tr = tg_transpose(t, 0, 2);
  GEOM(tr, L(4, 3, 2), L(1, 4, 12), 0);
  cr_assert(!tg_is_contiguous(tr));
  tg_tensor *p = tg_permute(t, 3, (int[]){1, 2, 0});
  GEOM(p, L(3, 4, 2), L(4, 1, 12), 0);
  tg_tensor *tt = tg_t(tg_view(t, TG_SHAPE(6, 4)));
  GEOM(tt, L(4, 6), L(1, 4), 0);
  double v;
  cr_assert_eq(tg_get(tt, (int64_t[]){3, 5}, &v), TG_OK);
  cr_assert_eq(v, 23.0);
  tg_scope_end(sc);
}

TG_TEST(views, narrow_slice_select_move_the_offset) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(range(30), TG_SHAPE(5, 6));
  tg_tensor *n = tg_narrow(t, 1, 2, 3);
  GEOM(n, L(5, 3), L(6, 1), 2);
  tg_tensor *s = tg_slice(t, 0, 1, 5, 2);
  GEOM(s, L(2, 6), L(12, 1), 6);
  tg_tensor *neg = tg_slice(t, 1, -2, 100, 1); /* clamps like Python */
  GEOM(neg, L(5, 2), L(6, 1), 4);
  tg_tensor *sel = tg_select(t, 1, -1);
  GEOM(sel, L(5), L(6), 5);
  cr_assert_eq(tg_test_at(sel, 4), 29.0);
  /* views of views */
  tg_tensor *nn = tg_narrow(tg_transpose(n, 0, 1), 1, 1, 3);
  GEOM(nn, L(3, 3), L(1, 6), 8);
  cr_assert_eq(tg_test_at(nn, 0), 8.0);
  tg_tensor *ss = tg_select(tg_slice(s, 1, 1, 6, 2), 0, 1);
  GEOM(ss, L(3), L(2), 19);
  cr_assert_eq(tg_test_at(ss, 2), 23.0);
  cr_assert(tg_shares_storage(t, ss));
  tg_scope_end(sc);
}

TG_TEST(views, chunk_and_split_cover_the_dim) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(range(14), TG_SHAPE(2, 7));
  tg_tensor *parts[4];
  int n = 0;
  cr_assert_eq(tg_chunk(t, 3, 1, parts, &n), TG_OK);
  cr_assert_eq(n, 3);
  GEOM(parts[0], L(2, 3), L(7, 1), 0);
  GEOM(parts[1], L(2, 3), L(7, 1), 3);
  GEOM(parts[2], L(2, 1), L(7, 1), 6);
  cr_assert_eq(tg_split(t, 4, -1, parts, 4, &n), TG_OK);
  cr_assert_eq(n, 2);
  GEOM(parts[1], L(2, 3), L(7, 1), 4);
  cr_assert_eq(tg_chunk(t, 3, 0, parts, &n), TG_OK); /* 2 rows in 3 chunks: torch gives 2 */
  cr_assert_eq(n, 2);
  cr_assert_eq(tg_split(t, 1, 1, parts, 4, &n), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_split", "7 pieces");
  cr_assert_eq(n, 0);
  cr_assert_eq(tg_chunk(t, 0, 1, parts, &n), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_chunk", "chunks 0");
  tg_scope_end(sc);
}

/* As torch.chunk: a dim of size 0 gives `chunks` empty pieces; torch.split gives one, and
 * only there takes split_size 0. */
TG_TEST(views, chunk_and_split_of_an_empty_dim) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(2, 0), TG_OPTS(.dtype = TG_F64));
  tg_tensor *parts[4];
  int n = 0;
  cr_assert_eq(tg_chunk(t, 3, 1, parts, &n), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(n, 3);
  for (int k = 0; k < 3; k++) tg_assert_sizes(parts[k], 2, 0);
  cr_assert_eq(tg_chunk(t, 1, -1, parts, &n), TG_OK);
  cr_assert_eq(n, 1);
  cr_assert_eq(tg_chunk(t, 4, 0, parts, &n), TG_OK); /* the non-empty dim: 2 pieces */
  cr_assert_eq(n, 2);
  tg_assert_sizes(parts[1], 1, 0);
  cr_assert_eq(tg_split(t, 3, 1, parts, 4, &n), TG_OK);
  cr_assert_eq(n, 1);
  tg_assert_sizes(parts[0], 2, 0);
  cr_assert_eq(tg_split(t, 0, 1, parts, 4, &n), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(n, 1);
  cr_assert_eq(tg_split(t, 0, 0, parts, 4, &n), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_split", "split_size 0", "[2, 0]", "size 2");
  cr_assert_eq(tg_split(t, -1, 1, parts, 4, &n), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_split", "split_size -1");
  tg_scope_end(sc);
}

/* A source that overlaps the destination is read whole before anything is written: the
 * transpose of a matrix into itself, and a window shifted either way (x[1:] = x[:-1],
 * x[:-1] = x[1:]). */
TG_TEST(views, copy_from_an_overlapping_source_reads_it_first) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_options o = {.dtype = (tg_dtype)dt};
    tg_tensor *m = tg_view(tg_arange(1, 10, 1, o), TG_SHAPE(3, 3));
    cr_assert_eq(tg_copy_(m, tg_t(m)), TG_OK, "%s", tg_last_error_message());
    tg_test_expect_values(m, 9, (const double[]){1, 4, 7, 2, 5, 8, 3, 6, 9}, 0);
    tg_tensor *x = tg_arange(0, 6, 1, o);
    cr_assert_eq(tg_copy_(tg_narrow(x, 0, 1, 5), tg_narrow(x, 0, 0, 5)), TG_OK);
    tg_test_expect_values(x, 6, (const double[]){0, 0, 1, 2, 3, 4}, 0);
    x = tg_arange(0, 6, 1, o);
    cr_assert_eq(tg_copy_(tg_narrow(x, 0, 0, 5), tg_narrow(x, 0, 1, 5)), TG_OK);
    tg_test_expect_values(x, 6, (const double[]){1, 2, 3, 4, 5, 5}, 0);
    /* a reversed-order window over the same elements, and a row broadcast over its matrix */
    x = tg_arange(0, 6, 1, o);
    tg_tensor *pairs = tg_view(x, TG_SHAPE(3, 2));
    cr_assert_eq(tg_copy_(tg_t(pairs), tg_view(tg_narrow(x, 0, 0, 6), TG_SHAPE(2, 3))), TG_OK);
    tg_test_expect_values(x, 6, (const double[]){0, 3, 1, 4, 2, 5}, 0);
    m = tg_view(tg_arange(1, 10, 1, o), TG_SHAPE(3, 3));
    cr_assert_eq(tg_copy_(m, tg_select(m, 0, 2)), TG_OK);
    tg_test_expect_values(m, 9, (const double[]){7, 8, 9, 7, 8, 9, 7, 8, 9}, 0);
    /* the same elements in the same order: written in place, no copy needed */
    cr_assert_eq(tg_copy_(m, tg_view(m, TG_SHAPE(3, 3))), TG_OK);
    tg_test_expect_values(m, 9, (const double[]){7, 8, 9, 7, 8, 9, 7, 8, 9}, 0);
  }
  tg_scope_end(sc);
}

TG_TEST(views, expand_squeeze_unsqueeze) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(range(3), TG_SHAPE(3, 1));
  tg_tensor *e = tg_expand(t, TG_SHAPE(2, 3, 4));
  GEOM(e, L(2, 3, 4), L(0, 1, 0), 0);
  tg_tensor *keep = tg_expand(t, TG_SHAPE(-1, 5));
  GEOM(keep, L(3, 5), L(1, 0), 0);
  cr_assert_eq(tg_test_at(keep, 14), 2.0);
  tg_tensor *u = tg_unsqueeze(t, 0);
  tg_assert_sizes(u, 1, 3, 1);
  tg_tensor *u2 = tg_unsqueeze(t, -1);
  tg_assert_sizes(u2, 3, 1, 1);
  tg_assert_sizes(tg_squeeze(u, 0), 3, 1);
  tg_assert_sizes(tg_squeeze(u, 1), 1, 3, 1); /* not size 1: unchanged */
  tg_assert_sizes(tg_squeeze_all(u), 3);
  cr_assert(tg_shares_storage(t, tg_squeeze_all(e)));
  tg_scope_end(sc);
}

TG_TEST(views, reshape_copies_only_when_strides_forbid_a_view) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(range(12), TG_SHAPE(3, 4));
  tg_tensor *tr = tg_t(t);
  tg_tensor *r = tg_reshape(tr, TG_SHAPE(12));
  cr_assert(!tg_shares_storage(t, r));
  cr_assert_eq(tg_test_at(r, 1), 4.0);
  cr_assert_null(tg_view(tr, TG_SHAPE(12)));
  tg_expect_error(TG_ERR_SHAPE, "tg_view", "[12]", "[4, 3]", "tg_reshape");
  /* a transposed view split along a whole dim is still a view */
  tg_tensor *ok = tg_view(tr, TG_SHAPE(2, 2, 3));
  cr_assert(tg_shares_storage(t, ok));
  GEOM(ok, L(2, 2, 3), L(2, 1, 4), 0);
  tg_scope_end(sc);
}

TG_TEST(views, contiguous_of_a_non_contiguous_view_copies) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(range(6), TG_SHAPE(2, 3));
  tg_tensor *c = tg_contiguous(tg_t(t));
  cr_assert(tg_is_contiguous(c));
  cr_assert(!tg_shares_storage(t, c));
  GEOM(c, L(3, 2), L(2, 1), 0);
  cr_assert_eq(tg_test_at(c, 1), 3.0);
  cr_assert_eq(tg_contiguous(t), t); /* already contiguous: the same tensor */
  tg_tensor *cl = tg_clone(t);
  cr_assert(!tg_shares_storage(t, cl));
  tg_scope_end(sc);
}

TG_TEST(views, writes_through_a_view_reach_the_base) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(3, 4), TG_OPTS(.dtype = TG_F64));
  uint64_t v0 = tg_version(t);
  tg_tensor *col = tg_select(t, 1, 2);
  cr_assert_eq(tg_fill_(col, 5.0), TG_OK);
  cr_assert_eq(tg_test_at(t, 2), 5.0);
  cr_assert_eq(tg_test_at(t, 6), 5.0);
  cr_assert_eq(tg_test_at(t, 3), 0.0);
  cr_assert_gt(tg_version(t), v0);
  tg_tensor *src = tg_arange(0, 4, 1, TG_OPTS_DEFAULT); /* F32 into F64, broadcast over rows */
  cr_assert_eq(tg_copy_(tg_narrow(t, 0, 1, 2), src), TG_OK);
  cr_assert_eq(tg_test_at(t, 7), 3.0);
  cr_assert_eq(tg_test_at(t, 0), 0.0);
  tg_scope_end(sc);
}

TG_TEST(views, bad_views_are_errors_naming_op_argument_and_sizes) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(range(12), TG_SHAPE(3, 4));
  cr_assert_null(tg_view(t, TG_SHAPE(5, -1)));
  tg_expect_error(TG_ERR_SHAPE, "tg_view", "[5, -1]", "[3, 4]");
  cr_assert_null(tg_view(t, TG_SHAPE(-1, -1)));
  tg_expect_error(TG_ERR_SHAPE, "only one dim can be -1");
  cr_assert_null(tg_transpose(t, 0, 2));
  tg_expect_error(TG_ERR_INDEX, "tg_transpose", "dim1 2", "2-dim");
  cr_assert_null(tg_narrow(t, 1, 2, 3));
  tg_expect_error(TG_ERR_INDEX, "tg_narrow", "start 2, length 3", "size 4", "[3, 4]");
  cr_assert_null(tg_select(t, 0, 3));
  tg_expect_error(TG_ERR_INDEX, "tg_select", "index 3", "size 3");
  cr_assert_null(tg_slice(t, 0, 0, 2, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_slice", "step 0");
  cr_assert_null(tg_expand(t, TG_SHAPE(3, 8)));
  tg_expect_error(TG_ERR_SHAPE, "tg_expand", "[3, 4]", "[3, 8]", "dim 1 has size 4, not 1 or 8");
  /* a negative size other than -1 is named as such (was "dim 0 has size 1, not 1") */
  tg_tensor *one = tg_zeros(TG_SHAPE(1), TG_OPTS_DEFAULT);
  cr_assert_null(tg_expand(one, TG_SHAPE(-2)));
  tg_expect_error(TG_ERR_SHAPE,
                  "tg_expand: cannot expand [1] to [-2]: size -2 for dim 0 is negative (only -1, "
                  "keep the size, is allowed)");
  cr_assert_null(tg_expand(one, TG_SHAPE(-3, 1)));
  tg_expect_error(TG_ERR_SHAPE, "size -3 for dim 0 is negative");
  cr_assert_null(tg_expand(t, TG_SHAPE(4)));
  tg_expect_error(TG_ERR_SHAPE, "tg_expand", "1 dims");
  cr_assert_null(tg_permute(t, 2, (int[]){0, 0}));
  tg_expect_error(TG_ERR_INDEX, "tg_permute", "appears twice");
  cr_assert_null(tg_unsqueeze(t, 3));
  tg_expect_error(TG_ERR_INDEX, "tg_unsqueeze", "dim 3");
  cr_assert_null(tg_as_strided(t, TG_SHAPE(4, 4), (int64_t[]){4, 1}, 0));
  tg_expect_error(TG_ERR_INDEX, "tg_as_strided", "outside the storage of 12 elements");
  cr_assert_eq(tg_copy_(tg_expand(tg_zeros(TG_SHAPE(1), TG_OPTS_DEFAULT), TG_SHAPE(3)), t),
               TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_copy_", "[3, 4]", "[3]");
  cr_assert_eq(tg_fill_(tg_expand(tg_zeros(TG_SHAPE(1), TG_OPTS_DEFAULT), TG_SHAPE(3)), 1.0),
               TG_OK); /* filling an expanded view writes the one element: allowed */
  tg_scope_end(sc);
}

TG_TEST(views, null_inputs_propagate_the_first_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(range(12), TG_SHAPE(3, 4));
  tg_tensor *bad = tg_narrow(t, 0, 5, 1); /* fails: the first error */
  tg_tensor *chained = tg_transpose(tg_unsqueeze(bad, 0), 0, 1);
  cr_assert_null(chained);
  tg_expect_error(TG_ERR_INDEX, "tg_narrow");
  cr_assert_null(tg_view(NULL, TG_SHAPE(2)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_view", "t is NULL");
  tg_scope_end(sc);
}

TG_TEST(views, recorded_in_place_write_through_a_view_is_refused) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *w =
      tg_from_data(TG_SHAPE(2), (double[]){5, 6}, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *b = tg_zeros(TG_SHAPE(4), TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_add_(tg_narrow(b, 0, 1, 2), w), TG_ERR_UNSUPPORTED);
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_add_: ", "in-place operation on a view");
  cr_assert_eq(tg_test_at(b, 1), 0.0); /* untouched */
  tg_no_grad_begin();                  /* not recorded: allowed */
  cr_assert_eq(tg_add_(tg_narrow(b, 0, 1, 2), w), TG_OK);
  tg_no_grad_end();
  cr_assert_eq(tg_test_at(b, 2), 6.0);
  tg_scope_end(sc);
}

TG_TEST(views, a_view_whose_base_history_was_rewritten_is_refused) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(4), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_mul_scalar(x, 2.0);
  tg_tensor *v = tg_narrow(y, 0, 0, 2);
  cr_assert_eq(tg_mul_scalar_(y, 3.0), TG_OK); /* rebases y's history */
  cr_assert_null(tg_sum(v));
  tg_expect_error(TG_ERR_STATE, "tg_sum: ", "view whose base was modified");
  cr_assert_not_null(tg_sum(tg_narrow(y, 0, 0, 2))); /* a fresh view is fine */
  tg_scope_end(sc);
}
