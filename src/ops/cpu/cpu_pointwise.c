/* unary and binary pointwise kernels for F32 and F64 (the I64 rows: cpu_pointwise_int.c), and
 * where for every dtype.
 *
 * Each (kind, dtype) gets its own row function, generated from the kind lists
 * (ops/def/unary.def, binary.def), so the element math (ops/pointwise_math.h, shared with
 * CUDA) is inlined into loops the compiler vectorizes. The scalars A, B / alpha are
 * converted to the element type T first.
 *
 * F32 exp, sigmoid, tanh and elu run the vectorizable float math of cpu_vecmath.h instead
 * of libm's scalar calls (its accuracy bounds are stated there); F64 stays libm. The F32 rows
 * are compiled for AVX-512, AVX2 and baseline x86-64 (TG_VF_CLONES). */

/* For the vectorizable math's selects (see cpu_vecmath.h); before the includes. */
#pragma GCC optimize("no-trapping-math")

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/cpu_vecmath.h"
#include "ops/pointwise_math.h"

/* ---- unary ---- */

/* ATTR: TG_VF_CLONES for the F32 rows (AVX-512 and AVX2 where the CPU has them; F32 is the
 * benchmark's type), nothing for F64. */
#define TG_CPU_UNARY_ROW(NAME, T, EXPR, ATTR)                                                      \
  ATTR static void NAME(int64_t n, char *const *p, const int64_t *s, const void *ctx) {            \
    const tg_cpu_scalars *sc = (const tg_cpu_scalars *)ctx;                                        \
    const T A = (T)sc->a, B = (T)sc->b;                                                            \
    (void)A;                                                                                       \
    (void)B;                                                                                       \
    T *out = (T *)p[0];                                                                            \
    const T *in = (const T *)p[1];                                                                 \
    if (s[0] == 1 && s[1] == 1) {                                                                  \
      for (int64_t i = 0; i < n; i++) {                                                            \
        const T x = in[i];                                                                         \
        out[i] = (EXPR);                                                                           \
      }                                                                                            \
    } else if (s[1] == 0) { /* broadcast input: evaluate once */                                   \
      const T x = in[0];                                                                           \
      const T v = (EXPR);                                                                          \
      for (int64_t i = 0; i < n; i++) out[i * s[0]] = v;                                           \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                            \
        const T x = in[i * s[1]];                                                                  \
        out[i * s[0]] = (EXPR);                                                                    \
      }                                                                                            \
    }                                                                                              \
  }

/* One row per (kind, dtype), generated from the list; the expression is the kind's math
 * (ops/pointwise_math.h), inlined into the loop. */
#define TG_UNARY_KIND(KIND, name, cost)                                                            \
  TG_CPU_UNARY_ROW(unary_##name##_f32, float, tg_unary_##name##_f(x, A, B), TG_VF_CLONES)          \
  TG_CPU_UNARY_ROW(unary_##name##_f64, double, tg_unary_##name##_d(x, A, B), )
#include "ops/def/unary.def"

/* [kind][0 = F32, 1 = F64] */
static const tg_cpu_row_fn unary_rows[TG_NUM_UNARY][2] = {
#define TG_UNARY_KIND(KIND, name, cost)                                                            \
  [TG_UNARY_##KIND] = {unary_##name##_f32, unary_##name##_f64},
#include "ops/def/unary.def"
};

/* The F32 rows over the vectorizable math, which replace those above where present. */
TG_CPU_UNARY_ROW(unary_exp_vf32, float, tg_vf_exp(x), TG_VF_CLONES)
TG_CPU_UNARY_ROW(unary_sigmoid_vf32, float, tg_vf_sigmoid(x), TG_VF_CLONES)
TG_CPU_UNARY_ROW(unary_tanh_vf32, float, tg_vf_tanh(x), TG_VF_CLONES)
TG_CPU_UNARY_ROW(unary_elu_vf32, float, tg_vf_elu(x, A), TG_VF_CLONES)
/* issue 25, helper "pointwise": gelu's tanh form (GPT-2's MLP) and silu */
TG_CPU_UNARY_ROW(unary_gelu_tanh_vf32, float, tg_vf_gelu_tanh(x), TG_VF_CLONES)
TG_CPU_UNARY_ROW(unary_silu_vf32, float, x / (1.0f + tg_vf_exp(-x)), TG_VF_CLONES)
static const tg_cpu_row_fn unary_rows_vf32[TG_NUM_UNARY] = {
    [TG_UNARY_EXP] = unary_exp_vf32,
    [TG_UNARY_SIGMOID] = unary_sigmoid_vf32,
    [TG_UNARY_TANH] = unary_tanh_vf32,
    [TG_UNARY_ELU] = unary_elu_vf32,
    [TG_UNARY_GELU_TANH] = unary_gelu_tanh_vf32,
    [TG_UNARY_SILU] = unary_silu_vf32,
};

/* Kinds whose every element calls libm (cost LIBM) are worth a thread team at smaller
 * sizes. */
enum { CHEAP, LIBM };
static const bool unary_is_transcendental[TG_NUM_UNARY] = {
#define TG_UNARY_KIND(KIND, name, cost) [TG_UNARY_##KIND] = (cost) == LIBM,
#include "ops/def/unary.def"
};

/* 0 for F32, 1 for F64, -1 for a dtype the pointwise kernels do not support. */
static int floating_slot(tg_dtype dtype) { return dtype == TG_F32 ? 0 : dtype == TG_F64 ? 1 : -1; }

tg_status tg_cpu_unary(int kind, double a, double b, tg_tensor *out, const tg_tensor *x) {
  if ((unsigned)kind >= (unsigned)TG_NUM_UNARY)
    return tg_set_error(TG_ERR_ARGUMENT, "unary: unknown kind %d", (int)kind);
  const int slot = floating_slot(out->dtype);
  const tg_cpu_row_fn int_row = out->dtype == TG_I64 ? tg_cpu_unary_row_i64(kind) : NULL;
  if ((slot < 0 && !int_row) || x->dtype != out->dtype)
    return tg_set_error(TG_ERR_DTYPE,
                        "unary: dtype %s is not supported by kind %d (F32, F64, and I64 for "
                        "neg, abs, relu, pow, affine and mul_scalar, with out's dtype)",
                        tg_dtype_name(x->dtype != out->dtype ? x->dtype : out->dtype), (int)kind);
  if (x->ndim != out->ndim)
    return tg_set_error(TG_ERR_SHAPE, "unary: input has %d dims but out %d", x->ndim, out->ndim);
  tg_cpu_operand ops[2] = {tg_cpu_operand_of(out), tg_cpu_operand_of(x)};
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, out->ndim, out->sizes, 2, ops);
  tg_cpu_scalars sc = {a, b};
  const int64_t min =
      unary_is_transcendental[kind] ? TG_CPU_PARALLEL_MIN_TRANSCENDENTAL : TG_CPU_PARALLEL_MIN;
  const tg_cpu_row_fn row = int_row                              ? int_row
                            : slot == 0 && unary_rows_vf32[kind] ? unary_rows_vf32[kind]
                                                                 : unary_rows[kind][slot];
  tg_cpu_iter_run(&it, row, &sc, tg_cpu_should_parallelize(it.numel, min));
  return TG_OK;
}

/* ---- binary ---- */

#define TG_CPU_BINARY_ROW(NAME, T, EXPR, ATTR)                                                     \
  ATTR static void NAME(int64_t n, char *const *p, const int64_t *s, const void *ctx) {            \
    const T alpha = (T)((const tg_cpu_scalars *)ctx)->a;                                           \
    (void)alpha;                                                                                   \
    T *out = (T *)p[0];                                                                            \
    const T *pa = (const T *)p[1];                                                                 \
    const T *pb = (const T *)p[2];                                                                 \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                                     \
      for (int64_t i = 0; i < n; i++) {                                                            \
        const T a = pa[i], b = pb[i];                                                              \
        out[i] = (EXPR);                                                                           \
      }                                                                                            \
    } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) { /* tensor (op) broadcast scalar */           \
      const T b = pb[0];                                                                           \
      for (int64_t i = 0; i < n; i++) {                                                            \
        const T a = pa[i];                                                                         \
        out[i] = (EXPR);                                                                           \
      }                                                                                            \
    } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {                                              \
      const T a = pa[0];                                                                           \
      for (int64_t i = 0; i < n; i++) {                                                            \
        const T b = pb[i];                                                                         \
        out[i] = (EXPR);                                                                           \
      }                                                                                            \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                            \
        const T a = pa[i * s[1]], b = pb[i * s[2]];                                                \
        out[i * s[0]] = (EXPR);                                                                    \
      }                                                                                            \
    }                                                                                              \
  }

#define TG_BINARY_KIND(KIND, name)                                                                 \
  TG_CPU_BINARY_ROW(binary_##name##_f32, float, tg_binary_##name##_f(a, b, alpha), TG_VF_CLONES)   \
  TG_CPU_BINARY_ROW(binary_##name##_f64, double, tg_binary_##name##_d(a, b, alpha), )
#include "ops/def/binary.def"

static const tg_cpu_row_fn binary_rows[TG_NUM_BINARY][2] = {
#define TG_BINARY_KIND(KIND, name) [TG_BINARY_##KIND] = {binary_##name##_f32, binary_##name##_f64},
#include "ops/def/binary.def"
};

/* The F32 rows over the vectorizable math, which replace those above where present (issue
 * 25, helper "pointwise": g f'(x) of gelu's tanh form and of silu). */
TG_CPU_BINARY_ROW(binary_gelu_tanh_backward_vf32, float, a *tg_vf_gelu_tanh_slope(b), TG_VF_CLONES)
TG_CPU_BINARY_ROW(binary_silu_backward_vf32, float, a *tg_vf_silu_slope(b), TG_VF_CLONES)
static const tg_cpu_row_fn binary_rows_vf32[TG_NUM_BINARY] = {
    [TG_BINARY_GELU_TANH_BACKWARD] = binary_gelu_tanh_backward_vf32,
    [TG_BINARY_SILU_BACKWARD] = binary_silu_backward_vf32,
};

tg_status tg_cpu_binary(int kind, double alpha, tg_tensor *out, const tg_tensor *a,
                        const tg_tensor *b) {
  if ((unsigned)kind >= (unsigned)TG_NUM_BINARY)
    return tg_set_error(TG_ERR_ARGUMENT, "binary: unknown kind %d", (int)kind);
  const int slot = floating_slot(out->dtype);
  const tg_cpu_row_fn int_row = out->dtype == TG_I64 ? tg_cpu_binary_row_i64(kind) : NULL;
  if ((slot < 0 && !int_row) || a->dtype != out->dtype || b->dtype != out->dtype) {
    tg_dtype bad = a->dtype != out->dtype   ? a->dtype
                   : b->dtype != out->dtype ? b->dtype
                                            : out->dtype;
    return tg_set_error(TG_ERR_DTYPE,
                        "binary: dtype %s is not supported by kind %d (F32, F64, and I64 for "
                        "add, sub, mul and the comparisons, with out's dtype)",
                        tg_dtype_name(bad), (int)kind);
  }
  if (a->ndim != out->ndim || b->ndim != out->ndim)
    return tg_set_error(TG_ERR_SHAPE, "binary: operands must be expanded to out's %d dims",
                        out->ndim);
  tg_cpu_operand ops[3] = {tg_cpu_operand_of(out), tg_cpu_operand_of(a), tg_cpu_operand_of(b)};
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, out->ndim, out->sizes, 3, ops);
  tg_cpu_scalars sc = {alpha, 0};
  const tg_cpu_row_fn row = int_row                               ? int_row
                            : slot == 0 && binary_rows_vf32[kind] ? binary_rows_vf32[kind]
                                                                  : binary_rows[kind][slot];
  tg_cpu_iter_run(&it, row, &sc, tg_cpu_should_parallelize(it.numel, TG_CPU_PARALLEL_MIN));
  return TG_OK;
}

/* ---- where: out = cond != 0 ? a : b, one row per (cond dtype, value dtype) ---- */

/* A selection, not arithmetic: inf and NaN in the branch not taken never reach out. A NaN
 * cond compares unequal to 0, so it picks a (as a bool cast does). The select is on the
 * bits, (a & m) | (b & ~m) with m all ones where cond != 0: no branch (a mask of random
 * bits mispredicts every other element), and a loop the compiler vectorizes. U: the
 * unsigned integer of T's width. */
#define TG_CPU_WHERE_ROW(NAME, C, T, U)                                                            \
  TG_VF_CLONES static void NAME(int64_t n, char *const *p, const int64_t *s, const void *ctx) {    \
    (void)ctx;                                                                                     \
    _Static_assert(sizeof(T) == sizeof(U), "U must be T's width");                                 \
    U *out = (U *)p[0];                                                                            \
    const C *pc = (const C *)p[1];                                                                 \
    const U *pa = (const U *)p[2], *pb = (const U *)p[3];                                          \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {                                        \
      for (int64_t i = 0; i < n; i++) {                                                            \
        const U m = (U)0 - (U)(pc[i] != 0);                                                        \
        out[i] = (pa[i] & m) | (pb[i] & ~m);                                                       \
      }                                                                                            \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                            \
        const U m = (U)0 - (U)(pc[i * s[1]] != 0);                                                 \
        out[i * s[0]] = (pa[i * s[2]] & m) | (pb[i * s[3]] & ~m);                                  \
      }                                                                                            \
    }                                                                                              \
  }
#define TG_CPU_WHERE_ROWS(C, cname)                                                                \
  TG_CPU_WHERE_ROW(where_##cname##_f32, C, float, uint32_t)                                        \
  TG_CPU_WHERE_ROW(where_##cname##_f64, C, double, uint64_t)                                       \
  TG_CPU_WHERE_ROW(where_##cname##_i64, C, int64_t, uint64_t)
TG_CPU_WHERE_ROWS(float, f32)
TG_CPU_WHERE_ROWS(double, f64)
TG_CPU_WHERE_ROWS(int64_t, i64)

/* [cond dtype][value dtype], indexed by tg_dtype */
static const tg_cpu_row_fn where_rows[TG_NUM_DTYPES][TG_NUM_DTYPES] = {
    [TG_F32] = {[TG_F32] = where_f32_f32, [TG_F64] = where_f32_f64, [TG_I64] = where_f32_i64},
    [TG_F64] = {[TG_F32] = where_f64_f32, [TG_F64] = where_f64_f64, [TG_I64] = where_f64_i64},
    [TG_I64] = {[TG_F32] = where_i64_f32, [TG_F64] = where_i64_f64, [TG_I64] = where_i64_i64},
};

tg_status tg_cpu_where(tg_tensor *out, const tg_tensor *cond, const tg_tensor *a,
                       const tg_tensor *b) {
  if ((unsigned)out->dtype >= TG_NUM_DTYPES || (unsigned)cond->dtype >= TG_NUM_DTYPES ||
      a->dtype != out->dtype || b->dtype != out->dtype)
    return tg_set_error(TG_ERR_DTYPE, "where: a is %s and b %s but out is %s (they must agree)",
                        tg_dtype_name(a->dtype), tg_dtype_name(b->dtype),
                        tg_dtype_name(out->dtype));
  if (cond->ndim != out->ndim || a->ndim != out->ndim || b->ndim != out->ndim)
    return tg_set_error(TG_ERR_SHAPE, "where: operands must be expanded to out's %d dims",
                        out->ndim);
  tg_cpu_operand ops[4] = {tg_cpu_operand_of(out), tg_cpu_operand_of(cond), tg_cpu_operand_of(a),
                           tg_cpu_operand_of(b)};
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, out->ndim, out->sizes, 4, ops);
  tg_cpu_iter_run(&it, where_rows[cond->dtype][out->dtype], NULL,
                  tg_cpu_should_parallelize(it.numel, TG_CPU_PARALLEL_MIN));
  return TG_OK;
}
