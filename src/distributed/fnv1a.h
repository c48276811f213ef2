/* 64-bit FNV-1a: the fingerprints ranks compare to find out cheaply whether they agree (a
 * module's description, module_sync.c; the DDP's bucket layout, ddp_buckets.c). Not a
 * defence against anyone: every rank is ours. Internal to src/distributed/. */
#ifndef TG_DIST_FNV1A_H
#define TG_DIST_FNV1A_H

#include <stddef.h>
#include <stdint.h>

#define TG_DIST_FNV1A_START UINT64_C(1469598103934665603)

/* h continued over n bytes (start from TG_DIST_FNV1A_START). */
static inline uint64_t tg__dist_fnv1a(uint64_t h, const void *bytes, size_t n) {
  const unsigned char *b = bytes;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(1099511628211);
  return h;
}

#endif
