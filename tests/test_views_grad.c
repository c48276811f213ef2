/* Gradients of the view and copy ops (src/ops/views.c, src/ops/copy.c): gradcheck and
 * gradgradcheck in F64 of every view op on contiguous, transposed and sliced-with-offset
 * inputs. gradgradcheck runs the backward ops' own backward (slice_backward -> slice,
 * select_backward -> select, expand -> sum_to_size, view -> reshape...). */
#include "testutil.h"

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
