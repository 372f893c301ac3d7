/* The same bytes described by different datatypes on different ranks (legal
 * MPI: only the type signatures must match): rank 0 passes MPI_INT x N, odd
 * ranks a vector with holes (every other int of a 2N buffer) x 1, other ranks
 * contiguous(N, MPI_INT) x 1. Bcast from every root and allgather, on
 * MPI_COMM_WORLD. A decision taken per datatype would send some ranks to one
 * collective and the others to another: a hang. Prints "mixtypes: N checks,
 * M failures". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define N 5
static int rank, size;
static MPI_Datatype contig, holes;

/* this rank's description of n ints: buffer layout, count, datatype */
static void describe(int **p, int *count, MPI_Datatype *t, int *dense, int *sparse)
{
    if (rank == 0) *p = dense, *count = N, *t = MPI_INT;
    else if (rank % 2) *p = sparse, *count = 1, *t = holes;
    else *p = dense, *count = 1, *t = contig;
}

static int value(int r, int i) { return 1000 * r + 7 * i + 3; }

int main(int argc, char **argv)
{
    int dense[64 * N], sparse[2 * N], all[64 * 2 * N], checks = 0, fails = 0, *p, count;
    MPI_Datatype t;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Type_contiguous(N, MPI_INT, &contig);
    MPI_Type_vector(N, 1, 2, MPI_INT, &holes);
    MPI_Type_commit(&contig);
    MPI_Type_commit(&holes);
    for (int root = 0; root < size; root++) {
        memset(dense, 0, sizeof dense), memset(sparse, 0, sizeof sparse);
        describe(&p, &count, &t, dense, sparse);
        int stride = p == sparse ? 2 : 1;
        for (int i = 0; i < N; i++) p[i * stride] = rank == root ? value(root, i) : -1;
        MPI_Bcast(p, count, t, root, MPI_COMM_WORLD);
        for (int i = 0; i < N; i++, checks++) fails += p[i * stride] != value(root, i);
        if (stride == 2)
            for (int i = 0; i < N; i++) fails += sparse[2 * i + 1] != 0;   /* holes untouched */
    }
    /* allgather: the send side as above, the receive side size blocks of it */
    describe(&p, &count, &t, dense, sparse);
    int stride = p == sparse ? 2 : 1;
    MPI_Datatype rt = t;
    if (t == holes) MPI_Type_create_resized(holes, 0, (MPI_Aint)(2 * N * sizeof(int)), &rt), MPI_Type_commit(&rt);
    for (int i = 0; i < N; i++) p[i * stride] = value(rank, i);
    memset(all, 0, sizeof all);
    MPI_Allgather(p, count, t, all, count, rt, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++, checks++) fails += all[r * N * stride + i * stride] != value(r, i);
    if (rt != t) MPI_Type_free(&rt);
    MPI_Allreduce(MPI_IN_PLACE, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("mixtypes: %d checks, %d failures\n", checks, fails);
    MPI_Type_free(&contig);
    MPI_Type_free(&holes);
    MPI_Finalize();
    return 0;
}
