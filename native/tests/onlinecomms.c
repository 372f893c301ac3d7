/* An MPI program that knows nothing about colltune: ROUNDS times it splits
 * MPI_COMM_WORLD in two halves (even and odd ranks), calls CALLS allreduces and CALLS
 * bcasts on its half, checks every result and frees the communicator — except the
 * last LIVE ones, which stay in use until the end (many communicators alive at once).
 * miniAMR-like codes create and free communicators all run long.
 *   onlinecomms ROUNDS CALLS LIVE
 * Prints "onlinecomms ok: R communicators, C calls, F failures, T us per round" (T: rank
 * 0's MPI_Wtime over the rounds: the splits, the frees and whatever the interposer adds). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: onlinecomms ROUNDS CALLS LIVE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rounds = atoi(argv[1]), calls = atoi(argv[2]), live = atoi(argv[3]), failures = 0;
    long long ncalls = 0;
    MPI_Comm *kept = malloc(((size_t)rounds + 1) * sizeof *kept);
    enum { N = 37 };
    int in[N], out[N];
    double t0 = MPI_Wtime();
    for (int r = 0; r < rounds; r++) {
        MPI_Comm half;
        int hrank, hsize;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        MPI_Comm_rank(half, &hrank);
        MPI_Comm_size(half, &hsize);
        for (int k = 0; k < calls; k++) {
            for (int i = 0; i < N; i++) in[i] = hrank + i + r + k;
            MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, half);
            for (int i = 0; i < N; i++) failures += out[i] != hsize * (hsize - 1) / 2 + hsize * (i + r + k);
            for (int i = 0; i < N; i++) out[i] = hrank == k % hsize ? r * 1000 + k + i : -1;
            MPI_Bcast(out, N, MPI_INT, k % hsize, half);
            for (int i = 0; i < N; i++) failures += out[i] != r * 1000 + k + i;
            ncalls += 2;
        }
        if (r >= rounds - live) kept[r] = half;
        else MPI_Comm_free(&half);
    }
    for (int r = rounds - live < 0 ? 0 : rounds - live; r < rounds; r++) MPI_Comm_free(&kept[r]);
    double per_round = (MPI_Wtime() - t0) / (rounds > 0 ? rounds : 1);
    int all;
    PMPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("onlinecomms ok: %d communicators, %lld calls, %d failures, %.2f us per round\n",
               rounds, ncalls, all, per_round * 1e6);
    free(kept);
    MPI_Finalize();
    return all != 0;
}
