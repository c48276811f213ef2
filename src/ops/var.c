/* tg_var and tg_std (include/tg/norm.h), composed from the reduction family's sum (so they
 * run on every device and are differentiable twice): var = sum((x - mean)^2) / max(0,
 * N - correction), with mean = sum(x) / N over the same dims. */
#include <math.h>
#include <stdio.h>

#include "ops/norm_internal.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/norm.h"
#include "tg/ops.h"

tg_tensor *tg__sum_dims(const tg_tensor *x, int n, const int *dims, bool keepdim) {
  if (n == 0) return tg_view(x, x->ndim, x->sizes);
  tg_tensor *t = tg_sum_dim(x, dims[n - 1], keepdim);
  for (int k = n - 2; k >= 0 && t; k--) t = tg_sum_dim(t, dims[k], keepdim);
  return t;
}

/* The reduced dims of x, ascending, in *reduced (n_reduced of them), and how many elements
 * each result sums (*count); false with the error on a bad list. */
static bool reduced_dims(const char *api, const tg_tensor *x, int n_dims, const int *dims,
                         int *reduced, int *n_reduced, int64_t *count) {
  if (!tg__check(n_dims >= 0 && (n_dims == 0 || dims), TG_ERR_ARGUMENT, api,
                 "dims: n_dims %d with dims %s", n_dims, dims ? "set" : "NULL"))
    return false;
  bool picked[TG_MAX_DIMS] = {false};
  const int ndim = x->ndim, lo = ndim ? -ndim : -1, hi = ndim ? ndim - 1 : 0;
  for (int k = 0; k < n_dims; k++) {
    if (!tg__check(dims[k] >= lo && dims[k] <= hi, TG_ERR_ARGUMENT, api,
                   "dim %d is out of range for x %s (expected to be in range of [%d, %d])", dims[k],
                   tg__sizes_str(x), lo, hi))
      return false;
    const int d = dims[k] < 0 ? dims[k] + (ndim ? ndim : 1) : dims[k];
    if (!tg__check(!picked[d], TG_ERR_ARGUMENT, api,
                   "dim %d appears multiple times in the list of dims", d))
      return false;
    picked[d] = true;
  }
  *n_reduced = 0;
  *count = 1;
  for (int d = 0; d < ndim; d++)
    if (n_dims == 0 || picked[d]) {
      reduced[(*n_reduced)++] = d;
      *count *= x->sizes[d];
    }
  return true;
}

static tg_tensor *variance(const char *api, const tg_tensor *x, int n_dims, const int *dims,
                           double correction, bool keepdim) {
  if (!tg__check_arg(api, "x", x) ||
      !tg__check(tg_dtype_is_floating(x->dtype), TG_ERR_DTYPE, api,
                 "x is %s; std and var only support floating point dtypes (F32, F64)",
                 tg_dtype_name(x->dtype)) ||
      !tg__check(correction >= 0, TG_ERR_ARGUMENT, api, "correction %g must be non-negative",
                 correction))
    return NULL;
  int reduced[TG_MAX_DIMS], n_reduced;
  int64_t count;
  if (!reduced_dims(api, x, n_dims, dims, reduced, &n_reduced, &count)) return NULL;
  const double divisor = fmax(0.0, (double)count - correction);
  tg_scope s = tg_scope_begin();
  tg_tensor *mean = tg_div_scalar(tg__sum_dims(x, n_reduced, reduced, true), (double)count);
  tg_tensor *dev = tg_sub(x, mean);
  tg_tensor *var =
      tg_div_scalar(tg__sum_dims(tg_mul(dev, dev), n_reduced, reduced, keepdim), divisor);
  var = tg_scope_escape(s, var);
  tg_scope_end(s);
  return var;
}

tg_tensor *tg_var(const tg_tensor *x, int n_dims, const int *dims, double correction,
                  bool keepdim) {
  return variance("tg_var", x, n_dims, dims, correction, keepdim);
}

/* sqrt(var), with the gradient 0 where var is 0 (PyTorch's std_backward masks it there):
 * the square root is taken of 1 at those places, and its result is not selected. */
tg_tensor *tg_std(const tg_tensor *x, int n_dims, const int *dims, double correction,
                  bool keepdim) {
  tg_tensor *var = variance("tg_std", x, n_dims, dims, correction, keepdim);
  if (!var) return NULL;
  tg_scope s = tg_scope_begin();
  tg_tensor *zero = tg_eq(var, tg_zeros_like(var));
  tg_tensor *root = tg_sqrt(tg_where(zero, tg_ones_like(var), var));
  tg_tensor *std = tg_scope_escape(s, tg_where(zero, tg_zeros_like(var), root));
  tg_scope_end(s);
  return std;
}
