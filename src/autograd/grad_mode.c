/* Thread-local grad mode. No-grad regions nest: each end restores what its begin saw. */
#include "tg/autograd.h"

static _Thread_local bool grad_disabled;   /* zero value: grad enabled */
static _Thread_local uint64_t saved_modes; /* bit i: mode before the i-th open region */
static _Thread_local int region_depth;

bool tg_is_grad_enabled(void) { return !grad_disabled; }

bool tg_set_grad_enabled(bool enabled) {
  bool previous = !grad_disabled;
  grad_disabled = !enabled;
  return previous;
}

void tg_no_grad_begin(void) {
  if (region_depth < 64) {
    if (grad_disabled)
      saved_modes |= (uint64_t)1 << region_depth;
    else
      saved_modes &= ~((uint64_t)1 << region_depth);
  }
  region_depth++;
  grad_disabled = true;
}

void tg_no_grad_end(void) {
  if (region_depth == 0) return;
  region_depth--;
  /* Regions nested deeper than 64 stay disabled until they unwind to a recorded level. */
  grad_disabled = region_depth < 64 ? (saved_modes >> region_depth) & 1 : true;
}
