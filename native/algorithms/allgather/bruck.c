/* Bruck allgather: ceil(log2 P) steps for any P. Blocks are gathered in a
 * buffer rotated so that this rank's block is first, then rotated back. */
#include <stdlib.h>
#include "../internal.h"

static const char *supports(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    return r ? r : ct_need_comm_elems_fit(a);
}

static int run(const ct_args *a, const int *p)
{
    (void)p;
    int size, rank, rc = MPI_SUCCESS;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    MPI_Aint blk = a->count * ct_extent(a->dtype);
    char *buf = a->recvbuf;
    if (a->count == 0) return MPI_SUCCESS;
    char *tmp = malloc((size_t)(blk * size));
    ct_copy(tmp, a->sendbuf == MPI_IN_PLACE ? buf + rank * blk : a->sendbuf, blk);
    /* tmp block i = block of rank (rank + i) % size */
    for (int d = 1; d < size && rc == MPI_SUCCESS; d <<= 1) {
        int n = d < size - d ? d : size - d;
        rc = MPI_Sendrecv(tmp, n * a->count, a->dtype, (rank - d + size) % size, CT_TAG_ALLGATHER,
                          tmp + d * blk, n * a->count, a->dtype, (rank + d) % size,
                          CT_TAG_ALLGATHER, a->comm, MPI_STATUS_IGNORE);
    }
    ct_copy(buf + rank * blk, tmp, (size - rank) * blk);
    ct_copy(buf, tmp + (size - rank) * blk, rank * blk);
    free(tmp);
    return rc;
}

const ct_algorithm ct_allgather_bruck = {
    .id = 3, .name = "bruck", .coll = CT_ALLGATHER,
    .description = "Bruck: ceil(log2 P) steps for any P, plus a local rotation",
    .nparams = 0, .supports = supports, .run = run,
};
