/* tg — testing tools: comparing tensors, gradient checking, checking an op by its samples.
 * Implemented in src/testing/; the sample types (tg's OpInfo) are in tg/autograd.h, next to
 * tg_op_desc. Included by tg/tg.h. */
#ifndef TG_TESTING_H
#define TG_TESTING_H

#include "autograd.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* ---- comparing (tests, checks): any devices, dtypes and strides; a and b broadcast ----
 * tg_allclose: |a - b| <= atol + rtol * |b| everywhere, like torch.allclose (NaN is close
 * to nothing, unless equal_nan and both are NaN; infinities are close to themselves).
 * false with an error pending when a and b cannot be compared (check tg_last_error).
 * tg_max_abs_diff: max |a - b| (0 for no elements, NaN if any difference is NaN); -1 with
 * an error on bad arguments. tg_all_finite: no NaN or infinity in t (false + error for a
 * NULL t; I64 tensors are always finite). */
bool tg_allclose(const tg_tensor *a, const tg_tensor *b, double rtol, double atol);
bool tg_allclose_ex(const tg_tensor *a, const tg_tensor *b, double rtol, double atol,
                    bool equal_nan);
double tg_max_abs_diff(const tg_tensor *a, const tg_tensor *b);
bool tg_all_finite(const tg_tensor *t);

/* ---- gradient checking (in F64) ---- */
typedef struct tg_gradcheck_options {
  double eps;  /* 0 = 1e-6 */
  double atol; /* 0 = 1e-5 */
  double rtol; /* 0 = 1e-3 */
  bool quiet;  /* do not print the failure report to stderr (it is in the error message) */
  /* Fast mode: compares v^T J u for random unit u, v (one backward, two evaluations per
   * input) instead of the full Jacobian, for ops at realistic sizes. A mismatch is checked
   * again in full mode, for the element-naming report, when the Jacobian has at most
   * fast_mode_report_limit (0 = 2^20) cells; otherwise the report names the projection. */
  bool fast_mode;
  uint64_t fast_mode_report_limit;
  uint64_t seed; /* of fast mode's u, v, gradgradcheck's upstream gradients and the
                    undefined-grad check's random gradients; 0 = a fixed seed */
  /* Backward must be re-entrant: two runs over one graph agree within this (0 = bitwise). */
  double nondet_tol;
  /* Skips the check that backward copes with outputs that received no gradient (for an op
   * with several differentiable outputs, each left out of the roots once: the result must
   * equal backward with a zero gradient for it). */
  bool skip_undefined_grad_check;
} tg_gradcheck_options;

/* A function of tensors: fills outputs[0..n_outputs) (scope-owned results are fine). */
typedef tg_status (*tg_gradcheck_fn)(void *user, const tg_tensor *const *inputs,
                                     tg_tensor **outputs);

/* Compares backward against central differences for every input that requires grad.
 * TG_OK when they agree; TG_ERR_GRADCHECK with a report naming input, output, element and
 * both values otherwise. Inputs must be F64 without overlapping elements. */
tg_status tg_gradcheck(tg_gradcheck_fn fn, void *user, int n_inputs, tg_tensor *const *inputs,
                       int n_outputs, tg_gradcheck_options opts);
/* Checks the gradient of the gradient, with random upstream gradients. */
tg_status tg_gradgradcheck(tg_gradcheck_fn fn, void *user, int n_inputs, tg_tensor *const *inputs,
                           int n_outputs, tg_gradcheck_options opts);

/* ---- checking an op by its samples ---- */
typedef struct tg_op_check_options {
  tg_gradcheck_options gradcheck; /* defaults and flags for every sample (a sample's own
                                     atol/rtol win) */
  bool skip_gradgradcheck;
  bool skip_cuda; /* else, when a CUDA device is present and the op has a CUDA kernel, CPU and
                     CUDA forward outputs (F32, F64) and gradients (F64) must agree */
  bool verbose;   /* a line per sample and check on stdout */
} tg_op_check_options;

/* Runs every sample of op (F64, CPU): gradcheck when the op is differentiable;
 * gradgradcheck, or for TG_OP_ONCE_DIFFERENTIABLE that double backward is refused; and
 * CPU-vs-CUDA agreement. TG_ERR_UNSUPPORTED when the op has no samples; otherwise the first
 * failure, its message naming op, sample and check. In-place ops are checked on a clone of
 * their input 0 (one taking any number of inputs also gets a second clone appended: input
 * 0's old value, which the built-in in-place forms' backward reads). A sample's n_outputs
 * of 0 means the op's own count. */
tg_status tg_op_check(const tg_op_desc *op, tg_op_check_options opts);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
