/* The lifetime checker (src/tensor/lifetime_check.h; built when TG_LIFETIME_CHECK is on:
 * Debug and sanitizer builds). Each misuse runs in a process of its own (tests/
 * lifetime_misuse.c), which must abort with a message naming the function, the tensor
 * (serial number, dtype, sizes) and its history (what made it, what freed it). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

#ifndef TG_LIFETIME_MISUSE
#error "TG_LIFETIME_MISUSE (the helper's path) is set by tests/CMakeLists.txt"
#endif

/* Runs the helper on one case; its stderr and stdout go into out. Returns the wait status. */
static int run_misuse(const char *which, char *out, size_t n) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "exec '%s' %s 2>&1", TG_LIFETIME_MISUSE, which);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p, "popen %s", cmd);
  size_t got = fread(out, 1, n - 1, p);
  out[got] = '\0';
  return pclose(p);
}

/* The case aborts (SIGABRT) and its message holds every given word. */
static void expect_abort(const char *which, const char *const *words) {
  char out[4096];
  int status = run_misuse(which, out, sizeof out);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
            "%s: expected an abort, got status %d: %s", which, status, out);
  cr_assert(strstr(out, "tg: lifetime check: "), "%s: %s", which, out);
  for (const char *const *w = words; *w; w++)
    cr_assert(strstr(out, *w), "%s: message lacks \"%s\": %s", which, *w, out);
}
#define EXPECT_ABORT(which, ...) expect_abort(which, (const char *const[]){__VA_ARGS__, NULL})

TG_TEST(lifetime_check, a_second_release_aborts_with_the_history) {
  EXPECT_ABORT("double_release", "tg_release: the tensor is tensor #", "(float32 [2, 3]",
               "made by tg_exp", "freed by tg_release", "freed already");
}

TG_TEST(lifetime_check, releasing_a_scope_owned_result_aborts) {
  EXPECT_ABORT("release_scope_owned", "tg_release: the tensor is tensor #", "(float32 [4]",
               "made by tg_exp", "belongs to a scope", "tg_retain");
}

TG_TEST(lifetime_check, using_a_freed_tensor_aborts) {
  EXPECT_ABORT("use_after_release", "tg_sum: ", "made by tg_exp", "freed by tg_release",
               "use after free");
  EXPECT_ABORT("use_after_scope_end", "tg_add: ", "(float32 [3]", "made by tg_exp",
               "freed by tg_scope_end", "use after free");
  EXPECT_ABORT("property_after_release", "tg_numel: t is tensor #", "freed by tg_release");
  EXPECT_ABORT("retain_after_release", "tg_retain: t is tensor #", "use after free");
}

/* The same, as a Criterion death test in this process. */
TG_TEST(lifetime_check, death_test_in_process, .signal = SIGABRT) {
  tg_tensor *y = tg_exp(tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT));
  tg_release(y); /* scope-owned: aborts */
}

/* Correct code is untouched: references the caller took, released once, and tensors the
 * scopes drain; the quarantine does not count as live. */
TG_TEST(lifetime_check, correct_ownership_passes) {
  int64_t live = tg_live_objects();
  tg_scope s = tg_scope_begin();
  tg_tensor *kept = tg_retain(tg_exp(tg_ones(TG_SHAPE(8), TG_OPTS_DEFAULT)));
  tg_tensor *twice = tg_retain(tg_retain(tg_narrow(kept, 0, 1, 2)));
  tg_scope_end(s);
  tg_release(twice);
  cr_assert_eq(tg_numel(twice), 2);
  tg_release(twice);
  tg_release(kept);
  for (int k = 0; k < 10000; k++) { /* more than the quarantine holds */
    tg_scope inner = tg_scope_begin();
    tg_add(tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT), tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT));
    tg_scope_end(inner);
  }
  cr_assert_eq(tg_live_objects(), live);
}
