/* The C side of tests/nn/python/cnn_torch.py: trains examples/train_cnn.c's model (the
 * same code, examples/cnn/cnn_model.c) for the steps the script gives and writes what the
 * script compares with PyTorch:
 *   cnn_torch_tool f32|f64 sgd|adam LR BATCHES INIT FINAL
 * BATCHES (safetensors): "x" [S, B, 1, H, W] of the dtype and "y" [S, B] (I64 classes 0..9).
 * The model (c1 4, c2 8 channels, 10 classes, seed 7) is written to INIT before the first
 * step (its state: parameters and batch norm's running statistics); then S steps of SGD
 * (momentum 0.9) or Adam (PyTorch's defaults) at LR on the batches in order, in training
 * mode; then FINAL: the state again and "losses" [S] (F64). Exits 1 with tg's error message
 * when a call fails, 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn/cnn_model.h"
#include "tg/tg.h"

static int failed(const char *what) {
  fprintf(stderr, "cnn_torch_tool: %s: %s (%s)\n", what, tg_last_error_message(),
          tg_status_name(tg_last_error()));
  return 1;
}

int main(int argc, char **argv) {
  int f64 = argc == 7 && strcmp(argv[1], "f64") == 0, adam = argc == 7 && !strcmp(argv[2], "adam");
  if (argc != 7 || (!f64 && strcmp(argv[1], "f32")) || (!adam && strcmp(argv[2], "sgd"))) {
    fprintf(stderr, "usage: cnn_torch_tool f32|f64 sgd|adam LR BATCHES INIT FINAL\n");
    return 2;
  }
  double lr = atof(argv[3]);
  tg_tensor_dict *batches = tg_safetensors_load(argv[4]);
  if (!batches) return failed("reading the batches");
  tg_tensor *xs = tg_tensor_dict_get(batches, "x"), *ys = tg_tensor_dict_get(batches, "y");
  if (!xs || !ys || tg_ndim(xs) != 5 || tg_ndim(ys) != 2) {
    fprintf(stderr, "cnn_torch_tool: %s needs x [S, B, C, H, W] and y [S, B]\n", argv[4]);
    return 2;
  }
  tg_generator *init = tg_generator_new(7);
  cnn_sizes sizes = {.channels = tg_size(xs, 2),
                     .height = tg_size(xs, 3),
                     .width = tg_size(xs, 4),
                     .c1 = 4,
                     .c2 = 8,
                     .classes = 10};
  cnn_model *m = init ? cnn_model_new(sizes, CNN_COMPOSED, f64 ? TG_F64 : TG_F32, init) : NULL;
  tg_generator_free(init);
  if (!m) return failed("the model");
  if (tg_module_save(m->module, argv[5]) != TG_OK) return failed("writing INIT");
  tg_optimizer *opt = adam ? tg_adam_for(m->module, (tg_adam_options){.lr = lr})
                           : tg_sgd_for(m->module, (tg_sgd_options){.lr = lr, .momentum = 0.9});
  if (!opt) return failed("the optimizer");
  int64_t steps = tg_size(xs, 0);
  double *losses = malloc(sizeof *losses * (size_t)steps);
  tg_status st = losses ? TG_OK : tg_set_error(TG_ERR_MEMORY, "cnn_torch_tool: out of memory");
  for (int64_t s = 0; s < steps && st == TG_OK; s++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *loss =
        tg_cross_entropy(cnn_model_logits(m, tg_select(xs, 0, s)), tg_select(ys, 0, s));
    st = loss ? tg_item(loss, &losses[s]) : tg_last_error();
    if (st == TG_OK) st = tg_optimizer_zero_grad(opt);
    if (st == TG_OK) st = tg_backward(loss, NULL);
    if (st == TG_OK) st = tg_optimizer_step(opt);
    tg_scope_end(sc);
  }
  if (st != TG_OK) return failed("training");
  tg_scope sc = tg_scope_begin();
  tg_tensor_dict *out = tg_module_state_dict(m->module);
  tg_tensor *l = tg_from_data(TG_SHAPE(steps), losses, (tg_options){.dtype = TG_F64});
  st = out && l ? tg_tensor_dict_set(out, "losses", l) : tg_last_error();
  if (st == TG_OK) st = tg_safetensors_save(argv[6], out);
  tg_scope_end(sc);
  if (st != TG_OK) return failed("writing FINAL");
  tg_tensor_dict_free(out);
  free(losses);
  tg_optimizer_free(opt);
  cnn_model_free(m);
  tg_tensor_dict_free(batches);
  return 0;
}
