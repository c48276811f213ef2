/* nn modules on CUDA: tg_module_to_device moves parameters, buffers and gradients in place
 * (the tensor objects stay), a moved Sequential gives the CPU's results, an optimizer made
 * after the move trains on the device, state files written from the device load on the CPU,
 * and a move back; allocation failures during a move change nothing. */
#include "cuda_testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};

/* Linear(3, 4) -> ReLU -> Linear(4, 2) in F64; NULL on failure (no assertion: the sweep
 * runs it). */
static tg_module *model_new(uint64_t seed) {
  tg_generator *g = tg_generator_new(seed);
  tg_module *seq = g ? tg_sequential_new() : NULL;
  tg_status st = seq ? TG_OK : tg_last_error();
  for (int i = 0; st == TG_OK && i < 3; i++) {
    tg_module *child = i == 1 ? tg_relu_layer_new()
                              : tg_linear_module(tg_linear_new(i ? 4 : 3, i ? 2 : 4, true, f64, g));
    st = child ? tg_sequential_append(seq, child, NULL) : tg_last_error();
    if (st != TG_OK) tg_module_free(child);
  }
  tg_generator_free(g);
  if (st != TG_OK) {
    tg_module_free(seq);
    return NULL;
  }
  return seq;
}

static bool on(const tg_tensor *t, tg_device d) { return tg_device_equal(tg_tensor_device(t), d); }

TG_CUDA_TEST(cuda_nn_module, move_keeps_tensors_and_values) {
  tg_module *m = model_new(1);
  cr_assert_not_null(m, "%s", tg_last_error_message());
  tg_tensor *running = tg_full(TG_SHAPE(4), 0.5, f64);
  tg_tensor *count = tg_zeros(0, NULL, TG_OPTS(.dtype = TG_I64));
  cr_assert_eq(tg_module_register_buffer(tg_module_child(m, "0"), "running", running), TG_OK);
  cr_assert_eq(tg_module_register_buffer(m, "count", count), TG_OK);
  tg_tensor *x = tg_randn(TG_SHAPE(5, 3), f64, NULL);
  tg_tensor *y_cpu = tg_module_forward(m, x);
  cr_assert_eq(tg_backward(tg_sum(y_cpu), NULL), TG_OK);
  int n = tg_module_num_parameters(m);
  tg_tensor *before[8], *grads[8], *objects[8];
  for (int i = 0; i < n; i++) {
    objects[i] = tg_module_parameter(m, i, NULL);
    before[i] = tg_clone(objects[i]);
    grads[i] = tg_clone(tg_grad(objects[i]));
  }
  cr_assert_eq(tg_module_to_device(m, TG_CUDA0), TG_OK, "%s", tg_last_error_message());
  for (int i = 0; i < n; i++) {
    tg_tensor *p = tg_module_parameter(m, i, NULL);
    cr_assert(p == objects[i], "the parameter object changed");
    cr_assert(on(p, TG_CUDA0) && on(tg_grad(p), TG_CUDA0));
    cr_assert(tg_is_leaf(p) && tg_requires_grad(p));
    tg_assert_close(p, before[i], 0, 0);
    tg_assert_close(tg_grad(p), grads[i], 0, 0);
  }
  cr_assert(tg_module_find(m, "0.running") == running && on(running, TG_CUDA0));
  cr_assert(tg_module_find(m, "count") == count && on(count, TG_CUDA0));
  cr_assert_eq(tg_tensor_dtype(count), TG_I64);
  /* forward on the device gives the CPU's result */
  cr_assert_eq(tg_module_zero_grad(m), TG_OK);
  tg_tensor *y = tg_module_forward(m, tg_to_device(x, TG_CUDA0));
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_assert_close(y, y_cpu, TG_RTOL(TG_F64), TG_ATOL(TG_F64));
  /* and back */
  cr_assert_eq(tg_module_to_device(m, TG_DEVICE_CPU), TG_OK, "%s", tg_last_error_message());
  cr_assert(on(running, TG_DEVICE_CPU) && on(tg_module_parameter(m, 0, NULL), TG_DEVICE_CPU));
  tg_assert_close(tg_module_forward(m, x), y_cpu, 0, 0);
  tg_module_free(m);
}

TG_CUDA_TEST(cuda_nn_module, optimizer_after_the_move_and_state_files) {
  tg_module *cpu = model_new(2), *dev = model_new(2);
  cr_assert(cpu && dev, "%s", tg_last_error_message());
  cr_assert_eq(tg_module_to_device(dev, TG_CUDA0), TG_OK, "%s", tg_last_error_message());
  tg_optimizer *oc = tg_sgd_for(cpu, (tg_sgd_options){.lr = 0.1, .momentum = 0.9});
  tg_optimizer *od = tg_sgd_for(dev, (tg_sgd_options){.lr = 0.1, .momentum = 0.9});
  tg_tensor *x = tg_randn(TG_SHAPE(6, 3), f64, NULL), *xd = tg_to_device(x, TG_CUDA0);
  for (int step = 0; step < 3; step++) {
    tg_scope s = tg_scope_begin();
    cr_assert_eq(tg_backward(tg_sum(tg_module_forward(cpu, x)), NULL), TG_OK);
    cr_assert_eq(tg_backward(tg_sum(tg_module_forward(dev, xd)), NULL), TG_OK, "%s",
                 tg_last_error_message());
    cr_assert_eq(tg_optimizer_step(oc), TG_OK);
    cr_assert_eq(tg_optimizer_step(od), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_optimizer_zero_grad(oc), TG_OK);
    cr_assert_eq(tg_optimizer_zero_grad(od), TG_OK);
    tg_scope_end(s);
  }
  for (int i = 0; i < tg_module_num_parameters(cpu); i++)
    tg_assert_close(tg_module_parameter(dev, i, NULL), tg_module_parameter(cpu, i, NULL),
                    TG_RTOL(TG_F64), TG_ATOL(TG_F64));
  /* a state file written from the device loads into a CPU model */
  const char *path = "test_cuda_nn_module.safetensors";
  cr_assert_eq(tg_module_save(dev, path), TG_OK, "%s", tg_last_error_message());
  tg_module *back = model_new(3);
  cr_assert_eq(tg_module_load(back, path, true, NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_module_forward(back, x), tg_module_forward(cpu, x), TG_RTOL(TG_F64),
                  TG_ATOL(TG_F64));
  remove(path);
  tg_optimizer_free(oc);
  tg_optimizer_free(od);
  tg_module_free(cpu);
  tg_module_free(dev);
  tg_module_free(back);
}

/* ---- allocation failures: a move that fails leaves every tensor on the CPU ---- */

static tg_status move_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_module *m = model_new(4);
  tg_status st = status_of(m);
  tg_tensor *x = st == TG_OK ? tg_ones(TG_SHAPE(2, 3), f64) : NULL;
  tg_tensor *y = x ? tg_module_forward(m, x) : NULL;
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(y), NULL)); /* gradients move too */
  if (st == TG_OK) {
    st = clean(tg_module_to_device(m, TG_CUDA0));
    for (int i = 0; i < tg_module_num_parameters(m); i++) {
      tg_tensor *p = tg_module_parameter(m, i, NULL);
      tg_device want = st == TG_OK ? TG_CUDA0 : TG_DEVICE_CPU; /* all or nothing */
      cr_assert(on(p, want) && on(tg_grad(p), want), "k=%lld: parameter %d half moved",
                (long long)current_k, i);
    }
  }
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(m); i++) {
    st = append(tg_module_parameter(m, i, NULL), out, n_out);
    if (st == TG_OK) st = append(tg_grad(tg_module_parameter(m, i, NULL)), out, n_out);
  }
  tg_module_free(m);
  return st;
}

TG_CUDA_TEST(cuda_nn_module, alloc_failure_moving) {
  cr_assert_gt(sweep("moving a module to CUDA", move_step, NULL).failed, 0);
}

TG_CUDA_TEST(cuda_nn_module, optimizer_state_made_before_the_move) {
  tg_module *m = model_new(5);
  cr_assert_not_null(m);
  tg_optimizer *opt = tg_sgd_for(m, (tg_sgd_options){.lr = 0.1, .momentum = 0.9});
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), f64);
  cr_assert_eq(tg_backward(tg_sum(tg_module_forward(m, x)), NULL), TG_OK);
  cr_assert_eq(tg_optimizer_step(opt), TG_OK); /* momentum buffers on the CPU */
  tg_tensor_dict *state = tg_optimizer_state_dict(opt);
  cr_assert_eq(tg_module_to_device(m, TG_CUDA0), TG_OK, "%s", tg_last_error_message());
  /* the old state is on the other device: a clear error, nothing changed */
  tg_tensor *w = tg_clone(tg_module_parameter(m, 0, NULL));
  tg_status st = tg_optimizer_step(opt);
  cr_assert_neq(st, TG_OK);
  cr_assert_eq(tg_last_error(), TG_ERR_DEVICE, "%s", tg_last_error_message());
  tg_clear_error();
  tg_assert_close(tg_module_parameter(m, 0, NULL), w, 0, 0);
  /* loading the state again copies it to each parameter's device */
  cr_assert_eq(tg_optimizer_load_state_dict(opt, state), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_optimizer_step(opt), TG_OK, "%s", tg_last_error_message());
  tg_tensor_dict_free(state);
  tg_optimizer_free(opt);
  tg_module_free(m);
}
