/* Two 8-byte allreduces per run (from a review): a block called fewer times per run
 * than the budget, so every call is a draw. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank; double x, y, t = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 2; i++) {
        x = rank; MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        t += MPI_Wtime() - t0;
    }
    if (rank == 0) printf("few: sum %g, %.2f us in allreduce\n", y, t * 1e6);
    MPI_Finalize();
    return 0;
}
