/* collcheck: a plain MPI program (it knows nothing about colltune) that runs
 * MPI_Bcast, MPI_Reduce, MPI_Allreduce and MPI_Allgather on MPI_COMM_WORLD and
 * on a split communicator, over several message sizes, roots, datatypes,
 * in-place forms and a user-defined operation, and checks every result.
 * Prints "collcheck: N checks, F failures" on rank 0; exit status 1 on failure.
 * Usage: collcheck [REPEAT]   (each case is run REPEAT times, default 1) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks, failures;

static void expect(int ok, const char *what, int n, MPI_Comm comm)
{
    int all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm);
    checks++;
    if (!all) {
        int rank;
        failures++;
        MPI_Comm_rank(comm, &rank);
        if (rank == 0) fprintf(stderr, "collcheck: FAILED %s n=%d\n", what, n);
    }
}

/* max(a, b) on pairs of ints as a user operation (commutative) */
static void pairmax(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < 2 * *len; i++) if (a[i] > b[i]) b[i] = a[i];
}

static void run(MPI_Comm comm, int n, MPI_Op pmax, MPI_Datatype pair)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    double *d = malloc(sizeof(double) * (n + 1)), *e = malloc(sizeof(double) * (n + 1));
    int *iv = malloc(sizeof(int) * (size_t)(n + 1) * size), *jv = malloc(sizeof(int) * (size_t)(n + 1) * size);
    char *cb = malloc((size_t)n + 1);
    int ok, root;

    for (root = 0; root < size; root += size > 2 ? size - 1 : 1) {     /* first and last */
        for (int i = 0; i < n; i++) cb[i] = rank == root ? (char)(i * 7 + root) : 0;
        MPI_Bcast(cb, n, MPI_CHAR, root, comm);
        ok = 1;
        for (int i = 0; i < n; i++) ok &= cb[i] == (char)(i * 7 + root);
        expect(ok, "bcast char", n, comm);

        for (int i = 0; i < n; i++) d[i] = rank + i % 5;
        memset(e, 0, sizeof(double) * (n + 1));
        MPI_Reduce(d, e, n, MPI_DOUBLE, MPI_SUM, root, comm);
        ok = 1;
        if (rank == root)
            for (int i = 0; i < n; i++) ok &= e[i] == (double)size * (size - 1) / 2 + (double)size * (i % 5);
        expect(ok, "reduce double sum", n, comm);

        for (int i = 0; i < n; i++) iv[i] = rank * 3 - i;
        if (rank == root) MPI_Reduce(MPI_IN_PLACE, iv, n, MPI_INT, MPI_MAX, root, comm);
        else MPI_Reduce(iv, NULL, n, MPI_INT, MPI_MAX, root, comm);
        ok = 1;
        if (rank == root)
            for (int i = 0; i < n; i++) ok &= iv[i] == (size - 1) * 3 - i;
        expect(ok, "reduce int max in place", n, comm);
    }

    for (int i = 0; i < n; i++) iv[i] = rank + i;
    MPI_Allreduce(iv, jv, n, MPI_INT, MPI_SUM, comm);
    ok = 1;
    for (int i = 0; i < n; i++) ok &= jv[i] == size * (size - 1) / 2 + size * i;
    expect(ok, "allreduce int sum", n, comm);

    for (int i = 0; i < n; i++) d[i] = (double)(rank == i % size);
    MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_DOUBLE, MPI_MAX, comm);
    ok = 1;
    for (int i = 0; i < n; i++) ok &= d[i] == 1.0;
    expect(ok, "allreduce double max in place", n, comm);

    int half = n / 2;
    for (int i = 0; i < half; i++) iv[2 * i] = rank, iv[2 * i + 1] = -rank + i;
    MPI_Allreduce(iv, jv, half, pair, pmax, comm);
    ok = 1;
    for (int i = 0; i < half; i++) ok &= jv[2 * i] == size - 1 && jv[2 * i + 1] == i;
    expect(ok, "allreduce user op on a derived type", half, comm);

    for (int i = 0; i < n; i++) iv[i] = rank * 1000 + i;
    MPI_Allgather(iv, n, MPI_INT, jv, n, MPI_INT, comm);
    ok = 1;
    for (int r = 0; r < size; r++)
        for (int i = 0; i < n; i++) ok &= jv[r * n + i] == r * 1000 + i;
    expect(ok, "allgather int", n, comm);

    for (int r = 0; r < size; r++)
        for (int i = 0; i < n; i++) jv[r * n + i] = r == rank ? rank * 1000 + i : -1;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, jv, n, MPI_INT, comm);
    ok = 1;
    for (int r = 0; r < size; r++)
        for (int i = 0; i < n; i++) ok &= jv[r * n + i] == r * 1000 + i;
    expect(ok, "allgather int in place", n, comm);

    free(d), free(e), free(iv), free(jv), free(cb);
}

int main(int argc, char **argv)
{
    static const int sizes[] = {0, 1, 3, 100, 1000, 5000, 40000};
    int rank, repeat = argc > 1 ? atoi(argv[1]) : 1;
    MPI_Comm split;
    MPI_Op pmax;
    MPI_Datatype pair;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Op_create(pairmax, 1, &pmax);
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &split);   /* reversed order */
    for (int k = 0; k < repeat; k++)
        for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            run(MPI_COMM_WORLD, sizes[s], pmax, pair);
            run(split, sizes[s], pmax, pair);
        }
    MPI_Comm_free(&split);
    MPI_Type_free(&pair);
    MPI_Op_free(&pmax);
    if (rank == 0) printf("collcheck: %d checks, %d failures\n", checks, failures);
    MPI_Finalize();
    return failures != 0;
}
