/* Misuses the lifetime checker must stop (tests/tensor/test_lifetime_check.c runs one per process
 * and reads what it prints before the abort). Usage: lifetime_misuse <case>. */
#include <stdio.h>
#include <string.h>

#include "tg/tg.h"

/* A tensor the caller owns alone (its scope is closed), made by tg_exp. */
static tg_tensor *owned_exp(void) {
  tg_scope s = tg_scope_begin();
  tg_tensor *t = tg_retain(tg_exp(tg_zeros(TG_SHAPE(2, 3), TG_OPTS_DEFAULT)));
  tg_scope_end(s);
  return t;
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "double_release")) {
    tg_tensor *t = owned_exp();
    tg_release(t); /* the last reference: freed */
    tg_release(t);
  } else if (!strcmp(c, "release_scope_owned")) {
    tg_tensor *y = tg_exp(tg_ones(TG_SHAPE(4), TG_OPTS_DEFAULT)); /* the root scope's */
    tg_release(y);
  } else if (!strcmp(c, "use_after_release")) {
    tg_tensor *t = owned_exp();
    tg_release(t);
    tg_sum(t);
  } else if (!strcmp(c, "use_after_scope_end")) {
    tg_scope s = tg_scope_begin();
    tg_tensor *y = tg_exp(tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT));
    tg_scope_end(s);
    tg_add(y, y);
  } else if (!strcmp(c, "property_after_release")) {
    tg_tensor *t = owned_exp();
    tg_release(t);
    printf("%lld\n", (long long)tg_numel(t));
  } else if (!strcmp(c, "retain_after_release")) {
    tg_tensor *t = owned_exp();
    tg_release(t);
    tg_retain(t);
  } else {
    fprintf(stderr, "lifetime_misuse: unknown case '%s'\n", c);
    return 2;
  }
  printf("lifetime_misuse: %s was not stopped\n", c);
  return 0;
}
