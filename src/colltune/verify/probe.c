/* colltune verify probe: for every sample point "coll:bytes" runs the collective
 * once under observation (between colltune_trace_point(i, rank) and
 * colltune_trace_point(-1, rank), found with dlsym when a tracer is preloaded),
 * then times REPS calls, each after a barrier, and prints on rank 0 one JSON line
 * per point with the largest over ranks of each rank's median call time (the
 * median shrugs off the preemptions of an oversubscribed or busy host).
 * Sizes are bytes per rank, as in colltune-bench: char buffers, float + MPI_SUM
 * for the reductions; allgather/gather/scatter/alltoall move one block per peer. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

typedef void (*mark_fn)(int point, int rank);

static int run(const char *coll, char *a, char *b, int count, MPI_Comm comm) {
    if (!strcmp(coll, "bcast")) return MPI_Bcast(a, count, MPI_CHAR, 0, comm);
    if (!strcmp(coll, "reduce")) return MPI_Reduce(a, b, count, MPI_FLOAT, MPI_SUM, 0, comm);
    if (!strcmp(coll, "allreduce")) return MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, comm);
    if (!strcmp(coll, "allgather")) return MPI_Allgather(a, count, MPI_CHAR, b, count, MPI_CHAR, comm);
    if (!strcmp(coll, "gather")) return MPI_Gather(a, count, MPI_CHAR, b, count, MPI_CHAR, 0, comm);
    if (!strcmp(coll, "scatter")) return MPI_Scatter(b, count, MPI_CHAR, a, count, MPI_CHAR, 0, comm);
    if (!strcmp(coll, "alltoall")) return MPI_Alltoall(a, count, MPI_CHAR, b, count, MPI_CHAR, comm);
    if (!strcmp(coll, "reduce_scatter_block"))
        return MPI_Reduce_scatter_block(a, b, count, MPI_FLOAT, MPI_SUM, comm);
    if (!strcmp(coll, "barrier")) return MPI_Barrier(comm);
    return -1;
}

static int is_reduction(const char *coll) {
    return !strcmp(coll, "reduce") || !strcmp(coll, "allreduce") ||
           !strcmp(coll, "reduce_scatter_block");
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (!rank) fprintf(stderr, "usage: %s REPS coll:bytes...\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int reps = atoi(argv[1]);
    mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "colltune_trace_point");
    for (int i = 2; i < argc; i++) {
        char coll[64];
        long bytes;
        if (sscanf(argv[i], "%63[a-z_]:%ld", coll, &bytes) != 2) MPI_Abort(MPI_COMM_WORLD, 2);
        int dsize = is_reduction(coll) ? (int)sizeof(float) : 1;
        int count = (int)(bytes / dsize);
        size_t total = (size_t)(count > 0 ? count : 1) * dsize * size;
        char *a = calloc(total, 1), *b = calloc(total, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        if (mark) mark(i - 2, rank);
        int rc = run(coll, a, b, count, MPI_COMM_WORLD);
        if (mark) mark(-1, rank);
        if (rc != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
        double *dt = calloc(reps > 0 ? reps : 1, sizeof *dt), median = 0, worst;
        for (int r = 0; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            run(coll, a, b, count, MPI_COMM_WORLD);
            dt[r] = MPI_Wtime() - t0;
        }
        if (reps > 0) {
            qsort(dt, reps, sizeof *dt, cmp_double);
            median = dt[reps / 2];
        }
        free(dt);
        MPI_Reduce(&median, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (!rank)
            printf("{\"point\": %d, \"collective\": \"%s\", \"bytes\": %ld, \"count\": %d, "
                   "\"median_s\": %.9g}\n", i - 2, coll, bytes, count, worst);
        fflush(stdout);
        free(a);
        free(b);
    }
    MPI_Finalize();
    return 0;
}
