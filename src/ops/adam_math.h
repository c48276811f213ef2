/* One element of Adam's and AdamW's update (the kernels of the line in src/ops/def/optim.def,
 * for the CPU and CUDA), in the order and the precision of the composed update it replaces
 * (src/nn/optimizer.c's adam_update): every scalar converted to the element type, one
 * rounding per operation as each whole-tensor op made, so both give the same bits. Shared
 * by C (the CPU) and CUDA. Internal. */
#ifndef TG_ADAM_MATH_H
#define TG_ADAM_MATH_H

#include <math.h>

#include "tensor/hostdevice.h"

/* The params tensor's layout. */
enum {
  TG_ADAM_LR, /* the group's lr */
  TG_ADAM_BETA1,
  TG_ADAM_BETA2,
  TG_ADAM_EPS,
  TG_ADAM_WEIGHT_DECAY, /* the group's */
  TG_ADAM_DECOUPLED,    /* 1: AdamW (the parameter decays), 0: Adam (L2 term in the gradient) */
  TG_ADAM_STEP,         /* the step being taken, from 1 */
  TG_ADAM_NUM_PARAMS
};

/* The scalars of one parameter's step, each as the composed update passes it to its op. */
typedef struct tg_adam_scalars {
  double decay;      /* AdamW: 1 - lr wd (mul_scalar) */
  double wd;         /* Adam: wd (add_scaled's alpha) */
  int decoupled, l2; /* which of the two applies (none when wd is 0) */
  double beta1, one_minus_beta1, beta2, one_minus_beta2;
  double sqrt_bias2; /* sqrt(1 - beta2^t) (div_scalar) */
  double eps;        /* add_scalar */
  double step;       /* -lr / (1 - beta1^t) (add_scaled's alpha) */
} tg_adam_scalars;

static inline tg_adam_scalars tg_adam_scalars_read(const double *p) {
  tg_adam_scalars s;
  const double lr = p[TG_ADAM_LR], wd = p[TG_ADAM_WEIGHT_DECAY], t = p[TG_ADAM_STEP];
  s.decoupled = wd != 0 && p[TG_ADAM_DECOUPLED] != 0;
  s.l2 = wd != 0 && p[TG_ADAM_DECOUPLED] == 0;
  s.decay = 1.0 - lr * wd;
  s.wd = wd;
  s.beta1 = p[TG_ADAM_BETA1];
  s.one_minus_beta1 = 1.0 - s.beta1;
  s.beta2 = p[TG_ADAM_BETA2];
  s.one_minus_beta2 = 1.0 - s.beta2;
  s.sqrt_bias2 = sqrt(1.0 - pow(s.beta2, t));
  s.eps = p[TG_ADAM_EPS];
  s.step = -lr / (1.0 - pow(s.beta1, t));
  return s;
}

/* Defines tg_adam_element_<suffix>(s, p, g, m, v): the new p, m and v through the pointers. */
#define TG_ADAM_ELEMENT(suffix, T, SQRT)                                                           \
  static inline TG_HOST_DEVICE void tg_adam_element_##suffix(const tg_adam_scalars *s, T *p, T g,  \
                                                             T *m, T *v) {                         \
    T param = *p;                                                                                  \
    if (s->decoupled) param = param * (T)s->decay;                                                 \
    if (s->l2) g = g + (T)s->wd * param;                                                           \
    const T m1 = *m * (T)s->beta1 + (T)s->one_minus_beta1 * g;                                     \
    const T v1 = *v * (T)s->beta2 + (T)s->one_minus_beta2 * (g * g);                               \
    const T denom = (T)s->eps + SQRT(v1) / (T)s->sqrt_bias2;                                       \
    *p = param + (T)s->step * (m1 / denom);                                                        \
    *m = m1;                                                                                       \
    *v = v1;                                                                                       \
  }
TG_ADAM_ELEMENT(f32, float, sqrtf)
TG_ADAM_ELEMENT(f64, double, sqrt)

#endif
