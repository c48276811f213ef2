/* tg — modules: named parameters and buffers, nested modules, state to and from files.
 *
 * A module owns its parameters (leaves that require grad), its buffers (state that is saved
 * but not trained) and its child modules. Names are those of torch.nn.Module: a child's
 * entries appear under "child.name", recursively ("rnn.cell.weights"), in registration
 * order, the module's own entries before its children's. Freeing a module frees its
 * children. The built-in modules (tg/nn.h: Linear, the LLTM cell, Embedding, the LLTM
 * sequence model) are modules too: tg_linear_module(l) and the like give the module, and a
 * model is a module whose children are those:
 *
 *   tg_module *model = tg_module_new("charlm");
 *   tg_embedding_layer *emb = tg_embedding_layer_new(vocab, 32, opts, gen);
 *   tg_module_add_child(model, "embed", tg_embedding_layer_module(emb)); // model owns emb now
 *   ...
 *   for (int i = 0; i < tg_module_num_parameters(model); i++) {
 *     const char *name;
 *     tg_tensor *p = tg_module_parameter(model, i, &name);          // "embed.weight", ...
 *   }
 *   tg_module_free(model);                                            // frees emb too
 *
 * Borrowed pointers (tensors, names, children) stay valid until the module is changed
 * (register, add_child, load) or freed. Not thread-safe while being changed. */
#ifndef TG_MODULE_H
#define TG_MODULE_H

#include "io.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_module tg_module;

/* An empty module to fill (a model): type is a short static-or-copied name shown in errors
 * ("charlm"); copied. NULL + error on a bad type or out of memory. */
tg_module *tg_module_new(const char *type);
void tg_module_free(tg_module *m);              /* NULL is a no-op; frees the children too */
const char *tg_module_type(const tg_module *m); /* "linear", "lltm_cell", ... */

/* Names: non-empty, at most 255 bytes of [A-Za-z0-9_] (no dots: dots join levels), unique
 * among the module's own parameters, buffers and children (TG_ERR_ARGUMENT otherwise). */
/* Takes a reference to param, a floating leaf, and sets its requires_grad. */
tg_status tg_module_register_parameter(tg_module *m, const char *name, tg_tensor *param);
/* Takes a reference to buf (any dtype, grad left as it is). */
tg_status tg_module_register_buffer(tg_module *m, const char *name, tg_tensor *buf);
/* m takes ownership of child, which must have no parent yet and must not be m or an
 * ancestor of m. On failure ownership stays with the caller. */
tg_status tg_module_add_child(tg_module *m, const char *name, tg_module *child);
tg_module *tg_module_child(const tg_module *m, const char *name); /* NULL if none (no error) */
int tg_module_num_children(const tg_module *m);                   /* direct children */
tg_module *tg_module_child_at(const tg_module *m, int i, const char **name);

/* Every parameter of m and its descendants, in the order above. *name (may be NULL) gets
 * the dotted name. NULL + TG_ERR_INDEX outside 0..num-1. */
int tg_module_num_parameters(const tg_module *m);
tg_tensor *tg_module_parameter(const tg_module *m, int i, const char **name);
int tg_module_num_buffers(const tg_module *m);
tg_tensor *tg_module_buffer(const tg_module *m, int i, const char **name);
/* By dotted name, parameters and buffers alike; NULL (no error) when absent. */
tg_tensor *tg_module_find(const tg_module *m, const char *dotted_name);
/* Copies up to max parameter pointers (borrowed) into out; returns the count (all of them). */
int tg_module_parameters(const tg_module *m, tg_tensor **out, int max);
/* Elements in all parameters, for "the model has N parameters". */
int64_t tg_module_parameter_count(const tg_module *m);

/* Train/eval flag, set on m and every descendant; new modules are in training mode. */
void tg_module_train(tg_module *m, bool training);
bool tg_module_is_training(const tg_module *m);
/* Zeroes the gradient of every parameter (in place, keeping the buffers). */
tg_status tg_module_zero_grad(tg_module *m);

/* Moves every parameter and buffer of m and its descendants, and the parameters'
 * gradients, to device, like torch.nn.Module.to(device): each keeps its tensor object (the
 * layers' handles, tg_module_find's pointers and an optimizer's parameter list stay valid)
 * and gets a contiguous copy of its values on device in place of its storage (a tensor that
 * shared storage with another stops sharing). All or nothing: every copy is made before
 * anything changes. Only leaves move (TG_ERR_STATE for a buffer made by an op). Move before
 * training, not while a graph that saved these tensors is alive. An optimizer's own state
 * (momentum, Adam's moments) stays where it was, and its next step is TG_ERR_DEVICE: make
 * the optimizer after the move, or load its state dict again (loading copies to each
 * parameter's device). */
tg_status tg_module_to_device(tg_module *m, tg_device device);

/* ---- forward: one tensor in, one tensor out ----
 * Runs m on x like calling a torch.nn.Module: x borrowed, the result owned by the innermost
 * scope (like an op's), NULL with the error on failure. Layers whose forward differs between
 * training and evaluation read m's train/eval flag. Works on every built-in layer that takes
 * one tensor (tg/nn.h: Linear, Embedding, Sequential, Flatten, the activations) and on a
 * module given a forward with tg_module_set_forward; others (the LLTM cell takes three
 * tensors, a model without a forward) give TG_ERR_UNSUPPORTED naming the module type. */
tg_tensor *tg_module_forward(tg_module *m, const tg_tensor *x);
/* A forward of one's own for a module made by tg_module_new (a custom layer, a model), so
 * that tg_module_forward and a Sequential can run it. fn follows tg_module_forward's rules
 * (result owned by the innermost scope, NULL with an error recorded on failure); user is
 * passed through. fn NULL removes it. TG_ERR_ARGUMENT for a built-in layer, which has its
 * own. */
typedef tg_tensor *(*tg_module_forward_fn)(tg_module *m, const tg_tensor *x, void *user);
tg_status tg_module_set_forward(tg_module *m, tg_module_forward_fn fn, void *user);

/* ---- state ----
 * The state is every parameter and buffer by dotted name. tg_module_state_dict shares the
 * tensors (detached: loading into them or training changes them); the caller frees the
 * dict. Loading copies values into the module's tensors in place, outside the tape, and
 * is all-or-nothing: every entry is checked before any is copied. A name present on one
 * side only is an error when strict (TG_ERR_ARGUMENT listing the missing and unexpected
 * names) and skipped otherwise; a shape or dtype that differs is always an error naming the
 * entry and both shapes or dtypes (TG_ERR_SHAPE, TG_ERR_DTYPE). report, when not NULL, gets
 * what was skipped. */
typedef struct tg_load_report {
  int n_loaded;
  int n_missing;    /* in the module, not in the state */
  int n_unexpected; /* in the state, not in the module */
  char names[1024]; /* "missing: a.b, c; unexpected: d" (cut with "..." when longer) */
} tg_load_report;
tg_tensor_dict *tg_module_state_dict(const tg_module *m);
tg_status tg_module_load_state_dict(tg_module *m, const tg_tensor_dict *state, bool strict,
                                    tg_load_report *report);
/* The state as a safetensors file (written atomically, see tg/io.h), and back. */
tg_status tg_module_save(const tg_module *m, const char *path);
tg_status tg_module_load(tg_module *m, const char *path, bool strict, tg_load_report *report);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
