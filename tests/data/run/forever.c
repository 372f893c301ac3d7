/* An MPI program that never ends by itself (for tests/test_run_signals.py):
 * every rank meets in a barrier, rank 0 prints "forever: ready", then every rank
 * waits in pause() until a signal ends it. With the argument "ignore-term" the
 * ranks ignore SIGTERM, so only SIGKILL ends them. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "ignore-term")) signal(SIGTERM, SIG_IGN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("forever: ready\n");
        fflush(stdout);
    }
    for (;;) pause();
    MPI_Finalize();
    return 0;
}
