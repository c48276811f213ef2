/* unary and binary pointwise kernels for F32 and F64.
 *
 * Each (kind, dtype) gets its own row function, so the element expression is inlined into
 * loops the compiler vectorizes. An expression is written once over `x` (unary) or `a`, `b`
 * (binary) and the scalars A, B / alpha, already converted to the element type T; integer
 * literals in an expression (1 / x) take T's precision by the usual conversions. */
#include "ops/cpu/cpu_internal.h"
#include "ops/pointwise_math.h"

/* ---- unary ---- */

#define TG_CPU_UNARY_ROW(NAME, T, EXPR)                                                            \
  static void NAME(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                 \
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

#define TG_CPU_UNARY_ROWS(KIND, EXPR)                                                              \
  TG_CPU_UNARY_ROW(unary_##KIND##_f32, float, EXPR)                                                \
  TG_CPU_UNARY_ROW(unary_##KIND##_f64, double, EXPR)

TG_CPU_UNARY_ROWS(neg, -x)
TG_CPU_UNARY_ROWS(exp, TG_CPU_EXP(x))
TG_CPU_UNARY_ROWS(log, TG_CPU_LOG(x))
TG_CPU_UNARY_ROWS(sqrt, TG_CPU_SQRT(x))
TG_CPU_UNARY_ROWS(sigmoid, tg_math_sigmoid(x))
TG_CPU_UNARY_ROWS(tanh, tg_math_tanh(x))
TG_CPU_UNARY_ROWS(relu, tg_math_relu(x))
TG_CPU_UNARY_ROWS(elu, tg_math_elu(x, A))
TG_CPU_UNARY_ROWS(pow, TG_CPU_POW(x, A))
TG_CPU_UNARY_ROWS(affine, B + A * x)
TG_CPU_UNARY_ROWS(reciprocal, 1 / x)
TG_CPU_UNARY_ROWS(step, tg_math_step(x))
TG_CPU_UNARY_ROWS(abs, TG_CPU_FABS(x))

#define TG_CPU_KIND_ENTRY(ENUM, KIND) [ENUM] = {unary_##KIND##_f32, unary_##KIND##_f64}
/* [kind][0 = F32, 1 = F64] */
static const tg_cpu_row_fn unary_rows[TG_NUM_UNARY][2] = {
    TG_CPU_KIND_ENTRY(TG_UNARY_NEG, neg),
    TG_CPU_KIND_ENTRY(TG_UNARY_EXP, exp),
    TG_CPU_KIND_ENTRY(TG_UNARY_LOG, log),
    TG_CPU_KIND_ENTRY(TG_UNARY_SQRT, sqrt),
    TG_CPU_KIND_ENTRY(TG_UNARY_SIGMOID, sigmoid),
    TG_CPU_KIND_ENTRY(TG_UNARY_TANH, tanh),
    TG_CPU_KIND_ENTRY(TG_UNARY_RELU, relu),
    TG_CPU_KIND_ENTRY(TG_UNARY_ELU, elu),
    TG_CPU_KIND_ENTRY(TG_UNARY_POW, pow),
    TG_CPU_KIND_ENTRY(TG_UNARY_AFFINE, affine),
    TG_CPU_KIND_ENTRY(TG_UNARY_RECIPROCAL, reciprocal),
    TG_CPU_KIND_ENTRY(TG_UNARY_STEP, step),
    TG_CPU_KIND_ENTRY(TG_UNARY_ABS, abs),
};
#undef TG_CPU_KIND_ENTRY

/* Kinds whose every element calls libm: worth a thread team at smaller sizes. */
static bool unary_is_transcendental(tg_unary_kind kind) {
  switch (kind) {
  case TG_UNARY_EXP:
  case TG_UNARY_LOG:
  case TG_UNARY_SIGMOID:
  case TG_UNARY_TANH:
  case TG_UNARY_ELU:
  case TG_UNARY_POW:
    return true;
  default:
    return false;
  }
}

/* 0 for F32, 1 for F64, -1 for a dtype the pointwise kernels do not support. */
static int floating_slot(tg_dtype dtype) { return dtype == TG_F32 ? 0 : dtype == TG_F64 ? 1 : -1; }

tg_status tg_cpu_unary(tg_unary_kind kind, double a, double b, tg_tensor *out, const tg_tensor *x) {
  if ((unsigned)kind >= (unsigned)TG_NUM_UNARY)
    return tg_set_error(TG_ERR_ARGUMENT, "unary: unknown kind %d", (int)kind);
  const int slot = floating_slot(out->dtype);
  if (slot < 0 || x->dtype != out->dtype)
    return tg_set_error(TG_ERR_DTYPE,
                        "unary: dtype %s is not supported (F32, F64 with out's dtype)",
                        tg_dtype_name(x->dtype != out->dtype ? x->dtype : out->dtype));
  if (x->ndim != out->ndim)
    return tg_set_error(TG_ERR_SHAPE, "unary: input has %d dims but out %d", x->ndim, out->ndim);
  tg_cpu_operand ops[2] = {tg_cpu_operand_of(out), tg_cpu_operand_of(x)};
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, out->ndim, out->sizes, 2, ops);
  tg_cpu_scalars sc = {a, b};
  const int64_t min =
      unary_is_transcendental(kind) ? TG_CPU_PARALLEL_MIN_TRANSCENDENTAL : TG_CPU_PARALLEL_MIN;
  tg_cpu_iter_run(&it, unary_rows[kind][slot], &sc, tg_cpu_should_parallelize(it.numel, min));
  return TG_OK;
}

/* ---- binary ---- */

#define TG_CPU_BINARY_ROW(NAME, T, EXPR)                                                           \
  static void NAME(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                 \
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

#define TG_CPU_BINARY_ROWS(KIND, EXPR)                                                             \
  TG_CPU_BINARY_ROW(binary_##KIND##_f32, float, EXPR)                                              \
  TG_CPU_BINARY_ROW(binary_##KIND##_f64, double, EXPR)

TG_CPU_BINARY_ROWS(add, a + alpha * b)
TG_CPU_BINARY_ROWS(sub, a - alpha * b)
TG_CPU_BINARY_ROWS(mul, a *b)
TG_CPU_BINARY_ROWS(div, a / b)
TG_CPU_BINARY_ROWS(eq, a == b ? 1 : 0)
TG_CPU_BINARY_ROWS(ge, a >= b ? 1 : 0)

#define TG_CPU_KIND_ENTRY(ENUM, KIND) [ENUM] = {binary_##KIND##_f32, binary_##KIND##_f64}
static const tg_cpu_row_fn binary_rows[TG_NUM_BINARY][2] = {
    TG_CPU_KIND_ENTRY(TG_BINARY_ADD, add), TG_CPU_KIND_ENTRY(TG_BINARY_SUB, sub),
    TG_CPU_KIND_ENTRY(TG_BINARY_MUL, mul), TG_CPU_KIND_ENTRY(TG_BINARY_DIV, div),
    TG_CPU_KIND_ENTRY(TG_BINARY_EQ, eq),   TG_CPU_KIND_ENTRY(TG_BINARY_GE, ge),
};
#undef TG_CPU_KIND_ENTRY

tg_status tg_cpu_binary(tg_binary_kind kind, double alpha, tg_tensor *out, const tg_tensor *a,
                        const tg_tensor *b) {
  if ((unsigned)kind >= (unsigned)TG_NUM_BINARY)
    return tg_set_error(TG_ERR_ARGUMENT, "binary: unknown kind %d", (int)kind);
  const int slot = floating_slot(out->dtype);
  if (slot < 0 || a->dtype != out->dtype || b->dtype != out->dtype) {
    tg_dtype bad = a->dtype != out->dtype   ? a->dtype
                   : b->dtype != out->dtype ? b->dtype
                                            : out->dtype;
    return tg_set_error(TG_ERR_DTYPE,
                        "binary: dtype %s is not supported (F32, F64 with out's dtype)",
                        tg_dtype_name(bad));
  }
  if (a->ndim != out->ndim || b->ndim != out->ndim)
    return tg_set_error(TG_ERR_SHAPE, "binary: operands must be expanded to out's %d dims",
                        out->ndim);
  tg_cpu_operand ops[3] = {tg_cpu_operand_of(out), tg_cpu_operand_of(a), tg_cpu_operand_of(b)};
  tg_cpu_iter it;
  tg_cpu_iter_init(&it, out->ndim, out->sizes, 3, ops);
  tg_cpu_scalars sc = {alpha, 0};
  tg_cpu_iter_run(&it, binary_rows[kind][slot], &sc,
                  tg_cpu_should_parallelize(it.numel, TG_CPU_PARALLEL_MIN));
  return TG_OK;
}
