/* The GEMM engine per shape class (src/ops/cpu/gemm_choice.c): calibrated, cached, read back,
 * a corrupt or foreign cache ignored with a message, pinned from the environment, refused
 * with a clear error for an engine the process lacks, and the classes consistent with the
 * shapes they are timed at. Calibrations here run at tiny shapes (tg__gemm_calibration_quick):
 * what is tested is the machinery, not the speed (bench/gemm_engines.c measures that). */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/cpu/gemm_engine.h"
#include "tensor/host_memory.h"
#include "testutil.h"

static char dir[256], cache[300];

/* A private cache file in a fresh directory; auto engine choice; quick calibrations. */
static void setup(void) {
  snprintf(dir, sizeof dir, "%s/tg-gemm-choice-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  cr_assert(mkdtemp(dir), "mkdtemp");
  snprintf(cache, sizeof cache, "%s/engines.txt", dir);
  cr_assert_eq(setenv("TG_GEMM_CACHE", cache, 1), 0);
  unsetenv("TG_GEMM_ENGINE");
  unsetenv("BLIS_ARCH_TYPE");
  tg__gemm_calibration_quick(true);
}

static void teardown(void) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    char path[600];
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
      }
    closedir(d);
  }
  rmdir(dir);
}

TestSuite(gemm_choice, .init = setup, .fini = teardown);

/* Runs the choice again with stderr captured into out (up to size bytes). */
static void choose_capturing_stderr(char *out, size_t size) {
  char path[320];
  snprintf(path, sizeof path, "%s/stderr.txt", dir);
  fflush(stderr);
  const int saved = dup(2), fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  cr_assert(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  tg__gemm_choice_again();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  lseek(fd, 0, SEEK_SET);
  const ssize_t n = read(fd, out, size - 1);
  out[n > 0 ? n : 0] = '\0';
  close(fd);
  unlink(path);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert(f, "cannot open %s", path);
  static char text[65536];
  const size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  return text;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
}

/* The engine for each measured class's own shape: what a reload must reproduce. */
static void engines_per_class(const char *names[TG_GEMM_CLASSES]) {
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
    int64_t m, n, k;
    bool a_t, b_t, many;
    tg__gemm_class_shape(cls, &m, &n, &k, &a_t, &b_t, &many);
    names[cls] = tg_gemm_engine_for(m, n, k, a_t, b_t, many ? 2 : 1);
    cr_assert(names[cls], "%s", tg_last_error_message());
    cr_assert_geq(tg__gemm_engine_named(names[cls]), 0, "engine %s is not listed", names[cls]);
  }
}

/* mm against a plain loop in F64, for the engine in use. */
/* c = a @ b for a [m, k] and b [k, n], either given transposed (a_t: from [k, m], b_t: from
 * [n, k]), checked against F64. */
static void product_checked(int64_t m, int64_t n, int64_t k, bool a_t, bool b_t, uint64_t seed) {
  tg_scope sc = tg_scope_begin();
  tg_manual_seed(seed);
  tg_tensor *a = a_t ? tg_t(tg_randn(TG_SHAPE(k, m), (tg_options){0}, NULL))
                     : tg_randn(TG_SHAPE(m, k), (tg_options){0}, NULL);
  tg_tensor *b = b_t ? tg_t(tg_randn(TG_SHAPE(n, k), (tg_options){0}, NULL))
                     : tg_randn(TG_SHAPE(k, n), (tg_options){0}, NULL);
  tg_tensor *c = tg_mm(a, b);
  cr_assert(c, "%s", tg_last_error_message());
  tg_tensor *want = tg_mm(tg_to_dtype(a, TG_F64), tg_to_dtype(b, TG_F64));
  tg_assert_close(tg_to_dtype(c, TG_F64), want, 1e-4, 1e-4 * (double)k);
  tg_scope_end(sc);
}

static void check_products(void) {
  static const int64_t shapes[][3] = {{1, 1, 1}, {7, 33, 17}, {64, 48, 5}, {3, 200, 129}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int layout = 0; layout < 4; layout++)
      product_checked(shapes[s][0], shapes[s][2], shapes[s][1], layout & 1, layout & 2,
                      (uint64_t)(s * 4 + (size_t)layout + 1));
}

TG_TEST(gemm_choice, calibrates_on_first_use_then_reads_the_cache) {
  tg__gemm_choice_again();
  cr_assert_str_eq(tg_gemm_engine_source(), "calibrated");
  const char *text = read_file(cache);
  cr_assert(strncmp(text, "tg gemm engines 3, 160 classes\nkey ", 35) == 0, "cache starts: %.40s",
            text);
  cr_assert(strstr(text, "\nend\n"), "the cache has no end line");
  const char *first[TG_GEMM_CLASSES], *second[TG_GEMM_CLASSES];
  engines_per_class(first);
  check_products();

  tg__gemm_choice_again();
  cr_assert_str_eq(tg_gemm_engine_source(), "cache");
  engines_per_class(second);
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
    char name[48];
    tg__gemm_class_name(cls, name, sizeof name);
    cr_assert_str_eq(first[cls], second[cls], "class %s", name);
  }
  /* Written atomically: nothing but the cache is left in its directory. */
  DIR *d = opendir(dir);
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') cr_assert_str_eq(e->d_name, "engines.txt");
  closedir(d);
  check_products();
}

TG_TEST(gemm_choice, report_names_every_class) {
  cr_assert_eq(tg_gemm_calibrate(), TG_OK, "%s", tg_last_error_message());
  const size_t need = tg_gemm_engine_report(NULL, 0, true);
  char *buf = malloc(need + 1);
  cr_assert_eq(tg_gemm_engine_report(buf, need + 1, true), need);
  cr_assert(strstr(buf, "chosen by calibrated"), "%s", buf);
  int lines = 0;
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
    char name[48], line[64];
    tg__gemm_class_name(cls, name, sizeof name);
    snprintf(line, sizeof line, "\n%s ", name);
    if (tg__gemm_class_measured(cls)) {
      cr_assert(strstr(buf, line), "no line for %s in:\n%s", name, buf);
      lines++;
    }
  }
  cr_assert_eq(lines, 128); /* 2 one-thread sizes x 16, 3 sizes x 16 x 2 thread classes */
  /* Truncated output keeps snprintf's rules. */
  char small[16];
  cr_assert_eq(tg_gemm_engine_report(small, sizeof small, false),
               tg_gemm_engine_report(NULL, 0, false));
  cr_assert_eq(strlen(small), sizeof small - 1);
  free(buf);
}

/* Each way a cache can be wrong: ignored with a message, calibrated again, rewritten. */
TG_TEST(gemm_choice, corrupt_or_foreign_caches_are_ignored_with_a_message) {
  cr_assert_eq(tg_gemm_calibrate(), TG_OK, "%s", tg_last_error_message());
  char good[65536];
  snprintf(good, sizeof good, "%s", read_file(cache));
  const size_t len = strlen(good);
  char bad[65536 + 64];
  static const char *const reasons[9] = {
      [0] = "empty", [7] = "first line", [8] = "another version of the calibration"};
  for (int variant = 0; variant < 9; variant++) {
    snprintf(bad, sizeof bad, "%s", good);
    switch (variant) {
    case 0: /* empty */
      bad[0] = '\0';
      break;
    case 1: /* truncated mid-line */
      bad[len / 2] = '\0';
      break;
    case 2: /* another machine's key */
      memcpy(strstr(bad, "\nkey ") + 5, "Z", 1);
      break;
    case 3: /* an engine this process does not have */
      memcpy(strstr(bad, "\nengines ") + 9, "nope-", 5);
      break;
    case 4: /* a class line repeated over the next */
    {
      char *l1 = strstr(strstr(bad, "\nengines ") + 1, "\n") + 1;
      char *l2 = strchr(l1, '\n') + 1;
      const size_t n1 = (size_t)(l2 - l1);
      char *l3 = strchr(l2, '\n') + 1;
      memmove(l2 + n1, l3, strlen(l3) + 1);
      memcpy(l2, l1, n1);
      break;
    }
    case 5: /* something after the end */
      strcat(bad, "more\n");
      break;
    case 6: /* a time that is not a number */
      memcpy(strrchr(bad, '\n') - 8, "x", 1);
      break;
    case 7: /* binary */
      memset(bad, 0xff, 100);
      break;
    case 8: /* the format before BLIS's packed twins */
      memcpy(strstr(bad, "engines 3,") + 8, "2", 1);
      break;
    }
    write_file(cache, bad);
    char err[2048];
    choose_capturing_stderr(err, sizeof err);
    cr_assert(strstr(err, "tg: ignoring the GEMM engine cache"), "variant %d: stderr: %s", variant,
              err);
    cr_assert(!reasons[variant] || strstr(err, reasons[variant]), "variant %d: stderr: %s", variant,
              err);
    cr_assert_str_eq(tg_gemm_engine_source(), "calibrated", "variant %d", variant);
    tg__gemm_choice_again(); /* the rewritten cache is this machine's again */
    cr_assert_str_eq(tg_gemm_engine_source(), "cache", "variant %d", variant);
  }
}

TG_TEST(gemm_choice, an_unwritable_cache_is_reported_and_the_choice_still_made) {
  char file[400], path[450];
  snprintf(file, sizeof file, "%s/a-file", dir); /* a directory that cannot be made under it */
  write_file(file, "");
  snprintf(path, sizeof path, "%s/sub/engines.txt", file);
  cr_assert_eq(setenv("TG_GEMM_CACHE", path, 1), 0);
  char err[2048];
  choose_capturing_stderr(err, sizeof err);
  cr_assert(strstr(err, "could not write the GEMM engine cache"), "stderr: %s", err);
  cr_assert_str_eq(tg_gemm_engine_source(), "calibrated");
  check_products();
  /* "off": no cache at all, nothing printed. */
  cr_assert_eq(setenv("TG_GEMM_CACHE", "off", 1), 0);
  choose_capturing_stderr(err, sizeof err);
  cr_assert_str_eq(err, "");
  cr_assert_str_eq(tg_gemm_engine_source(), "calibrated");
}

/* A calibration on a busy machine is used, not cached. */
TG_TEST(gemm_choice, a_noisy_calibration_is_not_cached) {
  tg__gemm_calibration_assume_noisy(true);
  char err[2048];
  choose_capturing_stderr(err, sizeof err);
  cr_assert(strstr(err, "timings were disturbed") && strstr(err, "not cached"), "stderr: %s", err);
  cr_assert_str_eq(tg_gemm_engine_source(), "calibrated");
  cr_assert_neq(access(cache, F_OK), 0, "a noisy calibration was cached");
  check_products();
  tg__gemm_calibration_assume_noisy(false);
  cr_assert_eq(tg_gemm_calibrate(), TG_OK);
  cr_assert_eq(access(cache, F_OK), 0, "a quiet calibration was not cached");
}

TG_TEST(gemm_choice, every_engine_can_be_pinned) {
  const int engines = tg__gemm_engine_count();
  cr_assert_geq(engines, 1);
  for (int e = 0; e < engines; e++) {
    const char *name = tg__gemm_engine_at(e)->name;
    cr_assert_eq(setenv("TG_GEMM_ENGINE", name, 1), 0);
    tg__gemm_choice_again();
    cr_assert_str_eq(tg_gemm_engine_source(), "TG_GEMM_ENGINE");
    cr_assert_str_eq(tg_gemm_engine_for(64, 64, 64, false, false, 1), name);
    check_products();
    cr_log_info("pinned %s: products agree with F64", name);
  }
  cr_assert_neq(access(cache, F_OK), 0, "a pinned engine must not calibrate or write a cache");
}

TG_TEST(gemm_choice, builtin_rules_measure_nothing) {
  cr_assert_eq(setenv("TG_GEMM_ENGINE", "builtin", 1), 0);
  tg__gemm_choice_again();
  cr_assert_str_eq(tg_gemm_engine_source(), "TG_GEMM_ENGINE");
  const char *small = tg_gemm_engine_for(16, 160, 384, false, false, 1);
  cr_assert_str_eq(small, tg_small_gemm_engine() ? "libxsmm" : tg__gemm_engine_at(0)->name);
  /* libxsmm takes no transposed b: BLIS does. */
  cr_assert_str_eq(tg_gemm_engine_for(16, 160, 384, false, true, 1), tg__gemm_engine_at(0)->name);
  cr_assert_neq(access(cache, F_OK), 0, "builtin rules wrote a cache");
  /* No HUGE class starts on libxsmm (it does not block for caches; on an Emerald Rapids Xeon
   * it ran 3072 x 2048 x 256 at half BLIS skx's rate): its representative, 1024 x 1024 x 256
   * and the like, sits on libxsmm's 2^28 bound. */
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
    char name[48];
    tg__gemm_class_name(cls, name, sizeof name);
    if (strncmp(name, "huge/", 5) != 0) continue;
    int64_t m, n, k;
    bool a_t, b_t, many;
    tg__gemm_class_shape(cls, &m, &n, &k, &a_t, &b_t, &many);
    cr_assert_str_neq(tg_gemm_engine_for(m, n, k, a_t, b_t, many ? 2 : 1), "libxsmm", "%s", name);
  }
  check_products();
}

TG_TEST(gemm_choice, an_unknown_engine_fails_every_gemm_clearly) {
  cr_assert_eq(setenv("TG_GEMM_ENGINE", "cublas-on-cpu", 1), 0);
  tg__gemm_choice_again();
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(4, 5), (tg_options){0});
  cr_assert_null(tg_mm(a, tg_t(a)));
  cr_assert_eq(tg_last_error(), TG_ERR_ARGUMENT);
  const char *msg = tg_last_error_message();
  cr_assert(strstr(msg, "TG_GEMM_ENGINE='cublas-on-cpu'") && strstr(msg, "blis-"), "%s", msg);
  tg_clear_error();
  cr_assert_null(tg_gemm_engine_source());
  cr_assert_eq(tg_last_error(), TG_ERR_ARGUMENT);
  tg_clear_error();
  tg_scope_end(sc);
  unsetenv("TG_GEMM_ENGINE");
  tg__gemm_choice_again();
  cr_assert_str_eq(tg_gemm_engine_source(), "calibrated");
}

TG_TEST(gemm_choice, engine_for_refuses_bad_arguments) {
  cr_assert_null(tg_gemm_engine_for(-1, 2, 3, false, false, 1));
  cr_assert_eq(tg_last_error(), TG_ERR_ARGUMENT);
  cr_assert(strstr(tg_last_error_message(), "tg_gemm_engine_for"));
  tg_clear_error();
  cr_assert_null(tg_gemm_engine_for(2, 2, 3, false, false, 0));
  cr_assert_eq(tg_last_error(), TG_ERR_ARGUMENT);
  tg_clear_error();
}

/* An allocation that fails mid-calibration: TG_ERR_MEMORY, and the previous choice stays. */
TG_TEST(gemm_choice, a_failed_calibration_keeps_the_previous_choice) {
  cr_assert_eq(tg_gemm_calibrate(), TG_OK, "%s", tg_last_error_message());
  const char *before[TG_GEMM_CLASSES], *after[TG_GEMM_CLASSES];
  engines_per_class(before);
  for (int64_t k = 1; k <= 8; k++) {
    tg__host_fail_allocation(k);
    const tg_status st = tg_gemm_calibrate();
    tg__host_fail_allocation(0);
    cr_assert_eq(st, TG_ERR_MEMORY, "failing allocation %ld", (long)k);
    cr_assert(strstr(tg_last_error_message(), "tg_gemm_calibrate: out of memory"), "%s",
              tg_last_error_message());
    tg_clear_error();
    engines_per_class(after);
    for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) cr_assert_str_eq(before[cls], after[cls]);
  }
}

/* Each measured class's own shape falls in that class; the LLTM's products fall where
 * gemm_classes.c says. */
TG_TEST(gemm_choice, classes_hold_their_shapes) {
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
    if (!tg__gemm_class_measured(cls)) continue;
    int64_t m, n, k;
    bool a_t, b_t, many;
    tg__gemm_class_shape(cls, &m, &n, &k, &a_t, &b_t, &many);
    char name[48];
    tg__gemm_class_name(cls, name, sizeof name);
    cr_assert_eq(tg__gemm_class_of(m, n, k, a_t, b_t, many ? 2 : 1), cls, "%s: %ld x %ld x %ld",
                 name, (long)m, (long)n, (long)k);
    cr_assert_eq(tg__gemm_class_named(name), cls);
    int64_t fm, fn, fk;
    tg__gemm_class_far_shape(cls, &fm, &fn, &fk);
    cr_assert_eq(tg__gemm_class_of(fm, fn, fk, a_t, b_t, many ? 2 : 1), cls,
                 "%s far: %ld x %ld x %ld", name, (long)fm, (long)fn, (long)fk);
    cr_assert_gt((double)fm * (double)fn + (double)fn * (double)fk + (double)fm * (double)fk,
                 (double)m * (double)n + (double)n * (double)k + (double)m * (double)k,
                 "%s: the far shape's operands are no larger", name);
  }
  char name[48];
  tg__gemm_class_name(tg__gemm_class_of(64, 384, 1152, false, true, 2), name, sizeof name);
  cr_assert_str_eq(name, "mid/m-short/NT/tN"); /* the forward X @ W^T at 64 x 1024 x 128 */
  tg__gemm_class_name(tg__gemm_class_of(384, 1152, 64, true, false, 1), name, sizeof name);
  cr_assert_str_eq(name, "mid/k-short/TN/t1"); /* d_W = d_gates^T @ X */
  tg__gemm_class_name(tg__gemm_class_of(16, 16, 16, false, false, 2), name, sizeof name);
  cr_assert_str_eq(name, "tiny/even/NN/tN");
  cr_assert_eq(tg__gemm_class_canonical(tg__gemm_class_of(16, 16, 16, false, false, 2)),
               tg__gemm_class_of(16, 16, 16, false, false, 1));
  cr_assert_eq(tg__gemm_class_named("giant/even/NN/t1"), -1);
  cr_assert_eq(tg__gemm_class_named("huge/even/NN/t3"), -1);
}

/* ---- exact small shapes (gemm_shapes.c) ---- */

/* A clock on which engine `fast` runs 10 ns and every other 100: elapsed is the end call's
 * step, since each timed run reads the clock at its start and its end. */
static int fast_engine = -1;
static int64_t fake_now;
static int64_t fake_clock(int engine) { return fake_now += engine == fast_engine ? 10 : 100; }

static int settled_count_reported(void) {
  static char report[8192];
  tg_gemm_engine_report(report, sizeof report, false);
  const char *at = strstr(report, "exact shapes settled: ");
  cr_assert(at, "%s", report);
  return atoi(at + strlen("exact shapes settled: "));
}

static void shapes_teardown(void) {
  tg__gemm_shapes_fake_clock(NULL);
  unsetenv("TG_GEMM_SHAPES");
  tg_set_deterministic(false);
  teardown();
}

TestSuite(gemm_shapes, .init = setup, .fini = shapes_teardown);

TG_TEST(gemm_shapes, a_small_shape_settles_on_its_fastest_engine_at_its_first_call) {
  tg__gemm_choice_again();
  cr_assert_str_eq(tg_gemm_engine_source(), "calibrated");
  const int engines = tg__gemm_engine_count();
  /* Each engine in turn as the fastest, each on a shape of its own (16 x 384 x 160 + e). */
  for (fast_engine = 0; fast_engine < engines; fast_engine++) {
    tg__gemm_shapes_fake_clock(fake_clock);
    const int64_t m = 16, n = 384, k = 160 + fast_engine;
    product_checked(m, n, k, false, false, 1);
    cr_assert_str_eq(tg_gemm_engine_for(m, n, k, false, false, 1),
                     tg__gemm_engine_at(fast_engine)->name);
    /* The shape in F32 and, from product_checked's reference, in F64. */
    cr_assert_eq(settled_count_reported(), 2 * (fast_engine + 1));
    product_checked(m, n, k, false, false, 2);
  }
  /* Another layout is another shape, still the class's. */
  cr_assert_eq(tg__gemm_shape_settled(&(tg_gemm_problem){.dtype = TG_F32,
                                                         .m = 16,
                                                         .n = 384,
                                                         .k = 160,
                                                         .a_rs = 160,
                                                         .a_cs = 1,
                                                         .b_rs = 1,
                                                         .b_cs = 160,
                                                         .threads = 1}),
               -1);
}

TG_TEST(gemm_shapes, an_engine_that_declines_the_shape_is_never_chosen) {
  const int xsmm = tg__gemm_engine_named("libxsmm");
  if (xsmm < 0) cr_skip_test("no libxsmm in this build: no engine declines a layout");
  tg__gemm_choice_again();
  fast_engine = xsmm; /* the fastest, had it run: it takes no transposed b */
  tg__gemm_shapes_fake_clock(fake_clock);
  product_checked(16, 96, 40, false, true, 1);
  cr_assert_eq(settled_count_reported(), 2); /* F32, and F64 for the reference */
  /* (tg_gemm_engine_for would hide it: it names the rules' engine where libxsmm declines) */
  const tg_gemm_problem p = {.dtype = TG_F32,
                             .m = 16,
                             .n = 96,
                             .k = 40,
                             .a_rs = 40,
                             .a_cs = 1,
                             .b_rs = 1,
                             .b_cs = 40,
                             .threads = 1};
  const int settled = tg__gemm_shape_settled(&p);
  cr_assert(settled >= 0 && settled != xsmm, "settled on %d (libxsmm is %d)", settled, xsmm);
  product_checked(16, 96, 40, false, true, 7);
}

/* Nothing is tuned where results must not depend on timing, where the user said so, and where
 * no table chose. */
static void runs_untuned(int64_t m, int64_t n, int64_t k) {
  fast_engine = tg__gemm_engine_count() - 1;
  tg__gemm_shapes_fake_clock(fake_clock);
  const char *before = tg_gemm_engine_for(m, n, k, false, false, 1);
  for (int call = 0; call < TG_GEMM_SHAPE_ROUNDS * tg__gemm_engine_count() + 1; call++)
    product_checked(m, n, k, false, false, (uint64_t)call + 1);
  cr_assert_str_eq(tg_gemm_engine_for(m, n, k, false, false, 1), before);
  if (tg__gemm_choice_measured()) cr_assert_eq(settled_count_reported(), 0);
}

TG_TEST(gemm_shapes, deterministic_mode_tunes_nothing) {
  tg__gemm_choice_again();
  tg_set_deterministic(true);
  runs_untuned(16, 384, 160);
}

TG_TEST(gemm_shapes, tg_gemm_shapes_off_tunes_nothing) {
  cr_assert_eq(setenv("TG_GEMM_SHAPES", "off", 1), 0);
  tg__gemm_choice_again();
  runs_untuned(16, 384, 160);
}

TG_TEST(gemm_shapes, builtin_rules_tune_nothing) {
  cr_assert_eq(setenv("TG_GEMM_ENGINE", "builtin", 1), 0);
  tg__gemm_choice_again();
  runs_untuned(16, 384, 160);
}

/* A product of two threads is tuned as a team runs it, among the engines that take the whole
 * product (OpenBLAS takes one thread only), and settles as a shape of its own. Asked of
 * gemm_shapes.c directly: whether cpu_gemm.c gives a product two threads depends on the load
 * (cpu_contention.c) and on whether the pool's workers sleep. */
TG_TEST(gemm_shapes, a_threaded_product_settles_on_its_teams_fastest_engine) {
  tg__gemm_choice_again();
  cr_assert(tg__gemm_choice_measured());
  const int engines = tg__gemm_engine_count();
  const int64_t m = 128, n = 256, k0 = 128;
  const tg_gemm_problem two = {.dtype = TG_F32, .m = m, .n = n, .k = k0, .threads = 2};
  cr_assert_eq(tg__gemm_block_of(&two).n, n / 2, "blocks of out's longer side, one per thread");
  cr_assert_eq(tg__gemm_block_of(&two).m, m);
  for (fast_engine = 0; fast_engine < engines; fast_engine++) {
    tg_scope sc = tg_scope_begin();
    const int64_t k = k0 + 16 * fast_engine; /* a shape of its own per fastest engine */
    tg_tensor *a = tg_randn(TG_SHAPE(m, k), (tg_options){0}, NULL);
    tg_tensor *b = tg_randn(TG_SHAPE(k, n), (tg_options){0}, NULL);
    tg_tensor *c = tg_zeros(TG_SHAPE(m, n), (tg_options){0});
    cr_assert(a && b && c);
    const tg_gemm_problem p = {
        TG_F32, m,   n,   k, tg_data_ptr(c), n, 1, tg_data_ptr(a), k, 1, tg_data_ptr(b), n,
        1,      1.0, 0.0, 2};
    tg__gemm_shapes_fake_clock(fake_clock);
    const int chosen = tg__gemm_shape_engine(&p, 0);
    tg__gemm_shapes_fake_clock(NULL);
    cr_assert_eq(tg__gemm_shape_settled(&p), chosen);
    const tg_gemm_problem one = {
        TG_F32, m,   n,   k, tg_data_ptr(c), n, 1, tg_data_ptr(a), k, 1, tg_data_ptr(b), n,
        1,      1.0, 0.0, 1};
    cr_assert_eq(tg__gemm_shape_settled(&one), -1, "one thread is another shape");
    if (tg__gemm_engine_takes(fast_engine, &p))
      cr_assert_eq(chosen, fast_engine, "%s", tg__gemm_engine_at(fast_engine)->name);
    else
      cr_assert_eq(chosen, 0, "%s takes no two-thread product: the class's engine",
                   tg__gemm_engine_at(fast_engine)->name);
    cr_assert_eq(settled_count_reported(), fast_engine + 1);
    tg_scope_end(sc);
  }
}

/* Past TG_GEMM_SHAPE_MAX_MACS a block keeps its class's engine: nothing is timed (no data is
 * read: the problem's pointers are NULL). */
TG_TEST(gemm_shapes, products_past_the_tuning_bound_keep_their_class_engine) {
  tg__gemm_choice_again();
  const tg_gemm_problem big = {.dtype = TG_F32,
                               .m = 1024,
                               .n = 1024,
                               .k = 1024,
                               .a_rs = 1024,
                               .a_cs = 1,
                               .b_rs = 1024,
                               .b_cs = 1,
                               .c_rs = 1024,
                               .c_cs = 1,
                               .alpha = 1,
                               .threads = 1};
  cr_assert_eq(tg__gemm_shape_engine(&big, 1), 1);
  cr_assert_eq(tg__gemm_shape_settled(&big), -1);
  cr_assert_eq(settled_count_reported(), 0);
}

TG_TEST(gemm_shapes, more_shapes_than_slots_keep_their_class_engine) {
  tg__gemm_choice_again();
  fast_engine = tg__gemm_engine_count() - 1;
  tg__gemm_shapes_fake_clock(fake_clock);
  for (int64_t s = 0; s < 1100; s++)
    for (int call = 0; call < 2; call++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *a = tg_full(TG_SHAPE(1, 1 + s % 40), 1.0, (tg_options){0});
      tg_tensor *b = tg_full(TG_SHAPE(1 + s % 40, 1 + s / 40), 2.0, (tg_options){0});
      tg_tensor *c = tg_mm(a, b);
      cr_assert(c, "%s", tg_last_error_message());
      double v = 0;
      cr_assert_eq(tg_get(c, (int64_t[]){0, s / 40}, &v), TG_OK);
      cr_assert_eq(v, 2.0 * (double)(1 + s % 40), "shape %ld, call %d", (long)s, call);
      tg_scope_end(sc);
    }
  const int settled = settled_count_reported();
  cr_assert(settled > 900 && settled <= 1024, "%d shapes settled", settled);
}

/* From its first call on, a shape runs on one engine: the same product gives the same bits
 * every time (gradcheck runs a backward twice and wants them; the install check's gradcheck
 * of lltm_ext failed when the first calls explored the engines in turn). */
TG_TEST(gemm_shapes, one_shape_gives_the_same_bits_from_its_first_call) {
  tg__gemm_choice_again();
  for (int dt = 0; dt < 2; dt++) {
    tg_scope sc = tg_scope_begin();
    tg_manual_seed(5);
    const tg_options o = {.dtype = dt ? TG_F64 : TG_F32};
    tg_tensor *a = tg_randn(TG_SHAPE(7, 300), o, NULL), *b = tg_randn(TG_SHAPE(300, 45), o, NULL);
    tg_tensor *first = tg_mm(a, b);
    cr_assert(first, "%s", tg_last_error_message());
    for (int call = 0; call < 3 * TG_GEMM_MAX_ENGINES; call++) {
      tg_scope inner = tg_scope_begin();
      tg_tensor *again = tg_mm(a, b);
      cr_assert(again);
      cr_assert_eq(memcmp(tg_data_ptr(first), tg_data_ptr(again),
                          (size_t)tg_numel(first) * (dt ? sizeof(double) : sizeof(float))),
                   0, "%s, call %d: other bits", dt ? "F64" : "F32", call);
      tg_scope_end(inner);
    }
    tg_scope_end(sc);
  }
}
