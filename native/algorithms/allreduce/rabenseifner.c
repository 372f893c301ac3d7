/* Rabenseifner allreduce: recursive-halving reduce-scatter + recursive-
 * doubling allgather (fold/unfold for non-powers of two). ~2m moved per rank:
 * large vectors. Commutative ops only. */
#include "../internal.h"

static const char *supports(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    return r ? r : ct_need_commutative(a);
}

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, nr;
    MPI_Comm_size(a->comm, &size);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, a->recvbuf, a->sendbuf, bytes);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    char *buf = a->recvbuf, *tmp = ct_sched_alloc(s, (size_t)bytes);
    int pof2 = ct_pof2_floor(size), rem = size - pof2;
    ct_fold_in(s, buf, tmp, a, &nr);
    if (nr >= 0) ct_rs_halving(s, buf, tmp, a, nr, pof2);
    for (int mask = 1; nr >= 0 && mask < pof2; mask <<= 1) {
        int base = nr & ~(mask - 1), pb = base ^ mask, peer = ct_newrank_to_rank(nr ^ mask, rem);
        int b0 = ct_block_start(a->count, pof2, base), b1 = ct_block_start(a->count, pof2, base + mask);
        int p0 = ct_block_start(a->count, pof2, pb), p1 = ct_block_start(a->count, pof2, pb + mask);
        ct_sched_round(s);
        ct_sched_send(s, ct_at(buf, ext, b0), b1 - b0, a->dtype, peer);
        ct_sched_recv(s, ct_at(buf, ext, p0), p1 - p0, a->dtype, peer);
    }
    ct_fold_out(s, buf, a);
    return MPI_SUCCESS;
}

const ct_algorithm ct_allreduce_rabenseifner = {
    .id = 3, .name = "rabenseifner", .coll = CT_ALLREDUCE,
    .description = "recursive-halving reduce-scatter + recursive-doubling allgather (commutative ops)",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
