/* Time in the intercepted collectives (COLLTUNE_TIMES=<file>, docs/interposer.md):
 * every rank sums, per collective, the time its calls took; at MPI_Finalize rank 0
 * writes the per-collective calls, the largest and the mean sum over ranks, and the
 * job's MPI_Init..MPI_Finalize time as JSON. `colltune run --compare` reads it for the
 * library default and the run side by side. Off, each hook costs one load and one
 * predictable branch. */
#ifndef CT_TIMES_H
#define CT_TIMES_H
#include <mpi.h>
#include <colltune/algorithms.h>

#include "tls.h"

extern int ct_times_on;               /* COLLTUNE_TIMES set on every rank */
extern CT_TLS int ct_times_depth;     /* > 0 inside a timed call */

/* first line of intercept.c's collective wrappers: the timed call re-enters the
 * wrapper with depth > 0; `skip`: a call colltune makes itself (not the application's) */
#define CT_TIMES_COLL(coll, skip, call) \
    do { if (__builtin_expect(ct_times_on, 0) && !ct_times_depth && !(skip)) { \
        double t0_ = ct_times_begin(); int rc_ = call; ct_times_end(coll, t0_); return rc_; } } while (0)

void ct_times_init(int world_rank);   /* after PMPI_Init: reads COLLTUNE_TIMES, ranks agree */
double ct_times_begin(void);
void ct_times_end(ct_coll coll, double t0);
void ct_times_finalize(void);         /* before PMPI_Finalize: reduces, rank 0 writes */
#endif
