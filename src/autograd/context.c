/* The context of one op call: what forward leaves for backward. */
#include "node.h"
#include "tensor/host_memory.h"

int tg_ctx_num_inputs(const tg_ctx *ctx) { return ctx ? ctx->n_inputs : 0; }
int tg_ctx_num_outputs(const tg_ctx *ctx) { return ctx ? ctx->n_outputs : 0; }

static int output_index(const tg_ctx *ctx, const tg_tensor *t) {
  /* The target of an in-place op becomes its output 0 (and would hold the node). */
  if (ctx->inplace_target && t == ctx->inplace_target) return 0;
  if (!ctx->forward_outputs) return -1;
  for (int j = 0; j < ctx->n_outputs; j++)
    if (ctx->forward_outputs[j] == t) return j;
  return -1;
}

tg_status tg_ctx_save_for_backward(tg_ctx *ctx, int n, const tg_tensor *const *tensors) {
  if (!ctx) return tg_set_error(TG_ERR_ARGUMENT, "tg_ctx_save_for_backward: ctx is NULL");
  if (n < 0 || (n > 0 && !tensors))
    return tg_set_error(TG_ERR_ARGUMENT, "tg_ctx_save_for_backward: %d tensors at NULL", n);
  for (int i = 0; i < n; i++)
    if (!tensors[i])
      return tg_set_error(TG_ERR_ARGUMENT, "tg_ctx_save_for_backward: tensor %d is NULL", i);
  if (!ctx->node) return TG_OK; /* not recorded: nothing will run backward */
  tg_saved *grown = tg__host_realloc(ctx->saved, sizeof *grown * (size_t)(ctx->n_saved + n));
  if (!grown) return tg_set_error(TG_ERR_MEMORY, "tg_ctx_save_for_backward: out of memory");
  ctx->saved = grown;
  for (int i = 0; i < n; i++) {
    const tg_tensor *t = tensors[i];
    int out = output_index(ctx, t);
    /* An output would hold this node through its grad_fn: save a detached alias instead. */
    tg_tensor *data = out >= 0 ? tg__alias_raw(t) : tg_retain(t);
    if (!data) return tg_last_error();
    ctx->saved[ctx->n_saved++] = (tg_saved){data, tg_version(t), out};
  }
  return TG_OK;
}

int tg_ctx_num_saved(const tg_ctx *ctx) { return ctx ? ctx->n_saved : 0; }

tg_tensor *tg_ctx_saved(tg_ctx *ctx, int index) {
  if (!ctx) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_ctx_saved: ctx is NULL");
    return NULL;
  }
  const char *op = ctx->op ? ctx->op->name : "?";
  if (ctx->released) {
    tg_set_error(TG_ERR_STATE,
                 "%s: trying to backward through the graph a second time (its saved tensors "
                 "were freed); pass retain_graph to the first backward",
                 op);
    return NULL;
  }
  if (index < 0 || index >= ctx->n_saved) {
    tg_set_error(TG_ERR_INDEX, "%s: saved tensor %d requested but %d were saved", op, index,
                 ctx->n_saved);
    return NULL;
  }
  tg_saved *s = &ctx->saved[index];
  uint64_t now = tg_version(s->data);
  if (now != s->version) {
    tg_set_error(TG_ERR_STATE,
                 "%s: saved tensor %d %s was modified by an in-place operation (version %llu, "
                 "saved at version %llu)",
                 op, index, tg__sizes_str(s->data), (unsigned long long)now,
                 (unsigned long long)s->version);
    return NULL;
  }
  /* Outputs the node never differentiates (marked, or not floating) come back as constants. */
  if (s->output_nr < 0 || !ctx->node || ctx->non_differentiable[s->output_nr] ||
      !tg_dtype_is_floating(s->data->dtype))
    return tg__scoped(tg_retain(s->data));
  /* An output: hand back an alias that is again that output of this node, so a backward
   * written with tg ops differentiates through it under create_graph. */
  tg_tensor *alias = tg__alias_raw(s->data);
  if (!alias) return NULL;
  alias->requires_grad = true;
  tg__node_retain(ctx->node);
  alias->grad_fn = ctx->node;
  alias->output_nr = s->output_nr;
  return tg__scoped(alias);
}

double tg_ctx_scalar(const tg_ctx *ctx, int index) {
  if (!ctx || index < 0 || index >= TG_CTX_MAX_SCALARS) return 0.0;
  return ctx->scalars[index];
}

int tg_ctx_num_scalars(const tg_ctx *ctx) { return ctx ? ctx->n_scalars : 0; }

tg_status tg_ctx_set_scalar(tg_ctx *ctx, int index, double value) {
  if (!ctx) return tg_set_error(TG_ERR_ARGUMENT, "tg_ctx_set_scalar: ctx is NULL");
  if (index < 0 || index >= TG_CTX_MAX_SCALARS)
    return tg_set_error(TG_ERR_INDEX, "tg_ctx_set_scalar: index %d is outside 0..%d", index,
                        TG_CTX_MAX_SCALARS - 1);
  ctx->scalars[index] = value;
  if (index >= ctx->n_scalars) ctx->n_scalars = index + 1;
  return TG_OK;
}

int64_t tg_ctx_int(const tg_ctx *ctx, int index) {
  if (!ctx || index < 0 || index >= ctx->n_ints) return 0;
  return ctx->ints[index];
}

int tg_ctx_num_ints(const tg_ctx *ctx) { return ctx ? ctx->n_ints : 0; }

tg_status tg_ctx_set_int(tg_ctx *ctx, int index, int64_t value) {
  if (!ctx) return tg_set_error(TG_ERR_ARGUMENT, "tg_ctx_set_int: ctx is NULL");
  if (index < 0 || index >= TG_CTX_MAX_INTS)
    return tg_set_error(TG_ERR_INDEX, "tg_ctx_set_int: index %d is outside 0..%d", index,
                        TG_CTX_MAX_INTS - 1);
  ctx->ints[index] = value;
  if (index >= ctx->n_ints) ctx->n_ints = index + 1;
  return TG_OK;
}

void tg_ctx_set_data(tg_ctx *ctx, void *data, void (*free_fn)(void *)) {
  if (!ctx) return;
  if (ctx->data && ctx->free_data) ctx->free_data(ctx->data);
  ctx->data = data;
  ctx->free_data = free_fn;
}

void *tg_ctx_data(const tg_ctx *ctx) { return ctx ? ctx->data : NULL; }

bool tg_ctx_needs_input_grad(const tg_ctx *ctx, int index) {
  return ctx && index >= 0 && index < ctx->n_inputs && ctx->needs_input_grad[index];
}

static const tg_meta *input_meta(const tg_ctx *ctx, int index) {
  if (!ctx || index < 0 || index >= ctx->n_inputs) return NULL;
  return &ctx->inputs[index];
}
int tg_ctx_input_ndim(const tg_ctx *ctx, int index) {
  const tg_meta *m = input_meta(ctx, index);
  return m ? m->ndim : 0;
}
const int64_t *tg_ctx_input_sizes(const tg_ctx *ctx, int index) {
  const tg_meta *m = input_meta(ctx, index);
  return m ? m->sizes : NULL;
}
tg_dtype tg_ctx_input_dtype(const tg_ctx *ctx, int index) {
  const tg_meta *m = input_meta(ctx, index);
  return m ? m->dtype : TG_F32;
}
tg_device tg_ctx_input_device(const tg_ctx *ctx, int index) {
  const tg_meta *m = input_meta(ctx, index);
  return m ? m->device : TG_DEVICE_CPU;
}

tg_status tg_ctx_mark_non_differentiable(tg_ctx *ctx, const tg_tensor *output) {
  if (!ctx) return tg_set_error(TG_ERR_ARGUMENT, "tg_ctx_mark_non_differentiable: ctx is NULL");
  int j = output_index(ctx, output);
  if (j < 0)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "tg_ctx_mark_non_differentiable: the tensor is not an output of %s",
                        ctx->op ? ctx->op->name : "?");
  ctx->non_differentiable[j] = true;
  return TG_OK;
}

void tg_ctx_set_materialize_grads(tg_ctx *ctx, bool materialize) {
  if (ctx) ctx->materialize_grads = materialize;
}

tg_status tg__ctx_adopt_saved_outputs(tg_ctx *ctx, tg_tensor *const *outputs) {
  for (int i = 0; i < ctx->n_saved; i++) {
    tg_saved *s = &ctx->saved[i];
    for (int j = 0; j < ctx->n_outputs && s->output_nr < 0; j++) {
      if (s->data != outputs[j]) continue;
      tg_tensor *alias = tg__alias_raw(s->data);
      if (!alias) return tg_last_error(); /* the op fails: its outputs never get the node */
      tg_release(s->data);
      s->data = alias;
      s->output_nr = j;
    }
  }
  return TG_OK;
}

void tg__ctx_saved_target_written(tg_ctx *ctx) {
  for (int i = 0; i < ctx->n_saved; i++)
    if (ctx->saved[i].output_nr == 0) ctx->saved[i].version = tg_version(ctx->saved[i].data);
}

void tg__ctx_release_saved(tg_ctx *ctx) {
  for (int i = 0; i < ctx->n_saved; i++) tg_release(ctx->saved[i].data);
  tg__host_free(ctx->saved);
  ctx->saved = NULL;
  ctx->n_saved = 0;
  if (ctx->data && ctx->free_data) ctx->free_data(ctx->data);
  ctx->data = NULL;
  ctx->free_data = NULL;
}
