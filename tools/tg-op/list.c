/* tg-op list: every registered op, in registry order, then the composite references. */
#include <stdio.h>
#include <string.h>

#include "tg_op.h"

/* Where op comes from: the path of the loaded extension that registered it, else tg. */
static const char *origin_of(const tg_op_desc *op) {
  for (int e = 0; e < tg_extension_count(); e++) {
    const tg_extension *ext = tg_extension_at(e);
    for (int i = 0; i < tg_extension_num_ops(ext); i++) {
      const char *name = tg_extension_op_name(ext, i);
      if (name && strcmp(name, op->name) == 0) return tg_extension_path(ext);
    }
  }
  return "built-in";
}

static const char *count_str(int n, char *buf, size_t len) {
  if (n < 0) return "any";
  snprintf(buf, len, "%d", n);
  return buf;
}

/* The device types the op runs on (tg_op_supported), as "cpu,cuda,meta". */
static const char *devices_str(const tgop_target *t, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int type = 0; type < TG_NUM_DEVICE_TYPES; type++) {
    tg_device_type found;
    const char *name = tg_device_type_name((tg_device_type)type);
    if (tg_device_type_find(name, &found) != TG_OK) {
      tg_clear_error();
      continue;
    }
    if (type == TG_CUDA && !tg_cuda_is_built()) continue;
    if (tgop_target_runs_on(t, (tg_device){(tg_device_type)type, 0}) && used + 16 < cap)
      used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? "," : "", name);
  }
  return used ? buf : "-";
}

static const char *grad_str(const tg_op_desc *op) {
  if (!op->backward) return "no";
  return op->flags & TG_OP_ONCE_DIFFERENTIABLE ? "once" : "yes";
}

static void row(const char *name, const char *in, const char *out, const char *devices,
                const char *grad, const char *samples, const char *origin) {
  printf("%-22s %4s %4s  %-13s %-5s %-8s %s\n", name, in, out, devices, grad, samples, origin);
}

int tgop_list(const tgop_options *opts) {
  (void)opts;
  row("NAME", "IN", "OUT", "KERNELS", "GRAD", "SAMPLES", "FROM");
  for (int i = 0; i < tg_op_count(); i++) {
    const tg_op_desc *op = tg_op_at(i);
    if (!op) continue;
    char in[16], out[16], devices[64];
    const tgop_target t = {.name = op->name, .op = op};
    row(op->name, count_str(op->n_inputs, in, sizeof in), count_str(op->n_outputs, out, sizeof out),
        devices_str(&t, devices, sizeof devices), grad_str(op), op->sample_inputs ? "yes" : "no",
        origin_of(op));
  }
  for (int i = 0; i < tgop_num_composites(); i++) {
    const tgop_target *c = tgop_composite_at(i);
    char in[16], out[16], samples[64], devices[64];
    snprintf(samples, sizeof samples, "%s's", c->samples_of);
    row(c->name, count_str(c->n_inputs, in, sizeof in), count_str(c->n_outputs, out, sizeof out),
        devices_str(c, devices, sizeof devices), "tape", samples, c->what);
  }
  int from_extensions = 0;
  for (int e = 0; e < tg_extension_count(); e++)
    from_extensions += tg_extension_num_ops(tg_extension_at(e));
  printf("%d ops registered (%d from %d extension%s), %d composite%s; GRAD: yes, once "
         "(double backward refused), no, tape (recorded op by op)\n",
         tg_op_count(), from_extensions, tg_extension_count(), tg_extension_count() == 1 ? "" : "s",
         tgop_num_composites(), tgop_num_composites() == 1 ? "" : "s");
  return TGOP_EXIT_OK;
}
