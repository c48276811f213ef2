/* torch.nn.init in C: gains, fans and the named in-place initializations. The arithmetic
 * follows torch/nn/init.py step by step (same operations, same order), so bounds and
 * standard deviations are PyTorch's to the last bit. */
#include <math.h>

#include "tensor/error_impl.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"
#include "tg/nn.h"

double tg_init_calculate_gain(tg_nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
  case TG_NL_LINEAR:
  case TG_NL_CONV1D:
  case TG_NL_CONV2D:
  case TG_NL_CONV3D:
  case TG_NL_CONV_TRANSPOSE1D:
  case TG_NL_CONV_TRANSPOSE2D:
  case TG_NL_CONV_TRANSPOSE3D:
  case TG_NL_SIGMOID:
    return 1.0;
  case TG_NL_TANH:
    return 5.0 / 3;
  case TG_NL_RELU:
    return sqrt(2.0);
  case TG_NL_LEAKY_RELU: {
    double slope = isnan(param) ? 0.01 : param;
    return sqrt(2.0 / (1 + slope * slope));
  }
  case TG_NL_SELU:
    return 3.0 / 4;
  }
  tg_set_error(TG_ERR_ARGUMENT, "tg_init_calculate_gain: nonlinearity %d is not a tg_nonlinearity",
               (int)nonlinearity);
  return NAN;
}

/* The fans of t for the function fn (named in the errors). */
static bool fans(const char *fn, const tg_tensor *t, int64_t *fan_in, int64_t *fan_out) {
  if (!tg__check_arg(fn, "t", t) ||
      !tg__check(t->ndim >= 2, TG_ERR_SHAPE, fn,
                 "t is %s: fan in and fan out can not be computed for a tensor with fewer than "
                 "2 dimensions",
                 tg__sizes_str(t)))
    return false;
  int64_t receptive_field = 1;
  for (int d = 2; d < t->ndim; d++) receptive_field *= t->sizes[d];
  if (fan_in) *fan_in = t->sizes[1] * receptive_field;
  if (fan_out) *fan_out = t->sizes[0] * receptive_field;
  return true;
}

tg_status tg_init_calculate_fans(const tg_tensor *t, int64_t *fan_in, int64_t *fan_out) {
  return fans("tg_init_calculate_fans", t, fan_in, fan_out) ? TG_OK : tg_last_error();
}

/* ---- fills, outside the tape ---- */

typedef enum { FILL_UNIFORM, FILL_NORMAL, FILL_CONSTANT } fill_kind;

/* The write itself, under no-grad; an error from the op underneath gets fn in front. */
static tg_status fill(const char *fn, tg_tensor *t, fill_kind kind, double a, double b,
                      tg_generator *gen) {
  tg_no_grad_begin();
  tg_status st = kind == FILL_UNIFORM  ? tg_uniform_(t, a, b, gen)
                 : kind == FILL_NORMAL ? tg_normal_(t, a, b, gen)
                                       : tg_fill_(t, a);
  tg_no_grad_end();
  if (st != TG_OK) tg__error_prefix(fn);
  return st;
}

static bool check_random_target(const char *fn, const tg_tensor *t) {
  return tg__check_arg(fn, "t", t) && tg__check_floating(fn, "t", t);
}

tg_status tg_init_uniform_(tg_tensor *t, double a, double b, tg_generator *gen) {
  static const char *fn = "tg_init_uniform_";
  if (!check_random_target(fn, t)) return tg_last_error();
  return fill(fn, t, FILL_UNIFORM, a, b, gen);
}

tg_status tg_init_normal_(tg_tensor *t, double mean, double std, tg_generator *gen) {
  static const char *fn = "tg_init_normal_";
  if (!check_random_target(fn, t)) return tg_last_error();
  return fill(fn, t, FILL_NORMAL, mean, std, gen);
}

tg_status tg_init_constant_(tg_tensor *t, double value) {
  static const char *fn = "tg_init_constant_";
  if (!tg__check_arg(fn, "t", t)) return tg_last_error();
  return fill(fn, t, FILL_CONSTANT, value, 0, NULL);
}

tg_status tg_init_zeros_(tg_tensor *t) {
  static const char *fn = "tg_init_zeros_";
  if (!tg__check_arg(fn, "t", t)) return tg_last_error();
  return fill(fn, t, FILL_CONSTANT, 0, 0, NULL);
}

tg_status tg_init_ones_(tg_tensor *t) {
  static const char *fn = "tg_init_ones_";
  if (!tg__check_arg(fn, "t", t)) return tg_last_error();
  return fill(fn, t, FILL_CONSTANT, 1, 0, NULL);
}

/* ---- Glorot (xavier) ---- */

static tg_status xavier(const char *fn, tg_tensor *t, double gain, fill_kind kind,
                        tg_generator *gen) {
  int64_t fan_in, fan_out;
  if (!check_random_target(fn, t) || !fans(fn, t, &fan_in, &fan_out)) return tg_last_error();
  if (fan_in + fan_out == 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: t is %s: fan_in + fan_out is 0", fn,
                        tg__sizes_str(t));
  double std = gain * sqrt(2.0 / (double)(fan_in + fan_out));
  if (kind == FILL_NORMAL) return fill(fn, t, FILL_NORMAL, 0.0, std, gen);
  double bound = sqrt(3.0) * std; /* uniform(-b, b) has standard deviation b / sqrt(3) */
  return fill(fn, t, FILL_UNIFORM, -bound, bound, gen);
}

tg_status tg_init_xavier_uniform_(tg_tensor *t, double gain, tg_generator *gen) {
  return xavier("tg_init_xavier_uniform_", t, gain, FILL_UNIFORM, gen);
}

tg_status tg_init_xavier_normal_(tg_tensor *t, double gain, tg_generator *gen) {
  return xavier("tg_init_xavier_normal_", t, gain, FILL_NORMAL, gen);
}

/* ---- He (kaiming) ---- */

static tg_status kaiming(const char *fn, tg_tensor *t, double a, tg_fan_mode mode,
                         tg_nonlinearity nonlinearity, fill_kind kind, tg_generator *gen) {
  if (!check_random_target(fn, t)) return tg_last_error();
  if (mode != TG_FAN_IN && mode != TG_FAN_OUT)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: mode %d is neither TG_FAN_IN nor TG_FAN_OUT", fn,
                        (int)mode);
  if (t->ndim > 0 && tg_numel(t) == 0) return TG_OK; /* PyTorch: a no-op, with a warning */
  int64_t fan_in, fan_out;
  if (!fans(fn, t, &fan_in, &fan_out)) return tg_last_error();
  double gain = tg_init_calculate_gain(nonlinearity, a);
  if (isnan(gain)) {
    tg__error_prefix(fn);
    return tg_last_error();
  }
  double std = gain / sqrt((double)(mode == TG_FAN_IN ? fan_in : fan_out));
  if (kind == FILL_NORMAL) return fill(fn, t, FILL_NORMAL, 0.0, std, gen);
  double bound = sqrt(3.0) * std;
  return fill(fn, t, FILL_UNIFORM, -bound, bound, gen);
}

tg_status tg_init_kaiming_uniform_(tg_tensor *t, double a, tg_fan_mode mode,
                                   tg_nonlinearity nonlinearity, tg_generator *gen) {
  return kaiming("tg_init_kaiming_uniform_", t, a, mode, nonlinearity, FILL_UNIFORM, gen);
}

tg_status tg_init_kaiming_normal_(tg_tensor *t, double a, tg_fan_mode mode,
                                  tg_nonlinearity nonlinearity, tg_generator *gen) {
  return kaiming("tg_init_kaiming_normal_", t, a, mode, nonlinearity, FILL_NORMAL, gen);
}
