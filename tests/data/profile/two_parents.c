/* One region (X) opened inside two others (A, then B): X holds a ring of 1000 B per rank
 * and a 2000 B bcast each time, so A and B each hold one ring and one bcast, and X both.
 * Prints "two_parents: ok" on rank 0. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    static char buf[2000], rb[1000];
    int r, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int k = 0; k < 2; k++) {
        MPI_Pcontrol(100, k ? "B" : "A");
        MPI_Pcontrol(100, "X");
        MPI_Sendrecv(buf, 1000, MPI_CHAR, (r + 1) % n, 1, rb, 1000, MPI_CHAR, (r + n - 1) % n, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Bcast(buf, 2000, MPI_CHAR, 0, MPI_COMM_WORLD);
        MPI_Pcontrol(-100, "X");
        MPI_Pcontrol(-100, k ? "B" : "A");
    }
    if (r == 0) printf("two_parents: ok\n");
    MPI_Finalize();
    return 0;
}
