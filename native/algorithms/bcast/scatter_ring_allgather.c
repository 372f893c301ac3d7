/* Scatter + allgather bcast: the root's message is scattered in P pieces,
 * then every rank collects the others' pieces; each rank sends/receives about
 * 2m in total instead of m*log(P), good for large messages. */
#include "../internal.h"

static const char *supports(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    return r ? r : ct_need_bytes_fit(a, 1);
}

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    ct_bcast_scatter_allgather(s, a, ct_ring_pieces);
    return MPI_SUCCESS;
}

const ct_algorithm ct_bcast_scatter_ring_allgather = {
    .id = 6, .name = "scatter_ring_allgather", .coll = CT_BCAST,
    .description = "binomial scatter of P pieces, then ring allgather (MPICH/van de Geijn, large messages)",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
