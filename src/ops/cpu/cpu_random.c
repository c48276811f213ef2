/* uniform and normal fills from Philox (ops/philox.h). Element i (in logical row-major
 * order) takes stream position offset + i, so the numbers do not depend on the thread
 * count or on which device draws them. Each thread computes one Philox block per 4 (F32)
 * or 2 (F64) elements and reads its lanes. */

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"
#include "ops/philox.h"

typedef enum { DRAW_UNIFORM, DRAW_NORMAL } draw_kind;

typedef struct draw {
  draw_kind kind;
  uint64_t seed, offset;
  double a, b; /* [low, high) or (mean, std) */
} draw;

/* Writes elements [begin, end) of the draw: element i goes to base[i], or, when
 * elem_offset is given, to base[elem_offset[i - begin]]. The F32 and F64 versions differ
 * only in the type and the per-block lane count. */
#define TG_CPU_DRAW_RANGE(NAME, T, PER_BLOCK, LANE_UNIFORM, LANE_NORMAL, SCALE_UNIFORM)            \
  static void NAME(const draw *d, T *base, const int64_t *elem_offset, int64_t begin,              \
                   int64_t end) {                                                                  \
    const T a = (T)d->a, b = (T)d->b;                                                              \
    for (int64_t i = begin; i < end;) {                                                            \
      const uint64_t pos = d->offset + (uint64_t)i;                                                \
      const tg_philox4 r = tg_philox_block(d->seed, pos / PER_BLOCK);                              \
      for (int lane = (int)(pos % PER_BLOCK); lane < PER_BLOCK && i < end; lane++, i++) {          \
        T v = d->kind == DRAW_UNIFORM ? SCALE_UNIFORM(LANE_UNIFORM(r, lane), a, b)                 \
                                      : a + b * LANE_NORMAL(r, lane);                              \
        base[elem_offset ? elem_offset[i - begin] : i] = v;                                        \
      }                                                                                            \
    }                                                                                              \
  }
TG_CPU_DRAW_RANGE(draw_range_f32, float, TG_PHILOX_F32_PER_BLOCK, tg_philox_lane_uniform_f,
                  tg_philox_lane_normal_f, tg_philox_scale_uniform_f)
TG_CPU_DRAW_RANGE(draw_range_f64, double, TG_PHILOX_F64_PER_BLOCK, tg_philox_lane_uniform_d,
                  tg_philox_lane_normal_d, tg_philox_scale_uniform_d)

static void draw_range(const draw *d, tg_tensor *out, const int64_t *elem_offset, int64_t begin,
                       int64_t end) {
  if (out->dtype == TG_F32)
    draw_range_f32(d, (float *)tg_cpu_data(out), elem_offset, begin, end);
  else
    draw_range_f64(d, (double *)tg_cpu_data(out), elem_offset, begin, end);
}

typedef struct range_draw {
  const draw *d;
  tg_tensor *out;
} range_draw;

static void draw_range_job(int64_t begin, int64_t end, void *arg) {
  const range_draw *j = arg;
  draw_range(j->d, j->out, NULL, begin, end);
}

static tg_status fill_random(const char *op, tg_tensor *out, const draw *d) {
  if (out->dtype != TG_F32 && out->dtype != TG_F64)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %s is not supported (F32, F64 only)", op,
                        tg_dtype_name(out->dtype));
  const int64_t numel = tg_cpu_numel(out);
  if (numel == 0) return TG_OK;
  if (!tg_is_contiguous(out)) {
    /* Rare (the generic ops draw into contiguous tensors): serial, in chunks of elements
     * whose offsets are computed in logical order. */
    int64_t index[TG_MAX_DIMS] = {0};
    int64_t offsets[256];
    for (int64_t begin = 0; begin < numel; begin += 256) {
      const int64_t len = numel - begin < 256 ? numel - begin : 256;
      for (int64_t j = 0; j < len; j++) {
        offsets[j] = 0;
        for (int dd = 0; dd < out->ndim; dd++) offsets[j] += index[dd] * out->strides[dd];
        for (int dd = out->ndim - 1; dd >= 0 && ++index[dd] == out->sizes[dd]; dd--) index[dd] = 0;
      }
      draw_range(d, out, offsets, begin, begin + len);
    }
    return TG_OK;
  }
  /* Ranges of logical indices: the values do not depend on the split. */
  range_draw job = {d, out};
  tg_cpu_parallel_ranges(numel, 16,
                         tg_cpu_should_parallelize(numel, TG_CPU_PARALLEL_MIN_TRANSCENDENTAL),
                         draw_range_job, &job);
  return TG_OK;
}

tg_status tg_cpu_uniform(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b) {
  draw d = {DRAW_UNIFORM, seed, offset, a, b};
  return fill_random("uniform", out, &d);
}

tg_status tg_cpu_normal(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b) {
  draw d = {DRAW_NORMAL, seed, offset, a, b};
  return fill_random("normal", out, &d);
}
