/* Adam's and AdamW's fused step (src/nn/optimizer_fused.c, the kernel adam.step): the same
 * bits as the composed update it replaces, in F32 and F64, with and without weight decay and
 * groups; the composed update still runs where the fused one must not (moments the caller
 * holds, as a kept state dict does, stay what they were); and a step
 * allocates one small tensor instead of a chain of whole-parameter temporaries. */
#include <math.h>
#include <string.h>

#include "testutil.h"

#include "nn/optimizer_impl.h"
#include "ops/adam_math.h"

/* A reference to each moment of parameter i: while it is held, the fused kernel must not
 * write the moments in place, so the composed update runs (a state dict the caller kept
 * holds them the same way, once the parameter has state). */
static void hold(const tg_optimizer *opt, int i, tg_tensor **held) {
  held[0] = tg_retain(opt->state1[i]);
  held[1] = tg_retain(opt->state2[i]);
}
static void release_held(tg_tensor **held, int n) {
  for (int k = 0; k < n; k++) tg_release(held[k]);
}

/* The CPU's allocator, counting the storages it makes. */
static int64_t allocations;
static const tg_allocator *inner;
static void *counting_alloc(void *ctx, size_t n) {
  (void)ctx;
  allocations++;
  return inner->alloc(inner->ctx, n);
}
static void counting_free(void *ctx, void *p, size_t n) {
  (void)ctx;
  inner->free(inner->ctx, p, n);
}
static const tg_allocator counting = {"counting", counting_alloc, counting_free, NULL};

/* Two parameters (a matrix and a vector) and their gradients, from seed. */
static void make_params(tg_dtype dtype, uint64_t seed, tg_tensor **w, tg_tensor **b) {
  tg_generator *gen = tg_generator_new(seed);
  const tg_options o = {.dtype = dtype, .requires_grad = true};
  *w = tg_randn(TG_SHAPE(37, 29), o, gen);
  *b = tg_randn(TG_SHAPE(29), o, gen);
  cr_assert_not_null(*w);
  cr_assert_not_null(*b);
  tg_retain(*w), tg_retain(*b);
  tg_generator_free(gen);
}

/* Gives w and b step-dependent gradients (the same for both optimizers under test). */
static void set_grads(tg_tensor *w, tg_tensor *b, int step) {
  tg_scope s = tg_scope_begin();
  tg_generator *gen = tg_generator_new(1000 + (uint64_t)step);
  const tg_options o = {.dtype = tg_tensor_dtype(w)};
  cr_assert_eq(tg_set_grad(w, tg_mul_scalar(tg_randn(TG_SHAPE(37, 29), o, gen), 0.1)), TG_OK);
  cr_assert_eq(tg_set_grad(b, tg_randn(TG_SHAPE(29), o, gen)), TG_OK);
  tg_generator_free(gen);
  tg_scope_end(s);
}

static bool same_bits(const tg_tensor *a, const tg_tensor *b) {
  const size_t n = (size_t)tg_numel(a) * (tg_tensor_dtype(a) == TG_F32 ? 4 : 8);
  return tg_numel(a) == tg_numel(b) && memcmp(tg_data_ptr(a), tg_data_ptr(b), n) == 0;
}

/* Five steps of two identical optimizers, one on the fused kernel and one kept on the
 * composed update by a state dict held for the whole run; every value bit for bit. */
static void fused_equals_composed(tg_dtype dtype, bool adamw, double weight_decay) {
  tg_tensor *w1, *b1, *w2, *b2;
  make_params(dtype, 7, &w1, &b1);
  make_params(dtype, 7, &w2, &b2);
  tg_adamw_options o = tg_adamw_defaults();
  o.lr = 3e-3, o.beta2 = 0.95, o.weight_decay = weight_decay;
  const tg_adam_options ao = {
      .lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = weight_decay};
  tg_optimizer *fused = adamw ? tg_adamw_new(1, &w1, o) : tg_adam_new(1, &w1, ao);
  tg_optimizer *composed = adamw ? tg_adamw_new(1, &w2, o) : tg_adam_new(1, &w2, ao);
  cr_assert_not_null(fused, "%s", tg_last_error_message());
  cr_assert_not_null(composed);
  const tg_param_group_options g = {.lr = 1e-2, .weight_decay = NAN};
  cr_assert_eq(tg_optimizer_add_param_group(fused, 1, &b1, g), TG_OK);
  cr_assert_eq(tg_optimizer_add_param_group(composed, 1, &b2, g), TG_OK);
  tg_tensor *held[4];
  hold(composed, 0, held), hold(composed, 1, held + 2);
  for (int step = 0; step < 5; step++) {
    set_grads(w1, b1, step);
    set_grads(w2, b2, step);
    tg_tensor *now_held[4]; /* the composed update replaces the moments: hold the new ones */
    hold(composed, 0, now_held), hold(composed, 1, now_held + 2);
    cr_assert_eq(tg_optimizer_step(fused), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_optimizer_step(composed), TG_OK, "%s", tg_last_error_message());
    for (int k = 0; k < 4; k++) /* replaced, not written: the composed update ran */
      cr_assert(composed->state1[k / 2] != now_held[k] && composed->state2[k / 2] != now_held[k]);
    release_held(now_held, 4);
    cr_assert(same_bits(w1, w2), "%s, step %d: w differs", tg_dtype_name(dtype), step);
    cr_assert(same_bits(b1, b2), "%s, step %d: b differs", tg_dtype_name(dtype), step);
  }
  tg_tensor_dict *now = tg_optimizer_state_dict(fused);
  tg_tensor_dict *composed_now = tg_optimizer_state_dict(composed);
  cr_assert_not_null(now);
  cr_assert_not_null(composed_now);
  for (int k = 0; k < tg_tensor_dict_size(now); k++) {
    const char *name = tg_tensor_dict_name(now, k);
    const tg_tensor *a = tg_tensor_dict_get(now, name), *c = tg_tensor_dict_get(composed_now, name);
    cr_assert_not_null(c, "%s", name);
    if (tg_tensor_dtype(a) == dtype) cr_assert(same_bits(a, c), "state %s differs", name);
  }
  /* the moments held since before the first step are still the zeros they were */
  for (int k = 0; k < 4; k++) cr_assert_eq(tg_test_at(tg_sum(tg_abs(held[k])), 0), 0.0);
  release_held(held, 4);
  tg_tensor_dict_free(now), tg_tensor_dict_free(composed_now);
  tg_optimizer_free(fused), tg_optimizer_free(composed);
  tg_release(w1), tg_release(b1), tg_release(w2), tg_release(b2);
}

TG_TEST(adam_fused, adamw_f32_and_f64_bit_for_bit) {
  fused_equals_composed(TG_F32, true, 0.1);
  fused_equals_composed(TG_F64, true, 0.1);
}
TG_TEST(adam_fused, adam_with_l2_and_without_decay_bit_for_bit) {
  fused_equals_composed(TG_F32, false, 0.05);
  fused_equals_composed(TG_F64, false, 0.0);
}

/* A step over a 37 x 29 and a 29 parameter allocates the fused kernel's params tensor only;
 * with the moments shared (a kept state dict), the composed chain allocates many. */
TG_TEST(adam_fused, a_step_allocates_one_small_tensor) {
  tg_tensor *w, *b;
  make_params(TG_F32, 3, &w, &b);
  tg_optimizer *opt = tg_adamw_new(2, (tg_tensor *const[]){w, b}, tg_adamw_defaults());
  cr_assert_not_null(opt);
  set_grads(w, b, 0);
  inner = tg_get_allocator(TG_CPU);
  const tg_allocator *before = tg_set_allocator(TG_CPU, &counting);
  allocations = 0;
  cr_assert_eq(tg_optimizer_step(opt), TG_OK, "%s", tg_last_error_message());
  const int64_t fused = allocations;
  tg_tensor_dict *held = tg_optimizer_state_dict(opt); /* the caller keeps the state */
  cr_assert_eq(tg_tensor_dict_size(held), 6);
  allocations = 0;
  cr_assert_eq(tg_optimizer_step(opt), TG_OK);
  const int64_t composed = allocations;
  tg_set_allocator(TG_CPU, before);
  cr_assert_eq(fused, 1, "the fused step allocated %lld tensors", (long long)fused);
  cr_assert_gt(composed, 10, "the composed step allocated %lld", (long long)composed);
  tg_tensor_dict_free(held);
  tg_optimizer_free(opt);
  tg_release(w), tg_release(b);
}

/* One step with a fused parameter and a composed one (only b's second moment is held by the
 * caller), against an optimizer kept wholly on the composed update: the same bits. */
TG_TEST(adam_fused, fused_and_composed_parameters_in_one_step) {
  tg_tensor *w1, *b1, *w2, *b2;
  make_params(TG_F32, 5, &w1, &b1);
  make_params(TG_F32, 5, &w2, &b2);
  tg_adamw_options o = tg_adamw_defaults();
  o.weight_decay = 0.3;
  tg_optimizer *a = tg_adamw_new(2, (tg_tensor *const[]){w1, b1}, o);
  tg_optimizer *c = tg_adamw_new(2, (tg_tensor *const[]){w2, b2}, o);
  tg_tensor *all[4], *b_moment = tg_retain(a->state2[1]);
  hold(c, 0, all), hold(c, 1, all + 2);
  for (int step = 0; step < 3; step++) {
    set_grads(w1, b1, step);
    set_grads(w2, b2, step);
    tg_tensor *now_held[4];
    hold(c, 0, now_held), hold(c, 1, now_held + 2);
    tg_tensor *w_moment = a->state1[0];
    cr_assert_eq(tg_optimizer_step(a), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_optimizer_step(c), TG_OK);
    cr_assert_eq(a->state1[0], w_moment);  /* written in place: w's step was fused */
    cr_assert_neq(a->state2[1], b_moment); /* replaced: b's was composed */
    release_held(now_held, 4);
    cr_assert(same_bits(w1, w2), "step %d", step);
    cr_assert(same_bits(b1, b2), "step %d", step);
  }
  cr_assert_eq(tg_test_at(tg_sum(b_moment), 0), 0.0); /* still the zeros it was */
  tg_release(b_moment);
  release_held(all, 4);
  tg_optimizer_free(a), tg_optimizer_free(c);
  tg_release(w1), tg_release(b1), tg_release(w2), tg_release(b2);
}

/* The kernel itself (reachable by name through tg_device_ops_of(...)->kernel) refuses operands
 * it would read past: another size, a non-contiguous moment, a bad params tensor. */
static void kernel_refusals(tg_device device) {
  const tg_device_ops *ops = tg_device_ops_of(device.type);
  cr_assert_not_null(ops);
  tg_kernel_fn step = ops->kernel("adam.step");
  cr_assert_not_null(step);
  const tg_options f32 = {.dtype = TG_F32, .device = device};
  tg_tensor *p = tg_zeros(TG_SHAPE(4, 3), f32), *g = tg_zeros(TG_SHAPE(4, 3), f32);
  tg_tensor *m = tg_zeros(TG_SHAPE(4, 3), f32), *small = tg_zeros(TG_SHAPE(5), f32);
  tg_tensor *params = tg_zeros(TG_SHAPE(TG_ADAM_NUM_PARAMS), (tg_options){.dtype = TG_F64});
  tg_tensor *bad_params = tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_F64});
  cr_assert_eq(step(5, (tg_tensor *const[]){p, g, m, small, params}), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "adam.step", "tensor 3 must be contiguous", "12 elements");
  cr_assert_eq(step(5, (tg_tensor *const[]){p, g, tg_transpose(m, 0, 1), m, params}),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "adam.step", "tensor 2 must be contiguous");
  cr_assert_eq(step(5, (tg_tensor *const[]){p, g, m, m, bad_params}), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "adam.step", "params must be");
}

TG_TEST(adam_fused, the_cpu_kernel_refuses_what_it_would_read_past) {
  kernel_refusals(TG_DEVICE_CPU);
}
