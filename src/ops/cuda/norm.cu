/* normalize_groups' CUDA kernels (src/ops/norm.c; contracts in src/ops/def/norm.def), the
 * CPU kernels' arithmetic (src/ops/cpu/norm_cpu.c): x is the contiguous [A, R, C, K], group
 * g of sample a is the run [a span + g I, a span + (g + 1) I), channel c of (a, r) the run
 * [a span + (r C + c) K, ... + K). A sum over a group (or a channel) is taken in two
 * launches, without shared memory (so the emulation runs them as they are): one thread per
 * piece of at most PIECE elements of one run writes its partial sums in double to a
 * scratch buffer, then one thread per group (channel) adds its pieces in order, which also
 * keeps the result the same from run to run. y and dx are one thread per element. */
#include "allocator.cuh"
#include "elementwise.cuh"
#include "ops.cuh"

namespace {

constexpr int64_t PIECE = 2048;

struct layout {
  int64_t A, C, K, G, I, span, reps; /* reps = R: the (r, c) runs of one a */
};

TG_HOST_DEVICE int64_t channel_of(const layout &l, int64_t p) { return (p / l.K) % l.C; }

/* The pieces of one unit: n_runs runs of len elements, each cut into ceil(len / PIECE). */
struct pieces {
  int64_t runs, len, per_run;
  TG_HOST_DEVICE int64_t count() const { return runs * per_run; }
};

TG_HOST_DEVICE pieces group_pieces(const layout &l) {
  return {l.A, l.I, l.I ? (l.I + PIECE - 1) / PIECE : 0};
}
TG_HOST_DEVICE pieces channel_pieces(const layout &l) {
  return {l.A * l.reps, l.K, (l.K + PIECE - 1) / PIECE};
}

/* Piece j of a group: its first element's offset in x and its length. */
TG_HOST_DEVICE void group_piece(const layout &l, const pieces &pc, int64_t g, int64_t j,
                                int64_t *at, int64_t *n) {
  const int64_t a = j / pc.per_run, i0 = (j % pc.per_run) * PIECE;
  *at = a * l.span + g * l.I + i0;
  *n = l.I - i0 < PIECE ? l.I - i0 : PIECE;
}

/* out[t] for t = g * count + j: sum(x) over the piece (sq: sum((x - mean)^2)). */
template <typename T>
__global__ void group_partials(layout l, pieces pc, const T *x, const double *mean, bool sq,
                               double *out) {
  TG_CU_GRID_STRIDE(t, l.G * pc.count()) {
    const int64_t g = t / pc.count();
    int64_t at, n;
    group_piece(l, pc, g, t % pc.count(), &at, &n);
    double s = 0;
    const double m = sq ? mean[g] : 0.0;
    for (int64_t i = 0; i < n; i++) {
      const double v = double(x[at + i]);
      s += sq ? (v - m) * (v - m) : v;
    }
    out[t] = s;
  }
}

/* Per group: the pieces' partial sums (width of them per piece) added in order, over n. */
__global__ void finish(int64_t units, int64_t count, int width, const double *partial, double n,
                       double *out) {
  TG_CU_GRID_STRIDE(u, units) {
    for (int k = 0; k < width; k++) {
      double s = 0;
      for (int64_t j = 0; j < count; j++) s += partial[(u * count + j) * width + k];
      out[u * width + k] = s / n;
    }
  }
}

template <typename T> __global__ void store(int64_t n, const double *from, T *to) {
  TG_CU_GRID_STRIDE(i, n) to[i] = T(from[i]);
}

template <typename T>
__global__ void store_pairs(int64_t n, const double *from, T *first, T *second) {
  TG_CU_GRID_STRIDE(i, n) {
    first[i] = T(from[2 * i]);
    second[i] = T(from[2 * i + 1]);
  }
}

template <typename T>
__global__ void apply_kernel(layout l, T *y, const T *x, const T *mean, const T *rstd, const T *w,
                             const T *b) {
  TG_CU_GRID_STRIDE(e, l.A * l.span) {
    const int64_t p = e % l.span, g = p / l.I, c = channel_of(l, p);
    y[e] = (x[e] - mean[g]) * (rstd[g] * w[c]) + b[c];
  }
}

/* out[2 t], out[2 t + 1]: sum(dy w) and sum(dy w (x - m)) over the piece. */
template <typename T>
__global__ void grad_partials(layout l, pieces pc, const T *dy, const T *x, const T *mean,
                              const T *w, double *out) {
  TG_CU_GRID_STRIDE(t, l.G * pc.count()) {
    const int64_t g = t / pc.count();
    int64_t at, n;
    group_piece(l, pc, g, t % pc.count(), &at, &n);
    const double m = double(mean[g]);
    double se = 0, seh = 0;
    for (int64_t i = 0; i < n; i++) {
      const double e = double(dy[at + i]) * double(w[channel_of(l, (at + i) % l.span)]);
      se += e;
      seh += e * (double(x[at + i]) - m);
    }
    out[2 * t] = se;
    out[2 * t + 1] = seh;
  }
}

/* dx = s w dy - s mean(e) - (x - m) s^3 mean(e (x - m)), sums[2 g ...] holding the means. */
template <typename T>
__global__ void dx_kernel(layout l, T *dx, const T *dy, const T *x, const T *mean, const T *rstd,
                          const T *w, const double *sums) {
  TG_CU_GRID_STRIDE(e, l.A * l.span) {
    const int64_t p = e % l.span, g = p / l.I;
    const double s = double(rstd[g]), m = double(mean[g]);
    dx[e] = T(s * double(w[channel_of(l, p)]) * double(dy[e]) - s * sums[2 * g] -
              (double(x[e]) - m) * s * s * s * sums[2 * g + 1]);
  }
}

/* out[2 t], out[2 t + 1]: sum(dy (x - mean) rstd) and sum(dy) over a piece of channel c. */
template <typename T>
__global__ void affine_partials(layout l, pieces pc, const T *dy, const T *x, const T *mean,
                                const T *rstd, double *out) {
  TG_CU_GRID_STRIDE(t, l.C * pc.count()) {
    const int64_t c = t / pc.count(), j = t % pc.count();
    const int64_t run = j / pc.per_run, k0 = (j % pc.per_run) * PIECE;
    const int64_t a = run / l.reps, r = run % l.reps;
    const int64_t q0 = (r * l.C + c) * l.K + k0, n = l.K - k0 < PIECE ? l.K - k0 : PIECE;
    double sw = 0, sb = 0;
    for (int64_t k = 0; k < n; k++) {
      const int64_t q = q0 + k, g = q / l.I, e = a * l.span + q;
      const double d = double(dy[e]);
      sw += d * (double(x[e]) - double(mean[g])) * double(rstd[g]);
      sb += d;
    }
    out[2 * t] = sw;
    out[2 * t + 1] = sb;
  }
}

/* Views of t[0..n) (one CUDA device, one floating dtype), the layout from x's view [A, R,
 * C, K] and the [G] view, and the device to launch on. */
tg_status prepare(const char *op, int n, tg_tensor *const *t, int x, int groups, tg_cu_view *v,
                  layout *l, tg_cu_device **dev) {
  tg_status st = tg_cu_views_floating(op, n, (const tg_tensor *const *)t, v);
  if (st != TG_OK) return st;
  l->A = v[x].sizes[0];
  l->reps = v[x].sizes[1];
  l->C = v[x].sizes[2];
  l->K = v[x].sizes[3];
  l->G = v[groups].sizes[0];
  l->span = l->reps * l->C * l->K;
  l->I = l->G ? l->span / l->G : 0;
  return tg_cu_device_get(op, v[0].device, dev);
}

/* Scratch of n doubles on the views' device; NULL with the error set. */
double *scratch(const char *op, const tg_cu_view &v, int64_t n, tg_cu_temp *t) {
  t->ptr = tg_cu_alloc(op, v.device, (size_t)(n > 0 ? n : 1) * sizeof(double));
  return (double *)t->ptr;
}

} // namespace

tg_status tg__kernel_normalize_groups_stats_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.stats", n_tensors, 3);
  const char *op = "cuda.normalize_groups.stats";
  tg_cu_view v[3];
  layout l;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 3, t, 2, 0, v, &l, &dev);
  if (st != TG_OK || l.G == 0) return st;
  const pieces pc = group_pieces(l);
  const double n = double(l.A * l.I);
  tg_cu_temp tp, tm;
  double *partial = scratch(op, v[0], l.G * pc.count(), &tp);
  double *moments = partial ? scratch(op, v[0], 2 * l.G, &tm) : nullptr;
  if (!moments) return tg_last_error();
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    const scalar_t *x = (const scalar_t *)v[2].data;
    if (pc.count() > 0)
      TG_CU_LAUNCH(op, l.G * pc.count(), dev->stream, group_partials<scalar_t>, l, pc, x,
                   (const double *)nullptr, false, partial);
    TG_CU_LAUNCH(op, l.G, dev->stream, finish, l.G, pc.count(), 1, (const double *)partial, n,
                 moments);
    if (pc.count() > 0)
      TG_CU_LAUNCH(op, l.G * pc.count(), dev->stream, group_partials<scalar_t>, l, pc, x,
                   (const double *)moments, true, partial);
    TG_CU_LAUNCH(op, l.G, dev->stream, finish, l.G, pc.count(), 1, (const double *)partial, n,
                 moments + l.G);
    TG_CU_LAUNCH(op, l.G, dev->stream, store<scalar_t>, l.G, (const double *)moments,
                 (scalar_t *)v[0].data);
    TG_CU_LAUNCH(op, l.G, dev->stream, store<scalar_t>, l.G, (const double *)(moments + l.G),
                 (scalar_t *)v[1].data);
  });
  return TG_OK;
}

tg_status tg__kernel_normalize_groups_apply_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.apply", n_tensors, 6);
  const char *op = "cuda.normalize_groups.apply";
  tg_cu_view v[6];
  layout l;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 6, t, 1, 2, v, &l, &dev);
  if (st != TG_OK || l.A * l.span == 0) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, l.A * l.span, dev->stream, apply_kernel<scalar_t>, l, (scalar_t *)v[0].data,
                 (const scalar_t *)v[1].data, (const scalar_t *)v[2].data,
                 (const scalar_t *)v[3].data, (const scalar_t *)v[4].data,
                 (const scalar_t *)v[5].data);
  });
  return TG_OK;
}

tg_status tg__kernel_normalize_groups_backward_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.backward", n_tensors, 6);
  const char *op = "cuda.normalize_groups.backward";
  tg_cu_view v[6];
  layout l;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 6, t, 2, 3, v, &l, &dev);
  if (st != TG_OK || l.A * l.span == 0) return st;
  const pieces pc = group_pieces(l);
  tg_cu_temp tp, ts;
  double *partial = scratch(op, v[0], 2 * l.G * pc.count(), &tp);
  double *sums = partial ? scratch(op, v[0], 2 * l.G, &ts) : nullptr;
  if (!sums) return tg_last_error();
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    const scalar_t *dy = (const scalar_t *)v[1].data, *x = (const scalar_t *)v[2].data;
    const scalar_t *mean = (const scalar_t *)v[3].data, *rstd = (const scalar_t *)v[4].data;
    const scalar_t *w = (const scalar_t *)v[5].data;
    TG_CU_LAUNCH(op, l.G * pc.count(), dev->stream, grad_partials<scalar_t>, l, pc, dy, x, mean, w,
                 partial);
    TG_CU_LAUNCH(op, l.G, dev->stream, finish, l.G, pc.count(), 2, (const double *)partial,
                 double(l.A * l.I), sums);
    TG_CU_LAUNCH(op, l.A * l.span, dev->stream, dx_kernel<scalar_t>, l, (scalar_t *)v[0].data, dy,
                 x, mean, rstd, w, (const double *)sums);
  });
  return TG_OK;
}

tg_status tg__kernel_normalize_groups_affine_grad_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.affine_grad", n_tensors, 6);
  const char *op = "cuda.normalize_groups.affine_grad";
  tg_cu_view v[6];
  layout l;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 6, t, 3, 4, v, &l, &dev);
  if (st != TG_OK || l.C == 0) return st;
  const pieces pc = channel_pieces(l);
  tg_cu_temp tp, ts;
  double *partial = scratch(op, v[0], 2 * l.C * pc.count(), &tp);
  double *sums = partial ? scratch(op, v[0], 2 * l.C, &ts) : nullptr;
  if (!sums) return tg_last_error();
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    if (pc.count() > 0)
      TG_CU_LAUNCH(op, l.C * pc.count(), dev->stream, affine_partials<scalar_t>, l, pc,
                   (const scalar_t *)v[2].data, (const scalar_t *)v[3].data,
                   (const scalar_t *)v[4].data, (const scalar_t *)v[5].data, partial);
    TG_CU_LAUNCH(op, l.C, dev->stream, finish, l.C, pc.count(), 2, (const double *)partial, 1.0,
                 sums);
    TG_CU_LAUNCH(op, l.C, dev->stream, store_pairs<scalar_t>, l.C, (const double *)sums,
                 (scalar_t *)v[0].data, (scalar_t *)v[1].data);
  });
  return TG_OK;
}
