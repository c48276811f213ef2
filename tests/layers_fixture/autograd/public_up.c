/* Planted violations: the autograd layer including public headers of higher layers (nn's
 * own, and the umbrella). scripts/check-layers.sh must name both. */
#include "tg/nn.h"
#include "tg/tg.h"
