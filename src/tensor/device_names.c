/* Names and the has-data flag of device types (src/tensor/device_names.h). */
#include "tensor/device_names.h"

typedef struct device_entry {
  const char *name;
  bool has_data;
} device_entry;

static device_entry entries[TG_NUM_DEVICE_TYPES] = {
    [TG_CPU] = {"cpu", true},
    [TG_CUDA] = {"cuda", true},
    [TG_META] = {"meta", false},
};

void tg__device_type_set(tg_device_type type, const char *name, bool has_data) {
  if ((unsigned)type < TG_NUM_DEVICE_TYPES) entries[type] = (device_entry){name, has_data};
}

bool tg__device_type_has_data(tg_device_type type) {
  return (unsigned)type < TG_NUM_DEVICE_TYPES && entries[type].has_data;
}

const char *tg_device_type_name(tg_device_type type) {
  if ((unsigned)type >= TG_NUM_DEVICE_TYPES || !entries[type].name) return "invalid-device";
  return entries[type].name;
}
