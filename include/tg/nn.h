/* tg — nn: parameters, modules (Linear, LLTM cell), init and optimizers.
 * (Filled in by the LLTM/nn work; see issue 4.) */
#ifndef TG_NN_H
#define TG_NN_H

#include "lltm.h"
#include "ops.h"

#endif
