/* tg — data-parallel training over MPI (NCCL for CUDA tensors where tg is built with both).
 *
 * Lives in its own library, tg_dist (libtg_dist.so / .a, link it beside tg): tg itself does
 * not depend on MPI. tg_dist is always built; without MPI (TG_MPI=OFF, or Open MPI not
 * found) every call reports TG_ERR_UNSUPPORTED, so a program can offer --dist and say why
 * it cannot. tg_dist_is_built tells which.
 *
 * The usual program, started by `mpirun -np N prog`:
 *
 *   tg_dist_init(&argc, &argv, (tg_dist_options){0});   // rank, world size from mpirun
 *   tg_module *model = build_model();                    // same architecture on every rank
 *   tg_ddp *ddp = tg_ddp_new(model, (tg_ddp_options){0}); // checks shapes, copies rank 0's values
 *   for (...) {
 *     tg_tensor *loss = model_loss(model, my_shard_of(batch)); // each rank its own rows
 *     tg_optimizer_zero_grad(opt);
 *     tg_ddp_backward(ddp, loss);   // backward; gradients averaged across ranks meanwhile
 *     tg_optimizer_step(opt);       // identical on every rank
 *   }
 *   tg_ddp_free(ddp);
 *   tg_dist_finalize();
 *
 * Collectives are blocking for the caller and must be called by every rank in the same
 * order with tensors of the same shape and dtype (checked: a mismatch is an error on every
 * rank, not a hang). A collective that does not complete within the timeout (a rank died,
 * hangs or took another path) fails with TG_ERR_DIST on the ranks that wait; the job is then
 * broken: every later collective fails at once, and tg_dist_finalize ends the whole job
 * (MPI_Abort) instead of waiting for peers that will not come. Call from one thread. */
#ifndef TG_DIST_H
#define TG_DIST_H

#include "module.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* Whether this tg_dist was built with MPI (false: every call below is TG_ERR_UNSUPPORTED). */
bool tg_dist_is_built(void);
/* Whether CUDA tensors are reduced by NCCL (else through host memory, when CUDA is built). */
bool tg_dist_has_nccl(void);

typedef struct tg_dist_options {
  /* Seconds a collective may wait for the other ranks before it fails with TG_ERR_DIST.
   * 0 = the environment's TG_DIST_TIMEOUT, else 300. */
  double timeout_seconds;
} tg_dist_options;

/* Initialises MPI (MPI_Init_thread, asking for MPI_THREAD_MULTIPLE) unless the program has
 * already done so, and reads rank and world size from the launcher (a program started
 * without mpirun is rank 0 of 1). argc/argv may be NULL. TG_ERR_STATE when called twice. */
tg_status tg_dist_init(int *argc, char ***argv, tg_dist_options opts);
bool tg_dist_is_initialized(void);
/* 0 and 1 before init. */
int tg_dist_rank(void);
int tg_dist_world_size(void);
/* Ends MPI if tg_dist_init started it. After a failed collective it ends the whole job
 * instead (MPI_Abort with exit code 1): the peers cannot finish cleanly. A no-op before
 * init. A program that started MPI itself calls it before its own MPI_Finalize (after that,
 * every tg_dist call, this one too, is TG_ERR_STATE). */
tg_status tg_dist_finalize(void);
/* Ends every rank of the job now (MPI_Abort), after printing "tg_dist: rank R: why" to
 * stderr: what a rank that hit an error calls so that the others do not wait for it. */
void tg_dist_abort(int exit_code, const char *why);

typedef enum tg_reduce_op {
  TG_REDUCE_SUM = 0,
  TG_REDUCE_MEAN, /* sum / world size; floating dtypes only */
  TG_REDUCE_MAX,
  TG_REDUCE_MIN,
} tg_reduce_op;

/* In place on every rank: t = op over the ranks' t (any strides; F32, F64, I64; CPU or
 * CUDA). Outside the tape: t must not require grad unless grad mode is off (like an
 * optimizer's update). Shapes, dtypes and devices are checked across ranks first. */
tg_status tg_dist_all_reduce(tg_tensor *t, tg_reduce_op op);
/* In place: every rank's t gets root's values. */
tg_status tg_dist_broadcast(tg_tensor *t, int root);
tg_status tg_dist_barrier(void);

/* Checks that every rank's module has the same parameters and buffers (names, shapes,
 * dtypes, in order): TG_ERR_SHAPE (or TG_ERR_DTYPE, TG_ERR_ARGUMENT for names) on every rank
 * otherwise, naming the first entry that differs, the rank and both sides. */
tg_status tg_dist_check_module(const tg_module *m);
/* tg_dist_check_module, then every parameter and buffer gets root's values. */
tg_status tg_dist_broadcast_module(tg_module *m, int root);

/* ---- DDP: gradients averaged across ranks while backward runs ----
 * The parameters are grouped into buckets of about bucket_cap_bytes, in the reverse of their
 * order in the module (the order backward tends to finish them). Each parameter's .grad
 * becomes a view into its bucket's flat buffer, so a bucket is all-reduced in place. A hook
 * on every parameter (tg_register_post_accumulate_grad_hook) marks its gradient final for
 * the pass; when a bucket's last one is, the bucket goes to a communication thread that
 * all-reduces it while backward goes on (buckets leave in bucket order on every rank, as
 * MPI requires). tg_ddp_synchronize (or tg_ddp_backward, which calls it) sends what is left
 * — a parameter that got no gradient this pass goes as its .grad holds (none: zeros) —,
 * waits for all, and divides by the world size: every rank then holds the same mean
 * gradient. Unused parameters are PyTorch's DDP's: one that no rank used since the last
 * synchronize (passes with sync off count) keeps its .grad exactly as it was, NULL included
 * (so an optimizer skips it, as in one process); one used on some ranks gets the mean, the
 * others adding what their .grad held (zeros after tg_zero_grad). tg_ddp_new gives no .grad;
 * the first synchronize that reduces a parameter makes the view its .grad, which
 * tg_zero_grad keeps; a .grad replaced (tg_set_grad, or NULL) costs a copy: its values go
 * into the bucket, and synchronize puts the view back. */
typedef struct tg_ddp tg_ddp;

typedef struct tg_ddp_options {
  size_t bucket_cap_bytes; /* 0 = 1 MiB; SIZE_MAX = one bucket for the whole model */
  /* Reduce every bucket after backward, on the caller's thread (no overlap): the reference
   * the overlapped path is tested against, and a fallback when MPI gives no thread support. */
  bool no_overlap;
  /* Skip the check and the broadcast of rank 0's values (the module is already equal, e.g.
   * every rank loaded the same checkpoint). */
  bool no_broadcast;
} tg_ddp_options;

/* Checks the module across ranks (tg_dist_check_module), broadcasts rank 0's parameters and
 * buffers, lays out the buckets and attaches. Keeps references to the parameters; the
 * module must outlive the DDP. NULL with the error on every rank on a mismatch, or when any
 * rank fails (out of memory, ...): that rank has its own error, the others one naming it. */
tg_ddp *tg_ddp_new(tg_module *m, tg_ddp_options opts);
/* Waits for the buckets already handed to the communication thread, then detaches the
 * hooks; the .grad tensors stay (as plain tensors). NULL is a no-op. */
void tg_ddp_free(tg_ddp *ddp);
/* tg_backward(loss, NULL) then tg_ddp_synchronize. */
tg_status tg_ddp_backward(tg_ddp *ddp, const tg_tensor *loss);
/* Sends the buckets not yet sent, waits for every bucket and averages: call after a backward
 * of your own (tg_backward_multi, ...), before the optimizer step, and also when that
 * backward failed (the peers wait for this rank's buckets; the error is then reported on
 * every rank). Between the backward and synchronize make no other tg_dist call: the
 * communication thread may be in an all-reduce. */
tg_status tg_ddp_synchronize(tg_ddp *ddp);
/* false: backward only accumulates (hooks do nothing, synchronize returns at once), for
 * gradient accumulation over several micro-batches; the next backward with sync on reduces
 * the sum (torch's no_sync()). On by default. */
void tg_ddp_set_sync(tg_ddp *ddp, bool sync);

typedef struct tg_ddp_stats {
  int n_buckets;
  size_t bucket_bytes_max;
  int64_t steps;                   /* synchronizations so far */
  double allreduce_seconds;        /* total time buckets spent being all-reduced */
  double exposed_seconds;          /* total time synchronize waited for them after backward */
  int64_t buckets_during_backward; /* buckets sent by hooks (the rest by synchronize) */
} tg_ddp_stats;
/* hidden fraction = 1 - exposed_seconds / allreduce_seconds. */
tg_status tg_ddp_stats_get(const tg_ddp *ddp, tg_ddp_stats *out);
void tg_ddp_stats_reset(tg_ddp *ddp);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
