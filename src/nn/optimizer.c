/* Optimizers: SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW, with
 * torch.optim's update rules; each parameter takes lr and weight decay from its group
 * (optimizer_groups.c). Updates are computed with tg's ops inside a no-grad region, so
 * they run on any device, and written into the parameters only once all of them are known;
 * writing bumps the parameters' version counters (a graph that saved a parameter before the
 * step refuses to backward through it afterwards). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/module_impl.h"
#include "nn/optimizer_impl.h"
#include "tg/optim.h"
#include "ops/backend.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"

void tg_optimizer_free(tg_optimizer *opt) {
  if (!opt) return;
  for (int i = 0; i < opt->n; i++) {
    tg_release(opt->params[i]);
    tg_release(opt->state1[i]);
    tg_release(opt->state2[i]);
    tg__host_free(opt->names[i]);
  }
  tg__host_free(opt->names);
  tg__host_free(opt->params);
  tg__host_free(opt->state1);
  tg__host_free(opt->state2);
  tg__host_free(opt->steps);
  tg__host_free(opt->group_of);
  tg__host_free(opt->groups);
  tg__host_free(opt);
}

/* An optimizer with no parameters and no group yet. */
static tg_optimizer *optimizer_alloc(const char *op, optimizer_kind kind) {
  tg_optimizer *opt = tg__host_calloc(1, sizeof *opt);
  if (!opt) tg_set_error(TG_ERR_MEMORY, "%s: out of memory", op);
  if (opt) opt->kind = kind;
  return opt;
}

/* names NULL: the parameters' indices. The options' lr and weight_decay become group 0's. */
static tg_optimizer *optimizer_new(const char *op, optimizer_kind kind, int n,
                                   tg_tensor *const *params, char *const *names, double lr,
                                   double weight_decay) {
  if (n < 1) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: needs at least one parameter (n_params is %d)", op, n);
    return NULL;
  }
  if (!params) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: params is NULL (n_params is %d)", op, n);
    return NULL;
  }
  tg_optimizer *opt = optimizer_alloc(op, kind);
  if (opt && tg__optimizer_append_group(op, opt, n, params, names, lr, weight_decay) != TG_OK) {
    tg_optimizer_free(opt);
    return NULL;
  }
  return opt;
}

static tg_optimizer *sgd_new(int n_params, tg_tensor *const *params, char *const *names,
                             tg_sgd_options o) {
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
  tg_optimizer *opt =
      optimizer_new("tg_sgd_new", OPT_SGD, n_params, params, names, o.lr, o.weight_decay);
  if (opt) opt->sgd = o;
  return opt;
}

tg_optimizer *tg_sgd_new(int n_params, tg_tensor *const *params, tg_sgd_options o) {
  return sgd_new(n_params, params, NULL, o);
}

static tg_optimizer *adam_new(int n_params, tg_tensor *const *params, char *const *names,
                              tg_adam_options o) {
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
  tg_optimizer *opt =
      optimizer_new("tg_adam_new", OPT_ADAM, n_params, params, names, o.lr, o.weight_decay);
  if (opt) opt->adam = o;
  return opt;
}

tg_optimizer *tg_adam_new(int n_params, tg_tensor *const *params, tg_adam_options o) {
  return adam_new(n_params, params, NULL, o);
}

tg_adamw_options tg_adamw_defaults(void) {
  return (tg_adamw_options){
      .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2};
}

/* torch.optim.AdamW's checks (lr > 0 here, as tg's other optimizers), each named. */
static bool adamw_options_ok(const char *fn, tg_adamw_options o) {
  const char *bad = !(o.lr > 0 && isfinite(o.lr))      ? "lr must be finite and > 0"
                    : !(o.beta1 >= 0 && o.beta1 < 1)   ? "beta1 must be in [0, 1)"
                    : !(o.beta2 >= 0 && o.beta2 < 1)   ? "beta2 must be in [0, 1)"
                    : !(o.eps >= 0 && isfinite(o.eps)) ? "eps must be finite and >= 0"
                    : !(o.weight_decay >= 0 && isfinite(o.weight_decay)) ? "weight_decay must be "
                                                                           "finite and >= 0"
                                                                         : NULL;
  if (bad)
    tg_set_error(TG_ERR_ARGUMENT,
                 "%s: %s (lr %g, beta1 %g, beta2 %g, eps %g, weight_decay %g; start from "
                 "tg_adamw_defaults())",
                 fn, bad, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  return !bad;
}

static tg_adam_options adam_options_of(tg_adamw_options o) {
  return (tg_adam_options){
      .lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay};
}

static tg_optimizer *adamw_new(const char *fn, int n_params, tg_tensor *const *params,
                               char *const *names, tg_adamw_options o) {
  if (!adamw_options_ok(fn, o)) return NULL;
  tg_optimizer *opt = optimizer_new(fn, OPT_ADAMW, n_params, params, names, o.lr, o.weight_decay);
  if (opt) opt->adam = adam_options_of(o);
  return opt;
}

tg_optimizer *tg_adamw_new(int n_params, tg_tensor *const *params, tg_adamw_options o) {
  return adamw_new("tg_adamw_new", n_params, params, NULL, o);
}

/* Every parameter of m, by dotted name. */
static bool check_for(const char *fn, const tg_module *m) {
  if (!m) return tg_set_error(TG_ERR_ARGUMENT, "%s: m is NULL", fn), false;
  if (m->flat_params.n == 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: the %s module has no parameters", fn,
                        tg_module_type(m)),
           false;
  return true;
}

tg_optimizer *tg_sgd_for(const tg_module *m, tg_sgd_options opts) {
  if (!check_for("tg_sgd_for", m)) return NULL;
  return sgd_new(m->flat_params.n, m->flat_params.tensors, m->flat_params.names, opts);
}

tg_optimizer *tg_adam_for(const tg_module *m, tg_adam_options opts) {
  if (!check_for("tg_adam_for", m)) return NULL;
  return adam_new(m->flat_params.n, m->flat_params.tensors, m->flat_params.names, opts);
}

tg_optimizer *tg_adamw_for(const tg_module *m, tg_adamw_options opts) {
  if (!check_for("tg_adamw_for", m)) return NULL;
  return adamw_new("tg_adamw_for", m->flat_params.n, m->flat_params.tensors, m->flat_params.names,
                   opts);
}

/* Group 0: the parameters of 2 or more dims; group 1: the others, without decay. */
tg_optimizer *tg_adamw_for_decay_split(const tg_module *m, tg_adamw_options opts) {
  static const char fn[] = "tg_adamw_for_decay_split";
  if (!check_for(fn, m) || !adamw_options_ok(fn, opts)) return NULL;
  const int n = m->flat_params.n;
  tg_tensor **params = tg__host_calloc((size_t)n, sizeof *params);
  char **names = tg__host_calloc((size_t)n, sizeof *names);
  tg_optimizer *opt = params && names ? optimizer_alloc(fn, OPT_ADAMW) : NULL;
  if (!params || !names) tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
  tg_status st = opt ? TG_OK : tg_last_error();
  for (int pass = 0; pass < 2 && st == TG_OK; pass++) { /* pass 0: decay; 1: no decay */
    int k = 0;
    for (int i = 0; i < n; i++) {
      if ((m->flat_params.tensors[i]->ndim >= 2) != (pass == 0)) continue;
      params[k] = m->flat_params.tensors[i];
      names[k++] = m->flat_params.names[i];
    }
    st = tg__optimizer_append_group(fn, opt, k, params, names, opts.lr,
                                    pass == 0 ? opts.weight_decay : 0.0);
  }
  tg__host_free(params);
  tg__host_free(names);
  if (st != TG_OK) {
    tg_optimizer_free(opt);
    return NULL;
  }
  opt->adam = adam_options_of(opts);
  return opt;
}

double tg_optimizer_lr(const tg_optimizer *opt) {
  if (!opt) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_optimizer_lr: opt is NULL");
    return 0;
  }
  return opt->groups[0].lr;
}

tg_status tg_optimizer_set_lr(tg_optimizer *opt, double lr) {
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "tg_optimizer_set_lr: opt is NULL");
  if (!(lr > 0) || !isfinite(lr))
    return tg_set_error(TG_ERR_ARGUMENT, "tg_optimizer_set_lr: lr (%g) must be finite and > 0", lr);
  for (int g = 0; g < opt->n_groups; g++) opt->groups[g].lr = lr;
  return TG_OK;
}

/* One parameter's update, computed out of place: the new parameter values and the new
 * state tensors (NULL: unchanged). */
typedef struct update {
  tg_tensor *param, *state1, *state2;
} update;

/* torch.optim.SGD, with the parameter's group's lr and weight decay. */
static tg_status sgd_update(const tg_optimizer *opt, int i, const tg_tensor *g,
                            const optimizer_group *grp, update *u) {
  const tg_sgd_options *o = &opt->sgd;
  tg_tensor *p = opt->params[i];
  if (grp->weight_decay != 0) g = tg_add_scaled(g, p, grp->weight_decay);
  if (g && o->momentum != 0) {
    tg_tensor *buf = opt->state1[i];
    buf = u->state1 =
        buf ? tg_add_scaled(tg_mul_scalar(buf, o->momentum), g, 1.0 - o->dampening) : tg_clone(g);
    g = buf && o->nesterov ? tg_add_scaled(g, buf, o->momentum) : buf;
  }
  u->param = g ? tg_add_scaled(p, g, -grp->lr) : NULL;
  return u->param ? TG_OK : tg_last_error();
}

/* torch.optim.Adam without amsgrad (weight decay: the L2 term in the gradient), or AdamW
 * (the parameter decays first, by 1 - lr * weight_decay). */
static tg_status adam_update(const tg_optimizer *opt, int i, const tg_tensor *g,
                             const optimizer_group *grp, update *u) {
  const tg_adam_options *o = &opt->adam;
  const double lr = grp->lr, wd = grp->weight_decay;
  tg_tensor *p = opt->params[i];
  if (wd != 0 && opt->kind == OPT_ADAMW)
    p = tg_mul_scalar(p, 1.0 - lr * wd);
  else if (wd != 0)
    g = tg_add_scaled(g, p, wd);
  tg_tensor *m = u->state1 =
      tg_add_scaled(tg_mul_scalar(opt->state1[i], o->beta1), g, 1.0 - o->beta1);
  tg_tensor *v = u->state2 =
      tg_add_scaled(tg_mul_scalar(opt->state2[i], o->beta2), tg_mul(g, g), 1.0 - o->beta2);
  const double t = (double)(opt->steps[i] + 1);
  const double bias1 = 1.0 - pow(o->beta1, t), bias2 = 1.0 - pow(o->beta2, t);
  tg_tensor *denom = tg_add_scalar(tg_div_scalar(tg_sqrt(v), sqrt(bias2)), o->eps);
  u->param = tg_add_scaled(p, tg_div(m, denom), -lr / bias1);
  return u->param ? TG_OK : tg_last_error();
}

/* Replaces a state tensor by its new value (a reference move: nothing can fail). */
static void replace_state(tg_tensor **slot, tg_tensor *next) {
  if (!next) return;
  tg_release(*slot);
  *slot = tg_retain(next);
}

/* All or nothing: every update is computed out of place first, and only when all of them
 * exist are they written (a copy into each parameter, which allocates nothing, and a move
 * of the state), so a step that fails, out of memory say, leaves the parameters, the state
 * and the step counts as they were and can simply be retried. */
tg_status tg_optimizer_step(tg_optimizer *opt) {
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "tg_optimizer_step: opt is NULL");
  update *updates = tg__host_calloc((size_t)opt->n, sizeof *updates);
  if (!updates) return tg_set_error(TG_ERR_MEMORY, "tg_optimizer_step: out of memory");
  tg_status st = TG_OK;
  tg_no_grad_begin();
  tg_scope scope = tg_scope_begin();
  for (int i = 0; i < opt->n && st == TG_OK; i++) {
    tg_tensor *g = tg_grad(opt->params[i]);
    if (!g) continue;
    const optimizer_group *grp = &opt->groups[opt->group_of[i]];
    st = opt->kind == OPT_SGD ? sgd_update(opt, i, g, grp, &updates[i])
                              : adam_update(opt, i, g, grp, &updates[i]);
    if (st == TG_OK && !tg__backend("tg_optimizer_step", opt->params[i]->storage->device))
      st = tg_last_error();
  }
  for (int i = 0; i < opt->n && st == TG_OK; i++) {
    update *u = &updates[i];
    if (!u->param) continue;
    tg_tensor *p = opt->params[i];
    st = tg__backend("tg_optimizer_step", p->storage->device)->copy(p, u->param);
    if (st != TG_OK) break; /* a device error, not memory: nothing tg can undo */
    tg__bump_version(p);    /* a graph that saved p refuses to backward through it now */
    replace_state(&opt->state1[i], u->state1);
    replace_state(&opt->state2[i], u->state2);
    opt->steps[i]++;
  }
  tg_scope_end(scope);
  tg_no_grad_end();
  tg__host_free(updates);
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
