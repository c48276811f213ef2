/* tg — training tools (issue 25): AdamW, parameter groups, gradient clipping and
 * learning-rate schedules, with torch.optim's semantics. docs/training.md shows a training
 * loop with all of them and gradient accumulation over micro-batches. */
#ifndef TG_OPTIM_H
#define TG_OPTIM_H

#include "nn.h"
TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* ---- AdamW: torch.optim.AdamW (decoupled weight decay) ----
 * Each step, for a parameter p with gradient g, in PyTorch's order:
 *   p *= 1 - lr * weight_decay
 *   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g   (t = the step count)
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * Zero means zero in these options (unlike tg_adam_options): start from tg_adamw_defaults().
 * NULL with TG_ERR_ARGUMENT naming the option for lr <= 0, a beta outside [0, 1), eps < 0,
 * weight_decay < 0 or anything not finite. No amsgrad. The state is Adam's
 * ("<param>.exp_avg", ".exp_avg_sq", ".step": tg_optimizer_state_dict). */
typedef struct tg_adamw_options {
  double lr;           /* 1e-3 */
  double beta1;        /* 0.9 */
  double beta2;        /* 0.999 */
  double eps;          /* 1e-8 */
  double weight_decay; /* 1e-2 */
} tg_adamw_options;
tg_adamw_options tg_adamw_defaults(void); /* PyTorch's defaults, above */
tg_optimizer *tg_adamw_new(int n_params, tg_tensor *const *params, tg_adamw_options opts);
/* Over every parameter of m, by dotted name (as tg_adam_for). */
tg_optimizer *tg_adamw_for(const tg_module *m, tg_adamw_options opts);
/* Over every parameter of m in two groups, as karpathy/llm.c and nanoGPT do: group 0 holds the
 * parameters of 2 or more dims (matmul weights, embeddings) with opts.weight_decay, group 1
 * the others (biases, norm weights) with weight_decay 0; each in m's order, by dotted name.
 * A group may be empty (a module without biases). Both take opts.lr. */
tg_optimizer *tg_adamw_for_decay_split(const tg_module *m, tg_adamw_options opts);

/* ---- parameter groups (torch.optim's param_groups) ----
 * Every optimizer (SGD, Adam, AdamW) starts with group 0: the parameters it was made with and
 * its options' lr and weight_decay. add_param_group appends a group whose lr and
 * weight_decay override the constructor's (NAN: inherit the constructor's value, not a value
 * set later; tg_param_group_inherit() gives both NAN). A group's weight_decay is what the
 * optimizer's kind does with it (SGD and Adam: the L2 term added to the gradient; AdamW: the
 * decoupled decay). The other options (betas, momentum, ...) are the optimizer's.
 * The new parameters are numbered after the existing ones in the state names of an optimizer
 * made from a list ("3", "4", ...) as torch's state_dict numbers them. Checked
 * (TG_ERR_ARGUMENT naming the argument): each parameter a floating leaf that requires grad, in
 * no other group and only once; lr > 0 (0 is refused: a field left out of a designated
 * initializer would silently freeze the group; use NAN to inherit); weight_decay >= 0; a
 * new state name ("3") that a parameter of the optimizer already has (a module's parameter
 * named "3") is refused. n_params may be 0 (an empty group). All or nothing. A checkpoint keeps the
 * state per parameter name, not the groups: an optimizer loading one is built with the same groups
 * (and a schedule sets the lrs again: tg_lr_scheduler_set_step). */
typedef struct tg_param_group_options {
  double lr;           /* NAN: inherit */
  double weight_decay; /* NAN: inherit */
} tg_param_group_options;
tg_param_group_options tg_param_group_inherit(void); /* {NAN, NAN} */
tg_status tg_optimizer_add_param_group(tg_optimizer *opt, int n_params, tg_tensor *const *params,
                                       tg_param_group_options g);
int tg_optimizer_num_groups(const tg_optimizer *opt); /* -1 with the error for NULL */
/* Group g's lr, weight_decay and number of parameters; NAN (or -1) with TG_ERR_ARGUMENT for
 * a NULL opt or g out of range. tg_optimizer_lr is group 0's lr, and tg_optimizer_set_lr sets
 * every group's. */
double tg_optimizer_group_lr(const tg_optimizer *opt, int g);
double tg_optimizer_group_weight_decay(const tg_optimizer *opt, int g);
int tg_optimizer_group_size(const tg_optimizer *opt, int g);
/* Sets group g's lr; TG_ERR_ARGUMENT unless it is finite and > 0, or g out of range. */
tg_status tg_optimizer_set_group_lr(tg_optimizer *opt, int g, double lr);

/* ---- torch.nn.utils.clip_grad_norm_ ----
 * The norm of all the gradients of params together (as if concatenated into one vector) is
 * written to *total_norm (may be NULL): the norm before clipping. Every gradient is then
 * scaled in place by min(1, max_norm / (total_norm + 1e-6)), PyTorch's formula (a norm
 * above max_norm lands just under it; where the factor is 1 nothing is written).
 * norm_type: any p > 0 ((sum |g|^p)^(1/p)), 2 the usual, INFINITY (max |g|). Parameters
 * without a gradient are skipped; none at all gives *total_norm 0. Each gradient's norm is
 * reduced on its own device, those of a device combined there, and the total read back once
 * (one host sync per device: one for a model on one GPU). Computed in the gradients' dtype
 * (F32 gradients: an F32 norm and coefficient, as PyTorch's). A non-finite total norm is
 * not an error (PyTorch's default error_if_nonfinite=False): the coefficient is NaN for a
 * NaN norm and 0 for an infinite one, and the gradients are multiplied by it as PyTorch's
 * are (NaN everywhere, or 0 where finite and NaN where infinite); check *total_norm with
 * isfinite to skip such a step. TG_ERR_ARGUMENT for max_norm < 0 or NaN, norm_type <= 0
 * or NaN (PyTorch's 0 and -inf quirks are not offered), n_params < 0, NULL params; on error
 * no gradient changes. */
tg_status tg_clip_grad_norm(int n_params, tg_tensor *const *params, double max_norm,
                            double norm_type, double *total_norm);

/* ---- learning-rate schedules (torch.optim.lr_scheduler) ----
 * A scheduler borrows its optimizer (which must outlive it) and remembers each group's lr at
 * construction as its base lr (PyTorch's initial_lr). Step counting is PyTorch's: making the
 * scheduler sets the step-0 lr, and each tg_lr_scheduler_step advances one step and sets
 * that step's lr, so the loop is: forward, backward, tg_optimizer_step,
 * tg_lr_scheduler_step. For each group with base lr b, at step s:
 *   step:   b * gamma^floor(s / step_size)           (StepLR, its closed form)
 *   lambda: b * fn(s, user)                          (LambdaLR: fn is a factor)
 *   cosine with linear warmup (karpathy/llm.c's and nanoGPT's get_lr; no PyTorch class):
 *     s < warmup_steps:  b * (s + 1) / warmup_steps
 *     s >= total_steps:  min_lr
 *     otherwise:         min_lr + 0.5 * (1 + cos(pi * r)) * (b - min_lr),
 *                        r = (s - warmup_steps) / (total_steps - warmup_steps)
 * Constructors: NULL with TG_ERR_ARGUMENT naming the argument for a NULL optimizer or fn,
 * step_size < 1, gamma not finite and > 0, warmup_steps < 0, total_steps < warmup_steps or
 * < 1, min_lr not finite, < 0 or above a group's base lr. An fn result that is not finite
 * and >= 0 is TG_ERR_ARGUMENT from the call that asked for it (changing no lr). A schedule
 * may set lr 0 (min_lr 0, or fn giving 0), which tg_optimizer_set_lr refuses. Groups added
 * to the optimizer after the scheduler was made are refused by the next step
 * (TG_ERR_ARGUMENT). */
typedef struct tg_lr_scheduler tg_lr_scheduler;
tg_lr_scheduler *tg_lr_step_new(tg_optimizer *opt, int64_t step_size, double gamma);
tg_lr_scheduler *tg_lr_cosine_warmup_new(tg_optimizer *opt, int64_t warmup_steps,
                                         int64_t total_steps, double min_lr);
tg_lr_scheduler *tg_lr_lambda_new(tg_optimizer *opt, double (*fn)(int64_t step, void *user),
                                  void *user);
tg_status tg_lr_scheduler_step(tg_lr_scheduler *s);
/* Jumps to step (>= 0) and sets its lrs: resuming from a checkpoint's step. */
tg_status tg_lr_scheduler_set_step(tg_lr_scheduler *s, int64_t step);
int64_t tg_lr_scheduler_get_step(const tg_lr_scheduler *s); /* -1 with the error for NULL */
/* The lr the scheduler last set in group 0 (PyTorch's get_last_lr()[0]); NAN for NULL. */
double tg_lr_scheduler_last_lr(const tg_lr_scheduler *s);
void tg_lr_scheduler_free(tg_lr_scheduler *s); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
