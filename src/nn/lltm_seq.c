/* The LLTM over a sequence: one cell (child "cell") applied at each time step. */
#include <limits.h>

#include "nn/module_impl.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"
#include "tg/nn.h"

struct tg_lltm_seq {
  tg_module module;   /* owns the child "cell" */
  tg_lltm_cell *cell; /* borrowed from module */
  tg_lltm_impl impl;
};

static void seq_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, tg_lltm_seq, module));
}
static const tg__module_class seq_class = {"lltm_seq", seq_destroy, NULL};

static bool impl_ok(tg_lltm_impl impl) { return impl == TG_LLTM_FUSED || impl == TG_LLTM_COMPOSED; }

tg_lltm_seq *tg_lltm_seq_new(int64_t input_features, int64_t state_size, tg_lltm_impl impl,
                             tg_options opts, tg_generator *gen) {
  static const char *fn = "tg_lltm_seq_new";
  if (!impl_ok(impl)) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: impl %d is neither TG_LLTM_FUSED nor TG_LLTM_COMPOSED", fn,
                 (int)impl);
    return NULL;
  }
  tg_lltm_cell *cell = tg_lltm_cell_new(input_features, state_size, opts, gen);
  if (!cell) {
    tg__error_prefix(fn);
    return NULL;
  }
  tg_lltm_seq *seq = tg__host_calloc(1, sizeof *seq);
  if (!seq) {
    tg_lltm_cell_free(cell);
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
    return NULL;
  }
  tg__module_init(&seq->module, &seq_class);
  if (tg_module_add_child(&seq->module, "cell", tg_lltm_cell_module(cell)) != TG_OK) {
    tg_lltm_cell_free(cell); /* ownership stayed here */
    tg_module_free(&seq->module);
    tg__error_prefix(fn);
    return NULL;
  }
  seq->cell = cell;
  seq->impl = impl;
  return seq;
}

void tg_lltm_seq_free(tg_lltm_seq *seq) {
  if (!seq) return;
  tg__module_free_typed(&seq->module, "tg_lltm_seq_free", "sequence model");
}

/* The loop itself, in the caller's scope s: fills hs[0..T) and the last state. */
static tg_status run_steps(const tg_lltm_seq *seq, const tg_tensor *input, int64_t T, tg_tensor *h,
                           tg_tensor *c, tg_tensor **hs, tg_tensor **c_last) {
  for (int64_t t = 0; t < T; t++) {
    tg_tensor *x = tg_select(input, 0, t);
    tg_status st =
        x ? tg_lltm_cell_forward(seq->cell, seq->impl, x, h, c, &h, &c) : tg_last_error();
    if (st != TG_OK) return st;
    hs[t] = h;
  }
  *c_last = c;
  return TG_OK;
}

/* An initial state the caller passed (h0 or c0; NULL: zeros) is [batch, state_size] with
 * the weights' dtype and device: checked here, so that a mismatch names what the caller
 * passed, not the cell op's old_h inside the loop. */
static bool check_state(const char *fn, const char *arg, const tg_tensor *t, const tg_tensor *input,
                        int64_t S, const tg_tensor *w) {
  if (!t) return true;
  const int64_t want[2] = {input->sizes[1], S};
  return tg__check(tg__dims_equal(t->ndim, t->sizes, 2, want), TG_ERR_SHAPE, fn,
                   "%s is %s but must be [batch, state_size] = %s (input is %s)", arg,
                   tg__sizes_str(t), tg__dims_str(2, want), tg__sizes_str(input)) &&
         tg__check(t->dtype == w->dtype, TG_ERR_DTYPE, fn,
                   "%s is %s but the model's weights are %s", arg, tg_dtype_name(t->dtype),
                   tg_dtype_name(w->dtype)) &&
         tg__check_same_device(fn, arg, t, "the model's weights", w);
}

tg_status tg_lltm_seq_forward(const tg_lltm_seq *seq, const tg_tensor *input, const tg_tensor *h0,
                              const tg_tensor *c0, tg_tensor **output, tg_tensor **h_n,
                              tg_tensor **c_n) {
  static const char *fn = "tg_lltm_seq_forward";
  if (output) *output = NULL;
  if (h_n) *h_n = NULL;
  if (c_n) *c_n = NULL;
  if (!seq) return tg_set_error(TG_ERR_ARGUMENT, "%s: seq is NULL", fn);
  const int64_t I = tg_lltm_cell_input_features(seq->cell); /* set by tg_lltm_seq_new */
  const int64_t S = tg_lltm_cell_state_size(seq->cell);
  if (!tg__check_arg(fn, "input", input) ||
      !tg__check(input->ndim == 3 && input->sizes[0] >= 1 && input->sizes[0] <= INT_MAX &&
                     input->sizes[2] == I,
                 TG_ERR_SHAPE, fn, "input is %s but the model takes [T >= 1, batch, %lld]",
                 tg__sizes_str(input), (long long)I))
    return tg_last_error();
  const int64_t T = input->sizes[0], B = input->sizes[1];
  const tg_tensor *w = tg_lltm_cell_weights(seq->cell);
  if (!check_state(fn, "h0", h0, input, S, w) || !check_state(fn, "c0", c0, input, S, w))
    return tg_last_error();
  tg_tensor **hs = tg__host_calloc((size_t)T, sizeof *hs);
  if (!hs) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
  tg_scope s = tg_scope_begin();
  tg_options opts = {.dtype = tg_tensor_dtype(w), .device = tg_tensor_device(w)};
  tg_tensor *h = h0 ? (tg_tensor *)h0 : tg_zeros(TG_SHAPE(B, S), opts);
  tg_tensor *c = c0 ? (tg_tensor *)c0 : tg_zeros(TG_SHAPE(B, S), opts);
  tg_tensor *c_last = NULL;
  tg_status st = h && c ? run_steps(seq, input, T, h, c, hs, &c_last) : tg_last_error();
  tg_tensor *out = NULL, *hl = NULL, *cl = NULL;
  if (st == TG_OK && output) {
    out = tg_scope_escape(s, tg_stack((int)T, (const tg_tensor *const *)hs, 0));
    st = out ? TG_OK : tg_last_error();
  }
  if (st == TG_OK && h_n) st = (hl = tg_scope_escape(s, hs[T - 1])) ? TG_OK : tg_last_error();
  if (st == TG_OK && c_n) st = (cl = tg_scope_escape(s, c_last)) ? TG_OK : tg_last_error();
  tg_scope_end(s);
  tg__host_free(hs);
  if (st != TG_OK) {
    tg__error_prefix(fn); /* what escaped already belongs to the caller's scope: nothing leaks */
    return st;
  }
  if (output) *output = out;
  if (h_n) *h_n = hl;
  if (c_n) *c_n = cl;
  return TG_OK;
}

void tg_lltm_seq_set_impl(tg_lltm_seq *seq, tg_lltm_impl impl) {
  if (!seq) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_lltm_seq_set_impl: seq is NULL");
    return;
  }
  if (!impl_ok(impl)) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "tg_lltm_seq_set_impl: impl %d is neither TG_LLTM_FUSED nor TG_LLTM_COMPOSED",
                 (int)impl);
    return;
  }
  seq->impl = impl;
}

tg_lltm_impl tg_lltm_seq_impl(const tg_lltm_seq *seq) { return seq ? seq->impl : TG_LLTM_FUSED; }
tg_lltm_cell *tg_lltm_seq_cell(const tg_lltm_seq *seq) { return seq ? seq->cell : NULL; }
tg_module *tg_lltm_seq_module(tg_lltm_seq *seq) { return seq ? &seq->module : NULL; }
