/* MPI_BOTTOM on some ranks only (legal MPI; from a review's repro): the data described
 * by absolute addresses (MPI_Get_address + hindexed) on one rank, by a plain buffer on
 * the others, with the same type signature.
 *   bcast:     the root sends MPI_BOTTOM + hindexed(n ints), the others receive n x MPI_INT
 *   allgather: rank 0 sends MPI_BOTTOM + hindexed, rank 1 receives into MPI_BOTTOM with a
 *              hindexed type of its whole receive buffer (count 1 per rank), the others
 *              plain arrays
 * On Open MPI and MPICH MPI_BOTTOM is a null pointer: a null buffer taken for an error on
 * that rank alone had sent it to the library while its peers ran colltune's algorithm
 * (online mode, or COLLTUNE_FORCE), and the job hung. Prints the number of wrong ints.
 *     bottom [iterations [bcast]]    bcast: no allgather (SMPI's own allgather gets
 *                                    MPI_BOTTOM wrong, without colltune too) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MPI_Datatype absolute(void *p, int n)
{
    MPI_Aint addr;
    MPI_Datatype t;
    MPI_Get_address(p, &addr);
    MPI_Type_create_hindexed(1, &n, &addr, MPI_INT, &t);
    MPI_Type_commit(&t);
    return t;
}

int main(int argc, char **argv)
{
    int rank, size, bad = 0, iters = argc > 1 ? atoi(argv[1]) : 20;
    int gather = !(argc > 2 && !strcmp(argv[2], "bcast"));
    int sizes[] = {1, 64, 3000};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *data = malloc(3000 * sizeof *data), *all = malloc((size_t)size * 3000 * sizeof *all);
    for (int it = 0; it < iters; it++)
        for (int k = 0; k < 3; k++) {
            int n = sizes[k], root = it % size;
            for (int i = 0; i < n; i++) data[i] = rank == root ? i + it : -1;
            if (rank == root) {
                MPI_Datatype t = absolute(data, n);
                MPI_Bcast(MPI_BOTTOM, 1, t, root, MPI_COMM_WORLD);
                MPI_Type_free(&t);
            } else {
                MPI_Bcast(data, n, MPI_INT, root, MPI_COMM_WORLD);
            }
            for (int i = 0; i < n; i++) bad += data[i] != i + it;
            if (!gather) continue;

            for (int i = 0; i < n; i++) data[i] = 1000 * rank + i + it;
            for (int i = 0; i < n * size; i++) all[i] = -1;
            MPI_Datatype s = MPI_INT, r = MPI_INT;
            const void *sbuf = data;
            void *rbuf = all;
            int scount = n, rcount = n;
            if (rank == 0) s = absolute(data, n), sbuf = MPI_BOTTOM, scount = 1;
            if (rank == 1 % size) {
                /* one hindexed element of n ints per rank, rank q's at all + q n */
                MPI_Aint addr;
                MPI_Datatype whole;
                MPI_Get_address(all, &addr);
                MPI_Type_create_hindexed(1, &n, &addr, MPI_INT, &whole);
                MPI_Type_commit(&whole);
                r = whole, rbuf = MPI_BOTTOM, rcount = 1;
            }
            MPI_Allgather(sbuf, scount, s, rbuf, rcount, r, MPI_COMM_WORLD);
            for (int q = 0; q < size; q++)
                for (int i = 0; i < n; i++) bad += all[q * n + i] != 1000 * q + i + it;
            if (s != MPI_INT) MPI_Type_free(&s);
            if (r != MPI_INT) MPI_Type_free(&r);
        }
    int tot;
    MPI_Allreduce(&bad, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("bottom: %d wrong elements\n", tot);
    free(data);
    free(all);
    MPI_Finalize();
    return 0;
}
