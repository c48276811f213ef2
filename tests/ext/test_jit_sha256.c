/* The SHA-256 behind the JIT cache (src/ext/sha256.c): the FIPS 180-4 example vectors, the
 * padding's edge lengths, and that feeding the bytes in pieces changes nothing. */
#include "ext/sha256.h"
#include "testutil.h"

static const char *hex_of(const void *bytes, size_t n) {
  static char hex[TG_SHA256_HEX];
  tg__sha256 h;
  uint8_t digest[TG_SHA256_BYTES];
  tg__sha256_init(&h);
  tg__sha256_update(&h, bytes, n);
  tg__sha256_final(&h, digest);
  tg__sha256_hex(digest, hex);
  return hex;
}

static const char *hex_of_string(const char *s) { return hex_of(s, strlen(s)); }

/* FIPS 180-4 / NIST CSRC examples (one block, two blocks, a million 'a'), and the empty
 * message. */
Test(sha256, fips_vectors) {
  cr_assert_str_eq(hex_of_string(""),
                   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  cr_assert_str_eq(hex_of_string("abc"),
                   "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  cr_assert_str_eq(hex_of_string("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                   "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  cr_assert_str_eq(hex_of_string("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                                 "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
                   "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  static char million[1000000];
  memset(million, 'a', sizeof million);
  cr_assert_str_eq(hex_of(million, sizeof million),
                   "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Lengths around the padding's boundaries (the length field fits after 55 bytes, not after
 * 56). Expected values from Python's hashlib. */
Test(sha256, padding_boundaries) {
  char a[64];
  memset(a, 'a', sizeof a);
  cr_assert_str_eq(hex_of(a, 55),
                   "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  cr_assert_str_eq(hex_of(a, 63),
                   "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
  cr_assert_str_eq(hex_of(a, 64),
                   "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

Test(sha256, pieces_equal_one_update) {
  uint8_t bytes[768];
  for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)i;
  const char *want = "f3a25aa93aa2fbba28d79260535bbd6a5eb0fc1c24a8b0f04e12b484c1dfe363";
  cr_assert_str_eq(hex_of(bytes, sizeof bytes), want);
  for (size_t piece = 1; piece <= 130; piece++) {
    tg__sha256 h;
    uint8_t digest[TG_SHA256_BYTES];
    char hex[TG_SHA256_HEX];
    tg__sha256_init(&h);
    for (size_t at = 0; at < sizeof bytes; at += piece)
      tg__sha256_update(&h, bytes + at, at + piece <= sizeof bytes ? piece : sizeof bytes - at);
    tg__sha256_final(&h, digest);
    tg__sha256_hex(digest, hex);
    cr_assert_str_eq(hex, want, "pieces of %zu bytes", piece);
  }
}
