/* The op profiler's hooks (tg_profile_start), called by tg_apply and the engine. */
#ifndef TG_PROFILE_H
#define TG_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "tg/types.h"

/* One op call being timed; lives on the caller's stack between begin and end. */
typedef struct tg__profile_frame {
  bool on; /* false: the profiler was off at begin, end does nothing */
  int64_t start_ns;
  int64_t child_ns; /* time spent in the op calls made inside this one */
  struct tg__profile_frame *parent;
} tg__profile_frame;

/* Costs one relaxed atomic load while the profiler is off. */
void tg__profile_begin(tg__profile_frame *f);
/* Adds the call to op's row (its forward, or its backward function). */
void tg__profile_end(tg__profile_frame *f, const char *op, bool backward);

/* The device's synchronize, set by the ops layer when a device module loads: with
 * tg_profile_start(true) each timed call waits for the device at its begin and end. */
void tg__profile_set_device_sync(tg_status (*sync)(void));

#endif
