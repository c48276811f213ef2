/* The generic forward (tg/module.h): one tensor in, one out, through the module type's
 * forward or one the user set on a module of their own. */
#include "nn/module_impl.h"
#include "tensor/error_impl.h"
#include "tensor/tensor_impl.h"

bool tg__module_has_forward(const tg_module *m) {
  return (m->cls && m->cls->forward) || m->user_forward;
}

tg_tensor *tg_module_forward(tg_module *m, const tg_tensor *x) {
  static const char *fn = "tg_module_forward";
  if (!tg__check_not_null(fn, "m", m) || !tg__check_arg(fn, "x", x)) return NULL;
  if (!tg__module_has_forward(m)) {
    tg__fail(TG_ERR_UNSUPPORTED, fn,
             "a %s module has no one-tensor forward (%s); call the layer's own forward "
             "function, or give a module of your own one with tg_module_set_forward",
             tg_module_type(m),
             m->cls ? "it takes other arguments" : "made by tg_module_new without one");
    return NULL;
  }
  tg_tensor *y =
      m->cls && m->cls->forward ? m->cls->forward(m, x) : m->user_forward(m, x, m->user_data);
  if (!y && tg_last_error() == TG_OK)
    tg__fail(TG_ERR_STATE, fn, "the forward of the %s module returned NULL without an error",
             tg_module_type(m));
  return y;
}

tg_status tg_module_set_forward(tg_module *m, tg_module_forward_fn forward, void *user) {
  static const char *fn = "tg_module_set_forward";
  if (!tg__check_not_null(fn, "m", m)) return tg_last_error();
  if (m->cls)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: a %s module is a built-in layer with a forward of its own; only "
                        "modules made by tg_module_new take one",
                        fn, tg_module_type(m));
  m->user_forward = forward;
  m->user_data = forward ? user : NULL;
  return TG_OK;
}
