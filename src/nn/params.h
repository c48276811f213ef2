/* Helpers shared by the nn modules: creating the parameters a module owns, initialized by
 * the named init functions (tg/nn.h). */
#ifndef TG_NN_PARAMS_H
#define TG_NN_PARAMS_H

#include "tg/tensor.h"

/* A new leaf that requires grad, uniform in [-bound, bound), owned by the caller (one
 * reference, whatever scope is open). NULL with the error on failure. */
tg_tensor *tg__nn_uniform_param(int ndim, const int64_t *sizes, double bound, tg_options opts,
                                tg_generator *gen);

/* The same, normal(0, 1). */
tg_tensor *tg__nn_normal_param(int ndim, const int64_t *sizes, tg_options opts, tg_generator *gen);

/* The same, tg_init_kaiming_uniform_(a, fan in, leaky_relu): PyTorch's default for the
 * weights of Linear and the convolutions with a = sqrt(5). At least 2 dims. */
tg_tensor *tg__nn_kaiming_uniform_param(int ndim, const int64_t *sizes, double a, tg_options opts,
                                        tg_generator *gen);

/* Copies up to max of the n parameters into out; returns n. */
int tg__nn_list_params(int n, tg_tensor *const *params, tg_tensor **out, int max);

#endif
