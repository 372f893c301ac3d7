/* collmix: a plain MPI program (it knows nothing about colltune) with the
 * collective mix of an iterative solver: per iteration a small bcast of
 * control parameters, two scalar allreduces (dot products), an allreduce of a
 * small vector and of a non-power-of-two vector, a bcast of a table, and every
 * few iterations a 1 MiB bcast (a field re-read by rank 0). It times each call
 * with MPI_Wtime (no barriers: the time a rank spends in its collectives, as a
 * profiler reports it) and checks every result outside the timed region.
 *
 * Rank 0 prints, per (collective, bytes per rank), the calls and the time in
 * them (max over ranks), then the total and the check count:
 *   collmix: bcast          64 B x   20 calls  0.000012345 s
 *   collmix: total 0.001234567 s in collectives, 140 checks, 0 failures
 * Exit status 1 when a check failed. Usage: collmix [ITERATIONS] (default 20).
 * `make demo` runs it under the library default and under a deployment
 * (README, "What `make demo` does"). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BCAST, ALLREDUCE };
struct kind { int coll, bytes, reps, every; double t; int calls; };

static struct kind mix[] = {        /* reps calls every `every` iterations */
    {BCAST, 64, 1, 1, 0, 0},        /* control parameters: 8 doubles */
    {ALLREDUCE, 8, 2, 1, 0, 0},     /* two dot products */
    {ALLREDUCE, 2048, 1, 1, 0, 0},  /* 256 doubles: a small vector */
    {ALLREDUCE, 96000, 1, 1, 0, 0}, /* 12000 doubles: not a power of two */
    {BCAST, 40000, 1, 1, 0, 0},     /* a table, not a power of two */
    {BCAST, 1048576, 1, 5, 0, 0},   /* a field, every 5th iteration */
};
#define NKINDS (int)(sizeof mix / sizeof mix[0])

static int checks, failures;

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 20;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (iters < 1) iters = 1;
    double *in = malloc(1048576), *out = malloc(1048576);
    if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 2);

    for (int it = 0; it < iters; it++) {
        for (int c = 0; c < NKINDS * 2; c++) {     /* reps <= 2 */
            struct kind *m = &mix[c % NKINDS];
            if (it % m->every || c / NKINDS >= m->reps) continue;
            int n = m->bytes / (int)sizeof(double), root = 0, ok = 1;
            double t0;
            if (m->coll == BCAST) {
                for (int i = 0; i < n; i++) in[i] = rank == root ? it * 1000.0 + i : -1.0;
                t0 = MPI_Wtime();
                MPI_Bcast(in, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
                m->t += MPI_Wtime() - t0;
                for (int i = 0; i < n; i++) ok &= in[i] == it * 1000.0 + i;
            } else {
                for (int i = 0; i < n; i++) { in[i] = rank + (i + it) % 7; out[i] = -1.0; }
                t0 = MPI_Wtime();
                MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                m->t += MPI_Wtime() - t0;
                /* integers below 2^53: the sum is exact in any order */
                for (int i = 0; i < n; i++)
                    ok &= out[i] == (double)size * (size - 1) / 2 + (double)size * ((i + it) % 7);
            }
            m->calls++;
            checks++;
            if (!ok) {
                failures++;
                fprintf(stderr, "collmix: rank %d: WRONG %s of %d B at iteration %d\n", rank,
                        m->coll == BCAST ? "bcast" : "allreduce", m->bytes, it);
            }
        }
    }

    double t[NKINDS], tmax[NKINDS], total = 0, total_max;
    for (int k = 0; k < NKINDS; k++) { t[k] = mix[k].t; total += mix[k].t; }
    MPI_Reduce(t, tmax, NKINDS, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&total, &total_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int bad = 0;
    MPI_Allreduce(&failures, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int k = 0; k < NKINDS; k++)
            printf("collmix: %-9s %8d B x %4d calls  %.9f s\n",
                   mix[k].coll == BCAST ? "bcast" : "allreduce", mix[k].bytes, mix[k].calls,
                   tmax[k]);
        printf("collmix: total %.9f s in collectives, %d checks, %d failures\n", total_max,
               checks * size, bad);
    }
    free(in);
    free(out);
    MPI_Finalize();
    return bad ? 1 : 0;
}
