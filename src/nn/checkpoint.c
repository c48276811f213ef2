/* Checkpoints (tg/nn.h): a module's state, an optimizer's, the step and the generators'
 * states in one safetensors file. Saving builds one tensor dict and writes it atomically
 * (tg_safetensors_save: temp file, fsync, rename). Loading checks everything in the file
 * before it changes anything, stages the module's load and the optimizer's (module_impl.h,
 * optimizer_impl.h), commits both only when both staged, and sets the generators last, so a
 * failed load leaves all of them as they were.
 *
 * Metadata written: "tg.checkpoint" (format version), "tg.step", "tg.generator.<i>" =
 * "<seed>:<offset>" in decimal, and "tg.optim" = the number of optimizer entries when an
 * optimizer was saved (so a file that lost some of them is told from one saved before the
 * optimizer's first step, which has none). Other "tg." keys are refused; keys outside
 * "tg." (a user's own notes) are ignored. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nn/module_impl.h"
#include "nn/optimizer_impl.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tg/nn.h"

#define CHECKPOINT_VERSION "1"
#define MODEL_PREFIX "model."
#define OPTIM_PREFIX "optim."
#define GENERATOR_KEY "tg.generator."

enum { NAME_BUF = TG_TENSOR_NAME_MAX + 16, META_BUF = 48, PREFIX_BUF = 512 }; /* where: 400 + fn */

static bool starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- saving ---- */

/* Adds every entry of in to out under prefix + name (the tensors are shared). */
static tg_status add_prefixed(tg_tensor_dict *out, const char *prefix, const tg_tensor_dict *in) {
  char name[NAME_BUF];
  for (int i = 0; i < tg_tensor_dict_size(in); i++) {
    snprintf(name, sizeof name, "%s%s", prefix, tg_tensor_dict_name(in, i));
    tg_status st = tg_tensor_dict_set(out, name, tg_tensor_dict_at(in, i));
    if (st != TG_OK) return st;
  }
  return TG_OK;
}

static tg_status add_metadata(tg_tensor_dict *out, const tg_tensor_dict *optim, int64_t step,
                              int n_generators, tg_generator *const *generators) {
  char key[META_BUF], value[META_BUF];
  tg_status st = tg_tensor_dict_set_meta(out, "tg.checkpoint", CHECKPOINT_VERSION);
  snprintf(value, sizeof value, "%" PRId64, step);
  if (st == TG_OK) st = tg_tensor_dict_set_meta(out, "tg.step", value);
  if (st == TG_OK && optim) {
    snprintf(value, sizeof value, "%d", tg_tensor_dict_size(optim));
    st = tg_tensor_dict_set_meta(out, "tg.optim", value);
  }
  for (int i = 0; i < n_generators && st == TG_OK; i++) {
    tg_generator_state gs = tg_generator_get_state(generators[i]);
    snprintf(key, sizeof key, GENERATOR_KEY "%d", i);
    snprintf(value, sizeof value, "%" PRIu64 ":%" PRIu64, gs.seed, gs.offset);
    st = tg_tensor_dict_set_meta(out, key, value);
  }
  return st;
}

static tg_status check_args(const char *fn, const char *path, const void *m, int n_generators,
                            tg_generator *const *generators) {
  if (!path || !path[0]) return tg_set_error(TG_ERR_ARGUMENT, "%s: path is NULL or empty", fn);
  if (!m) return tg_set_error(TG_ERR_ARGUMENT, "%s: module is NULL", fn);
  if (n_generators < 0 || (n_generators > 0 && !generators))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: %d generators at %s", fn, n_generators,
                        generators ? "a list" : "NULL");
  return TG_OK;
}

tg_status tg_checkpoint_save(const char *path, const tg_module *m, const tg_optimizer *opt,
                             int64_t step, int n_generators, tg_generator *const *generators) {
  const char *fn = "tg_checkpoint_save";
  tg_status st = check_args(fn, path, m, n_generators, generators);
  if (st != TG_OK) return st;
  if (step < 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: step is %" PRId64 ", must be >= 0", fn, step);
  tg_tensor_dict *model = tg_module_state_dict(m);
  tg_tensor_dict *optim = model && opt ? tg_optimizer_state_dict(opt) : NULL;
  tg_tensor_dict *out = model && (optim || !opt) ? tg_tensor_dict_new() : NULL;
  st = out ? TG_OK : tg_last_error();
  if (st == TG_OK) st = add_prefixed(out, MODEL_PREFIX, model);
  if (st == TG_OK && optim) st = add_prefixed(out, OPTIM_PREFIX, optim);
  if (st == TG_OK) st = add_metadata(out, optim, step, n_generators, generators);
  if (st == TG_OK) st = tg_safetensors_save(path, out);
  if (st != TG_OK) {
    char prefix[PREFIX_BUF];
    snprintf(prefix, sizeof prefix, "%s: '%.400s'", fn, path);
    tg__error_prefix(prefix);
  }
  tg_tensor_dict_free(out);
  tg_tensor_dict_free(optim);
  tg_tensor_dict_free(model);
  return st;
}

/* ---- loading: parsing the metadata strictly ---- */

/* A decimal number without sign, spaces or leading zeros, that fits in max. */
static bool parse_decimal(const char *s, size_t len, uint64_t max, uint64_t *out) {
  if (len == 0 || len > 20 || (s[0] == '0' && len > 1)) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

/* "<seed>:<offset>" */
static bool parse_generator_state(const char *s, tg_generator_state *out) {
  const char *colon = strchr(s, ':');
  return colon && parse_decimal(s, (size_t)(colon - s), UINT64_MAX, &out->seed) &&
         parse_decimal(colon + 1, strlen(colon + 1), UINT64_MAX, &out->offset);
}

/* What the metadata says, checked against what the caller passed. */
typedef struct checkpoint_meta {
  int64_t step;
  bool has_optim;
  int64_t n_optim; /* optimizer entries the file says it holds */
} checkpoint_meta;

static tg_status format_error(const char *where, const char *what, const char *key,
                              const char *value) {
  return tg_set_error(TG_ERR_FORMAT, "%s: %s %s%s%s%s", where, what, key, value ? " = '" : "",
                      value ? value : "", value ? "'" : "");
}

static tg_status read_required(const tg_tensor_dict *file, const char *where, const char *key,
                               const char **value) {
  *value = tg_tensor_dict_get_meta(file, key);
  if (!*value)
    return tg_set_error(TG_ERR_FORMAT, "%s: no metadata %s (not a tg checkpoint?)", where, key);
  return TG_OK;
}

/* any_generators: the file may hold any number of generator states (a model-only load that
 * takes none); otherwise exactly n_generators. */
static tg_status parse_meta(const tg_tensor_dict *file, const char *where, int n_generators,
                            bool any_generators, tg_generator_state *gen_states,
                            checkpoint_meta *meta) {
  const char *value;
  tg_status st = read_required(file, where, "tg.checkpoint", &value);
  if (st != TG_OK) return st;
  if (strcmp(value, CHECKPOINT_VERSION) != 0)
    return tg_set_error(TG_ERR_FORMAT,
                        "%s: checkpoint format version tg.checkpoint = '%.40s', this tg reads "
                        "version " CHECKPOINT_VERSION,
                        where, value);
  st = read_required(file, where, "tg.step", &value);
  uint64_t u;
  if (st != TG_OK) return st;
  if (!parse_decimal(value, strlen(value), INT64_MAX, &u))
    return format_error(where, "bad step (a decimal number >= 0 expected):", "tg.step", value);
  meta->step = (int64_t)u;
  value = tg_tensor_dict_get_meta(file, "tg.optim");
  meta->has_optim = value != NULL;
  if (value && !parse_decimal(value, strlen(value), INT32_MAX, &u))
    return format_error(where, "bad optimizer entry count:", "tg.optim", value);
  meta->n_optim = value ? (int64_t)u : 0;

  /* Every tg.generator.<i> has 0 <= i < n (keys are unique), and there are n of them. */
  int n_found = 0;
  for (int k = 0; k < tg_tensor_dict_meta_size(file); k++) {
    const char *key = tg_tensor_dict_meta_key(file, k);
    value = tg_tensor_dict_meta_value(file, k);
    if (!starts_with(key, "tg.")) continue; /* a user's own note */
    if (!strcmp(key, "tg.checkpoint") || !strcmp(key, "tg.step") || !strcmp(key, "tg.optim"))
      continue;
    if (!starts_with(key, GENERATOR_KEY))
      return format_error(where, "unknown metadata key", key, NULL);
    const char *index = key + strlen(GENERATOR_KEY);
    uint64_t i;
    if (!parse_decimal(index, strlen(index), INT32_MAX, &i))
      return format_error(where, "bad generator key", key, NULL);
    n_found++;
    if (i >= (uint64_t)n_generators) continue; /* counted: the count check below reports it */
    if (!parse_generator_state(value, &gen_states[i]))
      return format_error(where, "bad generator state (\"<seed>:<offset>\" expected):", key, value);
  }
  if (n_found != n_generators && !any_generators)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: the checkpoint holds the state of %d generator(s), %d given", where,
                        n_found, n_generators);
  return TG_OK;
}

/* ---- loading: splitting the entries ---- */

static tg_status split_entries(const tg_tensor_dict *file, const char *where, bool want_optim,
                               tg_tensor_dict *model, tg_tensor_dict *optim, int64_t *n_optim) {
  *n_optim = 0;
  for (int i = 0; i < tg_tensor_dict_size(file); i++) {
    const char *name = tg_tensor_dict_name(file, i);
    const tg_tensor *t = tg_tensor_dict_at(file, i);
    tg_status st = TG_OK;
    if (starts_with(name, MODEL_PREFIX)) {
      st = tg_tensor_dict_set(model, name + strlen(MODEL_PREFIX), t);
    } else if (starts_with(name, OPTIM_PREFIX)) {
      (*n_optim)++;
      if (want_optim) st = tg_tensor_dict_set(optim, name + strlen(OPTIM_PREFIX), t);
    } else {
      st = tg_set_error(TG_ERR_FORMAT, "%s: entry '%.200s' is neither model.* nor optim.*", where,
                        name);
    }
    if (st != TG_OK) return st;
  }
  return TG_OK;
}

/* ---- loading: all-or-nothing ---- */

/* Stages the module's load and the optimizer's (every check and allocation, nothing
 * changed yet), then commits both: the module's commit only copies in place, the
 * optimizer's only moves references, so neither fails half-way for a bad file. */
static tg_status load_module_and_optimizer(tg_module *m, tg_optimizer *opt, const char *where,
                                           const tg_tensor_dict *model,
                                           const tg_tensor_dict *optim) {
  char prefix[PREFIX_BUF + 16];
  tg__module_load *ml = NULL;
  tg__optimizer_load *ol = NULL;
  tg_status st = tg__module_load_stage(m, model, true, NULL, &ml);
  if (st != TG_OK) {
    snprintf(prefix, sizeof prefix, "%s: model", where);
    tg__error_prefix(prefix);
    return st;
  }
  if (opt && (st = tg__optimizer_load_stage(opt, optim, &ol)) != TG_OK) {
    tg__module_load_abort(ml);
    snprintf(prefix, sizeof prefix, "%s: optimizer", where);
    tg__error_prefix(prefix);
    return st;
  }
  st = tg__module_load_commit(ml);
  if (st != TG_OK) {
    tg__optimizer_load_abort(ol);
    snprintf(prefix, sizeof prefix, "%s: model", where);
    tg__error_prefix(prefix);
    return st;
  }
  if (ol) tg__optimizer_load_commit(ol);
  return TG_OK;
}

tg_status tg_checkpoint_load(const char *path, tg_module *m, tg_optimizer *opt, int64_t *step,
                             int n_generators, tg_generator *const *generators) {
  const char *fn = "tg_checkpoint_load";
  tg_status st = check_args(fn, path, m, n_generators, generators);
  if (st != TG_OK) return st;
  char where[PREFIX_BUF];
  snprintf(where, sizeof where, "%s: '%.400s'", fn, path);

  tg_tensor_dict *file = tg_safetensors_load(path);
  if (!file) {
    tg__error_prefix(fn);
    return tg_last_error();
  }
  tg_generator_state *gen_states =
      tg__host_calloc(n_generators > 0 ? (size_t)n_generators : 1, sizeof *gen_states);
  checkpoint_meta meta = {0};
  tg_tensor_dict *model = NULL, *optim = NULL;
  int64_t n_optim = 0;
  st = gen_states ? TG_OK
                  : tg_set_error(TG_ERR_MEMORY, "%s: out of memory for %d generator states", where,
                                 n_generators);
  /* A model-only load given no generators (to sample from the model) leaves them all be. */
  bool any_generators = !opt && n_generators == 0;
  if (st == TG_OK) st = parse_meta(file, where, n_generators, any_generators, gen_states, &meta);
  if (st == TG_OK && opt && !meta.has_optim)
    st = tg_set_error(TG_ERR_ARGUMENT, "%s: holds no optimizer state (saved without one)", where);
  if (st == TG_OK && !(model = tg_tensor_dict_new())) st = tg_last_error();
  if (st == TG_OK && !(optim = tg_tensor_dict_new())) st = tg_last_error();
  if (st == TG_OK) st = split_entries(file, where, opt != NULL, model, optim, &n_optim);
  if (st == TG_OK && meta.has_optim && n_optim != meta.n_optim)
    st = tg_set_error(TG_ERR_FORMAT,
                      "%s: holds %" PRId64 " optim.* entries, its metadata tg.optim says %" PRId64,
                      where, n_optim, meta.n_optim);
  if (st == TG_OK) st = load_module_and_optimizer(m, opt, where, model, optim);
  if (st == TG_OK) {
    for (int i = 0; i < n_generators; i++) tg_generator_set_state(generators[i], gen_states[i]);
    if (step) *step = meta.step;
  }
  tg__host_free(gen_states);
  tg_tensor_dict_free(optim);
  tg_tensor_dict_free(model);
  tg_tensor_dict_free(file);
  return st;
}
