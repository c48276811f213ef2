/* Allocation failure while loading, using and unloading an extension: every host allocation
 * of the step fails in turn (tests/alloc_sweep.h); each run reports TG_ERR_MEMORY with the
 * registry and the list of loaded extensions as they were, or succeeds.
 *
 * The sweep needs tg's internals, so this program has tg inside (static) and exports its API
 * (ENABLE_EXPORTS); the extension, ext_square.c built without linking libtg
 * (ext_square_unlinked), finds tg in the program. */
#include "testutil.h"

#include "alloc_sweep.h"
#include "tg/extension.h"

static tg_status load_use_unload(void *user, double *out, int *n_out) {
  (void)user;
  int ops_before = tg_op_count(), loaded_before = tg_extension_count();
  tg_extension *ext = tg_extension_load(TG_TEST_UNLINKED_EXT);
  if (!ext) {
    cr_assert_eq(tg_op_count(), ops_before, "a failed load left ops registered");
    cr_assert_eq(tg_extension_count(), loaded_before);
    return status_of(ext);
  }
  tg_status st = TG_OK;
  tg_scope sc = tg_scope_begin();
  const tg_op_desc *op = tg_op_lookup("ext_square");
  tg_tensor *x =
      op ? tg_from_data(TG_SHAPE(3), (double[]){1, 2, 3}, TG_OPTS(.dtype = TG_F64)) : NULL;
  if (x) st = tg_set_requires_grad(x, true);
  tg_tensor *y = x && st == TG_OK ? tg_apply1(op, 1, (const tg_tensor *const[]){x}, 0, NULL) : NULL;
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(y), NULL));
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  tg_scope_end(sc);
  /* The graph is gone: unloading allocates nothing and cannot fail. */
  tg_status unloaded = tg_extension_unload(ext);
  cr_assert_eq(unloaded, TG_OK, "unload failed: %s", tg_last_error_message());
  cr_assert_eq(tg_op_count(), ops_before);
  return st;
}

TG_TEST(extension_alloc, load_use_unload) {
  sweep_result r = sweep("load, use and unload an extension", load_use_unload, NULL);
  cr_assert_gt(r.failed, 0);
}
