/* tg — a small tensor library in C with an autograd tape. Include this header. */
#ifndef TG_TG_H
#define TG_TG_H

#include "types.h"
#include "tensor.h"
#include "dispatch.h"
#include "autograd.h"
#include "ops.h"
#include "lltm.h"
#include "nn.h"
#include "cuda.h"

#endif
