/* The meta device (meta_device.c): registered by the device registry on first use. */
#ifndef TG_META_DEVICE_H
#define TG_META_DEVICE_H

#include "tg/types.h"

/* Registers meta through tg_device_register; it must get the type TG_META. */
tg_status tg__meta_device_register(void);

#endif
