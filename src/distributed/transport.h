/* What tg_dist's entry points (dist.c) ask of the transport beyond comm.h: starting and
 * ending it. comm_mpi.c implements these with MPI, comm_none.c as TG_ERR_UNSUPPORTED. */
#ifndef TG_DIST_TRANSPORT_H
#define TG_DIST_TRANSPORT_H

#include "comm.h"

/* Starts MPI unless the program did (asking for MPI_THREAD_MULTIPLE), makes tg_dist's own
 * communicator and reads rank and size. TG_ERR_STATE when MPI was finalized already;
 * TG_ERR_DIST when the communicator could not be made within timeout_seconds (then the job
 * is broken: tg__dist_failed). */
tg_status tg__dist_transport_init(int *argc, char ***argv, double timeout_seconds, int *rank,
                                  int *size);
/* Ends what init started: after a failure MPI_Abort (exit code 1) instead, since the peers
 * cannot finish cleanly; otherwise a barrier bounded by the timeout (a peer that never
 * comes ends the job the same way) and MPI_Finalize if init started MPI. */
tg_status tg__dist_transport_finalize(void);
/* The timeout collectives wait for (seconds), and marking the job broken: for nccl.c. */
double tg__dist_timeout_seconds(void);
void tg__dist_mark_failed(void);
/* MPI_Abort(exit_code) when MPI runs, else exit(exit_code). Does not return. */
void tg__dist_transport_abort(int exit_code);

#endif
