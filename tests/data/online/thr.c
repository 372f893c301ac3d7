/* Ranks at different thread levels (legal; from a review's repro): rank 0 asks for
 * MPI_THREAD_MULTIPLE (a progress or I/O thread), the others for MPI_THREAD_SINGLE.
 * Online mode and the guard are off under MPI_THREAD_MULTIPLE; decided by rank 0 alone
 * while the others went on with the set-up's collectives, MPI_Init hung. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    int want = r && atoi(r) == 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, got, rank, size;
    MPI_Init_thread(&argc, &argv, want, &got);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double x = rank, y = 0;
    int bad = 0;
    for (int i = 0; i < 50; i++) {
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        bad += y != size * (size - 1) / 2.0;
    }
    int levels[2] = {got, -got}, tot;
    MPI_Allreduce(MPI_IN_PLACE, levels, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&bad, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("thr: levels %d..%d, %d wrong\n", -levels[1], levels[0], tot);
    MPI_Finalize();
    return 0;
}
