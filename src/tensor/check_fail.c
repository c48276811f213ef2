/* tg__fail, the failure half of check.h's tg__check, alone in its file: it needs only the
 * public error API, so libtg_dist.so, which cannot see libtg.so's hidden internals, compiles
 * its own copy (cmake/TgDist.cmake), as it does host_memory.c. */
#include <stdarg.h>
#include <stdio.h>

#include "tensor/check.h"

bool tg__fail(tg_status code, const char *fn, const char *fmt, ...) {
  char msg[1024]; /* the size of the error message itself (error.c) */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tg_set_error(code, "%s: %s", fn, msg);
  return false;
}
