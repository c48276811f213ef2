/* The op registry: built-in ops from ops.def plus ops registered at run time. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "autograd/op_refs.h"
#include "registry.h"
#include "tensor/host_memory.h"

/* One entry: the forward on every device type (it runs over the device's drivers and
 * kernels; tg_op_supported says where they exist), the backward, the flags and the sample inputs.
 */
#define TG__BUILTIN(op, nin, nout, bwd, fl)                                                        \
  [TG_OP_ID_##op] = {.name = #op,                                                                  \
                     .n_inputs = nin,                                                              \
                     .n_outputs = nout,                                                            \
                     .forward = TG__ON_EVERY_DEVICE(tg__fwd_##op),                                 \
                     .backward = bwd,                                                              \
                     .flags = (fl) | TG__OP_BUILTIN,                                               \
                     .sample_inputs = tg__samples_##op},
#define TG_OP(name, nin, nout, fl) TG__BUILTIN(name, nin, nout, tg__bwd_##name, fl)
#define TG_OP_NOGRAD(name, nin, nout, fl) TG__BUILTIN(name, nin, nout, NULL, fl)
#define TG_OP_INPLACE_OF(name, base, nin, nout, fl) TG__BUILTIN(name, nin, nout, tg__bwd_##base, fl)
const tg_op_desc tg__builtin_ops[TG_NUM_BUILTIN_OPS] = {
#include "ops/ops.def"
};
#undef TG_OP
#undef TG_OP_NOGRAD
#undef TG_OP_INPLACE_OF
#undef TG__BUILTIN

/* User ops: registered at run time, by tg_op_register or an extension (src/ext/), and
 * unregistered only by unloading that extension. Registry changes are not thread-safe
 * (docs: load extensions while no other thread uses ops). Each descriptor is its own
 * allocation so that pointers handed out stay valid as the table grows. */
static tg_op_desc **user_ops;
static int user_count, user_capacity;

static const tg_op_desc *find(const char *name) {
  for (int i = 0; i < TG_NUM_BUILTIN_OPS; i++)
    if (strcmp(tg__builtin_ops[i].name, name) == 0) return &tg__builtin_ops[i];
  for (int i = 0; i < user_count; i++)
    if (strcmp(user_ops[i]->name, name) == 0) return user_ops[i];
  return NULL;
}

tg_status tg__op_validate(const char *who, const tg_op_desc *desc) {
  if (!desc || !desc->name || !desc->name[0])
    return tg_set_error(TG_ERR_ARGUMENT, "%s: desc or its name is NULL/empty", who);
  bool any_kernel = false;
  for (int d = 0; d < TG_NUM_DEVICE_TYPES; d++) any_kernel |= desc->forward[d] != NULL;
  if (!any_kernel)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: op '%s' has no forward kernel", who, desc->name);
  if (desc->n_inputs < -1 || desc->n_outputs < -1 || desc->n_outputs == 0)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: op '%s' has n_inputs %d, n_outputs %d (need >= -1, outputs != 0)", who,
                        desc->name, desc->n_inputs, desc->n_outputs);
  return TG_OK;
}

static void free_user_op(tg_op_desc *op) {
  if (!op) return;
  tg__host_free((char *)op->name);
  tg__host_free(op);
}

static tg_op_desc *copy_user_op(const tg_op_desc *desc) {
  tg_op_desc *copy = tg__host_malloc(sizeof *copy);
  char *name = tg__host_malloc(strlen(desc->name) + 1);
  if (!copy || !name) {
    tg__host_free(copy);
    tg__host_free(name);
    return NULL;
  }
  strcpy(name, desc->name);
  *copy = *desc;
  copy->name = name;
  /* errors name a user op by its registered name; its tape nodes are counted (op_refs.h) */
  copy->flags = (copy->flags & ~TG__OP_BUILTIN) | TG__OP_TRACKED;
  return copy;
}

static bool grow_user_ops(int extra) {
  if (user_count + extra <= user_capacity) return true;
  int cap = user_capacity ? user_capacity : 8;
  while (cap < user_count + extra) {
    if (cap > INT_MAX / 2) return false;
    cap *= 2;
  }
  tg_op_desc **grown = tg__host_realloc(user_ops, sizeof *grown * (size_t)cap);
  if (!grown) return false;
  user_ops = grown;
  user_capacity = cap;
  return true;
}

/* Frees the user-op table itself once it is empty, so that unloading every extension
 * leaves nothing of the registry allocated. */
static void shrink_if_empty(void) {
  if (user_count > 0) return;
  tg__host_free(user_ops);
  user_ops = NULL;
  user_capacity = 0;
}

tg_status tg__op_register_all(const char *who, int n, const tg_op_desc *const *descs,
                              const tg_op_desc **registered) {
  for (int k = 0; k < n; k++) {
    tg_status st = tg__op_validate(who, descs[k]);
    if (st != TG_OK) return st;
    if (find(descs[k]->name))
      return tg_set_error(TG_ERR_ARGUMENT, "%s: an op named '%s' already exists", who,
                          descs[k]->name);
    for (int j = 0; j < k; j++)
      if (strcmp(descs[j]->name, descs[k]->name) == 0)
        return tg_set_error(TG_ERR_ARGUMENT, "%s: op '%s' is offered twice", who, descs[k]->name);
  }
  if (!grow_user_ops(n)) {
    shrink_if_empty();
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", who);
  }
  /* Everything that can fail happens before the first op becomes visible. */
  int made = 0;
  tg_status st = TG_OK;
  tg_op_desc **copies = tg__host_calloc((size_t)(n > 0 ? n : 1), sizeof *copies);
  if (!copies) st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", who);
  for (; st == TG_OK && made < n; made++) {
    copies[made] = copy_user_op(descs[made]);
    if (!copies[made])
      st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", who);
    else if ((st = tg__op_refs_track(copies[made])) != TG_OK) {
      free_user_op(copies[made]);
      copies[made] = NULL;
    }
  }
  if (st != TG_OK) {
    for (int k = 0; k < n && copies && copies[k]; k++) {
      tg__op_refs_untrack_unused(who, 1, (const tg_op_desc *const *)&copies[k]);
      free_user_op(copies[k]);
    }
    tg__host_free(copies);
    shrink_if_empty();
    return st;
  }
  for (int k = 0; k < n; k++) {
    user_ops[user_count++] = copies[k];
    if (registered) registered[k] = copies[k];
  }
  tg__host_free(copies);
  return TG_OK;
}

tg_status tg__op_unregister_all(const char *who, int n, const tg_op_desc *const *ops) {
  tg_status st = tg__op_refs_untrack_unused(who, n, ops);
  if (st != TG_OK) return st;
  for (int k = 0; k < n; k++)
    for (int i = 0; i < user_count; i++)
      if (user_ops[i] == ops[k]) {
        free_user_op(user_ops[i]);
        memmove(&user_ops[i], &user_ops[i + 1], sizeof *user_ops * (size_t)(user_count - i - 1));
        user_count--;
        break;
      }
  shrink_if_empty();
  return TG_OK;
}

tg_status tg_op_register(const tg_op_desc *desc) {
  return tg__op_register_all("tg_op_register", 1, &desc, NULL);
}

const tg_op_desc *tg_op_lookup(const char *name) {
  if (!name) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_op_lookup: name is NULL");
    return NULL;
  }
  const tg_op_desc *d = find(name);
  if (!d) tg_set_error(TG_ERR_ARGUMENT, "tg_op_lookup: no op named '%s'", name);
  return d;
}

int tg_op_count(void) { return TG_NUM_BUILTIN_OPS + user_count; }

const tg_op_desc *tg_op_at(int index) {
  if (index < 0 || index >= tg_op_count()) {
    tg_set_error(TG_ERR_INDEX, "tg_op_at: index %d is outside 0..%d", index, tg_op_count() - 1);
    return NULL;
  }
  return index < TG_NUM_BUILTIN_OPS ? &tg__builtin_ops[index]
                                    : user_ops[index - TG_NUM_BUILTIN_OPS];
}
