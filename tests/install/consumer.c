/* A program outside the tg tree: built against an installed tg by check_install.sh. */
#include <stdio.h>
#include <tg/tg.h>

int main(void) {
  tg_scope s = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(2, 3), TG_OPTS_DEFAULT); /* owned by s */
  if (!t || tg_print(t) != TG_OK) {
    fprintf(stderr, "consumer: %s\n", tg_last_error_message());
    return 1;
  }
  if (tg_scope_end(s) != TG_OK) return 1;
  if (tg_live_objects() != 0) {
    fprintf(stderr, "consumer: %lld objects still alive\n", (long long)tg_live_objects());
    return 1;
  }
  return 0;
}
