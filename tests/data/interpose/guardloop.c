/* An MPI program that repeats one bcast and one allgather of COUNT ints ITER times
 * and checks every result: enough calls of one size for colltune's guard to
 * explore and decide (tests/test_guard.py).
 *   guardloop COUNT ITER      prints "guardloop ok: C calls, F failures" */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, count = argc > 1 ? atoi(argv[1]) : 1000, iter = argc > 2 ? atoi(argv[2]) : 20;
    long calls = 0, failures = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *b = malloc(sizeof(int) * (count ? count : 1));
    int *g = malloc(sizeof(int) * (size_t)size * (count ? count : 1));
    for (int it = 0; it < iter; it++) {
        int root = it % size;
        for (int i = 0; i < count; i++) b[i] = rank == root ? it * 7 + i : -1;
        MPI_Bcast(b, count, MPI_INT, root, MPI_COMM_WORLD);
        for (int i = 0; i < count; i++) failures += b[i] != it * 7 + i;
        for (int i = 0; i < count; i++) b[i] = rank * 1000 + i + it;
        MPI_Allgather(b, count, MPI_INT, g, count, MPI_INT, MPI_COMM_WORLD);
        for (int r = 0; r < size; r++)
            for (int i = 0; i < count; i++) failures += g[(size_t)r * count + i] != r * 1000 + i + it;
        calls += 2;
    }
    long in[2] = {calls, failures}, out[2];
    MPI_Reduce(in, out, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("guardloop ok: %ld calls, %ld failures\n", out[0], out[1]);
    free(b), free(g);
    MPI_Finalize();
    return 0;
}
