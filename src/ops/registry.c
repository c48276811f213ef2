/* The op registry: built-in ops from ops.def plus ops registered at run time. */
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "registry.h"
#include "tensor/host_memory.h"

/* One entry: the forward on every device, the backward, the flags and the sample inputs. */
#define TG__BUILTIN(op, nin, nout, bwd, fl)                                                        \
  [TG_OP_ID_##op] = {.name = #op,                                                                  \
                     .n_inputs = nin,                                                              \
                     .n_outputs = nout,                                                            \
                     .forward = {tg__fwd_##op, tg__fwd_##op},                                      \
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

/* User ops: registration is expected at start-up, from one thread. Each descriptor is its
 * own allocation so pointers handed out stay valid as the table grows. */
static tg_op_desc **user_ops;
static int user_count, user_capacity;

static const tg_op_desc *find(const char *name) {
  for (int i = 0; i < TG_NUM_BUILTIN_OPS; i++)
    if (strcmp(tg__builtin_ops[i].name, name) == 0) return &tg__builtin_ops[i];
  for (int i = 0; i < user_count; i++)
    if (strcmp(user_ops[i]->name, name) == 0) return user_ops[i];
  return NULL;
}

tg_status tg_op_register(const tg_op_desc *desc) {
  if (!desc || !desc->name || !desc->name[0])
    return tg_set_error(TG_ERR_ARGUMENT, "tg_op_register: desc or its name is NULL/empty");
  if (find(desc->name))
    return tg_set_error(TG_ERR_ARGUMENT, "tg_op_register: an op named '%s' already exists",
                        desc->name);
  bool any_kernel = false;
  for (int d = 0; d < TG_NUM_DEVICE_TYPES; d++) any_kernel |= desc->forward[d] != NULL;
  if (!any_kernel)
    return tg_set_error(TG_ERR_ARGUMENT, "tg_op_register: op '%s' has no forward kernel",
                        desc->name);
  if (desc->n_inputs < -1 || desc->n_outputs < -1 || desc->n_outputs == 0)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "tg_op_register: op '%s' has n_inputs %d, n_outputs %d (need >= -1, "
                        "outputs != 0)",
                        desc->name, desc->n_inputs, desc->n_outputs);
  if (user_count == user_capacity) {
    int cap = user_capacity ? user_capacity * 2 : 8;
    tg_op_desc **grown = tg__host_realloc(user_ops, sizeof *grown * (size_t)cap);
    if (!grown) return tg_set_error(TG_ERR_MEMORY, "tg_op_register: out of memory");
    user_ops = grown;
    user_capacity = cap;
  }
  tg_op_desc *copy = tg__host_malloc(sizeof *copy);
  char *name = tg__host_malloc(strlen(desc->name) + 1);
  if (!copy || !name) {
    tg__host_free(copy);
    tg__host_free(name);
    return tg_set_error(TG_ERR_MEMORY, "tg_op_register: out of memory");
  }
  strcpy(name, desc->name);
  *copy = *desc;
  copy->name = name;
  copy->flags &= ~TG__OP_BUILTIN; /* errors name a user op by its registered name */
  user_ops[user_count++] = copy;
  return TG_OK;
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
