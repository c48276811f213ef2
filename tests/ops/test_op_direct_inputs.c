/* Registered ops run directly (tg_apply_ex on tg_op_lookup's descriptor, as tools/tg-op and
 * tg_op_check do) with hostile indices and integer parameters: each is a clear error from
 * the op's forward, never an out-of-bounds access. The front ends' own checks are tested in
 * each area's file; here nothing goes through them. */
#include <stdint.h>

#include "testutil.h"
#include "alloc_sweep.h"

#define IN(...)                                                                                    \
  (int)(sizeof((const tg_tensor *[]){__VA_ARGS__}) / sizeof(tg_tensor *)),                         \
      (const tg_tensor *const[]) {                                                                 \
    __VA_ARGS__                                                                                    \
  }
#define INTS(...)                                                                                  \
  (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]) { __VA_ARGS__ }
#define NO_INTS 0, NULL

/* Runs the registered op `name`; out[0] (and out[1]) get its outputs. */
static tg_status apply_out(const char *name, int n_in, const tg_tensor *const *in, int n_ints,
                           const int64_t *ints, tg_tensor **out) {
  const tg_op_desc *op = tg_op_lookup(name);
  cr_assert_not_null(op, "no op %s", name);
  out[0] = out[1] = NULL;
  return tg_apply_ex(op, n_in, in, 0, NULL, n_ints, ints, op->n_outputs > 0 ? op->n_outputs : 1,
                     out);
}

static tg_status apply(const char *name, int n_in, const tg_tensor *const *in, int n_ints,
                       const int64_t *ints) {
  tg_tensor *out[2];
  return apply_out(name, n_in, in, n_ints, ints, out);
}

/* The call failed with code and a message containing fragment. */
#define FAILS(code, fragment, call)                                                                \
  do {                                                                                             \
    cr_assert_neq((call), TG_OK, "%s succeeded", #call);                                           \
    tg_expect_error((code), (fragment));                                                           \
  } while (0)

static tg_tensor *i64(int ndim, const int64_t *sizes, const int64_t *values) {
  tg_tensor *t = tg_from_data(ndim, sizes, values, TG_OPTS(.dtype = TG_I64));
  cr_assert_not_null(t, "%s", tg_last_error_message());
  return t;
}
#define INDICES(shape, ...) i64(shape, (const int64_t[]){__VA_ARGS__})

static tg_tensor *f64(int ndim, const int64_t *sizes) {
  tg_tensor *t = tg_ones(ndim, sizes, TG_OPTS(.dtype = TG_F64));
  cr_assert_not_null(t, "%s", tg_last_error_message());
  return t;
}
#define F64(...) f64(TG_SHAPE(__VA_ARGS__))

/* ---- index inputs ---- */

TG_TEST(op_direct_inputs, embedding) {
  tg_tensor *w = F64(4, 3);
  FAILS(TG_ERR_INDEX, "tg_embedding: indices[1, 0] = -1 is outside the weight's rows [0, 4)",
        apply("embedding", IN(w, INDICES(TG_SHAPE(2, 2), 0, 1, -1, 2)), NO_INTS));
  FAILS(TG_ERR_INDEX, "tg_embedding: indices[2] = 4 is outside the weight's rows [0, 4)",
        apply("embedding", IN(w, INDICES(TG_SHAPE(3), 3, 0, 4)), NO_INTS));
  FAILS(TG_ERR_INDEX, "tg_embedding: indices[0] = 9223372036854775807",
        apply("embedding", IN(w, INDICES(TG_SHAPE(1), INT64_MAX)), NO_INTS));
  FAILS(TG_ERR_INDEX, "tg_embedding: indices = -9223372036854775808",
        apply("embedding", IN(w, i64(0, NULL, (const int64_t[]){INT64_MIN})), NO_INTS));
  FAILS(TG_ERR_INDEX, "tg_embedding: indices[0] = 0 is outside the weight's rows [0, 0)",
        apply("embedding", IN(F64(0, 3), INDICES(TG_SHAPE(1), 0)), NO_INTS));
  /* A float32 index is half as wide as an int64 one: read as one, it would overrun. */
  FAILS(TG_ERR_DTYPE, "tg_embedding: indices is float32; row indices must be int64",
        apply("embedding", IN(w, tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT)), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_embedding: weight must be 2-D [n, d], got [12]",
        apply("embedding", IN(F64(12), INDICES(TG_SHAPE(1), 0)), NO_INTS));
  FAILS(TG_ERR_DTYPE, "tg_embedding: weight is int64",
        apply("embedding",
              IN(tg_zeros(TG_SHAPE(4, 3), TG_OPTS(.dtype = TG_I64)), INDICES(TG_SHAPE(1), 0)),
              NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_embedding: indices has 8 dims",
        apply("embedding",
              IN(w, tg_zeros(TG_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), TG_OPTS(.dtype = TG_I64))),
              NO_INTS));
  /* In range, the direct call computes what tg_embedding does. */
  tg_tensor *out[2];
  cr_assert_eq(apply_out("embedding", IN(w, INDICES(TG_SHAPE(2), 3, 0)), NO_INTS, out), TG_OK, "%s",
               tg_last_error_message());
  tg_assert_close(out[0], tg_embedding(w, INDICES(TG_SHAPE(2), 3, 0)), 0, 0);
}

TG_TEST(op_direct_inputs, embedding_backward) {
  tg_tensor *g = F64(3, 2), *idx = INDICES(TG_SHAPE(3), 0, 2, 0);
  FAILS(TG_ERR_INDEX,
        "tg_embedding_backward: indices[1] = 5 is outside the rows of the weight's gradient "
        "[0, 4)",
        apply("embedding_backward", IN(g, INDICES(TG_SHAPE(3), 0, 5, 1)), INTS(4)));
  FAILS(TG_ERR_INDEX, "tg_embedding_backward: indices[2] = -3",
        apply("embedding_backward", IN(g, INDICES(TG_SHAPE(3), 0, 1, -3)), INTS(4)));
  /* n must cover the indices: the gradient has n rows to add into. */
  FAILS(TG_ERR_INDEX, "tg_embedding_backward: indices[1] = 2 is outside",
        apply("embedding_backward", IN(g, idx), INTS(2)));
  FAILS(TG_ERR_ARGUMENT, "tg_embedding_backward: n = -1 (the weight's rows) is negative",
        apply("embedding_backward", IN(g, idx), INTS(-1)));
  FAILS(TG_ERR_ARGUMENT,
        "tg_embedding_backward: takes 1 integer parameter (n, the weight's "
        "rows), 0 given",
        apply("embedding_backward", IN(g, idx), NO_INTS));
  FAILS(TG_ERR_ARGUMENT, "takes 1 integer parameter",
        apply("embedding_backward", IN(g, idx), INTS(4, 4)));
  FAILS(TG_ERR_SHAPE,
        "tg_embedding_backward: grad is [2, 2] but indices is [3]: grad must be "
        "[*indices, d]",
        apply("embedding_backward", IN(F64(2, 2), idx), INTS(4)));
  FAILS(TG_ERR_SHAPE, "grad is [3] but indices is [3]",
        apply("embedding_backward", IN(F64(3), idx), INTS(4)));
  FAILS(TG_ERR_DTYPE, "tg_embedding_backward: indices is float64; row indices must be int64",
        apply("embedding_backward", IN(g, F64(3)), INTS(4)));
  FAILS(TG_ERR_DTYPE, "tg_embedding_backward: grad is int64",
        apply("embedding_backward", IN(tg_zeros(TG_SHAPE(3, 2), TG_OPTS(.dtype = TG_I64)), idx),
              INTS(4)));
  /* No indices: any n >= 0 is in range, but [n, d] must still fit. */
  FAILS(TG_ERR_SHAPE, "tg_embedding_backward",
        apply("embedding_backward", IN(F64(0, 3), tg_zeros(TG_SHAPE(0), TG_OPTS(.dtype = TG_I64))),
              INTS(INT64_MAX)));
  /* Valid: row r of the result sums the rows of g whose index is r. */
  tg_tensor *out[2];
  cr_assert_eq(apply_out("embedding_backward", IN(g, idx), INTS(4), out), TG_OK, "%s",
               tg_last_error_message());
  tg_test_expect_values(out[0], 8, (const double[]){2, 2, 0, 0, 1, 1, 0, 0}, 0);
}

TG_TEST(op_direct_inputs, cross_entropy) {
  tg_tensor *logits = F64(3, 5);
  FAILS(TG_ERR_INDEX, "tg_cross_entropy: target[1] = 5 is outside the class range [0, 5)",
        apply("cross_entropy", IN(logits, INDICES(TG_SHAPE(3), 0, 5, 1)), NO_INTS));
  FAILS(TG_ERR_INDEX, "tg_cross_entropy: target[2] = -9223372036854775808",
        apply("cross_entropy", IN(logits, INDICES(TG_SHAPE(3), 0, 1, INT64_MIN)), NO_INTS));
  FAILS(TG_ERR_DTYPE, "tg_cross_entropy: target is float32; class indices must be int64",
        apply("cross_entropy", IN(logits, tg_zeros(TG_SHAPE(3), TG_OPTS_DEFAULT)), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_cross_entropy: target is [2] but logits is [3, 5]",
        apply("cross_entropy", IN(logits, INDICES(TG_SHAPE(2), 0, 1)), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_cross_entropy: logits must be 2-D [n, c], got [5]",
        apply("cross_entropy", IN(F64(5), INDICES(TG_SHAPE(5), 0, 0, 0, 0, 0)), NO_INTS));
  FAILS(TG_ERR_DTYPE, "tg_cross_entropy: logits is int64",
        apply("cross_entropy",
              IN(tg_zeros(TG_SHAPE(3, 5), TG_OPTS(.dtype = TG_I64)), INDICES(TG_SHAPE(3), 0, 1, 2)),
              NO_INTS));
}

TG_TEST(op_direct_inputs, mse_loss) {
  FAILS(TG_ERR_SHAPE, "tg_mse_loss: input is [2, 3] but target is [3]",
        apply("mse_loss", IN(F64(2, 3), F64(3)), NO_INTS));
  FAILS(TG_ERR_DTYPE, "tg_mse_loss: target is float32 but input is float64",
        apply("mse_loss", IN(F64(3), tg_zeros(TG_SHAPE(3), TG_OPTS_DEFAULT)), NO_INTS));
}

/* The checks read indices to the host: a failed allocation there is a clean TG_ERR_MEMORY,
 * and an index out of range stays TG_ERR_INDEX unless memory ran out first. */
static tg_status index_ops_step(void *user, double *out, int *n_out) {
  (void)user;
  const tg_options i64_opts = TG_OPTS(.dtype = TG_I64);
  tg_tensor *g =
      tg_from_data(TG_SHAPE(3, 2), (const double[]){1, 2, 3, 4, 5, 6}, TG_OPTS(.dtype = TG_F64));
  tg_tensor *idx = g ? tg_from_data(TG_SHAPE(3), (const int64_t[]){2, 0, 2}, i64_opts) : NULL;
  tg_tensor *tgt = idx ? tg_from_data(TG_SHAPE(3), (const int64_t[]){1, 0, 1}, i64_opts) : NULL;
  tg_tensor *bad = tgt ? tg_from_data(TG_SHAPE(3), (const int64_t[]){0, 7, 1}, i64_opts) : NULL;
  tg_status st = status_of(bad);
  tg_tensor *res[2];
  if (st == TG_OK) st = apply_out("embedding_backward", IN(g, idx), INTS(4), res);
  if (st == TG_OK) st = append(res[0], out, n_out);
  if (st == TG_OK) st = apply_out("cross_entropy", IN(g, tgt), NO_INTS, res);
  if (st == TG_OK) st = append(res[0], out, n_out);
  const char *ops[] = {"embedding_backward", "cross_entropy"};
  for (int k = 0; k < 2 && st == TG_OK; k++) {
    st = apply(ops[k], IN(g, bad), k == 0 ? 1 : 0, (const int64_t[]){4});
    if (st == TG_ERR_INDEX) {
      tg_clear_error();
      st = TG_OK;
    } else if (st == TG_OK) {
      st = TG_ERR_STATE;
    }
  }
  return st;
}

TG_TEST(op_direct_inputs, allocation_failures) {
  sweep("embedding_backward and cross_entropy run directly", index_ops_step, NULL);
}

/* ---- dims ---- */

TG_TEST(op_direct_inputs, softmax_dims) {
  const char *ops[] = {"softmax", "log_softmax"};
  for (int k = 0; k < 2; k++) {
    FAILS(TG_ERR_INDEX, "integer parameter 0 (dim) = 2 is outside 0..1",
          apply(ops[k], IN(F64(2, 3)), INTS(2)));
    FAILS(TG_ERR_INDEX, "(dim) = -1 is outside 0..1", apply(ops[k], IN(F64(2, 3)), INTS(-1)));
    FAILS(TG_ERR_INDEX, "(dim) = 1 is outside 0..0", apply(ops[k], IN(F64()), INTS(1)));
    FAILS(TG_ERR_DTYPE, "x is int64",
          apply(ops[k], IN(tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64))), INTS(0)));
  }
  FAILS(TG_ERR_INDEX, "tg_softmax: integer parameter 0 (dim) = 2147483648",
        apply("softmax", IN(F64(2, 3)), INTS(INT64_C(1) << 31)));
}

TG_TEST(op_direct_inputs, reduction_dims) {
  const char *ops[] = {"sum_dim", "mean_dim", "max_dim", "min_dim"};
  for (int k = 0; k < 4; k++) {
    FAILS(TG_ERR_INDEX, "(dim) = 2 is outside 0..1", apply(ops[k], IN(F64(2, 3)), INTS(2, 0)));
    FAILS(TG_ERR_INDEX, "(dim) = -1 is outside 0..1", apply(ops[k], IN(F64(2, 3)), INTS(-1, 1)));
    FAILS(TG_ERR_INDEX, "(dim) = 1 is outside 0..0", apply(ops[k], IN(F64()), INTS(1, 0)));
  }
  FAILS(TG_ERR_SHAPE, "tg_max_dim: x is [2, 0]: a selection over dim 1 of size 0 is undefined",
        apply("max_dim", IN(F64(2, 0)), INTS(1, 0)));
  FAILS(TG_ERR_SHAPE, "tg_min: x is [0]: a selection from no elements is undefined",
        apply("min", IN(F64(0)), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_max: x is [3, 0]", apply("max", IN(F64(3, 0)), NO_INTS));
}

TG_TEST(op_direct_inputs, cat) {
  tg_tensor *a = F64(2, 3);
  FAILS(TG_ERR_INDEX, "tg_cat: integer parameter 0 (dim) = 2 is outside 0..1",
        apply("cat", IN(a, a), INTS(2)));
  FAILS(TG_ERR_INDEX, "(dim) = -1", apply("cat", IN(a, a), INTS(-1)));
  FAILS(TG_ERR_SHAPE,
        "tg_cat: tensors[1] is [2, 4] but tensors[0] is [2, 3]: sizes must match "
        "except in dim 0",
        apply("cat", IN(a, F64(2, 4)), INTS(0)));
  FAILS(TG_ERR_SHAPE, "tensors[1] is [6] but tensors[0] is [2, 3]",
        apply("cat", IN(a, F64(6)), INTS(0)));
  FAILS(TG_ERR_DTYPE, "tensors[1] is float32 but tensors[0] is float64",
        apply("cat", IN(a, tg_zeros(TG_SHAPE(2, 3), TG_OPTS_DEFAULT)), INTS(0)));
  FAILS(TG_ERR_SHAPE, "tg_cat: tensors[0] is 0-dim", apply("cat", IN(F64(), F64()), INTS(0)));
  FAILS(TG_ERR_ARGUMENT, "tg_cat: expects a non-empty list of tensors, got 0",
        apply("cat", 0, NULL, INTS(0)));
}

/* ---- views ---- */

TG_TEST(op_direct_inputs, view_sizes) {
  tg_tensor *x = F64(6);
  FAILS(TG_ERR_SHAPE, "tg_view: sizes [-6, -1]: size of dim 0 is negative",
        apply("view", IN(x), INTS(-6, -1)));
  FAILS(TG_ERR_SHAPE, "tg_view: shape [4] is invalid for input [6] (6 elements)",
        apply("view", IN(x), INTS(4)));
  FAILS(TG_ERR_SHAPE, "tg_view: 9 sizes given as integer parameters (at most 8 dims)",
        apply("view", IN(x), INTS(6, 1, 1, 1, 1, 1, 1, 1, 1)));
  FAILS(TG_ERR_SHAPE, "16 sizes given",
        apply("view", IN(x), INTS(6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)));
  /* An empty input: any sizes with a 0 hold no elements, but they must be sizes. */
  FAILS(TG_ERR_SHAPE, "size of dim 1 is negative", apply("view", IN(F64(0)), INTS(0, -5)));
  FAILS(TG_ERR_SHAPE, "the number of elements overflows int64",
        apply("view", IN(F64(0)), INTS(INT64_C(1) << 40, INT64_C(1) << 40, 0)));
}

TG_TEST(op_direct_inputs, permute) {
  tg_tensor *x = F64(2, 3);
  FAILS(TG_ERR_SHAPE, "tg_permute: 1 dims given for a tensor of shape [2, 3]",
        apply("permute", IN(x), INTS(0)));
  FAILS(TG_ERR_SHAPE, "tg_permute: 0 dims given", apply("permute", IN(x), NO_INTS));
  FAILS(TG_ERR_INDEX, "tg_permute: integer parameter 1 (dim) = 5 is outside 0..1",
        apply("permute", IN(x), INTS(0, 5)));
  FAILS(TG_ERR_INDEX, "(dim) = -1", apply("permute", IN(x), INTS(-1, 0)));
  FAILS(TG_ERR_INDEX, "tg_permute: dim 1 appears twice", apply("permute", IN(x), INTS(1, 1)));
}

TG_TEST(op_direct_inputs, slice) {
  tg_tensor *x = F64(4, 5);
  FAILS(TG_ERR_INDEX, "tg_slice: integer parameter 0 (dim) = 2 is outside 0..1",
        apply("slice", IN(x), INTS(2, 0, 1, 1)));
  FAILS(TG_ERR_ARGUMENT, "tg_slice: step 0 must be positive",
        apply("slice", IN(x), INTS(0, 0, 2, 0)));
  FAILS(TG_ERR_ARGUMENT, "step -1", apply("slice", IN(x), INTS(0, 3, 3, -1)));
  FAILS(TG_ERR_ARGUMENT, "step 0", apply("slice", IN(x), NO_INTS));
  FAILS(TG_ERR_INDEX,
        "tg_slice: start -1, end 2 must satisfy 0 <= start <= end <= 4 (size of dim 0 of [4, 5])",
        apply("slice", IN(x), INTS(0, -1, 2, 1)));
  FAILS(TG_ERR_INDEX, "start 0, end 6 must satisfy 0 <= start <= end <= 5",
        apply("slice", IN(x), INTS(1, 0, 6, 1)));
  FAILS(TG_ERR_INDEX, "start 3, end 1", apply("slice", IN(x), INTS(0, 3, 1, 1)));
  FAILS(TG_ERR_INDEX, "start 9223372036854775807",
        apply("slice", IN(x), INTS(0, INT64_MAX, INT64_MAX, 1)));
  FAILS(TG_ERR_INDEX, "tg_slice: cannot slice a 0-dim tensor",
        apply("slice", IN(F64()), INTS(0, 0, 0, 1)));
  /* narrow is slice with step 1: the same op, the same checks. */
  tg_tensor *out[2];
  cr_assert_eq(apply_out("slice", IN(x), INTS(1, 1, 5, 2), out), TG_OK, "%s",
               tg_last_error_message());
  tg_assert_sizes(out[0], 4, 2);
}

TG_TEST(op_direct_inputs, select) {
  tg_tensor *x = F64(4, 5);
  FAILS(TG_ERR_INDEX, "tg_select: index 4 is out of range for dim 0 of size 4 (tensor [4, 5])",
        apply("select", IN(x), INTS(0, 4)));
  FAILS(TG_ERR_INDEX, "tg_select: index -1 is out of range for dim 1 of size 5",
        apply("select", IN(x), INTS(1, -1)));
  FAILS(TG_ERR_INDEX, "tg_select: index -9223372036854775808",
        apply("select", IN(x), INTS(1, INT64_MIN)));
  FAILS(TG_ERR_INDEX, "tg_select: integer parameter 0 (dim) = 3 is outside 0..1",
        apply("select", IN(x), INTS(3, 0)));
  FAILS(TG_ERR_INDEX, "tg_select: cannot select from a 0-dim tensor",
        apply("select", IN(F64()), INTS(0, 0)));
  FAILS(TG_ERR_INDEX, "index 0 is out of range for dim 0 of size 0",
        apply("select", IN(F64(0, 3)), INTS(0, 0)));
}

TG_TEST(op_direct_inputs, expand) {
  tg_tensor *x = F64(3, 1);
  FAILS(TG_ERR_SHAPE, "tg_expand: cannot expand [3, 1] to 1 dims", apply("expand", IN(x), INTS(3)));
  FAILS(TG_ERR_SHAPE, "tg_expand: sizes [3, -4]: size of dim 1 is negative",
        apply("expand", IN(x), INTS(3, -4)));
  FAILS(TG_ERR_SHAPE, "tg_expand: cannot expand [3, 1] to [2, 4]: dim 0 has size 3, not 1",
        apply("expand", IN(x), INTS(2, 4)));
  FAILS(TG_ERR_SHAPE, "tg_expand: 9 sizes given",
        apply("expand", IN(x), INTS(1, 1, 1, 1, 1, 1, 1, 3, 1)));
  FAILS(TG_ERR_SHAPE, "the number of elements overflows int64",
        apply("expand", IN(x), INTS(INT64_C(1) << 62, 3, 4)));
}

TG_TEST(op_direct_inputs, slice_backward) {
  tg_tensor *g = F64(2, 5);
  FAILS(TG_ERR_INDEX, "tg_slice_backward: start 0, end 9 must satisfy 0 <= start <= end <= 4",
        apply("slice_backward", IN(g), INTS(0, 0, 9, 1, 4, 5)));
  FAILS(TG_ERR_ARGUMENT, "tg_slice_backward: step 0 must be positive",
        apply("slice_backward", IN(g), INTS(0, 0, 2, 0, 4, 5)));
  FAILS(TG_ERR_INDEX, "tg_slice_backward: integer parameter 0 (dim) = 5 is outside 0..1",
        apply("slice_backward", IN(g), INTS(5, 0, 2, 1, 4, 5)));
  FAILS(TG_ERR_SHAPE, "tg_slice_backward: sizes [-4, 5]: size of dim 0 is negative",
        apply("slice_backward", IN(g), INTS(0, 0, 2, 1, -4, 5)));
  FAILS(TG_ERR_SHAPE, "tg_slice_backward: 9 sizes given",
        apply("slice_backward", IN(g), INTS(0, 0, 2, 1, 4, 5, 1, 1, 1, 1, 1, 1, 1)));
  FAILS(TG_ERR_INDEX, "tg_slice_backward: cannot slice a 0-dim tensor",
        apply("slice_backward", IN(g), INTS(0, 0, 2, 1)));
  /* The gradient must fill the window it goes into. */
  cr_assert_neq(apply("slice_backward", IN(F64(3, 5)), INTS(0, 0, 2, 1, 4, 5)), TG_OK);
  cr_assert_eq(tg_last_error(), TG_ERR_SHAPE, "%s", tg_last_error_message());
  tg_clear_error();
}

TG_TEST(op_direct_inputs, select_backward) {
  tg_tensor *g = F64(5);
  FAILS(TG_ERR_INDEX, "index 4 is out of range for dim 0 of size 4",
        apply("select_backward", IN(g), INTS(0, 4, 4, 5)));
  FAILS(TG_ERR_SHAPE, "tg_select_backward: sizes [-4, 5]: size of dim 0 is negative",
        apply("select_backward", IN(g), INTS(0, 0, -4, 5)));
  FAILS(TG_ERR_SHAPE, "tg_select_backward: 9 sizes given",
        apply("select_backward", IN(g), INTS(0, 0, 4, 5, 1, 1, 1, 1, 1, 1, 1)));
  FAILS(TG_ERR_INDEX, "dim", apply("select_backward", IN(g), INTS(7, 0, 4, 5)));
}

TG_TEST(op_direct_inputs, sum_to_size) {
  tg_tensor *x = F64(2, 3);
  FAILS(TG_ERR_SHAPE, "tg_sum_to_size: sizes", apply("sum_to_size", IN(x), INTS(3, 2)));
  FAILS(TG_ERR_SHAPE, "tg_sum_to_size: sizes [-1, 3]: size of dim 0 is negative",
        apply("sum_to_size", IN(x), INTS(-1, 3)));
  FAILS(TG_ERR_SHAPE, "tg_sum_to_size: 9 sizes given",
        apply("sum_to_size", IN(x), INTS(1, 1, 1, 1, 1, 1, 1, 1, 3)));
  FAILS(TG_ERR_SHAPE, "tg_sum_to_size: sizes", apply("sum_to_size", IN(x), INTS(1, 2, 3)));
}

/* ---- dtype and device parameters ---- */

TG_TEST(op_direct_inputs, to_dtype_and_device) {
  tg_tensor *x = F64(2);
  FAILS(TG_ERR_DTYPE, "tg_to_dtype", apply("to_dtype", IN(x), INTS(99)));
  FAILS(TG_ERR_DTYPE, "tg_to_dtype", apply("to_dtype", IN(x), INTS(-1)));
  FAILS(TG_ERR_DEVICE, "tg_to_device: invalid device type 7",
        apply("to_device", IN(x), INTS(7, 0)));
  FAILS(TG_ERR_DEVICE, "tg_to_device", apply("to_device", IN(x), INTS(-1, 0)));
}

TG_TEST(op_direct_inputs, to_device_index) {
  FAILS(TG_ERR_DEVICE, "tg_to_device: invalid device type 0, index 4294967296",
        apply("to_device", IN(F64(2)), INTS(0, INT64_C(1) << 32)));
}

/* ---- input counts and shapes the front ends guarantee ---- */

TG_TEST(op_direct_inputs, inplace_inputs) {
  tg_tensor *a = F64(2, 3);
  /* In-place ops take a variable count: (target[, other][, the target's old value]). */
  FAILS(TG_ERR_ARGUMENT, "tg_add_: takes a, b and optionally a's old value: 1 inputs given",
        apply("add_", IN(a), NO_INTS));
  FAILS(TG_ERR_ARGUMENT, "tg_mul_: takes a, b and optionally a's old value: 0 inputs given",
        apply("mul_", 0, NULL, NO_INTS));
  FAILS(TG_ERR_ARGUMENT, "4 inputs given", apply("sub_", IN(a, a, a, a), NO_INTS));
  /* b is read as if broadcast to a's sizes: it must broadcast. */
  FAILS(TG_ERR_SHAPE, "tg_add_: b is [4, 5] and a is [2, 3]: b does not broadcast",
        apply("add_", IN(a, F64(4, 5)), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_div_: b is [2, 3] and a is [3]", apply("div_", IN(F64(3), a), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_mul_: inputs[2] is [4, 5] but a is [2, 3]: sizes must be equal",
        apply("mul_", IN(a, a, F64(4, 5)), NO_INTS));
  FAILS(TG_ERR_DTYPE, "tg_add_: a is float64 but b is float32",
        apply("add_", IN(a, tg_zeros(TG_SHAPE(3), TG_OPTS_DEFAULT)), NO_INTS));
  FAILS(TG_ERR_ARGUMENT, "tg_relu_: takes x and optionally x's old value: 0 inputs given",
        apply("relu_", 0, NULL, NO_INTS));
  FAILS(TG_ERR_ARGUMENT, "tg_exp_: takes x and optionally x's old value: 3 inputs given",
        apply("exp_", IN(a, a, a), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_log_: inputs[1] is [4, 5] but x is [2, 3]: sizes must be equal",
        apply("log_", IN(a, F64(4, 5)), NO_INTS));
  FAILS(TG_ERR_ARGUMENT, "tg_tanh_: x [2, 3] has overlapping elements",
        apply("tanh_", IN(tg_expand(F64(1, 3), TG_SHAPE(2, 3))), NO_INTS));
  /* Nothing was written by the failed calls. */
  tg_test_expect_values(a, 6, (const double[]){1, 1, 1, 1, 1, 1}, 0);
}

TG_TEST(op_direct_inputs, lltm_shapes) {
  tg_tensor *x = F64(2, 3), *w = F64(12, 7), *bias = F64(12), *h = F64(2, 4), *c = F64(2, 4);
  tg_tensor *out[2];
  cr_assert_eq(apply_out("lltm", IN(x, w, bias, h, c), NO_INTS, out), TG_OK, "%s",
               tg_last_error_message());
  FAILS(TG_ERR_SHAPE, "tg_lltm: bias is [3] but must be [3*state] = [12]",
        apply("lltm", IN(x, w, F64(3), h, c), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_lltm: old_cell is [2, 40] but old_h is [2, 4]",
        apply("lltm", IN(x, w, bias, h, F64(2, 40)), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_lltm: weights is [3, 7] but must be",
        apply("lltm", IN(x, F64(3, 7), bias, h, c), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_lltm: input must be 2-D",
        apply("lltm", IN(F64(), w, bias, h, c), NO_INTS));
  FAILS(TG_ERR_SHAPE, "tg_lltm: old_h is [2, 4] but input is [5, 3]",
        apply("lltm", IN(F64(5, 3), w, bias, h, c), NO_INTS));
}
