/* The CNN layers on CUDA: a Sequential of every layer (Conv2d, BatchNorm2d, ReLU, MaxPool2d,
 * GroupNorm, LayerNorm, AvgPool2d, Conv1d-free tail: Flatten, Dropout, Linear, BatchNorm1d)
 * moved with tg_module_to_device gives the CPU's outputs, gradients and running statistics in
 * training (two steps) and evaluation; the buffers stay on the device, num_batches_tracked
 * an I64. */
#include "cuda_testutil.h"

static const tg_options f64 = {.dtype = TG_F64};

/* The model, drawn from seed (the Dropout masks from drop, which it borrows). */
static tg_module *model_new(uint64_t seed, tg_generator *drop) {
  tg_generator *g = tg_generator_new(seed);
  tg_module *seq = tg_sequential_new();
  for (int i = 0; i < 11; i++) {
    tg_module *child =
        i == 0   ? tg_conv2d_layer_module(tg_conv2d_layer_new(2, 4, (const int64_t[]){3, 3},
                                                              &(tg_conv2d_opts){.padding = {1, 1}},
                                                              true, f64, g))
        : i == 1 ? tg_batch_norm2d_layer_new(4, 1e-5, 0.1, true, true, f64)
        : i == 2 ? tg_relu_layer_new()
        : i == 3 ? tg_max_pool2d_layer_new((const int64_t[]){2, 2},
                                           (tg_max_pool2d_options){.ceil_mode = false})
        : i == 4 ? tg_group_norm_layer_new(2, 4, 1e-5, true, f64)
        : i == 5 ? tg_layer_norm_layer_new(2, (const int64_t[]){3, 3}, 1e-5, true, f64)
        : i == 6 ? tg_adaptive_avg_pool2d_layer_new((const int64_t[]){2, 2})
        : i == 7 ? tg_flatten_layer_new(1, -1)
        : i == 8 ? tg_dropout_layer_new(0.2, drop)
        : i == 9 ? tg_linear_module(tg_linear_new(16, 3, true, f64, g))
                 : tg_batch_norm1d_layer_new(3, 1e-5, TG_BATCH_NORM_CUMULATIVE, true, true, f64);
    cr_assert_not_null(child, "%s", tg_last_error_message());
    cr_assert_eq(tg_sequential_append(seq, child, NULL), TG_OK, "%s", tg_last_error_message());
  }
  tg_generator_free(g);
  return seq;
}

TG_CUDA_TEST(cuda_cnn_layers, moved_model_matches_the_cpu) {
  tg_generator *drop_cpu = tg_generator_new(5), *drop_gpu = tg_generator_new(5);
  tg_module *cpu = model_new(1, drop_cpu), *gpu = model_new(1, drop_gpu);
  cr_assert_eq(tg_module_to_device(gpu, TG_CUDA0), TG_OK, "%s", tg_last_error_message());
  tg_tensor *count = tg_module_find(gpu, "1.num_batches_tracked");
  cr_assert(tg_device_equal(tg_tensor_device(count), TG_CUDA0));
  cr_assert_eq(tg_tensor_dtype(count), TG_I64);
  tg_generator *g = tg_generator_new(2);
  for (int step = 0; step < 2; step++) {
    tg_tensor *x = tg_randn(TG_SHAPE(4, 2, 6, 6), f64, g);
    tg_tensor *y_cpu = tg_module_forward(cpu, x);
    tg_tensor *y_gpu = tg_module_forward(gpu, tg_to_device(x, TG_CUDA0));
    cr_assert_not_null(y_gpu, "%s", tg_last_error_message());
    cr_assert(tg_device_equal(tg_tensor_device(y_gpu), TG_CUDA0));
    tg_assert_close(y_gpu, y_cpu, 1e-10, 1e-12);
    cr_assert_eq(tg_backward(tg_sum(tg_mul(y_cpu, y_cpu)), NULL), TG_OK);
    cr_assert_eq(tg_backward(tg_sum(tg_mul(y_gpu, y_gpu)), NULL), TG_OK);
  }
  for (int i = 0; i < tg_module_num_parameters(cpu); i++) {
    const char *name;
    tg_tensor *p = tg_module_parameter(cpu, i, &name);
    tg_tensor *q = tg_module_parameter(gpu, i, NULL);
    cr_assert(tg_device_equal(tg_tensor_device(tg_grad(q)), TG_CUDA0), "%s", name);
    tg_assert_close(tg_grad(q), tg_grad(p), 1e-9, 1e-11);
  }
  for (int i = 0; i < tg_module_num_buffers(cpu); i++) {
    const char *name;
    tg_tensor *b = tg_module_buffer(cpu, i, &name);
    tg_tensor *c = tg_module_buffer(gpu, i, NULL);
    cr_assert(tg_device_equal(tg_tensor_device(c), TG_CUDA0), "%s", name);
    tg_assert_close(c, b, 1e-10, 1e-12);
  }
  cr_assert_eq(tg_test_at(count, 0), 2);
  /* evaluation: the running statistics, no dropout */
  tg_module_train(cpu, false);
  tg_module_train(gpu, false);
  tg_tensor *x = tg_randn(TG_SHAPE(3, 2, 6, 6), f64, g);
  tg_assert_close(tg_module_forward(gpu, tg_to_device(x, TG_CUDA0)), tg_module_forward(cpu, x),
                  1e-10, 1e-12);
  tg_module_free(cpu);
  tg_module_free(gpu);
  tg_generator_free(g);
  tg_generator_free(drop_cpu);
  tg_generator_free(drop_gpu);
}
