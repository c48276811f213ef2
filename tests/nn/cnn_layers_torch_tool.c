/* The C side of tests/nn/python/cnn_layers_torch.py:
 *   cnn_layers_torch_tool MODEL STATE INPUT OUTPUT
 * builds the script's model MODEL ("a" or "b") as a tg Sequential (float64), loads the torch
 * state dict STATE into it strictly, runs it in training on INPUT's "x1" and then "x2" (the
 * gradients of sum(y) for the second), and in evaluation on "x1", and writes OUTPUT:
 * "y_train", "y_eval", "grad.<name>" for every parameter and "state.<name>" for every entry of
 * the state afterwards (the running statistics). Exits 1 with tg's error message when a call
 * fails, 2 on bad usage. */
#include <stdio.h>
#include <string.h>

#include "tg/tg.h"

static const tg_options f64 = {.dtype = TG_F64};

static int failed(const char *what) {
  fprintf(stderr, "cnn_layers_torch_tool: %s: %s (%s)\n", what, tg_last_error_message(),
          tg_status_name(tg_last_error()));
  return 1;
}

static tg_status push(tg_module *seq, tg_module *child) {
  tg_status st = child ? tg_sequential_append(seq, child, NULL) : tg_last_error();
  if (st != TG_OK) tg_module_free(child);
  return st;
}

static tg_status put_all(tg_tensor_dict *out, const char *prefix, const tg_tensor_dict *from) {
  tg_status st = from ? TG_OK : tg_last_error();
  for (int i = 0; st == TG_OK && i < tg_tensor_dict_size(from); i++) {
    char key[300];
    snprintf(key, sizeof key, "%s%s", prefix, tg_tensor_dict_name(from, i));
    st = tg_tensor_dict_set(out, key, tg_tensor_dict_at(from, i));
  }
  return st;
}

/* Conv2d(3, 4, 3, padding=1), BatchNorm2d(4), ReLU(), MaxPool2d(2), Flatten(), Linear(64, 5) */
static tg_status model_a(tg_module *seq) {
  tg_conv2d_opts pad1 = {.padding = {1, 1}};
  tg_status st = push(seq, tg_conv2d_layer_module(tg_conv2d_layer_new(3, 4, (const int64_t[]){3, 3},
                                                                      &pad1, true, f64, NULL)));
  if (st == TG_OK) st = push(seq, tg_batch_norm2d_layer_new(4, 1e-5, 0.1, true, true, f64));
  if (st == TG_OK) st = push(seq, tg_relu_layer_new());
  if (st == TG_OK)
    st = push(seq, tg_max_pool2d_layer_new((const int64_t[]){2, 2},
                                           (tg_max_pool2d_options){.ceil_mode = false}));
  if (st == TG_OK) st = push(seq, tg_flatten_layer_new(1, -1));
  if (st == TG_OK) st = push(seq, tg_linear_module(tg_linear_new(64, 5, true, f64, NULL)));
  return st;
}

/* the script's model_b, layer by layer */
static tg_status model_b(tg_module *seq) {
  tg_conv2d_opts conv = {.stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 1}, .groups = 3};
  tg_status st = push(seq, tg_conv2d_layer_module(tg_conv2d_layer_new(3, 6, (const int64_t[]){3, 2},
                                                                      &conv, false, f64, NULL)));
  if (st == TG_OK) st = push(seq, tg_group_norm_layer_new(3, 6, 1e-4, true, f64));
  tg_avg_pool2d_options avg = {.padding = {1, 1}, .ceil_mode = true, .exclude_padding = true};
  if (st == TG_OK) st = push(seq, tg_avg_pool2d_layer_new((const int64_t[]){2, 2}, avg));
  if (st == TG_OK)
    st = push(seq, tg_layer_norm_layer_new(2, (const int64_t[]){4, 3}, 1e-5, true, f64));
  if (st == TG_OK) st = push(seq, tg_adaptive_avg_pool2d_layer_new((const int64_t[]){3, -1}));
  if (st == TG_OK) st = push(seq, tg_flatten_layer_new(2, -1));
  tg_conv1d_opts same = {.padding_mode = TG_CONV_PADDING_SAME};
  if (st == TG_OK)
    st = push(seq, tg_conv1d_layer_module(tg_conv1d_layer_new(6, 4, 3, &same, true, f64, NULL)));
  if (st == TG_OK)
    st = push(seq, tg_batch_norm1d_layer_new(4, 1e-5, TG_BATCH_NORM_CUMULATIVE, true, true, f64));
  if (st == TG_OK) st = push(seq, tg_relu_layer_new());
  if (st == TG_OK) st = push(seq, tg_flatten_layer_new(1, -1));
  if (st == TG_OK) st = push(seq, tg_dropout_layer_new(0.0, NULL));
  if (st == TG_OK) st = push(seq, tg_linear_module(tg_linear_new(36, 2, true, f64, NULL)));
  if (st == TG_OK) st = push(seq, tg_batch_norm1d_layer_new(2, 1e-3, 0.3, false, true, f64));
  return st;
}

int main(int argc, char **argv) {
  if (argc != 5 || (strcmp(argv[1], "a") != 0 && strcmp(argv[1], "b") != 0)) {
    fprintf(stderr, "usage: cnn_layers_torch_tool a|b STATE INPUT OUTPUT\n");
    return 2;
  }
  argv++; /* argv[1..3]: STATE INPUT OUTPUT */
  tg_module *seq = tg_sequential_new();
  if (!seq) return failed("tg_sequential_new");
  tg_status st = argv[0][0] == 'a' ? model_a(seq) : model_b(seq);
  if (st != TG_OK) return failed("building the model");
  if (tg_module_load(seq, argv[1], true, NULL) != TG_OK) return failed("loading the state");
  tg_tensor_dict *in = tg_safetensors_load(argv[2]);
  if (!in) return failed("reading the input");
  tg_module_train(seq, true);
  if (!tg_module_forward(seq, tg_tensor_dict_get(in, "x1"))) return failed("forward x1");
  tg_tensor *y_train = tg_module_forward(seq, tg_tensor_dict_get(in, "x2"));
  if (!y_train) return failed("forward x2");
  if (tg_backward(tg_sum(y_train), NULL) != TG_OK) return failed("backward");
  tg_module_train(seq, false);
  tg_tensor *y_eval = tg_module_forward(seq, tg_tensor_dict_get(in, "x1"));
  if (!y_eval) return failed("forward in evaluation");
  tg_tensor_dict *out = tg_tensor_dict_new();
  st = out ? tg_tensor_dict_set(out, "y_train", y_train) : tg_last_error();
  if (st == TG_OK) st = tg_tensor_dict_set(out, "y_eval", y_eval);
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(seq); i++) {
    const char *name;
    tg_tensor *p = tg_module_parameter(seq, i, &name);
    char key[300];
    snprintf(key, sizeof key, "grad.%s", name);
    st = tg_tensor_dict_set(out, key, tg_grad(p));
  }
  tg_tensor_dict *state = st == TG_OK ? tg_module_state_dict(seq) : NULL;
  if (st == TG_OK) st = put_all(out, "state.", state);
  if (st == TG_OK) st = tg_safetensors_save(argv[3], out);
  if (st != TG_OK) return failed("writing the output");
  tg_tensor_dict_free(state);
  tg_tensor_dict_free(out);
  tg_tensor_dict_free(in);
  tg_module_free(seq);
  return 0;
}
