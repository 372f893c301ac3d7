/* Rabenseifner allreduce: recursive-halving reduce-scatter + recursive-
 * doubling allgather (fold/unfold for non-powers of two). ~2m moved per rank:
 * large vectors. Commutative ops only.
 *
 * Order of the steps: the reduce-scatter pairs new ranks at distance 1, 2, 4,
 * ... (the largest exchange, half the vector, goes to the nearest rank) and the
 * allgather mirrors it (distance pof2/2 first, the nearest rank last, with the
 * largest block). As in MPICH's and SimGrid's rab_rdb. With block placement
 * the nearest ranks share a node, a switch or a router, so the big exchanges
 * stay local and only the small ones cross the network's narrower levels. The
 * opposite order (distance pof2/2 first) sent half the vector across the top
 * level in step 1: on the bundled dragonfly at 128 x 1 the 4 nodes of a router
 * then shared one router-to-router link in every cross-router step, with
 * 512..32 KiB per flow, 1082 us against 729 us for SimGrid's rab_rdb at 1 MiB
 * (benchmarks/rabenseifner_dragonfly.py).
 *
 * Block bookkeeping: ct_rs_nearest records in lo[k] the first block of the
 * range a rank keeps after step k; the allgather walks it back. */
#include "../internal.h"

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
    ct_fold_in(s, buf, tmp, a, 1, &nr);
    if (nr >= 0) {
        int lo[32], k = ct_rs_nearest(s, buf, tmp, a, nr, pof2, 1, lo), len = 1;
        /* allgather: the same steps backwards; before step k this rank holds
         * [lo[k], lo[k]+len), the partner the other half of the step's range */
        for (int mask = pof2 / 2; mask >= 1; mask >>= 1) {
            k--;
            int peer = ct_newrank_to_rank(nr ^ mask, rem, 1);
            int mine = lo[k], theirs = (nr & mask) ? mine - len : mine + len;
            int m0 = ct_block_start(a->count, pof2, mine), m1 = ct_block_start(a->count, pof2, mine + len);
            int t0 = ct_block_start(a->count, pof2, theirs), t1 = ct_block_start(a->count, pof2, theirs + len);
            ct_sched_round(s);
            ct_sched_send(s, ct_at(buf, ext, m0), m1 - m0, a->dtype, peer);
            ct_sched_recv(s, ct_at(buf, ext, t0), t1 - t0, a->dtype, peer);
            len *= 2;
        }
    }
    ct_fold_out(s, buf, a);
    return MPI_SUCCESS;
}

const ct_algorithm ct_allreduce_rabenseifner = {
    .id = 3, .name = "rabenseifner", .coll = CT_ALLREDUCE,
    .description = "recursive-halving reduce-scatter + recursive-doubling allgather (commutative ops)",
    .nparams = 0, .supports = ct_need_dense_commutative, .schedule = schedule,
};
