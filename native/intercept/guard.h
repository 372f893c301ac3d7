/* The guard (COLLTUNE_GUARD=N, docs/interposer.md#the-guard): per communicator and
 * (collective, bytes) block, the first calls alternate between the rules file's
 * algorithm and the library's own collective, N timed calls each; then one
 * allreduce of the slowest rank's sums decides, and the block runs the faster for
 * the rest of the job. A rules file tuned on other layouts then costs at most the
 * exploration where the library is faster. intercept.c calls the hooks below; with
 * the guard off each costs one load and one predictable branch. */
#ifndef CT_GUARD_H
#define CT_GUARD_H
#include <mpi.h>
#include "rules.h"

/* intercept.c's `from` of a guarded decision (after FROM_RULES, FROM_FORCE, online's 2) */
enum { CT_GUARD_TRY = 3, CT_GUARD_KEPT, CT_GUARD_LIB };

extern int ct_guard_calls;           /* N; 0: off */
extern void *ct_guard_timing;        /* the block the current call is timed for, or NULL */

/* At MPI_Init, on every rank (collective on MPI_COMM_WORLD): reads and agrees on
 * COLLTUNE_GUARD; off under MPI_THREAD_MULTIPLE or online mode (one warning). */
void ct_guard_init(int world_rank, int thread_multiple, int online);
/* The rule this call runs instead of r (a rules-file rule with an algorithm):
 * r, or a library rule carrying r's line; *from says which (CT_GUARD_*). The
 * call that ends a block's exploration is collective on comm. */
const ct_rule *ct_guard_pick(void **slot, MPI_Comm comm, ct_coll coll, long long bytes,
                             const ct_rule *r, int *from);
void ct_guard_took(double seconds);  /* the timed call's duration on this rank */
void ct_guard_free(void *slot);      /* the communicator's attribute is deleted */

#define CT_GUARD_TIMED(call, rc)                                            \
    do {                                                                    \
        if (__builtin_expect(ct_guard_timing != NULL, 0)) {                 \
            double t0_ = PMPI_Wtime();                                      \
            rc = (call);                                                    \
            ct_guard_took(PMPI_Wtime() - t0_);                              \
        } else {                                                            \
            rc = (call);                                                    \
        }                                                                   \
    } while (0)
#endif
