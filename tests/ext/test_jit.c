/* tg_extension_jit and tg_extension_jit_inline: building, the cache (hits without a compiler
 * run, rebuilds, the lock between processes, what is refused), errors, and the loaded op
 * running and gradchecking. The C compiler is tests/ext/jit/logging_cc.sh, which logs each
 * run: a cache hit is observed as no new line. Each test has its own cache directory and
 * unloads what it loaded. */
#define _GNU_SOURCE /* mkdtemp, setenv */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tg/extension.h"

/* ---- helpers ---- */

/* tests/ext/jit/, found from this file's path (CMake compiles it by its absolute path). */
static const char *fixture(const char *file) {
  static char path[4096];
  const char *slash = strrchr(__FILE__, '/');
  cr_assert(__FILE__[0] == '/' && slash, "test_jit.c needs its absolute path: %s", __FILE__);
  snprintf(path, sizeof path, "%.*s/jit/%s", (int)(slash - __FILE__), __FILE__, file);
  return path;
}

static char test_dir[4096]; /* a fresh temporary directory per test */
static char cc_log[4200];

static int remove_entry(const char *path, const struct stat *s, int flag, struct FTW *ftw) {
  (void)s, (void)flag, (void)ftw;
  return remove(path);
}

/* At the exit of the test's process (also after a failed assertion). */
static void remove_test_dir(void) {
  chmod(test_dir, 0700); /* a test may have opened it up */
  nftw(test_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh directory, the logging compiler as CC, and none of the cache variables. */
static void jit_setup(void) {
  snprintf(test_dir, sizeof test_dir, "/tmp/tg-test-jit-XXXXXX");
  cr_assert(mkdtemp(test_dir), "mkdtemp: %s", strerror(errno));
  atexit(remove_test_dir);
  snprintf(cc_log, sizeof cc_log, "%s/cc.log", test_dir);
  setenv("TG_JIT_TEST_LOG", cc_log, 1);
  unsetenv("TG_JIT_TEST_DELAY");
  setenv("CC", fixture("logging_cc.sh"), 1);
  unsetenv("TG_EXTENSIONS_DIR");
  unsetenv("XDG_CACHE_HOME");
}

#define JIT_TEST(name, ...)                                                                        \
  static void jit_test_##name(void);                                                               \
  TG_TEST(jit, name, ##__VA_ARGS__) {                                                              \
    jit_setup();                                                                                   \
    jit_test_##name();                                                                             \
  }                                                                                                \
  static void jit_test_##name(void)

static char *path_in(const char *dir, const char *name) {
  static char paths[4][4200];
  static int next;
  char *p = paths[next++ % 4];
  snprintf(p, sizeof paths[0], "%s/%s", dir, name);
  return p;
}

/* How many times the compiler ran (lines in its log). */
static int compiler_runs(void) {
  FILE *f = fopen(cc_log, "r");
  if (!f) return 0;
  int lines = 0;
  for (int c; (c = fgetc(f)) != EOF;) lines += c == '\n';
  fclose(f);
  return lines;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

static char *read_text(const char *path) {
  static char text[1 << 16];
  FILE *f = fopen(path, "r");
  cr_assert(f, "cannot read %s", path);
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  return text;
}

static void copy_file(const char *from, const char *to) { write_text(to, read_text(from)); }

static tg_jit_options in_cache(const char *dir) { return (tg_jit_options){.cache_dir = dir}; }

static tg_extension *jit_file(const char *name, const char *source, tg_jit_options opts) {
  return tg_extension_jit(name, 1, (const char *const[]){source}, opts);
}

/* jit_square of [1, -2, 3]: scale * x^2. */
static void expect_square_scaled(double scale) {
  const tg_op_desc *op = tg_op_lookup("jit_square");
  cr_assert(op, "%s", tg_last_error_message());
  tg_tensor *x = tg_test_tensor_of(TG_F64, 1, (int64_t[]){3}, (double[]){1, -2, 3});
  tg_tensor *y = tg_apply1(op, 1, (const tg_tensor *const[]){x}, 0, NULL);
  cr_assert(y, "%s", tg_last_error_message());
  tg_test_expect_values(y, 3, (double[]){scale, 4 * scale, 9 * scale}, 1e-12);
}

static tg_status apply_square(void *user, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_apply1(user, 1, in, 0, NULL);
  return out[0] ? TG_OK : tg_last_error();
}

static void unload(tg_extension *ext) {
  cr_assert_eq(tg_extension_unload(ext), TG_OK, "%s", tg_last_error_message());
  cr_assert_null(tg_op_lookup("jit_square"));
  tg_clear_error();
}

static mode_t mode_of(const char *path) {
  struct stat s;
  cr_assert_eq(lstat(path, &s), 0, "%s: %s", path, strerror(errno));
  return s.st_mode & 07777;
}

/* The one entry directory under cache (name-<16 hex>). */
static char *entry_of(tg_extension *ext) {
  static char entry[4096];
  snprintf(entry, sizeof entry, "%s", tg_extension_path(ext));
  *strrchr(entry, '/') = '\0';
  return entry;
}

/* ---- building, the cache ---- */

JIT_TEST(first_build_then_cache_hit) {
  const char *cache = path_in(test_dir, "made/by/jit"); /* created, mkdir -p */
  tg_extension *ext = jit_file("square", fixture("square.c"), in_cache(cache));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert(tg_extension_jit_compiled());
  cr_assert_eq(compiler_runs(), 1);
  cr_assert_eq(mode_of(cache), 0700);
  char *entry = entry_of(ext);
  const char *base = strrchr(entry, '/') + 1;
  cr_assert(strncmp(base, "square-", 7) == 0 && strlen(base) == 7 + 16, "entry %s", entry);
  cr_assert_eq(mode_of(entry), 0700);
  cr_assert_eq(mode_of(tg_extension_path(ext)), 0700);
  cr_assert_str_eq(strrchr(tg_extension_path(ext), '/'), "/libsquare.so");
  const char *manifest = read_text(path_in(entry, "manifest"));
  cr_assert(strstr(manifest, "tg-jit-manifest 1\nkey ") == manifest, "%s", manifest);
  cr_assert(strstr(read_text(path_in(entry, "build.log")), "$ "), "the log shows the command");
  expect_square_scaled(1);
  unload(ext);

  ext = jit_file("square", fixture("square.c"), in_cache(cache));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert_not(tg_extension_jit_compiled());
  cr_assert_eq(compiler_runs(), 1, "a cache hit runs no compiler");
  expect_square_scaled(1);
  /* Once loaded, loading it again is the loader's error. */
  cr_assert_null(jit_file("square", fixture("square.c"), in_cache(cache)));
  tg_expect_error(TG_ERR_STATE, "tg_extension_jit: tg_extension_load: ", "is already loaded");
  unload(ext);
}

JIT_TEST(the_loaded_op_gradchecks) {
  tg_extension *ext = jit_file("square", fixture("square.c"), in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert_eq(tg_extension_num_ops(ext), 1);
  cr_assert_str_eq(tg_extension_op_name(ext, 0), "jit_square");
  const tg_op_desc *op = tg_op_lookup("jit_square");
  tg_scope sc = tg_scope_begin(); /* its end frees the graphs that hold the op's nodes */
  tg_tensor *x =
      tg_randn(TG_SHAPE(2, 3), (tg_options){.dtype = TG_F64, .requires_grad = true}, NULL);
  cr_assert(x);
  tg_gradcheck_options gc = {.quiet = true};
  cr_assert_eq(tg_gradcheck(apply_square, (void *)op, 1, &x, 1, gc), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(apply_square, (void *)op, 1, &x, 1, gc), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_scope_end(sc), TG_OK);
  unload(ext);
}

JIT_TEST(a_changed_source_or_flag_is_rebuilt) {
  const char *src = path_in(test_dir, "square.c");
  copy_file(fixture("square.c"), src);
  tg_extension *ext = jit_file("square", src, in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  char first[4096];
  snprintf(first, sizeof first, "%s", tg_extension_path(ext));
  unload(ext);

  /* Another text: another key, another entry, a new build. */
  char *text = read_text(fixture("square.c"));
  char changed[1 << 16];
  snprintf(changed, sizeof changed, "#define JIT_SCALE 3.0\n%s", text);
  write_text(src, changed);
  ext = jit_file("square", src, in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert(tg_extension_jit_compiled());
  cr_assert_eq(compiler_runs(), 2);
  cr_assert_str_neq(tg_extension_path(ext), first);
  expect_square_scaled(3);
  unload(ext);

  /* Another flag: a new build as well. */
  copy_file(fixture("square.c"), src);
  tg_jit_options opts = in_cache(test_dir);
  opts.n_cflags = 1;
  opts.cflags = (const char *const[]){"-DJIT_SCALE=5.0"};
  ext = jit_file("square", src, opts);
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert(tg_extension_jit_compiled());
  cr_assert_eq(compiler_runs(), 3);
  expect_square_scaled(5);
  unload(ext);

  /* The first text again: its entry is still there. */
  ext = jit_file("square", src, in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert_not(tg_extension_jit_compiled());
  cr_assert_eq(compiler_runs(), 3);
  cr_assert_str_eq(tg_extension_path(ext), first);
  expect_square_scaled(1);
  unload(ext);
}

JIT_TEST(a_planted_library_is_rebuilt_not_loaded) {
  /* A library of scale 7 built elsewhere... */
  tg_jit_options other = in_cache(path_in(test_dir, "other"));
  other.n_cflags = 1;
  other.cflags = (const char *const[]){"-DJIT_SCALE=7.0"};
  tg_extension *ext = jit_file("square", fixture("square.c"), other);
  cr_assert(ext, "%s", tg_last_error_message());
  char planted[4096];
  snprintf(planted, sizeof planted, "%s", tg_extension_path(ext));
  unload(ext);
  /* ...put in place of the cached scale-1 library. */
  ext = jit_file("square", fixture("square.c"), in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  char lib[4096];
  snprintf(lib, sizeof lib, "%s", tg_extension_path(ext));
  unload(ext);
  cr_assert_eq(rename(planted, lib), 0);
  cr_assert_eq(compiler_runs(), 2);

  ext = jit_file("square", fixture("square.c"), in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert(tg_extension_jit_compiled(), "the planted library does not match the manifest");
  cr_assert_eq(compiler_runs(), 3);
  expect_square_scaled(1);
  unload(ext);

  /* One byte changed in place: rebuilt too. */
  FILE *f = fopen(lib, "r+b");
  cr_assert(f);
  fseek(f, -1, SEEK_END);
  int last = fgetc(f);
  fseek(f, -1, SEEK_END);
  fputc(last ^ 0xff, f);
  fclose(f);
  ext = jit_file("square", fixture("square.c"), in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert(tg_extension_jit_compiled());
  cr_assert_eq(compiler_runs(), 4);
  unload(ext);

  /* A manifest for other sources: rebuilt. */
  char *entry = entry_of(ext = jit_file("square", fixture("square.c"), in_cache(test_dir)));
  cr_assert_not(tg_extension_jit_compiled());
  unload(ext);
  char *manifest = path_in(entry, "manifest");
  char text[1024];
  snprintf(text, sizeof text, "%s", read_text(manifest));
  text[strlen("tg-jit-manifest 1\nkey ")] ^= 1; /* one hex digit of the key */
  write_text(manifest, text);
  ext = jit_file("square", fixture("square.c"), in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert(tg_extension_jit_compiled());
  cr_assert_eq(compiler_runs(), 5);
  unload(ext);
}

/* Two processes build one entry at once: the compiler runs once (it sleeps a second, so
 * the second process arrives while the first builds), both load and run the op. */
JIT_TEST(two_processes_build_once) {
  setenv("TG_JIT_TEST_DELAY", "1", 1);
  pid_t pids[2];
  for (int i = 0; i < 2; i++) {
    pids[i] = fork();
    cr_assert(pids[i] >= 0);
    if (pids[i] == 0) {
      tg_extension *ext = jit_file("square", fixture("square.c"), in_cache(test_dir));
      const tg_op_desc *op = ext ? tg_op_lookup("jit_square") : NULL;
      tg_scope sc = tg_scope_begin();
      tg_tensor *x = tg_full(TG_SHAPE(1), 3.0, (tg_options){.dtype = TG_F64});
      tg_tensor *y = op && x ? tg_apply1(op, 1, (const tg_tensor *const[]){x}, 0, NULL) : NULL;
      double got = 0;
      bool ok = y && tg_item(y, &got) == TG_OK && got == 9.0;
      tg_scope_end(sc);
      if (!ok) fprintf(stderr, "child %d: %s\n", i, tg_last_error_message());
      _exit(ok && tg_extension_unload(ext) == TG_OK ? 0 : 1);
    }
  }
  for (int i = 0; i < 2; i++) {
    int status;
    cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d failed", i);
  }
  cr_assert_eq(compiler_runs(), 1, "the second process waited and found the first's build");
  unsetenv("TG_JIT_TEST_DELAY");
  tg_extension *ext = jit_file("square", fixture("square.c"), in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert_not(tg_extension_jit_compiled());
  unload(ext);
}

JIT_TEST(inline_sources) {
  const char *text = read_text(fixture("square.c"));
  char source[1 << 16];
  snprintf(source, sizeof source, "%s", text);
  tg_extension *ext = tg_extension_jit_inline("square_inline", source, NULL, in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert(tg_extension_jit_compiled());
  cr_assert_str_eq(read_text(path_in(entry_of(ext), "square_inline.c")), source);
  expect_square_scaled(1);
  unload(ext);
  ext = tg_extension_jit_inline("square_inline", source, NULL, in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert_not(tg_extension_jit_compiled());
  cr_assert_eq(compiler_runs(), 1);
  unload(ext);
}

JIT_TEST(cache_directory_from_the_environment) {
  setenv("TG_EXTENSIONS_DIR", path_in(test_dir, "env"), 1);
  tg_extension *ext = jit_file("square", fixture("square.c"), (tg_jit_options){0});
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert(strncmp(tg_extension_path(ext), path_in(test_dir, "env/square-"),
                    strlen(path_in(test_dir, "env/square-"))) == 0,
            "%s", tg_extension_path(ext));
  unload(ext);
  unsetenv("TG_EXTENSIONS_DIR");
  setenv("XDG_CACHE_HOME", path_in(test_dir, "xdg"), 1);
  ext = jit_file("square", fixture("square.c"), (tg_jit_options){0});
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert_eq(mode_of(path_in(test_dir, "xdg/tg/extensions")), 0700);
  unload(ext);
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", path_in(test_dir, "home"), 1);
  ext = jit_file("square", fixture("square.c"), (tg_jit_options){0});
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert_eq(mode_of(path_in(test_dir, "home/.cache/tg/extensions")), 0700);
  unload(ext);
  unsetenv("HOME");
  cr_assert_null(jit_file("square", fixture("square.c"), (tg_jit_options){0}));
  tg_expect_error(TG_ERR_EXTENSION, "no cache directory", "TG_EXTENSIONS_DIR");
}

JIT_TEST(verbose_prints_the_commands_and_the_decision) {
  char err_path[4200];
  snprintf(err_path, sizeof err_path, "%s/stderr", test_dir);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert(saved >= 0 && fd >= 0);
  dup2(fd, STDERR_FILENO);
  close(fd);
  tg_jit_options opts = in_cache(test_dir);
  opts.verbose = true;
  tg_extension *first = jit_file("square", fixture("square.c"), opts);
  tg_extension_unload(first);
  tg_extension *second = jit_file("square", fixture("square.c"), opts);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  cr_assert(first && second, "%s", tg_last_error_message());
  const char *out = read_text(err_path);
  cr_assert(strstr(out, "tg jit: square: building in "), "%s", out);
  cr_assert(strstr(out, "logging_cc.sh -std=c11 -O2 -Werror=implicit-function-declaration "
                        "-Werror=int-conversion -fPIC -shared"),
            "%s", out);
  cr_assert(strstr(out, "tg jit: square: cache hit: "), "%s", out);
  unload(second);
}

static void *jit_compiled_elsewhere(void *unused) {
  (void)unused;
  return (void *)(intptr_t)tg_extension_jit_compiled();
}

JIT_TEST(jit_compiled_is_per_thread) {
  tg_extension *ext = jit_file("square", fixture("square.c"), in_cache(test_dir));
  cr_assert(ext && tg_extension_jit_compiled());
  pthread_t t;
  void *other;
  cr_assert_eq(pthread_create(&t, NULL, jit_compiled_elsewhere, NULL), 0);
  pthread_join(t, &other);
  cr_assert_null(other, "another thread made no call");
  unload(ext);
}

/* ---- errors ---- */

JIT_TEST(compile_error_names_the_error_and_the_log) {
  cr_assert_null(jit_file("broken", fixture("broken.c"), in_cache(test_dir)));
  const char *msg = tg_last_error_message();
  cr_assert(tg_extension_jit_compiled());
  char log[4096];
  const char *at = strstr(msg, "(log: ");
  cr_assert(at, "%s", msg);
  snprintf(log, sizeof log, "%.*s", (int)strcspn(at + 6, ")"), at + 6);
  cr_assert(strstr(read_text(log), "jit_test_undeclared_identifier"), "the log %s", log);
  tg_expect_error(TG_ERR_EXTENSION, "tg_extension_jit: building 'broken' failed",
                  "exited with status", "/build.log", "error", "jit_test_undeclared_identifier");
  /* A failed build is not cached: the next call compiles again. */
  cr_assert_null(jit_file("broken", fixture("broken.c"), in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "jit_test_undeclared_identifier");
  cr_assert_eq(compiler_runs(), 2);
}

/* A source that forgets #include "tg/tg.h" calls tg_neg undeclared: C would take it to
 * return int and cut the pointer (a crash at the first call), so the JIT refuses to build. */
JIT_TEST(implicit_declaration_is_an_error) {
  const char *forgetful = "void *jit_forgetful(void *x) { return tg_neg(x); }\n";
  cr_assert_null(tg_extension_jit_inline("forgetful", forgetful, NULL, in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "tg_extension_jit_inline: building 'forgetful' failed", "error",
                  "tg_neg");
  const char *truncating = "int jit_truncating(int *p) { return p; }\n";
  cr_assert_null(tg_extension_jit_inline("truncating", truncating, NULL, in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "building 'truncating' failed", "error");
  cr_assert_eq(compiler_runs(), 2);
}

/* A FIFO named as a source would block the read forever: refused at once. */
JIT_TEST(fifo_source_is_refused, .timeout = 20) {
  char *fifo = path_in(test_dir, "pipe.c");
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  cr_assert_null(jit_file("pipe", fifo, in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "source '", "pipe.c' is not a regular file: it is a FIFO");
  cr_assert_eq(compiler_runs(), 0);
}

JIT_TEST(compiler_missing) {
  setenv("CC", "/nonexistent/tg-test-no-such-cc", 1);
  cr_assert_null(jit_file("square", fixture("square.c"), in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "compiler '/nonexistent/tg-test-no-such-cc' not found",
                  "set CC");
  setenv("CC", "tg-test-no-such-cc-on-path", 1);
  cr_assert_null(jit_file("square", fixture("square.c"), in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "'tg-test-no-such-cc-on-path' not found");
}

JIT_TEST(a_source_without_the_entry_point) {
  cr_assert_null(jit_file("no_entry", fixture("no_entry.c"), in_cache(test_dir)));
  cr_assert(tg_extension_jit_compiled());
  /* The loader's reason reaches the caller, under the JIT's name. */
  tg_expect_error(TG_ERR_EXTENSION, "tg_extension_jit: tg_extension_load: ", "/libno_entry.so",
                  "not a tg extension", "TG_EXTENSION(api)");
  cr_assert_eq(tg_extension_count(), 0);
  /* The library itself was built: the next call loads it from the cache, and fails alike. */
  cr_assert_null(jit_file("no_entry", fixture("no_entry.c"), in_cache(test_dir)));
  cr_assert_not(tg_extension_jit_compiled());
  tg_expect_error(TG_ERR_EXTENSION, "not a tg extension");
}

JIT_TEST(a_cache_directory_others_can_write_is_refused) {
  cr_assert_eq(chmod(test_dir, 0777), 0);
  cr_assert_null(jit_file("square", fixture("square.c"), in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "cache directory", test_dir,
                  "writable by group or others (mode 0777)");
  cr_assert_not(tg_extension_jit_compiled());
  cr_assert_eq(compiler_runs(), 0);
  cr_assert_eq(chmod(test_dir, 0700), 0);

  /* An entry that is: refused too. */
  tg_extension *ext = jit_file("square", fixture("square.c"), in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  char entry[4096];
  snprintf(entry, sizeof entry, "%s", entry_of(ext));
  unload(ext);
  cr_assert_eq(chmod(entry, 0770), 0);
  cr_assert_null(jit_file("square", fixture("square.c"), in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "cache entry", "writable by group or others (mode 0770)");
}

JIT_TEST(a_symlinked_cache_directory_is_refused) {
  const char *real = path_in(test_dir, "real"), *link = path_in(test_dir, "link");
  cr_assert_eq(mkdir(real, 0700), 0);
  cr_assert_eq(symlink(real, link), 0);
  cr_assert_null(jit_file("square", fixture("square.c"), in_cache(link)));
  tg_expect_error(TG_ERR_EXTENSION, "cache directory", "is a symlink");
  const char *file = path_in(test_dir, "file");
  write_text(file, "not a directory");
  cr_assert_null(jit_file("square", fixture("square.c"), in_cache(file)));
  tg_expect_error(TG_ERR_EXTENSION, "is not a directory");
}

JIT_TEST(cuda_sources_need_a_tg_with_cuda) {
  if (tg_cuda_is_built()) return; /* this checks the CPU-only build's answer */
  cr_assert_null(
      tg_extension_jit_inline("k", NULL, "__global__ void k(void) {}", in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "'k.cu' is CUDA, but this tg was built without CUDA");
  const char *cu = path_in(test_dir, "k.cu");
  write_text(cu, "__global__ void k(void) {}\n");
  cr_assert_null(
      tg_extension_jit("k", 2, (const char *const[]){fixture("square.c"), cu}, in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "k.cu' is CUDA, but this tg was built without CUDA");
  cr_assert_eq(compiler_runs(), 0);
}

/* With real CUDA in tg: a .cu source compiled by nvcc, linked, loaded; its CPU forward runs
 * anywhere, its kernel where a GPU is. nvcc missing is a clear error. */
JIT_TEST(cuda_sources_compile_with_nvcc) {
  if (!tg_cuda_is_built()) return; /* the CPU build's answer is checked above */
  tg_extension *ext = jit_file("twice", fixture("twice.cu"), in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert(tg_extension_jit_compiled());
  const tg_op_desc *op = tg_op_lookup("jit_twice");
  cr_assert(op);
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_test_tensor_of(TG_F64, 1, (int64_t[]){3}, (double[]){1, -2, 3});
  tg_tensor *y = tg_apply1(op, 1, (const tg_tensor *const[]){x}, 0, NULL);
  cr_assert(y, "%s", tg_last_error_message());
  tg_test_expect_values(y, 3, (double[]){2, -4, 6}, 0);
  if (tg_cuda_is_available()) {
    tg_tensor *xc = tg_to_device(x, (tg_device){TG_CUDA, 0});
    tg_tensor *yc = xc ? tg_apply1(op, 1, (const tg_tensor *const[]){xc}, 0, NULL) : NULL;
    cr_assert(yc, "%s", tg_last_error_message());
    tg_test_expect_values(yc, 3, (double[]){2, -4, 6}, 0);
  }
  tg_scope_end(sc);
  cr_assert_eq(tg_extension_unload(ext), TG_OK, "%s", tg_last_error_message());

  /* The same text inline: <name>.cu in the entry. */
  char source[1 << 16];
  snprintf(source, sizeof source, "%s", read_text(fixture("twice.cu")));
  ext = tg_extension_jit_inline("twice_inline", NULL, source, in_cache(test_dir));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert_str_eq(read_text(path_in(entry_of(ext), "twice_inline.cu")), source);
  cr_assert_eq(tg_extension_unload(ext), TG_OK, "%s", tg_last_error_message());

  setenv("NVCC", "/nonexistent/tg-test-nvcc", 1);
  cr_assert_null(jit_file("twice", fixture("twice.cu"), in_cache(test_dir)));
  tg_expect_error(TG_ERR_EXTENSION, "compiler '/nonexistent/tg-test-nvcc' not found",
                  "set NVCC to CUDA's nvcc");
}

JIT_TEST(bad_arguments) {
  tg_jit_options opts = in_cache(test_dir);
  const char *src = fixture("square.c");
  cr_assert_null(jit_file(NULL, src, opts));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_extension_jit: name is NULL");
  cr_assert_null(jit_file("bad-name", src, opts));
  tg_expect_error(TG_ERR_ARGUMENT, "name 'bad-name' must be 1 to 64 characters of [A-Za-z0-9_]");
  cr_assert_null(jit_file("", src, opts));
  tg_expect_error(TG_ERR_ARGUMENT, "name ''");
  char long_name[80];
  memset(long_name, 'a', 65);
  long_name[65] = '\0';
  cr_assert_null(jit_file(long_name, src, opts));
  tg_expect_error(TG_ERR_ARGUMENT, "1 to 64 characters");
  cr_assert_null(tg_extension_jit("square", 0, (const char *const[]){src}, opts));
  tg_expect_error(TG_ERR_ARGUMENT, "'square' needs at least one source (n_sources 0)");
  cr_assert_null(tg_extension_jit("square", 1, NULL, opts));
  tg_expect_error(TG_ERR_ARGUMENT, "sources NULL");
  cr_assert_null(tg_extension_jit("square", 1, (const char *const[]){NULL}, opts));
  tg_expect_error(TG_ERR_ARGUMENT, "sources[0] is NULL");
  cr_assert_null(jit_file("square", path_in(test_dir, "square.cpp"), opts));
  tg_expect_error(TG_ERR_ARGUMENT, "square.cpp' is neither .c nor .cu");
  cr_assert_null(jit_file("square", path_in(test_dir, "missing.c"), opts));
  tg_expect_error(TG_ERR_EXTENSION, "cannot read source", "missing.c", "No such file");
  tg_jit_options bad = opts;
  bad.n_cflags = -1;
  cr_assert_null(jit_file("square", src, bad));
  tg_expect_error(TG_ERR_ARGUMENT, "opts.n_cflags is -1");
  bad = opts;
  bad.n_ldflags = 2;
  cr_assert_null(jit_file("square", src, bad));
  tg_expect_error(TG_ERR_ARGUMENT, "opts.n_ldflags is 2 with opts.ldflags NULL");
  bad = opts;
  bad.n_cflags = 1;
  bad.cflags = (const char *const[]){NULL};
  cr_assert_null(jit_file("square", src, bad));
  tg_expect_error(TG_ERR_ARGUMENT, "opts.cflags[0] is NULL");
  cr_assert_null(tg_extension_jit_inline("square", NULL, NULL, opts));
  tg_expect_error(TG_ERR_ARGUMENT,
                  "tg_extension_jit_inline: 'square' needs c_source or cuda_source");
  cr_assert_eq(compiler_runs(), 0);
  cr_assert_not(tg_extension_jit_compiled());
}
