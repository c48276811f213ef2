/* The I64 rows of the unary and binary pointwise kernels: only the kinds that take int64
 * (ops/pointwise_int_math.h lists them; the front ends promote or refuse the others, see
 * docs/dtypes.md). The scalars are converted with tg__f64_to_i64, which is exact for the
 * whole numbers the front ends let through and never undefined for anything else. */
#include "ops/cpu/cpu_internal.h"
#include "ops/pointwise_int_math.h"
#include "tensor/checked.h"

#define TG_CPU_UNARY_INT_ROW(KIND, name)                                                           \
  static void unary_##name##_i64(int64_t n, char *const *p, const int64_t *s, const void *ctx) {   \
    const tg_cpu_scalars *sc = (const tg_cpu_scalars *)ctx;                                        \
    const int64_t A = tg__f64_to_i64(sc->a), B = tg__f64_to_i64(sc->b);                            \
    int64_t *out = (int64_t *)p[0];                                                                \
    const int64_t *in = (const int64_t *)p[1];                                                     \
    if (s[0] == 1 && s[1] == 1) {                                                                  \
      for (int64_t i = 0; i < n; i++) out[i] = tg_unary_##name##_i(in[i], A, B);                   \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) out[i * s[0]] = tg_unary_##name##_i(in[i * s[1]], A, B);     \
    }                                                                                              \
  }
TG_UNARY_INT_KINDS(TG_CPU_UNARY_INT_ROW)

#define TG_CPU_BINARY_INT_ROW(KIND, name)                                                          \
  static void binary_##name##_i64(int64_t n, char *const *p, const int64_t *s, const void *ctx) {  \
    const int64_t alpha = tg__f64_to_i64(((const tg_cpu_scalars *)ctx)->a);                        \
    int64_t *out = (int64_t *)p[0];                                                                \
    const int64_t *pa = (const int64_t *)p[1], *pb = (const int64_t *)p[2];                        \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                                     \
      for (int64_t i = 0; i < n; i++) out[i] = tg_binary_##name##_i(pa[i], pb[i], alpha);          \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++)                                                              \
        out[i * s[0]] = tg_binary_##name##_i(pa[i * s[1]], pb[i * s[2]], alpha);                   \
    }                                                                                              \
  }
TG_BINARY_INT_KINDS(TG_CPU_BINARY_INT_ROW)

static const tg_cpu_row_fn unary_rows_i64[TG_NUM_UNARY] = {
#define TG__ENTRY(KIND, name) [TG_UNARY_##KIND] = unary_##name##_i64,
    TG_UNARY_INT_KINDS(TG__ENTRY)
#undef TG__ENTRY
};

static const tg_cpu_row_fn binary_rows_i64[TG_NUM_BINARY] = {
#define TG__ENTRY(KIND, name) [TG_BINARY_##KIND] = binary_##name##_i64,
    TG_BINARY_INT_KINDS(TG__ENTRY)
#undef TG__ENTRY
};

tg_cpu_row_fn tg_cpu_unary_row_i64(tg_unary_kind kind) {
  return (unsigned)kind < (unsigned)TG_NUM_UNARY ? unary_rows_i64[kind] : NULL;
}

tg_cpu_row_fn tg_cpu_binary_row_i64(tg_binary_kind kind) {
  return (unsigned)kind < (unsigned)TG_NUM_BINARY ? binary_rows_i64[kind] : NULL;
}
