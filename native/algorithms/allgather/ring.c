/* Ring allgather: P-1 steps, each rank forwards the block it received last.
 * Bandwidth-optimal, latency P-1: large messages. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int run(const ct_args *a, const int *p)
{
    (void)p;
    int size, rank, rc = MPI_SUCCESS;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    MPI_Aint blk = a->count * ct_extent(a->dtype);
    char *buf = a->recvbuf;
    if (a->sendbuf != MPI_IN_PLACE) ct_copy(buf + rank * blk, a->sendbuf, blk);
    if (a->count == 0) return MPI_SUCCESS;
    int left = (rank - 1 + size) % size, right = (rank + 1) % size;
    for (int i = 0; i < size - 1 && rc == MPI_SUCCESS; i++) {
        int sb = (rank - i + size) % size, rb = (rank - i - 1 + size) % size;
        rc = MPI_Sendrecv(buf + sb * blk, a->count, a->dtype, right, CT_TAG_ALLGATHER,
                          buf + rb * blk, a->count, a->dtype, left, CT_TAG_ALLGATHER, a->comm,
                          MPI_STATUS_IGNORE);
    }
    return rc;
}

const ct_algorithm ct_allgather_ring = {
    .id = 1, .name = "ring", .coll = CT_ALLGATHER,
    .description = "ring: P-1 steps of one block to the right neighbour",
    .nparams = 0, .supports = supports, .run = run,
};
