/* SHA-256 (FIPS 180-4), for the JIT cache: the key of an entry and the hash of a cached
 * library. Not part of the public API. */
#ifndef TG_EXT_SHA256_H
#define TG_EXT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define TG_SHA256_BYTES 32
#define TG_SHA256_HEX 65 /* 64 hex digits and the terminating NUL */

typedef struct tg__sha256 {
  uint32_t state[8];
  uint64_t total_bytes;
  uint8_t block[64];
  size_t block_used;
} tg__sha256;

void tg__sha256_init(tg__sha256 *h);
void tg__sha256_update(tg__sha256 *h, const void *data, size_t n);
void tg__sha256_final(tg__sha256 *h, uint8_t digest[TG_SHA256_BYTES]);
/* Lower-case hex of a digest. */
void tg__sha256_hex(const uint8_t digest[TG_SHA256_BYTES], char hex[TG_SHA256_HEX]);

#endif
