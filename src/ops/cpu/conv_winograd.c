/* Winograd's F(2x2, 3x3) for the CPU's F32 conv2d passes: 3x3 windows, stride 1, dilation 1,
 * one group. Each 2x2 block of outputs (a tile) is computed from its 4x4 patch of input with
 * 16 multiplies per input and output channel pair where the direct convolution spends 36:
 *
 *   y_tile = A^T [ (G g G^T) (.) (B^T d B) ] A
 *
 * (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016). The sum over
 * input channels of the element-wise products is, for each of the 16 positions, one GEMM
 * [c_out, c_in] @ [c_in, tiles], so the work is 16 GEMMs of 16/36 the direct convolution's
 * multiply-adds, plus transforms linear in the data.
 *
 * The three passes are one algorithm:
 *   forward           y = conv(x, w, pad)
 *   backward_data     dx = conv(dy, w flipped and transposed, 2 - pad): the correlation of
 *                     dy with the rotated kernel, read where it exists (rows past dy read 0)
 *   backward_weights  dw = G^T [ sum over tiles (A dy A^T) (.) (B^T d B) ] G, the forward's
 *                     bilinear form read the other way: 16 GEMMs [c_out, tiles] @ [tiles, c_in]
 *
 * Where it runs: oneDNN's direct kernels reach about 83 GF/s on a Zen 3 core at ResNet-18's
 * 3x3 layers, tg's GEMM about 85, so no direct method can beat them by much; this one skips
 * 5/9 of the arithmetic. Whether it wins depends on the shape (the transforms cost more per
 * multiply-add at few channels), so each shape's first call of each pass runs both it and
 * oneDNN, timed, and the faster runs that shape's later calls (conv_onednn.c). Never in
 * deterministic mode, nor with TG_CONV_WINOGRAD=off.
 *
 * Values: a transform adds and subtracts inputs, so an infinity meets its own negative and
 * gives NaN where the direct sum gives the infinity. A call whose operands hold an infinity or
 * NaN runs the direct convolution; the rounding differs from it by the transforms' few
 * additions (tests/ops/test_conv_winograd.c bounds it). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/conv_winograd.h"
#include "tg/cpu.h"
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"
#include "tensor/check.h"
#include "tensor/checked.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"

enum { STRIDE_H, STRIDE_W, PAD_H, PAD_W, DIL_H, DIL_W, GROUPS, H, W, OUT_H, OUT_W, KH, KW };

/* The transforms' row buffers on the stack (a padded row of tiles: 2 * tiles_w + 2 floats):
 * wider images run direct. */
#define TG_WINOGRAD_MAX_ROW 1024

bool tg__cpu_conv_winograd_applies(tg_tensor *const *t, const int64_t *g) {
  const int64_t widest = g[W] > g[OUT_W] ? g[W] : g[OUT_W]; /* both passes' tile rows */
  return widest + 4 <= TG_WINOGRAD_MAX_ROW && g[KH] == 3 && g[KW] == 3 && g[STRIDE_H] == 1 &&
         g[STRIDE_W] == 1 && g[DIL_H] == 1 && g[DIL_W] == 1 && g[GROUPS] == 1 && g[PAD_H] <= 2 &&
         g[PAD_W] <= 2 && t[0]->dtype == TG_F32 && t[1]->dtype == TG_F32 && t[2]->dtype == TG_F32;
}

/* ---- transforms ---- */

/* U[16][o][i] = G g G^T for the 3x3 filter g of output channel o and input channel i: forward
 * g = w[o][i]; flipped (backward_data) g = w[i][o] rotated by 180 degrees. */
static void filter_transform(const float *w, int64_t outs, int64_t ins, bool flipped, float *u) {
  const int64_t plane = outs * ins;
  for (int64_t o = 0; o < outs; o++)
    for (int64_t i = 0; i < ins; i++) {
      float g[3][3];
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
          g[a][b] = flipped ? w[(i * outs + o) * 9 + (2 - a) * 3 + (2 - b)]
                            : w[(o * ins + i) * 9 + a * 3 + b];
      float t[4][3]; /* G g */
      for (int b = 0; b < 3; b++) {
        t[0][b] = g[0][b];
        t[1][b] = 0.5f * (g[0][b] + g[1][b] + g[2][b]);
        t[2][b] = 0.5f * (g[0][b] - g[1][b] + g[2][b]);
        t[3][b] = g[2][b];
      }
      for (int a = 0; a < 4; a++) { /* (G g) G^T */
        float *row = u + (int64_t)(a * 4) * plane + o * ins + i;
        row[0 * plane] = t[a][0];
        row[1 * plane] = 0.5f * (t[a][0] + t[a][1] + t[a][2]);
        row[2 * plane] = 0.5f * (t[a][0] - t[a][1] + t[a][2]);
        row[3 * plane] = t[a][2];
      }
    }
}

/* The tiling of an output of out_h x out_w (2x2 tiles) over n images. */
typedef struct tiling {
  int64_t n, tiles_h, tiles_w, tiles; /* tiles = n * tiles_h * tiles_w */
} tiling;

static tiling tiling_of(int64_t n, int64_t out_h, int64_t out_w) {
  tiling t = {n, (out_h + 1) / 2, (out_w + 1) / 2, 0};
  t.tiles = n * t.tiles_h * t.tiles_w;
  return t;
}

/* V[16][c][tile] = B^T d B for each 4x4 patch d of image [n][c][h][w] (rows 2 r - pad_h on,
 * zero outside the image), over planes (image, channel) [p0, p1). A row of tiles at a time, in
 * loops over the tiles of the row (the compiler's vectors): first B^T's combinations of the
 * four image rows, as padded copies, then B's of their columns. */
typedef struct input_job {
  const float *img;
  int64_t channels, h, w, pad_h, pad_w;
  tiling t;
  float *v;
} input_job;

static void input_planes(int64_t p0, int64_t p1, void *arg) {
  const input_job *j = arg;
  const int64_t plane = j->channels * j->t.tiles, tw = j->t.tiles_w, width = 2 * tw + 2;
  float rows[4][TG_WINOGRAD_MAX_ROW], t[4][TG_WINOGRAD_MAX_ROW];
  for (int64_t pc = p0; pc < p1; pc++) {
    const int64_t img = pc / j->channels, c = pc % j->channels;
    const float *src = j->img + pc * j->h * j->w;
    float *dst = j->v + c * j->t.tiles + img * j->t.tiles_h * tw;
    for (int64_t tr = 0; tr < j->t.tiles_h; tr++) {
      for (int a = 0; a < 4; a++) { /* the patch rows, zero-padded to the tiles' columns */
        const int64_t r = 2 * tr - j->pad_h + a;
        for (int64_t x = 0; x < width; x++) {
          const int64_t col = x - j->pad_w;
          rows[a][x] = r >= 0 && r < j->h && col >= 0 && col < j->w ? src[r * j->w + col] : 0.0f;
        }
      }
      for (int64_t x = 0; x < width; x++) { /* B^T d, down the columns */
        t[0][x] = rows[0][x] - rows[2][x];
        t[1][x] = rows[1][x] + rows[2][x];
        t[2][x] = rows[2][x] - rows[1][x];
        t[3][x] = rows[1][x] - rows[3][x];
      }
      float *out = dst + tr * tw;
      for (int a = 0; a < 4; a++) { /* (B^T d) B, along each row */
        float *restrict o0 = out + (a * 4 + 0) * plane, *restrict o1 = out + (a * 4 + 1) * plane,
                        *restrict o2 = out + (a * 4 + 2) * plane,
                        *restrict o3 = out + (a * 4 + 3) * plane;
        const float *ta = t[a];
        for (int64_t tc = 0; tc < tw; tc++) {
          const float d0 = ta[2 * tc], d1 = ta[2 * tc + 1], d2 = ta[2 * tc + 2],
                      d3 = ta[2 * tc + 3];
          o0[tc] = d0 - d2;
          o1[tc] = d1 + d2;
          o2[tc] = d2 - d1;
          o3[tc] = d1 - d3;
        }
      }
    }
  }
}

/* out [n][k][out_h][out_w] = A^T m A for each tile of M[16][k][tile], over planes [p0, p1): a
 * row of tiles at a time, A^T's combinations of the 16 positions first, in loops over the
 * tiles. */
typedef struct output_job {
  const float *m;
  int64_t channels, out_h, out_w;
  tiling t;
  float *out;
} output_job;

static void output_planes(int64_t p0, int64_t p1, void *arg) {
  const output_job *j = arg;
  const int64_t plane = j->channels * j->t.tiles, tw = j->t.tiles_w;
  float t[2][4][TG_WINOGRAD_MAX_ROW / 2], y[2][2][TG_WINOGRAD_MAX_ROW / 2];
  for (int64_t pk = p0; pk < p1; pk++) {
    const int64_t img = pk / j->channels, k = pk % j->channels;
    const float *src = j->m + k * j->t.tiles + img * j->t.tiles_h * tw;
    float *dst = j->out + pk * j->out_h * j->out_w;
    for (int64_t tr = 0; tr < j->t.tiles_h; tr++) {
      const float *m = src + tr * tw;
      for (int b = 0; b < 4; b++) { /* A^T m, down the columns */
        const float *restrict m0 = m + (0 * 4 + b) * plane, *restrict m1 = m + (1 * 4 + b) * plane,
                              *restrict m2 = m + (2 * 4 + b) * plane,
                              *restrict m3 = m + (3 * 4 + b) * plane;
        for (int64_t tc = 0; tc < tw; tc++) {
          t[0][b][tc] = m0[tc] + m1[tc] + m2[tc];
          t[1][b][tc] = m1[tc] - m2[tc] - m3[tc];
        }
      }
      for (int a = 0; a < 2; a++) /* (A^T m) A, along each row */
        for (int64_t tc = 0; tc < tw; tc++) {
          y[a][0][tc] = t[a][0][tc] + t[a][1][tc] + t[a][2][tc];
          y[a][1][tc] = t[a][1][tc] - t[a][2][tc] - t[a][3][tc];
        }
      for (int a = 0; a < 2; a++) {
        const int64_t r = 2 * tr + a;
        if (r >= j->out_h) break;
        float *row = dst + r * j->out_w;
        for (int64_t x = 0; x < j->out_w; x++) row[x] = y[a][x & 1][x >> 1];
      }
    }
  }
}

/* D[16][k][tile] = A dy A^T for each 2x2 block of dy [n][k][out_h][out_w] (zero past it), a
 * row of tiles at a time as input_planes does. */
typedef struct grad_job {
  const float *dy;
  int64_t channels, out_h, out_w;
  tiling t;
  float *d;
} grad_job;

static void grad_planes(int64_t p0, int64_t p1, void *arg) {
  const grad_job *j = arg;
  const int64_t plane = j->channels * j->t.tiles, tw = j->t.tiles_w;
  float e[2][TG_WINOGRAD_MAX_ROW], t[4][TG_WINOGRAD_MAX_ROW];
  for (int64_t pk = p0; pk < p1; pk++) {
    const int64_t img = pk / j->channels, k = pk % j->channels;
    const float *src = j->dy + pk * j->out_h * j->out_w;
    float *dst = j->d + k * j->t.tiles + img * j->t.tiles_h * tw;
    for (int64_t tr = 0; tr < j->t.tiles_h; tr++) {
      for (int a = 0; a < 2; a++) {
        const int64_t r = 2 * tr + a;
        for (int64_t x = 0; x < 2 * tw; x++)
          e[a][x] = r < j->out_h && x < j->out_w ? src[r * j->out_w + x] : 0.0f;
      }
      for (int64_t x = 0; x < 2 * tw; x++) { /* A e, A = [[1, 0], [1, 1], [1, -1], [0, -1]] */
        t[0][x] = e[0][x];
        t[1][x] = e[0][x] + e[1][x];
        t[2][x] = e[0][x] - e[1][x];
        t[3][x] = -e[1][x];
      }
      float *out = dst + tr * tw;
      for (int a = 0; a < 4; a++) { /* (A e) A^T */
        float *restrict o0 = out + (a * 4 + 0) * plane, *restrict o1 = out + (a * 4 + 1) * plane,
                        *restrict o2 = out + (a * 4 + 2) * plane,
                        *restrict o3 = out + (a * 4 + 3) * plane;
        const float *ta = t[a];
        for (int64_t tc = 0; tc < tw; tc++) {
          const float e0 = ta[2 * tc], e1 = ta[2 * tc + 1];
          o0[tc] = e0;
          o1[tc] = e0 + e1;
          o2[tc] = e0 - e1;
          o3[tc] = -e1;
        }
      }
    }
  }
}

/* dw[k][c] = G^T S G for S[16][k][c]: the 3x3 gradient of each filter. */
static void filter_gradient(const float *s, int64_t outs, int64_t ins, float *dw) {
  const int64_t plane = outs * ins;
  for (int64_t kc = 0; kc < plane; kc++) {
    float m[4][4], t[3][4];
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 4; b++) m[a][b] = s[(a * 4 + b) * plane + kc];
    for (int b = 0; b < 4;
         b++) { /* G^T m, G^T = [[1, .5, .5, 0], [0, .5, -.5, 0], [0, .5, .5, 1]] */
      t[0][b] = m[0][b] + 0.5f * (m[1][b] + m[2][b]);
      t[1][b] = 0.5f * (m[1][b] - m[2][b]);
      t[2][b] = 0.5f * (m[1][b] + m[2][b]) + m[3][b];
    }
    for (int a = 0; a < 3; a++) { /* (G^T m) G */
      dw[kc * 9 + a * 3 + 0] = t[a][0] + 0.5f * (t[a][1] + t[a][2]);
      dw[kc * 9 + a * 3 + 1] = 0.5f * (t[a][1] - t[a][2]);
      dw[kc * 9 + a * 3 + 2] = 0.5f * (t[a][1] + t[a][2]) + t[a][3];
    }
  }
}

/* ---- the passes ---- */

/* Whether any of the count floats is an infinity or NaN (all exponent bits set). */
static bool any_non_finite(const float *x, int64_t count) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < count; i++) {
    uint32_t u;
    memcpy(&u, &x[i], sizeof u);
    bad |= (u & 0x7f800000u) == 0x7f800000u;
  }
  return bad != 0;
}

/* A buffer of a * b * c floats (products checked) with the room behind it BLIS may read (a row
 * of up to 16 KiB and a vector, as every CPU storage has: tg__cpu_tail_pad). */
static float *buffer(int64_t a, int64_t b, int64_t c, size_t *bytes) {
  int64_t n;
  if (tg__mul_ovf(a, b, &n) || tg__mul_ovf(n, c, &n) || tg__mul_ovf(n, (int64_t)sizeof(float), &n))
    return NULL;
  *bytes = (size_t)n + tg__cpu_tail_pad((size_t)n);
  return tg__host_cached_alloc(*bytes);
}

/* The 16 products of a pass, c[xi] = a[xi] @ b[xi] (+ beta c[xi]), one per pool chunk (each
 * a one-thread GEMM: a group's products are too small to split well, and 16 of them keep two
 * or more threads busy). */
typedef struct products {
  int64_t m, n, k;
  const float *a, *b;
  int64_t a_rs, a_cs, a_step, b_rs, b_cs, b_step;
  float *c;
  int64_t c_step;
  double beta;
  tg_status status[16];
} products;

static void product_chunk(int64_t xi, void *arg) {
  products *p = arg;
  p->status[xi] = tg_cpu_gemm_f32_raw(p->m, p->n, p->k, p->a + xi * p->a_step, p->a_rs, p->a_cs,
                                      p->b + xi * p->b_step, p->b_rs, p->b_cs,
                                      p->c + xi * p->c_step, p->n, p->beta);
}

static tg_status run_products(products *p) {
  tg_cpu_parallel_for(16, product_chunk, p);
  for (int xi = 0; xi < 16; xi++)
    if (p->status[xi] != TG_OK) return p->status[xi];
  return TG_OK;
}

/* Images per group: the transformed operands of a group are 16 x (channels in + out) x its
 * tiles floats, and past the caches the transforms wait on memory; groups of about 4 MiB
 * (at least one image). */
static int64_t images_per_group(int64_t channels, int64_t tiles_per_image) {
  const int64_t per_image = 16 * channels * tiles_per_image * (int64_t)sizeof(float);
  const int64_t group = ((int64_t)4 << 20) / (per_image > 0 ? per_image : 1);
  return group < 1 ? 1 : group;
}

/* out [n][outs][out_h][out_w] = conv(img [n][ins][h][w], U) with the padding given: the
 * forward and backward_data passes, a group of images at a time. */
static tg_status convolve(const char *op, const float *img, int64_t n, int64_t ins, int64_t h,
                          int64_t w, const float *u, int64_t outs, int64_t pad_h, int64_t pad_w,
                          float *out, int64_t out_h, int64_t out_w) {
  const tiling one = tiling_of(1, out_h, out_w);
  const int64_t group = images_per_group(ins + outs, one.tiles);
  const tiling most = tiling_of(group < n ? group : n, out_h, out_w);
  size_t v_bytes = 0, m_bytes = 0;
  float *v = buffer(16, ins, most.tiles, &v_bytes), *m = buffer(16, outs, most.tiles, &m_bytes);
  tg_status st = TG_OK;
  if (!v || !m)
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory for Winograd's transformed operands", op);
  for (int64_t i0 = 0; i0 < n && st == TG_OK; i0 += group) {
    const tiling t = tiling_of(n - i0 < group ? n - i0 : group, out_h, out_w);
    input_job in = {img + i0 * ins * h * w, ins, h, w, pad_h, pad_w, t, v};
    tg_cpu_parallel_ranges(t.n * ins, 1, true, input_planes, &in);
    products pr = {.m = outs,
                   .n = t.tiles,
                   .k = ins,
                   .a = u,
                   .a_rs = ins,
                   .a_cs = 1,
                   .a_step = outs * ins,
                   .b = v,
                   .b_rs = t.tiles,
                   .b_cs = 1,
                   .b_step = ins * t.tiles,
                   .c = m,
                   .c_step = outs * t.tiles,
                   .beta = 0.0};
    st = run_products(&pr);
    output_job o = {m, outs, out_h, out_w, t, out + i0 * outs * out_h * out_w};
    if (st == TG_OK) tg_cpu_parallel_ranges(t.n * outs, 1, true, output_planes, &o);
  }
  if (v) tg__host_cached_free(v, v_bytes);
  if (m) tg__host_cached_free(m, m_bytes);
  return st;
}

static tg_status filter_then_convolve(const char *op, const float *img, int64_t n, int64_t ins,
                                      int64_t h, int64_t w, const float *weights, bool flipped,
                                      int64_t outs, int64_t pad_h, int64_t pad_w, float *out,
                                      int64_t out_h, int64_t out_w) {
  size_t u_bytes = 0;
  float *u = buffer(16, outs, ins, &u_bytes);
  if (!u) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory for Winograd's filters", op);
  filter_transform(weights, outs, ins, flipped, u);
  const tg_status st = convolve(op, img, n, ins, h, w, u, outs, pad_h, pad_w, out, out_h, out_w);
  tg__host_cached_free(u, u_bytes);
  return st;
}

/* dw = G^T [ sum over tiles (A dy A^T) (.) (B^T x B) ] G, a group of images at a time (their
 * sums added into S). */
static tg_status weights_gradient(const char *op, const float *x, const float *dy, int64_t n,
                                  int64_t c_in, int64_t c_out, const int64_t *g, float *dw) {
  const tiling one = tiling_of(1, g[OUT_H], g[OUT_W]);
  const int64_t group = images_per_group(c_in + c_out, one.tiles);
  const tiling most = tiling_of(group < n ? group : n, g[OUT_H], g[OUT_W]);
  size_t v_bytes = 0, d_bytes = 0, s_bytes = 0;
  float *v = buffer(16, c_in, most.tiles, &v_bytes), *d = buffer(16, c_out, most.tiles, &d_bytes),
        *s = buffer(16, c_out, c_in, &s_bytes);
  tg_status st = TG_OK;
  if (!v || !d || !s)
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory for Winograd's transformed operands", op);
  for (int64_t i0 = 0; i0 < n && st == TG_OK; i0 += group) {
    const tiling t = tiling_of(n - i0 < group ? n - i0 : group, g[OUT_H], g[OUT_W]);
    input_job in = {x + i0 * c_in * g[H] * g[W], c_in, g[H], g[W], g[PAD_H], g[PAD_W], t, v};
    tg_cpu_parallel_ranges(t.n * c_in, 1, true, input_planes, &in);
    grad_job gj = {dy + i0 * c_out * g[OUT_H] * g[OUT_W], c_out, g[OUT_H], g[OUT_W], t, d};
    tg_cpu_parallel_ranges(t.n * c_out, 1, true, grad_planes, &gj);
    /* S[xi] [c_out, c_in] (+)= D[xi] [c_out, tiles] @ V[xi]^T [tiles, c_in] */
    products pr = {.m = c_out,
                   .n = c_in,
                   .k = t.tiles,
                   .a = d,
                   .a_rs = t.tiles,
                   .a_cs = 1,
                   .a_step = c_out * t.tiles,
                   .b = v,
                   .b_rs = 1,
                   .b_cs = t.tiles,
                   .b_step = c_in * t.tiles,
                   .c = s,
                   .c_step = c_out * c_in,
                   .beta = i0 == 0 ? 0.0 : 1.0};
    st = run_products(&pr);
  }
  if (st == TG_OK) filter_gradient(s, c_out, c_in, dw);
  if (v) tg__host_cached_free(v, v_bytes);
  if (d) tg__host_cached_free(d, d_bytes);
  if (s) tg__host_cached_free(s, s_bytes);
  return st;
}

tg_status tg__cpu_conv_winograd(int pass, tg_tensor *const *t, const int64_t *g) {
  static const char *const names[3] = {"conv2d.forward", "conv2d.backward_data",
                                       "conv2d.backward_weights"};
  float *x = tg_data_ptr(t[0]), *w = tg_data_ptr(t[1]), *y = tg_data_ptr(t[2]);
  const int64_t n = t[0]->sizes[0], c_in = t[0]->sizes[1], c_out = t[1]->sizes[0];
  const float *read[2] = {pass == 0 ? x : y, pass == 2 ? x : w};
  const tg_tensor *read_t[2] = {pass == 0 ? t[0] : t[2], pass == 2 ? t[0] : t[1]};
  for (int i = 0; i < 2; i++)
    if (any_non_finite(read[i], tg_numel(read_t[i]))) return TG_ERR_UNSUPPORTED;
  /* What a process's first GEMM sets up (the engine choice, which may calibrate; BLIS's thread
   * count) happens here, on the calling thread, as bmm_cpu.c does: from inside a pool chunk
   * the calibration's two-thread classes ran on one, and the table was judged disturbed and
   * not cached (a conv_bench on 2 threads with a fresh cache, Winograd on: no cache file). */
  if (!tg_gemm_engine_source()) return tg_last_error();
  tg_cpu_blis_threads_init();
  switch (pass) {
  case 0:
    return filter_then_convolve(names[0], x, n, c_in, g[H], g[W], w, false, c_out, g[PAD_H],
                                g[PAD_W], y, g[OUT_H], g[OUT_W]);
  case 1:
    return filter_then_convolve(names[1], y, n, c_out, g[OUT_H], g[OUT_W], w, true, c_in,
                                2 - g[PAD_H], 2 - g[PAD_W], x, g[H], g[W]);
  default:
    return weights_gradient(names[2], x, y, n, c_in, c_out, g, w);
  }
}
