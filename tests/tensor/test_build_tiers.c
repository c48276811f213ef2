/* The debugging tiers a build compiles in are the ones its configure step reports. Until
 * this test, CMakeLists.txt's tg_debug_tier tested if(on) -- the constant ON to CMake -- and
 * put the lifetime checker and the internal asserts into every Release build while printing
 * "OFF": the benchmarks measured their snprintf and quarantine (LLTM 16x32x128, composed, 1.5x
 * slower). TG_EXPECT_* come from the CMake variables the message prints. */
#include "testutil.h"

#ifndef TG_LIFETIME_CHECK
#define TG_LIFETIME_CHECK 0
#endif
#ifndef TG_INTERNAL_ASSERTS
#define TG_INTERNAL_ASSERTS 0
#endif

Test(build_tiers, lifetime_checker_as_configured) {
  cr_assert_eq(TG_LIFETIME_CHECK, TG_EXPECT_LIFETIME_CHECK,
               "TG_LIFETIME_CHECK is %d in the build, configure reported %d", TG_LIFETIME_CHECK,
               TG_EXPECT_LIFETIME_CHECK);
}

Test(build_tiers, internal_asserts_as_configured) {
  cr_assert_eq(TG_INTERNAL_ASSERTS, TG_EXPECT_INTERNAL_ASSERTS,
               "TG_INTERNAL_ASSERTS is %d in the build, configure reported %d", TG_INTERNAL_ASSERTS,
               TG_EXPECT_INTERNAL_ASSERTS);
}

/* A Release build left on AUTO (what the README's commands configure) has neither. */
Test(build_tiers, release_auto_has_neither) {
  if (!TG_EXPECT_RELEASE_AUTO) cr_skip_test("not a Release build with both tiers on AUTO");
  cr_assert_eq(TG_LIFETIME_CHECK, 0);
  cr_assert_eq(TG_INTERNAL_ASSERTS, 0);
}
