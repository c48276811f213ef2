/* The report of a failed TG_INTERNAL_ASSERT (internal_assert.h). Compiled in every build, so
 * that a program compiled with the asserts on links against a Release tg. */
#include <stdio.h>
#include <stdlib.h>

#include "tensor/internal_assert.h"

void tg__internal_assert_fail(const char *file, int line, const char *condition) {
  fprintf(stderr,
          "%s:%d: internal assertion failed: %s: this is a bug in tg, not in the calling "
          "program; please report it\n",
          file, line, condition);
  fflush(stderr);
  abort();
}
