/* Helpers shared by the nn modules: creating the parameters a module owns. */
#ifndef TG_NN_PARAMS_H
#define TG_NN_PARAMS_H

#include "tg/tensor.h"

/* A new leaf that requires grad, uniform in [-bound, bound), owned by the caller (one
 * reference, whatever scope is open). NULL with the error on failure. */
tg_tensor *tg__nn_uniform_param(int ndim, const int64_t *sizes, double bound, tg_options opts,
                                tg_generator *gen);

/* The same, normal(0, 1). */
tg_tensor *tg__nn_normal_param(int ndim, const int64_t *sizes, tg_options opts, tg_generator *gen);

/* Copies up to max of the n parameters into out; returns n. */
int tg__nn_list_params(int n, tg_tensor *const *params, tg_tensor **out, int max);

#endif
