/* tg — a small tensor library in C with an autograd tape. Include this header.
 *
 * What is where: types.h (dtypes, devices, status codes, the thread-local error),
 * tensor.h (creation, views, copies, scopes and lifetimes, printing, RNG), autograd.h
 * (grad mode, backward, custom ops and the registry, gradcheck), ops.h (the generic
 * differentiable ops), lltm.h (the LLTM cell, fused and composed), nn.h (modules,
 * parameters, optimizers), cuda.h (the CUDA device), dispatch.h (dtype dispatch for kernel
 * authors). docs/api.md lists every function; docs/design.md says how the pieces fit.
 *
 * The rules in three lines: arguments are borrowed; every tensor a function returns
 * belongs to the innermost open scope (tg_scope_begin/tg_scope_end); a failing call
 * returns NULL or a status code and leaves a message in tg_last_error_message().
 *
 * ---- tutorial: examples/tutorial.c (ctest builds and runs it) ----
 *
 *   // tutorial: a first tg program, shown in include/tg/tg.h. main() tours tensors and scopes
 *   // (1), errors (2), backward (3), a function returning a tensor to its caller (4) and a
 *   // custom op with a hand-written backward, gradient-checked (5). Build and run:
 *   //   cc tutorial.c $(pkg-config --cflags --libs tg) && ./a.out
 *   #include <stdio.h>
 *
 *   #include "tg/tg.h"
 *
 *   // (4) A function that returns a tensor: it opens a scope of its own, so its intermediates
 *   // (the transposed view, b + x @ w^T) die at its end; tg_scope_escape hands the
 *   // result to the scope that encloses it, which is the caller's.
 *   static tg_tensor *dense_tanh(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b) {
 *     tg_scope scope = tg_scope_begin();
 *     tg_tensor *y = tg_scope_escape(scope, tg_tanh(tg_addmm(b, x, tg_t(w), 1.0, 1.0)));
 *     tg_scope_end(scope);
 *     return y;
 *   }
 *
 *   // (5) A custom op, the C form of torch.autograd.Function: y = x^3, dy/dx = 3x^2. Forward
 *   // runs with grad mode off and saves what backward needs. Backward is written with tg ops,
 *   // so it is itself differentiable (double backward works).
 *   static tg_status cube_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
 *     out[0] = tg_mul(tg_mul(in[0], in[0]), in[0]);
 *     if (!out[0]) return tg_last_error();
 *     return tg_ctx_save_for_backward(ctx, 1, in);
 *   }
 *
 *   static tg_status cube_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **grad_in) {
 *     tg_tensor *x = tg_ctx_saved(ctx, 0); // NULL if x was modified in place since forward
 *     grad_in[0] = tg_mul(g[0], tg_mul_scalar(tg_mul(x, x), 3.0));
 *     return grad_in[0] ? TG_OK : tg_last_error();
 *   }
 *
 *   // What tg_gradcheck differentiates: here, one call of the op.
 *   static tg_status cube_fn(void *op, const tg_tensor *const *in, tg_tensor **out) {
 *     out[0] = tg_apply1(op, 1, in, 0, NULL);
 *     return out[0] ? TG_OK : tg_last_error();
 *   }
 *
 *   int main(void) {
 *     // (1) Tensors. Arguments are borrowed; every tensor a function returns belongs to the
 *     // innermost open scope and is released when that scope ends: nothing to free by hand.
 *     tg_scope scope = tg_scope_begin();
 *     tg_manual_seed(0);
 *     tg_options f64 = TG_OPTS(.dtype = TG_F64);
 *     tg_options param = TG_OPTS(.dtype = TG_F64, .requires_grad = true);
 *     tg_tensor *x = tg_randn(TG_SHAPE(4, 3), f64, NULL);
 *     tg_tensor *w = tg_randn(TG_SHAPE(2, 3), param, NULL);
 *     tg_tensor *b = tg_zeros(TG_SHAPE(2), param);
 *     tg_print(tg_t(x)); // a view of x: shares its storage, copies nothing
 *
 *     // (2) Errors. A failing call returns NULL (or a status) and records a code and a message
 *     // naming the function, the argument and the sizes. A NULL argument keeps the first
 *     // error, so a chain of calls is checked once, at its end.
 *     tg_tensor *bad = tg_sum(tg_mm(x, x)); // [4, 3] @ [4, 3]
 *     if (!bad) printf("expected: %s\n", tg_last_error_message());
 *     tg_clear_error();
 *
 *     // (3) Backward: d loss / d w and d loss / d b accumulate into their .grad.
 *     tg_tensor *loss = tg_sum(dense_tanh(x, w, b));
 *     if (!loss || tg_backward(loss, NULL) != TG_OK) goto fail;
 *     tg_print(tg_grad(w));
 *
 *     // (5) Register the op once, then check its backward against finite differences and the
 *     // gradient of its gradient.
 *     tg_op_desc cube = {.name = "tutorial_cube",
 *                        .n_inputs = 1,
 *                        .n_outputs = 1,
 *                        .forward = {[TG_CPU] = cube_forward},
 *                        .backward = cube_backward};
 *     if (tg_op_register(&cube) != TG_OK) goto fail;
 *     const tg_op_desc *op = tg_op_lookup("tutorial_cube");
 *     tg_tensor *v = tg_randn(TG_SHAPE(5), param, NULL);
 *     tg_gradcheck_options opts = {0};
 *     if (!op || tg_gradcheck(cube_fn, (void *)op, 1, &v, 1, opts) != TG_OK ||
 *         tg_gradgradcheck(cube_fn, (void *)op, 1, &v, 1, opts) != TG_OK)
 *       goto fail;
 *     printf("tutorial_cube: gradcheck and gradgradcheck passed\n");
 *
 *     tg_scope_end(scope);
 *     return tg_live_objects() == 0 ? 0 : 1; // the scope took everything with it
 *   fail:
 *     fprintf(stderr, "tutorial: %s\n", tg_last_error_message());
 *     tg_scope_end(scope);
 *     return 1;
 *   }
 *
 * ---- end of tutorial ----
 */
#ifndef TG_TG_H
#define TG_TG_H

#include "types.h"
#include "tensor.h"
#include "dispatch.h"
#include "autograd.h"
#include "ops.h"
#include "lltm.h"
#include "io.h"
#include "module.h"
#include "nn.h"
#include "dlpack.h"
#include "cuda.h"
#include "cpu.h"
#include "testing.h"
#include "device.h"
/* the convolution family */
#include "conv.h"
/* pooling and padding (issue 24, helper "pool") */
#include "pool.h"
/* issue 24, normalization family (helper norm) */
#include "norm.h"
/* the fused Conv2d + BatchNorm2d (issue 24) */
#include "conv_bn.h"
#include "conv_bn_layer.h"
/* AdamW, parameter groups, clip_grad_norm, LR schedules (issue 25, helper optim) */
#include "optim.h"
/* indexing along a dim: gather, scatter_add, index_select, topk, ... (issue 25, helper "index") */
#include "index.h"
/* issue 25, fused attention (helper "attn") */
#include "attention.h"

#endif
