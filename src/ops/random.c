/* Seedable generators. A draw of n elements uses counters offset..offset+n-1 and then
 * advances the offset, so results depend only on the seed and the sequence of draws. */
#include <float.h>
#include <math.h>

#include "ops/backend.h"
#include "ops/creation.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"

struct tg_generator {
  uint64_t seed;
  uint64_t offset;
};

static _Thread_local tg_generator default_generator = {0, 0};

tg_generator *tg_generator_new(uint64_t seed) {
  tg_generator *g = tg__host_malloc(sizeof *g);
  if (!g) {
    tg_set_error(TG_ERR_MEMORY, "tg_generator_new: out of memory");
    return NULL;
  }
  g->seed = seed;
  g->offset = 0;
  return g;
}

void tg_generator_free(tg_generator *gen) { tg__host_free(gen); }

void tg_generator_seed(tg_generator *gen, uint64_t seed) {
  if (!gen) return;
  gen->seed = seed;
  gen->offset = 0;
}

void tg_manual_seed(uint64_t seed) { tg_generator_seed(&default_generator, seed); }

tg_generator_state tg_generator_get_state(const tg_generator *gen) {
  if (!gen) gen = &default_generator;
  return (tg_generator_state){gen->seed, gen->offset};
}

void tg_generator_set_state(tg_generator *gen, tg_generator_state state) {
  if (!gen) gen = &default_generator;
  gen->seed = state.seed;
  gen->offset = state.offset;
}

typedef enum { DRAW_UNIFORM, DRAW_NORMAL } draw_kind;

/* Uniform bounds as PyTorch checks them: each within the dtype's finite range, and their
 * span too (else low + span * u overflows to inf, or to NaN where u is 0). */
static bool uniform_bounds_fit(const char *op, tg_dtype dtype, double low, double high) {
  const double max = dtype == TG_F32 ? FLT_MAX : DBL_MAX;
  const char *name = tg_dtype_name(dtype);
  if (!(fabs(low) <= max) || !(fabs(high) <= max))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: %s %g is out of range for %s (need finite bounds)",
                        op, fabs(low) <= max ? "high" : "low", fabs(low) <= max ? high : low, name),
           false;
  if (!(high - low <= max))
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: low %g, high %g: high - low exceeds the largest %s (%g)", op, low,
                        high, name, max),
           false;
  return true;
}

/* Fills t (any strides) with a draw; a non-contiguous t is filled through a dense buffer. */
static tg_status draw(const char *op, tg_tensor *t, draw_kind kind, double a, double b,
                      tg_generator *gen) {
  if (!tg__check_arg(op, "t", t) || !tg__check_floating(op, "t", t)) return tg_last_error();
  if (kind == DRAW_UNIFORM && !uniform_bounds_fit(op, t->dtype, a, b)) return tg_last_error();
  if (tg_is_grad_enabled() && t->requires_grad)
    return tg_set_error(TG_ERR_UNSUPPORTED,
                        "%s: t requires grad; fill it inside tg_no_grad_begin/end", op);
  if (!gen) gen = &default_generator;
  const tg_backend *be = tg__backend(op, t->storage->device);
  if (!be) return tg_last_error();
  bool dense = tg_is_contiguous(t);
  tg_tensor *target =
      dense ? tg_retain(t) : tg__empty_op(op, t->ndim, t->sizes, t->dtype, t->storage->device);
  if (!target) return tg_last_error();
  tg_status st = kind == DRAW_UNIFORM ? be->uniform(target, gen->seed, gen->offset, a, b)
                                      : be->normal(target, gen->seed, gen->offset, a, b);
  if (st == TG_OK && !dense) st = be->copy(t, target);
  tg_release(target);
  if (st != TG_OK) return st;
  /* Round up to whole Philox blocks so draws never share a block. */
  gen->offset += ((uint64_t)tg__numel(t->ndim, t->sizes) + 3) & ~(uint64_t)3;
  tg__bump_version(t);
  return TG_OK;
}

tg_status tg_uniform_(tg_tensor *t, double low, double high, tg_generator *gen) {
  if (!(low <= high))
    return tg_set_error(TG_ERR_ARGUMENT, "tg_uniform_: low %g must not exceed high %g", low, high);
  return draw("tg_uniform_", t, DRAW_UNIFORM, low, high, gen);
}

tg_status tg_normal_(tg_tensor *t, double mean, double std, tg_generator *gen) {
  if (!(std >= 0))
    return tg_set_error(TG_ERR_ARGUMENT, "tg_normal_: std %g must be non-negative", std);
  return draw("tg_normal_", t, DRAW_NORMAL, mean, std, gen);
}

static tg_tensor *fresh(const char *op, int ndim, const int64_t *sizes, tg_options opts,
                        draw_kind kind, double a, double b, tg_generator *gen) {
  if (!tg_dtype_is_floating(opts.dtype)) {
    tg_set_error(TG_ERR_DTYPE, "%s: dtype %s is not supported (F32, F64 only)", op,
                 tg_dtype_name(opts.dtype));
    return NULL;
  }
  tg_tensor *t = tg__empty_op(op, ndim, sizes, opts.dtype, opts.device);
  if (!t) return NULL;
  if (draw(op, t, kind, a, b, gen) != TG_OK) {
    tg_release(t);
    return NULL;
  }
  t->requires_grad = opts.requires_grad;
  return tg__scoped(t);
}

tg_tensor *tg_rand(int ndim, const int64_t *sizes, tg_options opts, tg_generator *gen) {
  return fresh("tg_rand", ndim, sizes, opts, DRAW_UNIFORM, 0.0, 1.0, gen);
}

tg_tensor *tg_randn(int ndim, const int64_t *sizes, tg_options opts, tg_generator *gen) {
  return fresh("tg_randn", ndim, sizes, opts, DRAW_NORMAL, 0.0, 1.0, gen);
}

tg_tensor *tg_uniform(int ndim, const int64_t *sizes, double low, double high, tg_options opts,
                      tg_generator *gen) {
  if (!(low <= high)) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_uniform: low %g must not exceed high %g", low, high);
    return NULL;
  }
  return fresh("tg_uniform", ndim, sizes, opts, DRAW_UNIFORM, low, high, gen);
}
