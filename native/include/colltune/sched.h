/* colltune's non-blocking schedule engine (algorithms/sched.c).
 *
 * A schedule is a list of rounds; a round is a list of operations: point-to-
 * point sends and receives, local reductions (MPI_Reduce_local, so user ops
 * work), local copies, and child schedules (possibly on other communicators).
 * When a round starts, its operations run in the order they were added: local
 * operations execute at once, sends/receives are posted, children start. The
 * next round starts when every request and child of the round has completed.
 *
 * Build once, then start / test / wait as often as needed (persistent
 * collectives); free when done. Buffers are bound at build time: everything
 * that touches data must be an operation, not done while building.
 *
 * Tags and communicators: messages travel on a private duplicate ("shadow")
 * of the caller's communicator, made by MPI_Comm_dup at the first
 * ct_sched_create on that communicator (collective: every rank's first call)
 * and cached in an attribute together with a sequence number. Each schedule
 * takes the next sequence number as its tag, so schedules in flight at the
 * same time on one communicator never match each other's messages, and no
 * application message (not even MPI_ANY_TAG / MPI_ANY_SOURCE receives) can
 * match a schedule's. Ranks must therefore create schedules on a communicator
 * in the same order (the MPI rule for collectives). Tags wrap after TAG_UB+1
 * schedules (>= 32768; 2^31 on Open MPI, MPICH and SMPI): at most that many
 * may be alive at once on one communicator. ct_sched_comm_prepare() makes the
 * duplicate ahead of time, for callers that must not synchronise later.
 *
 * Progress: ct_sched_test and ct_sched_wait progress every active schedule of
 * the process (so waiting on one never starves another the peers need); the
 * first round is posted by ct_sched_start. Between those calls only the MPI
 * library progresses the posted messages. Not thread-safe: call from one
 * thread (MPI_THREAD_FUNNELED is enough).
 *
 * Builder calls never fail on their own: an error (out of memory) is kept and
 * returned by ct_sched_start. */
#ifndef COLLTUNE_SCHED_H
#define COLLTUNE_SCHED_H

#include <stddef.h>
#include <mpi.h>

typedef struct ct_sched ct_sched;

/* New empty schedule on comm (see the tag scheme above). */
int ct_sched_create(MPI_Comm comm, ct_sched **s);
/* Duplicate comm's shadow now (collective); later creates do not synchronise. */
int ct_sched_comm_prepare(MPI_Comm comm);

/* Operations of the current round. Peers are ranks of the schedule's comm. */
void ct_sched_send(ct_sched *s, const void *buf, int count, MPI_Datatype t, int peer);
void ct_sched_recv(ct_sched *s, void *buf, int count, MPI_Datatype t, int peer);
/* inout = in op inout (MPI_Reduce_local), charged under SMPI */
void ct_sched_reduce(ct_sched *s, const void *in, void *inout, int count, MPI_Datatype t,
                     MPI_Op op);
void ct_sched_copy(ct_sched *s, void *dst, const void *src, MPI_Aint bytes);  /* charged */
/* Start child with this round; the round ends when it completes. The parent
 * owns the child from now on (frees it). */
void ct_sched_child(ct_sched *s, ct_sched *child);
/* End the current round: later operations wait for all earlier ones. */
void ct_sched_round(ct_sched *s);
/* Scratch memory that lives as long as the schedule (NULL when out of memory;
 * the error is kept). */
void *ct_sched_alloc(ct_sched *s, size_t bytes);
/* SMPI builds: later ct_sched_alloc scratch comes from SMPI_SHARED_MALLOC (on)
 * or malloc (off, the default); for timing runs whose data do not matter. */
void ct_sched_shared_scratch(int on);
MPI_Comm ct_sched_comm(const ct_sched *s);   /* the caller's communicator */
/* The shadow communicator and tag s's messages travel with: a blocking algorithm that
 * waits for its messages in arrival order (MPI_Waitany) sends and receives its own there,
 * under an empty schedule's tag, as privately as a schedule's. */
void ct_sched_wire(const ct_sched *s, MPI_Comm *comm, int *tag);

int ct_sched_start(ct_sched *s);             /* must not be active */
int ct_sched_test(ct_sched *s, int *done);   /* *done = 1 once complete */
int ct_sched_wait(ct_sched *s);              /* the schedule's MPI error code */
int ct_sched_progress(void);                 /* progress all, never blocks */
void ct_sched_free(ct_sched **s);            /* waits first if still active */

/* For callers that progress requests of their own together with schedules
 * (native/hier runs colltune's allreduce across node leaders while its
 * intra-node ops are in flight): one MPI_Waitany over every active schedule's
 * open requests and the caller's `extra` requests (nothing spins: SMPI charges
 * per MPI_Test). *which = index of the completed extra request (set to
 * MPI_REQUEST_NULL in extra), or -1 when a schedule's request completed (the
 * schedules are then advanced). Returns an MPI error code of the caller's
 * request; a schedule's error is kept in the schedule. */
int ct_sched_wait_with(MPI_Request *extra, int nextra, int *which);
int ct_sched_active(const ct_sched *s);     /* started and not yet complete */

#endif
