/* In-place pointwise ops (src/ops/pointwise_inplace.c): same values as the out-of-place ops
 * on contiguous and strided targets, version bumps, history moved onto the target,
 * gradcheck and gradgradcheck in F64 (contiguous, transposed and sliced-with-offset targets;
 * contiguous, strided and broadcast operands), and every error leaving the target as it was. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

static const tg_gradcheck_options quiet = {.quiet = true};

/* ---- helpers ---- */

typedef struct domain {
  double lo, hi;
  bool mixed_signs;
} domain;

/* F64 values in [lo, hi] from a fixed generator; with mixed_signs every third is negated. */
static tg_tensor *values(int ndim, const int64_t *sizes, uint64_t seed, domain d) {
  tg_generator *gen = tg_generator_new(seed);
  tg_tensor *u = tg_uniform(ndim, sizes, d.lo, d.hi, (tg_options){.dtype = TG_F64}, gen);
  tg_generator_free(gen);
  cr_assert(u);
  int64_t n = tg_numel(u);
  double *buf = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  cr_assert_eq(tg_to_host_array(u, buf, sizeof(double) * (size_t)n), TG_OK);
  for (int64_t i = 0; d.mixed_signs && i < n; i++)
    if (i % 3 == 1) buf[i] = -buf[i];
  tg_tensor *t = tg_from_data(ndim, sizes, buf, (tg_options){.dtype = TG_F64});
  free(buf);
  cr_assert(t);
  return t;
}

static tg_tensor *grad_values(int ndim, const int64_t *sizes, uint64_t seed, domain d) {
  tg_tensor *t = values(ndim, sizes, seed, d);
  cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
  return t;
}

/* Layouts. With gradients recorded, tg refuses in-place ops on views (their base's history
 * would go stale), so there the target is a contiguous copy made on the tape of an input
 * that is a contiguous [2, 3], the transpose of a [3, 2] or a stride-2 window at an offset in
 * a [4, 7]; without recording, the same views are written in place directly. */
typedef enum layout { CONTIGUOUS, TRANSPOSED, SLICED, NUM_LAYOUTS } layout;
static const char *const layout_names[] = {"contiguous", "transposed", "sliced"};

static tg_tensor *target_view(layout l, tg_tensor *base) {
  switch (l) {
  case TRANSPOSED:
    return tg_t(base);
  case SLICED:
    return tg_slice(tg_narrow(base, 0, 1, 2), 1, 1, 7, 2);
  default:
    return base;
  }
}

static tg_tensor *base_for(layout l, uint64_t seed, domain d) {
  switch (l) {
  case TRANSPOSED:
    return values(TG_SHAPE(3, 2), seed, d);
  case SLICED:
    return values(TG_SHAPE(4, 7), seed, d);
  default:
    return values(TG_SHAPE(2, 3), seed, d);
  }
}

/* A [2, 3] F64 input of the given layout that requires grad (a leaf). */
static tg_tensor *input(layout l, uint64_t seed, domain d) {
  tg_tensor *t = target_view(l, base_for(l, seed, d));
  cr_assert(t && tg_set_requires_grad(t, true) == TG_OK, "%s", tg_last_error_message());
  return t;
}

/* The target: a copy of the input on the tape (not a view, not a leaf). */
static tg_tensor *target_from(const tg_tensor *x) { return tg_mul_scalar(x, 1.0); }

/* ---- unary in-place ops ---- */

typedef tg_status (*inplace_fn)(tg_tensor *);
typedef tg_tensor *(*unary_fn)(const tg_tensor *);

static tg_status pow_2_5_(tg_tensor *x) { return tg_pow_scalar_(x, 2.5); }
static tg_tensor *pow_2_5(const tg_tensor *x) { return tg_pow_scalar(x, 2.5); }
static tg_status pow_3_(tg_tensor *x) { return tg_pow_scalar_(x, 3); }
static tg_tensor *pow_3(const tg_tensor *x) { return tg_pow_scalar(x, 3); }
static tg_status elu_1_(tg_tensor *x) { return tg_elu_(x, 1.0); }
static tg_tensor *elu_1(const tg_tensor *x) { return tg_elu(x, 1.0); }
static tg_status elu_minus_0_5_(tg_tensor *x) { return tg_elu_(x, -0.5); }
static tg_tensor *elu_minus_0_5(const tg_tensor *x) { return tg_elu(x, -0.5); }
static tg_status add_scalar_2_(tg_tensor *x) { return tg_add_scalar_(x, 2); }
static tg_tensor *add_scalar_2(const tg_tensor *x) { return tg_add_scalar(x, 2); }
static tg_status mul_scalar_3_(tg_tensor *x) { return tg_mul_scalar_(x, -3); }
static tg_tensor *mul_scalar_3(const tg_tensor *x) { return tg_mul_scalar(x, -3); }

typedef struct unary_case {
  const char *name;
  inplace_fn op_;
  unary_fn op; /* the out-of-place twin */
  domain dom;
} unary_case;

static const unary_case unary_cases[] = {
    {"neg_", tg_neg_, tg_neg, {0.1, 2.0, true}},
    {"exp_", tg_exp_, tg_exp, {0.1, 2.0, true}},
    {"log_", tg_log_, tg_log, {0.5, 2.0, false}},
    {"sqrt_", tg_sqrt_, tg_sqrt, {0.5, 2.0, false}},
    {"pow_scalar_ 2.5", pow_2_5_, pow_2_5, {0.5, 2.0, false}},
    {"pow_scalar_ 3", pow_3_, pow_3, {0.1, 2.0, true}},
    {"sigmoid_", tg_sigmoid_, tg_sigmoid, {0.1, 3.0, true}},
    {"tanh_", tg_tanh_, tg_tanh, {0.1, 2.0, true}},
    {"relu_", tg_relu_, tg_relu, {0.1, 2.0, true}},
    {"elu_ 1", elu_1_, elu_1, {0.1, 2.0, true}},
    {"elu_ -0.5", elu_minus_0_5_, elu_minus_0_5, {0.1, 2.0, true}},
    {"add_scalar_", add_scalar_2_, add_scalar_2, {0.1, 2.0, true}},
    {"mul_scalar_", mul_scalar_3_, mul_scalar_3, {0.1, 2.0, true}},
    {"abs_", tg_abs_, tg_abs, {0.1, 2.0, true}},
    {"reciprocal_", tg_reciprocal_, tg_reciprocal, {0.5, 2.0, true}},
    {"softplus_", tg_softplus_, tg_softplus, {0.1, 2.0, true}},
    {"silu_", tg_silu_, tg_silu, {0.1, 2.0, true}}, /* issue 25, helper "pointwise" */
};
#define N_UNARY (int)(sizeof unary_cases / sizeof unary_cases[0])

static tg_status run_unary_(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const unary_case *c = user;
  tg_tensor *t = target_from(in[0]);
  if (!t) return tg_last_error();
  tg_status st = c->op_(t);
  out[0] = st == TG_OK ? t : NULL;
  return st;
}

TG_TEST(inplace, unary_gradcheck_and_gradgradcheck_every_layout) {
  for (int k = 0; k < N_UNARY; k++) {
    for (int l = 0; l < NUM_LAYOUTS; l++) {
      tg_scope sc = tg_scope_begin();
      const unary_case *c = &unary_cases[k];
      tg_tensor *x = input((layout)l, 30 + (uint64_t)k, c->dom);
      cr_assert_eq(tg_gradcheck(run_unary_, (void *)c, 1, &x, 1, quiet), TG_OK, "%s %s: %s",
                   unary_cases[k].name, layout_names[l], tg_last_error_message());
      cr_assert_eq(tg_gradgradcheck(run_unary_, (void *)c, 1, &x, 1, quiet), TG_OK, "%s %s: %s",
                   unary_cases[k].name, layout_names[l], tg_last_error_message());
      tg_scope_end(sc);
    }
  }
}

/* The in-place result equals the out-of-place one, the version moves by one, and the rest
 * of the base storage is untouched. */
TG_TEST(inplace, unary_values_match_out_of_place_on_strided_targets) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    for (int k = 0; k < N_UNARY; k++) {
      for (int l = 0; l < NUM_LAYOUTS; l++) {
        tg_tensor *base = tg_to_dtype(base_for((layout)l, 5, unary_cases[k].dom), (tg_dtype)dt);
        tg_tensor *before = tg_clone(base);
        tg_tensor *t = target_view((layout)l, base);
        tg_tensor *want = unary_cases[k].op(t);
        uint64_t v = tg_version(t);
        cr_assert_eq(unary_cases[k].op_(t), TG_OK, "%s: %s", unary_cases[k].name,
                     tg_last_error_message());
        cr_assert_eq(tg_version(t), v + 1);
        tg_assert_close(t, want, 0, 0);
        /* everything outside the window is as it was */
        tg_tensor *outside = tg_sub(base, before);
        int64_t n = tg_numel(base), inside = 0;
        for (int64_t i = 0; i < n; i++) inside += tg_test_at(outside, i) != 0;
        cr_assert_leq(inside, 6, "%s wrote outside its target", unary_cases[k].name);
      }
    }
  }
  tg_scope_end(sc);
}

TG_TEST(inplace, unary_values_by_hand) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(4), (const double[]){-1, 0, 1, 4});
  cr_assert_eq(tg_relu_(x), TG_OK);
  tg_test_expect_values(x, 4, (const double[]){0, 0, 1, 4}, 0);
  cr_assert_eq(tg_add_scalar_(x, 1), TG_OK);
  tg_test_expect_values(x, 4, (const double[]){1, 1, 2, 5}, 0);
  cr_assert_eq(tg_mul_scalar_(x, 2), TG_OK);
  tg_test_expect_values(x, 4, (const double[]){2, 2, 4, 10}, 0);
  cr_assert_eq(tg_pow_scalar_(x, 2), TG_OK);
  tg_test_expect_values(x, 4, (const double[]){4, 4, 16, 100}, 0);
  cr_assert_eq(tg_sqrt_(x), TG_OK);
  tg_test_expect_values(x, 4, (const double[]){2, 2, 4, 10}, 0);
  cr_assert_eq(tg_neg_(x), TG_OK);
  tg_test_expect_values(x, 4, (const double[]){-2, -2, -4, -10}, 0);
  cr_assert_eq(tg_elu_(x, 1), TG_OK);
  tg_test_expect_values(x, 4, (const double[]){exp(-2) - 1, exp(-2) - 1, exp(-4) - 1, exp(-10) - 1},
                        1e-15);
  tg_tensor *s = tg_test_tensor_of(TG_F32, TG_SHAPE(3), (const double[]){-1e4, 0, 1e4});
  cr_assert_eq(tg_sigmoid_(s), TG_OK);
  tg_test_expect_values(s, 3, (const double[]){0, 0.5, 1}, 0);
  tg_tensor *t = tg_test_tensor_of(TG_F32, TG_SHAPE(3), (const double[]){-1e4, 0, 1e4});
  cr_assert_eq(tg_tanh_(t), TG_OK);
  tg_test_expect_values(t, 3, (const double[]){-1, 0, 1}, 0);
  tg_tensor *r = tg_test_tensor_of(TG_F32, TG_SHAPE(3), (const double[]){-4, 0.5, 2});
  cr_assert_eq(tg_abs_(r), TG_OK);
  tg_test_expect_values(r, 3, (const double[]){4, 0.5, 2}, 0);
  cr_assert_eq(tg_reciprocal_(r), TG_OK);
  tg_test_expect_values(r, 3, (const double[]){0.25, 2, 0.5}, 0);
  tg_scope_end(sc);
}

/* ---- binary in-place ops ---- */

typedef tg_status (*binary_inplace_fn)(tg_tensor *, const tg_tensor *);
typedef tg_tensor *(*binary_fn)(const tg_tensor *, const tg_tensor *);

static tg_status add_scaled_m1_5_(tg_tensor *a, const tg_tensor *b) {
  return tg_add_scaled_(a, b, -1.5);
}
static tg_tensor *add_scaled_m1_5(const tg_tensor *a, const tg_tensor *b) {
  return tg_add_scaled(a, b, -1.5);
}

typedef struct binary_case {
  const char *name;
  binary_inplace_fn op_;
  binary_fn op;
} binary_case;

static const binary_case binary_cases[] = {
    {"add_", tg_add_, tg_add},
    {"sub_", tg_sub_, tg_sub},
    {"mul_", tg_mul_, tg_mul},
    {"div_", tg_div_, tg_div},
    {"add_scaled_", add_scaled_m1_5_, add_scaled_m1_5},
    {"maximum_", tg_maximum_, tg_maximum}, /* issue 25, helper "pointwise" */
    {"minimum_", tg_minimum_, tg_minimum},
};
#define N_BINARY (int)(sizeof binary_cases / sizeof binary_cases[0])

/* Whether a case is named op (the in-place name, "exp_"), alone or followed by its scalar. */
static bool names_op(const char *name, const char *op) {
  const size_t n = strlen(op);
  return strncmp(name, op, n) == 0 && (name[n] == '\0' || name[n] == ' ');
}

/* Every differentiable kind of src/ops/def/unary.def and binary.def is a public op with an
 * in-place form, tg_<name>_: each has a case above, so a new kind cannot be left out. */
TG_TEST(inplace, every_kind_with_an_in_place_op_has_a_case) {
  static const char *const unary_ops[] = {
#define TG_UNARY_KERNEL(KIND, name, cost)
#define TG_UNARY_NOGRAD(KIND, name, cost)
#define TG_UNARY_OP(KIND, name, cost, saves, grad) #name "_",
#define TG_UNARY_OP1(KIND, name, cost, param, saves, grad) #name "_",
#include "ops/def/unary.def"
  };
  static const char *const binary_ops[] = {
#define TG_BINARY_KERNEL(KIND, name)
#define TG_BINARY_CMP(KIND, name)
#define TG_BINARY_OP(KIND, name, saves_a, saves_b, grad_a, grad_b) #name "_",
#include "ops/def/binary.def"
  };
  for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++) {
    bool found = false;
    for (int k = 0; k < N_UNARY; k++) found |= names_op(unary_cases[k].name, unary_ops[i]);
    cr_assert(found, "%s (src/ops/def/unary.def) has no case in unary_cases", unary_ops[i]);
  }
  for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++) {
    bool found = false;
    for (int k = 0; k < N_BINARY; k++) found |= names_op(binary_cases[k].name, binary_ops[i]);
    cr_assert(found, "%s (src/ops/def/binary.def) has no case in binary_cases", binary_ops[i]);
  }
}

static tg_status run_binary_(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const binary_case *c = user;
  tg_tensor *t = target_from(in[0]);
  if (!t) return tg_last_error();
  tg_status st = c->op_(t, in[1]);
  out[0] = st == TG_OK ? t : NULL;
  return st;
}

/* b, as the function sees it (broadcast to a's [2, 3]): [2, 3] contiguous, transposed or
 * sliced; [3]; [2, 1]; 0-dim. */
static tg_tensor *operand(int kind, uint64_t seed, const char **what) {
  const domain d = {0.5, 2.0, true};
  switch (kind) {
  case 0:
    *what = "b contiguous";
    return grad_values(TG_SHAPE(2, 3), seed, d);
  case 1: {
    *what = "b transposed";
    tg_tensor *t = tg_t(values(TG_SHAPE(3, 2), seed, d));
    cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
    return t;
  }
  case 2: {
    *what = "b sliced";
    tg_tensor *t = tg_slice(tg_narrow(values(TG_SHAPE(4, 7), seed, d), 0, 2, 2), 1, 0, 6, 2);
    cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
    return t;
  }
  case 3:
    *what = "b [3]";
    return grad_values(TG_SHAPE(3), seed, d);
  case 4:
    *what = "b [2, 1]";
    return grad_values(TG_SHAPE(2, 1), seed, d);
  default:
    *what = "b []";
    return grad_values(0, (const int64_t[]){1}, seed, d);
  }
}

TG_TEST(inplace, binary_gradcheck_and_gradgradcheck_every_layout) {
  const domain d = {0.5, 2.0, true};
  for (int k = 0; k < N_BINARY; k++) {
    for (int l = 0; l < NUM_LAYOUTS; l++) {
      for (int b = 0; b < 6; b++) {
        tg_scope sc = tg_scope_begin();
        const char *what;
        const binary_case *c = &binary_cases[k];
        tg_tensor *in[2] = {input((layout)l, 40 + (uint64_t)k, d),
                            operand(b, 50 + (uint64_t)b, &what)};
        cr_assert_eq(tg_gradcheck(run_binary_, (void *)c, 2, in, 1, quiet), TG_OK,
                     "%s a %s, %s: %s", binary_cases[k].name, layout_names[l], what,
                     tg_last_error_message());
        cr_assert_eq(tg_gradgradcheck(run_binary_, (void *)c, 2, in, 1, quiet), TG_OK,
                     "%s a %s, %s: %s", binary_cases[k].name, layout_names[l], what,
                     tg_last_error_message());
        tg_scope_end(sc);
      }
    }
  }
}

/* Only a or only b requires grad. */
TG_TEST(inplace, binary_gradgradcheck_with_one_constant_input) {
  const domain d = {0.5, 2.0, true};
  for (int k = 0; k < N_BINARY; k++) {
    for (int which = 0; which < 2; which++) {
      tg_scope sc = tg_scope_begin();
      const char *what;
      tg_tensor *in[2] = {input(CONTIGUOUS, 1, d), operand(3, 2, &what)};
      cr_assert_eq(tg_set_requires_grad(in[which], false), TG_OK);
      cr_assert_eq(tg_gradgradcheck(run_binary_, (void *)&binary_cases[k], 2, in, 1, quiet), TG_OK,
                   "%s (input %d constant): %s", binary_cases[k].name, which,
                   tg_last_error_message());
      tg_scope_end(sc);
    }
  }
}

TG_TEST(inplace, binary_values_match_out_of_place) {
  tg_scope sc = tg_scope_begin();
  const domain d = {0.5, 2.0, true};
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    for (int k = 0; k < N_BINARY; k++) {
      for (int l = 0; l < NUM_LAYOUTS; l++) {
        for (int b = 0; b < 6; b++) {
          const char *what;
          tg_tensor *base = tg_clone(tg_to_dtype(base_for((layout)l, 7, d), (tg_dtype)dt));
          tg_tensor *bt = tg_detach(tg_to_dtype(operand(b, 8, &what), (tg_dtype)dt));
          tg_tensor *t = target_view((layout)l, base);
          tg_tensor *want = binary_cases[k].op(t, bt);
          uint64_t v = tg_version(t);
          cr_assert_eq(binary_cases[k].op_(t, bt), TG_OK, "%s: %s", binary_cases[k].name,
                       tg_last_error_message());
          cr_assert_eq(tg_version(t), v + 1);
          tg_assert_close(t, want, 0, 0);
        }
      }
    }
  }
  tg_scope_end(sc);
}

TG_TEST(inplace, binary_values_by_hand) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 3), (const double[]){1, 2, 3, 4, 5, 6});
  tg_tensor *row = tg_test_tensor_of(TG_F64, TG_SHAPE(3), (const double[]){10, 20, 30});
  tg_tensor *col = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 1), (const double[]){2, 4});
  cr_assert_eq(tg_add_(a, row), TG_OK);
  tg_test_expect_values(a, 6, (const double[]){11, 22, 33, 14, 25, 36}, 0);
  cr_assert_eq(tg_mul_(a, col), TG_OK);
  tg_test_expect_values(a, 6, (const double[]){22, 44, 66, 56, 100, 144}, 0);
  cr_assert_eq(tg_div_(a, col), TG_OK);
  tg_test_expect_values(a, 6, (const double[]){11, 22, 33, 14, 25, 36}, 0);
  cr_assert_eq(tg_sub_(a, row), TG_OK);
  tg_test_expect_values(a, 6, (const double[]){1, 2, 3, 4, 5, 6}, 0);
  cr_assert_eq(tg_add_scaled_(a, row, 0.1), TG_OK);
  tg_test_expect_values(a, 6, (const double[]){2, 4, 6, 5, 7, 9}, 1e-15);
  tg_tensor *s = tg_test_tensor_of(TG_F64, 0, (const int64_t[]){1}, (const double[]){2});
  cr_assert_eq(tg_mul_(a, s), TG_OK);
  tg_test_expect_values(a, 6, (const double[]){4, 8, 12, 10, 14, 18}, 1e-15);
  /* b may be a itself, or a part of a: the result is as if b were read first */
  cr_assert_eq(tg_add_(a, a), TG_OK);
  tg_test_expect_values(a, 6, (const double[]){8, 16, 24, 20, 28, 36}, 1e-15);
  cr_assert_eq(tg_sub_(a, tg_narrow(a, 0, 0, 1)), TG_OK);
  tg_test_expect_values(a, 6, (const double[]){0, 0, 0, 12, 12, 12}, 1e-15);
  tg_scope_end(sc);
}

/* An operand that overlaps the target other than element for element (its transpose, a
 * shifted window, either way) is read as it was before the write, for every binary op. */
TG_TEST(inplace, binary_operand_overlapping_the_target_is_read_first) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *m = tg_view(tg_arange(1, 10, 1, TG_OPTS(.dtype = TG_F64)), TG_SHAPE(3, 3));
  cr_assert_eq(tg_add_(m, tg_t(m)), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(m, 9, (const double[]){2, 6, 10, 6, 10, 14, 10, 14, 18}, 0);
  cr_assert_eq(tg_mul_(m, tg_t(tg_narrow(m, 1, 0, 3))), TG_OK);
  tg_test_expect_values(m, 9, (const double[]){4, 36, 100, 36, 100, 196, 100, 196, 324}, 0);
  tg_tensor *x = tg_arange(0, 6, 1, TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_add_(tg_narrow(x, 0, 1, 5), tg_narrow(x, 0, 0, 5)), TG_OK);
  tg_test_expect_values(x, 6, (const double[]){0, 1, 3, 5, 7, 9}, 0);
  x = tg_arange(0, 6, 1, TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_sub_(tg_narrow(x, 0, 0, 5), tg_narrow(x, 0, 1, 5)), TG_OK);
  tg_test_expect_values(x, 6, (const double[]){-1, -1, -1, -1, -1, 5}, 0);
  x = tg_arange(1, 7, 1, TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_div_(tg_narrow(x, 0, 1, 5), tg_narrow(x, 0, 0, 5)), TG_OK);
  tg_test_expect_values(x, 6, (const double[]){1, 2, 1.5, 4.0 / 3, 1.25, 1.2}, 1e-15);
  x = tg_arange(0, 6, 1, TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_add_scaled_(tg_narrow(x, 0, 1, 5), tg_narrow(x, 0, 0, 5), 10), TG_OK);
  tg_test_expect_values(x, 6, (const double[]){0, 1, 12, 23, 34, 45}, 0);
  tg_scope_end(sc);
}

/* a <- a * a^T on a copy of x made on the tape. */
static tg_status mul_by_transpose_(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  tg_tensor *a = target_from(in[0]);
  tg_status st = a ? tg_mul_(a, tg_t(a)) : tg_last_error();
  out[0] = st == TG_OK ? a : NULL;
  return st;
}

/* Recorded, the operand's copy is made on the tape: the gradient reaches the target's old
 * value through it. sum(x * x^T) has gradient 2 x^T; sum(x + x^T) has 2. */
TG_TEST(inplace, overlapping_operand_keeps_autograd_right) {
  tg_scope sc = tg_scope_begin();
  const int64_t s33[] = {3, 3};
  tg_tensor *x = grad_values(2, s33, 5, (domain){0.5, 2, true});
  tg_tensor *a = target_from(x);
  cr_assert_eq(tg_mul_(a, tg_t(a)), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(tg_sum(a), NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(x), tg_mul_scalar(tg_t(x), 2), 1e-15, 0);
  tg_tensor *y = grad_values(2, s33, 6, (domain){0.5, 2, true});
  tg_tensor *b = target_from(y);
  cr_assert_eq(tg_add_(b, tg_t(b)), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(tg_sum(b), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(y), 9, (const double[]){2, 2, 2, 2, 2, 2, 2, 2, 2}, 0);
  /* and gradcheck/gradgradcheck of a <- a * a^T through the copy */
  tg_tensor *z = grad_values(2, s33, 7, (domain){0.5, 2, true});
  cr_assert_eq(tg_gradcheck(mul_by_transpose_, NULL, 1, &z, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(mul_by_transpose_, NULL, 1, &z, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

/* ---- the tape ---- */

/* In-place on a tensor that did not require grad, with b that does: the target joins the
 * graph, and b's gradient uses a's value from before the write. */
TG_TEST(inplace, target_joins_the_graph_through_b) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_test_tensor_of(TG_F64, TG_SHAPE(3), (const double[]){1, 2, 3});
  tg_tensor *b = tg_test_tensor_of(TG_F64, TG_SHAPE(3), (const double[]){5, 6, 7});
  cr_assert_eq(tg_set_requires_grad(b, true), TG_OK);
  cr_assert_eq(tg_mul_(a, b), TG_OK);
  cr_assert(tg_requires_grad(a));
  cr_assert_str_eq(tg_grad_fn_name(a), "mul_");
  cr_assert_eq(tg_backward(tg_sum(a), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(b), 3, (const double[]){1, 2, 3}, 0);
  tg_scope_end(sc);
}

/* A chain of in-place ops on one tensor: each rebases the history. */
TG_TEST(inplace, chained_history) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(2), (const double[]){0.5, -1});
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  tg_tensor *y = tg_mul_scalar(x, 3);        /* 3x */
  cr_assert_eq(tg_add_scalar_(y, 1), TG_OK); /* 3x + 1 */
  cr_assert_eq(tg_mul_(y, x), TG_OK);        /* (3x + 1) x */
  cr_assert_eq(tg_exp_(y), TG_OK);           /* exp((3x + 1) x) */
  cr_assert_str_eq(tg_grad_fn_name(y), "exp_");
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  double g0 = exp((1.5 + 1) * 0.5) * (6 * 0.5 + 1), g1 = exp((-3 + 1) * -1) * (6 * -1 + 1);
  tg_test_expect_values(tg_grad(x), 2, (const double[]){g0, g1}, 1e-14);
  tg_scope_end(sc);
}

/* With grad mode off a leaf that requires grad may be updated (an optimizer step). */
TG_TEST(inplace, leaf_update_under_no_grad) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *w = tg_ones(TG_SHAPE(3), (tg_options){.dtype = TG_F64, .requires_grad = true});
  tg_no_grad_begin();
  cr_assert_eq(tg_add_scaled_(w, tg_full_like(w, 2), -0.5), TG_OK);
  tg_no_grad_end();
  cr_assert(tg_is_leaf(w) && tg_requires_grad(w));
  tg_test_expect_values(w, 3, (const double[]){0, 0, 0}, 0);
  tg_scope_end(sc);
}

/* ---- errors: the target is left as it was ---- */

static void expect_unchanged(const tg_tensor *t, const double *want, uint64_t version) {
  tg_test_expect_values(t, tg_numel(t), want, 0);
  cr_assert_eq(tg_version(t), version, "a failed in-place op bumped the version");
}

TG_TEST(inplace, leaf_that_requires_grad_is_rejected) {
  tg_scope sc = tg_scope_begin();
  const double v[] = {1, 2, 3};
  tg_tensor *w = tg_test_tensor_of(TG_F64, TG_SHAPE(3), v);
  cr_assert_eq(tg_set_requires_grad(w, true), TG_OK);
  uint64_t ver = tg_version(w);
  cr_assert_eq(tg_exp_(w), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "exp_", "a leaf tensor that requires grad");
  cr_assert_eq(tg_add_(w, tg_ones_like(w)), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "add_", "a leaf tensor that requires grad");
  cr_assert_eq(tg_mul_(w, w), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "mul_", "leaf tensor");
  cr_assert_eq(tg_pow_scalar_(w, 2), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "pow_scalar_", "leaf tensor");
  cr_assert_eq(tg_abs_(w), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "abs_", "leaf tensor");
  cr_assert_eq(tg_reciprocal_(w), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "reciprocal_", "leaf tensor");
  expect_unchanged(w, v, ver);
  cr_assert(tg_is_leaf(w));
  tg_scope_end(sc);
}

TG_TEST(inplace, b_that_would_grow_a_is_rejected) {
  tg_scope sc = tg_scope_begin();
  const double v[] = {1, 2, 3, 4, 5, 6};
  tg_tensor *a = tg_test_tensor_of(TG_F32, TG_SHAPE(3), v);
  tg_tensor *b = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  uint64_t ver = tg_version(a);
  cr_assert_eq(tg_add_(a, b), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE,
                  "tg_add_: b is [2, 3] and a is [3]: b does not broadcast to a's sizes");
  expect_unchanged(a, v, ver);
  tg_tensor *a2 = tg_test_tensor_of(TG_F32, TG_SHAPE(2, 1), v);
  cr_assert_eq(tg_mul_(a2, b), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_mul_: b is [2, 3] and a is [2, 1]");
  expect_unchanged(a2, v, ver);
  cr_assert_eq(tg_div_(a, tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT)), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_div_: b is [2] and a is [3]");
  expect_unchanged(a, v, ver);
  tg_scope_end(sc);
}

TG_TEST(inplace, dtype_mismatch_and_int64_are_rejected) {
  tg_scope sc = tg_scope_begin();
  const double v[] = {1, 2, 3};
  tg_tensor *a = tg_test_tensor_of(TG_F32, TG_SHAPE(3), v);
  /* a float32 target takes float64 and int64 operands (PyTorch's castable rule) */
  cr_assert_eq(tg_mul_(a, tg_ones(TG_SHAPE(3), (tg_options){.dtype = TG_F64})), TG_OK);
  cr_assert_eq(tg_sub_(a, tg_ones(TG_SHAPE(3), (tg_options){.dtype = TG_I64})), TG_OK);
  cr_assert_eq(tg_tensor_dtype(a), TG_F32);
  tg_test_expect_values(a, 3, (const double[]){0, 1, 2}, 0);
  /* an int64 target refuses a float result and keeps its value */
  tg_tensor *i = tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_I64});
  uint64_t iver = tg_version(i);
  for (int k = 0; k < N_UNARY; k++) {
    const char *name = unary_cases[k].name;
    bool kept = !strcmp(name, "neg_") || !strcmp(name, "relu_") || !strcmp(name, "abs_") ||
                !strcmp(name, "pow_scalar_ 3") || !strcmp(name, "add_scalar_") ||
                !strcmp(name, "mul_scalar_");
    if (kept) continue;
    cr_assert_eq(unary_cases[k].op_(i), TG_ERR_DTYPE, "%s", name);
    tg_expect_error(TG_ERR_DTYPE, "int64", "tg_to_dtype(x, TG_F32)");
  }
  cr_assert_eq(tg_add_(i, tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT)), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE,
                  "tg_add_: the result type float32 cannot be cast to a's dtype int64");
  cr_assert_eq(tg_version(i), iver);
  cr_assert_eq(tg_add_(i, i), TG_OK);
  tg_scope_end(sc);
}

TG_TEST(inplace, expanded_target_is_rejected) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *base = tg_ones(TG_SHAPE(1, 3), TG_OPTS_DEFAULT);
  tg_tensor *e = tg_expand(base, TG_SHAPE(2, 3));
  uint64_t ver = tg_version(base);
  cr_assert_eq(tg_add_scalar_(e, 1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_add_scalar_: x [2, 3] has overlapping elements");
  cr_assert_eq(tg_add_(e, base), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_add_: a [2, 3] has overlapping elements");
  expect_unchanged(base, (const double[]){1, 1, 1}, ver);
  tg_scope_end(sc);
}

TG_TEST(inplace, null_arguments_keep_the_first_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_eq(tg_add_(NULL, a), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_add_: a is NULL");
  cr_assert_eq(tg_mul_(a, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_mul_: b is NULL");
  cr_assert_eq(tg_tanh_(NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_tanh_: x is NULL");
  uint64_t ver = tg_version(a);
  cr_assert_eq(tg_add_(a, tg_exp(tg_add(a, tg_ones(TG_SHAPE(4), TG_OPTS_DEFAULT)))), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_add: a is [2, 3] and b is [4]");
  expect_unchanged(a, (const double[]){1, 1, 1, 1, 1, 1}, ver);
  tg_scope_end(sc);
}

/* A tensor saved for backward, then modified in place: backward is an error, not a wrong
 * gradient. */
TG_TEST(inplace, saved_tensor_modified_in_place_fails_backward) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_full(TG_SHAPE(3), 0.5, (tg_options){.dtype = TG_F64, .requires_grad = true});
  tg_tensor *z = tg_exp(a);
  tg_tensor *w = tg_mul(z, z);
  cr_assert_eq(tg_add_scalar_(z, 1), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(w), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "mul", "modified by an in-place operation");

  /* an in-place op's own saved output, overwritten by the next one */
  tg_tensor *y = tg_mul_scalar(a, 1);
  cr_assert_eq(tg_sigmoid_(y), TG_OK);
  cr_assert_eq(tg_mul_scalar_(y, 2), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "sigmoid_", "modified by an in-place operation");

  /* mul_(y, y) saved y as b, then overwrote it */
  tg_tensor *q = tg_mul_scalar(a, 1);
  cr_assert_eq(tg_mul_(q, q), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(q), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "mul_", "modified by an in-place operation");
  tg_tensor *r = tg_mul_scalar(a, 1);
  cr_assert_eq(tg_div_(r, r), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(r), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "div_", "modified by an in-place operation");
  cr_assert_null(tg_grad(a));
  tg_scope_end(sc);
  /* b == a is saved without a reference cycle through a's new grad_fn */
  cr_assert_eq(tg_live_objects(), 0, "leaked %lld objects", (long long)tg_live_objects());
}

/* Overwriting what backward needs fails (exp_ saves its output); overwriting what it does
 * not need is fine. */
TG_TEST(inplace, only_overwriting_a_value_backward_needs_fails) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_full(TG_SHAPE(2), 0.25, (tg_options){.dtype = TG_F64, .requires_grad = true});
  tg_tensor *y = tg_add_scalar(a, 0); /* add_scalar saves nothing */
  cr_assert_eq(tg_exp_(y), TG_OK);
  cr_assert_eq(tg_add_scalar_(y, 3), TG_OK); /* add_scalar_ does not need exp_'s output... */
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_ERR_STATE); /* ...but exp_ does */
  tg_expect_error(TG_ERR_STATE, "exp_");
  tg_tensor *z = tg_add_scalar(a, 0);
  cr_assert_eq(tg_add_scalar_(z, 3), TG_OK);
  cr_assert_eq(tg_exp_(z), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(z), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(a), 2, (const double[]){exp(3.25), exp(3.25)}, 1e-15);
  tg_scope_end(sc);
}

/* Recording an in-place op on a view is refused (tg does not rebuild the base's history);
 * the view and its base are left as they were. Without recording it is allowed. */
TG_TEST(inplace, view_target_while_recording_is_refused_untouched) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), (tg_options){.dtype = TG_F64, .requires_grad = true});
  tg_tensor *y = tg_mul_scalar(x, 2);
  tg_tensor *row = tg_select(y, 0, 1);
  uint64_t ver = tg_version(y);
  cr_assert_neq(tg_exp_(row), TG_OK);
  cr_assert_neq(tg_last_error(), TG_OK);
  tg_clear_error();
  cr_assert_neq(tg_mul_(row, x), TG_OK);
  tg_clear_error();
  expect_unchanged(y, (const double[]){2, 2, 2, 2, 2, 2}, ver);
  tg_no_grad_begin();
  cr_assert_eq(tg_exp_(row), TG_OK);
  tg_no_grad_end();
  tg_test_expect_values(y, 6, (const double[]){2, 2, 2, exp(2), exp(2), exp(2)}, 1e-15);
  tg_scope_end(sc);
}

/* The refusal says what to write instead: the out-of-place op, a clone, or no_grad. */
TG_TEST(inplace, view_target_refusal_says_what_to_do_instead) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), (tg_options){.dtype = TG_F64, .requires_grad = true});
  tg_tensor *row = tg_select(tg_mul_scalar(x, 2), 0, 1);
  cr_assert_eq(tg_exp_(row), TG_ERR_UNSUPPORTED);
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_exp_: in-place operation on a view while recording",
                  "use the out-of-place tg_exp or write into a clone of the view (tg_clone)",
                  "tg_no_grad_begin/end");
  cr_assert_eq(
      tg_add_scaled_(tg_t(tg_zeros(TG_SHAPE(2, 2), TG_OPTS(.dtype = TG_F64))),
                     tg_ones(TG_SHAPE(2, 2), (tg_options){.dtype = TG_F64, .requires_grad = true}),
                     2),
      TG_ERR_UNSUPPORTED);
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_add_: in-place", "use the out-of-place tg_add or");
  cr_assert_eq(tg_copy_(row, x), TG_ERR_SHAPE); /* [2, 3] into [3]: shapes first */
  cr_assert_eq(tg_copy_(row, tg_select(x, 0, 0)), TG_ERR_UNSUPPORTED);
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_copy_: in-place operation on a view",
                  ": write into a clone of the view (tg_clone) instead");
  tg_scope_end(sc);
}

/* ---- tg_copy_ on the tape (PyTorch's CopyBackwards); failed before: TG_ERR_UNSUPPORTED ---- */

static tg_status copy_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  tg_tensor *dst = tg_mul_scalar(in[0], 3); /* dst with history, overwritten by src */
  if (!dst) return tg_last_error();
  tg_status st = tg_copy_(dst, in[1]);
  out[0] = st == TG_OK ? tg_mul(dst, dst) : NULL;
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(inplace, copy_is_recorded_gradient_to_src_summed_and_zero_to_dst) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = grad_values(TG_SHAPE(2, 3), 1, (domain){-2, 2, true});
  tg_tensor *src = tg_from_data(TG_SHAPE(3), (float[]){1, 2, 3}, TG_OPTS(0));
  cr_assert_eq(tg_set_requires_grad(src, true), TG_OK);
  tg_tensor *dst = tg_mul_scalar(a, 2);
  uint64_t ver = tg_version(dst);
  cr_assert_eq(tg_copy_(dst, src), TG_OK, "%s", tg_last_error_message());
  cr_assert_gt(tg_version(dst), ver);
  cr_assert_str_eq(tg_grad_fn_name(dst), "copy_");
  tg_test_expect_values(dst, 6, (const double[]){1, 2, 3, 1, 2, 3}, 0);
  tg_tensor *w =
      tg_from_data(TG_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6}, TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_backward(tg_sum(tg_mul(dst, w)), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(a), 6, (const double[]){0, 0, 0, 0, 0, 0}, 0);
  cr_assert_eq(tg_tensor_dtype(tg_grad(src)), TG_F32); /* in src's dtype */
  tg_test_expect_values(tg_grad(src), 3, (const double[]){5, 7, 9}, 0);
  /* Gradcheck and gradgradcheck in F64, broadcast src. */
  tg_tensor *in[2] = {grad_values(TG_SHAPE(2, 3), 2, (domain){-2, 2, true}),
                      grad_values(TG_SHAPE(3), 3, (domain){-2, 2, true})};
  cr_assert_eq(tg_gradcheck(copy_fn, NULL, 2, in, 1, quiet), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(copy_fn, NULL, 2, in, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(inplace, copy_recording_rules) {
  tg_scope sc = tg_scope_begin();
  tg_options grad = {.dtype = TG_F64, .requires_grad = true};
  tg_tensor *x = tg_ones(TG_SHAPE(3), grad);
  /* dst with history and a constant src: recorded, dst's old history gets 0. */
  tg_tensor *dst = tg_mul_scalar(x, 2);
  cr_assert_eq(tg_copy_(dst, tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64))), TG_OK);
  cr_assert_str_eq(tg_grad_fn_name(dst), "copy_");
  cr_assert_eq(tg_backward(tg_sum(dst), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(x), 3, (const double[]){0, 0, 0}, 0);
  /* A plain dst takes src's history. */
  tg_tensor *plain = tg_zeros(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_copy_(plain, x), TG_OK, "%s", tg_last_error_message());
  cr_assert(tg_requires_grad(plain));
  /* A leaf that requires grad is refused, as every in-place op on one is. */
  cr_assert_eq(tg_copy_(x, tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64))), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_copy_", "a leaf tensor that requires grad");
  /* An integer dst takes no gradient: copied, not recorded (as PyTorch). */
  tg_tensor *i = tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_I64));
  cr_assert_eq(tg_copy_(i, tg_mul_scalar(x, 2.5)), TG_OK, "%s", tg_last_error_message());
  cr_assert(!tg_requires_grad(i));
  tg_test_expect_values(i, 3, (const double[]){2, 2, 2}, 0);
  /* Without recording nothing changes. */
  tg_no_grad_begin();
  cr_assert_eq(tg_copy_(x, tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64))), TG_OK);
  tg_no_grad_end();
  tg_scope_end(sc);
}
