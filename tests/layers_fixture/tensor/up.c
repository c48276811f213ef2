/* A fixture for the check_layers_fails test: the tensor layer including an op header. */
#include "ops/op.h"
