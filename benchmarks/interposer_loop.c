/* Tight loop of small collectives, for benchmarks/interposer_overhead.py.
 * Usage: interposer_loop COLL CALLS BLOCKS   (COLL: allreduce | bcast)
 * Prints one JSON line on rank 0: the best block's real (and MPI_Wtime)
 * nanoseconds per call. Knows nothing about colltune. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef clock_gettime          /* SMPI maps it to simulated time: we want the real one */
#undef clock_gettime
#endif

static double now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int rank, in = 1, out = 0, bcast = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: interposer_loop allreduce|bcast CALLS BLOCKS\n");
        MPI_Finalize();
        return 2;
    }
    bcast = strcmp(argv[1], "bcast") == 0;
    long calls = atol(argv[2]);
    int blocks = atoi(argv[3]);
    double best_real = 1e30, best_wtime = 1e30;
    for (int b = -1; b < blocks; b++) {          /* block -1: warm-up */
        MPI_Barrier(MPI_COMM_WORLD);
        double r0 = now_real(), w0 = MPI_Wtime();
        for (long i = 0; i < calls; i++) {
            if (bcast) MPI_Bcast(&in, 1, MPI_INT, 0, MPI_COMM_WORLD);
            else MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
        double r = (now_real() - r0) / calls, w = (MPI_Wtime() - w0) / calls;
        /* the slowest rank's time is the collective's */
        double mine[2] = {r, w}, all[2];
        MPI_Reduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (b >= 0 && all[0] < best_real) best_real = all[0], best_wtime = all[1];
    }
    if (rank == 0)
        printf("{\"coll\":\"%s\",\"calls\":%ld,\"blocks\":%d,\"real_ns\":%.3f,\"wtime_ns\":%.3f}\n",
               argv[1], calls, blocks, best_real * 1e9, best_wtime * 1e9);
    MPI_Finalize();
    return 0;
}
