/* Concurrent point-to-point flows: rank i < n/2 sends BYTES to rank i + n/2, all
 * at once; rank 0 prints the slowest flow's time and its bandwidth. With a hostfile
 * that puts the two halves on chosen hosts, it shows whether a network carries a
 * permutation at full link rate (benchmarks/fattree_links.py). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = argc > 1 ? atol(argv[1]) : 8L << 20;
    int half = size / 2;
    char *buf = SMPI_SHARED_MALLOC((size_t)bytes);
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    if (rank < half) MPI_Send(buf, (int)bytes, MPI_CHAR, rank + half, 0, MPI_COMM_WORLD);
    else if (rank < 2 * half)
        MPI_Recv(buf, (int)bytes, MPI_CHAR, rank - half, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    t = MPI_Wtime() - t;
    double slowest;
    MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("{\"flows\": %d, \"bytes\": %ld, \"seconds\": %.9g, \"gbytes_per_s\": %.4f}\n",
               half, bytes, slowest, (double)bytes / slowest / 1e9);
    SMPI_SHARED_FREE(buf);
    MPI_Finalize();
    return 0;
}
