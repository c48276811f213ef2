/* custom_op: writing your own differentiable ops for tg and checking their gradients.
 *
 * The C form of torch.autograd.Function. Each op is a tg_op_desc: a forward kernel per
 * device, one backward, flags. It is registered once by name, looked up, and run with
 * tg_apply, which records it on the tape when an input requires grad. Four ops:
 *
 *   my_linear        out = input @ weight^T + bias; backward skips what nobody needs
 *   my_mul_constant  out = x * c with c a scalar; materialize_grads off
 *   my_cube          (x^3, 3x^2): an intermediate returned as a differentiable output
 *   my_softsign      x / (1 + |x|) with hand-written loops; once-differentiable
 *
 * Each is checked with tg_gradcheck (backward against finite differences) and
 * tg_gradgradcheck (the gradient of the gradient). Build: part of the tg build
 * (TG_BUILD_EXAMPLES), or `cc custom_op.c $(pkg-config --cflags --libs tg)`.
 * Exits 0 when every check gives the expected answer. Takes no arguments but --help. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tg/tg.h"

/* ---- my_linear ---- */

static tg_status linear_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  int n = tg_ctx_num_inputs(ctx); /* input, weight and an optional bias */
  if (n != 2 && n != 3)
    return tg_set_error(TG_ERR_ARGUMENT, "my_linear: takes input, weight[, bias]; %d given", n);
  /* Forward runs with grad mode off inside a scope: call tg ops freely. */
  tg_tensor *y = tg_mm(in[0], tg_t(in[1]));
  if (y && n == 3) y = tg_add(y, in[2]); /* bias broadcasts over the batch */
  if (!y) return tg_last_error();
  out[0] = y;
  return tg_ctx_save_for_backward(ctx, n, in);
}

static tg_status linear_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                 tg_tensor **grad_in) {
  tg_tensor *input = tg_ctx_saved(ctx, 0), *weight = tg_ctx_saved(ctx, 1);
  if (!input || !weight) return tg_last_error(); /* e.g. modified in place since forward */
  const tg_tensor *g = grad_out[0];
  /* Written with tg ops, so double backward works. Only what is needed is computed. */
  if (tg_ctx_needs_input_grad(ctx, 0) && !(grad_in[0] = tg_mm(g, weight))) return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1) && !(grad_in[1] = tg_mm(tg_t(g), input)))
    return tg_last_error();
  if (tg_ctx_num_inputs(ctx) == 3 && tg_ctx_needs_input_grad(ctx, 2)) {
    /* The bias's gradient has the bias's sizes: sum over what was broadcast. */
    grad_in[2] = tg_sum_to_size(g, tg_ctx_input_ndim(ctx, 2), tg_ctx_input_sizes(ctx, 2));
    if (!grad_in[2]) return tg_last_error();
  }
  return TG_OK;
}

/* ---- my_mul_constant ---- */

static tg_status mul_constant_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_ctx_set_materialize_grads(ctx, false);             /* backward may get NULL instead of zeros */
  out[0] = tg_mul_scalar(in[0], tg_ctx_scalar(ctx, 0)); /* the constant: scalar 0 */
  return out[0] ? TG_OK : tg_last_error();
}

static tg_status mul_constant_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                       tg_tensor **grad_in) {
  if (!grad_out[0]) return TG_OK; /* no gradient came in: none goes out */
  grad_in[0] = tg_mul_scalar(grad_out[0], tg_ctx_scalar(ctx, 0));
  return grad_in[0] ? TG_OK : tg_last_error();
}

/* ---- my_cube ---- */

static tg_status cube_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_pow_scalar(in[0], 3);
  out[1] = tg_mul_scalar(tg_pow_scalar(in[0], 2), 3); /* dx, needed by backward */
  if (!out[0] || !out[1]) return tg_last_error();
  /* dx is saved as an output (assigned to out[] first), so double backward can flow
   * through it; saving it as a private intermediate would silently break that. */
  return tg_ctx_save_for_backward(ctx, 2, (const tg_tensor *const[]){in[0], out[1]});
}

static tg_status cube_backward(tg_ctx *ctx, const tg_tensor *const *grad_out, tg_tensor **grad_in) {
  tg_tensor *x = tg_ctx_saved(ctx, 0), *dx = tg_ctx_saved(ctx, 1);
  if (!x || !dx) return tg_last_error();
  /* grad_out[1] (for dx) is a tensor of zeros when only x^3 was used. */
  grad_in[0] = tg_add(tg_mul(grad_out[0], dx), tg_mul(grad_out[1], tg_mul_scalar(x, 6)));
  return grad_in[0] ? TG_OK : tg_last_error();
}

/* ---- my_softsign: hand-written CPU loops ---- */

static tg_status softsign_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = tg_contiguous(in[0]); /* any strides in; dense for the loop */
  tg_tensor *y = x ? tg_empty_like(x) : NULL;
  if (!y) return tg_last_error();
  int64_t n = tg_numel(x);
  TG_DISPATCH_FLOATING_TYPES(tg_tensor_dtype(x), "my_softsign", {
    const scalar_t *xs = tg_data_ptr(x);
    scalar_t *ys = tg_data_ptr(y);
    for (int64_t i = 0; i < n; i++) ys[i] = xs[i] / (1 + (xs[i] < 0 ? -xs[i] : xs[i]));
  });
  out[0] = y;
  return tg_ctx_save_for_backward(ctx, 1, in);
}

/* d/dx = 1 / (1 + |x|)^2, computed outside the tape: hence TG_OP_ONCE_DIFFERENTIABLE. */
static tg_status softsign_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                   tg_tensor **grad_in) {
  tg_tensor *x = tg_ctx_saved(ctx, 0);
  tg_tensor *xc = x ? tg_contiguous(x) : NULL, *g = tg_contiguous(grad_out[0]);
  tg_tensor *gx = xc && g ? tg_empty_like(xc) : NULL;
  if (!gx) return tg_last_error();
  int64_t n = tg_numel(xc);
  TG_DISPATCH_FLOATING_TYPES(tg_tensor_dtype(xc), "my_softsign", {
    const scalar_t *xs = tg_data_ptr(xc), *gs = tg_data_ptr(g);
    scalar_t *out = tg_data_ptr(gx);
    for (int64_t i = 0; i < n; i++) {
      scalar_t d = 1 + (xs[i] < 0 ? -xs[i] : xs[i]);
      out[i] = gs[i] / (d * d);
    }
  });
  grad_in[0] = gx;
  return TG_OK;
}

/* ---- registration ---- */

static tg_status register_ops(void) {
  static const tg_op_desc ops[] = {
      {"my_linear", -1, 1, {[TG_CPU] = linear_forward}, linear_backward, 0, NULL},
      {"my_mul_constant", 1, 1, {[TG_CPU] = mul_constant_forward}, mul_constant_backward, 0, NULL},
      {"my_cube", 1, 2, {[TG_CPU] = cube_forward}, cube_backward, 0, NULL},
      {"my_softsign",
       1,
       1,
       {[TG_CPU] = softsign_forward},
       softsign_backward,
       TG_OP_ONCE_DIFFERENTIABLE,
       NULL},
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    tg_status st = tg_op_register(&ops[i]); /* the registry copies the descriptor */
    if (st != TG_OK) return st;
  }
  return TG_OK;
}

/* Front ends, as a user would call them. NULL on error (tg_last_error says why). */
static tg_tensor *my_linear(const tg_tensor *input, const tg_tensor *weight,
                            const tg_tensor *bias) {
  const tg_tensor *in[] = {input, weight, bias};
  return tg_apply1(tg_op_lookup("my_linear"), bias ? 3 : 2, in, 0, NULL);
}
static tg_tensor *my_mul_constant(const tg_tensor *x, double c) {
  return tg_apply1(tg_op_lookup("my_mul_constant"), 1, &x, 1, &c);
}
static tg_tensor *my_cube(const tg_tensor *x) { /* the cube itself; dx is a by-product */
  tg_tensor *out[2];
  return tg_apply(tg_op_lookup("my_cube"), 1, &x, 0, NULL, 2, out) == TG_OK ? out[0] : NULL;
}
static tg_tensor *my_softsign(const tg_tensor *x) {
  return tg_apply1(tg_op_lookup("my_softsign"), 1, &x, 0, NULL);
}

/* ---- the functions gradcheck differentiates: inputs -> outputs ---- */

static tg_status linear_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = my_linear(in[0], in[1], in[2]);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status mul_constant_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = my_mul_constant(in[0], *(const double *)user);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status cube_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = my_cube(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status softsign_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = my_softsign(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

static int failures;

/* Runs one check and prints its outcome; `expected` is the status it should return. */
static void check(const char *what, tg_status got, tg_status expected) {
  if (got == expected)
    printf("%-34s %s\n", what, got == TG_OK ? "ok" : "fails, as it should:");
  else {
    printf("%-34s UNEXPECTED %s\n", what, tg_status_name(got));
    failures++;
  }
  if (got != TG_OK) printf("    %s\n", tg_last_error_message());
  tg_clear_error();
}

/* 0 to run, else the exit status: 0 after --help, 2 for anything else. */
static int parse_args(int argc, char **argv) {
  static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int c = getopt_long(argc, argv, "h", options, NULL);
  if (c == 'h') {
    puts("usage: custom_op\nRegisters four custom ops and checks their gradients; exits 0 when "
         "every check\ngives the expected answer.");
    return -1;
  }
  if (c == -1 && optind == argc) return 0;
  if (c == -1) fprintf(stderr, "custom_op: unexpected argument '%s'\n", argv[optind]);
  fprintf(stderr, "Try 'custom_op --help' for more information.\n");
  return 2;
}

int main(int argc, char **argv) {
  int parsed = parse_args(argc, argv);
  if (parsed) return parsed < 0 ? 0 : parsed;
  if (register_ops() != TG_OK) {
    fprintf(stderr, "custom_op: %s\n", tg_last_error_message());
    return 1;
  }
  tg_scope sc = tg_scope_begin();
  tg_generator *gen = tg_generator_new(42);
  /* gradcheck works in float64: finite differences in float32 are too coarse. */
  tg_options opts = {.dtype = TG_F64, .requires_grad = true};
  tg_gradcheck_options gc = {.quiet = true}; /* defaults: eps 1e-6, atol 1e-5, rtol 1e-3 */

  /* Ordinary use: forward, backward, .grad. */
  tg_tensor *x = tg_randn(TG_SHAPE(4, 3), opts, gen);
  tg_tensor *w = tg_randn(TG_SHAPE(2, 3), opts, gen);
  tg_tensor *b = tg_randn(TG_SHAPE(2), opts, gen);
  tg_tensor *y = my_linear(x, w, b);
  if (!y || tg_backward(tg_sum(y), NULL) != TG_OK) {
    fprintf(stderr, "custom_op: %s\n", tg_last_error_message());
    return 1;
  }
  printf("my_linear(x [4, 3], w [2, 3], b [2]) -> [%lld, %lld], grad_fn %s\n",
         (long long)tg_size(y, 0), (long long)tg_size(y, 1), tg_grad_fn_name(y));
  printf("d sum / d b = ");
  tg_print(tg_grad(b));

  tg_tensor *linear_in[] = {x, w, b};
  check("gradcheck my_linear", tg_gradcheck(linear_fn, NULL, 3, linear_in, 1, gc), TG_OK);
  check("gradgradcheck my_linear", tg_gradgradcheck(linear_fn, NULL, 3, linear_in, 1, gc), TG_OK);

  double c = 3.14;
  tg_tensor *v = tg_randn(TG_SHAPE(5), opts, gen);
  check("gradcheck my_mul_constant", tg_gradcheck(mul_constant_fn, &c, 1, &v, 1, gc), TG_OK);
  check("gradgradcheck my_mul_constant", tg_gradgradcheck(mul_constant_fn, &c, 1, &v, 1, gc),
        TG_OK);

  tg_tensor *u = tg_randn(TG_SHAPE(2, 3), opts, gen);
  check("gradcheck my_cube", tg_gradcheck(cube_fn, NULL, 1, &u, 1, gc), TG_OK);
  check("gradgradcheck my_cube", tg_gradgradcheck(cube_fn, NULL, 1, &u, 1, gc), TG_OK);

  /* Inputs may be any non-overlapping view: here a transposed one. */
  tg_tensor *ut = tg_t(u);
  check("gradcheck my_softsign (transposed)", tg_gradcheck(softsign_fn, NULL, 1, &ut, 1, gc),
        TG_OK);
  /* Once-differentiable: double backward is refused with TG_ERR_STATE. */
  check("gradgradcheck my_softsign", tg_gradgradcheck(softsign_fn, NULL, 1, &ut, 1, gc),
        TG_ERR_STATE);

  tg_generator_free(gen);
  tg_scope_end(sc);
  if (tg_live_objects() != 0) {
    printf("%lld tensor(s)/node(s) still alive after the scope\n", (long long)tg_live_objects());
    failures++;
  }
  if (failures) {
    printf("%d check(s) went wrong\n", failures);
    return 1;
  }
  printf("all checks as expected\n");
  return 0;
}
