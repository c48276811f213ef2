/* Post-accumulate grad hooks (tg/autograd.h): registration here, the calls in engine.c
 * (hook_table). The list lives in the tensor (tensor_impl.h) so that it dies with it. */
#include "hooks.h"

#include <limits.h>

#include "node.h"
#include "tensor/check.h"
#include "tensor/checked.h"

tg_status tg_register_post_accumulate_grad_hook(tg_tensor *leaf, tg_grad_hook_fn fn, void *user,
                                                int *handle) {
  const char *name = "tg_register_post_accumulate_grad_hook";
  if (handle) *handle = 0;
  if (!tg__check_arg(name, "leaf", leaf)) return tg_last_error();
  if (!fn) return tg_set_error(TG_ERR_ARGUMENT, "%s: fn is NULL", name);
  if (leaf->grad_fn)
    return tg_set_error(TG_ERR_STATE,
                        "%s: leaf is the output of %s, not a leaf: only a leaf's .grad is "
                        "accumulated",
                        name, leaf->grad_fn->ctx.op->name);
  tg_grad_hooks *h = leaf->post_accumulate_hooks;
  if (h && h->last_id == INT_MAX)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: this tensor has run out of hook numbers", name);
  if (!h || h->count == h->capacity) {
    /* The count stays below INT_MAX (the ids do), so the capacity may stop there. */
    int cap = !h ? 2 : h->capacity > INT_MAX / 2 ? INT_MAX : h->capacity * 2;
    int64_t bytes;
    tg_grad_hooks *grown = NULL;
    if (!tg__mul_ovf((int64_t)sizeof grown->items[0], cap, &bytes) &&
        !tg__add_ovf(bytes, (int64_t)sizeof *grown, &bytes))
      grown = tg__host_realloc(h, (size_t)bytes);
    if (!grown) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory for %d hooks", name, cap);
    if (!h) grown->count = grown->last_id = 0;
    grown->capacity = cap;
    leaf->post_accumulate_hooks = h = grown;
  }
  h->items[h->count++] = (tg_grad_hook){.fn = fn, .user = user, .id = ++h->last_id};
  if (handle) *handle = h->last_id;
  return TG_OK;
}

tg_status tg_remove_post_accumulate_grad_hook(tg_tensor *leaf, int handle) {
  const char *name = "tg_remove_post_accumulate_grad_hook";
  if (!tg__check_arg(name, "leaf", leaf)) return tg_last_error();
  tg_grad_hooks *h = leaf->post_accumulate_hooks;
  for (int i = 0; h && i < h->count; i++) {
    if (h->items[i].id != handle) continue;
    for (int j = i + 1; j < h->count; j++) h->items[j - 1] = h->items[j];
    h->count--;
    return TG_OK;
  }
  return tg_set_error(TG_ERR_ARGUMENT, "%s: the tensor has no hook %d", name, handle);
}

bool tg__has_post_accumulate_hooks(const tg_tensor *leaf) {
  return leaf && leaf->post_accumulate_hooks && leaf->post_accumulate_hooks->count > 0;
}

tg_status tg__run_post_accumulate_hooks(tg_tensor *leaf, bool grad_mode) {
  bool was = tg_set_grad_enabled(grad_mode);
  tg_status st = TG_OK;
  /* By index, re-reading the list after each call: a hook that removes itself (or another)
   * shifts the ones after it down, and must neither make us skip the next one nor read past
   * the end. */
  for (int i = 0; st == TG_OK;) {
    const tg_grad_hooks *h = leaf->post_accumulate_hooks;
    if (!h || i >= h->count) break;
    const tg_grad_hook hook = h->items[i];
    tg_scope scope;
    st = tg__scope_open(&scope);
    if (st != TG_OK) break;
    st = hook.fn(hook.user, leaf);
    if (st != TG_OK && tg_last_error() == TG_OK)
      st = tg_set_error(st, "a post-accumulate grad hook failed (status %s) without a message",
                        tg_status_name(st));
    tg_scope_end(scope);
    h = leaf->post_accumulate_hooks;
    if (h && i < h->count && h->items[i].id == hook.id) i++; /* else slot i holds the next */
  }
  tg_set_grad_enabled(was);
  return st;
}
