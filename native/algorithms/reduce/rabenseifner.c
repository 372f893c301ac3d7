/* Rabenseifner reduce: recursive-halving reduce-scatter, then a binomial
 * gather of the blocks to new rank 0, which forwards to the root if needed.
 * Each rank moves ~2m instead of m*log(P): for large vectors. Commutative
 * ops only (halving combines blocks out of rank order). */
#include "../internal.h"

static const char *supports(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    return r ? r : ct_need_commutative(a);
}

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, rank, nr;
    ct_size_rank(a, &size, &rank);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (a->count == 0) return MPI_SUCCESS;
    const void *in = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf;
    char *buf = ct_sched_alloc(s, (size_t)bytes), *tmp = ct_sched_alloc(s, (size_t)bytes);
    ct_sched_copy(s, buf, in, bytes);
    int pof2 = ct_pof2_floor(size), rem = size - pof2;
    ct_fold_in(s, buf, tmp, a, &nr);
    if (nr >= 0) {
        ct_rs_halving(s, buf, tmp, a, nr, pof2);
        /* binomial gather: blocks [base, base+mask) travel to new rank 0 */
        for (int mask = 1; mask < pof2; mask <<= 1) {
            int base = nr & ~(mask - 1), pb = base ^ mask, peer = ct_newrank_to_rank(nr ^ mask, rem);
            int b0 = ct_block_start(a->count, pof2, base), b1 = ct_block_start(a->count, pof2, base + mask);
            int p0 = ct_block_start(a->count, pof2, pb), p1 = ct_block_start(a->count, pof2, pb + mask);
            ct_sched_round(s);
            if (nr & mask) {
                ct_sched_send(s, ct_at(buf, ext, b0), b1 - b0, a->dtype, peer);
                break;
            }
            ct_sched_recv(s, ct_at(buf, ext, p0), p1 - p0, a->dtype, peer);
        }
    }
    int holder = ct_newrank_to_rank(0, rem);
    ct_sched_round(s);
    if (holder != a->root) {
        if (rank == holder) ct_sched_send(s, buf, a->count, a->dtype, a->root);
        if (rank == a->root) ct_sched_recv(s, a->recvbuf, a->count, a->dtype, holder);
    } else if (rank == a->root) {
        ct_sched_copy(s, a->recvbuf, buf, bytes);
    }
    return MPI_SUCCESS;
}

const ct_algorithm ct_reduce_rabenseifner = {
    .id = 4, .name = "rabenseifner", .coll = CT_REDUCE,
    .description = "recursive-halving reduce-scatter + binomial gather (commutative ops)",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
