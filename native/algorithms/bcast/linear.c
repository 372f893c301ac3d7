/* Linear bcast: the root sends the whole buffer to every other rank. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, rank;
    ct_size_rank(a, &size, &rank);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    if (rank != a->root) ct_sched_recv(s, a->recvbuf, a->count, a->dtype, a->root);
    for (int r = 0; r < size && rank == a->root; r++)
        if (r != rank) ct_sched_send(s, a->recvbuf, a->count, a->dtype, r);
    return MPI_SUCCESS;
}

const ct_algorithm ct_bcast_linear = {
    .id = 1, .name = "linear", .coll = CT_BCAST,
    .description = "root sends the whole message to each rank (P-1 sends at the root)",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
