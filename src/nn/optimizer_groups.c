/* Parameter groups (tg/optim.h): torch.optim's param_groups. Every optimizer is built group
 * by group, the constructors' parameters being group 0; each group carries its own lr and
 * weight decay, read by the updates (optimizer.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/optimizer_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/optim.h"

tg_param_group_options tg_param_group_inherit(void) {
  return (tg_param_group_options){.lr = NAN, .weight_decay = NAN};
}

static int index_of(const tg_optimizer *opt, const tg_tensor *t) {
  for (int i = 0; i < opt->n; i++)
    if (opt->params[i] == t) return i;
  return -1;
}

static tg_status check_params(const char *fn, const tg_optimizer *opt, int n,
                              tg_tensor *const *params) {
  for (int i = 0; i < n; i++) {
    const tg_tensor *t = params[i];
    if (!t) return tg_set_error(TG_ERR_ARGUMENT, "%s: params[%d] is NULL", fn, i);
    if (!(tg_dtype_is_floating(t->dtype) && t->requires_grad && !t->grad_fn))
      return tg_set_error(TG_ERR_ARGUMENT,
                          "%s: params[%d] must be a floating leaf tensor that requires grad", fn,
                          i);
    int j = index_of(opt, t);
    if (j >= 0)
      return tg_set_error(TG_ERR_ARGUMENT,
                          "%s: params[%d] is already in group %d of the optimizer (as \"%s\"): a "
                          "parameter belongs to one group",
                          fn, i, opt->group_of[j], opt->names[j]);
  }
  return TG_OK;
}

/* The arrays of an optimizer of `total` parameters and `n_groups` groups, before they
 * replace the optimizer's. */
typedef struct grown {
  tg_tensor **params, **state1, **state2;
  char **names;
  int64_t *steps;
  int *group_of;
  optimizer_group *groups;
} grown;

/* Frees what grow made, releasing the entries from..total (the old ones are the
 * optimizer's). */
static void grown_free(grown *g, int from, int total) {
  for (int i = from; i < total; i++) {
    if (g->names) tg__host_free(g->names[i]);
    if (g->state1) tg_release(g->state1[i]);
    if (g->state2) tg_release(g->state2[i]);
  }
  tg__host_free(g->params);
  tg__host_free(g->state1);
  tg__host_free(g->state2);
  tg__host_free(g->names);
  tg__host_free(g->steps);
  tg__host_free(g->group_of);
  tg__host_free(g->groups);
}

static bool grow(grown *g, int total, int n_groups) {
  size_t n = total > 0 ? (size_t)total : 1;
  g->params = tg__host_calloc(n, sizeof *g->params);
  g->state1 = tg__host_calloc(n, sizeof *g->state1);
  g->state2 = tg__host_calloc(n, sizeof *g->state2);
  g->names = tg__host_calloc(n, sizeof *g->names);
  g->steps = tg__host_calloc(n, sizeof *g->steps);
  g->group_of = tg__host_calloc(n, sizeof *g->group_of);
  g->groups = tg__host_calloc((size_t)n_groups, sizeof *g->groups);
  return g->params && g->state1 && g->state2 && g->names && g->steps && g->group_of && g->groups;
}

/* Names and (Adam, AdamW) zero moments for the new entries old..total-1. */
static tg_status fill_new(const char *fn, const tg_optimizer *opt, grown *g, int old, int n,
                          tg_tensor *const *params, char *const *names) {
  for (int i = 0; i < n; i++) {
    char index[16];
    snprintf(index, sizeof index, "%d", old + i);
    const char *name = names ? names[i] : index;
    for (int j = 0; j < old + i; j++) /* the state is keyed by name */
      if (strcmp(j < old ? opt->names[j] : g->names[j], name) == 0)
        return tg_set_error(TG_ERR_ARGUMENT,
                            "%s: a parameter named \"%s\" is already in the optimizer (state is "
                            "kept by name)",
                            fn, name);
    if (!(g->names[old + i] = tg__host_strdup(name)))
      return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
  }
  if (!tg__opt_adam_like(opt->kind)) return TG_OK;
  tg_status st = TG_OK;
  tg_scope scope = tg_scope_begin();
  for (int i = 0; i < n && st == TG_OK; i++) {
    tg_tensor *m = tg_zeros_like(params[i]), *v = m ? tg_zeros_like(params[i]) : NULL;
    if (!v) {
      st = tg_last_error();
      break;
    }
    g->state1[old + i] = tg_retain(m);
    g->state2[old + i] = tg_retain(v);
  }
  tg_scope_end(scope);
  return st;
}

tg_status tg__optimizer_append_group(const char *fn, tg_optimizer *opt, int n,
                                     tg_tensor *const *params, char *const *names, double lr,
                                     double weight_decay) {
  tg_status st = check_params(fn, opt, n, params);
  if (st != TG_OK) return st;
  const int old = opt->n, total = old + n, n_groups = opt->n_groups + 1;
  grown g = {0};
  if (!grow(&g, total, n_groups)) {
    grown_free(&g, total, total);
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
  }
  if ((st = fill_new(fn, opt, &g, old, n, params, names)) != TG_OK) {
    grown_free(&g, old, total);
    return st;
  }
  /* Nothing fails from here: the old entries move over, the new ones are added. */
  for (int i = 0; i < old; i++) {
    g.params[i] = opt->params[i];
    g.state1[i] = opt->state1[i];
    g.state2[i] = opt->state2[i];
    g.names[i] = opt->names[i];
    g.steps[i] = opt->steps[i];
    g.group_of[i] = opt->group_of[i];
  }
  for (int i = 0; i < n; i++) {
    g.params[old + i] = tg_retain(params[i]);
    g.group_of[old + i] = n_groups - 1;
  }
  if (opt->n_groups > 0) memcpy(g.groups, opt->groups, (size_t)opt->n_groups * sizeof *g.groups);
  g.groups[n_groups - 1] = (optimizer_group){.lr = lr, .weight_decay = weight_decay, .size = n};
  tg_optimizer old_arrays = *opt;
  opt->params = g.params;
  opt->state1 = g.state1;
  opt->state2 = g.state2;
  opt->names = g.names;
  opt->steps = g.steps;
  opt->group_of = g.group_of;
  opt->groups = g.groups;
  opt->n = total;
  opt->n_groups = n_groups;
  tg__host_free(old_arrays.params);
  tg__host_free(old_arrays.state1);
  tg__host_free(old_arrays.state2);
  tg__host_free(old_arrays.names);
  tg__host_free(old_arrays.steps);
  tg__host_free(old_arrays.group_of);
  tg__host_free(old_arrays.groups);
  return TG_OK;
}

static const char add_fn[] = "tg_optimizer_add_param_group";

tg_status tg_optimizer_add_param_group(tg_optimizer *opt, int n_params, tg_tensor *const *params,
                                       tg_param_group_options g) {
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "%s: opt is NULL", add_fn);
  if (n_params < 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: n_params is %d (must be >= 0)", add_fn, n_params);
  if (n_params > 0 && !params)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: params is NULL (n_params is %d)", add_fn, n_params);
  const double lr0 = opt->kind == OPT_SGD ? opt->sgd.lr : opt->adam.lr;
  const double wd0 = opt->kind == OPT_SGD ? opt->sgd.weight_decay : opt->adam.weight_decay;
  const double lr = isnan(g.lr) ? lr0 : g.lr, wd = isnan(g.weight_decay) ? wd0 : g.weight_decay;
  if (!(lr > 0 && isfinite(lr)))
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: g.lr (%g) must be finite and > 0, or NAN to inherit the "
                        "optimizer's (%g)",
                        add_fn, g.lr, lr0);
  if (!(wd >= 0 && isfinite(wd)))
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: g.weight_decay (%g) must be finite and >= 0, or NAN to inherit the "
                        "optimizer's (%g)",
                        add_fn, g.weight_decay, wd0);
  for (int i = 0; i < n_params; i++)
    for (int j = 0; j < i; j++)
      if (params[i] && params[i] == params[j])
        return tg_set_error(TG_ERR_ARGUMENT, "%s: params[%d] is params[%d] again", add_fn, i, j);
  return tg__optimizer_append_group(add_fn, opt, n_params, params, NULL, lr, wd);
}

/* ---- accessors ---- */

static bool group_ok(const char *fn, const tg_optimizer *opt, int g) {
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "%s: opt is NULL", fn), false;
  if (g < 0 || g >= opt->n_groups)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: group %d out of range (the optimizer has %d)", fn, g,
                        opt->n_groups),
           false;
  return true;
}

int tg_optimizer_num_groups(const tg_optimizer *opt) {
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "tg_optimizer_num_groups: opt is NULL"), -1;
  return opt->n_groups;
}

double tg_optimizer_group_lr(const tg_optimizer *opt, int g) {
  return group_ok("tg_optimizer_group_lr", opt, g) ? opt->groups[g].lr : NAN;
}

double tg_optimizer_group_weight_decay(const tg_optimizer *opt, int g) {
  return group_ok("tg_optimizer_group_weight_decay", opt, g) ? opt->groups[g].weight_decay : NAN;
}

int tg_optimizer_group_size(const tg_optimizer *opt, int g) {
  return group_ok("tg_optimizer_group_size", opt, g) ? opt->groups[g].size : -1;
}

tg_status tg_optimizer_set_group_lr(tg_optimizer *opt, int g, double lr) {
  static const char fn[] = "tg_optimizer_set_group_lr";
  if (!group_ok(fn, opt, g)) return tg_last_error();
  if (!(lr > 0 && isfinite(lr)))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: lr (%g) must be finite and > 0", fn, lr);
  opt->groups[g].lr = lr;
  return TG_OK;
}
