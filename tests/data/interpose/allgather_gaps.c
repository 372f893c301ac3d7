/* A valid MPI_Allgather whose receive type has gaps: count MPI_INT sent, count of an
 * int resized to 8 bytes received. On rank 0 the send buffer ends where the receive
 * buffer begins (adjacent, not overlapping). Prints the number of wrong elements. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, count = argc > 1 ? atoi(argv[1]) : 100;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Datatype gapped;
    MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &gapped);
    MPI_Type_commit(&gapped);
    size_t send_bytes = sizeof(int) * (size_t)count, recv_ints = 2 * (size_t)count * size;
    char *block = malloc(send_bytes + recv_ints * sizeof(int));
    int *send = rank == 0 ? (int *)block : malloc(send_bytes);
    int *recv = rank == 0 ? (int *)(block + send_bytes) : (int *)block;
    for (int i = 0; i < count; i++) send[i] = rank * 1000003 + i;
    for (size_t i = 0; i < recv_ints; i++) recv[i] = -1;
    MPI_Allgather(send, count, MPI_INT, recv, count, gapped, MPI_COMM_WORLD);
    int bad = 0, total = 0;
    for (int r = 0; r < size; r++)
        for (int i = 0; i < count; i++) bad += recv[2 * ((size_t)r * count + i)] != r * 1000003 + i;
    MPI_Reduce(&bad, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("allgather_gaps: %d wrong\n", total);
    MPI_Type_free(&gapped);
    MPI_Finalize();
    return 0;
}
