/* Sizes that overflow and integers that must not travel as doubles (issue 8): every size,
 * stride and offset computation is checked, and view ops keep their integer parameters
 * exact. Each refusal names the function, the argument and the sizes. */
#include <float.h>
#include <math.h>

#include "testutil.h"

#define P53 ((int64_t)1 << 53)
#define P32 ((int64_t)1 << 32)
#define P40 ((int64_t)1 << 40)

static tg_tensor *range(int64_t n) { return tg_arange(0, (double)n, 1, TG_OPTS(.dtype = TG_F64)); }

static double at(const tg_tensor *t, int ndim, const int64_t *index) {
  double v = -1;
  cr_assert_eq(tg_get(t, index, &v), TG_OK, "tg_get: %s", tg_last_error_message());
  (void)ndim;
  return v;
}

/* ---- as_strided ---- */

TG_TEST(overflow, as_strided_span_that_overflows_is_refused) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *z = tg_zeros(TG_SHAPE(4), TG_OPTS(0));
  /* (2^61 + 1 - 1) * 8 = 2^64 wraps to 0: the span looked in bounds. */
  cr_assert_null(tg_as_strided(z, 1, (int64_t[]){((int64_t)1 << 61) + 1}, (int64_t[]){8}, 0));
  tg_expect_error(TG_ERR_INDEX, "tg_as_strided", "sizes [2305843009213693953]", "strides [8]",
                  "overflow");
  cr_assert_null(tg_as_strided(z, 2, (int64_t[]){P32, P32}, (int64_t[]){P32, 1}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_as_strided", "sizes [4294967296, 4294967296]", "overflows");
  cr_assert_null(tg_as_strided(z, 2, (int64_t[]){2, 2}, (int64_t[]){INT64_MAX, INT64_MAX}, 0));
  tg_expect_error(TG_ERR_INDEX, "tg_as_strided", "overflow int64");
  /* INT64_MIN as a stride: the span's negation would overflow too. */
  cr_assert_null(tg_as_strided(z, 1, (int64_t[]){2}, (int64_t[]){INT64_MIN}, 3));
  tg_expect_error(TG_ERR_INDEX, "tg_as_strided", "strides [-9223372036854775808]");
  tg_scope_end(sc);
}

TG_TEST(overflow, as_strided_checks_every_size_past_a_zero) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *z = tg_zeros(TG_SHAPE(4), TG_OPTS(0));
  cr_assert_null(tg_as_strided(z, 2, (int64_t[]){0, -5}, (int64_t[]){1, 1}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_as_strided", "sizes [0, -5]", "dim 1 is negative");
  /* An empty view may have any strides, but its offset must still lie in the storage. */
  tg_tensor *e = tg_as_strided(z, 2, (int64_t[]){0, 3}, (int64_t[]){1, INT64_MAX / 2}, 4);
  cr_assert_not_null(e, "%s", tg_last_error_message());
  cr_assert_eq(tg_numel(e), 0);
  cr_assert_null(tg_as_strided(z, 1, (int64_t[]){0}, (int64_t[]){1}, 5));
  tg_expect_error(TG_ERR_INDEX, "tg_as_strided", "offset 5", "storage of 4 elements");
  cr_assert_null(tg_as_strided(z, 3, (int64_t[]){0, P40, P40}, (int64_t[]){1, 1, 1}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_as_strided", "sizes [0, 1099511627776, 1099511627776]",
                  "overflows int64");
  tg_scope_end(sc);
}

/* Copies and reductions of an empty tensor with huge strides: the strided loop driver must
 * not multiply them (byte strides, merged dims). */
TG_TEST(overflow, empty_tensor_with_huge_strides_copies_and_sums) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *z = tg_zeros(TG_SHAPE(4), TG_OPTS(.dtype = TG_F64));
  tg_tensor *e =
      tg_as_strided(z, 3, (int64_t[]){3, 0, 2}, (int64_t[]){INT64_MAX / 4, 1, INT64_MIN}, 0);
  cr_assert_not_null(e, "%s", tg_last_error_message());
  /* In-place writes check the target for overlapping elements: an empty one has none. */
  tg_tensor *e2 = tg_as_strided(z, 2, (int64_t[]){0, 3}, (int64_t[]){1, INT64_MAX}, 0);
  cr_assert_not_null(e2, "%s", tg_last_error_message());
  cr_assert_eq(tg_copy_(e2, e2), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_fill_(e2, 1), TG_OK, "%s", tg_last_error_message());
  tg_tensor *c = tg_contiguous(e);
  cr_assert_not_null(c, "%s", tg_last_error_message());
  tg_assert_sizes(c, 3, 0, 2);
  double s = -1;
  cr_assert_eq(tg_item(tg_sum(e), &s), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(s, 0.0);
  /* A size-1 dim with a huge stride addresses only element offset. */
  tg_tensor *one = tg_as_strided(range(4), 2, (int64_t[]){1, 2}, (int64_t[]){INT64_MAX, 1}, 2);
  cr_assert_not_null(one, "%s", tg_last_error_message());
  tg_test_expect_values(tg_contiguous(one), 2, (double[]){2, 3}, 0);
  cr_assert_eq(tg_item(tg_sum(one), &s), TG_OK);
  cr_assert_eq(s, 5.0);
  tg_scope_end(sc);
}

/* Views of an empty tensor keep its offset: its strides may be anything, so start * stride
 * (found by the fuzzer: split of an empty as_strided view with stride INT64_MIN) is not
 * computed. */
TG_TEST(overflow, views_of_an_empty_tensor_with_huge_strides) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *z = tg_zeros(TG_SHAPE(4), TG_OPTS(0));
  tg_tensor *e = tg_as_strided(z, 2, (int64_t[]){0, 3}, (int64_t[]){1, INT64_MIN}, 1);
  cr_assert_not_null(e, "%s", tg_last_error_message());
  tg_tensor *n = tg_narrow(e, 1, 2, 1);
  cr_assert_not_null(n, "%s", tg_last_error_message());
  tg_assert_sizes(n, 0, 1);
  cr_assert_eq(tg_offset(n), 1);
  tg_tensor *s = tg_select(e, 1, 2);
  cr_assert_not_null(s, "%s", tg_last_error_message());
  tg_assert_sizes(s, 0);
  tg_tensor *out[3];
  int count = 0;
  cr_assert_eq(tg_split(e, 1, 1, out, 3, &count), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(count, 3);
  tg_tensor *huge = tg_slice(e, 1, 1, 3, INT64_MAX);
  cr_assert_not_null(huge, "%s", tg_last_error_message());
  tg_assert_sizes(huge, 0, 1);
  tg_scope_end(sc);
}

/* Reducing an empty dim gives zeros, with nothing formed from the other dims' strides
 * (sum_dim used to walk out's rows forming x pointers from its huge strides). */
TG_TEST(overflow, sum_over_an_empty_dim_with_huge_strides_elsewhere) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *z = tg_zeros(TG_SHAPE(4), TG_OPTS(.dtype = TG_F64));
  tg_tensor *e = tg_as_strided(z, 2, (int64_t[]){3, 0}, (int64_t[]){INT64_MAX / 2, 1}, 0);
  cr_assert_not_null(e, "%s", tg_last_error_message());
  tg_test_expect_values(tg_sum_dim(e, 1, false), 3, (double[]){0, 0, 0}, 0);
  tg_assert_sizes(tg_mean_dim(e, 1, true), 3, 1);
  tg_assert_sizes(tg_softmax(e, 1), 3, 0);
  tg_tensor *m = tg_mm(e, tg_zeros(TG_SHAPE(0, 2), TG_OPTS(.dtype = TG_F64)));
  cr_assert_not_null(m, "%s", tg_last_error_message());
  tg_test_expect_values(m, 6, (double[]){0, 0, 0, 0, 0, 0}, 0);
  tg_scope_end(sc);
}

/* ---- integers kept exact (not through a double) ---- */

TG_TEST(overflow, expand_keeps_sizes_above_2_53) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(range(3), TG_SHAPE(1, 3));
  tg_tensor *e = tg_expand(t, TG_SHAPE(P53 + 1, 3));
  cr_assert_not_null(e, "%s", tg_last_error_message());
  cr_assert_eq(tg_size(e, 0), P53 + 1, "size %lld", (long long)tg_size(e, 0));
  cr_assert_eq(tg_numel(e), 3 * (P53 + 1));
  /* The last row exists, one past it does not. */
  tg_tensor *last = tg_select(e, 0, P53);
  cr_assert_not_null(last, "%s", tg_last_error_message());
  tg_test_expect_values(last, 3, (double[]){0, 1, 2}, 0);
  cr_assert_null(tg_select(e, 0, P53 + 1));
  tg_expect_error(TG_ERR_INDEX, "tg_select", "index 9007199254740993", "size 9007199254740993");
  /* narrow/slice near 2^53: start and length are exact. */
  tg_tensor *n = tg_narrow(e, 0, P53, 1);
  cr_assert_not_null(n, "%s", tg_last_error_message());
  tg_assert_sizes(n, 1, 3);
  tg_tensor *s = tg_slice(e, 0, P53 - 1, INT64_MAX, 1);
  cr_assert_not_null(s, "%s", tg_last_error_message());
  tg_assert_sizes(s, 2, 3);
  tg_scope_end(sc);
}

TG_TEST(overflow, slice_with_step_int64_max_gives_one_element) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = range(5);
  tg_tensor *s = tg_slice(t, 0, 0, 5, INT64_MAX);
  cr_assert_not_null(s, "%s", tg_last_error_message());
  tg_assert_sizes(s, 1);
  tg_test_expect_values(s, 1, (double[]){0}, 0);
  tg_tensor *s2 = tg_slice(t, 0, 2, INT64_MAX, INT64_MAX);
  cr_assert_not_null(s2, "%s", tg_last_error_message());
  tg_test_expect_values(s2, 1, (double[]){2}, 0);
  tg_scope_end(sc);
}

TG_TEST(overflow, slicing_twice_with_huge_steps_keeps_a_valid_stride) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_view(range(12), TG_SHAPE(3, 4));
  tg_tensor *a = tg_slice(t, 1, 1, 4, P40);
  tg_tensor *b = tg_slice(a, 1, 0, 1, P40); /* 2^40 * 2^40 does not fit: size 1 keeps 2^40 */
  cr_assert_not_null(b, "%s", tg_last_error_message());
  tg_assert_sizes(b, 3, 1);
  tg_test_expect_values(tg_contiguous(b), 3, (double[]){1, 5, 9}, 0);
  tg_tensor *c = tg_slice(tg_slice(t, 0, 0, 3, INT64_MAX), 0, 0, 1, INT64_MAX);
  cr_assert_not_null(c, "%s", tg_last_error_message());
  tg_test_expect_values(tg_contiguous(c), 4, (double[]){0, 1, 2, 3}, 0);
  tg_scope_end(sc);
}

TG_TEST(overflow, split_with_a_huge_split_size_is_one_piece) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *out[2];
  int n = 0;
  cr_assert_eq(tg_split(range(7), INT64_MAX, 0, out, 2, &n), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(n, 1);
  tg_assert_sizes(out[0], 7);
  tg_scope_end(sc);
}

TG_TEST(overflow, chunk_of_a_dim_of_size_int64_max) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_expand(tg_ones(TG_SHAPE(1), TG_OPTS(0)), TG_SHAPE(INT64_MAX));
  cr_assert_not_null(t, "%s", tg_last_error_message());
  tg_tensor *out[3];
  int n = 0;
  cr_assert_eq(tg_chunk(t, 3, 0, out, &n), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(n, 3);
  tg_assert_sizes(out[0], INT64_MAX / 3 + 1);
  tg_assert_sizes(out[2], INT64_MAX - 2 * (INT64_MAX / 3 + 1));
  tg_scope_end(sc);
}

/* A user op reads its integer parameters exactly; a double would round 2^53 + 1. */
static tg_status probe_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)in;
  int64_t v = tg_ctx_int(ctx, 0), w = tg_ctx_int(ctx, 1);
  out[0] = tg_full(TG_SHAPE(2), 0, TG_OPTS(.dtype = TG_F64));
  if (!out[0]) return tg_last_error();
  tg_set(out[0], (int64_t[]){0}, (double)(v - P53));
  tg_set(out[0], (int64_t[]){1}, w == INT64_MIN ? 1.0 : 0.0);
  return TG_OK;
}

TG_TEST(overflow, op_integer_parameters_are_exact) {
  tg_op_desc desc = {.name = "overflow_int_probe",
                     .n_inputs = 1,
                     .n_outputs = 1,
                     .forward = {probe_forward, probe_forward}};
  cr_assert_eq(tg_op_register(&desc), TG_OK, "%s", tg_last_error_message());
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = range(1);
  tg_tensor *y = tg_apply1_ex(tg_op_lookup("overflow_int_probe"), 1, (const tg_tensor *[]){x}, 0,
                              NULL, 2, (const int64_t[]){P53 + 1, INT64_MIN});
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_test_expect_values(y, 2, (double[]){1, 1}, 0);
  int64_t many[TG_CTX_MAX_INTS + 1] = {0};
  cr_assert_null(tg_apply1_ex(tg_op_lookup("overflow_int_probe"), 1, (const tg_tensor *[]){x}, 0,
                              NULL, TG_CTX_MAX_INTS + 1, many));
  tg_expect_error(TG_ERR_ARGUMENT, "overflow_int_probe", "integer parameters");
  tg_scope_end(sc);
}

/* ---- products of sizes ---- */

TG_TEST(overflow, expand_whose_numel_overflows_is_refused) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_ones(TG_SHAPE(1, 1), TG_OPTS(0));
  cr_assert_null(tg_expand(t, TG_SHAPE(P32, P32)));
  tg_expect_error(TG_ERR_SHAPE, "tg_expand", "[1, 1]", "[4294967296, 4294967296]", "overflows");
  /* Just below the limit is a valid (lazy) view with an exact numel. */
  tg_tensor *big = tg_expand(t, TG_SHAPE(P32 / 2, P32 / 2));
  cr_assert_not_null(big, "%s", tg_last_error_message());
  cr_assert_eq(tg_numel(big), (int64_t)1 << 62);
  /* A new leading dim of 0 makes it empty, but the other sizes must still fit together. */
  cr_assert_null(tg_expand(t, TG_SHAPE(0, P40, P40, 1)));
  tg_expect_error(TG_ERR_SHAPE, "tg_expand", "overflows");
  tg_scope_end(sc);
}

TG_TEST(overflow, view_whose_numel_overflows_is_refused) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *z = tg_zeros(TG_SHAPE(0), TG_OPTS(0));
  cr_assert_null(tg_view(z, TG_SHAPE(P32, P32)));
  tg_expect_error(TG_ERR_SHAPE, "tg_view", "sizes [4294967296, 4294967296]", "overflows int64",
                  "input [0]");
  cr_assert_null(tg_reshape(z, TG_SHAPE(0, P32, P32)));
  tg_expect_error(TG_ERR_SHAPE, "tg_reshape", "sizes [0, 4294967296, 4294967296]", "overflows");
  cr_assert_null(tg_view(z, TG_SHAPE(P32, P32, -1)));
  tg_expect_error(TG_ERR_SHAPE, "tg_view", "overflows");
  tg_tensor *ok = tg_view(z, TG_SHAPE(0, P32, 2));
  cr_assert_not_null(ok, "%s", tg_last_error_message());
  cr_assert_eq(tg_numel(ok), 0);
  /* Every empty view can be copied: tg_empty bounds the same sizes. */
  tg_assert_sizes(tg_clone(ok), 0, P32, 2);
  tg_scope_end(sc);
}

TG_TEST(overflow, cat_whose_size_overflows_is_refused) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *big = tg_expand(tg_ones(TG_SHAPE(1), TG_OPTS(0)), TG_SHAPE(INT64_MAX / 2 + 1));
  cr_assert_not_null(big, "%s", tg_last_error_message());
  cr_assert_null(tg_cat(2, (const tg_tensor *[]){big, big}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_cat", "[4611686018427387904]", "overflows int64");
  tg_scope_end(sc);
}

TG_TEST(overflow, empty_with_too_many_elements_is_refused) {
  tg_scope sc = tg_scope_begin();
  cr_assert_null(tg_zeros(TG_SHAPE(P32, P32), TG_OPTS(0)));
  tg_expect_error(TG_ERR_SHAPE, "tg_zeros", "[4294967296, 4294967296]", "too many elements");
  cr_assert_null(tg_empty(TG_SHAPE(0, P40, P40), TG_OPTS(0)));
  tg_expect_error(TG_ERR_SHAPE, "tg_empty", "too many elements");
  tg_scope_end(sc);
}

/* ---- arange ---- */

TG_TEST(overflow, arange_with_too_many_elements_is_refused) {
  tg_scope sc = tg_scope_begin();
  cr_assert_null(tg_arange(0, 1e300, 1, TG_OPTS(0)));
  tg_expect_error(TG_ERR_SHAPE, "tg_arange", "start 0, end 1e+300, step 1", "too many");
  cr_assert_null(tg_arange(0, 1e19, 1, TG_OPTS(0)));
  tg_expect_error(TG_ERR_SHAPE, "tg_arange", "too many");
  /* I64 values must fit int64 (a double -> int64 conversion out of range is undefined). */
  cr_assert_null(tg_arange(1e19, 1e19 + 4096, 1024, TG_OPTS(.dtype = TG_I64)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_arange", "outside int64", "int64");
  tg_tensor *neg = tg_arange(-9.2e18, -9.2e18 + 4096, 2048, TG_OPTS(.dtype = TG_I64));
  cr_assert_not_null(neg, "%s", tg_last_error_message());
  cr_assert_eq(tg_numel(neg), 2);
  tg_scope_end(sc);
}

/* A C cast of NaN or of a float out of range to int64 is undefined: tensor conversions (copy,
 * to_dtype) convert as x86-64's cvttsd2si and so PyTorch's .to(torch.int64) do (INT64_MIN for
 * NaN, +-inf and anything outside [-2^63, 2^63)). A caller's value written by fill or tg_set
 * is refused instead when it does not fit, as PyTorch refuses it (next test). */
TG_TEST(overflow, float_to_int64_conversions_are_defined) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *i = tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64));
  int64_t got[8];
  cr_assert_eq(tg_fill_(i, -3.7), TG_OK);
  cr_assert_eq(tg_to_host_array(i, got, 2 * sizeof *got), TG_OK);
  cr_assert(got[0] == -3 && got[1] == -3);
  cr_assert_eq(tg_fill_(i, NAN), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_fill_: value nan cannot be converted to int64");
  cr_assert_eq(tg_fill_(i, -1e30), TG_ERR_ARGUMENT);
  /* torch.tensor([nan, 1e300, 3.7, -3.7, inf, -inf, 2**63, 9.2e18]).to(torch.int64) */
  const double from[8] = {NAN, 1e300, 3.7, -3.7, INFINITY, -INFINITY, 0x1p63, 9.2e18};
  const int64_t want[8] = {INT64_MIN, INT64_MIN, 3,         -3,
                           INT64_MIN, INT64_MIN, INT64_MIN, 9200000000000000000};
  for (int dt = 0; dt < 2; dt++) {
    tg_tensor *f64 = tg_from_data(TG_SHAPE(8), from, TG_OPTS(.dtype = TG_F64));
    tg_tensor *f = dt ? f64 : tg_to_dtype(f64, TG_F32);
    cr_assert_eq(tg_to_host_array(tg_to_dtype(f, TG_I64), got, sizeof got), TG_OK, "%s",
                 tg_last_error_message());
    for (int k = 0; k < 8; k++)
      if (dt || k != 7) /* 9.2e18 is not a float: F32 rounds it first */
        cr_assert_eq(got[k], want[k], "%s element %d: got %lld", dt ? "F64" : "F32", k,
                     (long long)got[k]);
  }
  cr_assert_eq(tg_set(i, (int64_t[]){1}, INFINITY), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_set: value inf cannot be converted to int64");
  tg_scope_end(sc);
}

/* PyTorch refuses a value that overflows the dtype ("value cannot be converted to type float
 * without overflow"): a finite double beyond FLT_MAX for F32 (inf and NaN are kept), NaN, inf
 * and values outside [-2^63, 2^63) for I64. Failed before: tg wrote inf or saturated. */
TG_TEST(overflow, a_value_that_does_not_fit_the_dtype_is_refused) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *f = tg_zeros(TG_SHAPE(2), TG_OPTS(0));
  cr_assert_eq(tg_fill_(f, 1e300), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_fill_: value 1e+300 cannot be converted",
                  "float32 without overflow");
  cr_assert_eq(tg_fill_(f, -3.5e38), TG_ERR_ARGUMENT);
  cr_assert_eq(tg_fill_(f, (double)FLT_MAX * (1 + 0x1p-40)), TG_ERR_ARGUMENT);
  double v = 0;
  cr_assert_eq(tg_fill_(f, -(double)FLT_MAX), TG_OK);
  cr_assert_eq(tg_item(tg_select(f, 0, 1), &v), TG_OK);
  cr_assert_eq(v, -(double)FLT_MAX);
  cr_assert_eq(tg_fill_(f, INFINITY), TG_OK);
  cr_assert_eq(tg_fill_(f, NAN), TG_OK);
  cr_assert_eq(tg_fill_(f, 1e-300), TG_OK); /* underflow to 0 is fine */
  cr_assert_eq(tg_set(f, (int64_t[]){0}, 1e39), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_set: value 1e+39");
  cr_assert_null(tg_full(TG_SHAPE(2), 3.5e38, TG_OPTS(0)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_full: value 3.5e+38 cannot be converted to float32");
  cr_assert_null(tg_full_like(f, -1e300));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_full_like: value -1e+300");
  cr_assert_null(tg_scalar(1e300, TG_OPTS(0)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_scalar: value");
  cr_assert_not_null(tg_full(TG_SHAPE(2), 1e300, TG_OPTS(.dtype = TG_F64)));
  tg_tensor *i = tg_full(TG_SHAPE(2), -0x1p63, TG_OPTS(.dtype = TG_I64));
  cr_assert_not_null(i, "%s", tg_last_error_message());
  cr_assert_null(tg_full(TG_SHAPE(2), 0x1p63, TG_OPTS(.dtype = TG_I64)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_full: value 9.2233720368547758e+18", "int64");
  cr_assert_null(tg_full(TG_SHAPE(2), -0x1p63 * (1 + 0x1p-52), TG_OPTS(.dtype = TG_I64)));
  tg_scope_end(sc);
}

/* ---- empty tensors ---- */

TG_TEST(overflow, empty_tensors_are_contiguous) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *z = tg_zeros(TG_SHAPE(2, 0), TG_OPTS(0));
  cr_assert(tg_is_contiguous(z));
  cr_assert(tg_is_contiguous(tg_transpose(z, 0, 1)));
  cr_assert(tg_is_contiguous(tg_zeros(TG_SHAPE(0, 3, 5), TG_OPTS(0))));
  cr_assert(tg_is_contiguous(tg_expand(tg_zeros(TG_SHAPE(0, 1), TG_OPTS(0)), TG_SHAPE(0, 4))));
  tg_scope_end(sc);
}

TG_TEST(overflow, reductions_of_empty_tensors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *z = tg_zeros(TG_SHAPE(2, 0), TG_OPTS(.dtype = TG_F64));
  double s = -1;
  cr_assert_eq(tg_item(tg_sum(z), &s), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(s, 0.0);
  tg_assert_sizes(tg_sum_dim(z, 1, false), 2);
  tg_test_expect_values(tg_sum_dim(z, 1, false), 2, (double[]){0, 0}, 0);
  tg_assert_sizes(tg_sum_dim(z, 0, true), 1, 0);
  cr_assert_null(tg_max(z));
  tg_expect_error(TG_ERR_SHAPE, "tg_max", "[2, 0]");
  tg_tensor *values = NULL, *indices = NULL;
  cr_assert_eq(tg_max_dim(z, 0, false, &values, &indices), TG_OK, "%s", tg_last_error_message());
  tg_assert_sizes(values, 0);
  tg_assert_sizes(tg_contiguous(tg_zeros(TG_SHAPE(0), TG_OPTS(0))), 0);
  tg_assert_sizes(tg_add(z, z), 2, 0);
  tg_scope_end(sc);
}

static void lltm_batch_0(bool fused) {
  tg_scope sc = tg_scope_begin();
  int64_t batch = 0, in = 4, state = 3;
  tg_options opt = TG_OPTS(.dtype = TG_F64), grad = TG_OPTS(.dtype = TG_F64, .requires_grad = true);
  tg_tensor *x = tg_zeros(TG_SHAPE(batch, in), opt);
  tg_tensor *w = tg_ones(TG_SHAPE(3 * state, in + state), grad);
  tg_tensor *b = tg_ones(TG_SHAPE(3 * state), grad);
  tg_tensor *h = tg_zeros(TG_SHAPE(batch, state), opt);
  tg_tensor *c = tg_zeros(TG_SHAPE(batch, state), opt);
  tg_tensor *new_h = NULL, *new_c = NULL;
  tg_status st = fused ? tg_lltm(x, w, b, h, c, &new_h, &new_c)
                       : tg_lltm_composed(x, w, b, h, c, &new_h, &new_c);
  cr_assert_eq(st, TG_OK, "%s", tg_last_error_message());
  tg_assert_sizes(new_h, 0, 3);
  tg_assert_sizes(new_c, 0, 3);
  cr_assert_eq(tg_backward(tg_add(tg_sum(new_h), tg_sum(new_c)), NULL), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_not_null(tg_grad(w));
  cr_assert_eq(tg_test_max_abs_diff(tg_grad(w), tg_zeros_like(w)), 0.0);
  tg_scope_end(sc);
}

TG_TEST(overflow, lltm_with_batch_0_fused) { lltm_batch_0(true); }
TG_TEST(overflow, lltm_with_batch_0_composed) { lltm_batch_0(false); }

/* Element access through the accessor helpers agrees with the exact geometry. */
TG_TEST(overflow, select_on_a_huge_expanded_dim_reads_the_right_element) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_expand(tg_view(range(2), TG_SHAPE(2, 1)), TG_SHAPE(2, INT64_MAX / 4));
  cr_assert_not_null(t, "%s", tg_last_error_message());
  cr_assert_eq(at(t, 2, (int64_t[]){1, INT64_MAX / 4 - 1}), 1.0);
  tg_tensor *row = tg_select(t, 1, INT64_MAX / 4 - 1);
  cr_assert_not_null(row, "%s", tg_last_error_message());
  tg_test_expect_values(row, 2, (double[]){0, 1}, 0);
  tg_scope_end(sc);
}
