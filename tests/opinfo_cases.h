/* Sample functions that tg_op_check must refuse, shared by tests/ops/test_opinfo.c (on the CPU)
 * and tests/cuda/test_cuda_opinfo.c (samples that differ between devices). */
#ifndef TG_TESTS_OPINFO_CASES_H
#define TG_TESTS_OPINFO_CASES_H

#include <stdio.h>

#include "testutil.h"

typedef struct bad_samples_case {
  const char *name; /* of the op registered with fn */
  tg_sample_fn fn;
  tg_status code;       /* what tg_op_check returns */
  const char *words[2]; /* in its message, besides "tg_op_check" and "op '<name>'" */
} bad_samples_case;

/* Registers an op under name whose samples come from fn; returns it. */
typedef const tg_op_desc *(*register_sampled_op_fn)(const char *name, tg_sample_fn fn);

/* Each case's op, checked with opts, fails with its code and a message naming the op. */
static inline void expect_bad_samples_refused(const bad_samples_case *cases, size_t n,
                                              register_sampled_op_fn register_op,
                                              tg_op_check_options opts) {
  for (size_t k = 0; k < n; k++) {
    const tg_op_desc *op = register_op(cases[k].name, cases[k].fn);
    cr_expect_eq(tg_op_check(op, opts), cases[k].code, "%s: %s", cases[k].name,
                 tg_last_error_message());
    char name[64];
    snprintf(name, sizeof name, "op '%s'", cases[k].name);
    tg_expect_error(cases[k].code, "tg_op_check", name, cases[k].words[0], cases[k].words[1]);
  }
}

#endif
