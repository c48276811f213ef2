/* torch.nn.utils.clip_grad_norm_ (tg/optim.h). Like PyTorch's: each gradient's norm, then
 * the norm of those norms, then every gradient times min(1, max_norm / (total + 1e-6)).
 * The norms of one device are stacked and reduced there, so a model on one GPU costs one
 * read back of one number. */
#include <math.h>
#include <stdbool.h>

#include "ops/backend.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/optim.h"

static const char fn[] = "tg_clip_grad_norm";

/* The p-norm of all of x's elements as a 0-dim tensor of x's dtype, on x's device. */
static tg_tensor *vector_norm(const tg_tensor *x, double p) {
  if (isinf(p)) return tg_max(tg_abs(x));
  if (p == 2) return tg_sqrt(tg_sum(tg_mul(x, x)));
  if (p == 1) return tg_sum(tg_abs(x));
  return tg_pow_scalar(tg_sum(tg_pow_scalar(tg_abs(x), p)), 1.0 / p);
}

/* The norm of the norms of the gradients on `device` (NULL when there are none), in the
 * promotion of their dtypes (tg_stack's). */
static tg_tensor *device_norm(int n, tg_tensor *const *grads, tg_device device, double p,
                              tg_tensor **norms) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (!grads[i] || !tg_device_equal(grads[i]->storage->device, device)) continue;
    if (!(norms[k++] = vector_norm(grads[i], p))) return NULL;
  }
  return k ? vector_norm(tg_stack(k, (const tg_tensor *const *)norms, 0), p) : NULL;
}

/* PyTorch's coefficient: reciprocal(total + 1e-6) * max_norm, clamped to 1, in the
 * total's dtype (F32 rounding at each step for an F32 total). NaN stays NaN. */
static double clip_coefficient(double total, tg_dtype dtype, double max_norm) {
  double coef;
  if (dtype == TG_F32) {
    float denom = (float)total + (float)1e-6;
    coef = (double)((1.0f / denom) * (float)max_norm);
  } else {
    coef = (1.0 / (total + 1e-6)) * max_norm;
  }
  return coef > 1.0 ? 1.0 : coef;
}

static tg_status check_args(int n, tg_tensor *const *params, double max_norm, double norm_type) {
  if (n < 0) return tg_set_error(TG_ERR_ARGUMENT, "%s: n_params is %d (must be >= 0)", fn, n);
  if (n > 0 && !params)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: params is NULL (n_params is %d)", fn, n);
  for (int i = 0; i < n; i++)
    if (!params[i]) return tg_set_error(TG_ERR_ARGUMENT, "%s: params[%d] is NULL", fn, i);
  if (!(max_norm >= 0))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: max_norm (%g) must be >= 0", fn, max_norm);
  if (!(norm_type > 0))
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: norm_type (%g) must be > 0 (2 for the Euclidean norm, INFINITY for "
                        "the largest magnitude)",
                        fn, norm_type);
  return TG_OK;
}

/* The total norm (0-dim, on the CPU) of the non-empty gradients in grads, NULL entries
 * skipped: per device, then across devices. */
static tg_tensor *total_norm_of(int n, tg_tensor **grads, double p, tg_tensor **scratch) {
  tg_tensor *per_device[8];
  int n_devices = 0;
  for (int i = 0; i < n; i++) {
    if (!grads[i]) continue;
    tg_device d = grads[i]->storage->device;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = grads[j] && tg_device_equal(grads[j]->storage->device, d);
    if (seen) continue;
    if (n_devices == (int)(sizeof per_device / sizeof *per_device)) {
      tg_set_error(TG_ERR_ARGUMENT, "%s: gradients on more than %d devices", fn, n_devices);
      return NULL;
    }
    tg_tensor *norm = device_norm(n, grads, d, p, scratch);
    if (!norm || !(norm = tg_to_device(norm, TG_DEVICE_CPU))) return NULL;
    per_device[n_devices++] = norm;
  }
  if (n_devices == 1) return per_device[0];
  return vector_norm(tg_stack(n_devices, (const tg_tensor *const *)per_device, 0), p);
}

/* All or nothing: every scaled gradient is computed before any is written. */
static tg_status scale_grads(int n, tg_tensor **grads, double coef) {
  tg_tensor **scaled = grads + n;
  for (int i = 0; i < n; i++)
    if (grads[i] && !(scaled[i] = tg_mul_scalar(grads[i], coef))) return tg_last_error();
  for (int i = 0; i < n; i++) {
    if (!grads[i]) continue;
    const tg_backend *b = tg__backend(fn, grads[i]->storage->device);
    tg_status st = b ? b->copy(grads[i], scaled[i]) : tg_last_error();
    if (st != TG_OK) return st; /* a device error, not memory */
    tg__bump_version(grads[i]);
  }
  return TG_OK;
}

tg_status tg_clip_grad_norm(int n_params, tg_tensor *const *params, double max_norm,
                            double norm_type, double *total_norm) {
  tg_status st = check_args(n_params, params, max_norm, norm_type);
  if (st != TG_OK) return st;
  if (total_norm) *total_norm = 0;
  if (n_params == 0) return TG_OK;
  /* grads, then their scaled values (scale_grads), then scratch for the norms */
  tg_tensor **grads = tg__host_calloc((size_t)n_params * 3, sizeof *grads);
  if (!grads) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
  bool any = false;
  for (int i = 0; i < n_params; i++) {
    tg_tensor *g = tg_grad(params[i]);
    grads[i] = g && tg_numel(g) > 0 ? g : NULL; /* an empty gradient adds nothing */
    any = any || grads[i];
  }
  double total = 0;
  tg_no_grad_begin();
  tg_scope scope = tg_scope_begin();
  if (any) {
    tg_tensor *norm = total_norm_of(n_params, grads, norm_type, grads + 2 * n_params);
    st = norm ? tg_item(norm, &total) : tg_last_error();
    double coef = st == TG_OK ? clip_coefficient(total, norm->dtype, max_norm) : 1.0;
    if (st == TG_OK && coef != 1.0) st = scale_grads(n_params, grads, coef);
  }
  tg_scope_end(scope);
  tg_no_grad_end();
  tg__host_free(grads);
  if (st != TG_OK) return st;
  if (total_norm) *total_norm = total;
  return TG_OK;
}
