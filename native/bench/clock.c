#include "clock.h"

#include <math.h>
#include <time.h>

#include "ctl.h"

#ifdef COLLTUNE_SMPI

#include <simgrid/engine.h>

int clock_is_global(void) { return 1; }
double clock_sync(MPI_Comm comm) { (void)comm; return 0.0; }
/* The simulated clock itself: SMPI's MPI_Wtime returns the same value but then
 * charges smpi/wtime (default 10 ns) of simulated time, which would land inside
 * the timed region and make every synchronised start 10 ns late. */
double clock_now(void) { return simgrid_get_clock(); }
/* waits end exactly on time, up to the nanosecond rounding of nanosleep */
double clock_late_tolerance(void) { return 1e-8; }

/* nanosleep advances simulated time exactly with smpi/simulate-computation:no */
static void sim_sleep(double s)
{
    if (!(s > 0)) return;
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)ceil((s - (double)ts.tv_sec) * 1e9); /* round up: never wake early */
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    nanosleep(&ts, NULL);
}

void clock_wait_until(double t) { sim_sleep(t - simgrid_get_clock()); }
void clock_compute(double seconds) { sim_sleep(seconds); }

#else /* real MPI */

#define PINGS 20

static double offset; /* this rank's clock minus rank 0's clock */

int clock_is_global(void) { return 0; }
double clock_now(void) { return MPI_Wtime() - offset; }
/* a busy-waiting rank leaves its loop within well under a microsecond */
double clock_late_tolerance(void) { return 1e-6; }

void clock_wait_until(double t)
{
    while (MPI_Wtime() - offset < t) {
    }
}

double clock_sync(MPI_Comm comm)
{
    int rank, size;
    double maxoff = 0.0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank == 0) {
        offset = 0.0;
        for (int r = 1; r < size; r++) {
            double best_rtt = INFINITY, off = 0.0;
            for (int k = 0; k < PINGS; k++) {
                double tr, t0 = MPI_Wtime();
                MPI_Send(NULL, 0, MPI_BYTE, r, CTL_TAG_PING, comm);
                MPI_Recv(&tr, 1, MPI_DOUBLE, r, CTL_TAG_PONG, comm, MPI_STATUS_IGNORE);
                double t1 = MPI_Wtime();
                /* the fastest round trip bounds the error of the midpoint best */
                if (t1 - t0 < best_rtt) { best_rtt = t1 - t0; off = tr - (t0 + t1) / 2; }
            }
            MPI_Send(&off, 1, MPI_DOUBLE, r, CTL_TAG_OFFSET, comm);
            if (fabs(off) > maxoff) maxoff = fabs(off);
        }
    } else {
        for (int k = 0; k < PINGS; k++) {
            MPI_Recv(NULL, 0, MPI_BYTE, 0, CTL_TAG_PING, comm, MPI_STATUS_IGNORE);
            double tr = MPI_Wtime();
            MPI_Send(&tr, 1, MPI_DOUBLE, 0, CTL_TAG_PONG, comm);
        }
        MPI_Recv(&offset, 1, MPI_DOUBLE, 0, CTL_TAG_OFFSET, comm, MPI_STATUS_IGNORE);
    }
    return maxoff;
}

static volatile double seed = 1.5, mul = 0.9999999, add = 1e-7, sink;

/* A dependent chain of multiply-adds. The operands come from volatiles so the
 * compiler can neither fold the loop to a constant nor drop it. */
static void spin(long iters)
{
    double x = seed, m = mul, a = add;
    for (long i = 0; i < iters; i++) x = x * m + a;
    sink = x;
}

/* Floating-point work in short chunks until `seconds` have passed on the wall clock
 * (MPI_Wtime makes no MPI progress). A loop calibrated once ran 38-50 % short of
 * 1 ms on this kind of machine (a CPU that slows long runs down), which made the
 * overlap percentage, computed with the nominal time, up to 150 % off. */
void clock_compute(double seconds)
{
    if (!(seconds > 0)) return;
    double end = MPI_Wtime() + seconds;
    do {
        spin(256);           /* a fraction of a microsecond */
    } while (MPI_Wtime() < end);
}

#endif
