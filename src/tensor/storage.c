/* Reference-counted storage over the allocator its creator chose (the device backend's, in
 * src/ops/creation.c) or over memory someone else owns (tg__storage_wrap), and the
 * live-object counter. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "host_memory.h"
#include "tensor_impl.h"

static atomic_llong live_objects;

void tg__live_inc(void) { atomic_fetch_add(&live_objects, 1); }
void tg__live_dec(void) { atomic_fetch_sub(&live_objects, 1); }
int64_t tg_live_objects(void) { return (int64_t)atomic_load(&live_objects); }

size_t tg__cpu_tail_pad(size_t nbytes) {
  const size_t row_limit = 16384, vector = 64;
  return (nbytes < row_limit ? (nbytes + 63) / 64 * 64 : row_limit) + vector;
}

/* Empty CPU storages point here instead of at NULL: kernels form data + offset pointers, and
 * NULL + 0 is undefined behaviour in C. Zero bytes of it are ever read or written. */
static _Alignas(64) char empty_cpu_block[64];

/* The header's fields, refcount 1, counted live: what both constructors finish with. */
static tg_storage *finish(tg_storage *s, void *data, size_t nbytes, size_t capacity,
                          tg_device device, const tg_allocator *allocator,
                          tg_copy_bytes_fn copy_bytes, void (*release)(void *), void *ctx) {
  atomic_init(&s->refcount, 1);
  atomic_init(&s->version, 0);
  atomic_init(&s->history, 0);
  s->data = data;
  s->nbytes = nbytes;
  s->capacity = capacity;
  s->device = device;
  s->allocator = allocator;
  s->copy_bytes = copy_bytes;
  s->release = release;
  s->release_ctx = ctx;
  tg__live_inc();
  return s;
}

tg_storage *tg__storage_new_op(const char *op, size_t nbytes, tg_device device,
                               const tg_allocator *allocator, tg_copy_bytes_fn copy_bytes) {
  if (!allocator) {
    tg_set_error(TG_ERR_DEVICE, "%s: no allocator for device %s", op,
                 tg_device_type_name(device.type));
    return NULL;
  }
  tg_storage *s = tg__host_malloc(sizeof *s);
  if (!s) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory for a storage header", op);
    return NULL;
  }
  s->data = device.type == TG_CPU ? empty_cpu_block : NULL;
  size_t capacity = nbytes;
  if (nbytes > 0 && device.type == TG_CPU) {
    const size_t pad = tg__cpu_tail_pad(nbytes);
    if (nbytes > SIZE_MAX - pad) {
      tg__host_free(s);
      tg_set_error(TG_ERR_MEMORY, "%s: %zu bytes cannot be allocated", op, nbytes);
      return NULL;
    }
    capacity = nbytes + pad;
  }
  if (nbytes > 0) {
    s->data = allocator->alloc(allocator->ctx, capacity);
    if (!s->data) {
      tg__host_free(s);
      tg_set_error(TG_ERR_MEMORY, "%s: allocator '%s' failed to allocate %zu bytes on %s", op,
                   allocator->name ? allocator->name : "?", nbytes,
                   tg_device_type_name(device.type));
      return NULL;
    }
  }
#if TG_LIFETIME_CHECK
  snprintf(s->made_by, sizeof s->made_by, "%s", op);
#endif
  return finish(s, s->data, nbytes, capacity, device, allocator, copy_bytes, NULL, NULL);
}

tg_storage *tg__storage_wrap(const char *op, void *data, size_t nbytes, tg_device device,
                             tg_copy_bytes_fn copy_bytes, void (*release)(void *ctx), void *ctx) {
  tg_storage *s = tg__host_malloc(sizeof *s);
  if (!s) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory for a storage header", op);
    return NULL;
  }
  if (!data && device.type == TG_CPU) data = empty_cpu_block;
#if TG_LIFETIME_CHECK
  snprintf(s->made_by, sizeof s->made_by, "%s", op);
#endif
  return finish(s, data, nbytes, nbytes, device, NULL, copy_bytes, release, ctx);
}

void tg__storage_retain(tg_storage *s) { atomic_fetch_add(&s->refcount, 1); }

void tg__storage_release(tg_storage *s) {
  if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
  void (*release)(void *) = s->release; /* NULL unless wrapped: allocator is NULL then */
  void *release_ctx = s->release_ctx;
  if (s->allocator && s->nbytes > 0 && s->data)
    s->allocator->free(s->allocator->ctx, s->data, s->capacity);
  tg__host_free(s);
  tg__live_dec();
  /* Last: the owner of wrapped memory sees tg done with it (and tg_live_objects settled). */
  if (release) release(release_ctx);
}
