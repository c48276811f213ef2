/* tg-op: names to things to run. A registered op runs through tg_apply_ex with its sample's
 * scalars and integers; a composite is a C function of tg ops, kept here as a reference to
 * time fused ops against (the tutorial's "Python" LLTM). */
#include <stdio.h>
#include <string.h>

#include "tg_op.h"

static tg_status lltm_composed(const tg_sample *s, tg_tensor **out) {
  tg_tensor *const *in = s->inputs;
  return tg_lltm_composed(in[0], in[1], in[2], in[3], in[4], &out[0], &out[1]);
}

/* conv2d_batch_norm's sample (scalars eps and formula; ints the conv geometry, padded evenly)
 * through tg_conv2d_batch_norm_composed. The batch statistics, the op's outputs 1 and 2, come
 * back as running statistics updated from zeros with momentum 1. */
static tg_status conv2d_batch_norm_composed(const tg_sample *s, tg_tensor **out) {
  tg_tensor *const *in = s->inputs;
  const int64_t *g = s->ints, c_out = tg_size(in[1], 0);
  const tg_conv2d_opts conv = {
      .stride = {g[0], g[1]}, .padding = {g[2], g[3]}, .dilation = {g[4], g[5]}, .groups = g[6]};
  const tg_conv_bn_options opts = {.training = true,
                                   .formula = (tg_conv_bn_formula)s->scalars[1],
                                   .eps = s->scalars[0] == 0 ? -0.0 : s->scalars[0],
                                   .momentum = 1.0};
  const tg_options o = {.dtype = tg_tensor_dtype(in[0]), .device = tg_tensor_device(in[0])};
  out[1] = tg_zeros(1, &c_out, o);
  out[2] = out[1] ? tg_zeros(1, &c_out, o) : NULL;
  out[0] = out[2] ? tg_conv2d_batch_norm_composed(in[0], in[1], in[2], in[3], out[1], out[2], &conv,
                                                  opts)
                  : NULL;
  return out[0] ? TG_OK : tg_last_error();
}

/* scaled_dot_product_attention's sample (scalars dropout_p and scale; ints is_causal and the
 * dropout generator's seed and offset) through tg_attention_composed, with a generator in that
 * state: the same dropout mask as the fused op's. */
static tg_status attention_composed(const tg_sample *s, tg_tensor **out) {
  tg_generator *gen = tg_generator_new((uint64_t)s->ints[1]);
  if (!gen) return tg_last_error();
  tg_generator_set_state(gen, (tg_generator_state){(uint64_t)s->ints[1], (uint64_t)s->ints[2]});
  const tg_attention_options opts = {
      .is_causal = (int)s->ints[0], .dropout_p = s->scalars[0], .gen = gen, .scale = s->scalars[1]};
  out[0] = tg_attention_composed(s->inputs[0], s->inputs[1], s->inputs[2], opts);
  tg_generator_free(gen);
  return out[0] ? TG_OK : tg_last_error();
}

static const tgop_target composites[] = {
    {.name = "lltm_composed",
     .n_inputs = 5,
     .n_outputs = 2,
     .samples_of = "lltm",
     .what = "composite: tg_lltm_composed (lltm from tg ops, recorded op by op)",
     .run = lltm_composed},
    {.name = "conv2d_batch_norm_composed",
     .n_inputs = 4,
     .n_outputs = 3,
     .samples_of = "conv2d_batch_norm",
     .what = "composite: tg_conv2d_batch_norm_composed (conv2d, then batch norm from tg ops)",
     .run = conv2d_batch_norm_composed},
    {.name = "attention_composed",
     .n_inputs = 3,
     .n_outputs = 1,
     .samples_of = "scaled_dot_product_attention",
     .what = "composite: tg_attention_composed (matmul, where, softmax, dropout, matmul)",
     .run = attention_composed},
};

int tgop_num_composites(void) { return (int)(sizeof composites / sizeof composites[0]); }

const tgop_target *tgop_composite_at(int index) {
  return index >= 0 && index < tgop_num_composites() ? &composites[index] : NULL;
}

bool tgop_resolve(const char *name, tgop_target *out) {
  for (int i = 0; i < tg_op_count(); i++) {
    const tg_op_desc *op = tg_op_at(i);
    if (op && strcmp(op->name, name) == 0) {
      *out = (tgop_target){.name = op->name, .op = op};
      return true;
    }
  }
  for (int i = 0; i < tgop_num_composites(); i++)
    if (strcmp(composites[i].name, name) == 0) {
      *out = composites[i];
      return true;
    }
  return false;
}

const tg_op_desc *tgop_sample_op(const tgop_target *t) {
  const tg_op_desc *op = t->op;
  if (!op) {
    op = tg_op_lookup(t->samples_of);
    tg_clear_error(); /* reported below */
  }
  if (!op)
    fprintf(stderr, "tg-op: %s runs on the samples of op '%s', which is not registered\n", t->name,
            t->samples_of);
  else if (!op->sample_inputs)
    fprintf(stderr, "tg-op: %s has no sample inputs (its tg_op_desc.sample_inputs is NULL)\n",
            op->name);
  return op && op->sample_inputs ? op : NULL;
}

int tgop_target_inputs(const tgop_target *t) { return t->op ? t->op->n_inputs : t->n_inputs; }

int tgop_target_outputs(const tgop_target *t, const tg_sample *s) {
  if (!t->op) return t->n_outputs;
  if (t->op->n_outputs >= 0) return t->op->n_outputs;
  return s->n_outputs; /* a variable number: the sample says how many this call gives */
}

bool tgop_target_runs_on(const tgop_target *t, tg_device dev) {
  if (t->op) return tg_op_supported(t->op, dev);
  /* a composite runs where tg's generic ops do */
  return tg_op_supported(tg_op_lookup("mm"), dev) && tg_op_supported(tg_op_lookup("lltm"), dev);
}

tg_status tgop_run(const tgop_target *t, const tg_sample *s, int n_outputs, tg_tensor **outputs) {
  const tg_tensor *const *in = (const tg_tensor *const *)s->inputs;
  if (!t->op) return t->run(s, outputs);
  return tg_apply_ex(t->op, s->n_inputs, in, s->n_scalars, s->scalars, s->n_ints, s->ints,
                     n_outputs, outputs);
}

/* Checks that every target can run on the sample (same number of inputs, a kernel for the
 * device, a known number of outputs); false with a message naming command otherwise. */
bool tgop_check_targets(const char *command, int n, const tgop_target *targets, const tg_sample *s,
                        tg_device dev) {
  for (int k = 0; k < n; k++) {
    const tgop_target *t = &targets[k];
    int want = tgop_target_inputs(t);
    if (want >= 0 && want != s->n_inputs) {
      fprintf(stderr,
              "tg-op %s: %s takes %d inputs but the sample of %s has %d: the ops compared "
              "must take the same inputs\n",
              command, t->name, want, targets[0].name, s->n_inputs);
      return false;
    }
    if (!tgop_target_runs_on(t, dev)) {
      fprintf(stderr, "tg-op %s: %s has no %s kernel\n", command, t->name,
              tg_device_type_name(dev.type));
      return false;
    }
    int n_out = tgop_target_outputs(t, s);
    if (n_out < 1 || n_out > TGOP_MAX_OUTPUTS) {
      fprintf(stderr, "tg-op %s: %s: cannot tell how many outputs it gives (%d)\n", command,
              t->name, n_out);
      return false;
    }
  }
  return true;
}
