/* Recursive-doubling allgather: log2(P) exchanges of doubling size. Needs a
 * power-of-two communicator (blocks exchanged must be contiguous). */
#include "../internal.h"

static const char *supports(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    if (!r) r = ct_need_comm_elems_fit(a);
    return r ? r : ct_need_pof2(a);
}

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, rank;
    ct_size_rank(a, &size, &rank);
    MPI_Aint blk = a->count * ct_extent(a->dtype);
    char *buf = a->recvbuf;
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, buf + rank * blk, a->sendbuf, blk);
    if (a->count == 0) return MPI_SUCCESS;
    for (int mask = 1; mask < size; mask <<= 1) {
        int base = rank & ~(mask - 1), pb = base ^ mask;
        ct_sched_send(s, buf + base * blk, mask * a->count, a->dtype, rank ^ mask);
        ct_sched_recv(s, buf + pb * blk, mask * a->count, a->dtype, rank ^ mask);
        ct_sched_round(s);
    }
    return MPI_SUCCESS;
}

const ct_algorithm ct_allgather_recursive_doubling = {
    .id = 2, .name = "recursive_doubling", .coll = CT_ALLGATHER,
    .description = "recursive doubling: log2(P) exchanges (power-of-two sizes)",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
