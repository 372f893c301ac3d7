/* Rabenseifner reduce: recursive-halving reduce-scatter, then a binomial
 * gather of the blocks to the root (MPICH's reduce_scatter_gather).
 * Each rank moves ~2m instead of m*log(P): for large vectors. Commutative
 * ops only (halving combines blocks out of rank order).
 *
 * The reduce-scatter pairs the nearest ranks first, so half the vector stays
 * on the node; the gather mirrors it. The opposite order (distance pof2/2
 * first) sent half the vector across the network in step 1 from every rank:
 * on the bundled dragonfly at 16x12, 2 MiB, 10.1 ms against 1.96 ms for
 * SimGrid's MPICH selector (benchmarks/results/best_of_both), and gathering
 * to new rank 0 cost one more hop of the whole vector to the root. Any number
 * of ranks without MPICH's fold (halving_any.c), which sent the whole vector
 * through a working rank's link once more (allreduce/rabenseifner.c). */
#include "../internal.h"

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, rank;
    ct_size_rank(a, &size, &rank);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (a->count == 0) return MPI_SUCCESS;
    const void *in = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf;
    /* the root reduces in place in its receive buffer */
    char *buf = rank == a->root ? a->recvbuf : ct_sched_alloc(s, (size_t)bytes);
    char *tmp = ct_sched_alloc(s, (size_t)bytes);
    if (buf != in) ct_sched_copy(s, buf, in, bytes);
    ct_halving_level lev[32];
    int k = ct_rs_any(s, buf, tmp, a, lev);
    ct_gather_any(s, buf, a, lev, k, a->root);
    return MPI_SUCCESS;
}

const ct_algorithm ct_reduce_rabenseifner = {
    .id = 4, .name = "rabenseifner", .coll = CT_REDUCE,
    .description = "recursive-halving reduce-scatter + binomial gather (commutative ops)",
    .nparams = 0, .supports = ct_need_dense_commutative, .schedule = schedule,
};
