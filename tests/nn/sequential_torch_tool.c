/* The C side of tests/nn/python/sequential_torch.py:
 *   sequential_torch_tool STATE INPUT OUTPUT
 * builds the script's model as a tg Sequential (float64):
 *   Flatten(), Linear(6, 5), ReLU(), Linear(5, 4), Tanh(), Linear(4, 3), Sigmoid()
 * loads the torch.nn.Sequential state dict STATE into it strictly (so every name must be
 * PyTorch's), runs it on INPUT's "x", and writes OUTPUT: "y", and "grad.<name>" for every
 * parameter, the gradients of sum(y). Exits 1 with tg's error message when a call fails,
 * 2 on bad usage. */
#include <stdio.h>

#include "tg/tg.h"

static int failed(const char *what) {
  fprintf(stderr, "sequential_torch_tool: %s: %s (%s)\n", what, tg_last_error_message(),
          tg_status_name(tg_last_error()));
  return 1;
}

static tg_status push(tg_module *seq, tg_module *child) {
  tg_status st = child ? tg_sequential_append(seq, child, NULL) : tg_last_error();
  if (st != TG_OK) tg_module_free(child);
  return st;
}

static tg_module *linear(int64_t in, int64_t out) {
  return tg_linear_module(tg_linear_new(in, out, true, TG_OPTS(.dtype = TG_F64), NULL));
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: sequential_torch_tool STATE INPUT OUTPUT\n");
    return 2;
  }
  tg_module *seq = tg_sequential_new();
  if (!seq) return failed("tg_sequential_new");
  tg_status st = push(seq, tg_flatten_layer_new(1, -1));
  if (st == TG_OK) st = push(seq, linear(6, 5));
  if (st == TG_OK) st = push(seq, tg_relu_layer_new());
  if (st == TG_OK) st = push(seq, linear(5, 4));
  if (st == TG_OK) st = push(seq, tg_tanh_layer_new());
  if (st == TG_OK) st = push(seq, linear(4, 3));
  if (st == TG_OK) st = push(seq, tg_sigmoid_layer_new());
  if (st != TG_OK) return failed("building the model");
  if (tg_module_load(seq, argv[1], true, NULL) != TG_OK) return failed("loading the state");
  tg_tensor_dict *in = tg_safetensors_load(argv[2]);
  if (!in) return failed("reading the input");
  tg_tensor *y = tg_module_forward(seq, tg_tensor_dict_get(in, "x"));
  if (!y) return failed("forward");
  if (tg_backward(tg_sum(y), NULL) != TG_OK) return failed("backward");
  tg_tensor_dict *out = tg_tensor_dict_new();
  st = out ? tg_tensor_dict_set(out, "y", y) : tg_last_error();
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(seq); i++) {
    const char *name;
    tg_tensor *p = tg_module_parameter(seq, i, &name);
    char key[300];
    snprintf(key, sizeof key, "grad.%s", name);
    st = tg_tensor_dict_set(out, key, tg_grad(p));
  }
  if (st == TG_OK) st = tg_safetensors_save(argv[3], out);
  if (st != TG_OK) return failed("writing the output");
  tg_tensor_dict_free(out);
  tg_tensor_dict_free(in);
  tg_module_free(seq);
  return 0;
}
