/* Whole-file reads and atomic writes (file_io.h). */
#define _POSIX_C_SOURCE 200809L
#include "io/file_io.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(fn, "open", path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return io_error(fn, "stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return tg_set_error(TG_ERR_IO, "%s: '%s' is not a regular file", fn, path);
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

/* Creates a new file "<path>.tmp.XXXXXX" (6 random letters) in tmp, exclusively. Not
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
    char suffix[7];
    for (int k = 0; k < 6; k++, x /= 52)
      suffix[k] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[x % 52];
    suffix[6] = '\0';
    snprintf(tmp, cap, "%s.tmp.%s", path, suffix);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
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
  if (close(fd) != 0 && !step) {
    err = errno;
    step = "close";
  }
  if (!step && rename(tmp, path) != 0) {
    err = errno;
    step = "rename onto";
  }
  if (step) {
    unlink(tmp);
    tg__host_free(tmp);
    return io_error(fn, step, path, err);
  }
  tg__host_free(tmp);
  /* The rename is durable only once the directory is on disk too. */
  char dir[4096];
  dir_of(path, dir, sizeof dir);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd); /* some file systems refuse fsync on a directory: the file is written */
    close(dfd);
  }
  return TG_OK;
}
