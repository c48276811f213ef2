/* The per-element math of the fused LLTM, shared by the CPU passes (src/ops/cpu/cpu_lltm.c)
 * and the CUDA kernels (src/ops/cuda/lltm_cuda.cu), so both devices compute the same thing.
 *
 * One element (b, j) of the cell, S = state size, with pre-activations
 *   g0 = gates[b, j], g1 = gates[b, S + j], g2 = gates[b, 2S + j]   (bias included):
 *   ig = sigmoid(g0)   og = sigmoid(g1)   cand = elu(g2, alpha = 1)
 *   new_cell = old_cell + cand * ig        new_h = tanh(new_cell) * og
 *
 * Backward, with t = tanh(new_cell) and the upstream gradients gh (of new_h), gc (of new_cell):
 *   d_new_cell = gc + gh * og * (1 - t^2)     (d tanh at new_cell, written in terms of t)
 *   d_old_cell = d_new_cell
 *   d_g0 = d_new_cell * cand * ig * (1 - ig)
 *   d_g1 = gh * t * og * (1 - og)
 *   d_g2 = d_new_cell * ig * elu'(g2)         elu'(z) = z > 0 ? 1 : exp(z)
 * elu'(0) is 1 (PyTorch's ELU backward; the official CPU extension's d_elu gives 0 there).
 * The tutorial's d_tanh(z) = 1 - tanh(z)^2 takes new_cell itself, not tanh(new_cell):
 * here it is written as 1 - t^2 with t = tanh(new_cell) so that mistake cannot happen.
 *
 * elu'(g2) can be had two ways: from g2 (exp(g2)) when the pre-activation is kept, or from
 * cand (cand > 0 ? 1 : cand + 1, since exp(z) = 1 + expm1(z)) when only activations are.
 * The second loses nothing but absolute rounding (~1 ulp of 1) for very negative g2.
 *
 * Every function exists for float (_f) and double (_d), all math in that precision, and
 * is finite for every finite input. Type-generic spellings without the suffix: _Generic
 * in C11, overloads in C++ (nvcc and the CUDA emulation build). */
#ifndef TG_LLTM_CELL_H
#define TG_LLTM_CELL_H

#include "tensor/hostdevice.h"
#include "ops/pointwise_math.h"

/* Internal names (tg__lltm_math_*): the plain tg_lltm_cell_* names are the public nn
 * functions of tg/nn.h, which a function-like macro here would shadow.
 *
 * Defines the cell functions tg__lltm_math_*<sfx> over element type T from a set of scalar
 * math functions (SIG(x), TANH(x), ELU(x, alpha), D_ELU(z, alpha) as in pointwise_math.h),
 * so a backend can instantiate the same formulas over its own fast math (the CPU's
 * vectorizable float math is in src/ops/cpu/cpu_vecmath.h). */
#define TG_LLTM_CELL_DEFINE(T, sfx, one, SIG, TANH, ELU, D_ELU)                                    \
  /* Forward of one element from the three pre-activations and old_cell. */                        \
  static inline TG_HOST_DEVICE void tg__lltm_math_forward##sfx(                                    \
      T g0, T g1, T g2, T old_cell, T *ig, T *og, T *cand, T *new_cell, T *new_h) {                \
    T i = SIG(g0), o = SIG(g1), c = ELU(g2, one);                                                  \
    T nc = old_cell + c * i;                                                                       \
    *ig = i;                                                                                       \
    *og = o;                                                                                       \
    *cand = c;                                                                                     \
    *new_cell = nc;                                                                                \
    *new_h = TANH(nc) * o;                                                                         \
  }                                                                                                \
  /* new_cell recomputed from old_cell and the activations: the same expression as the             \
   * forward, so the same bits. */                                                                 \
  static inline TG_HOST_DEVICE T tg__lltm_math_new_cell##sfx(T old_cell, T ig, T cand) {           \
    return old_cell + cand * ig;                                                                   \
  }                                                                                                \
  /* elu'(g2) from the activation cand = elu(g2). */                                               \
  static inline TG_HOST_DEVICE T tg__lltm_math_d_elu_from_cand##sfx(T cand) {                      \
    return cand > 0 ? one : cand + one;                                                            \
  }                                                                                                \
  /* Backward of one element from the activations, t = tanh(new_cell) and elu'(g2).                \
   * grad_h / grad_cell are 0 for an output that got no gradient. */                               \
  static inline TG_HOST_DEVICE void tg__lltm_math_backward##sfx(T grad_h, T grad_cell, T ig, T og, \
                                                                T cand, T t, T d_elu_g2, T *d_g0,  \
                                                                T *d_g1, T *d_g2, T *d_old_cell) { \
    T d_new_cell = grad_cell + grad_h * og * (one - t * t);                                        \
    *d_old_cell = d_new_cell;                                                                      \
    *d_g0 = d_new_cell * cand * (ig * (one - ig));                                                 \
    *d_g1 = grad_h * t * (og * (one - og));                                                        \
    *d_g2 = d_new_cell * ig * d_elu_g2;                                                            \
  }                                                                                                \
  /* Backward from what the forward keeps: the activations and old_cell. */                        \
  static inline TG_HOST_DEVICE void tg__lltm_math_backward_from_act##sfx(                          \
      T grad_h, T grad_cell, T old_cell, T ig, T og, T cand, T *d_g0, T *d_g1, T *d_g2,            \
      T *d_old_cell) {                                                                             \
    T t = TANH(tg__lltm_math_new_cell##sfx(old_cell, ig, cand));                                   \
    tg__lltm_math_backward##sfx(grad_h, grad_cell, ig, og, cand, t,                                \
                                tg__lltm_math_d_elu_from_cand##sfx(cand), d_g0, d_g1, d_g2,        \
                                d_old_cell);                                                       \
  }

TG_LLTM_CELL_DEFINE(float, _f, 1.0f, tg_sigmoid_f, tg_tanh_f, tg_elu_f, tg_d_elu_f)
TG_LLTM_CELL_DEFINE(double, _d, 1.0, tg_sigmoid_d, tg_tanh_d, tg_elu_d, tg_d_elu_d)

/* ---- type-generic spellings (the first argument's type picks the precision) ---- */
#ifdef __cplusplus
#define TG__LLTM_CELL_OVERLOAD(name)                                                               \
  template <typename... A>                                                                         \
  static inline TG_HOST_DEVICE auto name(float x, A... a)->decltype(name##_f(x, a...)) {           \
    return name##_f(x, a...);                                                                      \
  }                                                                                                \
  template <typename... A>                                                                         \
  static inline TG_HOST_DEVICE auto name(double x, A... a)->decltype(name##_d(x, a...)) {          \
    return name##_d(x, a...);                                                                      \
  }
TG__LLTM_CELL_OVERLOAD(tg__lltm_math_forward)
TG__LLTM_CELL_OVERLOAD(tg__lltm_math_new_cell)
TG__LLTM_CELL_OVERLOAD(tg__lltm_math_d_elu_from_cand)
TG__LLTM_CELL_OVERLOAD(tg__lltm_math_backward)
TG__LLTM_CELL_OVERLOAD(tg__lltm_math_backward_from_act)
#undef TG__LLTM_CELL_OVERLOAD
#else
#define TG__LLTM_GENERIC(name, x) _Generic((x), float : name##_f, double : name##_d)
#define tg__lltm_math_forward(g0, ...) TG__LLTM_GENERIC(tg__lltm_math_forward, g0)(g0, __VA_ARGS__)
#define tg__lltm_math_new_cell(c, ...) TG__LLTM_GENERIC(tg__lltm_math_new_cell, c)(c, __VA_ARGS__)
#define tg__lltm_math_d_elu_from_cand(c) TG__LLTM_GENERIC(tg__lltm_math_d_elu_from_cand, c)(c)
#define tg__lltm_math_backward(gh, ...)                                                            \
  TG__LLTM_GENERIC(tg__lltm_math_backward, gh)(gh, __VA_ARGS__)
#define tg__lltm_math_backward_from_act(gh, ...)                                                   \
  TG__LLTM_GENERIC(tg__lltm_math_backward_from_act, gh)(gh, __VA_ARGS__)
#endif

#endif
