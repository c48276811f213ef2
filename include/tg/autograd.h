/* tg — the reverse-mode tape: grad mode, backward, custom functions, the op registry.
 * Gradient checking and op_check are in tg/testing.h. */
#ifndef TG_AUTOGRAD_H
#define TG_AUTOGRAD_H

#include <stdio.h>

#include "tensor.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* ---- threads ----
 * Per thread: the error, grad mode, scopes, the default generator. Safe to share: reading
 * tensors and using them as op inputs while nobody writes them; retain/release (atomic);
 * backward from several threads into shared leaves (hogwild): accumulation into a leaf's
 * grad, and tg_grad/tg_set_grad/tg_zero_grad, run under a per-leaf lock, so each thread's
 * gradient is added exactly once. Not safe: two backward passes at once through the same
 * node (a shared tensor with a grad_fn) — the later one fails with TG_ERR_STATE — and any
 * in-place write (ops, optimizer steps, tg_set_requires_grad, tg_op_register) racing with
 * other use of the same tensor. The tensor tg_grad returns may be released by another
 * thread's tg_set_grad, tg_zero_grad or create_graph backward: read grads after joining. */

/* ---- per-tensor state ---- */
bool tg_requires_grad(const tg_tensor *t);
/* Only leaves (tensors without grad_fn) of a floating dtype can change this. */
tg_status tg_set_requires_grad(tg_tensor *t, bool requires_grad);
bool tg_is_leaf(const tg_tensor *t);
/* The accumulated gradient (borrowed; NULL if none). */
tg_tensor *tg_grad(const tg_tensor *t);
/* Sets the accumulated gradient (NULL clears it); checks shape, dtype and device. */
tg_status tg_set_grad(tg_tensor *t, const tg_tensor *grad);
/* Zeroes t's gradient in place (keeps the buffer); a no-op when it has none. */
tg_status tg_zero_grad(tg_tensor *t);
/* Name of the op that made t ("addmm", ...) or NULL for leaves. */
const char *tg_grad_fn_name(const tg_tensor *t);
/* A new tensor sharing t's storage, cut from the graph. */
tg_tensor *tg_detach(const tg_tensor *t);

/* ---- grad mode (thread-local) ---- */
bool tg_is_grad_enabled(void);
/* Returns the previous mode. */
bool tg_set_grad_enabled(bool enabled);
/* Nestable no-grad regions: every begin needs its end. */
void tg_no_grad_begin(void);
void tg_no_grad_end(void);

/* ---- anomaly detection (thread-local like grad mode; off by default) ----
 * torch.autograd.set_detect_anomaly / detect_anomaly. While on, the first op call whose
 * output (forward, in tg_apply) or whose computed gradient for one of its inputs (backward)
 * holds a NaN or an infinity fails with TG_ERR_STATE: "tg_log: detect anomaly: forward
 * produced nan in output 0 at [2] (of [4]) ..." or "tg_backward: detect anomaly: backward of
 * sqrt produced inf in the gradient of input 0 at [0] ...". Only F32 and F64 tensors are
 * judged, and only the call the caller made: the ops inside a composite op's forward or a
 * backward formula are not (an intermediate infinity there may be intended). A failed
 * forward returns no output (an in-place op has already written its target); a failed
 * backward stops at that node and adds none of its gradients (what earlier nodes added to
 * .grad stays). Costs one thread-local flag check per op while off; while on, each output
 * is read once (device tensors through a host copy). */
bool tg_is_anomaly_enabled(void);
/* Returns the previous mode. */
bool tg_set_detect_anomaly(bool enabled);
/* Nestable anomaly regions (the scoped form, like tg_no_grad_begin): every begin needs its
 * end, which restores the mode its begin saw. */
void tg_detect_anomaly_begin(void);
void tg_detect_anomaly_end(void);

/* ---- op profiler (off by default; torch.autograd.profiler's per-op table) ----
 * While started, every op call made through tg_apply (forward) and every backward function
 * the engine runs is timed on the wall clock and added to its op's row: calls, total time,
 * and self time, the total less the op calls made inside it (a composite op's forward or a
 * backward formula calls other ops), so the rows' self times add up to the time spent in ops.
 * Every thread counts. On a device that runs asynchronously (CUDA) a call's time is its
 * launch only, unless synchronize: then each timed call waits for the device before and
 * after it, which slows the program but puts each kernel's time in its op's row. Costs one
 * relaxed atomic load per op call while stopped. Up to TG_PROFILE_MAX_ROWS rows; once the
 * table is full, other ops go to the row "(other)". The environment variable TG_PROFILE=N
 * (or N,sync) profiles a whole program from its first op and prints N rows (0: all) on
 * stderr at exit, for programs one would rather not change. */
enum { TG_PROFILE_MAX_ROWS = 512 };
typedef struct tg_profile_row {
  char op[48];   /* the op's name, as tg_op_lookup knows it */
  bool backward; /* its backward function, not its forward */
  int64_t calls;
  int64_t total_ns; /* wall time inside the calls */
  int64_t self_ns;  /* less the op calls made inside them */
} tg_profile_row;
/* Clears the table and starts counting (a restart clears it too). */
tg_status tg_profile_start(bool synchronize);
/* Stops counting; the table stays until the next start. */
void tg_profile_stop(void);
bool tg_profile_is_on(void);
/* Copies up to max rows into rows (NULL: none), largest self time first; returns how many
 * rows the table holds. */
int64_t tg_profile_rows(tg_profile_row *rows, int64_t max);
/* The table as text on out, one line per row (largest self time first; max_rows 0: all):
 * op, calls, self ms, self % of all rows' self time, total ms, µs per call. TG_ERR_ARGUMENT
 * for a NULL out or a negative max_rows, TG_ERR_IO when writing fails. */
tg_status tg_profile_print(FILE *out, int64_t max_rows);

/* ---- backward ---- */
typedef struct tg_backward_options {
  bool retain_graph; /* keep saved tensors so backward can run again */
  bool create_graph; /* record the backward itself, for double backward (implies retain) */
} tg_backward_options;

/* Accumulates d root / d leaf into every leaf's grad. grad may be NULL for a one-element
 * root; otherwise it must have root's sizes, dtype and device (any strides). A NULL grad (or
 * root) while an error is pending is taken as the failed result of an earlier call: backward
 * then returns that error, as any op does with a NULL input. */
tg_status tg_backward(const tg_tensor *root, const tg_tensor *grad);
tg_status tg_backward_ex(const tg_tensor *root, const tg_tensor *grad, tg_backward_options opts);
/* Backward from several roots at once: accumulates d sum(roots[j] * grads[j]) / d leaf, one
 * pass over the union of their graphs (torch.autograd.backward(tensors, grad_tensors)).
 * grads may be NULL, or hold NULL, for one-element roots. */
tg_status tg_backward_multi(int n_roots, const tg_tensor *const *roots,
                            const tg_tensor *const *grads, tg_backward_options opts);
/* d outputs / d inputs without touching .grad: grads_out[i] (scope-owned) is the gradient
 * of sum(outputs[j] * grad_outputs[j]) w.r.t. inputs[i], or NULL if it does not depend on it
 * (allow_unused) — an error otherwise. */
tg_status tg_autograd_grad(int n_outputs, const tg_tensor *const *outputs,
                           const tg_tensor *const *grad_outputs, int n_inputs,
                           const tg_tensor *const *inputs, tg_tensor **grads_out,
                           tg_backward_options opts, bool allow_unused);

/* ---- the graph's memory ---- */
/* Bytes the autograd graph behind outputs keeps for backward: the sizes of the distinct
 * storages of every tensor saved by the nodes reachable from outputs, leaving out the
 * storages of the n_exclude tensors given (typically the graph's inputs, which exist
 * anyway). 0 for tensors without history; -1 with an error on bad arguments. Used to
 * compare what the fused and composed LLTM save (src/autograd/saved_bytes.c). */
int64_t tg_graph_saved_bytes(int n_outputs, const tg_tensor *const *outputs, int n_exclude,
                             const tg_tensor *const *exclude);

/* ---- hooks: a leaf's gradient is final for this pass ----
 * A hook on a leaf that tg_backward, _ex and _multi call once per pass, right after the last
 * gradient the pass adds into the leaf's .grad (every node that could still add to it has
 * run): the .grad is final for that pass. Not called when the pass adds nothing into it, nor
 * by tg_autograd_grad (which leaves .grad alone). Torch's
 * register_post_accumulate_grad_hook: what data-parallel training hangs its all-reduce on
 * (tg/dist.h). Runs on the backward's thread; it may read and change the values of .grad
 * but not replace it. An error it returns stops the backward, which reports it. Hooks run
 * in the order they were registered. A hook may remove itself (or another hook of its leaf)
 * with the hooks after it still running; do not otherwise register or remove while a
 * backward runs. */
typedef tg_status (*tg_grad_hook_fn)(void *user, tg_tensor *leaf);
/* *handle (may be NULL) gets a number for tg_remove_post_accumulate_grad_hook. leaf must be
 * a leaf (no grad_fn). */
tg_status tg_register_post_accumulate_grad_hook(tg_tensor *leaf, tg_grad_hook_fn fn, void *user,
                                                int *handle);
/* TG_ERR_ARGUMENT when leaf has no hook of that number. */
tg_status tg_remove_post_accumulate_grad_hook(tg_tensor *leaf, int handle);

/* ---- custom functions and the op registry ----
 * An op is a descriptor: a forward kernel per device type, one backward, flags. Built-in
 * ops and user functions share it; tg_apply runs the forward on the inputs' device and,
 * when grad mode is on and an input requires grad, records a tape node. */
typedef struct tg_ctx tg_ctx;

/* Fills outputs[0..n_outputs) with new tensors (tg_empty etc.; any scope handling is done
 * by tg_apply). Runs with grad mode off. */
typedef tg_status (*tg_forward_fn)(tg_ctx *ctx, const tg_tensor *const *inputs,
                                   tg_tensor **outputs);
/* Fills grad_inputs[i] for the inputs that need it (NULL = no gradient). grad_outputs[j]
 * is NULL for an output that got no gradient when materialize_grads is off. Runs with grad
 * mode on only under create_graph, so write it with tg ops to get double backward. */
typedef tg_status (*tg_backward_fn)(tg_ctx *ctx, const tg_tensor *const *grad_outputs,
                                    tg_tensor **grad_inputs);

enum {
  TG_OP_ONCE_DIFFERENTIABLE = 1u << 0,  /* double backward through it is an error */
  TG_OP_NO_MATERIALIZE_GRADS = 1u << 1, /* missing grad_outputs reach backward as NULL */
  TG_OP_VIEW = 1u << 2,                 /* outputs alias input 0 (shape/view ops) */
  TG_OP_INPLACE = 1u << 3,              /* forward writes input 0 and returns it as output 0 */
};

/* Parameters a call keeps (tg_apply's scalars, tg_apply_ex's ints; tg_ctx_scalar/int). */
#define TG_CTX_MAX_SCALARS 16
#define TG_CTX_MAX_INTS 16

/* ---- sample inputs (tg's OpInfo) ----
 * An op may describe calls that exercise it: small inputs for checking (gradcheck,
 * gradgradcheck, CPU against CUDA: tg_op_check, tests/ops/test_opinfo.c, `tg-op gradcheck`) and
 * one call at a size worth timing (`tg-op bench`). */
#define TG_SAMPLE_MAX_INPUTS 8
#define TG_SAMPLE_MAX 16
typedef struct tg_sample {
  const char *label; /* what it exercises ("broadcast", "0-dim", "transposed"); static */
  int n_inputs;
  tg_tensor *inputs[TG_SAMPLE_MAX_INPUTS]; /* scope-owned; requires_grad set on those to check */
  int n_scalars;
  double scalars[TG_CTX_MAX_SCALARS];
  int n_ints;
  int64_t ints[TG_CTX_MAX_INTS];
  int n_outputs;
  double atol, rtol; /* gradcheck tolerances for this call; 0 = tg_op_check's */
} tg_sample;

typedef struct tg_sample_request {
  tg_dtype dtype;       /* of the floating inputs */
  tg_device device;     /* of every input */
  tg_generator *gen;    /* for random values (never NULL) */
  bool bench;           /* one call at a size worth timing instead of small checking ones */
  int n_sizes;          /* bench only: sizes the caller asks for (the op says how it reads */
  const int64_t *sizes; /* them, e.g. the LLTM's batch, input features, state size), or 0 */
} tg_sample_request;

/* Fills samples[0..count) (count <= TG_SAMPLE_MAX) and returns count; -1 with an error. */
typedef int (*tg_sample_fn)(const tg_sample_request *request, tg_sample *samples);

typedef struct tg_op_desc {
  const char *name;
  int n_inputs;  /* -1: any number (cat, stack) */
  int n_outputs; /* -1: any number (chunk, split) */
  tg_forward_fn forward[TG_NUM_DEVICE_TYPES];
  tg_backward_fn backward; /* NULL: not differentiable */
  unsigned flags;
  tg_sample_fn sample_inputs; /* NULL: none */
} tg_op_desc;

/* Runs op. scalars are kept in the context for forward and backward (tg_ctx_scalar). */
tg_status tg_apply(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                   int n_scalars, const double *scalars, int n_outputs, tg_tensor **outputs);
/* One-output form; NULL on error. */
tg_tensor *tg_apply1(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                     int n_scalars, const double *scalars);
/* tg_apply with integer parameters as well (sizes, dims, indices, steps): kept exactly in
 * the context (tg_ctx_int), since a double holds integers only up to 2^53. */
tg_status tg_apply_ex(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                      int n_scalars, const double *scalars, int n_ints, const int64_t *ints,
                      int n_outputs, tg_tensor **outputs);
tg_tensor *tg_apply1_ex(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                        int n_scalars, const double *scalars, int n_ints, const int64_t *ints);

/* The registry that lists ops (tg_op_register, tg_op_lookup, tg_op_count, tg_op_at) is
 * declared in tg/ops.h, with the ops it holds. */

/* ---- the context of one op call ---- */
int tg_ctx_num_inputs(const tg_ctx *ctx);
int tg_ctx_num_outputs(const tg_ctx *ctx);
/* Saves tensors (inputs, outputs or intermediates) for backward; version-checked. */
tg_status tg_ctx_save_for_backward(tg_ctx *ctx, int n, const tg_tensor *const *tensors);
int tg_ctx_num_saved(const tg_ctx *ctx);
/* A saved tensor, scope-owned; NULL with TG_ERR_STATE if it was modified in place since it
 * was saved or the graph was freed. */
tg_tensor *tg_ctx_saved(tg_ctx *ctx, int index);
double tg_ctx_scalar(const tg_ctx *ctx, int index);
int tg_ctx_num_scalars(const tg_ctx *ctx);
/* Keeps a scalar attribute for backward (index < TG_CTX_MAX_SCALARS). */
tg_status tg_ctx_set_scalar(tg_ctx *ctx, int index, double value);
/* Integer parameters (tg_apply_ex), exact; 0 outside 0..tg_ctx_num_ints - 1. */
int64_t tg_ctx_int(const tg_ctx *ctx, int index);
int tg_ctx_num_ints(const tg_ctx *ctx);
/* Keeps an integer attribute for backward (index < TG_CTX_MAX_INTS). */
tg_status tg_ctx_set_int(tg_ctx *ctx, int index, int64_t value);
/* Arbitrary data for backward; free_fn (may be NULL) runs when the node dies. */
void tg_ctx_set_data(tg_ctx *ctx, void *data, void (*free_fn)(void *));
void *tg_ctx_data(const tg_ctx *ctx);
bool tg_ctx_needs_input_grad(const tg_ctx *ctx, int index);
/* Geometry of input i as it was at forward time. */
int tg_ctx_input_ndim(const tg_ctx *ctx, int index);
const int64_t *tg_ctx_input_sizes(const tg_ctx *ctx, int index);
tg_dtype tg_ctx_input_dtype(const tg_ctx *ctx, int index);
tg_device tg_ctx_input_device(const tg_ctx *ctx, int index);
/* Call from forward with one of its outputs. */
tg_status tg_ctx_mark_non_differentiable(tg_ctx *ctx, const tg_tensor *output);
void tg_ctx_set_materialize_grads(tg_ctx *ctx, bool materialize);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
