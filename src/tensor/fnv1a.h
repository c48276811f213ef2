/* 64-bit FNV-1a: cheap fingerprints, not a defence against anyone. The ones ranks compare to
 * find out whether they agree (a module's description, distributed/module_sync.c; the DDP's
 * bucket layout, distributed/ddp_buckets.c), and the GEMM engine cache's file name
 * (ops/cpu/gemm_choice_cache.c). Internal. */
#ifndef TG_FNV1A_H
#define TG_FNV1A_H

#include <stddef.h>
#include <stdint.h>

#define TG_FNV1A_START UINT64_C(1469598103934665603)

/* h continued over n bytes (start from TG_FNV1A_START). */
static inline uint64_t tg__fnv1a(uint64_t h, const void *bytes, size_t n) {
  const unsigned char *b = bytes;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(1099511628211);
  return h;
}

#endif
