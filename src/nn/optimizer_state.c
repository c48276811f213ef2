/* An optimizer's state by name (tg/nn.h): "<param>.momentum_buffer" for SGD, "<param>.exp_avg",
 * "<param>.exp_avg_sq" and "<param>.step" for Adam and AdamW, like torch.optim's state_dict. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/optimizer_impl.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"

enum { EXP_AVG, EXP_AVG_SQ, STEP, N_WHAT };
static const char *const adam_what[N_WHAT] = {"exp_avg", "exp_avg_sq", "step"};
static const char *const sgd_what = "momentum_buffer";

/* Adam's exact integer range for a double step count. */
#define MAX_STEP 9007199254740992.0

static tg_status put(tg_tensor_dict *d, const char *param, const char *what, const tg_tensor *t) {
  char name[TG_TENSOR_NAME_MAX + 1];
  int len = snprintf(name, sizeof name, "%s.%s", param, what);
  if (len < 0 || (size_t)len >= sizeof name)
    return tg_set_error(TG_ERR_ARGUMENT, "the state name %.64s....%s is longer than %d bytes",
                        param, what, TG_TENSOR_NAME_MAX);
  return tg_tensor_dict_set(d, name, t);
}

tg_tensor_dict *tg_optimizer_state_dict(const tg_optimizer *opt) {
  if (!opt) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_optimizer_state_dict: opt is NULL");
    return NULL;
  }
  tg_tensor_dict *d = tg_tensor_dict_new();
  tg_status st = d ? TG_OK : tg_last_error();
  tg_scope s = tg_scope_begin();
  for (int i = 0; i < opt->n && st == TG_OK; i++) {
    const char *p = opt->names[i];
    if (opt->kind == OPT_SGD) {
      if (opt->state1[i]) st = put(d, p, sgd_what, opt->state1[i]);
    } else if (opt->steps[i] > 0) {
      tg_tensor *step = tg_full(0, NULL, (double)opt->steps[i], (tg_options){.dtype = TG_F64});
      st = put(d, p, adam_what[EXP_AVG], opt->state1[i]);
      if (st == TG_OK) st = put(d, p, adam_what[EXP_AVG_SQ], opt->state2[i]);
      if (st == TG_OK) st = step ? put(d, p, adam_what[STEP], step) : tg_last_error();
    }
  }
  tg_scope_end(s);
  if (st != TG_OK) {
    tg_tensor_dict_free(d);
    tg__error_prefix("tg_optimizer_state_dict");
    return NULL;
  }
  return d;
}

/* ---- loading ---- */

static const char *const fn = "tg_optimizer_load_state_dict";

/* Which parameter and which kind of state `name` is; false (with the error) when it is not
 * state of this optimizer. */
static bool parse_name(const tg_optimizer *opt, const char *name, int *param, int *what) {
  for (int i = 0; i < opt->n; i++) {
    size_t len = strlen(opt->names[i]);
    if (strncmp(name, opt->names[i], len) != 0 || name[len] != '.') continue;
    const char *rest = name + len + 1;
    if (opt->kind == OPT_SGD && strcmp(rest, sgd_what) == 0 && opt->sgd.momentum != 0) {
      *param = i;
      *what = 0;
      return true;
    }
    for (int w = 0; tg__opt_adam_like(opt->kind) && w < N_WHAT; w++) {
      if (strcmp(rest, adam_what[w]) == 0) {
        *param = i;
        *what = w;
        return true;
      }
    }
  }
  const char *expected = tg__opt_adam_like(opt->kind) ? "<param>.exp_avg, .exp_avg_sq or .step"
                         : opt->sgd.momentum != 0     ? "<param>.momentum_buffer"
                                                  : "nothing (SGD without momentum has no state)";
  tg_set_error(TG_ERR_ARGUMENT, "%s: \"%s\" is not state of this %s optimizer; it takes %s", fn,
               name,
               opt->kind == OPT_ADAMW  ? "AdamW"
               : opt->kind == OPT_ADAM ? "Adam"
                                       : "SGD",
               expected);
  return false;
}

static tg_status check_like_param(const tg_optimizer *opt, int i, const char *name,
                                  const tg_tensor *t) {
  const tg_tensor *p = opt->params[i];
  if (t->dtype != p->dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: \"%s\" is %s but parameter \"%s\" is %s", fn, name,
                        tg_dtype_name(t->dtype), opt->names[i], tg_dtype_name(p->dtype));
  if (!tg__same_sizes(t, p))
    return tg_set_error(TG_ERR_SHAPE, "%s: \"%s\" is %s but parameter \"%s\" is %s", fn, name,
                        tg__sizes_str(t), opt->names[i], tg__sizes_str(p));
  return TG_OK;
}

/* A step count: one 0-dim number, a whole number in 1..2^53. */
static tg_status read_step(const char *name, const tg_tensor *t, int64_t *out) {
  if (t->ndim != 0)
    return tg_set_error(TG_ERR_SHAPE, "%s: \"%s\" is %s but a step count is 0-dim", fn, name,
                        tg__sizes_str(t));
  double v;
  tg_status st = tg_item(t, &v);
  if (st != TG_OK) return st;
  if (!(v >= 1 && v <= MAX_STEP) || v != floor(v))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: \"%s\" is %g but a step count is a whole number >= 1",
                        fn, name, v);
  *out = (int64_t)v;
  return TG_OK;
}

/* found[3 * i + what]: the state entries of parameter i; checks each and that Adam's come as
 * a whole. */
static tg_status check_all(const tg_optimizer *opt, const tg_tensor_dict *state,
                           const tg_tensor **found, int64_t *steps) {
  for (int k = 0; k < tg_tensor_dict_size(state); k++) {
    const char *name = tg_tensor_dict_name(state, k);
    const tg_tensor *t = tg_tensor_dict_at(state, k);
    int i, w;
    if (!parse_name(opt, name, &i, &w)) return tg_last_error();
    tg_status st = tg__opt_adam_like(opt->kind) && w == STEP ? read_step(name, t, &steps[i])
                                                             : check_like_param(opt, i, name, t);
    if (st != TG_OK) return st;
    found[N_WHAT * i + w] = t;
  }
  for (int i = 0; tg__opt_adam_like(opt->kind) && i < opt->n; i++) {
    const tg_tensor **f = &found[N_WHAT * i];
    int have = (f[0] != NULL) + (f[1] != NULL) + (f[2] != NULL);
    if (have == 0 || have == N_WHAT) continue;
    int absent = !f[0] ? 0 : !f[1] ? 1 : 2;
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: parameter \"%s\" has Adam state without \"%s.%s\" (it needs "
                        "exp_avg, exp_avg_sq and step together)",
                        fn, opt->names[i], opt->names[i], adam_what[absent]);
  }
  return TG_OK;
}

/* A copy of src of its own on the parameter's device (or zeros like it when src is NULL,
 * or NULL itself when no state is wanted), in the open scope. */
static tg_status own_copy(const tg_tensor *param, const tg_tensor *src, bool zeros,
                          tg_tensor **out) {
  *out = NULL;
  if (src)
    *out = tg_clone(tg_to_device(src, param->storage->device));
  else if (zeros)
    *out = tg_zeros_like(param);
  else
    return TG_OK;
  return *out ? TG_OK : tg_last_error();
}

struct tg__optimizer_load {
  tg_optimizer *opt;
  tg_tensor **next; /* 2 per parameter: its new state1, state2 (NULL: none); owned */
  int64_t *steps;
};

void tg__optimizer_load_abort(tg__optimizer_load *l) {
  if (!l) return;
  for (int i = 0; l->next && i < 2 * l->opt->n; i++) tg_release(l->next[i]);
  tg__host_free(l->next);
  tg__host_free(l->steps);
  tg__host_free(l);
}

void tg__optimizer_load_commit(tg__optimizer_load *l) {
  tg_optimizer *opt = l->opt;
  for (int i = 0; i < opt->n; i++) { /* reference moves: nothing can fail */
    tg_release(opt->state1[i]);
    tg_release(opt->state2[i]);
    opt->state1[i] = l->next[2 * i];
    opt->state2[i] = l->next[2 * i + 1];
    l->next[2 * i] = l->next[2 * i + 1] = NULL;
    opt->steps[i] = tg__opt_adam_like(opt->kind) ? l->steps[i] : (opt->state1[i] ? 1 : 0);
  }
  tg__optimizer_load_abort(l);
}

tg_status tg__optimizer_load_stage(tg_optimizer *opt, const tg_tensor_dict *state,
                                   tg__optimizer_load **out) {
  *out = NULL;
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "%s: opt is NULL", fn);
  if (!state) return tg_set_error(TG_ERR_ARGUMENT, "%s: state is NULL", fn);
  const int n = opt->n;
  const tg_tensor **found = tg__host_calloc((size_t)n * N_WHAT, sizeof *found);
  tg__optimizer_load *l = tg__host_calloc(1, sizeof *l);
  if (l) {
    l->opt = opt;
    l->steps = tg__host_calloc((size_t)n, sizeof *l->steps);
    l->next = tg__host_calloc((size_t)n * 2, sizeof *l->next);
  }
  if (!found || !l || !l->steps || !l->next) {
    tg__host_free(found);
    tg__optimizer_load_abort(l);
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
  }
  tg_no_grad_begin();
  tg_scope s = tg_scope_begin();
  tg_status st = check_all(opt, state, found, l->steps);
  const bool adam = tg__opt_adam_like(opt->kind);
  for (int i = 0; i < n && st == TG_OK; i++) {
    tg_tensor *a = NULL, *b = NULL;
    st = own_copy(opt->params[i], found[N_WHAT * i + (adam ? EXP_AVG : 0)], adam, &a);
    if (st == TG_OK && adam)
      st = own_copy(opt->params[i], found[N_WHAT * i + EXP_AVG_SQ], true, &b);
    if (st == TG_OK) { /* kept past the scope */
      l->next[2 * i] = a ? tg_retain(a) : NULL;
      l->next[2 * i + 1] = b ? tg_retain(b) : NULL;
    }
  }
  tg_scope_end(s);
  tg_no_grad_end();
  tg__host_free(found);
  if (st != TG_OK) {
    tg__optimizer_load_abort(l);
    tg__error_prefix(fn);
    return st;
  }
  *out = l;
  return TG_OK;
}

tg_status tg_optimizer_load_state_dict(tg_optimizer *opt, const tg_tensor_dict *state) {
  tg__optimizer_load *l;
  tg_status st = tg__optimizer_load_stage(opt, state, &l);
  if (st == TG_OK) tg__optimizer_load_commit(l);
  return st;
}
