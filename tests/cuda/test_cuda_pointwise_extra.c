/* gelu (both forms), silu, clamp, maximum, minimum, cumsum and logsumexp on CUDA against the
 * CPU (issue 25, helper "pointwise"): forward and backward over layouts, F32 and F64, and
 * cumsum's int64. */
#include <math.h>

#include "cuda_testutil.h"

enum { GELU, GELU_TANH, SILU, CLAMP, MAXIMUM, MINIMUM, CUMSUM, CUMSUM_0, LOGSUMEXP, NUM_OPS };
static const char *const names[NUM_OPS] = {"gelu",     "gelu tanh", "silu",
                                           "clamp",    "maximum",   "minimum",
                                           "cumsum 1", "cumsum 0",  "logsumexp"};

static tg_tensor *apply(int op, tg_tensor *x, tg_tensor *y) {
  static const int dims[] = {1};
  switch (op) {
  case GELU:
    return tg_gelu(x, TG_GELU_NONE);
  case GELU_TANH:
    return tg_gelu(x, TG_GELU_TANH);
  case SILU:
    return tg_silu(x);
  case CLAMP:
    return tg_clamp(x, -0.3, NAN);
  case MAXIMUM:
    return tg_maximum(x, y);
  case MINIMUM:
    return tg_minimum(x, y);
  case CUMSUM:
    return tg_cumsum(x, 1);
  case CUMSUM_0:
    return tg_cumsum(x, 0);
  default:
    return tg_logsumexp(x, 1, dims, false);
  }
}

/* results: the op's output, then the gradients of x and y of sum(out * out). */
static void run(int op, tg_tensor *x, tg_tensor *y, tg_tensor **results) {
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(y, true), TG_OK);
  tg_tensor *out = apply(op, x, y);
  cr_assert(out, "%s: %s", names[op], tg_last_error_message());
  cr_assert_eq(tg_backward(tg_sum(tg_mul(out, out)), NULL), TG_OK, "%s", tg_last_error_message());
  results[0] = out;
  results[1] = tg_grad(x);
  results[2] = op == MAXIMUM || op == MINIMUM ? tg_grad(y) : tg_grad(x);
}

TG_CUDA_TEST(cuda_pointwise_extra, matches_the_cpu_forward_and_backward) {
  const tg_dtype floating[] = {TG_F32, TG_F64};
  for (int d = 0; d < 2; d++)
    for (int l = 0; l < TG_L_NUM_OUTPUT; l++)
      for (int op = 0; op < NUM_OPS; op++) {
        tg_scope sc = tg_scope_begin();
        tg_twin x = tg_twin_matrix((tg_layout)l, 5, 4, floating[d], 3, false);
        tg_twin y = tg_twin_matrix(TG_L_CONTIGUOUS, 5, 4, floating[d], 9, false);
        tg_tensor *cpu[3], *gpu[3];
        run(op, x.cpu, y.cpu, cpu);
        run(op, x.cuda, y.cuda, gpu);
        cr_log_info("%s %s %s", names[op], tg_dtype_name(floating[d]),
                    tg_layout_name((tg_layout)l));
        for (int r = 0; r < 3; r++) {
          cr_assert_eq(tg_tensor_device(gpu[r]).type, TG_CUDA);
          tg_assert_close(gpu[r], cpu[r], TG_RTOL(floating[d]), TG_ATOL(floating[d]));
        }
        tg_scope_end(sc);
      }
}

TG_CUDA_TEST(cuda_pointwise_extra, cumsum_of_int64_wraps_as_on_the_cpu) {
  const int64_t v[] = {INT64_MAX, 1, -3, 4, 5, 6};
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), v, TG_OPTS(.dtype = TG_I64));
  for (int dim = 0; dim < 2; dim++) {
    tg_tensor *cpu = tg_cumsum(x, dim);
    tg_tensor *gpu = tg_cumsum(tg_to_device(x, TG_CUDA0), dim);
    cr_assert(cpu && gpu, "%s", tg_last_error_message());
    cr_assert_eq(tg_tensor_dtype(gpu), TG_I64);
    tg_assert_close(gpu, cpu, 0, 0);
  }
}

TG_CUDA_TEST(cuda_pointwise_extra, empty_inputs) {
  tg_tensor *x = tg_to_device(tg_empty(TG_SHAPE(0, 3), TG_OPTS(.dtype = TG_F32)), TG_CUDA0);
  tg_tensor *c = tg_cumsum(x, 0);
  cr_assert(c, "%s", tg_last_error_message());
  tg_assert_sizes(c, 0, 3);
  tg_tensor *l = tg_to_device(tg_logsumexp(x, 1, (const int[]){0}, false), TG_DEVICE_CPU);
  cr_assert(l, "%s", tg_last_error_message());
  for (int k = 0; k < 3; k++) cr_assert(tg_test_at(l, k) == -INFINITY);
}
