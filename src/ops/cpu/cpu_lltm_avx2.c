/* The fused LLTM's F32 cell spans in AVX2 + FMA intrinsics (cpu_lltm_avx2.h). The functions
 * below are vector transcriptions of cpu_vecmath.h's (same reductions, same polynomials,
 * same selects), with multiply-adds fused: results agree with the portable spans to a few
 * ulp (tests/ops/test_lltm_avx2.c compares them element by element). NaN propagates as
 * there: the clamps keep a NaN (MAXPS/MINPS return their second operand when either is
 * NaN). Compiled for AVX2 + FMA by a target attribute and entered only after a CPU check,
 * so the rest of the library keeps the baseline instruction set. */
#include "ops/cpu/cpu_lltm_avx2.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "ops/cpu/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TG_LLTM_HAVE_AVX2 1
#include <immintrin.h>
#else
#define TG_LLTM_HAVE_AVX2 0
#endif

/* -1 unset, else a tg_cpu_lltm_cell_path; resolved on first use. */
static int cell_path = -1;

bool tg_cpu_lltm_avx2_supported(void) {
  const tg_cpu_features f = tg_cpu_features_read(); /* with the OS's ymm state */
  return TG_LLTM_HAVE_AVX2 && f.avx2 && f.fma3;
}

/* AUTO's choice: the AVX2 spans on CPUs with AVX2 and FMA but no AVX-512, where they were
 * measured (Zen 3: 1.7-1.9x the portable spans). Where AVX-512 exists the portable spans run
 * their AVX-512 clone, which nobody has compared with these yet: TG_LLTM_CELL=avx2 there to
 * measure. */
static bool avx2_by_default(void) {
  return tg_cpu_lltm_avx2_supported() && !tg_cpu_features_read().avx512f;
}

bool tg_cpu_lltm_set_cell_path(tg_cpu_lltm_cell_path path) {
  const bool ok = path != TG_CPU_LLTM_CELL_AVX2 || tg_cpu_lltm_avx2_supported();
  if (path == TG_CPU_LLTM_CELL_AUTO)
    path = avx2_by_default() ? TG_CPU_LLTM_CELL_AVX2 : TG_CPU_LLTM_CELL_PORTABLE;
  __atomic_store_n(&cell_path, ok ? (int)path : (int)TG_CPU_LLTM_CELL_PORTABLE, __ATOMIC_RELAXED);
  return ok;
}

bool tg_cpu_lltm_avx2_active(void) {
  int path = __atomic_load_n(&cell_path, __ATOMIC_RELAXED);
  if (path < 0) {
    /* First use: TG_LLTM_CELL=portable|avx2, else the CPU decides. Racing first calls all
     * store the same value. */
    const char *env = getenv("TG_LLTM_CELL");
    const bool portable = env && strcmp(env, "portable") == 0,
               avx2 = env && strcmp(env, "avx2") == 0;
    /* A performance knob: a bad value is reported, not an error of every LLTM call. */
    if (env && env[0] && !portable && !avx2)
      fprintf(stderr, "tg: TG_LLTM_CELL='%s' is neither portable nor avx2: ignored\n", env);
    if (!tg_cpu_lltm_set_cell_path(portable ? TG_CPU_LLTM_CELL_PORTABLE
                                   : avx2   ? TG_CPU_LLTM_CELL_AVX2
                                            : TG_CPU_LLTM_CELL_AUTO))
      fprintf(stderr, "tg: TG_LLTM_CELL=avx2, but this CPU has no AVX2 and FMA: the portable "
                      "cell runs\n");
    path = __atomic_load_n(&cell_path, __ATOMIC_RELAXED);
  }
  return path == TG_CPU_LLTM_CELL_AVX2;
}

#if TG_LLTM_HAVE_AVX2

#define TG_AVX2 __attribute__((target("avx2,fma"))) static inline

typedef __m256 v8;

TG_AVX2 v8 set1(float x) { return _mm256_set1_ps(x); }
TG_AVX2 v8 abs8(v8 x) { return _mm256_andnot_ps(set1(-0.0f), x); }
TG_AVX2 v8 select8(v8 mask, v8 yes, v8 no) { return _mm256_blendv_ps(no, yes, mask); }

/* exp of x <= 0 (or NaN): tg_vf_exp's reduction and polynomial. Every caller passes x <= 0
 * or discards the result for x > 0 (elu's positive side), so only the lower clamp is kept,
 * and 2^n (n in [-150, 0]) is applied as 2^(n + 64) (a normal number) times 2^-64: one
 * rounding, the one tg_vf_exp's 2^n1 2^n2 makes, so the results are the same bits (a
 * subnormal result included), in five operations instead of ten. A NaN's n converts to
 * INT_MIN; the NaN reaches the result through p. */
TG_AVX2 v8 exp8(v8 x) {
  x = _mm256_max_ps(set1(-104.0f), x);
  const v8 n = _mm256_round_ps(_mm256_mul_ps(x, set1(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v8 r = _mm256_fnmadd_ps(n, set1(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, set1(-2.12194440e-4f), r);
  v8 p = set1(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, set1(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, set1(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, set1(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, set1(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, set1(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), set1(1.0f));
  const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127 + 64));
  const v8 scale = _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, scale), set1(0x1p-64f));
}

/* expm1: tg_vf_expm1 (Taylor near 0, x itself at +-0). */
TG_AVX2 v8 expm1_8(v8 x) {
  v8 s = set1(1.0f / 5040);
  s = _mm256_fmadd_ps(s, x, set1(1.0f / 720));
  s = _mm256_fmadd_ps(s, x, set1(1.0f / 120));
  s = _mm256_fmadd_ps(s, x, set1(1.0f / 24));
  s = _mm256_fmadd_ps(s, x, set1(1.0f / 6));
  s = _mm256_fmadd_ps(s, x, set1(0.5f));
  v8 near_zero = _mm256_fmadd_ps(_mm256_mul_ps(x, x), s, x);
  near_zero = select8(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ), x, near_zero);
  const v8 far = _mm256_sub_ps(exp8(x), set1(1.0f));
  return select8(_mm256_cmp_ps(abs8(x), set1(0.34657359f), _CMP_LT_OQ), near_zero, far);
}

/* sigmoid: tg_vf_sigmoid. */
TG_AVX2 v8 sigmoid8(v8 x) {
  const v8 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), abs8(x)));
  const v8 s = _mm256_div_ps(set1(1.0f), _mm256_add_ps(set1(1.0f), e));
  return select8(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ), s, _mm256_mul_ps(e, s));
}

/* tanh: tg_vf_tanh (sign restored from x). */
TG_AVX2 v8 tanh8(v8 x) {
  const v8 sign = set1(-0.0f);
  const v8 u = expm1_8(_mm256_mul_ps(set1(-2.0f), abs8(x)));
  const v8 t = _mm256_div_ps(_mm256_sub_ps(_mm256_setzero_ps(), u), _mm256_add_ps(u, set1(2.0f)));
  return _mm256_or_ps(_mm256_andnot_ps(sign, t), _mm256_and_ps(sign, x));
}

/* elu(x, 1): tg_vf_elu. */
TG_AVX2 v8 elu8(v8 x) {
  return select8(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ), x, expm1_8(x));
}

/* Full vectors are loaded and stored directly; a tail of fewer than 8 elements goes
 * through 8-element copies on the stack (masked stores are microcoded on AMD's cores, ~10x
 * slower than plain ones). */
TG_AVX2 v8 load(const float *p) { return _mm256_loadu_ps(p); }
TG_AVX2 void store(float *p, v8 x) { _mm256_storeu_ps(p, x); }

/* A tail's operands: k arrays of n < 8 elements into rows of buf (the rest zero). */
static void tail_in(int k, const float *const *src, int64_t n, float (*buf)[8]) {
  for (int i = 0; i < k; i++) {
    memset(buf[i], 0, sizeof buf[i]);
    memcpy(buf[i], src[i], (size_t)n * sizeof(float));
  }
}

static void tail_out(int k, float *const *dst, int64_t n, float (*buf)[8]) {
  for (int i = 0; i < k; i++) memcpy(dst[i], buf[i], (size_t)n * sizeof(float));
}

/* The forward over m elements (a multiple of 8): the cell of ops/lltm_cell.h, one function
 * of it per loop. One loop doing the whole cell has a dependency chain of ~200 cycles per
 * vector (four exponentials, two divisions in a row) in ~200 instructions, so the reorder
 * buffer holds barely one iteration: it ran at 1.2 instructions per cycle. Short loops over
 * L1-resident spans overlap their iterations. new_cell as in ops/lltm_cell.h, product then
 * sum (not fused): backward's recomputation gives the same bits. */
TG_AVX2 void forward_vectors(int64_t m, const float *b0, const float *b1, const float *b2,
                             const float *old_cell, float *a0, float *a1, float *a2, float *new_h,
                             float *new_cell) {
  for (int64_t j = 0; j < m; j += 8)
    store(a0 + j, sigmoid8(_mm256_add_ps(load(a0 + j), load(b0 + j))));
  for (int64_t j = 0; j < m; j += 8)
    store(a1 + j, sigmoid8(_mm256_add_ps(load(a1 + j), load(b1 + j))));
  for (int64_t j = 0; j < m; j += 8) store(a2 + j, elu8(_mm256_add_ps(load(a2 + j), load(b2 + j))));
  for (int64_t j = 0; j < m; j += 8) {
    const v8 nc = _mm256_add_ps(load(old_cell + j), _mm256_mul_ps(load(a2 + j), load(a0 + j)));
    store(new_cell + j, nc);
    store(new_h + j, _mm256_mul_ps(tanh8(nc), load(a1 + j)));
  }
}

__attribute__((target("avx2,fma"))) void
tg_cpu_lltm_avx2_forward_span(int64_t n, const float *b0, const float *b1, const float *b2,
                              const float *old_cell, float *a0, float *a1, float *a2, float *new_h,
                              float *new_cell) {
  const int64_t m = n / 8 * 8;
  forward_vectors(m, b0, b1, b2, old_cell, a0, a1, a2, new_h, new_cell);
  if (m == n) return;
  /* t: b0 b1 b2 old_cell, then a0 a1 a2 (in place), new_h, new_cell */
  float t[9][8];
  tail_in(7, (const float *const[]){b0 + m, b1 + m, b2 + m, old_cell + m, a0 + m, a1 + m, a2 + m},
          n - m, t);
  forward_vectors(8, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]);
  tail_out(5, (float *const[]){a0 + m, a1 + m, a2 + m, new_h + m, new_cell + m}, n - m, t + 4);
}

/* The backward from the activations over m elements (a multiple of 8), in two loops as the
 * forward: t = tanh(new_cell) into d1 first, then the gradients (d1 last, from t). */
TG_AVX2 void backward_vectors(int64_t m, const float *grad_h, const float *grad_cell,
                              const float *old_cell, const float *a0, const float *a1,
                              const float *a2, float *d0, float *d1, float *d2, float *d_old_cell) {
  for (int64_t j = 0; j < m; j += 8)
    store(d1 + j,
          tanh8(_mm256_add_ps(load(old_cell + j), _mm256_mul_ps(load(a2 + j), load(a0 + j)))));
  const v8 one = set1(1.0f);
  for (int64_t j = 0; j < m; j += 8) {
    const v8 gh = load(grad_h + j), ig = load(a0 + j), og = load(a1 + j), cand = load(a2 + j);
    const v8 t = load(d1 + j);
    const v8 d_new_cell =
        _mm256_fmadd_ps(_mm256_mul_ps(gh, og), _mm256_fnmadd_ps(t, t, one), load(grad_cell + j));
    const v8 d_elu = select8(_mm256_cmp_ps(cand, _mm256_setzero_ps(), _CMP_GT_OQ), one,
                             _mm256_add_ps(cand, one));
    store(d_old_cell + j, d_new_cell);
    store(d0 + j, _mm256_mul_ps(_mm256_mul_ps(d_new_cell, cand),
                                _mm256_mul_ps(ig, _mm256_sub_ps(one, ig))));
    store(d1 + j, _mm256_mul_ps(_mm256_mul_ps(gh, t), _mm256_mul_ps(og, _mm256_sub_ps(one, og))));
    store(d2 + j, _mm256_mul_ps(_mm256_mul_ps(d_new_cell, ig), d_elu));
  }
}

__attribute__((target("avx2,fma"))) void tg_cpu_lltm_avx2_backward_span(
    int64_t n, const float *grad_h, const float *grad_cell, const float *old_cell, const float *a0,
    const float *a1, const float *a2, float *d0, float *d1, float *d2, float *d_old_cell) {
  const int64_t m = n / 8 * 8;
  backward_vectors(m, grad_h, grad_cell, old_cell, a0, a1, a2, d0, d1, d2, d_old_cell);
  if (m == n) return;
  /* t: grad_h grad_cell old_cell a0 a1 a2, then d0 d1 d2 d_old_cell */
  float t[10][8];
  tail_in(6,
          (const float *const[]){grad_h + m, grad_cell + m, old_cell + m, a0 + m, a1 + m, a2 + m},
          n - m, t);
  backward_vectors(8, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]);
  tail_out(4, (float *const[]){d0 + m, d1 + m, d2 + m, d_old_cell + m}, n - m, t + 6);
}

#else /* no AVX2 in this build: never chosen (tg_cpu_lltm_avx2_supported is false) */

void tg_cpu_lltm_avx2_forward_span(int64_t n, const float *b0, const float *b1, const float *b2,
                                   const float *old_cell, float *a0, float *a1, float *a2,
                                   float *new_h, float *new_cell) {
  (void)n, (void)b0, (void)b1, (void)b2, (void)old_cell, (void)a0, (void)a1, (void)a2;
  (void)new_h, (void)new_cell;
  abort();
}

void tg_cpu_lltm_avx2_backward_span(int64_t n, const float *grad_h, const float *grad_cell,
                                    const float *old_cell, const float *a0, const float *a1,
                                    const float *a2, float *d0, float *d1, float *d2,
                                    float *d_old_cell) {
  (void)n, (void)grad_h, (void)grad_cell, (void)old_cell, (void)a0, (void)a1, (void)a2;
  (void)d0, (void)d1, (void)d2, (void)d_old_cell;
  abort();
}

#endif
