/* The fused LLTM's CPU elementwise passes: the backend primitives lltm_forward_pointwise and
 * lltm_backward_pointwise (ops/backend.h); src/ops/lltm.c runs the GEMMs around them.
 *
 * Each pass walks the [B, S] cell elements row by row in tiles of columns. A tile's
 * operands are made unit-stride first (a strided or expanded operand is packed into a
 * small stack buffer), then one span function runs the cell math of ops/lltm_cell.h over
 * it: for F32 over the vectorizable float math of cpu_vecmath.h, compiled for AVX-512, AVX2 and
 * baseline x86-64 with run-time selection; for F64 over libm (precision first).
 *
 * Threads: above a size threshold the columns are split into contiguous ranges, a few per
 * thread of the pool (thread_pool.h), every chunk taking all rows of its range.
 *
 * Per element type: the passes are written once, in the template section at the end of
 * this file, which the file includes into itself for float and then for double (the
 * element type and the name suffix set before each include). They are ordinary functions
 * (forward_columns_f32, backward_row_f64, ...): a debugger steps through them line by line. */
#ifndef TG_CPU_LLTM_T /* ---- the file proper (the template section is after the drivers) */

/* The span loops select between computed values (elu, sigmoid, expm1); without trapping
 * math GCC may evaluate both sides, which is what lets it vectorize them. tg never
 * enables floating-point exceptions. Set before the includes: GCC inlines only functions
 * compiled with the same options, and the cell math comes from a header. */
#pragma GCC optimize("no-trapping-math")

#include <stdint.h>
#include <string.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/cpu_lltm_avx2.h"
#include "ops/cpu/cpu_vecmath.h"
#include "ops/cpu/thread_pool.h"
#include "ops/lltm_cell.h"
#include "ops/lltm_internal.h"

/* tg__lltm_math_*_vf: the LLTM cell over the vectorizable float math (cpu_vecmath.h). */
TG_LLTM_CELL_DEFINE(float, _vf, 1.0f, tg_vf_sigmoid, tg_vf_tanh, tg_vf_elu, tg_vf_d_elu)

/* Columns per tile: the packing buffers live on the stack. */
#define TG_LLTM_TILE 256
/* The blocked backward's buffers, [3][rows][columns] on the stack (24 KB for F32): a
 * block of rows is a cache line of F32 stores per column. */
#define TG_LLTM_ROW_BLOCK 16
#define TG_LLTM_BLOCK_TILE 128
/* Cell elements from which a pass runs on the pool: each element costs a few ns
 * vectorized, a job a microsecond or two. */
#define TG_LLTM_PARALLEL_MIN 16384
/* Columns per thread at least (one cache line of floats or more). */
#define TG_LLTM_MIN_COLUMNS 16

/* A 2-D strided operand: element (b, j) at data[b * s0 + j * s1]. */
typedef struct strided {
  char *data;
  int64_t s0, s1;
} strided;

/* A 1-D tensor is one row (bias [3S]); NULL gives a NULL operand. */
static strided strided_of(const tg_tensor *t) {
  if (!t) return (strided){0};
  if (t->ndim == 1) return (strided){tg_cpu_data(t), 0, t->strides[0]};
  return (strided){tg_cpu_data(t), t->strides[0], t->strides[1]};
}

typedef struct forward_args {
  int64_t batch, state;
  strided gates, bias, old_cell, new_h, new_cell;
} forward_args;

typedef struct backward_args {
  int64_t batch, state;
  strided grad_h, grad_cell, gates, old_cell, d_gates, d_old_cell, d_bias;
  bool has_grad_h, has_grad_cell;
} backward_args;

/* ---- the passes, per element type (the template section at the end of this file) ---- */

#define TG_CPU_LLTM_T float
#define TG_CPU_LLTM_FN(name) name##_f32
#define TG_CPU_LLTM_CELL(name) name##_vf
#define TG_CPU_LLTM_CLONES TG_VF_CLONES
/* F32 spans: the AVX2 + FMA ones (cpu_lltm_avx2.h) where the CPU has them. */
#define TG_CPU_LLTM_SPAN(avx2, portable) (tg_cpu_lltm_avx2_active() ? avx2 : portable)
#include "ops/cpu/cpu_lltm.c"
#undef TG_CPU_LLTM_T
#undef TG_CPU_LLTM_FN
#undef TG_CPU_LLTM_CELL
#undef TG_CPU_LLTM_CLONES
#undef TG_CPU_LLTM_SPAN

#define TG_CPU_LLTM_T double
#define TG_CPU_LLTM_FN(name) name##_f64
#define TG_CPU_LLTM_CELL(name) name##_d
#define TG_CPU_LLTM_CLONES
#define TG_CPU_LLTM_SPAN(avx2, portable) portable
#include "ops/cpu/cpu_lltm.c"
#undef TG_CPU_LLTM_T
#undef TG_CPU_LLTM_FN
#undef TG_CPU_LLTM_CELL
#undef TG_CPU_LLTM_CLONES
#undef TG_CPU_LLTM_SPAN

/* ---- drivers ---- */

/* How many column ranges to split S columns of a B x S pass into (1 = this thread). */
static int column_ranges(int64_t batch, int64_t state) {
  if (!tg_cpu_should_parallelize(batch * state, TG_LLTM_PARALLEL_MIN)) return 1;
  return (int)tg_cpu_chunk_count(state / TG_LLTM_MIN_COLUMNS);
}

/* Bounds of range r of n over S columns, multiples of the minimum width where possible. */
static void range_bounds(int64_t state, int r, int n, int64_t *c0, int64_t *c1) {
  int64_t units = (state + TG_LLTM_MIN_COLUMNS - 1) / TG_LLTM_MIN_COLUMNS;
  int64_t u0 = units * r / n, u1 = units * (r + 1) / n;
  *c0 = u0 * TG_LLTM_MIN_COLUMNS;
  *c1 = u1 * TG_LLTM_MIN_COLUMNS < state ? u1 * TG_LLTM_MIN_COLUMNS : state;
}

/* A pass's job for the pool: chunk r is column range r of `ranges`. */
typedef struct columns_job {
  const void *args; /* forward_args or backward_args */
  int ranges;
  bool f32, direct;
} columns_job;

static void forward_chunk(int64_t r, void *arg) {
  const columns_job *j = arg;
  int64_t c0, c1;
  range_bounds(((const forward_args *)j->args)->state, (int)r, j->ranges, &c0, &c1);
  if (j->f32)
    forward_columns_f32(j->args, c0, c1);
  else
    forward_columns_f64(j->args, c0, c1);
}

static void backward_chunk(int64_t r, void *arg) {
  const columns_job *j = arg;
  int64_t c0, c1;
  range_bounds(((const backward_args *)j->args)->state, (int)r, j->ranges, &c0, &c1);
  if (j->f32 && j->direct)
    backward_columns_f32(j->args, c0, c1);
  else if (j->f32)
    backward_columns_blocked_f32(j->args, c0, c1);
  else if (j->direct)
    backward_columns_f64(j->args, c0, c1);
  else
    backward_columns_blocked_f64(j->args, c0, c1);
}

tg_status tg_cpu_lltm_forward_pointwise(tg_tensor *gates, const tg_tensor *bias,
                                        const tg_tensor *old_cell, tg_tensor *new_h,
                                        tg_tensor *new_cell) {
  const forward_args a = {
      .batch = old_cell->sizes[0],
      .state = old_cell->sizes[1],
      .gates = strided_of(gates),
      .bias = strided_of(bias), /* only its column stride is used: row 0 for every b */
      .old_cell = strided_of(old_cell),
      .new_h = strided_of(new_h),
      .new_cell = strided_of(new_cell),
  };
  const bool f32 = gates->dtype == TG_F32;
  const int ranges = column_ranges(a.batch, a.state);
  columns_job job = {&a, ranges, f32, false};
  tg_cpu_parallel_for(ranges, forward_chunk, &job);
  return TG_OK;
}

tg_status tg_cpu_lltm_backward_pointwise(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                         const tg_tensor *gates, const tg_tensor *old_cell,
                                         tg_tensor *d_gates, tg_tensor *d_old_cell,
                                         tg_tensor *d_bias) {
  const backward_args a = {
      .batch = old_cell->sizes[0],
      .state = old_cell->sizes[1],
      .grad_h = strided_of(grad_h),
      .grad_cell = strided_of(grad_cell),
      .gates = strided_of(gates),
      .old_cell = strided_of(old_cell),
      .d_gates = strided_of(d_gates),
      .d_old_cell = strided_of(d_old_cell),
      .d_bias = strided_of(d_bias), /* [1, 3S]: row 0 */
      .has_grad_h = grad_h != NULL,
      .has_grad_cell = grad_cell != NULL,
  };
  const bool f32 = gates->dtype == TG_F32, direct = a.d_gates.s1 == 1;
  const int ranges = column_ranges(a.batch, a.state);
  columns_job job = {&a, ranges, f32, direct};
  tg_cpu_parallel_for(ranges, backward_chunk, &job);
  return TG_OK;
}

/* ---- as the LLTM's kernels (TG_OP_KERNEL lines in src/ops/def/lltm.def) ---- */
tg_status tg__kernel_lltm_forward_pointwise_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("lltm.forward_pointwise", n, 5);
  return tg_cpu_lltm_forward_pointwise(t[0], t[1], t[2], t[3], t[4]);
}
tg_status tg__kernel_lltm_backward_pointwise_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("lltm.backward_pointwise", n, 7);
  return tg_cpu_lltm_backward_pointwise(t[0], t[1], t[2], t[3], t[4], t[5], t[6]);
}

#else /* ---- template section: the passes over element type T = TG_CPU_LLTM_T ---- */

/* Plain names in this section, suffixed per type by the macros set before the include
 * (forward_span is forward_span_f32 or forward_span_f64, and so on). */
#define T TG_CPU_LLTM_T
#define forward_span TG_CPU_LLTM_FN(forward_span)
#define backward_span TG_CPU_LLTM_FN(backward_span)
#define unit_span TG_CPU_LLTM_FN(unit_span)
#define at TG_CPU_LLTM_FN(at)
#define forward_columns TG_CPU_LLTM_FN(forward_columns)
#define backward_row TG_CPU_LLTM_FN(backward_row)
#define backward_columns TG_CPU_LLTM_FN(backward_columns)
#define backward_columns_blocked TG_CPU_LLTM_FN(backward_columns_blocked)
#define bias_zero TG_CPU_LLTM_FN(bias_zero)
#define bias_add TG_CPU_LLTM_FN(bias_add)
#define cell_forward TG_CPU_LLTM_CELL(tg__lltm_math_forward)
#define cell_backward_from_act TG_CPU_LLTM_CELL(tg__lltm_math_backward_from_act)

/* The cell over n unit-stride elements: bias added to the three gate blocks, which are
 * overwritten with the activations (input gate, output gate, candidate). */
TG_CPU_LLTM_CLONES static void forward_span(int64_t n, const T *restrict b0, const T *restrict b1,
                                            const T *restrict b2, const T *restrict old_cell,
                                            T *restrict a0, T *restrict a1, T *restrict a2,
                                            T *restrict new_h, T *restrict new_cell) {
  for (int64_t j = 0; j < n; j++) {
    T ig, og, cand, c, h;
    cell_forward(a0[j] + b0[j], a1[j] + b1[j], a2[j] + b2[j], old_cell[j], &ig, &og, &cand, &c, &h);
    a0[j] = ig;
    a1[j] = og;
    a2[j] = cand;
    new_cell[j] = c;
    new_h[j] = h;
  }
}

/* The gate gradients of n unit-stride elements from the activations and old_cell. */
TG_CPU_LLTM_CLONES static void backward_span(int64_t n, const T *restrict grad_h,
                                             const T *restrict grad_cell,
                                             const T *restrict old_cell, const T *restrict a0,
                                             const T *restrict a1, const T *restrict a2,
                                             T *restrict d0, T *restrict d1, T *restrict d2,
                                             T *restrict d_old_cell) {
  for (int64_t j = 0; j < n; j++) {
    T g0, g1, g2, dc;
    cell_backward_from_act(grad_h[j], grad_cell[j], old_cell[j], a0[j], a1[j], a2[j], &g0, &g1, &g2,
                           &dc);
    d0[j] = g0;
    d1[j] = g1;
    d2[j] = g2;
    d_old_cell[j] = dc;
  }
}

/* n elements from p (stride apart) as a unit-stride array: p itself, or a copy in buf. A
 * stride of 0 (an expanded gradient: the backward of sum(new_h)) is a fill, which
 * vectorizes; the strided gather does not. */
static const T *unit_span(const char *p, int64_t stride, int64_t n, T *buf) {
  const T *src = (const T *)p;
  if (stride == 1) return src;
  if (stride == 0) {
    const T v = *src;
    for (int64_t j = 0; j < n; j++) buf[j] = v;
    return buf;
  }
  for (int64_t j = 0; j < n; j++) buf[j] = src[j * stride];
  return buf;
}

/* Address of element (b, j) of a strided operand. */
static const char *at(const strided *m, int64_t b, int64_t j) {
  return m->data + (size_t)(b * m->s0 + j * m->s1) * sizeof(T);
}

static void forward_columns(const forward_args *a, int64_t c0, int64_t c1) {
  T bias0[TG_LLTM_TILE], bias1[TG_LLTM_TILE], bias2[TG_LLTM_TILE], cell[TG_LLTM_TILE];
  const int64_t S = a->state, bs = a->bias.s1;
  const T *bias = (const T *)a->bias.data;
  for (int64_t b = 0; b < a->batch; b++) {
    T *g = (T *)a->gates.data + b * a->gates.s0;
    T *nh = (T *)a->new_h.data + b * a->new_h.s0;
    T *nc = (T *)a->new_cell.data + b * a->new_cell.s0;
    for (int64_t j = c0; j < c1; j += TG_LLTM_TILE) {
      const int64_t n = c1 - j < TG_LLTM_TILE ? c1 - j : TG_LLTM_TILE;
      TG_CPU_LLTM_SPAN(tg_cpu_lltm_avx2_forward_span, forward_span)
      (n, unit_span((const char *)(bias + j * bs), bs, n, bias0),
       unit_span((const char *)(bias + (S + j) * bs), bs, n, bias1),
       unit_span((const char *)(bias + (2 * S + j) * bs), bs, n, bias2),
       unit_span(at(&a->old_cell, b, j), a->old_cell.s1, n, cell), g + j, g + S + j, g + 2 * S + j,
       nh + j, nc + j);
    }
  }
}

/* The operands of row b, columns [j, j + n), as unit-stride arrays; runs the span. */
static void backward_row(const backward_args *a, int64_t b, int64_t j, int64_t n, T *d0, T *d1,
                         T *d2, T *d_cell, T *scratch) {
  static const T zero[TG_LLTM_TILE];
  const int64_t S = a->state;
  const T *g = (const T *)a->gates.data + b * a->gates.s0;
  const T *gh = a->has_grad_h ? unit_span(at(&a->grad_h, b, j), a->grad_h.s1, n, scratch) : zero;
  const T *gc = a->has_grad_cell
                    ? unit_span(at(&a->grad_cell, b, j), a->grad_cell.s1, n, scratch + TG_LLTM_TILE)
                    : zero;
  const T *cell = unit_span(at(&a->old_cell, b, j), a->old_cell.s1, n, scratch + 2 * TG_LLTM_TILE);
  TG_CPU_LLTM_SPAN(tg_cpu_lltm_avx2_backward_span, backward_span)
  (n, gh, gc, cell, g + j, g + S + j, g + 2 * S + j, d0, d1, d2, d_cell);
}

/* d_bias over this range's columns of the three gate blocks: zeroed, then each row's gate
 * gradients added while they are in cache (the column sums of d_gates). */
static void bias_zero(const backward_args *a, int64_t c0, int64_t c1) {
  T *db = (T *)a->d_bias.data;
  const int64_t S = a->state, s = a->d_bias.s1;
  for (int q = 0; q < 3; q++)
    for (int64_t j = c0; j < c1; j++) db[(q * S + j) * s] = 0;
}

static void bias_add(const backward_args *a, int64_t j, int64_t n, const T *d0, const T *d1,
                     const T *d2) {
  T *db = (T *)a->d_bias.data;
  const int64_t S = a->state, s = a->d_bias.s1;
  const T *rows[3] = {d0, d1, d2};
  for (int q = 0; q < 3; q++) {
    T *dst = db + (q * S + j) * s;
    if (s == 1)
      for (int64_t k = 0; k < n; k++) dst[k] += rows[q][k];
    else
      for (int64_t k = 0; k < n; k++) dst[k * s] += rows[q][k];
  }
}

/* d_gates with unit column stride: each row written in place. */
static void backward_columns(const backward_args *a, int64_t c0, int64_t c1) {
  T scratch[3 * TG_LLTM_TILE], d_cell[TG_LLTM_TILE];
  const int64_t S = a->state;
  if (a->d_bias.data) bias_zero(a, c0, c1);
  for (int64_t b = 0; b < a->batch; b++) {
    T *d = (T *)a->d_gates.data + b * a->d_gates.s0;
    T *doc = a->d_old_cell.data ? (T *)a->d_old_cell.data + b * a->d_old_cell.s0 : NULL;
    for (int64_t j = c0; j < c1; j += TG_LLTM_TILE) {
      const int64_t n = c1 - j < TG_LLTM_TILE ? c1 - j : TG_LLTM_TILE;
      backward_row(a, b, j, n, d + j, d + S + j, d + 2 * S + j, doc ? doc + j : d_cell, scratch);
      if (a->d_bias.data) bias_add(a, j, n, d + j, d + S + j, d + 2 * S + j);
    }
  }
}

/* Any other d_gates strides (the transposed layout backward uses for large sizes):
 * blocks of TG_LLTM_ROW_BLOCK rows go through buffers and leave column by column, so
 * the stores are runs of consecutive rows rather than one scattered element per row. */
static void backward_columns_blocked(const backward_args *a, int64_t c0, int64_t c1) {
  T scratch[3 * TG_LLTM_TILE], d_cell[TG_LLTM_TILE];
  T buf[3][TG_LLTM_ROW_BLOCK][TG_LLTM_BLOCK_TILE];
  const int64_t S = a->state, ds0 = a->d_gates.s0, ds1 = a->d_gates.s1;
  T *d = (T *)a->d_gates.data;
  if (a->d_bias.data) bias_zero(a, c0, c1);
  for (int64_t b0 = 0; b0 < a->batch; b0 += TG_LLTM_ROW_BLOCK) {
    const int64_t rows = a->batch - b0 < TG_LLTM_ROW_BLOCK ? a->batch - b0 : TG_LLTM_ROW_BLOCK;
    for (int64_t j = c0; j < c1; j += TG_LLTM_BLOCK_TILE) {
      const int64_t n = c1 - j < TG_LLTM_BLOCK_TILE ? c1 - j : TG_LLTM_BLOCK_TILE;
      for (int64_t r = 0; r < rows; r++) {
        const int64_t b = b0 + r;
        T *doc = a->d_old_cell.data ? (T *)a->d_old_cell.data + b * a->d_old_cell.s0 + j : d_cell;
        backward_row(a, b, j, n, buf[0][r], buf[1][r], buf[2][r], doc, scratch);
        if (a->d_bias.data) bias_add(a, j, n, buf[0][r], buf[1][r], buf[2][r]);
      }
      for (int q = 0; q < 3; q++) {
        for (int64_t k = 0; k < n; k++) {
          T *dst = d + (q * S + j + k) * ds1 + b0 * ds0;
          for (int64_t r = 0; r < rows; r++) dst[r * ds0] = buf[q][r][k];
        }
      }
    }
  }
}

#undef T
#undef forward_span
#undef backward_span
#undef unit_span
#undef at
#undef forward_columns
#undef backward_row
#undef backward_columns
#undef backward_columns_blocked
#undef bias_zero
#undef bias_add
#undef cell_forward
#undef cell_backward_from_act

#endif
