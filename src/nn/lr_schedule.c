/* Learning-rate schedules (tg/optim.h): torch.optim.lr_scheduler's StepLR and LambdaLR, and
 * karpathy/llm.c's / nanoGPT's cosine with linear warmup. Each lr is a closed form of the step and
 * the group's base lr, so jumping to a step (a resumed run) gives the lrs of the run that
 * never stopped. */
#include <math.h>

#include "nn/optimizer_impl.h"
#include "tensor/host_memory.h"
#include "tg/optim.h"

typedef enum schedule_kind { SCHED_STEP, SCHED_COSINE_WARMUP, SCHED_LAMBDA } schedule_kind;

struct tg_lr_scheduler {
  schedule_kind kind;
  tg_optimizer *opt; /* borrowed */
  int n_groups;      /* the optimizer's groups when the scheduler was made */
  double *base_lrs;  /* each group's lr then */
  double *next;      /* the lrs being computed, before any is set */
  int64_t step;
  double last_lr; /* group 0's, as last set */
  int64_t step_size;
  double gamma;
  int64_t warmup_steps, total_steps;
  double min_lr;
  double (*fn)(int64_t step, void *user);
  void *user;
};

static const double pi = 3.14159265358979323846;

/* Group g's lr at step s, or an error (a bad fn result). */
static tg_status lr_at(const char *where, const tg_lr_scheduler *s, int g, int64_t step,
                       double *lr) {
  const double base = s->base_lrs[g];
  switch (s->kind) {
  case SCHED_STEP:
    *lr = base * pow(s->gamma, (double)(step / s->step_size));
    return TG_OK;
  case SCHED_COSINE_WARMUP:
    if (step < s->warmup_steps) {
      *lr = base * (double)(step + 1) / (double)s->warmup_steps;
    } else if (step >= s->total_steps) {
      *lr = s->min_lr;
    } else {
      double r = (double)(step - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps);
      *lr = s->min_lr + 0.5 * (1.0 + cos(pi * r)) * (base - s->min_lr);
    }
    return TG_OK;
  case SCHED_LAMBDA: {
    double f = s->fn(step, s->user);
    if (!(f >= 0 && isfinite(f)))
      return tg_set_error(TG_ERR_ARGUMENT,
                          "%s: the lr function returned %g at step %lld (a factor must be finite "
                          "and >= 0)",
                          where, f, (long long)step);
    *lr = base * f;
    return TG_OK;
  }
  }
  return tg_set_error(TG_ERR_ARGUMENT, "%s: unknown schedule", where);
}

/* Sets every group's lr for `step`, all or nothing. */
static tg_status apply(const char *where, tg_lr_scheduler *s, int64_t step) {
  if (s->opt->n_groups != s->n_groups)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: the optimizer has %d parameter groups but had %d when the scheduler "
                        "was made (make the scheduler after adding the groups)",
                        where, s->opt->n_groups, s->n_groups);
  for (int g = 0; g < s->n_groups; g++) { /* fn is called once per group and step */
    tg_status st = lr_at(where, s, g, step, &s->next[g]);
    if (st != TG_OK) return st;
  }
  for (int g = 0; g < s->n_groups; g++) s->opt->groups[g].lr = s->next[g];
  s->step = step;
  s->last_lr = s->opt->groups[0].lr;
  return TG_OK;
}

static tg_lr_scheduler *scheduler_new(const char *fn, tg_optimizer *opt, tg_lr_scheduler init) {
  tg_lr_scheduler *s = tg__host_calloc(1, sizeof *s);
  /* base lrs, then next; an optimizer has at least one group */
  double *base = s ? tg__host_calloc((size_t)opt->n_groups * 2, sizeof *base) : NULL;
  if (!base) {
    tg__host_free(s);
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
    return NULL;
  }
  *s = init;
  s->opt = opt;
  s->n_groups = opt->n_groups;
  s->base_lrs = base;
  s->next = base + s->n_groups;
  for (int g = 0; g < s->n_groups; g++) base[g] = opt->groups[g].lr;
  if (apply(fn, s, 0) != TG_OK) { /* PyTorch's constructor sets the step-0 lr */
    tg_lr_scheduler_free(s);
    return NULL;
  }
  return s;
}

tg_lr_scheduler *tg_lr_step_new(tg_optimizer *opt, int64_t step_size, double gamma) {
  static const char fn[] = "tg_lr_step_new";
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "%s: opt is NULL", fn), NULL;
  if (step_size < 1)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: step_size (%lld) must be >= 1", fn,
                        (long long)step_size),
           NULL;
  if (!(gamma > 0 && isfinite(gamma)))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: gamma (%g) must be finite and > 0", fn, gamma), NULL;
  return scheduler_new(
      fn, opt, (tg_lr_scheduler){.kind = SCHED_STEP, .step_size = step_size, .gamma = gamma});
}

tg_lr_scheduler *tg_lr_cosine_warmup_new(tg_optimizer *opt, int64_t warmup_steps,
                                         int64_t total_steps, double min_lr) {
  static const char fn[] = "tg_lr_cosine_warmup_new";
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "%s: opt is NULL", fn), NULL;
  if (warmup_steps < 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: warmup_steps (%lld) must be >= 0", fn,
                        (long long)warmup_steps),
           NULL;
  if (total_steps < 1 || total_steps < warmup_steps)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: total_steps (%lld) must be >= 1 and >= warmup_steps (%lld)", fn,
                        (long long)total_steps, (long long)warmup_steps),
           NULL;
  if (!(min_lr >= 0 && isfinite(min_lr)))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: min_lr (%g) must be finite and >= 0", fn, min_lr),
           NULL;
  for (int g = 0; g < opt->n_groups; g++)
    if (min_lr > opt->groups[g].lr)
      return tg_set_error(TG_ERR_ARGUMENT, "%s: min_lr (%g) is above group %d's lr (%g)", fn,
                          min_lr, g, opt->groups[g].lr),
             NULL;
  return scheduler_new(fn, opt,
                       (tg_lr_scheduler){.kind = SCHED_COSINE_WARMUP,
                                         .warmup_steps = warmup_steps,
                                         .total_steps = total_steps,
                                         .min_lr = min_lr});
}

tg_lr_scheduler *tg_lr_lambda_new(tg_optimizer *opt, double (*fn_)(int64_t step, void *user),
                                  void *user) {
  static const char fn[] = "tg_lr_lambda_new";
  if (!opt) return tg_set_error(TG_ERR_ARGUMENT, "%s: opt is NULL", fn), NULL;
  if (!fn_) return tg_set_error(TG_ERR_ARGUMENT, "%s: fn is NULL", fn), NULL;
  return scheduler_new(fn, opt, (tg_lr_scheduler){.kind = SCHED_LAMBDA, .fn = fn_, .user = user});
}

tg_status tg_lr_scheduler_step(tg_lr_scheduler *s) {
  static const char fn[] = "tg_lr_scheduler_step";
  if (!s) return tg_set_error(TG_ERR_ARGUMENT, "%s: s is NULL", fn);
  if (s->step == INT64_MAX) return tg_set_error(TG_ERR_ARGUMENT, "%s: step count overflow", fn);
  return apply(fn, s, s->step + 1);
}

tg_status tg_lr_scheduler_set_step(tg_lr_scheduler *s, int64_t step) {
  static const char fn[] = "tg_lr_scheduler_set_step";
  if (!s) return tg_set_error(TG_ERR_ARGUMENT, "%s: s is NULL", fn);
  if (step < 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: step (%lld) must be >= 0", fn, (long long)step);
  return apply(fn, s, step);
}

int64_t tg_lr_scheduler_get_step(const tg_lr_scheduler *s) {
  if (!s) return tg_set_error(TG_ERR_ARGUMENT, "tg_lr_scheduler_get_step: s is NULL"), -1;
  return s->step;
}

double tg_lr_scheduler_last_lr(const tg_lr_scheduler *s) {
  if (!s) return tg_set_error(TG_ERR_ARGUMENT, "tg_lr_scheduler_last_lr: s is NULL"), NAN;
  return s->last_lr;
}

void tg_lr_scheduler_free(tg_lr_scheduler *s) {
  if (!s) return;
  tg__host_free(s->base_lrs);
  tg__host_free(s);
}
