/* Parameter-free activation layers (torch.nn.ReLU, Tanh, Sigmoid): the op applied to the
 * whole input, the same in training and evaluation. */
#include "nn/module_impl.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tg/nn.h"

static void activation_destroy(tg_module *m) { tg__host_free(m); }

static tg_tensor *relu_forward(tg_module *m, const tg_tensor *x) {
  (void)m;
  return tg_relu(x);
}
static tg_tensor *tanh_forward(tg_module *m, const tg_tensor *x) {
  (void)m;
  return tg_tanh(x);
}
static tg_tensor *sigmoid_forward(tg_module *m, const tg_tensor *x) {
  (void)m;
  return tg_sigmoid(x);
}

static const tg__module_class relu_class = {"relu", activation_destroy, relu_forward};
static const tg__module_class tanh_class = {"tanh", activation_destroy, tanh_forward};
static const tg__module_class sigmoid_class = {"sigmoid", activation_destroy, sigmoid_forward};

static tg_module *activation_new(const char *fn, const tg__module_class *cls) {
  tg_module *m = tg__host_calloc(1, sizeof *m);
  if (!m) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
    return NULL;
  }
  tg__module_init(m, cls);
  return m;
}

tg_module *tg_relu_layer_new(void) { return activation_new("tg_relu_layer_new", &relu_class); }
tg_module *tg_tanh_layer_new(void) { return activation_new("tg_tanh_layer_new", &tanh_class); }
tg_module *tg_sigmoid_layer_new(void) {
  return activation_new("tg_sigmoid_layer_new", &sigmoid_class);
}
