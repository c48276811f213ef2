/* The JIT cache on disk:
 *
 *   <cache dir>/                    0700, ours (created with mkdir -p semantics)
 *     <name>-<16 hex of key>/       an entry, 0700, ours
 *       lock                        flock()ed while the entry is looked at or built
 *       lib<name>.so                the library, 0700
 *       manifest                    "tg-jit-manifest 1\nkey <hex>\nlibrary-sha256 <hex>\n"
 *       build.log                   the commands of the last build and their output
 *       <name>.c, <name>.cu         the sources of an inline extension
 *
 * Directories not ours, symlinks, or writable by group or others are refused: someone else
 * could put a library there. A library is loaded only when the manifest holds the key it
 * was asked for and the library's bytes hash to the manifest's hash. Files are replaced by
 * rename(), so a reader sees an old or a new file, never half of one. */
#define _GNU_SOURCE /* flock, O_NOFOLLOW, O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ext/jit.h"

#define MANIFEST_MAX 256

tg_status tg__jit_path(const char *fn, char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, size, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= size)
    return tg_set_error(TG_ERR_EXTENSION, "%s: a path is too long (%d characters, at most %zu)", fn,
                        n, size - 1);
  return TG_OK;
}

/* Refuses what someone else could write into. */
static tg_status check_private_dir(const char *fn, const char *what, const char *dir) {
  struct stat s;
  if (lstat(dir, &s) != 0)
    return tg_set_error(TG_ERR_EXTENSION, "%s: %s '%s': %s", fn, what, dir, strerror(errno));
  if (S_ISLNK(s.st_mode))
    return tg_set_error(TG_ERR_EXTENSION, "%s: %s '%s' is a symlink: refused", fn, what, dir);
  if (!S_ISDIR(s.st_mode))
    return tg_set_error(TG_ERR_EXTENSION, "%s: %s '%s' is not a directory", fn, what, dir);
  if (s.st_uid != geteuid())
    return tg_set_error(TG_ERR_EXTENSION,
                        "%s: %s '%s' belongs to uid %u, not to this user (uid %u): refused", fn,
                        what, dir, (unsigned)s.st_uid, (unsigned)geteuid());
  if (s.st_mode & (S_IWGRP | S_IWOTH))
    return tg_set_error(TG_ERR_EXTENSION,
                        "%s: %s '%s' is writable by group or others (mode %04o): refused "
                        "(chmod 700 it, or use another)",
                        fn, what, dir, (unsigned)(s.st_mode & 07777));
  return TG_OK;
}

/* mkdir -p, each missing directory created 0700. */
static tg_status make_dirs(const char *fn, const char *dir) {
  char path[PATH_MAX];
  tg_status st = tg__jit_path(fn, path, sizeof path, "%s", dir);
  for (char *p = path + 1; !st; p++) {
    bool end = *p == '\0';
    if (*p != '/' && !end) continue;
    *p = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
      return tg_set_error(TG_ERR_EXTENSION, "%s: cannot create the cache directory '%s': %s", fn,
                          path, strerror(errno));
    if (end) break;
    *p = '/';
  }
  return st;
}

tg_status tg__jit_cache_dir(const char *fn, const tg_jit_options *opts, char *dir, size_t size) {
  const char *env;
  tg_status st;
  if (opts->cache_dir && opts->cache_dir[0])
    st = tg__jit_path(fn, dir, size, "%s", opts->cache_dir);
  else if ((env = getenv("TG_EXTENSIONS_DIR")) && env[0])
    st = tg__jit_path(fn, dir, size, "%s", env);
  else if ((env = getenv("XDG_CACHE_HOME")) && env[0] == '/') /* the spec: absolute only */
    st = tg__jit_path(fn, dir, size, "%s/tg/extensions", env);
  else if ((env = getenv("HOME")) && env[0])
    st = tg__jit_path(fn, dir, size, "%s/.cache/tg/extensions", env);
  else
    return tg_set_error(TG_ERR_EXTENSION,
                        "%s: no cache directory: set TG_EXTENSIONS_DIR (or HOME), or pass "
                        "opts.cache_dir",
                        fn);
  if (!st) st = make_dirs(fn, dir);
  return st ? st : check_private_dir(fn, "cache directory", dir);
}

tg_status tg__jit_entry_lock(const char *fn, const char *entry, int *lock_fd) {
  *lock_fd = -1;
  if (mkdir(entry, 0700) != 0 && errno != EEXIST)
    return tg_set_error(TG_ERR_EXTENSION, "%s: cannot create the cache entry '%s': %s", fn, entry,
                        strerror(errno));
  tg_status st = check_private_dir(fn, "cache entry", entry);
  char path[PATH_MAX];
  if (!st) st = tg__jit_path(fn, path, sizeof path, "%s/lock", entry);
  if (st) return st;
  int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return tg_set_error(TG_ERR_EXTENSION, "%s: cannot open the lock '%s': %s", fn, path,
                        strerror(errno));
  int rc;
  while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR) continue;
  if (rc != 0) {
    int err = errno;
    close(fd);
    return tg_set_error(TG_ERR_EXTENSION, "%s: cannot lock '%s': %s", fn, path, strerror(err));
  }
  *lock_fd = fd;
  return TG_OK;
}

void tg__jit_unlock(int lock_fd) {
  if (lock_fd >= 0) close(lock_fd); /* closing the descriptor releases the flock */
}

/* Opens a regular file that is ours and not writable by others, without following a
 * symlink; -1 (errno, or EPERM for a file someone else could have written) otherwise. */
static int open_private_file(const char *path) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC); /* a FIFO: no wait */
  struct stat s;
  if (fd < 0) return -1;
  if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode) || s.st_uid != geteuid() ||
      (s.st_mode & (S_IWGRP | S_IWOTH))) {
    close(fd);
    errno = EPERM;
    return -1;
  }
  return fd;
}

static bool hash_fd(int fd, char hex[TG_SHA256_HEX]) {
  tg__sha256 h;
  tg__sha256_init(&h);
  char buf[16384];
  ssize_t got;
  while ((got = read(fd, buf, sizeof buf)) != 0) {
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return false;
    tg__sha256_update(&h, buf, (size_t)got);
  }
  uint8_t digest[TG_SHA256_BYTES];
  tg__sha256_final(&h, digest);
  tg__sha256_hex(digest, hex);
  return true;
}

tg_status tg__jit_hash_file(const char *fn, const char *path, char hex[TG_SHA256_HEX]) {
  int fd = open_private_file(path);
  bool ok = fd >= 0 && hash_fd(fd, hex);
  int err = errno;
  if (fd >= 0) close(fd);
  if (!ok)
    return tg_set_error(TG_ERR_EXTENSION, "%s: cannot read '%s': %s", fn, path,
                        err == EPERM ? "not a private file of this user" : strerror(err));
  return TG_OK;
}

static int render_manifest(char *buf, size_t size, const char *key_hex, const char *lib_hex) {
  return snprintf(buf, size, "tg-jit-manifest 1\nkey %s\nlibrary-sha256 %s\n", key_hex, lib_hex);
}

bool tg__jit_entry_valid(const char *entry, const char *lib, const char key_hex[TG_SHA256_HEX],
                         const char **reason) {
  char path[PATH_MAX], manifest[MANIFEST_MAX + 1], lib_hex[TG_SHA256_HEX], want[MANIFEST_MAX];
  int n = snprintf(path, sizeof path, "%s/manifest", entry);
  int fd = n > 0 && (size_t)n < sizeof path ? open_private_file(path) : -1;
  ssize_t got = fd >= 0 ? read(fd, manifest, MANIFEST_MAX) : -1;
  int err = errno;
  if (fd >= 0) close(fd);
  if (got < 0) {
    *reason = err == ENOENT ? "not built yet" : "no manifest of this user's";
    return false;
  }
  manifest[got] = '\0';
  /* The key first: a manifest of another key means an entry name's 64-bit collision. */
  render_manifest(want, sizeof want, key_hex, "");
  if (strncmp(manifest, want, strlen(want) - 1) != 0) {
    *reason = "the manifest is for other sources or flags";
    return false;
  }
  fd = open_private_file(lib);
  bool hashed = fd >= 0 && hash_fd(fd, lib_hex);
  if (fd >= 0) close(fd);
  if (!hashed) {
    *reason = "no library, or not a private file of this user";
    return false;
  }
  render_manifest(want, sizeof want, key_hex, lib_hex);
  if (strcmp(manifest, want) != 0) {
    *reason = "the library's content does not match its manifest";
    return false;
  }
  return true;
}

tg_status tg__jit_write_file(const char *fn, const char *path, const void *bytes, size_t n) {
  char tmp[PATH_MAX];
  tg_status st = tg__jit_path(fn, tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
  if (st) return st;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = fd >= 0;
  for (const char *p = bytes; ok && n > 0;) {
    ssize_t put = write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    ok = put > 0;
    if (ok) p += put, n -= (size_t)put;
  }
  ok = ok && fsync(fd) == 0;
  int err = errno;
  if (fd >= 0 && close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && rename(tmp, path) != 0) ok = false, err = errno;
  if (!ok) {
    unlink(tmp);
    return tg_set_error(TG_ERR_EXTENSION, "%s: cannot write '%s': %s", fn, path, strerror(err));
  }
  return TG_OK;
}

tg_status tg__jit_write_manifest(const char *fn, const char *entry,
                                 const char key_hex[TG_SHA256_HEX],
                                 const char lib_hex[TG_SHA256_HEX]) {
  char path[PATH_MAX], text[MANIFEST_MAX];
  tg_status st = tg__jit_path(fn, path, sizeof path, "%s/manifest", entry);
  if (st) return st;
  int n = render_manifest(text, sizeof text, key_hex, lib_hex);
  return tg__jit_write_file(fn, path, text, (size_t)n);
}
