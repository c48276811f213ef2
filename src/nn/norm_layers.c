/* The normalization layers (torch.nn.BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm) over the
 * ops of tg/norm.h. BatchNorm keeps its running statistics as buffers and reads the module's
 * train/eval flag; LayerNorm and GroupNorm are the same in both. */
#include <math.h>

#include "nn/module_impl.h"
#include "nn/params.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"
#include "tg/nn.h"
#include "tg/norm.h"

typedef struct norm_layer {
  tg_module module;
  /* borrowed from module; NULL where absent */
  tg_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
  double eps, momentum; /* as given: 0 is zero (the ops need TG_NORM_ZERO for it) */
  int batch_ndim[2];    /* BatchNorm: the input dims it takes (1d: 2 or 3; 2d: 4) */
  int64_t num_groups;   /* GroupNorm */
  int n_normalized;     /* LayerNorm */
  int64_t normalized_shape[TG_MAX_DIMS];
} norm_layer;

/* An option for the ops of tg/norm.h, where 0 means the default and zero is TG_NORM_ZERO. */
static double op_value(double v) { return v == 0 ? TG_NORM_ZERO : v; }

static void norm_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, norm_layer, module));
}

/* torch.nn.modules.batchnorm._BatchNorm.forward: batch statistics in training (and in
 * evaluation without running statistics), the running ones in evaluation; in training with
 * running statistics they are updated and num_batches_tracked counts the batch. */
static tg_tensor *batch_norm_forward(tg_module *m, const tg_tensor *x) {
  const norm_layer *b = TG_MODULE_CONTAINER(m, norm_layer, module);
  const char *type = tg_module_type(m);
  if (!tg__check(x->ndim == b->batch_ndim[0] || x->ndim == b->batch_ndim[1], TG_ERR_SHAPE,
                 "tg_module_forward", "%s: expected %s input (got %dD input of sizes %s)", type,
                 b->batch_ndim[0] == b->batch_ndim[1] ? "4D" : "2D or 3D", x->ndim,
                 tg__sizes_str(x)))
    return NULL;
  bool training = tg_module_is_training(m);
  bool tracking = b->running_mean != NULL;
  double momentum = b->momentum, batches = 0;
  if (training && tracking) {
    if (tg_item(b->num_batches_tracked, &batches) != TG_OK) return NULL;
    batches += 1;
  }
  /* PyTorch's None: the cumulative average's weight; unused (any valid value) when no
   * statistics are updated */
  if (momentum == TG_BATCH_NORM_CUMULATIVE) momentum = batches > 0 ? 1.0 / batches : 0.1;
  tg_batch_norm_options opts = {
      .training = training || !tracking, .momentum = op_value(momentum), .eps = op_value(b->eps)};
  /* running statistics go to the op when it normalizes by them or updates them */
  tg_tensor *y = tg_batch_norm(x, tracking ? b->running_mean : NULL,
                               tracking ? b->running_var : NULL, b->weight, b->bias, opts);
  if (y && training && tracking) {
    /* counted after the op succeeded: a refused batch changes no state */
    tg_no_grad_begin();
    tg_status st = tg_fill_(b->num_batches_tracked, batches);
    tg_no_grad_end();
    if (st != TG_OK) return NULL;
  }
  return y;
}

static tg_tensor *layer_norm_forward(tg_module *m, const tg_tensor *x) {
  const norm_layer *l = TG_MODULE_CONTAINER(m, norm_layer, module);
  return tg_layer_norm(x, l->n_normalized, l->normalized_shape, l->weight, l->bias,
                       (tg_layer_norm_options){.eps = op_value(l->eps)});
}

static tg_tensor *group_norm_forward(tg_module *m, const tg_tensor *x) {
  const norm_layer *g = TG_MODULE_CONTAINER(m, norm_layer, module);
  return tg_group_norm(x, g->num_groups, g->weight, g->bias,
                       (tg_group_norm_options){.eps = op_value(g->eps)});
}

static const tg__module_class batch_norm1d_class = {"batch_norm1d", norm_destroy,
                                                    batch_norm_forward};
static const tg__module_class batch_norm2d_class = {"batch_norm2d", norm_destroy,
                                                    batch_norm_forward};
static const tg__module_class layer_norm_class = {"layer_norm", norm_destroy, layer_norm_forward};
static const tg__module_class group_norm_class = {"group_norm", norm_destroy, group_norm_forward};

static bool check_eps_and_dtype(const char *fn, double eps, tg_options opts) {
  return tg__check(eps >= 0 && isfinite(eps), TG_ERR_ARGUMENT, fn,
                   "eps (%g) must be finite and >= 0", eps) &&
         tg__check(tg_dtype_is_floating(opts.dtype), TG_ERR_DTYPE, fn,
                   "dtype %s is not floating (F32 or F64)", tg_dtype_name(opts.dtype));
}

static norm_layer *norm_alloc(const char *fn, const tg__module_class *cls, double eps) {
  norm_layer *l = tg__host_calloc(1, sizeof *l);
  if (!l) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
    return NULL;
  }
  tg__module_init(&l->module, cls);
  l->eps = eps;
  return l;
}

/* Registers t (one reference, released here) under name, as a parameter or a buffer; *slot
 * borrows it. A NULL t is the failure that made it. */
static tg_status add_entry(norm_layer *l, tg_status st, const char *name, tg_tensor *t,
                           bool parameter, tg_tensor **slot) {
  if (st == TG_OK && !t) st = tg_last_error();
  if (st == TG_OK)
    st = parameter ? tg_module_register_parameter(&l->module, name, t)
                   : tg_module_register_buffer(&l->module, name, t);
  if (st == TG_OK) *slot = t;
  tg_release(t); /* the module holds its own reference */
  return st;
}

/* weight ones and bias zeros of the given sizes, PyTorch's reset_parameters. */
static tg_status add_affine(norm_layer *l, int ndim, const int64_t *sizes, tg_options opts) {
  tg_status st = add_entry(l, TG_OK, "weight", tg__nn_constant_param(ndim, sizes, 1.0, opts), true,
                           &l->weight);
  return st == TG_OK ? add_entry(l, st, "bias", tg__nn_constant_param(ndim, sizes, 0.0, opts), true,
                                 &l->bias)
                     : st;
}

static tg_module *finish(const char *fn, norm_layer *l, tg_status st) {
  if (st == TG_OK) return &l->module;
  tg_module_free(&l->module);
  tg__error_prefix(fn);
  return NULL;
}

static tg_module *batch_norm_new(const char *fn, const tg__module_class *cls, int ndim_a,
                                 int ndim_b, int64_t num_features, double eps, double momentum,
                                 bool affine, bool track_running_stats, tg_options opts) {
  if (!tg__check(num_features >= 1, TG_ERR_ARGUMENT, fn, "num_features (%lld) must be >= 1",
                 (long long)num_features) ||
      !check_eps_and_dtype(fn, eps, opts) ||
      !tg__check(momentum == TG_BATCH_NORM_CUMULATIVE || (momentum >= 0 && momentum <= 1),
                 TG_ERR_ARGUMENT, fn,
                 "momentum (%g) must be in [0, 1], or TG_BATCH_NORM_CUMULATIVE for a cumulative "
                 "average (PyTorch's None)",
                 momentum))
    return NULL;
  norm_layer *l = norm_alloc(fn, cls, eps);
  if (!l) return NULL;
  l->momentum = momentum;
  l->batch_ndim[0] = ndim_a;
  l->batch_ndim[1] = ndim_b;
  tg_status st = affine ? add_affine(l, TG_SHAPE(num_features), opts) : TG_OK;
  if (track_running_stats) {
    opts.requires_grad = false;
    st = add_entry(l, st, "running_mean", tg__nn_constant_buffer(TG_SHAPE(num_features), 0, opts),
                   false, &l->running_mean);
    st = add_entry(l, st, "running_var", tg__nn_constant_buffer(TG_SHAPE(num_features), 1, opts),
                   false, &l->running_var);
    tg_options count = {.dtype = TG_I64, .device = opts.device};
    st = add_entry(l, st, "num_batches_tracked", tg__nn_constant_buffer(0, NULL, 0, count), false,
                   &l->num_batches_tracked);
  }
  return finish(fn, l, st);
}

tg_module *tg_batch_norm1d_layer_new(int64_t num_features, double eps, double momentum, bool affine,
                                     bool track_running_stats, tg_options opts) {
  return batch_norm_new("tg_batch_norm1d_layer_new", &batch_norm1d_class, 2, 3, num_features, eps,
                        momentum, affine, track_running_stats, opts);
}

tg_module *tg_batch_norm2d_layer_new(int64_t num_features, double eps, double momentum, bool affine,
                                     bool track_running_stats, tg_options opts) {
  return batch_norm_new("tg_batch_norm2d_layer_new", &batch_norm2d_class, 4, 4, num_features, eps,
                        momentum, affine, track_running_stats, opts);
}

tg_module *tg_layer_norm_layer_new(int n_normalized, const int64_t *normalized_shape, double eps,
                                   bool elementwise_affine, tg_options opts) {
  static const char *fn = "tg_layer_norm_layer_new";
  if (!tg__check(n_normalized >= 1 && n_normalized <= TG_MAX_DIMS, TG_ERR_ARGUMENT, fn,
                 "n_normalized (%d) must be in [1, %d]", n_normalized, TG_MAX_DIMS) ||
      !tg__check_not_null(fn, "normalized_shape", normalized_shape))
    return NULL;
  for (int i = 0; i < n_normalized; i++)
    if (!tg__check(normalized_shape[i] >= 1, TG_ERR_ARGUMENT, fn,
                   "normalized_shape[%d] (%lld) must be >= 1", i, (long long)normalized_shape[i]))
      return NULL;
  if (!check_eps_and_dtype(fn, eps, opts)) return NULL;
  norm_layer *l = norm_alloc(fn, &layer_norm_class, eps);
  if (!l) return NULL;
  l->n_normalized = n_normalized;
  for (int i = 0; i < n_normalized; i++) l->normalized_shape[i] = normalized_shape[i];
  tg_status st = elementwise_affine ? add_affine(l, n_normalized, normalized_shape, opts) : TG_OK;
  return finish(fn, l, st);
}

tg_module *tg_group_norm_layer_new(int64_t num_groups, int64_t num_channels, double eps,
                                   bool affine, tg_options opts) {
  static const char *fn = "tg_group_norm_layer_new";
  if (!tg__check(num_groups >= 1 && num_channels >= 1, TG_ERR_ARGUMENT, fn,
                 "num_groups (%lld) and num_channels (%lld) must be >= 1", (long long)num_groups,
                 (long long)num_channels) ||
      !tg__check(num_channels % num_groups == 0, TG_ERR_ARGUMENT, fn,
                 "num_channels (%lld) must be divisible by num_groups (%lld)",
                 (long long)num_channels, (long long)num_groups) ||
      !check_eps_and_dtype(fn, eps, opts))
    return NULL;
  norm_layer *l = norm_alloc(fn, &group_norm_class, eps);
  if (!l) return NULL;
  l->num_groups = num_groups;
  tg_status st = affine ? add_affine(l, TG_SHAPE(num_channels), opts) : TG_OK;
  return finish(fn, l, st);
}
