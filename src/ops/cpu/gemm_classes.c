/* Shape classes of GEMMs: what the engine choice is made per (gemm_engine.h).
 *
 * Engines differ by the product's size (small-matrix kernels against packed large ones; cache
 * blocking; libxsmm's JIT kernels without it), by which dimension is short (BLIS's sup
 * kernels for a short k, measured 1.3x apart between layouts), by the operands' layouts, and
 * by threads. Measured on Zen 3 (bench/gemm_engines.c): the LLTM's products at 64 x 1024 x 128
 * run fastest on zen3's set, at 256 x 1024 x 1024 with k 3072 on haswell's (1.59x), and at
 * 16 x 32 x 128 with k 16 on libxsmm. Each class is timed at two shapes: a representative
 * one, near its size range's middle in multiply-adds (log scale), and a far one whose
 * operands take more cache (tg__gemm_class_far_shape). */
#include <stdio.h>
#include <string.h>

#include "ops/cpu/gemm_engine.h"

enum { TINY, SMALL, MID, LARGE, HUGE };
enum { EVEN, M_SHORT, N_SHORT, K_SHORT };

static const char *const size_names[TG_GEMM_SIZE_CLASSES] = {"tiny", "small", "mid", "large",
                                                             "huge"};
static const char *const aspect_names[TG_GEMM_ASPECTS] = {"even", "m-short", "n-short", "k-short"};
static const char *const layout_names[TG_GEMM_LAYOUTS] = {"NN", "TN", "NT", "TT"};

/* Upper bounds (exclusive) of the sizes in multiply-adds; HUGE is unbounded. MID starts
 * where products may run more than one thread (TG_CPU_GEMM_PARALLEL_MIN_MACS, 2^22). HUGE
 * (2^28) is where BLIS's zen3 set falls behind haswell's on Zen 3 for long k (256 x 1024 x
 * 1024: 12.5 against 6.9 ms; at 181 x 724 x 724 they tie). */
static const double size_limits[] = {65536.0, 4194304.0, 33554432.0, 268435456.0};

/* Representative shapes: for EVEN s x s x s, else s for the short dim and 4s for the others;
 * s from 2^13, 2^19, 2^23.5, 2^26.5 and 2^28 multiply-adds. */
static const int64_t even_side[TG_GEMM_SIZE_CLASSES] = {20, 80, 228, 456, 646};
static const int64_t short_side[TG_GEMM_SIZE_CLASSES] = {8, 32, 90, 181, 256};

static int size_of(int64_t m, int64_t n, int64_t k) {
  const double macs = (double)m * (double)n * (double)k;
  for (int s = 0; s < HUGE; s++)
    if (macs < size_limits[s]) return s;
  return HUGE;
}

/* The short dim: the smallest when it is under half the next smallest, else EVEN. */
static int aspect_of(int64_t m, int64_t n, int64_t k) {
  const int64_t dims[3] = {m, n, k};
  int lo = 0;
  for (int i = 1; i < 3; i++)
    if (dims[i] < dims[lo]) lo = i;
  int64_t next = -1;
  for (int i = 0; i < 3; i++)
    if (i != lo && (next < 0 || dims[i] < next)) next = dims[i];
  if (2 * dims[lo] >= next) return EVEN;
  return lo == 0 ? M_SHORT : lo == 1 ? N_SHORT : K_SHORT;
}

static int compose(int size, int aspect, int layout, int many) {
  return ((size * TG_GEMM_ASPECTS + aspect) * TG_GEMM_LAYOUTS + layout) * TG_GEMM_THREAD_CLASSES +
         many;
}

static void decompose(int cls, int *size, int *aspect, int *layout, int *many) {
  *many = cls % TG_GEMM_THREAD_CLASSES;
  cls /= TG_GEMM_THREAD_CLASSES;
  *layout = cls % TG_GEMM_LAYOUTS;
  cls /= TG_GEMM_LAYOUTS;
  *aspect = cls % TG_GEMM_ASPECTS;
  *size = cls / TG_GEMM_ASPECTS;
}

int tg__gemm_class_of(int64_t m, int64_t n, int64_t k, bool a_t, bool b_t, int threads) {
  return compose(size_of(m, n, k), aspect_of(m, n, k), (a_t ? 1 : 0) | (b_t ? 2 : 0),
                 threads > 1 ? 1 : 0);
}

bool tg__gemm_class_measured(int cls) {
  int size, aspect, layout, many;
  decompose(cls, &size, &aspect, &layout, &many);
  return !many || size >= MID;
}

int tg__gemm_class_canonical(int cls) {
  return tg__gemm_class_measured(cls) ? cls : cls - 1; /* many is the lowest digit */
}

void tg__gemm_class_shape(int cls, int64_t *m, int64_t *n, int64_t *k, bool *a_t, bool *b_t,
                          bool *threads_many) {
  int size, aspect, layout, many;
  decompose(cls, &size, &aspect, &layout, &many);
  const int64_t s = aspect == EVEN ? even_side[size] : short_side[size];
  const int64_t l = aspect == EVEN ? s : 4 * s;
  *m = aspect == M_SHORT ? s : l;
  *n = aspect == N_SHORT ? s : l;
  *k = aspect == K_SHORT ? s : l;
  if (aspect == EVEN) *m = *n = *k = s;
  *a_t = layout & 1;
  *b_t = layout & 2;
  *threads_many = many;
}

/* The class's far shape: the same layout and threads, but operands with a larger footprint
 * (for the aspects, a shorter short side and 8s long ones at the same multiply-adds; for EVEN
 * sides 1.4x, near the class's upper bound), and for the unbounded HUGE class 2x the
 * multiply-adds (long or even sides 1.41x and 1.25x). Measured on an Intel Xeon (Emerald Rapids):
 * libxsmm, which does not block for caches, won the HUGE k-short class at 1024 x 1024 x 256 and
 * was 2.0-2.3x slower than BLIS's skx set at the LLTM's 3072 x 2048 x 256; at 64 x 1152 x 384 it
 * was 1.3-1.6x slower while winning 90 x 360 x 360. */
void tg__gemm_class_far_shape(int cls, int64_t *m, int64_t *n, int64_t *k) {
  int size, aspect, layout, many;
  decompose(cls, &size, &aspect, &layout, &many);
  int64_t s, l;
  if (aspect == EVEN) {
    s = l = size == HUGE ? even_side[size] * 5 / 4 : even_side[size] * 7 / 5;
  } else if (size == HUGE) {
    s = short_side[size];
    l = short_side[size] * 4 * 181 / 128; /* 4s * sqrt(2) */
  } else {
    s = short_side[size] / 4;
    l = 8 * short_side[size];
  }
  *m = aspect == M_SHORT ? s : l;
  *n = aspect == N_SHORT ? s : l;
  *k = aspect == K_SHORT ? s : l;
}

void tg__gemm_class_name(int cls, char *buf, size_t size) {
  int sz, aspect, layout, many;
  decompose(cls, &sz, &aspect, &layout, &many);
  snprintf(buf, size, "%s/%s/%s/%s", size_names[sz], aspect_names[aspect], layout_names[layout],
           many ? "tN" : "t1");
}

int tg__gemm_class_named(const char *name) {
  char buf[48];
  for (int c = 0; c < TG_GEMM_CLASSES; c++) {
    tg__gemm_class_name(c, buf, sizeof buf);
    if (strcmp(buf, name) == 0) return c;
  }
  return -1;
}
