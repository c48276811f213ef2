/* Anomaly mode (torch.autograd.set_detect_anomaly): thread-local like grad mode; regions
 * nest, each end restoring what its begin saw. When on, the first op call whose output, or
 * whose backward's input gradient, is not finite fails with TG_ERR_STATE naming it. */
#include <math.h>
#include <stdio.h>

#include "anomaly.h"
#include "grad_arith.h"
#include "tg/autograd.h"

typedef struct anomaly_state {
  bool enabled;
  bool inside_checked_op; /* a checked call is running: the ones inside it are not checked */
  int region_depth;
  uint64_t saved_modes; /* bit i: the mode before the i-th open region */
} anomaly_state;
static _Thread_local anomaly_state state;

bool tg_is_anomaly_enabled(void) { return state.enabled; }

bool tg_set_detect_anomaly(bool enabled) {
  bool previous = state.enabled;
  state.enabled = enabled;
  return previous;
}

void tg_detect_anomaly_begin(void) {
  if (state.region_depth < 64) {
    uint64_t bit = (uint64_t)1 << state.region_depth;
    state.saved_modes = state.enabled ? state.saved_modes | bit : state.saved_modes & ~bit;
  }
  state.region_depth++;
  state.enabled = true;
}

void tg_detect_anomaly_end(void) {
  if (state.region_depth == 0) return;
  state.region_depth--;
  /* Regions nested deeper than 64 stay on until they unwind to a recorded level. */
  state.enabled = state.region_depth < 64 ? (state.saved_modes >> state.region_depth) & 1 : true;
}

bool tg__anomaly_begin_op(void) {
  if (!state.enabled || state.inside_checked_op) return false;
  state.inside_checked_op = true;
  return true;
}

void tg__anomaly_end_op(bool began) {
  if (began) state.inside_checked_op = false;
}

/* "[1, 2]": the index of flat element k of t (row-major); "[]" for a 0-dim t. */
static const char *position(const tg_tensor *t, int64_t k) {
  int64_t index[TG_MAX_DIMS];
  for (int d = t->ndim - 1; d >= 0; d--) {
    index[d] = t->sizes[d] > 0 ? k % t->sizes[d] : 0;
    k = t->sizes[d] > 0 ? k / t->sizes[d] : 0;
  }
  return tg__dims_str(t->ndim, index);
}

/* "nan" whatever its sign bit (printf shows "-nan" for some), "inf" or "-inf". */
static const char *value_name(double v) { return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

/* *where: t's first non-finite element, -1 if none. Checked while "inside" a checked op, so
 * the host copy of a device tensor is not itself checked. */
static tg_status find(const tg_tensor *t, int64_t *where, double *value) {
  bool was_inside = state.inside_checked_op;
  state.inside_checked_op = true;
  tg_status st = tg__grad_arith()->first_nonfinite(t, where, value);
  state.inside_checked_op = was_inside;
  return st;
}

tg_status tg__anomaly_check_output(const char *fn, int j, const tg_tensor *out) {
  int64_t where;
  double value;
  tg_status st = find(out, &where, &value);
  if (st != TG_OK || where < 0) return st;
  return tg_set_error(TG_ERR_STATE,
                      "%s: detect anomaly: forward produced %s in output %d at %s (of %s); "
                      "anomaly mode is on (tg_set_detect_anomaly)",
                      fn, value_name(value), j, position(out, where), tg__sizes_str(out));
}

tg_status tg__anomaly_check_grad(const char *fn, const char *op, int i, const tg_tensor *grad) {
  int64_t where;
  double value;
  tg_status st = find(grad, &where, &value);
  if (st != TG_OK || where < 0) return st;
  return tg_set_error(TG_ERR_STATE,
                      "%s: detect anomaly: backward of %s produced %s in the gradient of input "
                      "%d at %s (of %s); anomaly mode is on (tg_set_detect_anomaly)",
                      fn, op, value_name(value), i, position(grad, where), tg__sizes_str(grad));
}
