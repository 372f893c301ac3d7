/* Bruck allgather: ceil(log2 P) steps for any P. Blocks are gathered in a
 * buffer rotated so that this rank's block is first, then rotated back. */
#include "../internal.h"

static const char *supports(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    return r ? r : ct_need_comm_elems_fit(a);
}

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, rank;
    ct_size_rank(a, &size, &rank);
    MPI_Aint blk = a->count * ct_extent(a->dtype);
    char *buf = a->recvbuf;
    if (a->count == 0) return MPI_SUCCESS;
    char *tmp = ct_sched_alloc(s, (size_t)(blk * size));
    ct_sched_copy(s, tmp, a->sendbuf == MPI_IN_PLACE ? buf + rank * blk : a->sendbuf, blk);
    /* tmp block i = block of rank (rank + i) % size */
    for (int d = 1; d < size; d <<= 1) {
        int n = d < size - d ? d : size - d;
        ct_sched_send(s, tmp, n * a->count, a->dtype, (rank - d + size) % size);
        ct_sched_recv(s, tmp + d * blk, n * a->count, a->dtype, (rank + d) % size);
        ct_sched_round(s);
    }
    ct_sched_copy(s, buf + rank * blk, tmp, (size - rank) * blk);
    ct_sched_copy(s, buf, tmp + (size - rank) * blk, rank * blk);
    return MPI_SUCCESS;
}

const ct_algorithm ct_allgather_bruck = {
    .id = 3, .name = "bruck", .coll = CT_ALLGATHER,
    .description = "Bruck: ceil(log2 P) steps for any P, plus a local rotation",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
