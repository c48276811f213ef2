/* tg__dist_allreduce_contiguous: a tensor's memory to the transport. CPU tensors in place;
 * CUDA tensors through NCCL (nccl.c) where tg_dist has it, else through a host copy. */
#include "comm.h"
#if TG_WITH_NCCL
#include "nccl_comm.h"
#endif

#if !TG_WITH_NCCL
/* The host staging of a CUDA tensor: copy out, reduce, copy back (tg_copy_ waits for it). */
static tg_status allreduce_staged(const char *name, tg_tensor *t, tg_reduce_op op) {
  tg_scope s = tg_scope_begin();
  tg_tensor *h = tg_to_device(t, TG_DEVICE_CPU);
  tg_status st = h ? TG_OK : tg_last_error();
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
  if (!t) return tg_set_error(TG_ERR_ARGUMENT, "%s: tensor is NULL", name);
  if (!tg_is_contiguous(t))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: the tensor must be contiguous", name);
  if (tg_tensor_device(t).type == TG_CPU)
    return tg__dist_allreduce_host(name, tg_data_ptr(t), tg_numel(t), tg_tensor_dtype(t), op);
#if TG_WITH_NCCL
  return tg__dist_nccl_allreduce(name, t, op);
#else
  return allreduce_staged(name, t, op);
#endif
}
