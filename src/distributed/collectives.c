/* tg_dist_all_reduce, tg_dist_broadcast, tg_dist_barrier.
 *
 * Each works on a contiguous copy of t (on the host, or on the device where NCCL reduces
 * it) and writes the result back with tg_copy_, so any strides work and t's version is
 * bumped like any in-place write. The copy is made before the cross-rank check: a rank that
 * cannot make it says so in the check instead of leaving the others waiting. */
#include "check.h"
#include "tensor/check.h"
#include "tg/autograd.h"
#if TG_WITH_NCCL
#include "nccl_comm.h"
#endif

/* The buffer an all-reduce reduces: a contiguous copy of t where the transport reaches it
 * (the host; the device only with NCCL). */
static tg_tensor *work_copy(const tg_tensor *t) {
  const bool on_device = tg_tensor_device(t).type == TG_CUDA && tg_dist_has_nccl();
  tg_tensor *c = on_device ? tg_clone(t) : tg_to_device(t, TG_DEVICE_CPU);
  if (c && c == t) c = tg_clone(t); /* a CPU t: never reduce t's own memory */
  return c ? tg_contiguous(c) : NULL;
}

/* Keeps w alive for good when a failed collective may still write into it (comm.h). */
static void keep_if_failed(tg_tensor *w) {
  if (w && tg__dist_failed()) tg_retain(w);
}

static tg_status check_tensor(const char *name, const tg_tensor *t) {
  if (!tg__check_not_null(name, "t", t)) return tg_last_error();
  return tg__check_status(!(tg_requires_grad(t) && tg_is_grad_enabled()), TG_ERR_STATE, name,
                          "t requires grad and grad mode is on: a collective writes t in place "
                          "outside the tape; call it under tg_no_grad_begin (like an "
                          "optimizer's update)");
}

tg_status tg_dist_all_reduce(tg_tensor *t, tg_reduce_op op) {
  const char *name = "tg_dist_all_reduce";
  if (!tg__dist_ready(name)) return tg_last_error();
  tg_scope s = tg_scope_begin();
  tg_tensor *w = NULL;
  tg_status st = check_tensor(name, t);
  if (st == TG_OK)
    st = tg__check_status(op >= TG_REDUCE_SUM && op <= TG_REDUCE_MIN, TG_ERR_ARGUMENT, name,
                          "unknown reduce op %d", (int)op);
  if (st == TG_OK)
    st = tg__check_status(op != TG_REDUCE_MEAN || tg_dtype_is_floating(tg_tensor_dtype(t)),
                          TG_ERR_DTYPE, name, "TG_REDUCE_MEAN needs a floating dtype, t is %s",
                          tg_dtype_name(tg_tensor_dtype(t)));
#if TG_WITH_NCCL
  /* NCCL's device, checked here: past the cross-rank check a rank's failure leaves the
   * others' streams waiting. */
  if (st == TG_OK && tg_tensor_device(t).type == TG_CUDA)
    st = tg__dist_nccl_check_device(name, tg_tensor_device(t).index);
#endif
  if (st == TG_OK && !(w = work_copy(t))) st = tg_last_error();
  const tg__dist_desc mine = tg__dist_describe(st == TG_OK ? t : NULL, op);
  st = tg__dist_check_peers(name, st, &mine, "op");
  if (st == TG_OK && tg_numel(w) > 0) {
    st = tg__dist_allreduce_contiguous(name, w, op); /* routes CPU and CUDA */
    keep_if_failed(w);
    if (st == TG_OK) st = tg_copy_(t, w);
  }
  tg_scope_end(s);
  return st;
}

tg_status tg_dist_broadcast(tg_tensor *t, int root) {
  const char *name = "tg_dist_broadcast";
  if (!tg__dist_ready(name)) return tg_last_error();
  tg_scope s = tg_scope_begin();
  tg_tensor *w = NULL;
  tg_status st = check_tensor(name, t);
  if (st == TG_OK)
    st = tg__check_status(root >= 0 && root < tg_dist_world_size(), TG_ERR_ARGUMENT, name,
                          "root %d is not a rank (world size %d)", root, tg_dist_world_size());
  /* Through host memory, also for CUDA tensors: a broadcast is for setup, not per step. The
   * root sends from t's own memory where it is a contiguous CPU tensor (MPI only reads it). */
  const bool is_root = root == tg_dist_rank();
  if (st == TG_OK) {
    w = is_root ? tg_contiguous(tg_to_device(t, TG_DEVICE_CPU))
                : tg_empty(tg_ndim(t), tg_sizes(t), (tg_options){.dtype = tg_tensor_dtype(t)});
    if (!w) st = tg_last_error();
  }
  const tg__dist_desc mine = tg__dist_describe(st == TG_OK ? t : NULL, root);
  st = tg__dist_check_peers(name, st, &mine, "root");
  if (st == TG_OK && tg_numel(w) > 0) {
    st = tg__dist_broadcast_host(name, tg_data_ptr(w),
                                 tg_numel(w) * (int64_t)tg_dtype_size(tg_tensor_dtype(w)), root);
    keep_if_failed(w);
    if (st == TG_OK && !is_root) st = tg_copy_(t, w);
  }
  tg_scope_end(s);
  return st;
}

tg_status tg_dist_barrier(void) { return tg__dist_barrier_host("tg_dist_barrier"); }
