/* Ring allgather: P-1 steps, each rank forwards the block it received last.
 * Bandwidth-optimal, latency P-1: large messages. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, rank;
    ct_size_rank(a, &size, &rank);
    MPI_Aint blk = a->count * ct_extent(a->dtype);
    char *buf = a->recvbuf;
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, buf + rank * blk, a->sendbuf, blk);
    if (a->count == 0) return MPI_SUCCESS;
    int left = (rank - 1 + size) % size, right = (rank + 1) % size;
    for (int i = 0; i < size - 1; i++) {
        int sb = (rank - i + size) % size, rb = (rank - i - 1 + size) % size;
        ct_sched_send(s, buf + sb * blk, a->count, a->dtype, right);
        ct_sched_recv(s, buf + rb * blk, a->count, a->dtype, left);
        ct_sched_round(s);
    }
    return MPI_SUCCESS;
}

const ct_algorithm ct_allgather_ring = {
    .id = 1, .name = "ring", .coll = CT_ALLGATHER,
    .description = "ring: P-1 steps of one block to the right neighbour",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
