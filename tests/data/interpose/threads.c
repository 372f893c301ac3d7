/* MPI_THREAD_MULTIPLE under the interposer. "concurrent": two threads, each on its own
 * duplicate of MPI_COMM_WORLD, call allreduce, bcast and allgather at the same time;
 * "serial": the same calls from the main thread only, while a second thread computes.
 * Prints "threads: MODE provided=P failures=F" on rank 0; exits 1 on a wrong result. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MPI_Comm comms[2];
static int rank, size, fails[2];
static volatile int stop;

static void *calls(void *arg)
{
    int t = *(int *)arg, counts[] = {1, 100, 3001, 40000};
    MPI_Comm c = comms[t];
    for (int it = 0; it < 24; it++) {
        int n = counts[it % 4];
        int *b = malloc((size_t)n * sizeof *b), *o = malloc((size_t)n * size * sizeof *o);
        for (int i = 0; i < n; i++) b[i] = rank + i + t + it;
        MPI_Allreduce(MPI_IN_PLACE, b, n, MPI_INT, MPI_SUM, c);
        for (int i = 0; i < n; i++) fails[t] += b[i] != size * (i + t + it) + size * (size - 1) / 2;
        for (int i = 0; i < n; i++) b[i] = rank == it % size ? i * 3 + t : -1;
        MPI_Bcast(b, n, MPI_INT, it % size, c);
        for (int i = 0; i < n; i++) fails[t] += b[i] != i * 3 + t;
        for (int i = 0; i < n; i++) b[i] = rank * 7 + i;
        MPI_Allgather(b, n, MPI_INT, o, n, MPI_INT, c);
        for (int q = 0; q < size; q++)
            for (int i = 0; i < n; i++) fails[t] += o[(size_t)q * n + i] != q * 7 + i;
        free(b);
        free(o);
    }
    return NULL;
}

static void *compute(void *arg)
{
    volatile double x = 1;
    while (!stop) x = x * 1.0000001 + 1e-9;
    (void)arg;
    return NULL;
}

int main(int argc, char **argv)
{
    int prov, ids[2] = {0, 1};
    const char *mode = argc > 1 ? argv[1] : "concurrent";
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    pthread_t th[2];
    if (prov == MPI_THREAD_MULTIPLE && !strcmp(mode, "concurrent")) {
        for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, calls, &ids[t]);
        for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    } else {
        pthread_create(&th[0], NULL, compute, NULL);
        calls(&ids[0]);
        calls(&ids[1]);
        stop = 1;
        pthread_join(th[0], NULL);
    }
    int f = fails[0] + fails[1], all = 0;
    MPI_Reduce(&f, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("threads: %s provided=%d failures=%d\n", mode, prov, all);
    MPI_Comm_free(&comms[0]);
    MPI_Comm_free(&comms[1]);
    MPI_Finalize();
    return rank == 0 && all != 0;
}
