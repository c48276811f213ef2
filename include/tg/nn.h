/* tg — nn: modules that own their parameters (Linear, the LLTM cell) and optimizers.
 *
 * A module keeps its parameters as leaf tensors that require grad, with references it
 * owns (tg_retain/tg_release): they outlive every scope until the module is freed. The
 * accessors and parameter lists hand out borrowed pointers. Forward calls follow the
 * usual rules: arguments borrowed, results owned by the innermost scope.
 *
 * A training step:
 *   tg_scope s = tg_scope_begin();
 *   tg_lltm_cell_forward(cell, TG_LLTM_FUSED, x, h, c, &new_h, &new_c);
 *   tg_backward(loss_of(new_h, new_c), NULL);
 *   tg_optimizer_step(opt);
 *   tg_optimizer_zero_grad(opt);
 *   tg_scope_end(s); */
#ifndef TG_NN_H
#define TG_NN_H

#include "conv.h"
#include "lltm.h"
#include "module.h"
#include "ops.h"
#include "pool.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* ---- Linear: y = x @ weight^T + bias ----
 * weight [out, in], bias [out] (optional), both uniform(-1/sqrt(in), 1/sqrt(in)) like
 * torch.nn.Linear's default init. x is [batch, in]; y is [batch, out]. */
typedef struct tg_linear tg_linear;
/* NULL (with the error) on bad sizes or options. gen may be NULL (the default generator). */
tg_linear *tg_linear_new(int64_t in_features, int64_t out_features, bool bias, tg_options opts,
                         tg_generator *gen);
void tg_linear_free(tg_linear *m); /* NULL is a no-op */
tg_tensor *tg_linear_forward(const tg_linear *m, const tg_tensor *x);
tg_tensor *tg_linear_weight(const tg_linear *m);
tg_tensor *tg_linear_bias(const tg_linear *m); /* NULL without bias */
/* The module behind each typed handle (tg/module.h): parameters "weight", "bias". Adding
 * it to a parent hands the parent ownership: then free the parent, not the handle. */
tg_module *tg_linear_module(tg_linear *m);

/* ---- the LLTM cell (tg/lltm.h), the tutorial's torch.nn.Module ----
 * weights [3S, S+I], bias [3S], both uniform(-1/sqrt(S), 1/sqrt(S)). */
typedef enum tg_lltm_impl {
  TG_LLTM_FUSED,    /* the registered fused op tg_lltm */
  TG_LLTM_COMPOSED, /* tg_lltm_composed: generic ops on the tape */
} tg_lltm_impl;

typedef struct tg_lltm_cell tg_lltm_cell;
tg_lltm_cell *tg_lltm_cell_new(int64_t input_features, int64_t state_size, tg_options opts,
                               tg_generator *gen);
void tg_lltm_cell_free(tg_lltm_cell *cell); /* NULL is a no-op */
/* input [B, I], old_h and old_cell [B, S] -> new_h, new_cell [B, S] through either path. */
tg_status tg_lltm_cell_forward(const tg_lltm_cell *cell, tg_lltm_impl impl, const tg_tensor *input,
                               const tg_tensor *old_h, const tg_tensor *old_cell, tg_tensor **new_h,
                               tg_tensor **new_cell);
tg_tensor *tg_lltm_cell_weights(const tg_lltm_cell *cell);
tg_tensor *tg_lltm_cell_bias(const tg_lltm_cell *cell);
int64_t tg_lltm_cell_input_features(const tg_lltm_cell *cell);
int64_t tg_lltm_cell_state_size(const tg_lltm_cell *cell);
tg_module *tg_lltm_cell_module(tg_lltm_cell *cell); /* parameters "weights", "bias" */

/* ---- the Embedding layer: rows of a table picked by index (the op tg_embedding, tg/ops.h) ----
 * weight [num_embeddings, dim], normal(0, 1) like torch.nn.Embedding. */
typedef struct tg_embedding_layer tg_embedding_layer;
tg_embedding_layer *tg_embedding_layer_new(int64_t num_embeddings, int64_t embedding_dim,
                                           tg_options opts, tg_generator *gen);
void tg_embedding_layer_free(tg_embedding_layer *e); /* NULL is a no-op */
/* indices: I64 of any shape, values in [0, num_embeddings); result [*indices.shape, dim]. */
tg_tensor *tg_embedding_layer_forward(const tg_embedding_layer *e, const tg_tensor *indices);
tg_tensor *tg_embedding_layer_weight(const tg_embedding_layer *e);
tg_module *tg_embedding_layer_module(tg_embedding_layer *e); /* parameter "weight" */

/* ---- an LLTM over a sequence: the cell (child "cell") applied at each of T steps ----
 * input [T, B, I] (time first, like torch.nn.LSTM); h0, c0 [B, S], or NULL for zeros.
 * output [T, B, S] holds every step's h; h_n, c_n the last step's state (any of the three
 * out pointers may be NULL). The implementation is chosen per model and can be changed. */
typedef struct tg_lltm_seq tg_lltm_seq;
tg_lltm_seq *tg_lltm_seq_new(int64_t input_features, int64_t state_size, tg_lltm_impl impl,
                             tg_options opts, tg_generator *gen);
void tg_lltm_seq_free(tg_lltm_seq *seq); /* NULL is a no-op */
tg_status tg_lltm_seq_forward(const tg_lltm_seq *seq, const tg_tensor *input, const tg_tensor *h0,
                              const tg_tensor *c0, tg_tensor **output, tg_tensor **h_n,
                              tg_tensor **c_n);
void tg_lltm_seq_set_impl(tg_lltm_seq *seq, tg_lltm_impl impl);
tg_lltm_impl tg_lltm_seq_impl(const tg_lltm_seq *seq);
tg_lltm_cell *tg_lltm_seq_cell(const tg_lltm_seq *seq); /* borrowed */
tg_module *tg_lltm_seq_module(tg_lltm_seq *seq);        /* "cell.weights", "cell.bias" */

/* ---- Sequential (torch.nn.Sequential): children run in order by tg_module_forward ----
 * An empty Sequential returns its input. Children are named like PyTorch's: by position
 * ("0", "1", ...) unless a name is given, so state dict names are torch's ("0.weight",
 * "2.bias") and a torch.nn.Sequential's state loads into the same layers here. */
tg_module *tg_sequential_new(void); /* free with tg_module_free (it frees the children) */
/* Appends child, which must have a one-tensor forward (tg_module_forward) and no parent;
 * seq takes ownership (on failure it stays with the caller). name NULL: the position, as
 * torch's append; else a name as tg_module_add_child takes. TG_ERR_ARGUMENT when seq is
 * not a Sequential, child has no forward or the name is bad or taken. */
tg_status tg_sequential_append(tg_module *seq, tg_module *child, const char *name);

/* ---- parameter-free layers, as modules (free with tg_module_free, or hand to a parent) ---- */
/* torch.nn.Flatten(start_dim, end_dim): dims start_dim..end_dim of the input (negative ones
 * count from the end) merged into one, through tg_reshape (a view when the strides allow).
 * PyTorch's defaults are (1, -1): [N, C, H, W] -> [N, C*H*W]. Dims out of range for an input,
 * or a start after the end, are an error of the forward call. */
tg_module *tg_flatten_layer_new(int start_dim, int end_dim);
tg_module *tg_relu_layer_new(void);    /* torch.nn.ReLU: tg_relu */
tg_module *tg_tanh_layer_new(void);    /* torch.nn.Tanh: tg_tanh */
tg_module *tg_sigmoid_layer_new(void); /* torch.nn.Sigmoid: tg_sigmoid */

/* ---- convolution layers: torch.nn.Conv1d and Conv2d over tg_conv1d / tg_conv2d (tg/conv.h) ----
 * weight [out_channels, in_channels / groups, k...], bias [out_channels] (when bias), both
 * PyTorch's default init: weight kaiming_uniform_(a = sqrt(5)), bias uniform(+-1/sqrt(fan_in))
 * with fan_in = in_channels / groups * prod(kernel_size), drawn from gen (NULL: the default
 * generator) in that order. conv carries stride, padding (numbers, "valid" or "same"),
 * dilation and groups as the op takes them (NULL or zeroed: PyTorch's defaults, stride 1,
 * padding 0, dilation 1, groups 1); PyTorch's padding_mode is conv's fill (zeroed: "zeros";
 * also reflect, replicate, circular). Every argument is checked here (TG_ERR_ARGUMENT naming it):
 * channels and kernel >= 1, no negative stride, padding or dilation, groups dividing both channel
 * counts, "same" with stride 1 only; a floating dtype (TG_ERR_DTYPE). The forward takes what the op
 * takes: [N, C_in, H, W] or [C_in, H, W] (Conv1d: [N, C_in, L] or [C_in, L]). Module types
 * "conv1d", "conv2d"; tg_module_forward runs them. */
typedef struct tg_conv2d_layer tg_conv2d_layer;
tg_conv2d_layer *tg_conv2d_layer_new(int64_t in_channels, int64_t out_channels,
                                     const int64_t kernel_size[2], const tg_conv2d_opts *conv,
                                     bool bias, tg_options opts, tg_generator *gen);
void tg_conv2d_layer_free(tg_conv2d_layer *c);         /* NULL is a no-op */
tg_module *tg_conv2d_layer_module(tg_conv2d_layer *c); /* "weight", "bias" */
tg_tensor *tg_conv2d_layer_weight(const tg_conv2d_layer *c);
tg_tensor *tg_conv2d_layer_bias(const tg_conv2d_layer *c); /* NULL without bias */

typedef struct tg_conv1d_layer tg_conv1d_layer;
tg_conv1d_layer *tg_conv1d_layer_new(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                     const tg_conv1d_opts *conv, bool bias, tg_options opts,
                                     tg_generator *gen);
void tg_conv1d_layer_free(tg_conv1d_layer *c);
tg_module *tg_conv1d_layer_module(tg_conv1d_layer *c);
tg_tensor *tg_conv1d_layer_weight(const tg_conv1d_layer *c);
tg_tensor *tg_conv1d_layer_bias(const tg_conv1d_layer *c);

/* ---- pooling layers: torch.nn.MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (tg/pool.h) ----
 * No parameters; the same in training and evaluation; modules (free with tg_module_free, or
 * hand to a parent) of types "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d". The options
 * are the op's (zeroed: PyTorch's defaults, stride = kernel_size). Checked here
 * (TG_ERR_ARGUMENT naming the argument): kernel >= 1, stride and dilation not negative and
 * not 0 in one dim only, padding >= 0 and at most half the kernel, divisor_override >= 0.
 * PyTorch's return_indices is tg_max_pool2d_with_indices (two results: no layer). */
tg_module *tg_max_pool2d_layer_new(const int64_t kernel_size[2], tg_max_pool2d_options opts);
tg_module *tg_avg_pool2d_layer_new(const int64_t kernel_size[2], tg_avg_pool2d_options opts);
/* output_size {OH, OW}, each >= 0, or -1 to keep the input's size there (PyTorch's None). */
tg_module *tg_adaptive_avg_pool2d_layer_new(const int64_t output_size[2]);

/* ---- normalization layers: torch.nn.BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm over
 * tg_batch_norm, tg_layer_norm and tg_group_norm (tg/norm.h) ----
 * Modules (free with tg_module_free, or hand to a parent) of types "batch_norm1d",
 * "batch_norm2d", "layer_norm", "group_norm". The arguments are PyTorch's, spelled out (its
 * defaults: eps 1e-5, momentum 0.1, affine and track_running_stats true); eps and momentum 0
 * mean zero here. With affine (elementwise_affine) the parameters "weight" (ones) and "bias"
 * (zeros) of [num_features] (LayerNorm: normalized_shape); none without. Checked here
 * (TG_ERR_ARGUMENT naming the argument): sizes >= 1, eps finite and >= 0, momentum in [0, 1]
 * (or TG_BATCH_NORM_CUMULATIVE), num_groups dividing num_channels; a floating dtype
 * (TG_ERR_DTYPE).
 * BatchNorm with track_running_stats has the buffers "running_mean" (zeros), "running_var"
 * (ones) and "num_batches_tracked" (a 0-dim I64 0), in PyTorch's order after the parameters.
 * In training it normalizes by the batch's statistics, updates the running ones in place
 * (outside the tape; running_var with the unbiased variance) and counts the batch; in
 * evaluation it normalizes by the running statistics. Without track_running_stats it always
 * uses the batch's. A batch the op refuses changes no buffer. BatchNorm1d takes [N, C] or
 * [N, C, L], BatchNorm2d [N, C, H, W] (TG_ERR_SHAPE otherwise, as PyTorch's "expected 4D
 * input"). LayerNorm and GroupNorm are the same in training and evaluation. */
#define TG_BATCH_NORM_CUMULATIVE (-1.0) /* momentum: PyTorch's None, 1 / num_batches_tracked */
tg_module *tg_batch_norm1d_layer_new(int64_t num_features, double eps, double momentum, bool affine,
                                     bool track_running_stats, tg_options opts);
tg_module *tg_batch_norm2d_layer_new(int64_t num_features, double eps, double momentum, bool affine,
                                     bool track_running_stats, tg_options opts);
/* normalized_shape: the last n_normalized dims of each input, as PyTorch's list. */
tg_module *tg_layer_norm_layer_new(int n_normalized, const int64_t *normalized_shape, double eps,
                                   bool elementwise_affine, tg_options opts);
tg_module *tg_group_norm_layer_new(int64_t num_groups, int64_t num_channels, double eps,
                                   bool affine, tg_options opts);

/* ---- torch.nn.Dropout(p): tg_dropout (tg/norm.h) in training, the input itself in
 * evaluation ----
 * Masks come from gen (borrowed: it must outlive the layer; NULL: the thread's default
 * generator), so a run seeded the same drops the same elements. p outside [0, 1] is
 * TG_ERR_ARGUMENT. Module type "dropout"; no parameters. */
tg_module *tg_dropout_layer_new(double p, tg_generator *gen);

/* ---- init: torch.nn.init's functions ----
 * Each fills t in place, outside the tape (as under tg_no_grad_begin/end, so a parameter
 * that requires grad may be filled), drawing from gen (NULL: this thread's default
 * generator), and returns TG_OK or the error. The random ones need a floating t
 * (TG_ERR_DTYPE). The distributions are PyTorch's; the values are tg's generator's. */
typedef enum tg_nonlinearity {
  TG_NL_LINEAR, /* gain 1, like the convolutions and sigmoid */
  TG_NL_CONV1D,
  TG_NL_CONV2D,
  TG_NL_CONV3D,
  TG_NL_CONV_TRANSPOSE1D,
  TG_NL_CONV_TRANSPOSE2D,
  TG_NL_CONV_TRANSPOSE3D,
  TG_NL_SIGMOID,
  TG_NL_TANH,       /* 5/3 */
  TG_NL_RELU,       /* sqrt(2) */
  TG_NL_LEAKY_RELU, /* sqrt(2 / (1 + negative_slope^2)) */
  TG_NL_SELU,       /* 3/4 */
} tg_nonlinearity;
typedef enum tg_fan_mode {
  TG_FAN_IN,  /* keeps the variance of the forward pass */
  TG_FAN_OUT, /* keeps the variance of the backward pass */
} tg_fan_mode;

/* torch.nn.init.calculate_gain. param is leaky_relu's negative slope (NAN for PyTorch's
 * default, 0.01) and ignored otherwise. NAN with TG_ERR_ARGUMENT for an unknown value. */
double tg_init_calculate_gain(tg_nonlinearity nonlinearity, double param);
/* Fans of a weight of at least 2 dims, [out, in, k...] (a convolution's [out, in/groups, k...]):
 * fan_in = size(1) * prod(k), fan_out = size(0) * prod(k). Either out pointer may be NULL.
 * TG_ERR_SHAPE for fewer than 2 dims (PyTorch's ValueError). */
tg_status tg_init_calculate_fans(const tg_tensor *t, int64_t *fan_in, int64_t *fan_out);

tg_status tg_init_uniform_(tg_tensor *t, double a, double b, tg_generator *gen); /* [a, b) */
tg_status tg_init_normal_(tg_tensor *t, double mean, double std, tg_generator *gen);
tg_status tg_init_constant_(tg_tensor *t, double value); /* any dtype, like tg_fill_ */
tg_status tg_init_zeros_(tg_tensor *t);
tg_status tg_init_ones_(tg_tensor *t);
/* Glorot: uniform(+-gain * sqrt(6 / (fan_in + fan_out))), or normal with std
 * gain * sqrt(2 / (fan_in + fan_out)). gain 1 is PyTorch's default. At least 2 dims
 * (TG_ERR_SHAPE); fan_in + fan_out of 0 is TG_ERR_ARGUMENT (PyTorch divides by zero). */
tg_status tg_init_xavier_uniform_(tg_tensor *t, double gain, tg_generator *gen);
tg_status tg_init_xavier_normal_(tg_tensor *t, double gain, tg_generator *gen);
/* He: std = gain(nonlinearity, a) / sqrt(fan), fan picked by mode; uniform(+-sqrt(3) * std)
 * or normal(0, std). PyTorch's defaults are a 0, TG_FAN_IN, TG_NL_LEAKY_RELU (gain sqrt(2)).
 * a is leaky_relu's negative slope (ignored for other nonlinearities). torch.nn.Linear and
 * the convolutions initialize their weights with a = sqrt(5). At least 2 dims (TG_ERR_SHAPE);
 * a tensor with no elements is left as it is (PyTorch warns). */
tg_status tg_init_kaiming_uniform_(tg_tensor *t, double a, tg_fan_mode mode,
                                   tg_nonlinearity nonlinearity, tg_generator *gen);
tg_status tg_init_kaiming_normal_(tg_tensor *t, double a, tg_fan_mode mode,
                                  tg_nonlinearity nonlinearity, tg_generator *gen);

/* ---- parameter lists ----
 * Each writes up to max borrowed pointers into out (which may be NULL when max is 0) and
 * returns how many parameters the module has: weights first, then bias. */
int tg_linear_parameters(const tg_linear *m, tg_tensor **out, int max);
int tg_lltm_cell_parameters(const tg_lltm_cell *cell, tg_tensor **out, int max);

/* ---- optimizers ----
 * An optimizer holds references to its parameters (and its own state: momentum buffers,
 * Adam moments). step() updates every parameter that has a gradient, in place, outside
 * the tape; parameters without a gradient are skipped. */
typedef struct tg_optimizer tg_optimizer;

typedef struct tg_sgd_options {
  double lr;           /* learning rate, > 0 */
  double momentum;     /* 0 = plain SGD */
  double dampening;    /* applied to the gradient in the momentum buffer */
  double weight_decay; /* L2 penalty added to the gradient */
  bool nesterov;       /* needs momentum > 0 and dampening == 0 */
} tg_sgd_options;

typedef struct tg_adam_options {
  double lr;           /* 0 = 1e-3 */
  double beta1;        /* 0 = 0.9 */
  double beta2;        /* 0 = 0.999 */
  double eps;          /* 0 = 1e-8 */
  double weight_decay; /* L2 penalty added to the gradient (torch.optim.Adam's) */
} tg_adam_options;

/* PyTorch's update rules (torch.optim.SGD and Adam). NULL with TG_ERR_ARGUMENT on bad
 * options or parameters (NULL, not floating, not requiring grad). */
tg_optimizer *tg_sgd_new(int n_params, tg_tensor *const *params, tg_sgd_options opts);
tg_optimizer *tg_adam_new(int n_params, tg_tensor *const *params, tg_adam_options opts);
/* The same over every parameter of a module (tg_module_parameters), remembering their
 * dotted names for the optimizer's state. */
tg_optimizer *tg_sgd_for(const tg_module *m, tg_sgd_options opts);
tg_optimizer *tg_adam_for(const tg_module *m, tg_adam_options opts);
tg_status tg_optimizer_step(tg_optimizer *opt);
/* Zeroes every parameter's gradient in place (keeps the buffers). */
tg_status tg_optimizer_zero_grad(tg_optimizer *opt);
void tg_optimizer_free(tg_optimizer *opt); /* NULL is a no-op */
/* The learning rate (parameter group 0's), and changing it (every group's); TG_ERR_ARGUMENT
 * unless lr > 0. Groups, AdamW, schedules and clipping: tg/optim.h. */
double tg_optimizer_lr(const tg_optimizer *opt);
tg_status tg_optimizer_set_lr(tg_optimizer *opt, double lr);

/* The optimizer's state per parameter, named "<param>.<what>" where <param> is the
 * parameter's dotted name (tg_*_for) or its index ("0", "1", ...): SGD's
 * "momentum_buffer", Adam's and AdamW's "exp_avg", "exp_avg_sq" and "step" (a 0-dim F64), like
 * torch.optim's state_dict. Only what exists so far (nothing before the first step). The
 * tensors are shared; the caller frees the dict. Loading copies into the optimizer
 * (all-or-nothing): every name must belong to this optimizer with the parameter's shape and
 * dtype (TG_ERR_ARGUMENT/SHAPE/DTYPE naming it), and the optimizer's own state is replaced
 * by exactly what the dict holds. */
tg_tensor_dict *tg_optimizer_state_dict(const tg_optimizer *opt);
tg_status tg_optimizer_load_state_dict(tg_optimizer *opt, const tg_tensor_dict *state);

/* ---- checkpoints: model + optimizer + step + random generators, in one file ----
 * A safetensors file: "model.<name>" for the module's state, "optim.<name>" for the
 * optimizer's, metadata "tg.checkpoint" (the format version), "tg.step", "tg.optim" (how
 * many optim entries there are, so a file that lost some is told from one saved before the
 * first step) and "tg.generator.<i>" for each generator's state (tg_generator_state).
 * Written atomically: a crash mid-write leaves the previous checkpoint at path whole (and
 * a temporary file path.tmp.XXXXXX, which the next save of path removes).
 * Loading is strict and all-or-nothing: module, optimizer and generators change only when
 * everything in the file matches. opt may be NULL: then no optim entries are written, and
 * a load skips those in the file; a file saved without an optimizer does not load into one.
 * A model-only load (opt NULL and n_generators 0, to sample from the model) takes the model
 * and the step alone: the file's generator states are ignored and no generator changes.
 * Any other load takes exactly as many generators as the file holds states, and sets each.
 * A NULL entry in generators stands for this thread's default generator (saved, or set by
 * a load), as everywhere in tg. Training resumed from a checkpoint gives bit-identical
 * results to the run that never stopped at the same thread count with
 * tg_set_deterministic(true) (or one thread): by default tg may run one-threaded for a while
 * on a busy machine, which rounds differently (tests/nn/test_checkpoint.c). */
tg_status tg_checkpoint_save(const char *path, const tg_module *m, const tg_optimizer *opt,
                             int64_t step, int n_generators, tg_generator *const *generators);
tg_status tg_checkpoint_load(const char *path, tg_module *m, tg_optimizer *opt, int64_t *step,
                             int n_generators, tg_generator *const *generators);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
