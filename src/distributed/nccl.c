/* NCCL for CUDA tensors: ncclAllReduce on tg's stream, so the reduction is ordered with tg's
 * kernels before and after it like any op. The communicator is made on first use: rank 0's
 * unique id goes to the others over MPI (bounded by the timeout), then a non-blocking
 * ncclCommInitRankConfig is polled against the same deadline, so a missing peer is an
 * error, not a hang. The reduction itself runs later, on the stream: a peer that never
 * joins it stalls the stream, which the timeout cannot see (tg's next wait on the stream
 * does); an error NCCL reports asynchronously fails the next call here. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "nccl_comm.h"
#include "tg/cuda.h"
#include "transport.h"

static ncclComm_t nccl_comm;
static bool have_comm;
static int comm_device = -1;

static tg_status nccl_failed(const char *name, const char *call, ncclResult_t rc) {
  tg__dist_mark_failed();
  return tg_set_error(TG_ERR_DIST, "%s: %s failed on rank %d: %s", name, call, tg_dist_rank(),
                      ncclGetErrorString(rc));
}

/* Polls a non-blocking communicator until it is no longer ncclInProgress. */
static tg_status wait_comm(const char *name, const char *call) {
  const double start = tg__dist_now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t rc = ncclCommGetAsyncError(nccl_comm, &state);
    if (rc != ncclSuccess) return nccl_failed(name, "ncclCommGetAsyncError", rc);
    if (state == ncclSuccess) return TG_OK;
    if (state != ncclInProgress) return nccl_failed(name, call, state);
    /* The same bound as the MPI collectives. */
    const double waited = tg__dist_now() - start;
    if (waited > tg__dist_timeout_seconds()) {
      tg__dist_mark_failed();
      return tg_set_error(TG_ERR_DIST,
                          "%s: %s on rank %d did not finish in %.1f s: a rank died or hangs", name,
                          call, tg_dist_rank(), waited);
    }
    nanosleep(&(struct timespec){0, 100000}, NULL);
  }
}

static tg_status make_comm(const char *name, int device) {
  /* What can fail on one rank alone is agreed first: a rank that returned here early would
   * leave the others waiting in the broadcast or in ncclCommInitRankConfig. */
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  tg_status local = TG_OK;
  if (tg_dist_rank() == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess)
      local = tg_set_error(TG_ERR_DIST, "%s: ncclGetUniqueId failed on rank 0: %s", name,
                           ncclGetErrorString(rc));
  }
  if (local == TG_OK && cudaSetDevice(device) != cudaSuccess)
    local = tg_set_error(TG_ERR_DEVICE, "%s: cudaSetDevice(%d) failed on rank %d", name, device,
                         tg_dist_rank());
  tg_status st = tg__dist_agree(name, local);
  if (st == TG_OK) st = tg__dist_broadcast_host(name, &id, (int64_t)sizeof id, 0);
  if (st != TG_OK) return st;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t rc =
      ncclCommInitRankConfig(&nccl_comm, tg_dist_world_size(), id, tg_dist_rank(), &config);
  if (rc != ncclSuccess && rc != ncclInProgress)
    return nccl_failed(name, "ncclCommInitRankConfig", rc);
  have_comm = true;
  comm_device = device;
  st = wait_comm(name, "ncclCommInitRankConfig");
  if (st != TG_OK) {
    ncclCommAbort(nccl_comm);
    have_comm = false;
  }
  return st;
}

tg_status tg__dist_nccl_check_device(const char *name, int device) {
  if (!have_comm || device == comm_device) return TG_OK;
  return tg_set_error(TG_ERR_UNSUPPORTED,
                      "%s: NCCL reduces on one device per rank: rank %d's communicator is on "
                      "cuda:%d, the tensor on cuda:%d",
                      name, tg_dist_rank(), comm_device, device);
}

static bool nccl_type(tg_dtype dtype, ncclDataType_t *type) {
  switch (dtype) {
  case TG_F32:
    *type = ncclFloat32;
    return true;
  case TG_F64:
    *type = ncclFloat64;
    return true;
  case TG_I64:
    *type = ncclInt64;
    return true;
  default:
    return false;
  }
}

tg_status tg__dist_nccl_allreduce(const char *name, tg_tensor *t, tg_reduce_op op) {
  ncclDataType_t type;
  if (!nccl_type(tg_tensor_dtype(t), &type))
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %s is not F32, F64 or I64", name,
                        tg_dtype_name(tg_tensor_dtype(t)));
  ncclRedOp_t nop;
  switch (op) {
  case TG_REDUCE_SUM:
    nop = ncclSum;
    break;
  case TG_REDUCE_MEAN:
    nop = ncclAvg;
    break;
  case TG_REDUCE_MAX:
    nop = ncclMax;
    break;
  case TG_REDUCE_MIN:
    nop = ncclMin;
    break;
  default:
    return tg_set_error(TG_ERR_ARGUMENT, "%s: unknown reduce op %d", name, (int)op);
  }
  if (op == TG_REDUCE_MEAN && !tg_dtype_is_floating(tg_tensor_dtype(t)))
    return tg_set_error(TG_ERR_DTYPE, "%s: TG_REDUCE_MEAN needs a floating dtype, got %s", name,
                        tg_dtype_name(tg_tensor_dtype(t)));
  const int device = tg_tensor_device(t).index;
  if (have_comm) { /* an error from an earlier reduction, reported asynchronously */
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(nccl_comm, &state);
    if (rc != ncclSuccess) return nccl_failed(name, "ncclCommGetAsyncError", rc);
    if (state != ncclSuccess && state != ncclInProgress)
      return nccl_failed(name, "an earlier ncclAllReduce", state);
  }
  if (!have_comm) {
    tg_status st = make_comm(name, device);
    if (st != TG_OK) return st;
  }
  /* Past the cross-rank checks the peers are queueing their part already: a failure here
   * leaves their streams waiting, so it breaks the job (tg_dist_finalize then aborts it).
   * tg_dist_all_reduce checks the device before (tg__dist_nccl_check_device). */
  void *stream = NULL;
  tg_status st = tg__dist_nccl_check_device(name, device);
  if (st == TG_OK) st = tg_cuda_stream(device, &stream);
  if (st != TG_OK) {
    tg__dist_mark_failed();
    return st;
  }
  void *data = tg_data_ptr(t);
  ncclResult_t rc =
      ncclAllReduce(data, data, (size_t)tg_numel(t), type, nop, nccl_comm, (cudaStream_t)stream);
  if (rc == ncclInProgress) return wait_comm(name, "ncclAllReduce");
  if (rc != ncclSuccess) return nccl_failed(name, "ncclAllReduce", rc);
  return TG_OK;
}

void tg__dist_nccl_release(void) {
  if (!have_comm) return;
  if (tg__dist_failed()) {
    ncclCommAbort(nccl_comm);
  } else {
    ncclCommFinalize(nccl_comm);
    if (wait_comm("tg_dist_finalize", "ncclCommFinalize") == TG_OK)
      ncclCommDestroy(nccl_comm);
    else
      ncclCommAbort(nccl_comm);
  }
  have_comm = false;
  comm_device = -1;
}
