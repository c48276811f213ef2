/* What the fused attention op (attention.c) and its composed twin (attention_composed.c)
 * share: the argument checks and the resolved options. */
#ifndef TG_OPS_ATTENTION_INTERNAL_H
#define TG_OPS_ATTENTION_INTERNAL_H

#include "tg/attention.h"

/* q [*, Tq, D], k [*, Tk, D], v [*, Tk, Dv]; n = the leading dims' product. */
typedef struct tg_attention_dims {
  int lead; /* number of leading dims */
  int64_t n, tq, tk, d, dv;
} tg_attention_dims;

/* The shape, dtype and device checks of every entry, errors naming fn. */
bool tg__attention_check(const char *fn, const tg_tensor *q, const tg_tensor *k, const tg_tensor *v,
                         tg_attention_dims *dims);

/* The options' checks: dropout_p in [0, 1), scale finite; *scale resolved (0: 1 / sqrt(D), 1
 * when D is 0). */
bool tg__attention_options_check(const char *fn, const tg_attention_options *o,
                                 const tg_attention_dims *dims, double *scale);

/* Philox positions a dropout over [n, Tq, Tk] probabilities consumes (tg_rand's rounding). */
uint64_t tg__attention_dropout_span(const tg_attention_dims *dims);

#endif
