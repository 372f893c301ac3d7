/* Rabenseifner reduce: recursive-halving reduce-scatter, then a binomial
 * gather of the blocks to the root (MPICH's reduce_scatter_gather).
 * Each rank moves ~2m instead of m*log(P): for large vectors. Commutative
 * ops only (halving combines blocks out of rank order).
 *
 * The reduce-scatter pairs the nearest new ranks first (ct_rs_nearest), so
 * half the vector stays on the node; the gather mirrors it. The opposite
 * order (distance pof2/2 first) sent half the vector across the network in step 1 from every rank:
 * on the bundled dragonfly at 16x12, 2 MiB, 10.1 ms against 1.96 ms for
 * SimGrid's MPICH selector (benchmarks/results/best_of_both), and gathering
 * to new rank 0 cost one more hop of the whole vector to the root. */
#include "../internal.h"

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, rank, nr;
    ct_size_rank(a, &size, &rank);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (a->count == 0) return MPI_SUCCESS;
    const void *in = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf;
    /* the root reduces in place in its receive buffer */
    char *buf = rank == a->root ? a->recvbuf : ct_sched_alloc(s, (size_t)bytes);
    char *tmp = ct_sched_alloc(s, (size_t)bytes);
    if (buf != in) ct_sched_copy(s, buf, in, bytes);
    int pof2 = ct_pof2_floor(size), rem = size - pof2;
    /* the root works on when folded, so the gather ends at the root */
    int keep = a->root < 2 * rem ? a->root % 2 : 1;
    int rootnr = a->root < 2 * rem ? a->root / 2 : a->root - rem;
    ct_fold_in(s, buf, tmp, a, keep, &nr);
    if (nr >= 0) {
        int lo[32], k = ct_rs_nearest(s, buf, tmp, a, nr, pof2, keep, lo), len = 1;
        /* binomial gather, the reduce-scatter's steps backwards: before step
         * k a rank holds [lo[k], lo[k]+len); the rank whose bit differs from
         * the root's new rank sends it and is done */
        for (int mask = pof2 / 2; mask >= 1; mask >>= 1) {
            k--;
            int peer = ct_newrank_to_rank(nr ^ mask, rem, keep);
            int mine = lo[k], theirs = (nr & mask) ? mine - len : mine + len;
            ct_sched_round(s);
            if ((nr ^ rootnr) & mask) {
                int m0 = ct_block_start(a->count, pof2, mine), m1 = ct_block_start(a->count, pof2, mine + len);
                ct_sched_send(s, ct_at(buf, ext, m0), m1 - m0, a->dtype, peer);
                break;
            }
            int t0 = ct_block_start(a->count, pof2, theirs), t1 = ct_block_start(a->count, pof2, theirs + len);
            ct_sched_recv(s, ct_at(buf, ext, t0), t1 - t0, a->dtype, peer);
            len *= 2;
        }
    }
    return MPI_SUCCESS;
}

const ct_algorithm ct_reduce_rabenseifner = {
    .id = 4, .name = "rabenseifner", .coll = CT_REDUCE,
    .description = "recursive-halving reduce-scatter + binomial gather (commutative ops)",
    .nparams = 0, .supports = ct_need_dense_commutative, .schedule = schedule,
};
