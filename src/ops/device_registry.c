/* The device registry: which functions serve which device type (tg/device.h), the
 * allocators, and whether an op can run on a device. Built-in types take the first slots
 * (cpu, cuda, meta); registered ones the next free slot. The built-in CPU and CUDA tables
 * come from src/ops/backend.c (the CUDA one from the CUDA module, loaded on first use);
 * meta registers itself through tg_device_register, like any out-of-tree device. */
#include <stdio.h>
#include <pthread.h>
#include <string.h>

#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/cuda_module.h"
#include "ops/meta/meta_device.h"
#include "tensor/check.h"
#include "tensor/device_names.h"

typedef struct device_slot {
  const tg_device_ops *ops;
  const tg_allocator *installed; /* tg_set_allocator's, or NULL */
} device_slot;

static device_slot slots[TG_NUM_DEVICE_TYPES];

static tg_status check_ops(const char *who, const tg_device_ops *ops) {
  if (!tg__check_not_null(who, "ops", ops)) return tg_last_error();
  if (ops->abi != TG_DEVICE_ABI)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: ops.abi is %u; this tg has device ABI %u", who,
                        ops->abi, TG_DEVICE_ABI);
  const char *name = ops->name;
  if (!name || !name[0] || strlen(name) > 32)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: ops.name must have 1 to 32 characters", who);
  for (const char *c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
      return tg_set_error(TG_ERR_ARGUMENT,
                          "%s: ops.name '%s' may hold only lowercase letters, digits and '_'", who,
                          name);
  if (!ops->allocator || !ops->allocator->alloc || !ops->allocator->free || !ops->copy_bytes)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: device '%s' needs an allocator and copy_bytes", who,
                        name);
  const tg_device_drivers *d = ops->drivers;
  if (d && !(d->fill && d->copy && d->unary && d->binary && d->where && d->reduce && d->gemm &&
             d->uniform && d->normal))
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: device '%s' has drivers with a NULL entry (all or none: "
                        "fill, copy, unary, binary, where, reduce, gemm, uniform, normal)",
                        who, name);
  return TG_OK;
}

/* The built-in types are filled once, on first use, from any thread (registering devices
 * of one's own is documented as not thread-safe; asking for the built-ins is). */
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT, cuda_once = PTHREAD_ONCE_INIT,
                      meta_once = PTHREAD_ONCE_INIT;

static void ask_cpu(void) { slots[TG_CPU].ops = tg__builtin_device(TG_CPU); }
static void ask_cuda(void) { slots[TG_CUDA].ops = tg__builtin_device(TG_CUDA); }
static bool registering_meta; /* inside register_meta: meta's own call takes TG_META */
static void register_meta(void) {
  /* Fails only for a bug in meta's table; the slot then stays empty and says so. */
  tg_status saved = tg_last_error();
  registering_meta = true;
  if (tg__meta_device_register() != TG_OK && saved == TG_OK) tg_clear_error();
  registering_meta = false;
}
static void ensure_meta(void) { pthread_once(&meta_once, register_meta); }

/* The ops of a registered or built-in type, or NULL (no error recorded). */
static const tg_device_ops *ops_of(tg_device_type type) {
  if ((unsigned)type >= TG_NUM_DEVICE_TYPES) return NULL;
  if (type == TG_CPU) pthread_once(&cpu_once, ask_cpu);
  if (type == TG_CUDA) pthread_once(&cuda_once, ask_cuda);
  if (type == TG_META) ensure_meta();
  return slots[type].ops;
}

tg_status tg_device_register(const tg_device_ops *ops, tg_device_type *type) {
  static const char *who = "tg_device_register";
  if (!tg__check_not_null(who, "type", type)) return tg_last_error();
  *type = TG_NUM_DEVICE_TYPES;
  tg_status st = check_ops(who, ops);
  if (st != TG_OK) return st;
  const bool is_meta = registering_meta;
  if (!is_meta) ensure_meta();
  int free_slot = is_meta ? TG_META : -1;
  for (int t = 0; t < TG_NUM_DEVICE_TYPES; t++) {
    if ((t < TG_META || slots[t].ops) &&
        strcmp(tg_device_type_name((tg_device_type)t), ops->name) == 0)
      return tg_set_error(TG_ERR_ARGUMENT, "%s: a device type named '%s' already exists", who,
                          ops->name);
    if (free_slot < 0 && t > TG_META && !slots[t].ops) free_slot = t;
  }
  if (free_slot < 0)
    return tg_set_error(TG_ERR_MEMORY, "%s: all %d device types are taken (registering '%s')", who,
                        TG_NUM_DEVICE_TYPES, ops->name);
  slots[free_slot].ops = ops;
  tg__device_type_set((tg_device_type)free_slot, ops->name, !(ops->flags & TG_DEVICE_NO_DATA));
  *type = (tg_device_type)free_slot;
  return TG_OK;
}

tg_status tg_device_type_find(const char *name, tg_device_type *type) {
  static const char *who = "tg_device_type_find";
  if (!tg__check_not_null(who, "name", name) || !tg__check_not_null(who, "type", type))
    return tg_last_error();
  ensure_meta();
  for (int t = 0; t < TG_NUM_DEVICE_TYPES; t++)
    if ((t <= TG_META || slots[t].ops) &&
        strcmp(tg_device_type_name((tg_device_type)t), name) == 0) {
      *type = (tg_device_type)t;
      return TG_OK;
    }
  *type = TG_NUM_DEVICE_TYPES;
  return tg_set_error(TG_ERR_DEVICE, "%s: no device type is named '%s'", who, name);
}

tg_status tg_device_parse(const char *text, tg_device *device) {
  static const char *who = "tg_device_parse";
  if (!tg__check_not_null(who, "text", text) || !tg__check_not_null(who, "device", device))
    return tg_last_error();
  char name[40];
  const char *colon = strchr(text, ':');
  size_t len = colon ? (size_t)(colon - text) : strlen(text);
  if (len == 0 || len >= sizeof name)
    return tg_set_error(TG_ERR_DEVICE, "%s: '%s' is not a device (\"cpu\", \"cuda:0\", ...)", who,
                        text);
  memcpy(name, text, len);
  name[len] = '\0';
  long index = 0;
  if (colon) {
    const char *p = colon + 1;
    if (!*p) return tg_set_error(TG_ERR_DEVICE, "%s: '%s' has no index after ':'", who, text);
    for (; *p; p++) {
      if (*p < '0' || *p > '9' || index > 100000)
        return tg_set_error(TG_ERR_DEVICE, "%s: '%s' has a bad index after ':'", who, text);
      index = index * 10 + (*p - '0');
    }
  }
  tg_device_type type;
  if (tg_device_type_find(name, &type) != TG_OK)
    return tg_set_error(TG_ERR_DEVICE, "%s: '%s' names no device type", who, text);
  *device = (tg_device){type, (int)index};
  return TG_OK;
}

const tg_device_ops *tg_device_ops_of(tg_device_type type) {
  const tg_device_ops *ops = ops_of(type);
  if (!ops) tg__device("tg_device_ops_of", (tg_device){type, 0});
  return ops;
}

const tg_device_ops *tg__device(const char *op, tg_device device) {
  const tg_device_ops *ops = ops_of(device.type);
  if (ops) return ops;
  if (device.type == TG_CUDA) {
    char what[160];
    snprintf(what, sizeof what, "%s: device cuda:%d", op, device.index);
    tg__cuda_module(what); /* records why the CUDA module is not there: path and reason */
  } else if ((unsigned)device.type >= TG_NUM_DEVICE_TYPES)
    tg_set_error(TG_ERR_DEVICE, "%s: invalid device type %d", op, (int)device.type);
  else
    tg_set_error(TG_ERR_DEVICE, "%s: invalid device type %d (none is registered as %d)", op,
                 (int)device.type, (int)device.type);
  return NULL;
}

const tg_device_ops *tg__device_ready(const char *op, tg_device device) {
  const tg_device_ops *ops = tg__device(op, device);
  if (ops && ops->check_device && ops->check_device(op, device) != TG_OK) return NULL;
  return ops;
}

const tg_backend *tg__backend(const char *op, tg_device device) {
  const tg_device_ops *ops = tg__device(op, device);
  if (ops && !ops->drivers) {
    tg_set_error(TG_ERR_UNSUPPORTED,
                 "%s: device %s has no generic drivers (it runs only the ops it has kernels for)",
                 op, ops->name);
    return NULL;
  }
  return ops ? ops->drivers : NULL;
}

tg_kernel_fn tg__kernel(const char *op, const char *kernel, tg_device device) {
  const tg_device_ops *ops = tg__device(op, device);
  tg_kernel_fn fn = ops && ops->kernel ? ops->kernel(kernel) : NULL;
  if (ops && !fn)
    tg_set_error(TG_ERR_UNSUPPORTED, "%s: device %s has no kernel %s", op, ops->name, kernel);
  return fn;
}

tg_kernel_fn tg__fast_kernel(const char *kernel, tg_device device) {
  if ((unsigned)device.type >= TG_NUM_DEVICE_TYPES) return NULL;
  tg_status saved = tg_last_error();
  const tg_device_ops *ops = ops_of(device.type); /* may load a module: no error kept */
  if (tg_last_error() != TG_OK && saved == TG_OK) tg_clear_error();
  return ops && ops->kernel ? ops->kernel(kernel) : NULL;
}

/* ---- which ops run where ---- */

/* The kernels each built-in op needs, from the TG_OP_KERNEL lines. */
typedef struct op_kernel_need {
  const char *op, *kernel;
} op_kernel_need;
static const op_kernel_need needs[] = {
#define TG_OP_KERNEL(op, kernel) {#op, #op "." #kernel},
#include "ops/op_kernels.h"
#undef TG_OP_KERNEL
};

bool tg_op_supported(const tg_op_desc *op, tg_device device) {
  if (!op || (unsigned)device.type >= TG_NUM_DEVICE_TYPES || !op->forward[device.type])
    return false;
  tg_status saved = tg_last_error();
  const tg_device_ops *ops = ops_of(device.type); /* may load a module: no error kept */
  if (tg_last_error() != TG_OK && saved == TG_OK) tg_clear_error();
  if (!ops) return false;
  if (!(op->flags & TG__OP_BUILTIN)) return true; /* a user op's own forward for this type */
  if (!ops->drivers) return (op->flags & TG__OP_MEMORY_ONLY) != 0;
  for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
    if (strcmp(needs[i].op, op->name) == 0 && (!ops->kernel || !ops->kernel(needs[i].kernel)))
      return false;
  return true;
}

/* ---- kinds (tg/device.h) ---- */

static const char *const unary_names[] = {
#define TG_UNARY_KIND(KIND, name, cost) #name,
#include "ops/def/unary.def"
};
static const char *const binary_names[] = {
#define TG_BINARY_KIND(KIND, name) #name,
#include "ops/def/binary.def"
};
static const char *const reduce_names[] = {
#define TG_REDUCE_KIND(KIND, name, how) #name,
#include "ops/def/reduction.def"
};
_Static_assert(sizeof unary_names / sizeof *unary_names == TG_NUM_UNARY, "unary kinds");
_Static_assert(sizeof binary_names / sizeof *binary_names == TG_NUM_BINARY, "binary kinds");
_Static_assert(sizeof reduce_names / sizeof *reduce_names == TG_NUM_REDUCE, "reduce kinds");

int tg_kind_count(tg_kind_family family) {
  switch (family) {
  case TG_KIND_UNARY:
    return TG_NUM_UNARY;
  case TG_KIND_BINARY:
    return TG_NUM_BINARY;
  case TG_KIND_REDUCE:
    return TG_NUM_REDUCE;
  }
  return 0;
}

const char *tg_kind_name(tg_kind_family family, int kind) {
  if (kind < 0 || kind >= tg_kind_count(family)) return NULL;
  return family == TG_KIND_UNARY    ? unary_names[kind]
         : family == TG_KIND_BINARY ? binary_names[kind]
                                    : reduce_names[kind];
}

/* ---- allocators (tg/tensor.h) ---- */

const tg_allocator *tg_get_allocator(tg_device_type type) {
  if ((unsigned)type >= TG_NUM_DEVICE_TYPES) return NULL;
  if (slots[type].installed) return slots[type].installed;
  const tg_device_ops *ops = ops_of(type);
  return ops ? ops->allocator : NULL;
}

const tg_allocator *tg_set_allocator(tg_device_type type, const tg_allocator *allocator) {
  if ((unsigned)type >= TG_NUM_DEVICE_TYPES) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_set_allocator: invalid device type %d", (int)type);
    return NULL;
  }
  if (!ops_of(type) && type != TG_CUDA) { /* cuda: an allocator may wait for the module */
    tg_set_error(TG_ERR_ARGUMENT, "tg_set_allocator: invalid device type %d (not registered)",
                 (int)type);
    return NULL;
  }
  const tg_allocator *previous = tg_get_allocator(type);
  slots[type].installed = allocator;
  return previous;
}
