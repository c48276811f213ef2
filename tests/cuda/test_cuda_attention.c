/* The fused attention on CUDA against the CPU: forward and the gradients of q, k and v, causal
 * or not, with dropout (the same seed drops the same elements on both devices), Tq != Tk,
 * T past the CPU's tiles, odd D, F32 and F64, a strided q; the composed form on CUDA; no keys.
 * The kernels run in the emulated CI. */
#include <math.h>

#include "cuda_testutil.h"
#include "tg/attention.h"

static tg_twin leaf_twin(int ndim, const int64_t *sizes, tg_dtype dtype, int salt) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= sizes[d];
  tg_twin flat = tg_twin_values(n, dtype, salt, false);
  tg_twin t = {tg_detach(tg_reshape(flat.cpu, ndim, sizes)),
               tg_detach(tg_reshape(flat.cuda, ndim, sizes))};
  cr_assert(t.cpu && t.cuda, "%s", tg_last_error_message());
  cr_assert_eq(tg_set_requires_grad(t.cpu, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(t.cuda, true), TG_OK);
  return t;
}

static void check_twin(const tg_tensor *cuda, const tg_tensor *cpu, tg_dtype dt, double scale) {
  cr_assert(cuda && cpu, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_device(cuda).type, TG_CUDA);
  tg_assert_close(tg_to_device(cuda, TG_DEVICE_CPU), cpu, TG_RTOL(dt) * scale, TG_ATOL(dt) * scale);
}

typedef struct cuda_case {
  int64_t b, h, tq, tk, d, dv;
  int causal;
  double dropout_p;
  bool composed;
} cuda_case;

static void check_case(const cuda_case *c, tg_dtype dt) {
  tg_scope sc = tg_scope_begin();
  /* q stored [b, h, d, tq] and viewed transposed */
  tg_twin qs = leaf_twin(TG_SHAPE(c->b, c->h, c->d, c->tq), dt, 1);
  tg_twin q = {tg_transpose(qs.cpu, 2, 3), tg_transpose(qs.cuda, 2, 3)};
  tg_twin k = leaf_twin(TG_SHAPE(c->b, c->h, c->tk, c->d), dt, 2);
  tg_twin v = leaf_twin(TG_SHAPE(c->b, c->h, c->tk, c->dv), dt, 3);
  tg_generator *g_cpu = tg_generator_new(77), *g_cuda = tg_generator_new(77);
  tg_tensor *(*fn)(const tg_tensor *, const tg_tensor *, const tg_tensor *, tg_attention_options) =
      c->composed ? tg_attention_composed : tg_scaled_dot_product_attention;
  tg_tensor *cpu =
      fn(q.cpu, k.cpu, v.cpu, (tg_attention_options){c->causal, c->dropout_p, g_cpu, 0});
  tg_tensor *gpu =
      fn(q.cuda, k.cuda, v.cuda, (tg_attention_options){c->causal, c->dropout_p, g_cuda, 0});
  check_twin(gpu, cpu, dt, 10);
  tg_generator *gen = tg_generator_new(11);
  tg_tensor *g = tg_randn(tg_ndim(cpu), tg_sizes(cpu), (tg_options){.dtype = dt}, gen);
  tg_generator_free(gen);
  cr_assert_eq(tg_backward(cpu, g), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(gpu, tg_to_device(g, TG_CUDA0)), TG_OK, "%s", tg_last_error_message());
  check_twin(tg_grad(qs.cuda), tg_grad(qs.cpu), dt, 100);
  check_twin(tg_grad(k.cuda), tg_grad(k.cpu), dt, 100);
  check_twin(tg_grad(v.cuda), tg_grad(v.cpu), dt, 100);
  tg_generator_free(g_cpu);
  tg_generator_free(g_cuda);
  tg_scope_end(sc);
}

TG_CUDA_TEST(cuda_attention, matches_the_cpu) {
  static const cuda_case cases[] = {
      {2, 2, 5, 5, 4, 4, 0, 0, false},   {1, 2, 7, 7, 3, 5, 1, 0, false},
      {2, 1, 6, 6, 4, 4, 1, 0.3, false}, {1, 1, 70, 70, 5, 3, 1, 0.1, false},
      {1, 2, 3, 6, 4, 4, 0, 0.5, false}, {1, 2, 6, 3, 4, 4, 1, 0, false},
      {1, 2, 4, 4, 3, 3, 1, 0.2, true},
  };
  const tg_dtype dts[2] = {TG_F32, TG_F64};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int d = 0; d < 2; d++) check_case(&cases[i], dts[d]);
}

TG_CUDA_TEST(cuda_attention, no_keys_give_zeros) {
  tg_twin q = leaf_twin(TG_SHAPE(1, 3, 2), TG_F64, 4);
  tg_tensor *none = tg_zeros(TG_SHAPE(1, 0, 2), (tg_options){.dtype = TG_F64, .device = TG_CUDA0});
  tg_tensor *y = tg_scaled_dot_product_attention(q.cuda, none, none, tg_attention_defaults());
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_test_expect_values(tg_to_device(y, TG_DEVICE_CPU), 6, (const double[]){0, 0, 0, 0, 0, 0}, 0);
}
