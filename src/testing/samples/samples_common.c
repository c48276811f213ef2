/* Shared steps of the built-in ops' sample inputs: building the list, making inputs. */
#include <math.h>

#include "testing/samples/samples_internal.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"

tg__samples tg__samples_begin(const tg_sample_request *req, tg_sample *out) {
  return (tg__samples){req, out, 0, false};
}

tg_sample *tg__sample_new(tg__samples *b, const char *label) {
  if (b->failed) return NULL;
  if (b->count == TG_SAMPLE_MAX) {
    tg_set_error(TG_ERR_ARGUMENT, "sample inputs: more than TG_SAMPLE_MAX (%d) samples (at '%s')",
                 TG_SAMPLE_MAX, label);
    b->failed = true;
    return NULL;
  }
  tg_sample *s = &b->out[b->count++];
  *s = (tg_sample){.label = label};
  return s;
}

void tg__sample_input(tg__samples *b, tg_sample *s, tg_tensor *t) {
  if (!s || b->failed) return;
  if (!t || s->n_inputs == TG_SAMPLE_MAX_INPUTS) {
    if (t)
      tg_set_error(TG_ERR_ARGUMENT, "sample '%s': more than %d inputs", s->label,
                   TG_SAMPLE_MAX_INPUTS);
    b->failed = true;
    return;
  }
  s->inputs[s->n_inputs++] = t;
}

void tg__sample_scalar(tg_sample *s, double value) {
  if (s && s->n_scalars < TG_CTX_MAX_SCALARS) s->scalars[s->n_scalars++] = value;
}

void tg__sample_int(tg_sample *s, int64_t value) {
  if (s && s->n_ints < TG_CTX_MAX_INTS) s->ints[s->n_ints++] = value;
}

int tg__samples_end(tg__samples *b) {
  if (b->failed) return -1;
  return b->count;
}

/* ---- inputs ---- */

/* u in [0, 1) mapped into range. */
static double place(double u, tg__range range) {
  if (range.gap <= 0) return range.low + u * (range.high - range.low);
  double v = 2.0 * u - 1.0; /* [-1, 1) */
  double magnitude = range.gap + fabs(v) * (range.high - range.gap);
  return v < 0 ? -magnitude : magnitude;
}

/* F64 CPU values of these sizes, converted to the request's dtype and device. */
static tg_tensor *converted(const tg_sample_request *r, int ndim, const int64_t *sizes,
                            const double *values) {
  tg_tensor *t = tg_from_data(ndim, sizes, values, (tg_options){.dtype = TG_F64});
  return tg_to_device(tg_to_dtype(t, r->dtype), r->device);
}

/* Uniform values of range drawn from the request's generator on the CPU, on the host. */
static double *draw(const tg_sample_request *r, int64_t n, tg__range range) {
  double *host = tg__host_malloc(sizeof *host * (size_t)(n > 0 ? n : 1));
  if (!host) {
    tg_set_error(TG_ERR_MEMORY, "sample inputs: out of memory for %lld values", (long long)n);
    return NULL;
  }
  tg_tensor *u = tg_rand(1, &n, (tg_options){.dtype = TG_F64}, r->gen);
  if (!u || tg_to_host_array(u, host, sizeof *host * (size_t)n) != TG_OK) {
    tg__host_free(host);
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) host[i] = place(host[i], range);
  return host;
}

tg_tensor *tg__sample_tensor(const tg_sample_request *r, tg__layout layout, tg__range range,
                             bool grad, int ndim, const int64_t *sizes) {
  if ((layout == TG__TRANSPOSED && ndim < 2) || (layout == TG__STEPPED && ndim < 1)) {
    tg_set_error(TG_ERR_SHAPE, "sample inputs: a %s input needs at least %d dims, not %d",
                 layout == TG__TRANSPOSED ? "transposed" : "stepped",
                 layout == TG__TRANSPOSED ? 2 : 1, ndim);
    return NULL;
  }
  /* The storage's geometry: transposed swaps the last two sizes, stepped doubles the last. */
  int64_t base[TG_MAX_DIMS];
  for (int d = 0; d < ndim; d++) base[d] = sizes[d];
  if (layout == TG__TRANSPOSED) {
    base[ndim - 2] = sizes[ndim - 1];
    base[ndim - 1] = sizes[ndim - 2];
  } else if (layout == TG__STEPPED) {
    base[ndim - 1] = 2 * sizes[ndim - 1];
  }
  int64_t n = tg__numel(ndim, base);
  bool was = tg_set_grad_enabled(false);
  tg_tensor *t = NULL;
  double *host = draw(r, n, range);
  if (host) {
    t = converted(r, ndim, base, host);
    tg__host_free(host);
  }
  if (t && layout == TG__TRANSPOSED) t = tg_transpose(t, -1, -2);
  if (t && layout == TG__STEPPED) t = tg_slice(t, -1, 1, 2 * sizes[ndim - 1], 2);
  tg_set_grad_enabled(was);
  if (t && grad && tg_set_requires_grad(t, true) != TG_OK) return NULL;
  return t;
}

tg_tensor *tg__sample_values(const tg_sample_request *r, bool grad, int ndim, const int64_t *sizes,
                             const double *values) {
  bool was = tg_set_grad_enabled(false);
  tg_tensor *t = converted(r, ndim, sizes, values);
  tg_set_grad_enabled(was);
  if (t && grad && tg_set_requires_grad(t, true) != TG_OK) return NULL;
  return t;
}

tg_tensor *tg__sample_indices(const tg_sample_request *r, int64_t bound, int ndim,
                              const int64_t *sizes) {
  int64_t n = tg__numel(ndim, sizes);
  double *host = draw(r, n, (tg__range){0.0, (double)bound, 0.0});
  int64_t *ids = host ? tg__host_malloc(sizeof *ids * (size_t)(n > 0 ? n : 1)) : NULL;
  tg_tensor *t = NULL;
  if (ids) {
    for (int64_t i = 0; i < n; i++) {
      ids[i] = (int64_t)floor(host[i]);
      if (ids[i] >= bound) ids[i] = bound - 1;
    }
    t = tg_to_device(tg_from_data(ndim, sizes, ids, (tg_options){.dtype = TG_I64}), r->device);
  } else if (host) {
    tg_set_error(TG_ERR_MEMORY, "sample inputs: out of memory for %lld indices", (long long)n);
  }
  tg__host_free(host);
  tg__host_free(ids);
  return t;
}
