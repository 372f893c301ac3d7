/* An MPI program that knows nothing about colltune: CALLS allreduces of COUNT ints on
 * MPI_COMM_WORLD with its own commutative sum, which stalls (usleep: simulated time
 * under SMPI, real elsewhere) on chosen calls. The stall happens inside the collective,
 * where an OS hiccup or a descheduled rank hits a production job's call.
 *   onlinenoise CALLS COUNT STALL_US FIRST EVERY
 * Call i (from 0) stalls when FIRST >= 0 and i == FIRST, or EVERY > 0 and i >= FIRST and
 * (i - FIRST) % EVERY == 0: every rank that applies the op in that call sleeps at its
 * first application (which ranks do depends on the algorithm: recursive doubling's
 * rank 0 on 6 ranks applies none). Every result is checked. Prints "onlinenoise ok:
 * C calls, S stalls", S: the calls in which some rank stalled. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int current, *stalled;        /* stalled[i]: this rank stalled in call i */
static long first, every, stall_us;

static int stalls_now(int i)
{
    if (first < 0) return 0;
    return i == first || (every > 0 && i >= first && (i - first) % every == 0);
}

static void sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    if (!stalled[current] && stalls_now(current)) {
        stalled[current] = 1;
        usleep((useconds_t)stall_us);
    }
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size, rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 6) {
        if (rank == 0) fprintf(stderr, "usage: onlinenoise CALLS COUNT STALL_US FIRST EVERY\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int calls = atoi(argv[1]), count = atoi(argv[2]), wrong = 0;
    stall_us = atol(argv[3]), first = atol(argv[4]), every = atol(argv[5]);
    stalled = calloc((size_t)calls + 1, sizeof *stalled);
    MPI_Op op;
    MPI_Op_create(sum, 1, &op);
    int *in = malloc(sizeof(int) * (count + 1)), *out = malloc(sizeof(int) * (count + 1));
    for (current = 0; current < calls; current++) {
        for (int i = 0; i < count; i++) in[i] = rank * 3 + i + current;
        MPI_Allreduce(in, out, count, MPI_INT, op, MPI_COMM_WORLD);
        for (int i = 0; i < count; i++)      /* sum over r of (3r + i + current) */
            wrong += out[i] != 3 * size * (size - 1) / 2 + size * (i + current);
    }
    int all, stalls = 0;    /* every rank's exit status says whether any result was wrong */
    PMPI_Allreduce(&wrong, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(MPI_IN_PLACE, stalled, calls, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < calls; i++) stalls += stalled[i];
    if (rank == 0) {
        if (all) fprintf(stderr, "onlinenoise: %d wrong elements\n", all);
        else printf("onlinenoise ok: %d calls, %d stalls\n", calls, stalls);
    }
    MPI_Op_free(&op);
    free(in), free(out), free(stalled);
    MPI_Finalize();
    return all != 0;
}
