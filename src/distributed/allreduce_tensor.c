/* tg__dist_allreduce_contiguous: a tensor's memory to the transport. CPU tensors in place;
 * CUDA tensors through NCCL (nccl.c) where tg_dist has it, else through a host copy. */
#include <stdio.h>

#include "comm.h"
#include "tensor/check.h"
#if TG_WITH_NCCL
#include "nccl_comm.h"
#endif

#if !TG_WITH_NCCL
/* The host staging of a CUDA tensor: copy out, reduce, copy back (tg_copy_ waits for it).
 * The copy out can fail on one rank alone (out of memory): the ranks first agree that every
 * one has its copy, so that such a rank's peers fail at once instead of waiting for it in
 * the data's all-reduce until the timeout. */
static tg_status allreduce_staged(const char *name, tg_tensor *t, tg_reduce_op op) {
  /* static: a collective that timed out may still write its buffer (comm.h) */
  static int64_t all_staged;
  tg_scope s = tg_scope_begin();
  tg_tensor *h = tg_to_device(t, TG_DEVICE_CPU);
  tg_status st = h ? TG_OK : tg_last_error();
  char own[256] = "";
  if (st != TG_OK) snprintf(own, sizeof own, "%s", tg_last_error_message());
  all_staged = st == TG_OK;
  tg_status agreed = tg__dist_allreduce_host(name, &all_staged, 1, TG_I64, TG_REDUCE_MIN);
  if (st != TG_OK)
    st = tg_set_error(st, "%s", own); /* this rank's own failure, as it was */
  else if (agreed != TG_OK)
    st = agreed;
  else if (!all_staged)
    st = tg_set_error(TG_ERR_DIST,
                      "%s: another rank could not copy its CUDA tensor to the host (out of "
                      "memory?): nothing was reduced",
                      name);
  if (st == TG_OK)
    st = tg__dist_allreduce_host(name, tg_data_ptr(h), tg_numel(h), tg_tensor_dtype(h), op);
  /* A failed collective may still write h: keep it alive (comm.h). */
  if (st != TG_OK && tg__dist_failed() && h) tg_retain(h);
  if (st == TG_OK) st = tg_copy_(t, h);
  tg_scope_end(s);
  return st;
}
#endif

tg_status tg__dist_allreduce_contiguous(const char *name, tg_tensor *t, tg_reduce_op op) {
  if (!tg__dist_ready(name)) return tg_last_error();
  if (!tg__check_not_null(name, "tensor", t) ||
      !tg__check(tg_is_contiguous(t), TG_ERR_ARGUMENT, name, "the tensor must be contiguous"))
    return tg_last_error();
  if (tg_tensor_device(t).type == TG_CPU)
    return tg__dist_allreduce_host(name, tg_data_ptr(t), tg_numel(t), tg_tensor_dtype(t), op);
#if TG_WITH_NCCL
  return tg__dist_nccl_allreduce(name, t, op);
#else
  return allreduce_staged(name, t, op);
#endif
}
