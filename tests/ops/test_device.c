/* Device types (tg/device.h): the registry, out-of-tree devices registered by name,
 * partial devices (an op they cannot run is TG_ERR_UNSUPPORTED, never a NULL call),
 * tg_op_supported, and the meta device walked over the whole op registry. */
#include <stdlib.h>

#include "ops/backend.h"
#include "ops/registry.h"
#include "tensor/tensor_impl.h"
#include "testutil.h"

static const tg_options f64 = {.dtype = TG_F64};
#define META_F32 ((tg_options){.dtype = TG_F32, .device = TG_DEVICE_META})
#define META_I64 ((tg_options){.dtype = TG_I64, .device = TG_DEVICE_META})

/* ---- the registry ---- */

TG_TEST(device, built_in_types_are_found_by_name) {
  tg_device_type t;
  cr_assert_eq(tg_device_type_find("cpu", &t), TG_OK);
  cr_assert_eq(t, TG_CPU);
  cr_assert_eq(tg_device_type_find("cuda", &t), TG_OK);
  cr_assert_eq(t, TG_CUDA);
  cr_assert_eq(tg_device_type_find("meta", &t), TG_OK);
  cr_assert_eq(t, TG_META);
  cr_assert_str_eq(tg_device_type_name(TG_META), "meta");
  cr_assert_eq(tg_device_type_find("tpu", &t), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "tg_device_type_find", "'tpu'");
  cr_assert_eq(t, TG_NUM_DEVICE_TYPES);
  cr_assert_eq(tg_device_type_find(NULL, &t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_device_type_find", "name is NULL");
}

TG_TEST(device, parse) {
  tg_device d;
  cr_assert_eq(tg_device_parse("cuda:3", &d), TG_OK);
  cr_assert(d.type == TG_CUDA && d.index == 3);
  cr_assert_eq(tg_device_parse("meta", &d), TG_OK);
  cr_assert(tg_device_equal(d, TG_DEVICE_META));
  const char *bad[] = {"", "cuda:", "cuda:x", ":1", "npu:0", "cuda:-1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    cr_assert_eq(tg_device_parse(bad[i], &d), TG_ERR_DEVICE, "%s", bad[i]);
    tg_expect_error(TG_ERR_DEVICE, "tg_device_parse");
  }
}

TG_TEST(device, kinds_are_named) {
  cr_assert_str_eq(tg_kind_name(TG_KIND_UNARY, 0), "neg");
  cr_assert_str_eq(tg_kind_name(TG_KIND_BINARY, 0), "add");
  cr_assert_str_eq(tg_kind_name(TG_KIND_REDUCE, 0), "sum");
  for (int f = TG_KIND_UNARY; f <= TG_KIND_REDUCE; f++) {
    int n = tg_kind_count((tg_kind_family)f);
    cr_assert_gt(n, 0);
    for (int k = 0; k < n; k++) cr_assert_not_null(tg_kind_name((tg_kind_family)f, k));
    cr_assert_null(tg_kind_name((tg_kind_family)f, n));
    cr_assert_null(tg_kind_name((tg_kind_family)f, -1));
  }
}

/* ---- an out-of-tree device: host memory of its own, no drivers, no kernels ---- */

static int64_t vault_live_bytes;
static void *vault_alloc(void *ctx, size_t nbytes) {
  (void)ctx;
  vault_live_bytes += (int64_t)nbytes;
  return malloc(nbytes ? nbytes : 1);
}
static void vault_free(void *ctx, void *p, size_t nbytes) {
  (void)ctx;
  vault_live_bytes -= (int64_t)nbytes;
  free(p);
}
static const tg_allocator vault_allocator = {"vault", vault_alloc, vault_free, NULL};
static tg_status vault_copy(const char *op, void *dst, tg_device dd, const void *src, tg_device sd,
                            size_t nbytes) {
  (void)op, (void)dd, (void)sd;
  if (nbytes) memcpy(dst, src, nbytes);
  return TG_OK;
}
static const tg_device_ops vault = {
    .abi = TG_DEVICE_ABI, .name = "vault", .allocator = &vault_allocator, .copy_bytes = vault_copy};

static tg_status double_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  /* a kernel of the vault's own: through the host, since the vault has no drivers */
  tg_tensor *h = tg_to_device(in[0], TG_DEVICE_CPU);
  tg_tensor *d = h ? tg_mul_scalar(h, 2.0) : NULL;
  out[0] = d ? tg_to_device(d, tg_tensor_device(in[0])) : NULL;
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(device, an_out_of_tree_device_holds_tensors_and_runs_only_its_ops) {
  tg_device_type type;
  cr_assert_eq(tg_device_register(&vault, &type), TG_OK, "%s", tg_last_error_message());
  cr_assert_gt(type, TG_META);
  cr_assert_str_eq(tg_device_type_name(type), "vault");
  tg_device_type found;
  cr_assert_eq(tg_device_type_find("vault", &found), TG_OK);
  cr_assert_eq(found, type);
  tg_device dev = {type, 0};
  tg_device parsed;
  cr_assert_eq(tg_device_parse("vault:0", &parsed), TG_OK);
  cr_assert(tg_device_equal(parsed, dev));

  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_arange(0, 6, 1, f64);
  tg_tensor *v = tg_to_device(x, dev);
  cr_assert_not_null(v, "%s", tg_last_error_message());
  cr_assert(tg_device_equal(tg_tensor_device(v), dev));
  cr_assert_eq(vault_live_bytes, 48);
  /* the way back gives the same values */
  tg_assert_close(tg_to_device(v, TG_DEVICE_CPU), x, 0, 0);

  /* no drivers: a built-in op is refused, naming op and device */
  cr_assert(!tg_op_supported(tg_op_lookup("add"), dev));
  cr_assert_null(tg_add(v, v));
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_add", "vault", "no generic drivers");
  /* a user op with a forward for this type runs */
  tg_op_desc desc = {.name = "vault_double", .n_inputs = 1, .n_outputs = 1};
  desc.forward[type] = double_forward;
  cr_assert_eq(tg_op_register(&desc), TG_OK, "%s", tg_last_error_message());
  const tg_op_desc *op = tg_op_lookup("vault_double");
  cr_assert(tg_op_supported(op, dev));
  cr_assert(!tg_op_supported(op, TG_DEVICE_CPU));
  tg_tensor *y = tg_apply1(op, 1, (const tg_tensor *const[]){v}, 0, NULL);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_assert_close(tg_to_device(y, TG_DEVICE_CPU), tg_mul_scalar(x, 2.0), 0, 0);
  /* and the op on the CPU, where it has no forward */
  cr_assert_null(tg_apply1(op, 1, (const tg_tensor *const[]){x}, 0, NULL));
  tg_expect_error(TG_ERR_UNSUPPORTED, "vault_double", "no kernel for device cpu");
  tg_scope_end(sc);
  cr_assert_eq(vault_live_bytes, 0);
}

TG_TEST(device, registration_checks_its_arguments) {
  tg_device_type t;
  cr_assert_eq(tg_device_register(NULL, &t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_device_register", "ops is NULL");
  tg_device_ops ops = vault;
  ops.abi = 99;
  cr_assert_eq(tg_device_register(&ops, &t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_device_register", "abi is 99");
  ops = vault;
  ops.name = "Bad Name";
  cr_assert_eq(tg_device_register(&ops, &t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "'Bad Name'", "lowercase");
  ops = vault;
  ops.copy_bytes = NULL;
  cr_assert_eq(tg_device_register(&ops, &t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "needs an allocator and copy_bytes");
  const char *taken[] = {"cpu", "cuda", "meta"};
  for (int i = 0; i < 3; i++) {
    ops = vault;
    ops.name = taken[i];
    cr_assert_eq(tg_device_register(&ops, &t), TG_ERR_ARGUMENT, "%s", taken[i]);
    tg_expect_error(TG_ERR_ARGUMENT, "already exists", taken[i]);
  }
  /* the slots run out after TG_NUM_DEVICE_TYPES types, with a clear error */
  static char names[TG_NUM_DEVICE_TYPES][16];
  static tg_device_ops many[TG_NUM_DEVICE_TYPES];
  int registered = 0;
  for (int i = 0; i < TG_NUM_DEVICE_TYPES; i++) {
    snprintf(names[i], sizeof names[i], "dev%d", i);
    many[i] = vault;
    many[i].name = names[i];
    if (tg_device_register(&many[i], &t) == TG_OK) registered++;
  }
  cr_assert_eq(registered, TG_NUM_DEVICE_TYPES - 3);
  tg_expect_error(TG_ERR_MEMORY, "all 8 device types are taken");
}

/* ---- a device with drivers but without the ops' own kernels ---- */

static tg_status noop_fill(tg_tensor *o, double v) { return (void)o, (void)v, TG_OK; }
static tg_status noop_copy(tg_tensor *o, const tg_tensor *s) { return (void)o, (void)s, TG_OK; }
static tg_status noop_unary(int k, double a, double b, tg_tensor *o, const tg_tensor *x) {
  return (void)k, (void)a, (void)b, (void)o, (void)x, TG_OK;
}
static tg_status noop_binary(int k, double a, tg_tensor *o, const tg_tensor *x,
                             const tg_tensor *y) {
  return (void)k, (void)a, (void)o, (void)x, (void)y, TG_OK;
}
static tg_status noop_where(tg_tensor *o, const tg_tensor *c, const tg_tensor *x,
                            const tg_tensor *y) {
  return (void)o, (void)c, (void)x, (void)y, TG_OK;
}
static tg_status noop_reduce(int k, tg_tensor *v, tg_tensor *i, const tg_tensor *x, int d) {
  return (void)k, (void)v, (void)i, (void)x, (void)d, TG_OK;
}
static tg_status noop_gemm(tg_tensor *o, const tg_tensor *a, const tg_tensor *b, double x,
                           double y) {
  return (void)o, (void)a, (void)b, (void)x, (void)y, TG_OK;
}
static tg_status noop_random(tg_tensor *o, uint64_t s, uint64_t f, double a, double b) {
  return (void)o, (void)s, (void)f, (void)a, (void)b, TG_OK;
}
static const tg_device_drivers noop_drivers = {noop_fill,   noop_copy,   noop_unary,
                                               noop_binary, noop_where,  noop_reduce,
                                               noop_gemm,   noop_random, noop_random};

TG_TEST(device, a_partial_device_refuses_what_it_lacks) {
  tg_device_ops ops = vault;
  ops.name = "drivers_only";
  ops.drivers = &noop_drivers;
  ops.flags = TG_DEVICE_NO_DATA; /* its drivers compute nothing: no values to check */
  tg_device_type type;
  cr_assert_eq(tg_device_register(&ops, &type), TG_OK, "%s", tg_last_error_message());
  tg_device dev = {type, 0};
  cr_assert(tg_op_supported(tg_op_lookup("add"), dev));
  cr_assert(tg_op_supported(tg_op_lookup("mm"), dev));
  const char *fused[] = {"lltm", "embedding", "embedding_backward", "cross_entropy"};
  for (int i = 0; i < 4; i++) {
    cr_assert(!tg_op_supported(tg_op_lookup(fused[i]), dev), "%s", fused[i]);
    cr_assert(tg_op_supported(tg_op_lookup(fused[i]), TG_DEVICE_CPU), "%s", fused[i]);
    cr_assert(tg_op_supported(tg_op_lookup(fused[i]), TG_DEVICE_META), "%s", fused[i]);
  }
  tg_scope sc = tg_scope_begin();
  tg_tensor *w = tg_zeros(TG_SHAPE(4, 3), (tg_options){.dtype = TG_F32, .device = dev});
  tg_tensor *idx = tg_to_device(tg_zeros(TG_SHAPE(2), (tg_options){.dtype = TG_I64}), dev);
  cr_assert(w && idx, "%s", tg_last_error_message());
  cr_assert_null(tg_embedding(w, idx));
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_embedding", "drivers_only",
                  "embedding.index_select_rows");
  tg_tensor *logits = tg_zeros(TG_SHAPE(2, 4), (tg_options){.dtype = TG_F32, .device = dev});
  cr_assert_null(tg_cross_entropy(logits, idx));
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_cross_entropy", "cross_entropy.gather_rows");
  /* what the drivers do is the device's business: here, nothing, but without a crash */
  cr_assert_not_null(tg_add(w, w), "%s", tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(device, supported_answers_for_unknown_types_and_null) {
  cr_assert(!tg_op_supported(NULL, TG_DEVICE_CPU));
  cr_assert(!tg_op_supported(tg_op_lookup("add"), (tg_device){(tg_device_type)6, 0}));
  cr_assert(!tg_op_supported(tg_op_lookup("add"), (tg_device){(tg_device_type)99, 0}));
  cr_assert(tg_op_supported(tg_op_lookup("add"), TG_DEVICE_CPU));
  tg_expect_ok();
  tg_scope sc = tg_scope_begin();
  cr_assert_null(tg_zeros(TG_SHAPE(2), (tg_options){.device = {(tg_device_type)6, 0}}));
  tg_expect_error(TG_ERR_DEVICE, "tg_zeros", "invalid device type 6", "none is registered");
  tg_scope_end(sc);
}

/* ---- meta: geometry without data ---- */

static bool same_geometry(const tg_tensor *a, const tg_tensor *b) {
  if (tg_ndim(a) != tg_ndim(b) || tg_tensor_dtype(a) != tg_tensor_dtype(b)) return false;
  for (int d = 0; d < tg_ndim(a); d++)
    if (tg_size(a, d) != tg_size(b, d)) return false;
  return true;
}

/* The same tensor on meta, a leaf that requires grad where x does: a view of a meta storage
 * of x's storage's size, with x's strides and offset (as_strided reads the storage). */
static tg_tensor *meta_twin(const tg_tensor *x) {
  int64_t elements = (int64_t)(x->storage->nbytes / tg_dtype_size(tg_tensor_dtype(x)));
  tg_tensor *base =
      tg_empty(1, &elements, (tg_options){.dtype = tg_tensor_dtype(x), .device = TG_DEVICE_META});
  tg_tensor *m =
      base ? tg_as_strided(base, tg_ndim(x), tg_sizes(x), tg_strides(x), tg_offset(x)) : NULL;
  cr_assert_not_null(m, "%s", tg_last_error_message());
  if (tg_requires_grad(x)) cr_assert_eq(tg_set_requires_grad(m, true), TG_OK);
  return m;
}

/* With grad on, these read values (max/min share the gradient among ties, counted on the host
 * when the forward records), so on meta they run with grad off and without a backward. */
static bool backward_reads_values(const char *op) {
  return strcmp(op, "max") == 0 || strcmp(op, "min") == 0;
}

/* Every op of the registry, on every sample: the forward on meta makes outputs of the CPU
 * forward's sizes and dtypes, on meta; the backward gives every input a gradient of its
 * sizes. Nothing is computed, so nothing is compared but geometry. */
/* Its forward reads values: to_device's samples move to the CPU, which a meta tensor cannot
 * give data to (tested by reading_values_is_an_error_... below). */
static bool forward_reads_values(const char *op) { return strcmp(op, "to_device") == 0; }

TG_TEST(meta, every_registered_op_runs_on_meta_with_the_cpu_geometry) {
  tg_generator *gen = tg_generator_new(5);
  int ops_walked = 0, samples_walked = 0, backwards = 0;
  for (int i = 0; i < tg_op_count(); i++) {
    const tg_op_desc *op = tg_op_at(i);
    if (!op->sample_inputs) continue;
    cr_assert(tg_op_supported(op, TG_DEVICE_META), "%s", op->name);
    if (forward_reads_values(op->name)) continue;
    tg_scope sc = tg_scope_begin();
    tg_sample samples[TG_SAMPLE_MAX];
    tg_sample_request req = {.dtype = TG_F64, .device = TG_DEVICE_CPU, .gen = gen};
    int n = op->sample_inputs(&req, samples);
    cr_assert_gt(n, 0, "%s: %s", op->name, tg_last_error_message());
    for (int k = 0; k < n; k++) {
      const tg_sample *s = &samples[k];
      int n_out = s->n_outputs ? s->n_outputs : op->n_outputs;
      const tg_tensor *meta_in[TG_SAMPLE_MAX_INPUTS], *cpu_args[TG_SAMPLE_MAX_INPUTS + 1];
      const tg_tensor *meta_args[TG_SAMPLE_MAX_INPUTS + 1];
      int n_args = s->n_inputs;
      for (int j = 0; j < s->n_inputs; j++) {
        meta_in[j] = meta_args[j] = meta_twin(s->inputs[j]);
        cpu_args[j] = s->inputs[j];
      }
      if (op->flags & TG_OP_INPLACE) {
        /* an in-place op writes a clone of input 0 and, when it takes any number of inputs,
         * reads x's old value from one more: as tg_op_check calls it */
        cpu_args[0] = tg_clone(s->inputs[0]);
        meta_args[0] = tg_clone(meta_in[0]);
        if (op->n_inputs == -1) {
          cpu_args[n_args] = tg_clone(s->inputs[0]);
          meta_args[n_args++] = tg_clone(meta_in[0]);
        }
      }
      tg_tensor *cpu_out[16] = {NULL}, *meta_out[16] = {NULL};
      tg_status cst = tg_apply_ex(op, n_args, cpu_args, s->n_scalars, s->scalars, s->n_ints,
                                  s->ints, n_out, cpu_out);
      cr_assert_eq(cst, TG_OK, "%s/%s on cpu: %s", op->name, s->label, tg_last_error_message());
      const bool no_grad = backward_reads_values(op->name);
      if (no_grad) tg_no_grad_begin();
      tg_status mst = tg_apply_ex(op, n_args, meta_args, s->n_scalars, s->scalars, s->n_ints,
                                  s->ints, n_out, meta_out);
      if (no_grad) tg_no_grad_end();
      cr_assert_eq(mst, TG_OK, "%s/%s on meta: %s", op->name, s->label, tg_last_error_message());
      bool any_grad = false;
      for (int o = 0; o < n_out; o++) {
        cr_assert(tg_device_equal(tg_tensor_device(meta_out[o]), TG_DEVICE_META), "%s", op->name);
        cr_assert(same_geometry(meta_out[o], cpu_out[o]), "%s/%s output %d", op->name, s->label, o);
        any_grad |= tg_requires_grad(meta_out[o]);
      }
      if (any_grad && !backward_reads_values(op->name)) {
        /* one backward from the first output that requires grad */
        for (int o = 0; o < n_out; o++) {
          if (!tg_requires_grad(meta_out[o])) continue;
          tg_tensor *seed = tg_ones(
              tg_ndim(meta_out[o]), tg_sizes(meta_out[o]),
              (tg_options){.dtype = tg_tensor_dtype(meta_out[o]), .device = TG_DEVICE_META});
          cr_assert_eq(tg_backward(meta_out[o], seed), TG_OK, "%s/%s backward on meta: %s",
                       op->name, s->label, tg_last_error_message());
          break;
        }
        for (int j = 0; j < s->n_inputs; j++) {
          tg_tensor *g = tg_requires_grad(meta_in[j]) ? tg_grad(meta_in[j]) : NULL;
          if (g) {
            cr_assert(same_geometry(g, meta_in[j]), "%s/%s grad %d", op->name, s->label, j);
            cr_assert(tg_device_equal(tg_tensor_device(g), TG_DEVICE_META));
          }
        }
        backwards++;
      }
      samples_walked++;
    }
    tg_scope_end(sc);
    ops_walked++;
  }
  tg_generator_free(gen);
  cr_assert_geq(ops_walked, TG_NUM_BUILTIN_OPS - 2, "%d ops", ops_walked);
  cr_assert_gt(backwards, samples_walked / 2, "%d of %d", backwards, samples_walked);
}

TG_TEST(meta, counts_the_bytes_a_step_would_allocate) {
  tg_meta_memory_stats st;
  tg_meta_memory_stats_reset();
  cr_assert_eq(tg_meta_memory_stats_get(&st), TG_OK);
  const size_t base = st.allocated_bytes;
  tg_scope sc = tg_scope_begin();
  tg_tensor *w = tg_zeros(TG_SHAPE(64, 32), META_F32);
  tg_tensor *x = tg_zeros(TG_SHAPE(16, 32), META_F32);
  cr_assert_eq(tg_set_requires_grad(w, true), TG_OK);
  cr_assert_eq(tg_meta_memory_stats_get(&st), TG_OK);
  cr_assert_eq(st.allocated_bytes - base, (64 * 32 + 16 * 32) * 4);
  tg_tensor *y = tg_mm(x, tg_t(w)); /* [16, 64] */
  cr_assert_eq(tg_meta_memory_stats_get(&st), TG_OK);
  cr_assert_eq(st.allocated_bytes - base, (64 * 32 + 16 * 32 + 16 * 64) * 4);
  tg_tensor *loss = tg_sum(tg_relu(y));
  cr_assert_eq(tg_backward(loss, NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert(same_geometry(tg_grad(w), w));
  cr_assert_eq(tg_meta_memory_stats_get(&st), TG_OK);
  cr_assert_gt(st.peak_bytes - base, (64 * 32 * 2 + 16 * 32 + 16 * 64) * 4); /* w.grad too */
  cr_assert_gt(st.allocations, 5);
  tg_scope_end(sc);
  cr_assert_eq(tg_meta_memory_stats_get(&st), TG_OK);
  cr_assert_eq(st.allocated_bytes, base);
  cr_assert_eq(tg_meta_memory_stats_get(NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_meta_memory_stats_get");
}

TG_TEST(meta, reading_values_is_an_error_and_checks_of_values_are_skipped) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *m = tg_ones(TG_SHAPE(2, 3), META_F32);
  double v;
  cr_assert_eq(tg_item(tg_sum(m), &v), TG_ERR_UNSUPPORTED);
  tg_expect_error(TG_ERR_UNSUPPORTED, "meta tensor has no data");
  cr_assert_null(tg_to_device(m, TG_DEVICE_CPU));
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_to_device", "no data", "cpu");
  cr_assert_null(tg_to_dlpack(m));
  tg_expect_error(TG_ERR_UNSUPPORTED, "DLPack");
  char *text = tg_to_string(m);
  cr_assert_not_null(text, "%s", tg_last_error_message());
  cr_assert_str_eq(text, "tensor(..., size=[2, 3], device=meta)");
  free(text);
  /* index range: not checked (no values); geometry: checked as everywhere */
  tg_tensor *w = tg_zeros(TG_SHAPE(4, 3), META_F32);
  tg_tensor *idx = tg_full(TG_SHAPE(5), 99, META_I64);
  tg_tensor *e = tg_embedding(w, idx);
  cr_assert_not_null(e, "%s", tg_last_error_message());
  cr_assert_eq(tg_size(e, 0), 5);
  cr_assert_eq(tg_size(e, 1), 3);
  cr_assert_null(tg_embedding(tg_zeros(TG_SHAPE(4), META_F32), idx));
  tg_expect_error(TG_ERR_SHAPE, "tg_embedding", "2-D");
  cr_assert_null(tg_mm(m, m));
  tg_expect_error(TG_ERR_SHAPE, "tg_mm");
  cr_assert_null(tg_add(m, tg_ones(TG_SHAPE(2, 3), f64)));
  tg_expect_error(TG_ERR_DEVICE);
  tg_scope_end(sc);
}

/* ---- the error paths of the registry and of devices without drivers ---- */

TG_TEST(device, every_refusal_names_its_argument) {
  tg_device_type t;
  tg_device_ops ops = vault;
  ops.name = "";
  cr_assert_eq(tg_device_register(&ops, &t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_device_register", "ops.name must have 1 to 32 characters");
  ops.name = "a_name_of_thirty_three_characters";
  cr_assert_eq(tg_device_register(&ops, &t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_device_register", "1 to 32 characters");
  tg_device_drivers partial = noop_drivers;
  partial.gemm = NULL;
  ops = vault;
  ops.name = "partial";
  ops.drivers = &partial;
  cr_assert_eq(tg_device_register(&ops, &t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "device 'partial' has drivers with a NULL entry", "all or none");
  cr_assert_eq(tg_device_register(&vault, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_device_register", "type is NULL");
  cr_assert_eq(tg_device_type_find("cpu", NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_device_type_find", "type is NULL");
  tg_device d;
  cr_assert_eq(tg_device_parse(NULL, &d), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_device_parse", "text is NULL");
  cr_assert_eq(tg_device_parse("cpu", NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_device_parse", "device is NULL");
  cr_assert_eq(tg_device_parse("cuda:x", &d), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "'cuda:x' has a bad index after ':'");
  cr_assert_eq(tg_device_parse("npu:0", &d), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "'npu:0' names no device type");
  cr_assert_null(tg_device_ops_of((tg_device_type)6));
  tg_expect_error(TG_ERR_DEVICE, "tg_device_ops_of", "invalid device type 6 (none is registered");
  cr_assert_null(tg_device_ops_of((tg_device_type)99));
  tg_expect_error(TG_ERR_DEVICE, "tg_device_ops_of", "invalid device type 99");
  cr_assert_not_null(tg_device_ops_of(TG_META));
}

TG_TEST(device, a_kernel_refuses_another_number_of_tensors) {
  tg_kernel_fn k = tg__kernel("test", "embedding.index_select_rows", TG_DEVICE_CPU);
  cr_assert_not_null(k);
  cr_assert_eq(k(2, (tg_tensor *const[]){NULL, NULL}), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT,
                  "embedding.index_select_rows: called with 2 tensors, expected 3");
  tg_scope sc = tg_scope_begin();
  tg_tensor *i = tg_zeros(TG_SHAPE(2, 3), (tg_options){.dtype = TG_I64});
  tg_tensor *b = tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_I64});
  tg_kernel_fn fwd = tg__kernel("test", "bias_gelu.forward", TG_DEVICE_CPU);
  cr_assert_eq(fwd(3, (tg_tensor *const[]){i, i, b}), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "bias_gelu.forward: dtype int64 (F32, F64 only)");
  tg_kernel_fn bwd = tg__kernel("test", "bias_gelu.backward", TG_DEVICE_CPU);
  cr_assert_eq(bwd(4, (tg_tensor *const[]){i, i, i, b}), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "bias_gelu.backward: dtype int64 (F32, F64 only)");
  tg_scope_end(sc);
}

TG_TEST(device, without_drivers_only_dense_bytes_move) {
  tg_device_type type;
  cr_assert_eq(tg_device_register(&vault, &type), TG_OK, "%s", tg_last_error_message());
  const tg_device dev = {type, 0};
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_arange(0, 6, 1, f64);
  /* a strided CPU source is made dense by the CPU's drivers first */
  tg_tensor *v = tg_to_device(tg_t(tg_reshape(x, TG_SHAPE(2, 3))), dev);
  cr_assert_not_null(v, "%s", tg_last_error_message());
  tg_assert_close(tg_to_device(v, TG_DEVICE_CPU), tg_t(tg_reshape(x, TG_SHAPE(2, 3))), 0, 0);
  /* a strided vault source, or a dtype change on the way out, needs the vault's drivers */
  cr_assert_null(tg_to_device(tg_t(v), TG_DEVICE_CPU));
  tg_expect_error(TG_ERR_UNSUPPORTED, "device vault has no drivers to make a dense float64 copy",
                  "strides [1, 2]");
  tg_tensor *f = tg_zeros(TG_SHAPE(3, 2), (tg_options){.dtype = TG_F32});
  cr_assert_eq(tg_copy_(f, v), TG_ERR_UNSUPPORTED);
  tg_expect_error(TG_ERR_UNSUPPORTED, "device vault has no drivers to make a dense float32 copy");
  /* and scattering into a strided vault destination too */
  cr_assert_eq(tg_copy_(tg_t(v), tg_zeros(TG_SHAPE(2, 3), f64)), TG_ERR_UNSUPPORTED);
  tg_expect_error(TG_ERR_UNSUPPORTED, "device vault has no drivers to scatter into a "
                                      "non-contiguous destination");
  tg_scope_end(sc);
}
