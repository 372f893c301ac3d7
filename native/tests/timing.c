/* algotest -t BYTES: one timed call of every (filtered) algorithm with default
 * parameters on MPI_COMM_WORLD, MPI_INT / MPI_SUM, root 0, after one warm-up
 * call. Prints the time to completion max(end) - min(start), which is exact
 * on SMPI's global clock (a rough sanity view, not a benchmark: use
 * colltune-bench for measurements). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "colltune/algorithms.h"
#include "timing.h"

void timing_run(long bytes, const char *filter)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int count = (int)(bytes / (long)sizeof(int));
    int *s = calloc((size_t)count + 1, sizeof(int)), *r = calloc(((size_t)count + 1) * (size_t)size, sizeof(int));
    for (int i = 0; i < ct_count(); i++) {
        const ct_algorithm *alg = ct_get(i);
        char full[128];
        snprintf(full, sizeof full, "%s/%s", ct_coll_name(alg->coll), alg->name);
        if (filter && strcmp(filter, full) && strcmp(filter, ct_coll_name(alg->coll))) continue;
        ct_args a = {s, r, count, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD};
        const char *ran = NULL;
        double t[2], tr[2];
        for (int rep = 0; rep < 2; rep++) {
            MPI_Barrier(MPI_COMM_WORLD);
            t[0] = -MPI_Wtime();
            ct_call(alg->coll, alg->name, NULL, &a, &ran);
            t[1] = MPI_Wtime();
        }
        MPI_Reduce(t, tr, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("TIME %-32s ran=%-24s bytes=%ld ranks=%d seconds=%.9e\n", full, ran, bytes,
                   size, tr[0] + tr[1]);
    }
    free(s);
    free(r);
}
