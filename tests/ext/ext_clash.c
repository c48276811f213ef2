/* A test extension whose second op clashes with the built-in "mul": loading it must leave
 * the registry as it was ("ext_clash_new" not registered either). */
#include "identity_op.h"

TG_EXTENSION(api) {
  tg_op_desc fresh = identity_op("ext_clash_new"), clash = identity_op("mul");
  tg_status st = api->register_op(api, &fresh);
  return st == TG_OK ? api->register_op(api, &clash) : st;
}
