/* ct_clock(): seconds on this rank's clock, for the interposer's own timing (online
 * mode, COLLTUNE_TIMES): SimGrid's simulated clock under SMPI (global, and free:
 * MPI_Wtime charges 10 ns of simulated time), CLOCK_MONOTONIC otherwise. */
#ifndef CT_CLOCK_H
#define CT_CLOCK_H
#include <time.h>
#ifdef COLLTUNE_SMPI
#include <simgrid/engine.h>
#endif

static inline double ct_clock(void)
{
#ifdef COLLTUNE_SMPI
    return simgrid_get_clock();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
}
#endif
