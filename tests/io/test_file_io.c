/* Whole-file reads and atomic writes (src/io/file_io.h): a write replaces the file whole or
 * not at all, whether it fails (the write hook) or the process is killed mid-write (a forked
 * child SIGKILLs itself from the hook); read errors; allocation failures. */
#define _GNU_SOURCE /* mkdtemp */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "io/file_io.h"
#include "tensor/host_memory.h"

static char dir[64];
static char path[128];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/tg-test-file-io-XXXXXX");
  cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
  snprintf(path, sizeof path, "%s/data.bin", dir);
}

/* Names in dir other than "." and ".."; the first other than data.bin in *other. */
static int count_entries(char *other, size_t cap) {
  DIR *d = opendir(dir);
  cr_assert(d);
  int n = 0;
  if (other) other[0] = '\0';
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (other && strcmp(e->d_name, "data.bin") != 0) snprintf(other, cap, "%s", e->d_name);
    n++;
  }
  closedir(d);
  return n;
}

static void remove_dir(void) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && unlink(p) != 0) rmdir(p);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static void expect_contents(const char *want, size_t len) {
  void *data;
  size_t n;
  cr_assert_eq(tg__read_file("tg_test", path, 1 << 26, &data, &n), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(n, len, "the file has %zu bytes, expected %zu", n, len);
  cr_assert_eq(memcmp(data, want, len), 0, "the file's contents differ");
  tg__host_free(data);
}

/* 2.5 chunks of a pattern, so a write takes three chunks. */
static unsigned char *big_data(size_t *n) {
  *n = TG__WRITE_CHUNK * 5 / 2;
  unsigned char *p = malloc(*n);
  for (size_t i = 0; i < *n; i++) p[i] = (unsigned char)(i * 7 + i / 4096);
  return p;
}

TG_TEST(file_io, write_replaces_the_file) {
  make_dir();
  umask(022);
  cr_assert_eq(tg__write_file_atomic("tg_test", path, "old", 3), TG_OK);
  expect_contents("old", 3);
  cr_assert_eq(tg__write_file_atomic("tg_test", path, "new contents", 12), TG_OK);
  expect_contents("new contents", 12);
  cr_assert_eq(count_entries(NULL, 0), 1, "a temporary file was left behind");
  /* created like fopen would: 0666 less the umask, not mkstemp's 0600 */
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  cr_assert_eq(st.st_mode & 0777, 0644, "mode %o", (unsigned)(st.st_mode & 0777));
  /* nothing to write: an empty file */
  cr_assert_eq(tg__write_file_atomic("tg_test", path, NULL, 0), TG_OK);
  expect_contents("", 0);
  /* a name without a directory goes beside it in the working directory */
  cr_assert_eq(chdir(dir), 0);
  cr_assert_eq(tg__write_file_atomic("tg_test", "data.bin", "here", 4), TG_OK);
  expect_contents("here", 4);
  remove_dir();
}

static bool fail_after_first_chunk(size_t written, void *user) {
  int *calls = user;
  ++*calls;
  return written < TG__WRITE_CHUNK;
}

TG_TEST(file_io, failed_write_keeps_the_previous_file) {
  make_dir();
  cr_assert_eq(tg__write_file_atomic("tg_test", path, "previous", 8), TG_OK);
  size_t n;
  unsigned char *data = big_data(&n);
  int calls = 0;
  tg__set_write_hook(fail_after_first_chunk, &calls);
  tg_status st = tg__write_file_atomic("tg_test", path, data, n);
  tg__set_write_hook(NULL, NULL);
  cr_assert_eq(st, TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_test: cannot write '", "data.bin'");
  cr_assert_eq(calls, 1, "the hook ran %d times", calls);
  expect_contents("previous", 8);
  char other[256];
  cr_assert_eq(count_entries(other, sizeof other), 1, "left behind: %s", other);
  /* the whole write, hook removed */
  cr_assert_eq(tg__write_file_atomic("tg_test", path, data, n), TG_OK);
  expect_contents((const char *)data, n);
  free(data);
  remove_dir();
}

static bool kill_self(size_t written, void *user) {
  (void)written, (void)user;
  kill(getpid(), SIGKILL);
  return true;
}

/* Saves "previous" to path, then a big file in a child that is SIGKILLed after the first
 * chunk: what a crash mid-save leaves behind. */
static void save_then_kill_mid_write(void) {
  cr_assert_eq(tg__write_file_atomic("tg_test", path, "previous", 8), TG_OK);
  size_t n;
  unsigned char *data = big_data(&n);
  fflush(NULL);
  pid_t child = fork();
  cr_assert_neq(child, -1, "fork: %s", strerror(errno));
  if (child == 0) {
    tg__set_write_hook(kill_self, NULL);
    tg__write_file_atomic("tg_test", path, data, n);
    _exit(3); /* not reached: the hook kills the process after the first chunk */
  }
  int status;
  cr_assert_eq(waitpid(child, &status, 0), child);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child was not killed (%d)",
            status);
  free(data);
}

TG_TEST(file_io, killed_mid_write_keeps_the_previous_file) {
  make_dir();
  save_then_kill_mid_write();
  expect_contents("previous", 8);
  /* what the crash left: a temporary file with one chunk, beside the intact file */
  char other[256];
  cr_assert_eq(count_entries(other, sizeof other), 2);
  cr_assert(strncmp(other, "data.bin.tmp.", 13) == 0, "left behind: %s", other);
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s/%s", dir, other);
  struct stat st;
  cr_assert_eq(stat(tmp, &st), 0);
  cr_assert_eq((size_t)st.st_size, TG__WRITE_CHUNK);
  remove_dir();
}

/* A FIFO would block open() (no writer) and read() forever: refused at once, named. */
TG_TEST(file_io, fifo_is_refused_without_waiting, .timeout = 20) {
  make_dir();
  cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo: %s", strerror(errno));
  void *data = (void *)1;
  size_t n = 9;
  cr_assert_eq(tg__read_file("tg_test", path, 100, &data, &n), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_test: '", "data.bin' is not a regular file: it is a FIFO");
  cr_assert_null(data);
  cr_assert_eq(n, 0);
  cr_assert_eq(tg__read_file("tg_test", dir, 100, &data, &n), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "' is not a regular file: it is a directory");
  remove_dir();
}

/* What a killed save left behind goes with the next save of that path; a temporary file
 * that a live writer holds (locked) stays, and so do files that only look alike. */
TG_TEST(file_io, next_write_removes_stale_temporary_files) {
  make_dir();
  save_then_kill_mid_write();
  char stale[256];
  cr_assert_eq(count_entries(stale, sizeof stale), 2);
  cr_assert(strncmp(stale, "data.bin.tmp.", 13) == 0, "left behind: %s", stale);

  /* A live writer's file (locked, as tg__write_file_atomic locks its own), and look-alikes. */
  char live[512], other[512], longer[512];
  snprintf(live, sizeof live, "%s/data.bin.tmp.aBcDeF", dir);
  snprintf(other, sizeof other, "%s/other.bin.tmp.abcdef", dir);
  snprintf(longer, sizeof longer, "%s/data.bin.tmp.abcdefg", dir);
  int live_fd = open(live, O_WRONLY | O_CREAT | O_EXCL, 0644);
  cr_assert_geq(live_fd, 0);
  cr_assert_eq(flock(live_fd, LOCK_EX), 0);
  fclose(fopen(other, "w"));
  fclose(fopen(longer, "w"));
  cr_assert_eq(count_entries(NULL, 0), 5);

  cr_assert_eq(tg__write_file_atomic("tg_test", path, "next", 4), TG_OK);
  expect_contents("next", 4);
  char stale_path[512];
  snprintf(stale_path, sizeof stale_path, "%s/%s", dir, stale);
  cr_assert_neq(access(stale_path, F_OK), 0, "the killed save's %s is still there", stale);
  cr_assert_eq(access(live, F_OK), 0, "a live writer's temporary file was removed");
  cr_assert_eq(access(other, F_OK), 0);
  cr_assert_eq(access(longer, F_OK), 0);
  cr_assert_eq(count_entries(NULL, 0), 4);

  /* Its writer gone (the lock with it), the next save removes it too. */
  close(live_fd);
  cr_assert_eq(tg__write_file_atomic("tg_test", path, "again", 5), TG_OK);
  cr_assert_neq(access(live, F_OK), 0);
  cr_assert_eq(count_entries(NULL, 0), 3);
  remove_dir();
}

TG_TEST(file_io, write_errors) {
  make_dir();
  cr_assert_eq(tg__write_file_atomic("tg_test", NULL, "x", 1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_test: path is NULL or empty");
  cr_assert_eq(tg__write_file_atomic("tg_test", "", "x", 1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_test: path is NULL or empty");
  char *long_path = malloc(5000);
  memset(long_path, 'a', 4999);
  long_path[4999] = '\0';
  cr_assert_eq(tg__write_file_atomic("tg_test", long_path, "x", 1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_test: path is too long");
  free(long_path);
  cr_assert_eq(tg__write_file_atomic("tg_test", "/nonexistent-tg-dir/f", "x", 1), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_test: cannot create a temporary file beside "
                             "'/nonexistent-tg-dir/f': No such file or directory");
  /* the target is a non-empty directory: the rename fails and the temporary file goes */
  cr_assert_eq(mkdir(path, 0755), 0);
  char inner[256];
  snprintf(inner, sizeof inner, "%s/inner", path);
  fclose(fopen(inner, "w"));
  cr_assert_eq(tg__write_file_atomic("tg_test", path, "x", 1), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_test: cannot rename onto '", "data.bin'");
  cr_assert_eq(count_entries(NULL, 0), 1, "a temporary file was left behind");
  unlink(inner);
  remove_dir();
}

TG_TEST(file_io, read_errors) {
  make_dir();
  void *data = (void *)1;
  size_t n = 9;
  cr_assert_eq(tg__read_file("tg_test", path, 100, &data, &n), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_test: cannot open '", "data.bin': No such file or directory");
  cr_assert_null(data);
  cr_assert_eq(n, 0);
  cr_assert_eq(tg__read_file("tg_test", dir, 100, &data, &n), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_test: '", "' is not a regular file");
  cr_assert_eq(tg__read_file("tg_test", NULL, 100, &data, &n), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_test: path is NULL");
  /* exactly the limit reads; one byte more is too large */
  char hundred[100];
  memset(hundred, 'h', sizeof hundred);
  cr_assert_eq(tg__write_file_atomic("tg_test", path, hundred, 100), TG_OK);
  cr_assert_eq(tg__read_file("tg_test", path, 100, &data, &n), TG_OK);
  cr_assert_eq(n, 100);
  tg__host_free(data);
  cr_assert_eq(tg__read_file("tg_test", path, 99, &data, &n), TG_ERR_FORMAT);
  tg_expect_error(TG_ERR_FORMAT, "tg_test: '",
                  "data.bin' is 100 bytes, more than the 99 read at most");
  cr_assert_null(data);
  /* an empty file: no bytes, a buffer still to free */
  cr_assert_eq(tg__write_file_atomic("tg_test", path, "", 0), TG_OK);
  cr_assert_eq(tg__read_file("tg_test", path, 100, &data, &n), TG_OK);
  cr_assert_eq(n, 0);
  tg__host_free(data);
  remove_dir();
}

TG_TEST(file_io, allocation_failures) {
  make_dir();
  cr_assert_eq(tg__write_file_atomic("tg_test", path, "old", 3), TG_OK);
  tg__host_fail_allocation(1);
  cr_assert_eq(tg__write_file_atomic("tg_test", path, "new", 3), TG_ERR_MEMORY);
  tg__host_fail_allocation(0);
  tg_expect_error(TG_ERR_MEMORY, "tg_test: out of memory writing '");
  expect_contents("old", 3);
  void *data = (void *)1;
  size_t n = 1;
  tg__host_fail_allocation(1);
  cr_assert_eq(tg__read_file("tg_test", path, 100, &data, &n), TG_ERR_MEMORY);
  tg__host_fail_allocation(0);
  tg_expect_error(TG_ERR_MEMORY, "tg_test: out of memory reading '", "(3 bytes)");
  cr_assert_null(data);
  cr_assert_eq(n, 0);
  cr_assert_eq(count_entries(NULL, 0), 1);
  remove_dir();
}
