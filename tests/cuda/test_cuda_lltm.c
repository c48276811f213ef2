/* The fused LLTM on CUDA:
 *  - the CUDA backend's LLTM passes (lltm_forward_pointwise, lltm_backward_pointwise of
 *    ops/backend.h) against a double-precision host reference written from the formulas,
 *    on odd sizes and strided operands;
 *  - the registered op on CUDA against the same op on the CPU and against the LLTM
 *    composed from generic ops on CUDA: forward and every gradient, F32 and F64;
 *  - gradcheck of the fused op on CUDA in F64. */
#include <math.h>
#include <stdlib.h>

#include "cuda_testutil.h"
#include "ops/backend.h"
#include "ops/backend.h"
#include "tg/lltm.h"

typedef struct dims {
  int64_t B, I, S;
} dims;

/* B, I, S of 1, 3, 7 and 300, as the design asks. */
static const dims sizes[] = {{1, 1, 1},   {3, 7, 3},   {7, 3, 7},
                             {300, 3, 7}, {3, 300, 7}, {7, 3, 300}};
#define NUM_SIZES (sizeof sizes / sizeof sizes[0])

static const tg_dtype floating[] = {TG_F32, TG_F64};

/* ---- the reference, in double on the host ---- */

typedef struct host_lltm {
  /* inputs (row-major) */
  double *input, *W, *bias, *old_h, *old_cell, *grad_h, *grad_cell;
  /* outputs */
  double *new_h, *new_cell, *X, *gates;
  double *xw, *act, *d_gates; /* X @ W^T (no bias), the activations, the gate gradients */
  double *d_input, *d_W, *d_bias, *d_old_h, *d_old_cell;
} host_lltm;

static double *values(int64_t n, int salt, double scale) {
  double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = scale * tg_test_value(i, salt, false);
  return v;
}
static double *zeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

static host_lltm host_new(dims d) {
  const int64_t B = d.B, I = d.I, S = d.S;
  host_lltm h;
  /* weights scaled like the tutorial's init so that the gates are not all saturated */
  h.input = values(B * I, 1, 1.0);
  h.W = values(3 * S * (S + I), 2, 1.0 / sqrt((double)(S + I)));
  h.bias = values(3 * S, 3, 0.5);
  h.old_h = values(B * S, 4, 0.5);
  h.old_cell = values(B * S, 5, 1.0);
  h.grad_h = values(B * S, 6, 1.0);
  h.grad_cell = values(B * S, 7, 1.0);
  h.new_h = zeros(B * S), h.new_cell = zeros(B * S);
  h.X = zeros(B * (S + I)), h.gates = zeros(B * 3 * S);
  h.xw = zeros(B * 3 * S), h.act = zeros(B * 3 * S), h.d_gates = zeros(B * 3 * S);
  h.d_input = zeros(B * I), h.d_W = zeros(3 * S * (S + I)), h.d_bias = zeros(3 * S);
  h.d_old_h = zeros(B * S), h.d_old_cell = zeros(B * S);
  return h;
}

static void host_free(host_lltm *h) {
  double *all[] = {h->input,      h->W,         h->bias,  h->old_h,    h->old_cell,
                   h->grad_h,     h->grad_cell, h->new_h, h->new_cell, h->X,
                   h->gates,      h->d_input,   h->d_W,   h->d_bias,   h->d_old_h,
                   h->d_old_cell, h->xw,        h->act,   h->d_gates};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* The tutorial's formulas, with grad_h / grad_cell optional (NULL = zero). */
static void host_reference(dims d, host_lltm *h, bool use_grad_h, bool use_grad_cell) {
  const int64_t B = d.B, I = d.I, S = d.S, K = S + I;
  for (int64_t b = 0; b < B; b++) {
    for (int64_t j = 0; j < S; j++) h->X[b * K + j] = h->old_h[b * S + j];
    for (int64_t j = 0; j < I; j++) h->X[b * K + S + j] = h->input[b * I + j];
    for (int64_t g = 0; g < 3 * S; g++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++) acc += h->X[b * K + k] * h->W[g * K + k];
      h->xw[b * 3 * S + g] = acc;
      h->gates[b * 3 * S + g] = acc + h->bias[g];
    }
  }
  double *d_gates = h->d_gates;
  for (int64_t b = 0; b < B; b++)
    for (int64_t j = 0; j < S; j++) {
      const double g0 = h->gates[b * 3 * S + j], g1 = h->gates[b * 3 * S + S + j],
                   g2 = h->gates[b * 3 * S + 2 * S + j];
      const double ig = sigmoid(g0), og = sigmoid(g1), cand = g2 > 0 ? g2 : expm1(g2);
      const double nc = h->old_cell[b * S + j] + cand * ig, t = tanh(nc);
      h->act[b * 3 * S + j] = ig;
      h->act[b * 3 * S + S + j] = og;
      h->act[b * 3 * S + 2 * S + j] = cand;
      h->new_cell[b * S + j] = nc;
      h->new_h[b * S + j] = t * og;
      const double gh = use_grad_h ? h->grad_h[b * S + j] : 0;
      const double gc = use_grad_cell ? h->grad_cell[b * S + j] : 0;
      const double d_nc = gc + gh * og * (1 - t * t);
      h->d_old_cell[b * S + j] = d_nc;
      d_gates[b * 3 * S + j] = d_nc * cand * ig * (1 - ig);
      d_gates[b * 3 * S + S + j] = gh * t * og * (1 - og);
      d_gates[b * 3 * S + 2 * S + j] = d_nc * ig * (g2 > 0 ? 1 : exp(g2));
    }
  for (int64_t g = 0; g < 3 * S; g++) {
    for (int64_t k = 0; k < K; k++) {
      double acc = 0;
      for (int64_t b = 0; b < B; b++) acc += d_gates[b * 3 * S + g] * h->X[b * K + k];
      h->d_W[g * K + k] = acc;
    }
    double acc = 0;
    for (int64_t b = 0; b < B; b++) acc += d_gates[b * 3 * S + g];
    h->d_bias[g] = acc;
  }
  for (int64_t b = 0; b < B; b++)
    for (int64_t k = 0; k < K; k++) {
      double acc = 0;
      for (int64_t g = 0; g < 3 * S; g++) acc += d_gates[b * 3 * S + g] * h->W[g * K + k];
      if (k < S)
        h->d_old_h[b * S + k] = acc;
      else
        h->d_input[b * I + k - S] = acc;
    }
}

/* ---- device tensors ---- */

static tg_tensor *to_cuda(const double *v, int64_t rows, int64_t cols, tg_dtype dtype) {
  tg_tensor *h = cols ? tg_from_data(2, (const int64_t[]){rows, cols}, v, TG_OPTS(.dtype = TG_F64))
                      : tg_from_data(1, (const int64_t[]){rows}, v, TG_OPTS(.dtype = TG_F64));
  tg_tensor *t = tg_to_device(tg_to_dtype(h, dtype), TG_CUDA0);
  cr_assert(t, "%s", tg_last_error_message());
  return t;
}

/* A [rows, cols] CUDA tensor laid out transposed in memory (strides (1, rows)). */
static tg_tensor *to_cuda_transposed(const double *v, int64_t rows, int64_t cols, tg_dtype dtype) {
  tg_tensor *t = tg_contiguous(tg_t(to_cuda(v, rows, cols, dtype)));
  return tg_t(t);
}

static tg_tensor *cuda_empty(int64_t rows, int64_t cols, tg_dtype dtype) {
  tg_tensor *t = cols ? tg_empty(TG_SHAPE(rows, cols), TG_OPTS(.dtype = dtype, .device = TG_CUDA0))
                      : tg_empty(TG_SHAPE(rows), TG_OPTS(.dtype = dtype, .device = TG_CUDA0));
  cr_assert(t, "%s", tg_last_error_message());
  return t;
}

static void assert_matches(const char *what, const tg_tensor *t, const double *ref,
                           tg_dtype dtype) {
  int64_t n = tg_numel(t);
  double *got = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  tg_tensor *h = tg_to_device(tg_to_dtype(t, TG_F64), TG_DEVICE_CPU);
  cr_assert(h, "%s", tg_last_error_message());
  cr_assert_eq(tg_to_host_array(h, got, sizeof(double) * (size_t)n), TG_OK);
  const double rtol = dtype == TG_F64 ? 1e-10 : 2e-4, atol = dtype == TG_F64 ? 1e-10 : 2e-4;
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], r = ref[i];
    if (!(fabs(g - r) <= atol + rtol * fabs(r))) {
      free(got);
      cr_assert_fail("%s[%lld]: %.17g, reference %.17g", what, (long long)i, g, r);
    }
  }
  free(got);
}

/* The LLTM's CUDA kernels (TG_OP_KERNEL lines of src/ops/def/lltm.def), found by name as
 * the op finds them and called with their documented arguments. */
static tg_kernel_fn lltm_kernel(const char *name) {
  tg_kernel_fn k = tg__kernel("test", name, TG_CUDA0);
  cr_assert(k, "%s", tg_last_error_message());
  return k;
}
static tg_status forward_pointwise(tg_tensor *gates, const tg_tensor *bias,
                                   const tg_tensor *old_cell, tg_tensor *new_h,
                                   tg_tensor *new_cell) {
  return lltm_kernel("lltm.forward_pointwise")(
      5, (tg_tensor *const[]){gates, (tg_tensor *)bias, (tg_tensor *)old_cell, new_h, new_cell});
}
static tg_status backward_pointwise(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                    const tg_tensor *gates, const tg_tensor *old_cell,
                                    tg_tensor *d_gates, tg_tensor *d_old_cell, tg_tensor *d_bias) {
  return lltm_kernel("lltm.backward_pointwise")(
      7, (tg_tensor *const[]){(tg_tensor *)grad_h, (tg_tensor *)grad_cell, (tg_tensor *)gates,
                              (tg_tensor *)old_cell, d_gates, d_old_cell, d_bias});
}
typedef struct lltm_passes {
  tg_status (*lltm_forward_pointwise)(tg_tensor *, const tg_tensor *, const tg_tensor *,
                                      tg_tensor *, tg_tensor *);
  tg_status (*lltm_backward_pointwise)(const tg_tensor *, const tg_tensor *, const tg_tensor *,
                                       const tg_tensor *, tg_tensor *, tg_tensor *, tg_tensor *);
} lltm_passes;
static const lltm_passes passes = {forward_pointwise, backward_pointwise};
static const lltm_passes *cuda_be(void) { return &passes; }

/* [B, 3S] d_gates laid out transposed in memory, as lltm.c stores large ones. */
static tg_tensor *cuda_empty_transposed(int64_t rows, int64_t cols, tg_dtype dtype) {
  return tg_t(cuda_empty(cols, rows, dtype));
}

TG_CUDA_TEST(cuda_lltm, passes_match_the_reference) {
  const lltm_passes *be = cuda_be();
  for (size_t s = 0; s < NUM_SIZES; s++)
    for (int f = 0; f < 2; f++)
      for (int strided = 0; strided < 2; strided++) {
        tg_scope sc = tg_scope_begin();
        const dims d = sizes[s];
        const int64_t B = d.B, S = d.S;
        const tg_dtype dt = floating[f];
        host_lltm h = host_new(d);
        host_reference(d, &h, true, true);
        /* strided: old_cell, grad_h and d_gates transposed in memory, bias [1, 3S] */
        tg_tensor *gates = to_cuda(h.xw, B, 3 * S, dt);
        tg_tensor *bias = strided ? to_cuda(h.bias, 1, 3 * S, dt) : to_cuda(h.bias, 3 * S, 0, dt);
        tg_tensor *old_cell =
            strided ? to_cuda_transposed(h.old_cell, B, S, dt) : to_cuda(h.old_cell, B, S, dt);
        tg_tensor *new_h = cuda_empty(B, S, dt), *new_cell = cuda_empty(B, S, dt);
        cr_assert_eq(be->lltm_forward_pointwise(gates, bias, old_cell, new_h, new_cell), TG_OK,
                     "%s", tg_last_error_message());
        assert_matches("new_h", new_h, h.new_h, dt);
        assert_matches("new_cell", new_cell, h.new_cell, dt);
        assert_matches("activations", gates, h.act, dt);

        tg_tensor *grad_h =
            strided ? to_cuda_transposed(h.grad_h, B, S, dt) : to_cuda(h.grad_h, B, S, dt);
        tg_tensor *grad_cell = to_cuda(h.grad_cell, B, S, dt);
        tg_tensor *d_gates =
            strided ? cuda_empty_transposed(B, 3 * S, dt) : cuda_empty(B, 3 * S, dt);
        tg_tensor *d_old_cell = cuda_empty(B, S, dt), *d_bias = cuda_empty(1, 3 * S, dt);
        cr_assert_eq(be->lltm_backward_pointwise(grad_h, grad_cell, gates, old_cell, d_gates,
                                                 d_old_cell, d_bias),
                     TG_OK, "%s", tg_last_error_message());
        assert_matches("d_gates", tg_contiguous(d_gates), h.d_gates, dt);
        assert_matches("d_old_cell", d_old_cell, h.d_old_cell, dt);
        double *bias_sums = calloc((size_t)(3 * S), sizeof *bias_sums);
        cr_assert(bias_sums);
        for (int64_t b = 0; b < B; b++)
          for (int64_t j = 0; j < 3 * S; j++) bias_sums[j] += h.d_gates[b * 3 * S + j];
        assert_matches("d_bias", d_bias, bias_sums, dt);
        free(bias_sums);
        host_free(&h);
        tg_scope_end(sc);
      }
}

TG_CUDA_TEST(cuda_lltm, backward_pass_with_missing_gradients_and_outputs) {
  const lltm_passes *be = cuda_be();
  const dims d = {5, 4, 3};
  const int64_t B = d.B, S = d.S;
  for (int missing = 0; missing < 2; missing++) {
    tg_scope sc = tg_scope_begin();
    host_lltm h = host_new(d);
    host_reference(d, &h, missing != 0, missing == 0); /* one of the two upstream gradients */
    tg_tensor *gates = to_cuda(h.act, B, 3 * S, TG_F64);
    tg_tensor *old_cell = to_cuda(h.old_cell, B, S, TG_F64);
    tg_tensor *gh = missing ? to_cuda(h.grad_h, B, S, TG_F64) : NULL;
    tg_tensor *gc = missing ? NULL : to_cuda(h.grad_cell, B, S, TG_F64);
    /* d_old_cell asked for only once */
    tg_tensor *d_gates = cuda_empty(B, 3 * S, TG_F64);
    tg_tensor *d_old_cell = missing ? cuda_empty(B, S, TG_F64) : NULL;
    cr_assert_eq(be->lltm_backward_pointwise(gh, gc, gates, old_cell, d_gates, d_old_cell, NULL),
                 TG_OK, "%s", tg_last_error_message());
    assert_matches("d_gates", d_gates, h.d_gates, TG_F64);
    if (d_old_cell) assert_matches("d_old_cell", d_old_cell, h.d_old_cell, TG_F64);
    host_free(&h);
    tg_scope_end(sc);
  }
}

TG_CUDA_TEST(cuda_lltm, passes_reject_bad_arguments) {
  const lltm_passes *be = cuda_be();
  tg_tensor *a = tg_zeros(TG_SHAPE(2, 3), TG_OPTS(.device = TG_CUDA0));
  tg_tensor *g = tg_zeros(TG_SHAPE(2, 9), TG_OPTS(.device = TG_CUDA0));
  tg_tensor *h = tg_zeros(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  tg_tensor *n = tg_zeros(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_I64, .device = TG_CUDA0));
  cr_assert_eq(be->lltm_forward_pointwise(g, g, h, a, a), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "cuda.lltm_forward_pointwise");
  cr_assert_eq(be->lltm_forward_pointwise(g, g, n, a, a), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "cuda.lltm_forward_pointwise");
  cr_assert_eq(be->lltm_backward_pointwise(NULL, NULL, g, h, g, NULL, NULL), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "cuda.lltm_backward_pointwise");
}

/* ---- the registered op ---- */

typedef struct lltm_run {
  tg_tensor *out[2];   /* new_h, new_cell */
  tg_tensor *grads[5]; /* input, weights, bias, old_h, old_cell */
} lltm_run;

/* Runs the fused or composed LLTM on device from the host values of h, backward from
 * sum(new_h * grad_h) + sum(new_cell * grad_cell); results are scope-owned. strided: the
 * 2-D inputs are transposed views of [cols, rows] leaves (whose gradients are returned). */
static lltm_run run_op(const host_lltm *h, dims d, tg_device device, tg_dtype dt, bool fused,
                       bool strided) {
  const int64_t B = d.B, I = d.I, S = d.S;
  const double *src[5] = {h->input, h->W, h->bias, h->old_h, h->old_cell};
  const int64_t rows[5] = {B, 3 * S, 3 * S, B, B}, cols[5] = {I, S + I, 0, S, S};
  tg_tensor *leaf[5], *arg[5];
  for (int i = 0; i < 5; i++) {
    tg_tensor *t = cols[i]
                       ? tg_from_data(TG_SHAPE(rows[i], cols[i]), src[i], TG_OPTS(.dtype = TG_F64))
                       : tg_from_data(TG_SHAPE(rows[i]), src[i], TG_OPTS(.dtype = TG_F64));
    const bool transposed = strided && cols[i];
    leaf[i] = tg_to_device(tg_to_dtype(transposed ? tg_contiguous(tg_t(t)) : t, dt), device);
    cr_assert(leaf[i], "%s", tg_last_error_message());
    cr_assert_eq(tg_set_requires_grad(leaf[i], true), TG_OK);
    arg[i] = transposed ? tg_t(leaf[i]) : leaf[i];
  }
  lltm_run r;
  tg_status st =
      fused ? tg_lltm(arg[0], arg[1], arg[2], arg[3], arg[4], &r.out[0], &r.out[1])
            : tg_lltm_composed(arg[0], arg[1], arg[2], arg[3], arg[4], &r.out[0], &r.out[1]);
  cr_assert_eq(st, TG_OK, "%s", tg_last_error_message());
  tg_tensor *gh = tg_to_device(
      tg_to_dtype(tg_from_data(TG_SHAPE(B, S), h->grad_h, TG_OPTS(.dtype = TG_F64)), dt), device);
  tg_tensor *gc = tg_to_device(
      tg_to_dtype(tg_from_data(TG_SHAPE(B, S), h->grad_cell, TG_OPTS(.dtype = TG_F64)), dt),
      device);
  tg_tensor *loss = tg_add(tg_sum(tg_mul(r.out[0], gh)), tg_sum(tg_mul(r.out[1], gc)));
  cr_assert(loss, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(loss, NULL), TG_OK, "%s", tg_last_error_message());
  for (int i = 0; i < 5; i++) {
    r.grads[i] = tg_grad(leaf[i]);
    cr_assert(r.grads[i], "no gradient for input %d", i);
  }
  return r;
}

static void assert_runs_close(const lltm_run *a, const lltm_run *b, tg_dtype dt) {
  const double rtol = dt == TG_F64 ? 1e-10 : 2e-4, atol = dt == TG_F64 ? 1e-10 : 2e-4;
  for (int i = 0; i < 2; i++) tg_assert_close(a->out[i], b->out[i], rtol, atol);
  for (int i = 0; i < 5; i++) tg_assert_close(a->grads[i], b->grads[i], rtol, atol);
}

TG_CUDA_TEST(cuda_lltm, fused_on_cuda_equals_cpu_and_composed) {
  for (size_t s = 0; s < NUM_SIZES; s++)
    for (int f = 0; f < 2; f++)
      for (int strided = 0; strided < 2; strided++) {
        tg_scope sc = tg_scope_begin();
        host_lltm h = host_new(sizes[s]);
        lltm_run fused_gpu = run_op(&h, sizes[s], TG_CUDA0, floating[f], true, strided);
        lltm_run fused_cpu = run_op(&h, sizes[s], TG_DEVICE_CPU, floating[f], true, strided);
        lltm_run composed_gpu = run_op(&h, sizes[s], TG_CUDA0, floating[f], false, strided);
        cr_assert_eq(tg_tensor_device(fused_gpu.out[0]).type, TG_CUDA);
        cr_assert_eq(tg_tensor_device(fused_gpu.grads[1]).type, TG_CUDA);
        assert_runs_close(&fused_gpu, &fused_cpu, floating[f]);
        assert_runs_close(&fused_gpu, &composed_gpu, floating[f]);
        host_free(&h);
        tg_scope_end(sc);
      }
}

static tg_status fused_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  return tg_lltm(in[0], in[1], in[2], in[3], in[4], &out[0], &out[1]);
}

TG_CUDA_TEST(cuda_lltm, gradcheck_of_the_fused_op_on_cuda) {
  const dims d = {2, 3, 2};
  host_lltm h = host_new(d);
  const double *src[5] = {h.input, h.W, h.bias, h.old_h, h.old_cell};
  const int64_t rows[5] = {2, 6, 6, 2, 2}, cols[5] = {3, 5, 0, 2, 2};
  tg_tensor *in[5];
  for (int i = 0; i < 5; i++) {
    in[i] = to_cuda(src[i], rows[i], cols[i], TG_F64);
    cr_assert_eq(tg_set_requires_grad(in[i], true), TG_OK);
  }
  tg_status st = tg_gradcheck(fused_fn, NULL, 5, in, 2, (tg_gradcheck_options){.quiet = true});
  cr_assert_eq(st, TG_OK, "%s", tg_last_error_message());
  host_free(&h);
}
