/* tg_dist_all_reduce, tg_dist_broadcast, tg_dist_barrier, tg_dist_check_module,
 * tg_dist_broadcast_module: placeholders that link, replaced by the real ones next. */
#include "comm.h"

static tg_status not_yet(const char *name) {
  if (!tg__dist_ready(name)) return tg_last_error();
  return tg_set_error(TG_ERR_UNSUPPORTED, "%s: not implemented yet", name);
}

tg_status tg_dist_all_reduce(tg_tensor *t, tg_reduce_op op) {
  (void)t, (void)op;
  return not_yet("tg_dist_all_reduce");
}
tg_status tg_dist_broadcast(tg_tensor *t, int root) {
  (void)t, (void)root;
  return not_yet("tg_dist_broadcast");
}
tg_status tg_dist_barrier(void) { return tg__dist_barrier_host("tg_dist_barrier"); }
tg_status tg_dist_check_module(const tg_module *m) {
  (void)m;
  return not_yet("tg_dist_check_module");
}
tg_status tg_dist_broadcast_module(tg_module *m, int root) {
  (void)m, (void)root;
  return not_yet("tg_dist_broadcast_module");
}
