/* The LLTM composed from generic ops, exactly the tutorial's forward; the tape derives the
 * backward. The reference the fused op is checked against. */
#include "ops/lltm_internal.h"
#include "tg/lltm.h"
#include "tg/ops.h"

tg_status tg_lltm_composed(const tg_tensor *input, const tg_tensor *weights, const tg_tensor *bias,
                           const tg_tensor *old_h, const tg_tensor *old_cell, tg_tensor **new_h,
                           tg_tensor **new_cell) {
  if (new_h) *new_h = NULL;
  if (new_cell) *new_cell = NULL;
  if (!new_h || !new_cell)
    return tg_set_error(TG_ERR_ARGUMENT, "tg_lltm_composed: new_h and new_cell must not be NULL");
  tg_status st = tg__lltm_check("tg_lltm_composed", input, weights, bias, old_h, old_cell, NULL);
  if (st != TG_OK) return st;

  /* Room for the two results in the caller's scope first, so handing them over cannot fail. */
  if ((st = tg__scope_reserve(2)) != TG_OK) return st;
  /* Intermediates live in an inner scope; only the two results reach the caller's. */
  tg_scope s = tg_scope_begin();
  tg_tensor *X = tg_cat(2, (const tg_tensor *const[]){old_h, input}, 1);
  tg_tensor *gate_weights = tg_addmm(bias, X, tg_t(weights), 1.0, 1.0);
  tg_tensor *gates[3] = {0};
  int n_gates = 0;
  if (gate_weights) tg_chunk(gate_weights, 3, 1, gates, &n_gates);
  tg_tensor *input_gate = tg_sigmoid(gates[0]);
  tg_tensor *output_gate = tg_sigmoid(gates[1]);
  tg_tensor *candidate_cell = tg_elu(gates[2], 1.0);
  tg_tensor *c = tg_add(old_cell, tg_mul(candidate_cell, input_gate));
  tg_tensor *h = tg_mul(tg_tanh(c), output_gate);
  st = h && c ? TG_OK : tg_last_error();
  if (st == TG_OK) { /* neither can fail: reserved above */
    *new_h = tg_scope_escape(s, h);
    *new_cell = tg_scope_escape(s, c);
  }
  tg_scope_end(s);
  return st;
}
