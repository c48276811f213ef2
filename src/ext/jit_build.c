/* One JIT build: the key, the cache entry it names, and either the library already there
 * (verified against its manifest) or a fresh build of it, made under the entry's lock. */
#define _GNU_SOURCE /* O_NOFOLLOW, O_CLOEXEC, fchmod */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ext/jit.h"

/* Each piece is hashed with its length in front, so that no two different lists of pieces
 * give the same stream. */
static void hash_piece(tg__sha256 *h, const void *bytes, size_t n) {
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)n >> (8 * i));
  tg__sha256_update(h, len, sizeof len);
  tg__sha256_update(h, bytes, n);
}

static void hash_string(tg__sha256 *h, const char *s) { hash_piece(h, s, strlen(s)); }

/* The key: SHA-256 over tg's version, the extension ABI, the sources (name and text, in
 * order) and the compiler command lines (which hold every flag, the compilers' names, tg's
 * headers and library), with the entry's path left out of them (it is named by the key).
 * Headers the sources include are not part of it, as in PyTorch: touch a source to rebuild. */
static tg_status compute_key(const tg__jit_request *rq, const tg__jit_toolchain *tc,
                             char key_hex[TG_SHA256_HEX]) {
  tg__jit_commands cmds;
  tg_status st = tg__jit_commands_make(rq, tc, TG_JIT_ENTRY_PLACEHOLDER, &cmds);
  if (st) return st;
  char abi[32];
  snprintf(abi, sizeof abi, "abi %u", (unsigned)TG_EXTENSION_ABI_VERSION);
  tg__sha256 h;
  tg__sha256_init(&h);
  hash_string(&h, "tg-jit-key 1");
  hash_string(&h, tg_version_string());
  hash_string(&h, abi);
  for (int i = 0; i < rq->n_sources; i++) {
    hash_string(&h, rq->sources[i].name);
    hash_piece(&h, rq->sources[i].text, rq->sources[i].size);
  }
  for (int c = 0; c < cmds.n; c++) {
    hash_string(&h, "command");
    for (int i = 0; i < cmds.cmd[c].n; i++) hash_string(&h, cmds.cmd[c].arg[i]);
  }
  tg__jit_commands_free(&cmds);
  uint8_t digest[TG_SHA256_BYTES];
  tg__sha256_final(&h, digest);
  tg__sha256_hex(digest, key_hex);
  return TG_OK;
}

static tg_status write_inline_sources(const tg__jit_request *rq, const char *entry) {
  tg_status st = TG_OK;
  for (int i = 0; i < rq->n_sources && !st; i++) {
    char path[PATH_MAX];
    st = tg__jit_source_path(rq, i, entry, path, sizeof path);
    if (!st) st = tg__jit_write_file(rq->fn, path, rq->sources[i].text, rq->sources[i].size);
  }
  return st;
}

/* The linked library, made private (the compiler made it by the umask) and moved into
 * place; then the manifest that vouches for it. */
static tg_status install_library(const tg__jit_request *rq, const char *entry, const char *lib,
                                 const char key_hex[TG_SHA256_HEX]) {
  char tmp[PATH_MAX], lib_hex[TG_SHA256_HEX];
  tg_status st = tg__jit_path(rq->fn, tmp, sizeof tmp, "%s.tmp", lib);
  if (st) return st;
  int fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || fchmod(fd, 0700) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return tg_set_error(TG_ERR_EXTENSION, "%s: building '%s': no library '%s' after the link: %s",
                        rq->fn, rq->name, tmp, strerror(err));
  }
  close(fd);
  st = tg__jit_hash_file(rq->fn, tmp, lib_hex);
  if (!st && rename(tmp, lib) != 0)
    st = tg_set_error(TG_ERR_EXTENSION, "%s: cannot move '%s' into place: %s", rq->fn, tmp,
                      strerror(errno));
  return st ? st : tg__jit_write_manifest(rq->fn, entry, key_hex, lib_hex);
}

static tg_status build(const tg__jit_request *rq, const tg__jit_toolchain *tc, const char *entry,
                       const char *lib, const char key_hex[TG_SHA256_HEX], bool *compiled) {
  char manifest[PATH_MAX], log_path[PATH_MAX];
  tg_status st = tg__jit_path(rq->fn, manifest, sizeof manifest, "%s/manifest", entry);
  if (!st) st = tg__jit_path(rq->fn, log_path, sizeof log_path, "%s/build.log", entry);
  if (st) return st;
  /* No manifest while the library changes: an interrupted build is rebuilt next time. */
  if (unlink(manifest) != 0 && errno != ENOENT)
    return tg_set_error(TG_ERR_EXTENSION, "%s: cannot remove '%s': %s", rq->fn, manifest,
                        strerror(errno));
  if (rq->inline_sources && (st = write_inline_sources(rq, entry))) return st;
  int log_fd =
      open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (log_fd < 0)
    return tg_set_error(TG_ERR_EXTENSION, "%s: cannot open the build log '%s': %s", rq->fn,
                        log_path, strerror(errno));
  tg__jit_commands cmds;
  st = tg__jit_commands_make(rq, tc, entry, &cmds);
  for (int c = 0; c < cmds.n && !st; c++) {
    *compiled = true;
    st = tg__jit_run(rq->fn, rq->name, &cmds.cmd[c], log_fd, log_path, rq->opts.verbose);
  }
  close(log_fd);
  if (!st) st = install_library(rq, entry, lib, key_hex);
  /* The CUDA objects were only for the link. */
  for (int c = 0; c + 1 < cmds.n; c++) unlink(cmds.cmd[c].arg[cmds.cmd[c].n - 1]);
  tg__jit_commands_free(&cmds);
  return st;
}

tg_status tg__jit_build(tg__jit_request *rq, tg__jit_build_result *out) {
  *out = (tg__jit_build_result){.lock_fd = -1};
  for (int i = 0; i < rq->n_sources; i++)
    if (rq->sources[i].cuda) {
      tg_status st = tg__jit_check_cuda(rq->fn, rq->sources[i].name);
      if (st) return st;
    }
  tg__jit_toolchain tc;
  tg_status st = tg__jit_toolchain_init(&tc, rq->fn);
  if (st) return st;
  char key_hex[TG_SHA256_HEX], dir[PATH_MAX], entry[PATH_MAX];
  st = compute_key(rq, &tc, key_hex);
  if (!st) st = tg__jit_cache_dir(rq->fn, &rq->opts, dir, sizeof dir);
  if (!st) st = tg__jit_path(rq->fn, entry, sizeof entry, "%s/%s-%.16s", dir, rq->name, key_hex);
  if (!st) st = tg__jit_path(rq->fn, out->lib, sizeof out->lib, "%s/lib%s.so", entry, rq->name);
  if (!st) st = tg__jit_entry_lock(rq->fn, entry, &out->lock_fd);
  const char *reason = NULL;
  if (!st && tg__jit_entry_valid(entry, out->lib, key_hex, &reason)) {
    if (rq->opts.verbose) fprintf(stderr, "tg jit: %s: cache hit: %s\n", rq->name, out->lib);
  } else if (!st) {
    if (rq->opts.verbose)
      fprintf(stderr, "tg jit: %s: building in %s (%s)\n", rq->name, entry, reason);
    st = build(rq, &tc, entry, out->lib, key_hex, &out->compiled);
  }
  tg__jit_toolchain_free(&tc);
  if (st) {
    tg__jit_unlock(out->lock_fd);
    out->lock_fd = -1;
  }
  return st;
}
