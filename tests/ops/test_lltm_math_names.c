/* The LLTM cell math (src/ops/lltm_cell.h) and the public nn functions (tg/nn.h) in one
 * file: the math's generic macros once had the public name tg_lltm_cell_forward, so this
 * call did not compile (issue 22). */
#include <criterion/criterion.h>

#include "ops/lltm_cell.h"
#include "testutil.h"
#include "tg/nn.h"

Test(lltm_math_names, public_cell_forward_next_to_the_cell_math) {
  tg_lltm_cell *cell = tg_lltm_cell_new(3, 2, (tg_options){TG_F64, TG_DEVICE_CPU, false}, NULL);
  cr_assert_not_null(cell);
  const int64_t in_sizes[] = {1, 3}, state_sizes[] = {1, 2};
  tg_options f64 = {TG_F64, TG_DEVICE_CPU, false};
  tg_tensor *x = tg_ones(2, in_sizes, f64), *h = tg_zeros(2, state_sizes, f64);
  tg_tensor *c = tg_zeros(2, state_sizes, f64), *new_h = NULL, *new_c = NULL;
  cr_assert_eq(tg_lltm_cell_forward(cell, TG_LLTM_FUSED, x, h, c, &new_h, &new_c), TG_OK);
  cr_assert_eq(tg_numel(new_h), 2);
  /* ...and the math itself, by its internal name: one element of the same cell. */
  double ig, og, cand, nc, nh;
  tg__lltm_math_forward(0.0, 0.0, 0.0, 0.0, &ig, &og, &cand, &nc, &nh);
  cr_assert_float_eq(nc, 0.0, 1e-15);
  tg_lltm_cell_free(cell);
}
