/* COLLTUNE_TIMES: time in the intercepted collectives, per collective (times.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "times.h"

int ct_times_on;
CT_TLS int ct_times_depth;
static int rank0;
static const char *path;
static double init_time, sum[CT_NCOLLS];
static long long calls[CT_NCOLLS];

void ct_times_init(int world_rank)
{
    const char *p = getenv("COLLTUNE_TIMES");
    int mine = p && *p, all = 0;
    /* every rank or none: the reduction at MPI_Finalize is collective */
    PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (mine && !all && world_rank == 0)
        fprintf(stderr, "colltune: warning: COLLTUNE_TIMES is not set on every rank; not timed\n");
    rank0 = world_rank == 0;
    path = p;
    ct_times_on = all;
    init_time = ct_clock();
}

double ct_times_begin(void)
{
    ct_times_depth = 1;
    return ct_clock();
}

void ct_times_end(ct_coll coll, double t0)
{
    sum[coll] += ct_clock() - t0;
    calls[coll]++;
    ct_times_depth = 0;
}

void ct_times_finalize(void)
{
    if (!ct_times_on)
        return;
    ct_times_on = 0;
    enum { N = CT_NCOLLS + 2 };             /* per collective, all of them, the job */
    double mine[N], most[N], total[N];
    long long n[CT_NCOLLS];
    int size;
    memcpy(mine, sum, sizeof sum);
    mine[CT_NCOLLS] = 0;
    for (int c = 0; c < CT_NCOLLS; c++) mine[CT_NCOLLS] += sum[c];
    mine[CT_NCOLLS + 1] = ct_clock() - init_time;
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Reduce(mine, most, N, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    PMPI_Reduce(mine, total, N, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    PMPI_Reduce(calls, n, CT_NCOLLS, MPI_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (!rank0)
        return;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "colltune: warning: COLLTUNE_TIMES=%s: cannot write: %s\n", path, strerror(errno));
        return;
    }
#ifdef COLLTUNE_SMPI
    const char *clock = "simulated";
#else
    const char *clock = "wall";
#endif
    fprintf(f, "{\"schema\":\"colltune-times/1\",\"ranks\":%d,\"clock\":\"%s\",\"job_s\":%.9g,"
            "\"all_max_s\":%.9g,\"collectives\":{", size, clock, most[CT_NCOLLS + 1], most[CT_NCOLLS]);
    for (int c = 0; c < CT_NCOLLS; c++)
        fprintf(f, "%s\"%s\":{\"calls\":%lld,\"max_s\":%.9g,\"mean_s\":%.9g}", c ? "," : "",
                ct_coll_name((ct_coll)c), n[c], most[c], total[c] / size);
    fprintf(f, "}}\n");
    fclose(f);
}
