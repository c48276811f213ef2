/* Optimizers: SGD (momentum, dampening, Nesterov, weight decay) and Adam, with
 * torch.optim's update rules. Updates are written with tg's in-place ops inside a no-grad
 * region, so they run on any device and bump the parameters' version counters (a graph
 * that saved a parameter before the step refuses to backward through it afterwards). */
#include <math.h>
#include <stdlib.h>

#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/nn.h"

typedef enum optimizer_kind { OPT_SGD, OPT_ADAM } optimizer_kind;

struct tg_optimizer {
  optimizer_kind kind;
  int n;
  tg_tensor **params; /* owned references */
  tg_tensor **state1; /* SGD: momentum buffers (made at the first step); Adam: first moments */
  tg_tensor **state2; /* Adam: second moments */
  tg_sgd_options sgd;
  tg_adam_options adam;
  int64_t *steps; /* updates made to each parameter (Adam's bias correction) */
};

void tg_optimizer_free(tg_optimizer *opt) {
  if (!opt) return;
  for (int i = 0; i < opt->n; i++) {
    if (opt->params) tg_release(opt->params[i]);
    if (opt->state1) tg_release(opt->state1[i]);
    if (opt->state2) tg_release(opt->state2[i]);
  }
  tg__host_free(opt->params);
  tg__host_free(opt->state1);
  tg__host_free(opt->state2);
  tg__host_free(opt->steps);
  tg__host_free(opt);
}

static tg_optimizer *optimizer_new(const char *op, optimizer_kind kind, int n,
                                   tg_tensor *const *params) {
  if (n < 1 || !params) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: needs at least one parameter (got %d)", op, n);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (!params[i]) {
      tg_set_error(TG_ERR_ARGUMENT, "%s: parameter %d is NULL", op, i);
      return NULL;
    }
    if (!tg_dtype_is_floating(params[i]->dtype) || !params[i]->requires_grad ||
        params[i]->grad_fn) {
      tg_set_error(TG_ERR_ARGUMENT,
                   "%s: parameter %d must be a floating leaf tensor that requires grad", op, i);
      return NULL;
    }
  }
  tg_optimizer *opt = tg__host_calloc(1, sizeof *opt);
  if (opt) {
    opt->kind = kind;
    opt->params = tg__host_calloc((size_t)n, sizeof *opt->params);
    opt->state1 = tg__host_calloc((size_t)n, sizeof *opt->state1);
    opt->state2 = tg__host_calloc((size_t)n, sizeof *opt->state2);
    opt->steps = tg__host_calloc((size_t)n, sizeof *opt->steps);
  }
  if (!opt || !opt->params || !opt->state1 || !opt->state2 || !opt->steps) {
    tg_optimizer_free(opt);
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  opt->n = n;
  for (int i = 0; i < n; i++) opt->params[i] = tg_retain(params[i]);
  return opt;
}

tg_optimizer *tg_sgd_new(int n_params, tg_tensor *const *params, tg_sgd_options o) {
  if (!(o.lr > 0) || o.momentum < 0 || o.weight_decay < 0 || o.dampening < 0) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "tg_sgd_new: lr (%g) must be > 0; momentum (%g), dampening (%g) and "
                 "weight_decay (%g) >= 0",
                 o.lr, o.momentum, o.dampening, o.weight_decay);
    return NULL;
  }
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_sgd_new: nesterov needs momentum > 0 and dampening 0");
    return NULL;
  }
  tg_optimizer *opt = optimizer_new("tg_sgd_new", OPT_SGD, n_params, params);
  if (opt) opt->sgd = o;
  return opt;
}

tg_optimizer *tg_adam_new(int n_params, tg_tensor *const *params, tg_adam_options o) {
  if (o.lr == 0) o.lr = 1e-3;
  if (o.beta1 == 0) o.beta1 = 0.9;
  if (o.beta2 == 0) o.beta2 = 0.999;
  if (o.eps == 0) o.eps = 1e-8;
  if (!(o.lr > 0) || !(o.beta1 > 0 && o.beta1 < 1) || !(o.beta2 > 0 && o.beta2 < 1) ||
      !(o.eps > 0) || o.weight_decay < 0) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "tg_adam_new: need lr > 0 (%g), betas in (0, 1) (%g, %g), eps > 0 (%g), "
                 "weight_decay >= 0 (%g)",
                 o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
    return NULL;
  }
  tg_optimizer *opt = optimizer_new("tg_adam_new", OPT_ADAM, n_params, params);
  if (!opt) return NULL;
  opt->adam = o;
  tg_scope_begin();
  for (int i = 0; i < opt->n; i++) {
    opt->state1[i] = tg_keep(tg_zeros_like(opt->params[i]));
    opt->state2[i] = tg_keep(tg_zeros_like(opt->params[i]));
  }
  tg_scope_end();
  for (int i = 0; i < opt->n; i++) {
    if (!opt->state1[i] || !opt->state2[i]) {
      tg_optimizer_free(opt);
      return NULL;
    }
  }
  return opt;
}

/* One parameter's SGD update (torch.optim.SGD). */
static tg_status sgd_update(tg_optimizer *opt, int i, tg_tensor *p, const tg_tensor *g) {
  const tg_sgd_options *o = &opt->sgd;
  if (o->weight_decay != 0) g = tg_add_scaled(g, p, o->weight_decay);
  if (o->momentum != 0) {
    tg_tensor *buf = opt->state1[i];
    if (!buf) {
      buf = opt->state1[i] = tg_keep(tg_clone(g));
      if (!buf) return tg_last_error();
    } else if (tg_mul_scalar_(buf, o->momentum) != TG_OK ||
               tg_add_scaled_(buf, g, 1.0 - o->dampening) != TG_OK) {
      return tg_last_error();
    }
    g = o->nesterov ? tg_add_scaled(g, buf, o->momentum) : buf;
  }
  if (!g) return tg_last_error();
  return tg_add_scaled_(p, g, -o->lr);
}

/* One parameter's Adam update (torch.optim.Adam without amsgrad). */
static tg_status adam_update(tg_optimizer *opt, int i, tg_tensor *p, const tg_tensor *g) {
  const tg_adam_options *o = &opt->adam;
  tg_tensor *m = opt->state1[i], *v = opt->state2[i];
  if (o->weight_decay != 0) g = tg_add_scaled(g, p, o->weight_decay);
  if (!g || tg_mul_scalar_(m, o->beta1) != TG_OK || tg_add_scaled_(m, g, 1.0 - o->beta1) != TG_OK ||
      tg_mul_scalar_(v, o->beta2) != TG_OK ||
      tg_add_scaled_(v, tg_mul(g, g), 1.0 - o->beta2) != TG_OK)
    return tg_last_error();
  const double t = (double)opt->steps[i];
  const double bias1 = 1.0 - pow(o->beta1, t), bias2 = 1.0 - pow(o->beta2, t);
  tg_tensor *denom = tg_add_scalar(tg_div_scalar(tg_sqrt(v), sqrt(bias2)), o->eps);
  return tg_add_scaled_(p, tg_div(m, denom), -o->lr / bias1);
}

tg_status tg_optimizer_step(tg_optimizer *opt) {
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "tg_optimizer_step: opt is NULL");
  tg_status st = TG_OK;
  tg_no_grad_begin();
  for (int i = 0; i < opt->n && st == TG_OK; i++) {
    tg_tensor *p = opt->params[i], *g = tg_grad(p);
    if (!g) continue;
    opt->steps[i]++;
    tg_scope_begin();
    st = opt->kind == OPT_SGD ? sgd_update(opt, i, p, g) : adam_update(opt, i, p, g);
    tg_scope_end();
  }
  tg_no_grad_end();
  return st;
}

tg_status tg_optimizer_zero_grad(tg_optimizer *opt) {
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "tg_optimizer_zero_grad: opt is NULL");
  for (int i = 0; i < opt->n; i++) {
    tg_status st = tg_zero_grad(opt->params[i]);
    if (st != TG_OK) return st;
  }
  return TG_OK;
}
