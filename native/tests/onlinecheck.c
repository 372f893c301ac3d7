/* An MPI program that knows nothing about colltune, written to break online
 * tuning if ranks could disagree on an arm: collectives on split
 * communicators that only some groups call, counts and numbers of calls that
 * depend on data (rank 0 of a communicator draws them with libc's rand() and
 * broadcasts them), its own srand()/rand() between collectives, a
 * non-commutative user op, and sizes across the size classes. Every result
 * is checked against the library's own answer (PMPI_).
 *   onlinecheck [ITERATIONS] [crash]   crash: MPI_Abort half-way (a killed job)
 * Prints "onlinecheck ok: C calls, F failures". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P 65521L
static const int COUNTS[] = {1, 3, 40, 700, 5000, 20000};   /* ints: every size class up to 64 KiB+ */
#define NCOUNTS (int)(sizeof COUNTS / sizeof *COUNTS)
static long calls, failures;

/* f(x) = a x + b mod P packed as a << 32 | b; invec (lower ranks) applied first:
 * associative, not commutative */
static void compose(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    long *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        long a1 = x[i] >> 32, b1 = x[i] & 0xffffffffL, a2 = y[i] >> 32, b2 = y[i] & 0xffffffffL;
        y[i] = (a2 * a1 % P) << 32 | ((a2 * b1 + b2) % P);
    }
}

static void check(int ok, const char *what, int count, MPI_Comm comm)
{
    int rank;
    calls++;
    MPI_Comm_rank(comm, &rank);
    if (!ok) {
        failures++;
        fprintf(stderr, "onlinecheck: %s count=%d wrong on comm rank %d\n", what, count, rank);
    }
}

/* one round of collectives on comm; n (calls) and sizes come from rank 0's rand() */
static void round_on(MPI_Comm comm, MPI_Op noncomm)
{
    int rank, size, pick[2];
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    pick[0] = rand() % 3 + 1, pick[1] = rand() % NCOUNTS;   /* only rank 0's values count */
    MPI_Bcast(pick, 2, MPI_INT, 0, comm);
    for (int k = 0; k < pick[0]; k++) {
        int count = COUNTS[(pick[1] + k) % NCOUNTS], root = (pick[1] + k) % size;
        size_t n = (size_t)count * (size > 2 ? size : 2);   /* a + count holds PMPI's answer */
        int *a = malloc(sizeof(int) * n), *b = malloc(sizeof(int) * n);
        long *la = malloc(sizeof(long) * count), *lb = malloc(sizeof(long) * count), *lr = malloc(sizeof(long) * count);
        for (int i = 0; i < count; i++) {
            a[i] = rank == root ? i * 7 + root : -1;
            la[i] = ((long)(rank + 2 + i % 5) << 32) | ((rank * 31 + i) % P);
        }
        memcpy(b, a, sizeof(int) * count);
        MPI_Bcast(a, count, MPI_INT, root, comm);
        PMPI_Bcast(b, count, MPI_INT, root, comm);
        check(!memcmp(a, b, sizeof(int) * count), "bcast", count, comm);
        rand();                                  /* the application's stream keeps moving */
        for (int i = 0; i < count; i++) a[i] = rank * 3 + i;
        MPI_Allreduce(a, b, count, MPI_INT, MPI_SUM, comm);
        PMPI_Allreduce(a, a + count, count, MPI_INT, MPI_SUM, comm);
        check(!memcmp(b, a + count, sizeof(int) * count), "allreduce sum", count, comm);
        MPI_Allreduce(la, lb, count, MPI_LONG, noncomm, comm);
        PMPI_Allreduce(la, lr, count, MPI_LONG, noncomm, comm);
        check(!memcmp(lb, lr, sizeof(long) * count), "allreduce non-commutative", count, comm);
        srand((unsigned)(rank + k));            /* ... and is reseeded, differently per rank */
        MPI_Reduce(a, b, count, MPI_INT, MPI_SUM, root, comm);
        check(rank != root || !memcmp(b, a + count, sizeof(int) * count), "reduce sum", count, comm);
        MPI_Reduce(la, lb, count, MPI_LONG, noncomm, root, comm);
        PMPI_Reduce(la, lr, count, MPI_LONG, noncomm, root, comm);
        check(rank != root || !memcmp(lb, lr, sizeof(long) * count), "reduce non-commutative", count, comm);
        for (int i = 0; i < count; i++) a[i] = rank * 1000 + i;
        MPI_Allgather(a, count, MPI_INT, b, count, MPI_INT, comm);
        int ok = 1;
        for (int r = 0; r < size; r++)
            for (int i = 0; i < count; i++) ok &= b[r * count + i] == r * 1000 + i;
        check(ok, "allgather", count, comm);
        free(a), free(b), free(la), free(lb), free(lr);
    }
}

int main(int argc, char **argv)
{
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 12, crash = argc > 2 && !strcmp(argv[2], "crash");
    MPI_Comm halves, thirds;
    MPI_Op noncomm;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Op_create(compose, 0, &noncomm);
    srand((unsigned)(rank * 17 + 1));            /* the application's own, rank-dependent stream */
    /* first use of the sub-communicators in an order that differs between ranks */
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &halves);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 3 == 0, rank, &thirds);
    for (int it = 0; it < iters; it++) {
        if (crash && it == iters / 2) MPI_Abort(MPI_COMM_WORLD, 3);
        if ((it + rank % 2) % 2) {   /* agreed by ranks sharing both */
            round_on(halves, noncomm);
            round_on(thirds, noncomm);
        } else {
            round_on(thirds, noncomm);
            round_on(halves, noncomm);
        }
        if (rank % 2 && it % 3 == 0) round_on(halves, noncomm);   /* one group only */
        if (it % 4 == 0) round_on(MPI_COMM_WORLD, noncomm);
    }
    long all[2] = {calls, failures}, sum[2];
    PMPI_Allreduce(all, sum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("onlinecheck ok: %ld calls, %ld failures\n", sum[0], sum[1]);
    MPI_Op_free(&noncomm);
    MPI_Comm_free(&halves);
    MPI_Comm_free(&thirds);
    MPI_Finalize();
    return 0;
}
