/* Three ranks, rank 1 the relay between rank 0 and rank 2 (benchmarks/relay_routes.py).
 *   pair:  rank 0 sends m bytes to rank 1 while rank 1 sends m other bytes to rank 2;
 *          prints when each message arrived (us).
 *   chain: rank 0's m bytes pass rank 1 on their way to rank 2 in pieces of ps bytes, each
 *          forwarded as it arrives, w receives posted, MPI_Isend (as bcast/chain_flow);
 *          prints when the last piece reached rank 2 (us).
 * Usage: relay_routes M PS W */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double pair(char *a, char *b, int m, int rank)
{
    MPI_Request r[2];
    int n = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (rank == 0) MPI_Isend(a, m, MPI_BYTE, 1, 0, MPI_COMM_WORLD, &r[n++]);
    if (rank == 1) {
        MPI_Irecv(a, m, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &r[n++]);
        MPI_Isend(b, m, MPI_BYTE, 2, 0, MPI_COMM_WORLD, &r[n++]);
    }
    if (rank == 2) MPI_Irecv(b, m, MPI_BYTE, 1, 0, MPI_COMM_WORLD, &r[n++]);
    if (rank == 0) { MPI_Wait(&r[0], MPI_STATUS_IGNORE); return 0; }
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);          /* rank 1: the incoming message; 2: its own */
    double t = MPI_Wtime() - t0;
    if (n == 2) MPI_Wait(&r[1], MPI_STATUS_IGNORE);
    return t;
}

static double chain(char *a, int m, int ps, int w, int rank)
{
    int np = (m + ps - 1) / ps, posted = 0;
    MPI_Request *rr = malloc(sizeof(MPI_Request) * w), *sr = malloc(sizeof(MPI_Request) * np);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < np; i++) {
        int len = i == np - 1 ? m - i * ps : ps;
        if (rank > 0) {
            for (; posted < np && posted < i + w; posted++)
                MPI_Irecv(a + (size_t)posted * ps, posted == np - 1 ? m - posted * ps : ps, MPI_BYTE,
                          rank - 1, 0, MPI_COMM_WORLD, &rr[posted % w]);
            MPI_Wait(&rr[i % w], MPI_STATUS_IGNORE);
        }
        if (rank < 2) MPI_Isend(a + (size_t)i * ps, len, MPI_BYTE, rank + 1, 0, MPI_COMM_WORLD, &sr[i]);
    }
    if (rank < 2) MPI_Waitall(np, sr, MPI_STATUSES_IGNORE);
    double t = MPI_Wtime() - t0;
    free(rr); free(sr);
    return t;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4 || size != 3) {
        if (rank == 0) fprintf(stderr, "usage: relay_routes M PS W (3 ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int m = atoi(argv[1]), ps = atoi(argv[2]), w = atoi(argv[3]);
    char *a = malloc(m), *b = malloc(m);
    double t = pair(a, b, m, rank);                   /* rank 1: the in message; 2: the out */
    double mine[3] = {rank == 1 ? t : 0, rank == 2 ? t : 0, chain(a, m, ps, w, rank)}, got[3];
    MPI_Reduce(mine, got, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("pair_in_us %.2f pair_out_us %.2f chain_us %.2f\n", got[0] * 1e6, got[1] * 1e6, got[2] * 1e6);
    free(a); free(b);
    MPI_Finalize();
    return 0;
}
