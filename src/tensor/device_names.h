/* The tensor layer's view of device types: their names and whether their tensors hold
 * data. The device registry (src/ops/device_registry.c) writes a registered type's entry;
 * the built-in ones are preset. */
#ifndef TG_DEVICE_NAMES_H
#define TG_DEVICE_NAMES_H

#include "tg/types.h"

/* name is kept, not copied (the registry keeps the device's ops, which hold it). */
void tg__device_type_set(tg_device_type type, const char *name, bool has_data);
/* False for meta-like devices (TG_DEVICE_NO_DATA) and for unknown types. */
bool tg__device_type_has_data(tg_device_type type);

#endif
