/* Rabenseifner allreduce: recursive-halving reduce-scatter + recursive-
 * doubling allgather. ~2m moved per rank: large vectors. Commutative ops only.
 *
 * Order of the steps: the reduce-scatter pairs ranks at distance 1, 2, 4, ...
 * (the largest exchange, half the vector, goes to the nearest rank) and the
 * allgather mirrors it (the nearest rank last, with the largest block). As in
 * MPICH's and SimGrid's rab_rdb. With block placement the nearest ranks share
 * a node, a switch or a router, so the big exchanges stay local and only the
 * small ones cross the network's narrower levels. The opposite order (distance
 * pof2/2 first) sent half the vector across the top level in step 1: on the
 * bundled dragonfly at 128 x 1 the 4 nodes of a router then shared one
 * router-to-router link in every cross-router step, with 512..32 KiB per flow,
 * 1082 us against 729 us for SimGrid's rab_rdb at 1 MiB
 * (benchmarks/rabenseifner_dragonfly.py).
 *
 * Any number of ranks without MPICH's fold (halving_any.c): the fold made the
 * 48 lanes of a 48x4 multileader allreduce move 2.94m through a node's link
 * instead of 1.96m. */
#include "../internal.h"

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size;
    MPI_Comm_size(a->comm, &size);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, a->recvbuf, a->sendbuf, bytes);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    char *tmp = ct_sched_alloc(s, (size_t)bytes);
    ct_halving_level lev[32];
    int k = ct_rs_any(s, a->recvbuf, tmp, a, lev);
    ct_ag_any(s, a->recvbuf, a, lev, k);
    return MPI_SUCCESS;
}

const ct_algorithm ct_allreduce_rabenseifner = {
    .id = 3, .name = "rabenseifner", .coll = CT_ALLREDUCE,
    .description = "recursive-halving reduce-scatter + recursive-doubling allgather (commutative ops)",
    .nparams = 0, .supports = ct_need_dense_commutative, .schedule = schedule,
};
