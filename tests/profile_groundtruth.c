/* Ground-truth program of tests/test_profile_groundtruth.py and
 * benchmarks/profile_groundtruth.py: REPS calls of one collective inside the named
 * region "gt" (MPI_Pcontrol 100 / -100, docs/profile-counting.md), nothing else sent.
 *   profile_groundtruth COLL BYTES [REPS]
 * COLL: bcast (root 0) | allreduce (floats, MPI_SUM) | reduce (the same, root 0) |
 * allgather | alltoall; BYTES: per rank (bcast, allreduce, reduce) or per block (allgather,
 * alltoall). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 3) {
        if (!rank) fprintf(stderr, "usage: %s COLL BYTES [REPS]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *coll = argv[1];
    int bytes = atoi(argv[2]), reps = argc > 3 ? atoi(argv[3]) : 1;
    char *a = calloc((size_t)bytes * size + 4, 1), *b = calloc((size_t)bytes * size + 4, 1);
    MPI_Pcontrol(100, "gt");
    for (int i = 0; i < reps; i++) {
        if (!strcmp(coll, "bcast")) MPI_Bcast(a, bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
        else if (!strcmp(coll, "allreduce"))
            MPI_Allreduce(a, b, bytes / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else if (!strcmp(coll, "reduce"))
            MPI_Reduce(a, b, bytes / 4, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        else if (!strcmp(coll, "allgather"))
            MPI_Allgather(a, bytes, MPI_CHAR, b, bytes, MPI_CHAR, MPI_COMM_WORLD);
        else if (!strcmp(coll, "alltoall"))
            MPI_Alltoall(a, bytes, MPI_CHAR, b, bytes, MPI_CHAR, MPI_COMM_WORLD);
        else MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Pcontrol(-100, "gt");
    free(a), free(b);
    MPI_Finalize();
    return 0;
}
