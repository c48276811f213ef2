/* Whole-file reads and atomic writes (file_io.h). */
#define _DEFAULT_SOURCE /* flock */
#include "io/file_io.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tensor/error_impl.h"
#include "tensor/host_memory.h"

static tg__write_hook write_hook;
static void *write_hook_user;

void tg__set_write_hook(tg__write_hook hook, void *user) {
  write_hook = hook;
  write_hook_user = user;
}

static tg_status io_error(const char *fn, const char *what, const char *path, int err) {
  return tg_set_error(TG_ERR_IO, "%s: cannot %s '%s': %s", fn, what, path, strerror(err));
}

tg_status tg__read_file(const char *fn, const char *path, size_t max_bytes, void **data,
                        size_t *nbytes) {
  *data = NULL;
  *nbytes = 0;
  if (!path) return tg_set_error(TG_ERR_ARGUMENT, "%s: path is NULL", fn);
  /* O_NONBLOCK: opening a FIFO for reading would wait for a writer, forever; the mode is
   * checked on the descriptor (no race with a rename), and a regular file ignores the flag. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return io_error(fn, "open", path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return io_error(fn, "stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return tg_set_error(TG_ERR_IO, "%s: '%s' is not a regular file: it is %s", fn, path,
                        tg__file_kind((unsigned)st.st_mode));
  }
  if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
    close(fd);
    return tg_set_error(TG_ERR_FORMAT, "%s: '%s' is %lld bytes, more than the %zu read at most", fn,
                        path, (long long)st.st_size, max_bytes);
  }
  size_t size = (size_t)st.st_size;
  unsigned char *buf = tg__host_malloc(size);
  if (!buf) {
    close(fd);
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory reading '%s' (%zu bytes)", fn, path,
                        size);
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int err = r < 0 ? errno : EIO;
      tg__host_free(buf);
      close(fd);
      if (r == 0)
        return tg_set_error(TG_ERR_IO, "%s: '%s' shrank while being read (%zu of %zu bytes)", fn,
                            path, got, size);
      return io_error(fn, "read", path, err);
    }
    got += (size_t)r;
  }
  close(fd);
  *data = buf;
  *nbytes = size;
  return TG_OK;
}

/* The directory part of path ("." when none), in buf. */
static void dir_of(const char *path, char *buf, size_t len) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    snprintf(buf, len, ".");
  } else if (slash == path) {
    snprintf(buf, len, "/");
  } else {
    snprintf(buf, len, "%.*s", (int)(slash - path), path);
  }
}

/* ---- temporary files: the live ones are locked, the stale ones go ----
 * A writer holds an exclusive flock on its temporary file from creating it until it is
 * renamed over the target. The kernel drops the lock when the writer's process ends, however
 * it ends (SIGKILL included), so a temporary file of path that can be locked has no live
 * writer: the next save of path removes it. A writer that lost the race (the file was
 * removed between its creation and its lock: no link left) takes another name. */

enum { TEMP_SUFFIX_LEN = 6 };
static const char temp_letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/* Locks fd, the writer's temporary file, as in use; false when the file was removed
 * meanwhile. A file system without flock leaves it unlocked: then no save removes it. */
static bool lock_as_live(int fd) {
  int rc;
  while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR) continue;
  struct stat st;
  return rc != 0 || fstat(fd, &st) != 0 || st.st_nlink > 0;
}

/* Whether name is base + ".tmp." + TEMP_SUFFIX_LEN letters: a temporary file of base's. */
static bool is_temp_of(const char *name, const char *base) {
  size_t n = strlen(base);
  if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0) return false;
  const char *suffix = name + n + 5;
  if (strlen(suffix) != TEMP_SUFFIX_LEN) return false;
  for (int k = 0; k < TEMP_SUFFIX_LEN; k++)
    if (!strchr(temp_letters, suffix[k])) return false;
  return true;
}

/* Removes the temporary files of path that no live process writes (a save killed
 * mid-write leaves one). Best effort: what cannot be checked or removed stays. */
static void remove_stale_temps(const char *path, const char *dir) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (!is_temp_of(e->d_name, base)) continue;
    int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat held, named;
    /* Unlinked only while locked, and only if the name still is the file that was locked. */
    if (fstat(fd, &held) == 0 && S_ISREG(held.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        fstatat(dirfd(d), e->d_name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        named.st_dev == held.st_dev && named.st_ino == held.st_ino)
      (void)unlinkat(dirfd(d), e->d_name, 0);
    close(fd);
  }
  closedir(d);
}

/* Creates a new file "<path>.tmp.XXXXXX" (6 random letters) in tmp, exclusively, locked. Not
 * mkstemp: it makes the file 0600, and the rename would carry that onto the target; a file
 * tg writes gets 0666 less the umask, like one fopen creates. -1 with errno on failure. */
static int create_temp(const char *path, char *tmp, size_t cap) {
  static _Atomic unsigned long long counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  unsigned long long seed = (unsigned long long)ts.tv_nsec ^ (unsigned long long)ts.tv_sec << 30 ^
                            (unsigned long long)getpid() << 16 ^ ++counter;
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned long long x = (seed += 0x9e3779b97f4a7c15ULL); /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    char suffix[TEMP_SUFFIX_LEN + 1];
    for (int k = 0; k < TEMP_SUFFIX_LEN; k++, x /= 52) suffix[k] = temp_letters[x % 52];
    suffix[TEMP_SUFFIX_LEN] = '\0';
    snprintf(tmp, cap, "%s.tmp.%s", path, suffix);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0 || lock_as_live(fd)) return fd;
    close(fd); /* a save cleaning up removed it before the lock: take another name */
  }
  errno = EEXIST;
  return -1;
}

tg_status tg__write_file_atomic(const char *fn, const char *path, const void *data, size_t nbytes) {
  if (!path || !path[0]) return tg_set_error(TG_ERR_ARGUMENT, "%s: path is NULL or empty", fn);
  size_t plen = strlen(path);
  if (plen > 4000) return tg_set_error(TG_ERR_ARGUMENT, "%s: path is too long", fn);
  char *tmp = tg__host_malloc(plen + 16);
  if (!tmp) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory writing '%s'", fn, path);
  int fd = create_temp(path, tmp, plen + 16);
  if (fd < 0) {
    int err = errno;
    tg__host_free(tmp);
    return io_error(fn, "create a temporary file beside", path, err);
  }
  const char *step = NULL;
  int err = 0;
  const unsigned char *p = data;
  size_t done = 0;
  while (!step && done < nbytes) {
    size_t chunk = nbytes - done < TG__WRITE_CHUNK ? nbytes - done : TG__WRITE_CHUNK;
    size_t put = 0;
    while (put < chunk) {
      ssize_t w = write(fd, p + done + put, chunk - put);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        err = w < 0 ? errno : EIO;
        step = "write";
        break;
      }
      put += (size_t)w;
    }
    done += put;
    if (!step && write_hook && !write_hook(done, write_hook_user)) {
      err = EIO;
      step = "write";
    }
  }
  if (!step && fsync(fd) != 0) {
    err = errno;
    step = "fsync";
  }
  /* Renamed before the close: the close drops the lock that marks the file as written. */
  bool renamed = !step && rename(tmp, path) == 0;
  if (!step && !renamed) {
    err = errno;
    step = "rename onto";
  }
  if (close(fd) != 0 && !step) {
    err = errno;
    step = "close";
  }
  if (!renamed) unlink(tmp);
  tg__host_free(tmp);
  if (step) return io_error(fn, step, path, err);
  /* The rename is durable only once the directory is on disk too. */
  char dir[4096];
  dir_of(path, dir, sizeof dir);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd); /* some file systems refuse fsync on a directory: the file is written */
    close(dfd);
  }
  remove_stale_temps(path, dir);
  return TG_OK;
}
