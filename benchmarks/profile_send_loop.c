/* Tight loop of counted sends, for benchmarks/profile_overhead.py.
 * Usage: profile_send_loop world|dup CALLS BLOCKS
 * Each iteration: MPI_Irecv from self, MPI_Send of one int to self, MPI_Wait
 * (on MPI_COMM_WORLD, or on a duplicate of it: the per-communicator world-rank
 * translation). Prints one JSON line: the best block's real ns per iteration.
 * Knows nothing about colltune. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int rank, in = 1, out = 0;
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Request req;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: profile_send_loop world|dup CALLS BLOCKS\n");
        MPI_Finalize();
        return 2;
    }
    if (!strcmp(argv[1], "dup")) MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_rank(comm, &rank);
    long calls = atol(argv[2]);
    int blocks = atoi(argv[3]);
    double best = 1e30;
    for (int b = -1; b < blocks; b++) {          /* block -1: warm-up */
        double t0 = now_real();
        for (long i = 0; i < calls; i++) {
            MPI_Irecv(&out, 1, MPI_INT, rank, 0, comm, &req);
            MPI_Send(&in, 1, MPI_INT, rank, 0, comm);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        double t = (now_real() - t0) / calls;
        if (b >= 0 && t < best) best = t;
    }
    printf("{\"comm\":\"%s\",\"calls\":%ld,\"blocks\":%d,\"real_ns\":%.3f}\n", argv[1], calls,
           blocks, best * 1e9);
    if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
