/* TG_INTERNAL_ASSERT's report and abort (src/tensor/internal_assert.h), forced on whatever
 * the build type (TG_INTERNAL_ASSERTS=1 on this target): a false condition must print
 * file:line, the condition and "this is a bug in tg", and must not return. ctest
 * (tests/extra/internal_assert.cmake) matches the report and fails on "not reached". */
#include <stdio.h>

#include "tensor/internal_assert.h"

int main(int argc, char **argv) {
  (void)argv;
  TG_INTERNAL_ASSERT(argc > 0); /* holds: no report */
  TG_INTERNAL_ASSERT(argc == 0 && "the death test's planted bug");
  printf("not reached\n");
  return 0;
}
