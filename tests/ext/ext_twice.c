/* A test extension that offers one name twice (the second offer is refused; the entry point
 * ignores that, and loading must fail anyway). */
#include "identity_op.h"

TG_EXTENSION(api) {
  tg_op_desc op = identity_op("ext_twice_op");
  api->register_op(api, &op);
  api->register_op(api, &op);
  return TG_OK;
}
