/* Synchronised clocks and waiting. Under SMPI (COLLTUNE_SMPI) MPI_Wtime is one
 * global simulated clock and waits are simulated sleeps; on real MPI each rank
 * corrects MPI_Wtime by an estimated offset to rank 0 and busy-waits. */
#ifndef COLLTUNE_CLOCK_H
#define COLLTUNE_CLOCK_H

#include <mpi.h>

/* 1 when the clock is global (no offsets needed) */
int clock_is_global(void);

/* Estimates every rank's offset to rank 0 of comm (ping-pong, minimum round
 * trip). Collective over comm; no-op on a global clock. Returns, on rank 0, the
 * largest absolute offset in seconds (0 elsewhere). */
double clock_sync(MPI_Comm comm);

/* MPI_Wtime on the clock of rank 0 */
double clock_now(void);

/* Waits until clock_now() >= t (nothing if already past). */
void clock_wait_until(double t);

/* A start later than its target by more than this is a late start. */
double clock_late_tolerance(void);

/* Stands for `seconds` of computation with no MPI call inside: a simulated
 * computation under SMPI, floating-point work for that long on the wall clock elsewhere. */
void clock_compute(double seconds);

#endif
