/* Gradients of the view and copy ops (src/ops/views.c, src/ops/copy.c): gradcheck and
 * gradgradcheck in F64 of every view op on contiguous, transposed and sliced-with-offset
 * inputs. gradgradcheck runs the backward ops' own backward (slice_backward -> slice,
 * select_backward -> select, expand -> sum_to_size, view -> reshape...). */
#include "testutil.h"
#include "alloc_sweep.h"

static const tg_gradcheck_options quiet = {.quiet = true};

typedef enum layout { CONTIGUOUS, TRANSPOSED, SLICED, NUM_LAYOUTS } layout;
static const char *const layout_names[] = {"contiguous", "transposed", "sliced"};

/* An F64 [2, 3, 4] leaf that requires grad: contiguous, the reversed permutation of a
 * contiguous [4, 3, 2] (strides [1, 2, 6]) or a window at an offset of a [3, 5, 6]. */
static tg_tensor *leaf(layout l) {
  tg_options o = {.dtype = TG_F64};
  tg_tensor *t;
  switch (l) {
  case TRANSPOSED:
    t = tg_permute(tg_uniform(TG_SHAPE(4, 3, 2), -2, 2, o, NULL), 3, (const int[]){2, 1, 0});
    break;
  case SLICED:
    t = tg_narrow(
        tg_narrow(tg_narrow(tg_uniform(TG_SHAPE(3, 5, 6), -2, 2, o, NULL), 0, 1, 2), 1, 1, 3), 2, 2,
        4);
    break;
  default:
    t = tg_uniform(TG_SHAPE(2, 3, 4), -2, 2, o, NULL);
    break;
  }
  cr_assert(t && tg_set_requires_grad(t, true) == TG_OK, "%s", tg_last_error_message());
  tg_assert_sizes(t, 2, 3, 4);
  return t;
}

/* A function of one input with up to 4 outputs. */
typedef tg_status (*view_fn)(const tg_tensor *x, tg_tensor **out);

typedef struct view_case {
  const char *name;
  view_fn fn;
  int n_outputs;
} view_case;

static tg_status run_case(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const view_case *c = user;
  return c->fn(in[0], out);
}

static tg_status one(tg_tensor *t, tg_tensor **out) {
  out[0] = t;
  return t ? TG_OK : tg_last_error();
}

static tg_status f_transpose(const tg_tensor *x, tg_tensor **o) {
  return one(tg_transpose(x, 0, 2), o);
}
static tg_status f_transpose_neg(const tg_tensor *x, tg_tensor **o) {
  return one(tg_transpose(x, -1, 1), o);
}
static tg_status f_t(const tg_tensor *x, tg_tensor **o) { return one(tg_t(tg_select(x, 0, 1)), o); }
static tg_status f_permute(const tg_tensor *x, tg_tensor **o) {
  return one(tg_permute(x, 3, (const int[]){2, 0, 1}), o);
}
/* Splitting the last dim is a view for every layout here. */
static tg_status f_view(const tg_tensor *x, tg_tensor **o) {
  return one(tg_view(x, TG_SHAPE(2, 3, 2, -1)), o);
}
static tg_status f_view_unit_dims(const tg_tensor *x, tg_tensor **o) {
  return one(tg_view(x, TG_SHAPE(1, 2, 3, 1, 4)), o);
}
/* A view when the strides allow it, a copy otherwise. */
static tg_status f_reshape(const tg_tensor *x, tg_tensor **o) {
  return one(tg_reshape(x, TG_SHAPE(4, 6)), o);
}
static tg_status f_flatten(const tg_tensor *x, tg_tensor **o) { return one(tg_flatten(x), o); }
static tg_status f_narrow(const tg_tensor *x, tg_tensor **o) {
  return one(tg_narrow(x, 1, 1, 2), o);
}
static tg_status f_narrow_neg(const tg_tensor *x, tg_tensor **o) {
  return one(tg_narrow(x, -1, -3, 3), o);
}
static tg_status f_slice_step(const tg_tensor *x, tg_tensor **o) {
  return one(tg_slice(x, 2, 1, 4, 2), o);
}
static tg_status f_slice_clamped(const tg_tensor *x, tg_tensor **o) {
  return one(tg_slice(x, 1, -2, 100, 1), o);
}
static tg_status f_slice_empty(const tg_tensor *x, tg_tensor **o) {
  return one(tg_slice(x, 2, 3, 1, 1), o);
}
static tg_status f_select(const tg_tensor *x, tg_tensor **o) { return one(tg_select(x, 1, -1), o); }
static tg_status f_select_twice(const tg_tensor *x, tg_tensor **o) {
  return one(tg_select(tg_select(x, 2, 3), 0, 1), o); /* [3] */
}
static tg_status f_chunk(const tg_tensor *x, tg_tensor **o) {
  int n = 0;
  tg_status st = tg_chunk(x, 3, 1, o, &n); /* 3 pieces of [2, 1, 4] */
  return st != TG_OK ? st : n == 3 ? TG_OK : tg_set_error(TG_ERR_STATE, "chunk gave %d", n);
}
static tg_status f_chunk_uneven(const tg_tensor *x, tg_tensor **o) {
  int n = 0;
  tg_status st = tg_chunk(x, 3, 2, o, &n); /* size 4 in chunks of 2: 2 pieces, like torch */
  return st != TG_OK ? st : n == 2 ? TG_OK : tg_set_error(TG_ERR_STATE, "chunk gave %d", n);
}
static tg_status f_split(const tg_tensor *x, tg_tensor **o) {
  int n = 0;
  tg_status st = tg_split(x, 3, -1, o, 4, &n); /* [.., 3] and [.., 1] */
  return st != TG_OK ? st : n == 2 ? TG_OK : tg_set_error(TG_ERR_STATE, "split gave %d", n);
}
static tg_status f_expand(const tg_tensor *x, tg_tensor **o) {
  return one(tg_expand(tg_unsqueeze(x, 1), TG_SHAPE(-1, 5, -1, -1)), o);
}
static tg_status f_expand_leading(const tg_tensor *x, tg_tensor **o) {
  return one(tg_expand(tg_narrow(x, 2, 1, 1), TG_SHAPE(3, 2, 3, 2)), o);
}
static tg_status f_expand_as(const tg_tensor *x, tg_tensor **o) {
  tg_tensor *like = tg_zeros(TG_SHAPE(2, 2, 3, 4), TG_OPTS(.dtype = TG_F64));
  return one(tg_expand_as(x, like), o);
}
static tg_status f_squeeze(const tg_tensor *x, tg_tensor **o) {
  return one(tg_squeeze(tg_narrow(x, 1, 2, 1), 1), o);
}
static tg_status f_squeeze_noop(const tg_tensor *x, tg_tensor **o) {
  return one(tg_squeeze(x, 2), o);
}
static tg_status f_squeeze_all(const tg_tensor *x, tg_tensor **o) {
  return one(tg_squeeze_all(tg_unsqueeze(tg_narrow(x, 0, 1, 1), -1)), o);
}
static tg_status f_unsqueeze(const tg_tensor *x, tg_tensor **o) {
  return one(tg_unsqueeze(x, -1), o);
}
static tg_status f_unsqueeze_front(const tg_tensor *x, tg_tensor **o) {
  return one(tg_unsqueeze(x, 0), o);
}
static tg_status f_contiguous(const tg_tensor *x, tg_tensor **o) {
  return one(tg_contiguous(x), o);
}
static tg_status f_clone(const tg_tensor *x, tg_tensor **o) { return one(tg_clone(x), o); }
/* Round trip through F32: the identity up to rounding (checked with a coarse eps). */
static tg_status f_to_f32_and_back(const tg_tensor *x, tg_tensor **o) {
  return one(tg_to_dtype(tg_to_dtype(x, TG_F32), TG_F64), o);
}
static tg_status f_chain(const tg_tensor *x, tg_tensor **o) {
  /* views of views of views, ending non-contiguous */
  tg_tensor *t = tg_transpose(tg_slice(tg_unsqueeze(x, 0), 3, 0, 4, 3), 1, 3);
  return one(tg_select(tg_reshape(t, TG_SHAPE(2, 3, -1)), 1, 2), o);
}

static const view_case cases[] = {
    {"transpose", f_transpose, 1},
    {"transpose(-1, 1)", f_transpose_neg, 1},
    {"t", f_t, 1},
    {"permute", f_permute, 1},
    {"view", f_view, 1},
    {"view with unit dims", f_view_unit_dims, 1},
    {"reshape", f_reshape, 1},
    {"flatten", f_flatten, 1},
    {"narrow", f_narrow, 1},
    {"narrow negative", f_narrow_neg, 1},
    {"slice with step", f_slice_step, 1},
    {"slice clamped", f_slice_clamped, 1},
    {"slice empty", f_slice_empty, 1},
    {"select", f_select, 1},
    {"select twice", f_select_twice, 1},
    {"chunk", f_chunk, 3},
    {"chunk uneven", f_chunk_uneven, 2},
    {"split", f_split, 2},
    {"expand", f_expand, 1},
    {"expand leading", f_expand_leading, 1},
    {"expand_as", f_expand_as, 1},
    {"squeeze", f_squeeze, 1},
    {"squeeze no-op", f_squeeze_noop, 1},
    {"squeeze_all", f_squeeze_all, 1},
    {"unsqueeze", f_unsqueeze, 1},
    {"unsqueeze front", f_unsqueeze_front, 1},
    {"contiguous", f_contiguous, 1},
    {"clone", f_clone, 1},
    {"chain", f_chain, 1},
};

static void check_case(const view_case *c, layout l, tg_gradcheck_options opts) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(l);
  cr_assert_eq(tg_gradcheck(run_case, (void *)c, 1, &x, c->n_outputs, opts), TG_OK, "%s, %s: %s",
               c->name, layout_names[l], tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(run_case, (void *)c, 1, &x, c->n_outputs, opts), TG_OK,
               "%s, %s (gradgrad): %s", c->name, layout_names[l], tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(views_grad, every_view_op_on_every_layout) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int l = 0; l < NUM_LAYOUTS; l++) check_case(&cases[i], (layout)l, quiet);
}

TG_TEST(views_grad, to_dtype_round_trip) {
  static const view_case c = {"to_dtype F32 and back", f_to_f32_and_back, 1};
  /* F32 rounding (~1e-7 relative) over a difference step of 1e-2 stays below 1e-4. */
  tg_gradcheck_options coarse = {.eps = 1e-2, .atol = 1e-4, .rtol = 1e-4, .quiet = true};
  for (int l = 0; l < NUM_LAYOUTS; l++) check_case(&c, (layout)l, coarse);
}

TG_TEST(views_grad, reshape_of_a_transposed_input_copies_and_still_differentiates) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TRANSPOSED);
  tg_tensor *r = tg_reshape(x, TG_SHAPE(4, 6));
  cr_assert(r && !tg_shares_storage(r, x), "strides [1, 2, 6] cannot merge dims 0 and 1");
  tg_tensor *g = tg_arange(0, 24, 1, TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_backward(r, tg_view(g, TG_SHAPE(4, 6))), TG_OK, "%s", tg_last_error_message());
  /* The gradient has x's sizes and element i of g lands where element i of x sits. */
  tg_assert_close(tg_grad(x), tg_view(g, TG_SHAPE(2, 3, 4)), 0, 0);
  tg_scope_end(sc);
}

TG_TEST(views_grad, gradients_of_overlapping_views_accumulate) {
  tg_scope sc = tg_scope_begin();
  /* Two narrows sharing column 1, and an expand that reads each element 3 times. */
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *a = tg_narrow(x, 1, 0, 2), *b = tg_narrow(x, 1, 1, 2);
  tg_tensor *e = tg_expand(tg_unsqueeze(x, 0), TG_SHAPE(3, 2, 3));
  tg_tensor *y = tg_add(tg_add(tg_sum(a), tg_sum(b)), tg_sum(e));
  cr_assert_eq(tg_backward(y, NULL), TG_OK, "%s", tg_last_error_message());
  const double want[] = {4, 5, 4, 4, 5, 4};
  tg_assert_close(tg_grad(x), tg_from_data(TG_SHAPE(2, 3), want, TG_OPTS(.dtype = TG_F64)), 0, 0);
  tg_scope_end(sc);
}

/* ---- as_strided: recorded on the tape; backward adds into the storage elements read ---- */

typedef struct strided_case {
  int ndim;
  int64_t sizes[4], strides[4], offset; /* offset from the storage's start */
} strided_case;

static tg_status f_as_strided(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const strided_case *c = user;
  out[0] = tg_as_strided(in[0], c->ndim, c->sizes, c->strides, c->offset);
  return out[0] ? TG_OK : tg_last_error();
}

static void check_strided(const char *what, tg_tensor *x, const strided_case *c) {
  cr_assert_eq(tg_gradcheck(f_as_strided, (void *)c, 1, &x, 1, quiet), TG_OK, "%s: %s", what,
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(f_as_strided, (void *)c, 1, &x, 1, quiet), TG_OK,
               "%s (gradgrad): %s", what, tg_last_error_message());
}

TG_TEST(views_grad, as_strided_gradcheck_on_every_layout) {
  tg_scope sc = tg_scope_begin();
  for (int l = 0; l < NUM_LAYOUTS; l++) {
    tg_tensor *x = leaf((layout)l);
    int64_t o = tg_offset(x); /* relative to x's first element */
    const strided_case window = {
        2, {2, 3}, {tg_stride(x, 1), tg_stride(x, 2)}, o + tg_stride(x, 0)};
    const strided_case diagonal = {1, {2}, {tg_stride(x, 0) + tg_stride(x, 1)}, o};
    check_strided(layout_names[l], x, &window);
    check_strided(layout_names[l], x, &diagonal);
  }
  tg_scope_end(sc);
}

/* im2col: the 9 overlapping 3x3 patches of a 5x5 image; each pixel's gradient is the number
 * of patches that hold it (upstream gradient 1), as in torch.as_strided's backward. */
TG_TEST(views_grad, as_strided_overlapping_windows_add_up) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *img = tg_uniform(TG_SHAPE(5, 5), -1, 1, TG_OPTS(.dtype = TG_F64), NULL);
  cr_assert_eq(tg_set_requires_grad(img, true), TG_OK);
  const strided_case patches = {4, {3, 3, 3, 3}, {5, 1, 5, 1}, 0};
  tg_tensor *cols = tg_as_strided(img, 4, patches.sizes, patches.strides, 0);
  cr_assert_not_null(cols, "%s", tg_last_error_message());
  cr_assert_str_eq(tg_grad_fn_name(cols), "as_strided");
  cr_assert_eq(tg_backward(tg_sum(cols), NULL), TG_OK, "%s", tg_last_error_message());
  const double want[] = {1, 2, 3, 2, 1, 2, 4, 6, 4, 2, 3, 6, 9, 6, 3, 2, 4, 6, 4, 2, 1, 2, 3, 2, 1};
  tg_assert_close(tg_grad(img), tg_from_data(TG_SHAPE(5, 5), want, TG_OPTS(.dtype = TG_F64)), 0, 0);
  check_strided("im2col 3x3 of 5x5", img, &patches);
  tg_scope_end(sc);
}

/* The offset counts from the storage: on a narrowed base, 0 is the storage's first element,
 * not the base's; the gradient reaches only the base's own elements. */
TG_TEST(views_grad, as_strided_on_a_narrowed_base_counts_from_the_storage) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *full = tg_arange(0, 10, 1, TG_OPTS(.dtype = TG_F64));
  tg_tensor *base = tg_narrow(full, 0, 4, 6); /* elements 4..9, offset 4 */
  tg_tensor *x = tg_detach(base);
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  tg_tensor *from_storage = tg_as_strided(x, TG_SHAPE(3), (int64_t[]){3}, 0); /* 0, 3, 6 */
  cr_assert_eq(tg_test_at(from_storage, 0), 0.0);
  cr_assert_eq(tg_test_at(from_storage, 2), 6.0);
  tg_tensor *own = tg_as_strided(x, TG_SHAPE(3), (int64_t[]){2}, tg_offset(x)); /* 4, 6, 8 */
  cr_assert_eq(tg_test_at(own, 0), 4.0);
  cr_assert_eq(tg_backward(tg_add(tg_sum(from_storage), tg_sum(own)), NULL), TG_OK, "%s",
               tg_last_error_message());
  /* x is storage elements 4..9: element 6 is read by both, 4 and 8 by own, 0 and 3 by
   * neither of x's elements (they are outside x: no gradient goes anywhere for them). */
  const double want[] = {1, 0, 2, 0, 1, 0};
  tg_assert_close(tg_grad(x), tg_from_data(TG_SHAPE(6), want, TG_OPTS(.dtype = TG_F64)), 0, 0);
  const strided_case outside = {1, {3}, {3}, 0}, inside = {2, {2, 2}, {1, 2}, 5};
  check_strided("narrowed base, storage outside it", x, &outside);
  check_strided("narrowed base, its elements", x, &inside);
  tg_scope_end(sc);
}

/* A base that overlaps itself (an expanded view) shares each storage element's gradient
 * among the elements that sit on it, so the expand's backward sums it back exactly. */
TG_TEST(views_grad, as_strided_of_an_expanded_base) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_uniform(TG_SHAPE(3), -1, 1, TG_OPTS(.dtype = TG_F64), NULL);
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  tg_tensor *e = tg_expand(x, TG_SHAPE(4, 3));                                /* strides [0, 1] */
  tg_tensor *y = tg_as_strided(e, TG_SHAPE(2), (int64_t[]){2}, tg_offset(e)); /* x0, x2 */
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  const double want[] = {1, 0, 1};
  tg_assert_close(tg_grad(x), tg_from_data(TG_SHAPE(3), want, TG_OPTS(.dtype = TG_F64)), 1e-15,
                  1e-15);
  tg_scope_end(sc);
}

TG_TEST(views_grad, as_strided_outside_the_storage_is_refused) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x =
      tg_narrow(tg_zeros(TG_SHAPE(10), TG_OPTS(.dtype = TG_F64, .requires_grad = true)), 0, 4, 6);
  cr_assert_null(tg_as_strided(x, TG_SHAPE(3), (int64_t[]){4}, 4)); /* 4, 8, 12 */
  tg_expect_error(TG_ERR_INDEX, "tg_as_strided", "reach elements 4..12",
                  "outside the storage of 10 elements",
                  "the offset counts from the storage's start", "offset is 4");
  cr_assert_null(tg_as_strided(x, TG_SHAPE(2), (int64_t[]){-1}, 0));
  tg_expect_error(TG_ERR_INDEX, "tg_as_strided", "reach elements -1..0");
  /* Through tg_apply_ex too: the forward checks what a caller passes. */
  const tg_op_desc *op = tg_op_lookup("as_strided");
  tg_tensor *out = NULL;
  cr_assert_eq(tg_apply_ex(op, 1, (const tg_tensor *const[]){x}, 0, NULL, 4,
                           (const int64_t[]){1, 3, 4, 4}, 1, &out),
               TG_ERR_INDEX);
  cr_assert_eq(tg_apply_ex(op, 1, (const tg_tensor *const[]){x}, 0, NULL, 3,
                           (const int64_t[]){1, 3, 4}, 1, &out),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_as_strided", "3 given");
  tg_scope_end(sc);
}

/* as_strided's backward under allocation failure: overlapping windows of an expanded base
 * (the shares path too), forward and backward. */
static tg_status as_strided_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(4), (const double[]){1, 2, 3, 4},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *e = x ? tg_expand(x, TG_SHAPE(2, 4)) : NULL;
  tg_tensor *w = e ? tg_as_strided(e, TG_SHAPE(3, 2), (int64_t[]){1, 1}, tg_offset(e)) : NULL;
  tg_tensor *y = w ? tg_sum(tg_mul(w, w)) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = clean(tg_backward(y, NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(views_grad, as_strided_allocation_failures) {
  sweep("as_strided backward", as_strided_step, NULL);
}
