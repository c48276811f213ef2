/* Helpers of the CUDA suite. The suite builds twice: against the emulated CUDA build
 * (tg_emu, TG_CUDA_EMULATION defined: always, in CI) and against the real one (tg) when
 * nvcc built it, where every TG_CUDA_TEST skips on a machine without a GPU. */
#ifndef TG_CUDA_TESTUTIL_H
#define TG_CUDA_TESTUTIL_H

#include "ops/backend.h"
#include "testutil.h"
#include "tg/cuda.h"

#ifdef TG_CUDA_EMULATION
#include "ops/cuda/emu/emu_control.h"
#endif

#define TG_CUDA0 TG_DEVICE_CUDA(0)

/* A test of the CUDA device: skipped without one; the body runs inside a scope, then
 * tg_test_teardown (tg_test_scope, opened by tg_test_setup) checks that nothing is alive and
 * tg_cuda_test_teardown that no device memory is held (bytes_in_use == 0). The checks run in the
 * test body, not in .fini, whose failed assertions Criterion ignores. */
void tg_cuda_test_begin(void);
void tg_cuda_test_end(void);
#define TG_CUDA_TEST(suite, name, ...)                                                             \
  static void tg_cuda_test_body_##suite##_##name(void);                                            \
  Test(suite, name, .init = tg_test_setup, ##__VA_ARGS__) {                                        \
    tg_cuda_test_begin();                                                                          \
    tg_cuda_test_body_##suite##_##name();                                                          \
    tg_cuda_test_end();                                                                            \
  }                                                                                                \
  static void tg_cuda_test_body_##suite##_##name(void)

/* Tolerances for comparing a CUDA result with its CPU twin. */
#define TG_RTOL(dtype) ((dtype) == TG_F64 ? 1e-12 : 1e-5)
#define TG_ATOL(dtype) ((dtype) == TG_F64 ? 1e-12 : 1e-6)

/* The same tensor on both devices: same values and the same geometry. */
typedef struct tg_twin {
  tg_tensor *cpu, *cuda;
} tg_twin;

/* A deterministic, irregular value; positive keeps it in [0.25, 3.25). */
double tg_test_value(int64_t i, int salt, bool positive);
/* A contiguous 1-D tensor of n test values on both devices (scope-owned). */
tg_twin tg_twin_values(int64_t n, tg_dtype dtype, int salt, bool positive);
/* The same strided view of both tensors of base. */
tg_twin tg_twin_view(tg_twin base, int ndim, const int64_t *sizes, const int64_t *strides,
                     int64_t offset);

/* Layouts of a [rows, cols] operand. */
typedef enum tg_layout {
  TG_L_CONTIGUOUS,
  TG_L_TRANSPOSED, /* strides (1, rows) */
  TG_L_SLICED,     /* offset 3, row stride cols + 2 */
  TG_L_STEPPED,    /* every other element: no unit stride */
  TG_L_EXPAND_ROW, /* [1, cols] expanded: stride 0 on dim 0 */
  TG_L_EXPAND_COL, /* [rows, 1] expanded: stride 0 on dim 1 */
  TG_L_EXPAND_ALL, /* a broadcast scalar */
  TG_L_NUM
} tg_layout;
/* Layouts an output may have (no element written twice). */
#define TG_L_NUM_OUTPUT (TG_L_STEPPED + 1)
const char *tg_layout_name(tg_layout layout);
/* A [rows, cols] operand of test values in that layout, on both devices. */
tg_twin tg_twin_matrix(tg_layout layout, int64_t rows, int64_t cols, tg_dtype dtype, int salt,
                       bool positive);

/* Asserts CPU and CUDA tensors of a twin agree within rtol/atol. */
#define tg_assert_twin_close(tw, rtol, atol) tg_assert_close((tw).cuda, (tw).cpu, rtol, atol)

#endif
