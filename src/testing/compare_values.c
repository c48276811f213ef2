/* Comparing tensors' values for tests and checks (tg_allclose, tg_max_abs_diff,
 * tg_all_finite): elements are read on the host in double, through any strides and
 * broadcasting, outside the tape; temporaries live in a scope of the function's own. */
#include <math.h>

#include "ops/broadcast.h"
#include "tg/testing.h"
#include "tensor/check.h"
#include "tensor/error_impl.h"
#include "tensor/internal_assert.h"

/* Element idx (from offset, in elements) of a host tensor, as a double. */
static double value_at(const tg_tensor *t, int64_t idx) {
  const void *base = t->storage->data;
  switch (t->dtype) {
  case TG_F32:
    return ((const float *)base)[idx];
  case TG_F64:
    return ((const double *)base)[idx];
  default:
    TG_INTERNAL_ASSERT(t->dtype == TG_I64); /* every entry point validated the dtype */
    return (double)((const int64_t *)base)[idx];
  }
}

/* Called on each pair (x, y); false stops the walk (the answer is known). */
typedef bool (*pair_fn)(double x, double y, void *state);

/* Every pair of elements of ha and hb (host tensors of the same sizes; strides may be 0),
 * row-major, until f says stop. */
static void walk(const tg_tensor *ha, const tg_tensor *hb, pair_fn f, void *state) {
  int ndim = ha->ndim;
  int64_t numel = tg__numel(ndim, ha->sizes), index[TG_MAX_DIMS] = {0};
  int64_t oa = ha->offset, ob = hb->offset;
  for (int64_t k = 0; k < numel; k++) {
    if (!f(value_at(ha, oa), value_at(hb, ob), state)) return;
    for (int d = ndim - 1; d >= 0; d--) { /* odometer: the last dim moves fastest */
      oa += ha->strides[d];
      ob += hb->strides[d];
      if (++index[d] < ha->sizes[d]) break;
      oa -= ha->strides[d] * index[d];
      ob -= hb->strides[d] * index[d];
      index[d] = 0;
    }
  }
}

/* t on the host, broadcast to sizes (a scope-owned view). */
static tg_tensor *host_broadcast(const tg_tensor *t, int ndim, const int64_t *sizes) {
  tg_tensor *h = tg_to_device(t, TG_DEVICE_CPU);
  return h ? tg__scoped(tg__broadcast_view(h, ndim, sizes)) : NULL;
}

/* Runs f over the pairs of a and b broadcast together. Grad mode is off (nothing is
 * recorded) and the host copies go with a scope of our own. */
static tg_status visit_pairs(const char *fn, const tg_tensor *a, const tg_tensor *b, pair_fn f,
                             void *state) {
  int ndim = 0;
  int64_t sizes[TG_MAX_DIMS];
  if (!tg__check_arg(fn, "a", a) || !tg__check_arg(fn, "b", b) ||
      !tg__broadcast_shapes(fn, "a", a->ndim, a->sizes, "b", b->ndim, b->sizes, &ndim, sizes))
    return tg_last_error();
  bool was = tg_set_grad_enabled(false);
  tg_scope scope;
  tg_status st = tg__scope_open(&scope);
  tg_tensor *ha = st == TG_OK ? host_broadcast(a, ndim, sizes) : NULL;
  tg_tensor *hb = a == b ? ha : ha ? host_broadcast(b, ndim, sizes) : NULL;
  if (hb)
    walk(ha, hb, f, state);
  else if (st == TG_OK) {
    st = tg_last_error();
    tg__error_prefix(fn);
  }
  tg_scope_end(scope);
  tg_set_grad_enabled(was);
  return st;
}

typedef struct closeness {
  double rtol, atol;
  bool equal_nan, close;
} closeness;

static bool pair_close(double x, double y, void *state) {
  closeness *c = state;
  if (isnan(x) || isnan(y))
    c->close = c->equal_nan && isnan(x) && isnan(y);
  else if (x == y) /* also infinities of the same sign */
    c->close = true;
  else
    c->close = isfinite(x) && isfinite(y) && fabs(x - y) <= c->atol + c->rtol * fabs(y);
  return c->close;
}

bool tg_allclose_ex(const tg_tensor *a, const tg_tensor *b, double rtol, double atol,
                    bool equal_nan) {
  const char *fn = "tg_allclose";
  if (!tg__check(rtol >= 0 && atol >= 0, TG_ERR_ARGUMENT, fn,
                 "rtol %g and atol %g must be non-negative numbers", rtol, atol))
    return false;
  closeness c = {rtol, atol, equal_nan, true};
  return visit_pairs(fn, a, b, pair_close, &c) == TG_OK && c.close;
}

bool tg_allclose(const tg_tensor *a, const tg_tensor *b, double rtol, double atol) {
  return tg_allclose_ex(a, b, rtol, atol, false);
}

static bool pair_max_diff(double x, double y, void *state) {
  double *m = state, d = fabs(x - y);
  if (isnan(d)) {
    *m = NAN;
    return false;
  }
  if (d > *m) *m = d;
  return true;
}

double tg_max_abs_diff(const tg_tensor *a, const tg_tensor *b) {
  double m = 0;
  return visit_pairs("tg_max_abs_diff", a, b, pair_max_diff, &m) == TG_OK ? m : -1;
}

static bool pair_finite(double x, double y, void *state) {
  (void)y;
  return *(bool *)state = isfinite(x);
}

bool tg_all_finite(const tg_tensor *t) {
  if (!tg__check_arg("tg_all_finite", "t", t)) return false;
  if (!tg_dtype_is_floating(t->dtype)) return true;
  bool finite = true;
  return visit_pairs("tg_all_finite", t, t, pair_finite, &finite) == TG_OK && finite;
}
